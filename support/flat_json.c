/* The flat JSON object reader (see flat_json.h). */
#include "flat_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY 128

typedef struct parser {
  const char *at;
  char *error;
  size_t error_size;
  bool failed;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail(parser *p, const char *format, ...) {
  if (p->failed) return false;
  va_list args;
  va_start(args, format);
  vsnprintf(p->error, p->error_size, format, args);
  va_end(args);
  p->failed = true;
  return false;
}

static void skip_space(parser *p) {
  while (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r')
    ++p->at;
}

static bool expect(parser *p, char c) {
  skip_space(p);
  if (*p->at != c) return fail(p, "expected '%c' at \"%.12s\"", c, p->at);
  ++p->at;
  return true;
}

/* A string into out (bytes, NUL-terminated; NULL: only checked). Escapes
   other than \uXXXX above ASCII are decoded. */
static bool parse_string(parser *p, char *out, size_t bytes) {
  size_t length = 0;
  if (!expect(p, '"')) return false;
  for (;;) {
    char c = *p->at++;
    if (c == '"') break;
    if (c == '\0' || (unsigned char)c < 0x20)
      return fail(p, "unterminated string");
    if (c == '\\') {
      const char *escapes = "\"\\/bfnrt", *decoded = "\"\\/\b\f\n\r\t";
      const char *found = *p->at ? strchr(escapes, *p->at) : NULL;
      if (found) {
        c = decoded[found - escapes];
        ++p->at;
      } else if (*p->at == 'u') {
        char digits[5] = {0};
        for (int i = 0; i < 4 && p->at[1 + i]; ++i) digits[i] = p->at[1 + i];
        long code = strtol(digits, NULL, 16);
        if (strspn(digits, "0123456789abcdefABCDEF") != 4 || code >= 0x80)
          return fail(p, "unsupported escape \\u%s", digits);
        c = (char)code;
        p->at += 5;
      } else {
        return fail(p, "bad escape in a string");
      }
    }
    if (out && length + 1 >= bytes) return fail(p, "a key is too long");
    if (out) out[length++] = c;
  }
  if (out) out[length] = '\0';
  return true;
}

/* A number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool parse_number(parser *p, double *value) {
  const char *start = p->at, *c = p->at;
  if (*c == '-') ++c;
  if (*c == '0')
    ++c;
  else if (*c >= '1' && *c <= '9')
    while (*c >= '0' && *c <= '9') ++c;
  else
    return fail(p, "not a value at \"%.12s\"", start);
  if (*c == '.') {
    if (!(*++c >= '0' && *c <= '9')) return fail(p, "bad number");
    while (*c >= '0' && *c <= '9') ++c;
  }
  if (*c == 'e' || *c == 'E') {
    if (*++c == '+' || *c == '-') ++c;
    if (!(*c >= '0' && *c <= '9')) return fail(p, "bad number");
    while (*c >= '0' && *c <= '9') ++c;
  }
  *value = strtod(start, NULL);
  p->at = c;
  return true;
}

/* A scalar value; *is_number says whether it was a number. */
static bool parse_value(parser *p, double *number, bool *is_number) {
  static const char *const words[] = {"true", "false", "null"};
  skip_space(p);
  *is_number = false;
  if (*p->at == '"') return parse_string(p, NULL, 0);
  if (*p->at == '{' || *p->at == '[')
    return fail(p, "nested objects and arrays are not read");
  for (size_t i = 0; i < sizeof words / sizeof words[0]; ++i)
    if (strncmp(p->at, words[i], strlen(words[i])) == 0) {
      p->at += strlen(words[i]);
      return true;
    }
  *is_number = true;
  return parse_number(p, number);
}

bool flat_json_uint32(const char *document, const char *key, uint32_t *value,
                      char *error, size_t error_size) {
  parser p = {document, error, error_size, false};
  int found = 0;
  double number = 0;
  bool number_found = false;
  if (!expect(&p, '{')) return false;
  skip_space(&p);
  bool empty = *p.at == '}';
  while (!empty) {
    char name[MAX_KEY];
    double member = 0;
    bool is_number = false;
    if (!parse_string(&p, name, sizeof name) || !expect(&p, ':') ||
        !parse_value(&p, &member, &is_number))
      return false;
    if (strcmp(name, key) == 0) {
      ++found;
      number = member;
      number_found = is_number;
    }
    skip_space(&p);
    if (*p.at != ',') break;
    ++p.at;
  }
  if (!expect(&p, '}')) return false;
  skip_space(&p);
  if (*p.at) return fail(&p, "text after the object");
  if (found == 0) return fail(&p, "no \"%s\"", key);
  if (found > 1) return fail(&p, "\"%s\" appears %d times", key, found);
  /* In range first, so that the conversion is defined; then whole. */
  if (!number_found || number < 0 || number > UINT32_MAX ||
      (double)(uint32_t)number != number)
    return fail(&p, "\"%s\" is not a whole number in [0, %u]", key,
                (unsigned)UINT32_MAX);
  *value = (uint32_t)number;
  return true;
}
