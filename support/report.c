/* The output model and its text and JSON renderers (see report.h). */
#include "report.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum node_kind {
  OBJECT,
  ARRAY,
  STRING,
  INT,
  UINT,
  BOOL,
  NUMBER,
  NONE
} node_kind;

struct report {
  node_kind kind;
  char *key;     /* NULL inside an array */
  char *caption; /* containers, text form only */
  char *string;
  int64_t int_value;
  uint64_t uint_value;
  bool bool_value;
  double number;
  int decimals;
  report *first, *last, *next; /* members, in the order added */
};

/* A table's columns at most; a wider array of records prints as blocks. */
#define MAX_COLUMNS 32
/* Long enough for any scalar's text but a string, which is printed as is. */
#define SCALAR_TEXT 64

static void *allocate(size_t bytes) {
  void *memory = calloc(1, bytes);
  if (!memory) {
    fputs("clbt: out of memory while building the output\n", stderr);
    exit(1);
  }
  return memory;
}

static char *copy(const char *text) {
  if (!text) return NULL;
  size_t bytes = strlen(text) + 1;
  return memcpy(allocate(bytes), text, bytes);
}

static report *add(report *parent, const char *key, node_kind kind) {
  assert(parent && (parent->kind == OBJECT || parent->kind == ARRAY));
  assert((parent->kind == OBJECT) == (key != NULL));
  report *node = allocate(sizeof *node);
  node->kind = kind;
  node->key = copy(key);
  if (parent->last)
    parent->last->next = node;
  else
    parent->first = node;
  parent->last = node;
  return node;
}

report *report_create(void) {
  report *root = allocate(sizeof *root);
  root->kind = OBJECT;
  return root;
}

void report_free(report *root) {
  if (!root) return;
  for (report *member = root->first, *next; member; member = next) {
    next = member->next;
    report_free(member);
  }
  free(root->key);
  free(root->caption);
  free(root->string);
  free(root);
}

report *report_object(report *parent, const char *key) {
  return add(parent, key, OBJECT);
}

report *report_array(report *parent, const char *key) {
  return add(parent, key, ARRAY);
}

void report_caption(report *container, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int length = vsnprintf(NULL, 0, format, args);
  va_end(args);
  assert(length >= 0);
  free(container->caption);
  container->caption = allocate((size_t)length + 1);
  va_start(args, format);
  vsnprintf(container->caption, (size_t)length + 1, format, args);
  va_end(args);
}

void report_string(report *parent, const char *key, const char *value) {
  add(parent, key, value ? STRING : NONE)->string = copy(value);
}

void report_int(report *parent, const char *key, int64_t value) {
  add(parent, key, INT)->int_value = value;
}

void report_uint(report *parent, const char *key, uint64_t value) {
  add(parent, key, UINT)->uint_value = value;
}

void report_bool(report *parent, const char *key, bool value) {
  add(parent, key, BOOL)->bool_value = value;
}

void report_number(report *parent, const char *key, double value,
                   int decimals) {
  report *node = add(parent, key, NUMBER);
  node->number = value;
  node->decimals = decimals;
}

static bool is_container(const report *node) {
  return node->kind == OBJECT || node->kind == ARRAY;
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_string(FILE *out, const char *text) {
  fputc('"', out);
  for (const unsigned char *c = (const unsigned char *)text; *c; ++c) {
    if (*c == '"' || *c == '\\')
      fprintf(out, "\\%c", *c);
    else if (*c == '\n')
      fputs("\\n", out);
    else if (*c == '\t')
      fputs("\\t", out);
    else if (*c < 0x20)
      fprintf(out, "\\u%04x", *c);
    else
      fputc(*c, out);
  }
  fputc('"', out);
}

static void json_value(const report *node, FILE *out, int depth) {
  switch (node->kind) {
    case OBJECT:
    case ARRAY:
      fputc(node->kind == OBJECT ? '{' : '[', out);
      for (const report *m = node->first; m; m = m->next) {
        fprintf(out, "%s\n%*s", m == node->first ? "" : ",", 2 * (depth + 1),
                "");
        if (m->key) {
          json_string(out, m->key);
          fputs(": ", out);
        }
        json_value(m, out, depth + 1);
      }
      if (node->first) fprintf(out, "\n%*s", 2 * depth, "");
      fputc(node->kind == OBJECT ? '}' : ']', out);
      break;
    case STRING:
      json_string(out, node->string);
      break;
    case INT:
      fprintf(out, "%" PRId64, node->int_value);
      break;
    case UINT:
      fprintf(out, "%" PRIu64, node->uint_value);
      break;
    case BOOL:
      fputs(node->bool_value ? "true" : "false", out);
      break;
    case NUMBER:
      if (isfinite(node->number))
        fprintf(out, "%.15g", node->number);
      else
        fputs("null", out);
      break;
    case NONE:
      fputs("null", out);
      break;
  }
}

void report_write_json(const report *root, FILE *out) {
  json_value(root, out, 0);
  fputc('\n', out);
}

/* ---- text ---------------------------------------------------------------- */

/* A scalar as text: a string as it is, anything else into buffer. */
static const char *scalar_text(const report *node, char buffer[SCALAR_TEXT]) {
  switch (node->kind) {
    case STRING:
      return node->string;
    case INT:
      snprintf(buffer, SCALAR_TEXT, "%" PRId64, node->int_value);
      break;
    case UINT:
      snprintf(buffer, SCALAR_TEXT, "%" PRIu64, node->uint_value);
      break;
    case BOOL:
      return node->bool_value ? "yes" : "no";
    case NUMBER:
      if (!isfinite(node->number)) return "-";
      snprintf(buffer, SCALAR_TEXT, "%.*f", node->decimals, node->number);
      break;
    default:
      return "-";
  }
  return buffer;
}

static bool is_numeric(const report *node) {
  return node->kind == INT || node->kind == UINT || node->kind == NUMBER;
}

/* The keys of an array of flat objects, in order of first appearance; 0
   when the array is not a table (empty, or an element is not flat). */
static size_t table_columns(const report *array, const char *columns[]) {
  size_t count = 0;
  for (const report *row = array->first; row; row = row->next) {
    if (row->kind != OBJECT) return 0;
    for (const report *cell = row->first; cell; cell = cell->next) {
      if (is_container(cell)) return 0;
      size_t c = 0;
      while (c < count && strcmp(columns[c], cell->key) != 0) ++c;
      if (c == count && count == MAX_COLUMNS) return 0;
      if (c == count) columns[count++] = cell->key;
    }
  }
  return count;
}

static const report *find_cell(const report *row, const char *key) {
  for (const report *cell = row->first; cell; cell = cell->next)
    if (strcmp(cell->key, key) == 0) return cell;
  return NULL;
}

/* Prints one cell padded to width (right-aligned numbers), no padding at
   the end of a line. */
static void text_cell(FILE *out, const char *text, size_t width, bool right,
                      bool last) {
  int pad = (int)(width - strlen(text));
  if (right)
    fprintf(out, "%*s%s", pad, "", text);
  else
    fprintf(out, "%s%*s", text, last ? 0 : pad, "");
  fputs(last ? "\n" : "  ", out);
}

static void text_table(const report *array, const char *columns[], size_t count,
                       FILE *out, int indent) {
  size_t widths[MAX_COLUMNS];
  bool right[MAX_COLUMNS];
  char buffer[SCALAR_TEXT];
  for (size_t c = 0; c < count; ++c) {
    widths[c] = strlen(columns[c]);
    right[c] = true;
    for (const report *row = array->first; row; row = row->next) {
      const report *cell = find_cell(row, columns[c]);
      const char *text = cell ? scalar_text(cell, buffer) : "-";
      if (strlen(text) > widths[c]) widths[c] = strlen(text);
      if (cell && !is_numeric(cell)) right[c] = false;
    }
  }
  fprintf(out, "%*s", indent, "");
  for (size_t c = 0; c < count; ++c)
    text_cell(out, columns[c], widths[c], right[c], c + 1 == count);
  for (const report *row = array->first; row; row = row->next) {
    fprintf(out, "%*s", indent, "");
    for (size_t c = 0; c < count; ++c) {
      const report *cell = find_cell(row, columns[c]);
      text_cell(out, cell ? scalar_text(cell, buffer) : "-", widths[c],
                right[c], c + 1 == count);
    }
  }
}

static void text_content(const report *node, FILE *out, int indent);

/* Whether a container has no member that text shows (none, or only
   nulls). */
static bool shows_nothing(const report *container) {
  for (const report *m = container->first; m; m = m->next)
    if (m->kind != NONE) return false;
  return true;
}

static void text_members(const report *object, FILE *out, int indent) {
  int width = 0;
  for (const report *m = object->first; m; m = m->next)
    if (!is_container(m) && m->kind != NONE && (int)strlen(m->key) > width)
      width = (int)strlen(m->key);
  char buffer[SCALAR_TEXT];
  for (const report *m = object->first; m; m = m->next) {
    if (m->kind == NONE) continue;
    if (!is_container(m)) {
      fprintf(out, "%*s%-*s  %s\n", indent, "", width, m->key,
              scalar_text(m, buffer));
      continue;
    }
    fprintf(out, "%*s%s%s%s\n", indent, "", m->key, m->caption ? ": " : "",
            m->caption ? m->caption : "");
    if (shows_nothing(m))
      fprintf(out, "%*snone\n", indent + 2, "");
    else
      text_content(m, out, indent + 2);
  }
}

static void text_content(const report *node, FILE *out, int indent) {
  const char *columns[MAX_COLUMNS];
  size_t count = node->kind == ARRAY ? table_columns(node, columns) : 0;
  char buffer[SCALAR_TEXT];
  if (node->kind == OBJECT)
    text_members(node, out, indent);
  else if (count)
    text_table(node, columns, count, out, indent);
  else
    for (const report *item = node->first; item; item = item->next)
      if (is_container(item))
        text_content(item, out, indent);
      else
        fprintf(out, "%*s%s\n", indent, "", scalar_text(item, buffer));
}

void report_write_text(const report *root, FILE *out) {
  text_content(root, out, 0);
}
