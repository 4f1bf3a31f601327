/* The output model's renderers (support/report.c), byte for byte: the JSON
   form as JSON's grammar has it, the text form as report.h's rules say. */
#include <math.h>
#include <stdio.h>

#include "clbt_test.h"
#include "report.h"

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
  report *root = report_create();
  report_write_json(root, out);
  report_write_text(root, out);
  report_free(root);
  ck_assert_str_eq(written(), "{}\n");
}
END_TEST

static report *scalars(void) {
  report *root = report_create();
  report_string(root, "name", "pocl");
  report_string(root, "missing", NULL);
  report_int(root, "pad", -1);
  report_uint(root, "big", UINT64_MAX);
  report_number(root, "ms", 812.3, 1);
  report_number(root, "nan", NAN, 2);
  report_bool(root, "yes", true);
  report_bool(root, "no", false);
  return root;
}

START_TEST(json_scalars_and_commas) {
  report *root = scalars();
  report_write_json(root, out);
  report_free(root);
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

/* Keys aligned, the null member left out, a number with its decimals. */
START_TEST(text_scalars) {
  report *root = scalars();
  report_write_text(root, out);
  report_free(root);
  ck_assert_str_eq(written(),
                   "name  pocl\n"
                   "pad   -1\n"
                   "big   18446744073709551615\n"
                   "ms    812.3\n"
                   "nan   -\n"
                   "yes   yes\n"
                   "no    no\n");
}
END_TEST

static report *nested(void) {
  report *root = report_create();
  report *groups = report_array(root, "groups");
  report_caption(groups, "%d of them", 3);
  report_uint(report_object(groups, NULL), "block_size", 16);
  report_uint(groups, NULL, 2);
  report_array(groups, NULL);
  report_object(root, "empty");
  return root;
}

START_TEST(json_nesting) {
  report *root = nested();
  report_write_json(root, out);
  report_free(root);
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

/* A mixed array is not a table: each item in turn, indented; an empty
   member says "none" under its key. */
START_TEST(text_nesting) {
  report *root = nested();
  report_write_text(root, out);
  report_free(root);
  ck_assert_str_eq(written(),
                   "groups: 3 of them\n"
                   "  block_size  16\n"
                   "  2\n"
                   "empty\n"
                   "  none\n");
}
END_TEST

/* Flat records are a table: numbers to the right, text to the left, a
   missing cell "-", no space at the end of a line. */
START_TEST(text_table) {
  report *root = report_create();
  report *rows = report_array(root, "rows");
  report *first = report_object(rows, NULL);
  report_string(first, "name", "decode-1");
  report_number(first, "us", 12.25, 2);
  report_string(first, "note", "ok");
  report *second = report_object(rows, NULL);
  report_string(second, "name", "a");
  report_number(second, "us", 1234.5, 2);
  report_write_text(root, out);
  report_free(root);
  ck_assert_str_eq(written(),
                   "rows\n"
                   "  name           us  note\n"
                   "  decode-1    12.25  ok\n"
                   "  a         1234.50  -\n");
}
END_TEST

/* A member whose members are all null (clbt info's settings when none is
   set) is no empty heading: "none" stands under its key, as under an
   array with a caption and no rows. */
START_TEST(text_nothing_to_show) {
  report *root = report_create();
  report *device = report_object(root, "device");
  report_string(device, "name", "pocl");
  report *settings = report_object(device, "settings");
  report_string(settings, "build_options", NULL);
  report_string(settings, "cache_dir", NULL);
  report_caption(report_array(root, "targets"), "none measured");
  report_write_text(root, out);
  report_free(root);
  ck_assert_str_eq(written(),
                   "device\n"
                   "  name  pocl\n"
                   "  settings\n"
                   "    none\n"
                   "targets: none measured\n"
                   "  none\n");
}
END_TEST

START_TEST(strings_are_escaped) {
  report *root = report_create();
  report_string(root, "q\"k",
                "a\"b\\c\nd\te\x01"
                "f/\xc3\xa9");
  report_write_json(root, out);
  report_free(root);
  ck_assert_str_eq(written(),
                   "{\n"
                   "  \"q\\\"k\": \"a\\\"b\\\\c\\nd\\te\\u0001f/\xc3\xa9\"\n"
                   "}\n");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, empty_document);
  tcase_add_test(tc, json_scalars_and_commas);
  tcase_add_test(tc, text_scalars);
  tcase_add_test(tc, json_nesting);
  tcase_add_test(tc, text_nesting);
  tcase_add_test(tc, text_table);
  tcase_add_test(tc, text_nothing_to_show);
  tcase_add_test(tc, strings_are_escaped);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
