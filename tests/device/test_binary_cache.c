/*
 * The on-disk program cache (src/device/binary_cache.c): entries are written once
 * and loaded by later device handles; damaged or foreign entries are
 * deleted and rebuilt; an unusable directory costs nothing but the cache.
 * Each test uses a directory of its own under /tmp.
 */
#include "clbt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MESSAGES 32

static char directory[256];
static int message_count;
static clbt_log_level levels[MAX_MESSAGES];
static char texts[MAX_MESSAGES][1024];

static void capture(clbt_log_level level, const char *message, void *user) {
  (void)user;
  if (message_count < MAX_MESSAGES) {
    levels[message_count] = level;
    snprintf(texts[message_count], sizeof texts[0], "%s", message);
  }
  ++message_count;
}

/* How many captured messages of level contain words. */
static int count_logged(clbt_log_level level, const char *words) {
  int count = 0;
  for (int i = 0; i < message_count && i < MAX_MESSAGES; ++i)
    if (levels[i] == level && strstr(texts[i], words)) ++count;
  return count;
}

static bool logged(clbt_log_level level, const char *words) {
  return count_logged(level, words) > 0;
}

static void setup(void) {
  snprintf(directory, sizeof directory, "/tmp/clbt-cache-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(directory));
  setenv("CLBT_CACHE_DIR", directory, 1);
  clbt_log_set_callback(capture, NULL);
  clbt_assert_ok(clbt_log_set_level(CLBT_LOG_DEBUG));
}

static void teardown(void) {
  clbt_log_set_callback(NULL, NULL);
  unsetenv("CLBT_CACHE_DIR");
  unsetenv("CLBT_BUILD_OPTIONS");
  clbt_test_remove_tree(directory);
}

static long file_size(const char *path) {
  struct stat info;
  ck_assert_int_eq(stat(path, &info), 0);
  return (long)info.st_size;
}

static const clbt_table_config config = {.block_size = 16,
                                         .max_num_reqs = 2,
                                         .max_num_blocks_per_req = 4,
                                         .max_num_batched_tokens = 6};

static cl_mem buffer_holding(clbt_device *device, size_t bytes,
                             const void *data) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(clbt_device_context(device),
                                 CL_MEM_READ_ONLY, bytes, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueWriteBuffer(clbt_device_queue(device), buffer,
                                        CL_TRUE, 0, bytes, data, 0, NULL, NULL),
                   CL_SUCCESS);
  return buffer;
}

/*
 * Prepares the config on a new device handle (so the handle's own program
 * list is empty) and checks that the kernel maps a batch right. Row 0 holds
 * blocks 3 and 7; positions 0, 1, 17 and 31 fall in blocks 3, 3, 7, 7 at
 * offsets 0, 1, 1, 15: slots 48, 49, 113, 127, then two pad slots.
 */
static void prepare_and_check(void) {
  clbt_device *device = NULL;
  clbt_table *table = NULL;
  message_count = 0;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_assert_ok(clbt_table_prepare(device, &config));
  clbt_assert_ok(clbt_table_create(device, &config, &table));
  const int32_t blocks[] = {3, 7};
  const int32_t query_start_loc[] = {0, 4};
  const int64_t positions[] = {0, 1, 17, 31};
  const int64_t expected[] = {48, 49, 113, 127, -1, -1};
  clbt_assert_ok(clbt_table_append_row(table, 0, blocks, 2));
  clbt_assert_ok(clbt_table_commit(table, 1));
  cl_mem starts =
      buffer_holding(device, sizeof query_start_loc, query_start_loc);
  cl_mem tokens = buffer_holding(device, sizeof positions, positions);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, starts, tokens, 4));
  int64_t slots[6];
  ck_assert_int_eq(clEnqueueReadBuffer(clbt_device_queue(device),
                                       clbt_table_slot_mapping(table), CL_TRUE,
                                       0, sizeof slots, slots, 0, NULL, NULL),
                   CL_SUCCESS);
  for (int i = 0; i < 6; ++i) ck_assert_int_eq(slots[i], expected[i]);
  clReleaseMemObject(starts);
  clReleaseMemObject(tokens);
  clbt_table_destroy(table);
  clbt_device_release(device);
}

START_TEST(first_build_stores_later_ones_load) {
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
  char entry[1024] = "";
  ck_assert_int_eq(clbt_test_count_files(directory, entry, sizeof entry), 1);
  ck_assert_ptr_nonnull(strstr(entry, ".clbin"));
  ck_assert(logged(CLBT_LOG_DEBUG, entry));
  long size = file_size(entry);
  prepare_and_check();
  char loaded[1200];
  snprintf(loaded, sizeof loaded, "built a program from cache entry %s", entry);
  ck_assert_msg(logged(CLBT_LOG_DEBUG, loaded), "no message says '%s'",
                loaded);
  ck_assert(!logged(CLBT_LOG_DEBUG, "from source"));
  ck_assert_int_eq(clbt_test_count_files(directory, NULL, 0), 1);
  ck_assert_int_eq(file_size(entry), size);
}
END_TEST

/* Stores an entry, lets damage() change it, and checks the rebuild. */
static void check_rebuild(void (*damage)(const char *path, long size),
                          const char *problem) {
  prepare_and_check();
  char entry[1024] = "";
  ck_assert_int_eq(clbt_test_count_files(directory, entry, sizeof entry), 1);
  long size = file_size(entry);
  damage(entry, size);
  prepare_and_check();
  ck_assert_msg(logged(CLBT_LOG_WARN, problem), "no warning says '%s'",
                problem);
  ck_assert(logged(CLBT_LOG_WARN, "deleted it; building from source"));
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
  ck_assert_int_eq(file_size(entry), size);
  prepare_and_check();
  ck_assert_int_eq(count_logged(CLBT_LOG_DEBUG, "built a program from cache "
                                                "entry"),
                   1);
  ck_assert_int_eq(count_logged(CLBT_LOG_WARN, ""), 0);
}

static void truncate_to_half(const char *path, long size) {
  ck_assert_int_eq(truncate(path, size / 2), 0);
}

static void flip_a_middle_byte(const char *path, long size) {
  FILE *file = fopen(path, "r+b");
  ck_assert_ptr_nonnull(file);
  ck_assert_int_eq(fseek(file, size / 2, SEEK_SET), 0);
  int byte = fgetc(file);
  ck_assert_int_ne(byte, EOF);
  ck_assert_int_eq(fseek(file, size / 2, SEEK_SET), 0);
  ck_assert_int_ne(fputc(byte ^ 0x40, file), EOF);
  ck_assert_int_eq(fclose(file), 0);
}

static void overwrite_the_start(const char *path, long size) {
  (void)size;
  FILE *file = fopen(path, "r+b");
  ck_assert_ptr_nonnull(file);
  ck_assert_int_ge(fputs("not an entry", file), 0);
  ck_assert_int_eq(fclose(file), 0);
}

static void append_a_byte(const char *path, long size) {
  (void)size;
  FILE *file = fopen(path, "ab");
  ck_assert_ptr_nonnull(file);
  ck_assert_int_ne(fputc('x', file), EOF);
  ck_assert_int_eq(fclose(file), 0);
}

static void empty_it(const char *path, long size) {
  (void)size;
  ck_assert_int_eq(truncate(path, 0), 0);
}

START_TEST(truncated_entry_is_rebuilt) {
  check_rebuild(truncate_to_half, "truncated: fewer than the");
}
END_TEST

START_TEST(damaged_binary_is_rebuilt) {
  check_rebuild(flip_a_middle_byte, "checksum mismatch");
}
END_TEST

START_TEST(foreign_file_is_rebuilt) {
  check_rebuild(overwrite_the_start, "not a clbt program cache entry");
}
END_TEST

START_TEST(longer_entry_is_rebuilt) {
  check_rebuild(append_a_byte, "longer than the");
}
END_TEST

START_TEST(empty_entry_is_rebuilt) {
  check_rebuild(empty_it, "shorter than its header");
}
END_TEST

/* An entry copied under another entry's name is refused by its key. */
START_TEST(entry_under_another_name_is_rebuilt) {
  setenv("CLBT_BUILD_OPTIONS", "-DTEST_VARIANT=1", 1);
  prepare_and_check();
  char first[1024] = "";
  ck_assert_int_eq(clbt_test_count_files(directory, first, sizeof first), 1);
  setenv("CLBT_BUILD_OPTIONS", "-DTEST_VARIANT=2", 1);
  prepare_and_check();
  ck_assert_int_eq(clbt_test_count_files(directory, NULL, 0), 2);
  char second[1024] = "";
  for (int i = 0; i < message_count; ++i) {
    const char *stored = strstr(texts[i], "program binary in ");
    if (stored) snprintf(second, sizeof second, "%s", stored + 18);
  }
  ck_assert_str_ne(second, "");
  ck_assert_str_ne(second, first);
  ck_assert_int_eq(rename(first, second), 0);
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_WARN, ", not its name's"));
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
}
END_TEST

/* Options, block sizes and CLBT_BUILD_OPTIONS are all part of the key. */
/*
 * A FIFO where an entry belongs is not ours and cannot be read without
 * blocking: it is ignored (not deleted), the program built from source,
 * and the store replaces the name with a regular entry that later handles
 * load. Without the check, opening the FIFO blocks for ever and CTest's
 * timeout fails the suite.
 */
START_TEST(fifo_in_place_of_an_entry_is_ignored) {
  prepare_and_check();
  char entry[1024] = "";
  ck_assert_int_eq(clbt_test_count_files(directory, entry, sizeof entry), 1);
  ck_assert_int_eq(remove(entry), 0);
  ck_assert_int_eq(mkfifo(entry, 0600), 0);
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_WARN, "is not a regular file; ignoring it"));
  ck_assert(!logged(CLBT_LOG_WARN, "deleted it"));
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
  struct stat info;
  ck_assert_int_eq(stat(entry, &info), 0);
  ck_assert(S_ISREG(info.st_mode));
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from cache entry"));
}
END_TEST

START_TEST(key_covers_the_options) {
  prepare_and_check();
  /* Variant 1 again (this test's cache directory is new): on PoCL a store
     compiles every kernel of the program, half a minute on a loaded
     2-core machine, unless PoCL's own cache has it from the test above. */
  setenv("CLBT_BUILD_OPTIONS", "-DTEST_VARIANT=1", 1);
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
  ck_assert_int_eq(clbt_test_count_files(directory, NULL, 0), 2);
  unsetenv("CLBT_BUILD_OPTIONS");
  clbt_device *device = NULL;
  clbt_table_config other = config;
  other.block_size = 32;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_assert_ok(clbt_table_prepare(device, &other));
  clbt_device_release(device);
  ck_assert_int_eq(clbt_test_count_files(directory, NULL, 0), 3);
}
END_TEST

/* Missing directories are created, private to the user. */
START_TEST(missing_directories_are_created) {
  char nested[512];
  snprintf(nested, sizeof nested, "%s/a/b", directory);
  setenv("CLBT_CACHE_DIR", nested, 1);
  prepare_and_check();
  ck_assert_int_eq(clbt_test_count_files(nested, NULL, 0), 1);
  struct stat info;
  ck_assert_int_eq(stat(nested, &info), 0);
  ck_assert_int_eq(info.st_mode & 0777, 0700);
}
END_TEST

/* A directory that cannot be one still lets every build succeed. */
START_TEST(unusable_directory_only_warns) {
  char file[512];
  snprintf(file, sizeof file, "%s/plain-file", directory);
  FILE *plain = fopen(file, "w");
  ck_assert_ptr_nonnull(plain);
  ck_assert_int_eq(fclose(plain), 0);
  setenv("CLBT_CACHE_DIR", file, 1);
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_WARN, "cannot store a program in the cache"));
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
  prepare_and_check();
  ck_assert(logged(CLBT_LOG_DEBUG, "built a program from source"));
}
END_TEST

/* Without CLBT_CACHE_DIR there is no cache, and nothing to warn about. */
START_TEST(cache_is_opt_in) {
  unsetenv("CLBT_CACHE_DIR");
  prepare_and_check();
  prepare_and_check();
  ck_assert_int_eq(count_logged(CLBT_LOG_DEBUG, "built a program from source"),
                   1);
  ck_assert_int_eq(count_logged(CLBT_LOG_WARN, ""), 0);
  ck_assert_int_eq(clbt_test_count_files(directory, NULL, 0), 0);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("binary_cache");
  TCase *tc = tcase_create("binary_cache");
  tcase_set_timeout(tc, 0);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, first_build_stores_later_ones_load);
  tcase_add_test(tc, truncated_entry_is_rebuilt);
  tcase_add_test(tc, damaged_binary_is_rebuilt);
  tcase_add_test(tc, foreign_file_is_rebuilt);
  tcase_add_test(tc, longer_entry_is_rebuilt);
  tcase_add_test(tc, empty_entry_is_rebuilt);
  tcase_add_test(tc, entry_under_another_name_is_rebuilt);
  tcase_add_test(tc, fifo_in_place_of_an_entry_is_ignored);
  tcase_add_test(tc, key_covers_the_options);
  tcase_add_test(tc, missing_directories_are_created);
  tcase_add_test(tc, unusable_directory_only_warns);
  tcase_add_test(tc, cache_is_opt_in);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
