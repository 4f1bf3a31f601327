/* The clbt tool's JSON writer (see json.h). */
#include "json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>

static void write_string(FILE *out, const char *text) {
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

/* Writes what precedes a value: a comma, the indent and the key. */
static void start_value(clbt_json *json, const char *key) {
  assert(json->depth > 0);
  bool *has_members = &json->has_members[json->depth - 1];
  fprintf(json->out, "%s\n%*s", *has_members ? "," : "", 2 * json->depth, "");
  *has_members = true;
  if (key) {
    write_string(json->out, key);
    fputs(": ", json->out);
  }
}

static void open_container(clbt_json *json, const char *key, char bracket) {
  if (json->depth > 0) start_value(json, key);
  assert(json->depth < CLBT_JSON_MAX_DEPTH);
  fputc(bracket, json->out);
  json->has_members[json->depth++] = false;
}

static void close_container(clbt_json *json, char bracket) {
  assert(json->depth > 0);
  --json->depth;
  if (json->has_members[json->depth])
    fprintf(json->out, "\n%*s", 2 * json->depth, "");
  fputc(bracket, json->out);
}

void clbt_json_begin(clbt_json *json, FILE *out) {
  json->out = out;
  json->depth = 0;
  open_container(json, NULL, '{');
}

void clbt_json_end(clbt_json *json) {
  close_container(json, '}');
  assert(json->depth == 0);
  fputc('\n', json->out);
}

void clbt_json_object_begin(clbt_json *json, const char *key) {
  open_container(json, key, '{');
}

void clbt_json_object_end(clbt_json *json) { close_container(json, '}'); }

void clbt_json_array_begin(clbt_json *json, const char *key) {
  open_container(json, key, '[');
}

void clbt_json_array_end(clbt_json *json) { close_container(json, ']'); }

void clbt_json_string(clbt_json *json, const char *key, const char *value) {
  start_value(json, key);
  if (value)
    write_string(json->out, value);
  else
    fputs("null", json->out);
}

void clbt_json_int(clbt_json *json, const char *key, int64_t value) {
  start_value(json, key);
  fprintf(json->out, "%" PRId64, value);
}

void clbt_json_uint(clbt_json *json, const char *key, uint64_t value) {
  start_value(json, key);
  fprintf(json->out, "%" PRIu64, value);
}

void clbt_json_double(clbt_json *json, const char *key, double value) {
  start_value(json, key);
  if (isfinite(value))
    fprintf(json->out, "%.15g", value);
  else
    fputs("null", json->out);
}

void clbt_json_bool(clbt_json *json, const char *key, bool value) {
  start_value(json, key);
  fputs(value ? "true" : "false", json->out);
}
