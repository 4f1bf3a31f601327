/* The version (src/version.c): the library, the header and CMake agree. */
#include "clbt_test.h"

#include <stdio.h>

/* CMake's project version, passed in by tests/CMakeLists.txt. */
#ifndef CLBT_TEST_PROJECT_VERSION
#error "CLBT_TEST_PROJECT_VERSION is not defined"
#endif

START_TEST(string_is_the_project_version) {
  ck_assert_str_eq(clbt_version_string(), CLBT_TEST_PROJECT_VERSION);
  ck_assert_str_eq(CLBT_VERSION_STRING, CLBT_TEST_PROJECT_VERSION);
}
END_TEST

START_TEST(number_encodes_the_parts) {
  unsigned major = 0, minor = 0, patch = 0;
  ck_assert_int_eq(sscanf(CLBT_TEST_PROJECT_VERSION, "%u.%u.%u", &major,
                          &minor, &patch),
                   3);
  ck_assert_uint_eq(clbt_version_number(), major * 10000 + minor * 100 + patch);
  ck_assert_uint_eq(CLBT_VERSION_NUMBER, clbt_version_number());
}
END_TEST

int main(void) {
  Suite *suite = suite_create("version");
  TCase *tc = tcase_create("version");
  tcase_add_test(tc, string_is_the_project_version);
  tcase_add_test(tc, number_encodes_the_parts);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
