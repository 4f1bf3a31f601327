/*
 * A small JSON writer for the clbt tool's --json output, shared by every
 * command that has one (devices, info, bench). It streams one document to a
 * FILE, two-space indented, and takes care of commas, nesting and string
 * escapes, so a command only says what to write:
 *
 *   clbt_json json;
 *   clbt_json_begin(&json, stdout);           // opens the top-level object
 *   clbt_json_string(&json, "version", "0.1.0");
 *   clbt_json_array_begin(&json, "groups");
 *   clbt_json_uint(&json, NULL, 16);          // NULL key inside arrays
 *   clbt_json_array_end(&json);
 *   clbt_json_end(&json);                     // closes it, adds a newline
 *
 * Keys are written as given (escaped); inside an object every value needs
 * a key, inside an array none may have one.
 */
#ifndef CLBT_TOOL_JSON_H
#define CLBT_TOOL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Deeper nesting than this is a programming error (assert). */
#define CLBT_JSON_MAX_DEPTH 16

typedef struct clbt_json {
  FILE *out;
  int depth;                            /* open containers */
  bool has_members[CLBT_JSON_MAX_DEPTH]; /* per container: comma needed */
} clbt_json;

/* Starts a document on out and opens its top-level object. */
void clbt_json_begin(clbt_json *json, FILE *out);
/* Closes the top-level object and ends the line. */
void clbt_json_end(clbt_json *json);

void clbt_json_object_begin(clbt_json *json, const char *key);
void clbt_json_object_end(clbt_json *json);
void clbt_json_array_begin(clbt_json *json, const char *key);
void clbt_json_array_end(clbt_json *json);

/* A string, or null when value is NULL. */
void clbt_json_string(clbt_json *json, const char *key, const char *value);
void clbt_json_int(clbt_json *json, const char *key, int64_t value);
void clbt_json_uint(clbt_json *json, const char *key, uint64_t value);
/* A number with 15 significant digits (812.3 stays 812.3); null when not
   finite. */
void clbt_json_double(clbt_json *json, const char *key, double value);
void clbt_json_bool(clbt_json *json, const char *key, bool value);

#endif /* CLBT_TOOL_JSON_H */
