/*
 * The clbt tool's output model: a command builds one report, a tree of
 * named values, and hands it to one renderer, as text or as JSON. A new
 * output format is one more renderer here; no command changes.
 *
 *   report *root = report_create();
 *   report_string(root, "version", "0.1.0");
 *   report *groups = report_array(root, "groups");
 *   report_uint(report_object(groups, NULL), "block_size", 16);
 *   report_write_json(root, stdout);   // or report_write_text
 *   report_free(root);
 *
 * Inside an object every member has a key; inside an array none has. The
 * text form uses the same keys as the JSON form:
 *   - a scalar member is "key  value", keys aligned within their object;
 *   - an object or array member is its key (and caption) on a line of its
 *     own, its content indented by two spaces below;
 *   - an array of objects that hold only scalars is a table: a header of
 *     keys, a row per object;
 *   - a null member is left out (JSON writes null), and a container
 *     member with nothing else to show has "none" below its key, so that
 *     no heading stands empty.
 * Numbers made with report_number keep their decimals in text and 15
 * significant digits in JSON. Running out of memory ends the process with
 * a message: the report is the tool's last step, nothing is left to save.
 */
#ifndef SUPPORT_REPORT_H
#define SUPPORT_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct report report;

/* An empty top-level object. */
report *report_create(void);
/* Frees a whole tree; NULL is fine. */
void report_free(report *root);

/* Containers: key is NULL inside an array. Returns the new container. */
report *report_object(report *parent, const char *key);
report *report_array(report *parent, const char *key);
/* A line of text shown after a container's key in text form only. */
void report_caption(report *container, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Scalars. A NULL string is null. */
void report_string(report *parent, const char *key, const char *value);
void report_int(report *parent, const char *key, int64_t value);
void report_uint(report *parent, const char *key, uint64_t value);
void report_bool(report *parent, const char *key, bool value);
/* A measured value: decimals in text; null when it is not finite. */
void report_number(report *parent, const char *key, double value,
                   int decimals);

/* The whole tree as one JSON object, two-space indented, and a newline. */
void report_write_json(const report *root, FILE *out);
/* The whole tree as text (see above). */
void report_write_text(const report *root, FILE *out);

#endif /* SUPPORT_REPORT_H */
