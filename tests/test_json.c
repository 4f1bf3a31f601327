/* The clbt tool's JSON writer (tools/json.c), byte for byte. */
#include "clbt_test.h"
#include "json.h"

#include <math.h>
#include <stdio.h>

static FILE *out;

/* What was written to out since setup, NUL-terminated. */
static const char *written(void) {
  static char text[4096];
  long length = ftell(out);
  ck_assert_int_ge(length, 0);
  ck_assert_int_lt(length, (long)sizeof text);
  rewind(out);
  ck_assert_uint_eq(fread(text, 1, (size_t)length, out), (size_t)length);
  text[length] = '\0';
  return text;
}

static void setup(void) {
  out = tmpfile();
  ck_assert_ptr_nonnull(out);
}

static void teardown(void) { fclose(out); }

START_TEST(empty_document) {
  clbt_json json;
  clbt_json_begin(&json, out);
  clbt_json_end(&json);
  ck_assert_str_eq(written(), "{}\n");
}
END_TEST

START_TEST(scalars_and_commas) {
  clbt_json json;
  clbt_json_begin(&json, out);
  clbt_json_string(&json, "name", "pocl");
  clbt_json_string(&json, "missing", NULL);
  clbt_json_int(&json, "pad", -1);
  clbt_json_uint(&json, "big", UINT64_MAX);
  clbt_json_double(&json, "ms", 812.3);
  clbt_json_double(&json, "nan", NAN);
  clbt_json_bool(&json, "yes", true);
  clbt_json_bool(&json, "no", false);
  clbt_json_end(&json);
  ck_assert_str_eq(written(),
                   "{\n"
                   "  \"name\": \"pocl\",\n"
                   "  \"missing\": null,\n"
                   "  \"pad\": -1,\n"
                   "  \"big\": 18446744073709551615,\n"
                   "  \"ms\": 812.3,\n"
                   "  \"nan\": null,\n"
                   "  \"yes\": true,\n"
                   "  \"no\": false\n"
                   "}\n");
}
END_TEST

START_TEST(nesting) {
  clbt_json json;
  clbt_json_begin(&json, out);
  clbt_json_array_begin(&json, "groups");
  clbt_json_object_begin(&json, NULL);
  clbt_json_uint(&json, "block_size", 16);
  clbt_json_object_end(&json);
  clbt_json_uint(&json, NULL, 2);
  clbt_json_array_begin(&json, NULL);
  clbt_json_array_end(&json);
  clbt_json_array_end(&json);
  clbt_json_object_begin(&json, "empty");
  clbt_json_object_end(&json);
  clbt_json_end(&json);
  ck_assert_str_eq(written(),
                   "{\n"
                   "  \"groups\": [\n"
                   "    {\n"
                   "      \"block_size\": 16\n"
                   "    },\n"
                   "    2,\n"
                   "    []\n"
                   "  ],\n"
                   "  \"empty\": {}\n"
                   "}\n");
}
END_TEST

START_TEST(strings_are_escaped) {
  clbt_json json;
  clbt_json_begin(&json, out);
  clbt_json_string(&json, "q\"k", "a\"b\\c\nd\te\x01" "f/\xc3\xa9");
  clbt_json_end(&json);
  ck_assert_str_eq(written(),
                   "{\n"
                   "  \"q\\\"k\": \"a\\\"b\\\\c\\nd\\te\\u0001f/\xc3\xa9\"\n"
                   "}\n");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("json");
  TCase *tc = tcase_create("json");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, empty_document);
  tcase_add_test(tc, scalars_and_commas);
  tcase_add_test(tc, nesting);
  tcase_add_test(tc, strings_are_escaped);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
