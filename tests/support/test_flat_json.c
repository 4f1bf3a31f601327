/* The flat JSON reader (support/flat_json.c) on what Python's json.dump
   writes, and on what it must refuse. */
#include "clbt_test.h"
#include "flat_json.h"

/* As json.dump(meta, f, indent=1) writes a shape's meta.json. */
static const char meta[] =
    "{\n \"name\": \"decode-\\\"1\\u0021\",\n \"num_reqs\": 1,\n"
    " \"num_tokens\": 1e1,\n \"kernel_us\": 5.41,\n \"ok\": true,\n"
    " \"none\": null,\n \"neg\": -3\n}";

static uint32_t read_ok(const char *document, const char *key) {
  uint32_t value = 12345;
  char error[128] = "";
  ck_assert_msg(flat_json_uint32(document, key, &value, error, sizeof error),
                "%s: %s", key, error);
  return value;
}

static void read_fails(const char *document, const char *key,
                       const char *words) {
  uint32_t value = 12345;
  char error[128] = "";
  ck_assert(!flat_json_uint32(document, key, &value, error, sizeof error));
  ck_assert_uint_eq(value, 12345);
  ck_assert_msg(strstr(error, words), "'%s' does not say '%s'", error, words);
}

START_TEST(reads_whole_numbers) {
  ck_assert_uint_eq(read_ok(meta, "num_reqs"), 1);
  ck_assert_uint_eq(read_ok(meta, "num_tokens"), 10);
  ck_assert_uint_eq(read_ok("{\"a\":4294967295}", "a"), 4294967295u);
}
END_TEST

START_TEST(refuses_other_values) {
  read_fails(meta, "kernel_us", "not a whole number");
  read_fails(meta, "neg", "not a whole number");
  read_fails(meta, "name", "not a whole number");
  read_fails(meta, "ok", "not a whole number");
  read_fails(meta, "none", "not a whole number");
  read_fails(meta, "missing", "no \"missing\"");
  read_fails("{\"a\":4294967296}", "a", "not a whole number");
  read_fails("{\"a\":1,\"a\":2}", "a", "appears 2 times");
}
END_TEST

/* A key inside a string, a truncated file, nesting: errors, not values. */
START_TEST(refuses_what_is_not_a_flat_object) {
  read_fails("{\"b\": \"\\\"a\\\": 7\"}", "a", "no \"a\"");
  read_fails("{\"a\": 7", "a", "expected '}'");
  read_fails("{\"a\": 7,}", "a", "expected '\"'");
  read_fails("{\"a\": 07}", "a", "expected '}'");
  read_fails("{\"a\": 1} x", "a", "text after the object");
  read_fails("{\"a\": [1]}", "a", "nested");
  read_fails("{\"a\": {\"b\": 1}}", "a", "nested");
  read_fails("{\"a\": \"\\u00e9\"}", "a", "unsupported escape");
  read_fails("[1]", "a", "expected '{'");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("flat_json");
  TCase *tc = tcase_create("flat_json");
  tcase_add_test(tc, reads_whole_numbers);
  tcase_add_test(tc, refuses_other_values);
  tcase_add_test(tc, refuses_what_is_not_a_flat_object);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
