/*
 * The library's locks failing: mtx_lock may return thrd_error, and each of
 * clbt's calls of it (the device's programs lock in src/device/handle.c,
 * the log's in src/base/log.c, the driver lock in src/device/driver_lock.c)
 * is checked. This program's mtx_lock takes the place of
 * glibc's for the library, which is linked in statically, and fails while
 * locks_fail is set; otherwise it is glibc's own.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "clbt_test.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <unistd.h>

static atomic_bool locks_fail;

int mtx_lock(mtx_t *mutex) {
  static union {
    void *object;
    int (*function)(mtx_t *);
  } glibc_lock;
  if (atomic_load(&locks_fail)) return thrd_error;
  if (!glibc_lock.object) glibc_lock.object = dlsym(RTLD_NEXT, "mtx_lock");
  if (!glibc_lock.object) abort();
  return glibc_lock.function(mutex);
}

/* The teardown of every test, so that a failed check leaves locks working. */
static void locks_work(void) { atomic_store(&locks_fail, false); }

#define LOCK_FAILED "mtx_lock failed on the device's programs lock"

static const clbt_table_config config = {.block_size = 16,
                                         .max_num_reqs = 2,
                                         .max_num_blocks_per_req = 2,
                                         .max_num_batched_tokens = 4};

static clbt_device *open_device(void) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  return device;
}

/* The settings' setters and getters fail and change nothing. */
START_TEST(settings_fail_and_stay) {
  clbt_device *device = open_device();
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_KEPT=1"));
  clbt_assert_ok(clbt_device_set_cache_dir(device, "/tmp/clbt-lock-kept"));
  char options[CLBT_BUILD_OPTIONS_SIZE] = "untouched";
  char directory[CLBT_CACHE_DIR_SIZE] = "untouched";
  atomic_store(&locks_fail, true);
  clbt_assert_fails(clbt_device_set_build_options(device, "-DTEST_LOST=2"),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  clbt_assert_fails(clbt_device_set_cache_dir(device, "/tmp/clbt-lock-lost"),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  clbt_assert_fails(clbt_device_build_options(device, options, sizeof options),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  clbt_assert_fails(clbt_device_cache_dir(device, directory, sizeof directory),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  atomic_store(&locks_fail, false);
  ck_assert_str_eq(options, "untouched");
  ck_assert_str_eq(directory, "untouched");
  clbt_assert_ok(clbt_device_build_options(device, options, sizeof options));
  clbt_assert_ok(clbt_device_cache_dir(device, directory, sizeof directory));
  ck_assert_str_eq(options, "-DTEST_KEPT=1");
  ck_assert_str_eq(directory, "/tmp/clbt-lock-kept");
  clbt_device_release(device);
}
END_TEST

/*
 * Builds fail and build nothing, the program list is not read, and the
 * program count, which cannot fail, says 0 with the error recorded.
 */
START_TEST(programs_fail_and_stay) {
  clbt_device *device = open_device();
  clbt_assert_ok(clbt_table_prepare(device, &config));
  clbt_table_config other = config;
  other.block_size = 32;
  clbt_table *table = NULL;
  char options[CLBT_PROGRAM_OPTIONS_SIZE] = "untouched";
  atomic_store(&locks_fail, true);
  clbt_assert_fails(clbt_table_prepare(device, &other),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  /* Its first locked step may be an enqueue, under the device's watch. */
  clbt_assert_fails(clbt_table_create(device, &other, &table),
                    CLBT_CL_OUT_OF_HOST_MEMORY,
                    "mtx_lock failed on the device's");
  clbt_assert_fails(clbt_device_program_options(device, 0, options,
                                                sizeof options),
                    CLBT_CL_OUT_OF_HOST_MEMORY, LOCK_FAILED);
  /* Another message first, so that the count's own shows. */
  clbt_assert_fails(clbt_device_set_build_options(NULL, NULL),
                    CLBT_NULL_ARGUMENT, "device is NULL");
  size_t count = clbt_device_program_count(device);
  ck_assert_str_eq(clbt_last_error(), LOCK_FAILED);
  atomic_store(&locks_fail, false);
  ck_assert_uint_eq(count, 0);
  ck_assert_ptr_null(table);
  ck_assert_str_eq(options, "untouched");
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_device_release(device);
}
END_TEST

/* What a callback received. */
static int received[2];

static void count_message(clbt_log_level level, const char *message,
                          void *user) {
  (void)level;
  (void)message;
  ++*(int *)user;
}

/*
 * Logging keeps its callback when the log's lock fails, and delivers what
 * it must to stderr meanwhile, never to a callback without the lock.
 */
START_TEST(logging_keeps_its_callback) {
  clbt_device *device = open_device();
  char path[] = "/tmp/clbt-lock-log-XXXXXX";
  int file = mkstemp(path);
  ck_assert_int_ge(file, 0);
  received[0] = received[1] = 0;
  clbt_log_set_callback(count_message, &received[0]);
  fflush(stderr);
  int saved_stderr = dup(STDERR_FILENO);
  ck_assert_int_ge(saved_stderr, 0);
  ck_assert_int_ge(dup2(file, STDERR_FILENO), 0);
  atomic_store(&locks_fail, true);
  clbt_log_set_callback(count_message, &received[1]);
  char unchanged[256];
  snprintf(unchanged, sizeof unchanged, "%s", clbt_last_error());
  /* Fails on the device's lock, and logs that as an error. */
  clbt_status status = clbt_device_set_build_options(device, NULL);
  atomic_store(&locks_fail, false);
  fflush(stderr);
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  char text[4096] = "";
  ck_assert_int_ge(pread(file, text, sizeof text - 1, 0), 0);
  close(file);
  unlink(path);
  ck_assert_str_eq(unchanged, "mtx_lock failed on the log's lock; the "
                              "callback is unchanged");
  ck_assert_int_eq(status, CLBT_CL_OUT_OF_HOST_MEMORY);
  ck_assert_msg(strstr(text, "clbt: error: mtx_lock failed on the log's lock"),
                "stderr holds '%s'", text);
  ck_assert_msg(strstr(text, "clbt: error: " LOCK_FAILED), "stderr holds '%s'",
                text);
  ck_assert_int_eq(received[0], 0);
  ck_assert_int_eq(received[1], 0);
  /* With the lock back, messages reach the callback set before. */
  clbt_assert_ok(
      clbt_device_set_build_options(device, "-cl-clbt-no-such-option"));
  ck_assert_int_ne(clbt_table_prepare(device, &config), CLBT_SUCCESS);
  clbt_log_set_callback(NULL, NULL);
  ck_assert_int_eq(received[0], 1);
  ck_assert_int_eq(received[1], 0);
  clbt_device_release(device);
}
END_TEST

/*
 * The process-wide driver lock (src/device/driver_lock.c): opening a device and
 * writing a device's selector fail and make nothing; releasing a device
 * frees it all the same (a leak would be certain, the race it guards
 * against only possible), logging the failure.
 */
#define DRIVER_LOCK_FAILED "mtx_lock failed on the driver lock"

START_TEST(devices_fail_to_open_and_still_free) {
  clbt_device *device = open_device();
  clbt_device *opened = NULL;
  char selector[CLBT_SELECTOR_SIZE] = "untouched";
  atomic_store(&locks_fail, true);
  clbt_assert_fails(clbt_device_open(NULL, &opened),
                    CLBT_CL_OUT_OF_HOST_MEMORY, DRIVER_LOCK_FAILED);
  clbt_assert_fails(clbt_device_selector(clbt_device_id(device), selector,
                                         sizeof selector),
                    CLBT_CL_OUT_OF_HOST_MEMORY, DRIVER_LOCK_FAILED);
  clbt_device_release(device);
  atomic_store(&locks_fail, false);
  ck_assert_ptr_null(opened);
  ck_assert_str_eq(selector, "untouched");
  clbt_assert_ok(clbt_device_open(NULL, &opened));
  clbt_device_release(opened);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("lock_failures");
  TCase *tc = tcase_create("lock_failures");
  tcase_set_timeout(tc, 0);
  tcase_add_checked_fixture(tc, NULL, locks_work);
  tcase_add_test(tc, settings_fail_and_stay);
  tcase_add_test(tc, programs_fail_and_stay);
  tcase_add_test(tc, logging_keeps_its_callback);
  tcase_add_test(tc, devices_fail_to_open_and_still_free);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
