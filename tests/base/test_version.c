/*
 * The version (src/base/version.c), against rules written down outside the
 * code: the number encodes the string's parts as the header documents
 * (major * 10000 + minor * 100 + patch), and the shared library this test
 * loaded carries the soname the version implies (docs/design.md: from 0.5
 * on, the major version alone, libclbt.so.0; 0.4 was libclbt.so.0.4).
 * The test links libclbt.so, not libclbt.a, for the second check.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "clbt_test.h"

#include <link.h>
#include <stdio.h>
#include <string.h>

static unsigned major, minor, patch;

static void read_version(void) {
  char rest = '\0';
  ck_assert_int_eq(sscanf(clbt_version_string(), "%u.%u.%u%c", &major, &minor,
                          &patch, &rest),
                   3);
}

START_TEST(number_encodes_the_string) {
  read_version();
  ck_assert_uint_lt(minor, 100);
  ck_assert_uint_lt(patch, 100);
  ck_assert_uint_eq(clbt_version_number(), major * 10000 + minor * 100 + patch);
}
END_TEST

/* The file names of the loaded objects named libclbt.so*. */
typedef struct loaded {
  int count;
  char first[256];
} loaded;

static int find_clbt(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  loaded *found = data;
  const char *slash = strrchr(info->dlpi_name, '/');
  const char *file = slash ? slash + 1 : info->dlpi_name;
  if (strncmp(file, "libclbt.so", strlen("libclbt.so")) == 0 &&
      found->count++ == 0)
    snprintf(found->first, sizeof found->first, "%s", file);
  return 0;
}

START_TEST(soname_follows_the_version) {
  read_version();
  char expected[64];
  snprintf(expected, sizeof expected, "libclbt.so.%u", major);
  loaded found = {0, ""};
  dl_iterate_phdr(find_clbt, &found);
  ck_assert_int_eq(found.count, 1);
  ck_assert_str_eq(found.first, expected);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("version");
  TCase *tc = tcase_create("version");
  tcase_add_test(tc, number_encodes_the_string);
  tcase_add_test(tc, soname_follows_the_version);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
