/*
 * Logging (src/base/log.c): CLBT_LOG read once, levels, the callback and its
 * thread rules, and what each level reports. CTest runs this suite with
 * CLBT_LOG=info.
 */
#include "clbt_test.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <unistd.h>

#define MAX_MESSAGES 64

/* What a callback received. */
typedef struct captured {
  mtx_t lock;
  int count;
  clbt_log_level levels[MAX_MESSAGES];
  char texts[MAX_MESSAGES][1024];
} captured;

static captured messages;

static void capture(clbt_log_level level, const char *message, void *user) {
  captured *into = user;
  mtx_lock(&into->lock);
  if (into->count < MAX_MESSAGES) {
    into->levels[into->count] = level;
    snprintf(into->texts[into->count], sizeof into->texts[0], "%s", message);
  }
  ++into->count;
  mtx_unlock(&into->lock);
}

/* The first captured message containing words at level, or NULL. */
static const char *find_message(clbt_log_level level, const char *words) {
  for (int i = 0; i < messages.count && i < MAX_MESSAGES; ++i)
    if (messages.levels[i] == level && strstr(messages.texts[i], words))
      return messages.texts[i];
  return NULL;
}

static void start_capture(clbt_log_level level) {
  messages.count = 0;
  clbt_assert_ok(clbt_log_set_level(level));
  clbt_log_set_callback(capture, &messages);
}

/* Also the teardown of every test, so that a failed one leaves no callback. */
static void stop_capture(void) {
  clbt_log_set_callback(NULL, NULL);
  clbt_assert_ok(clbt_log_set_level(CLBT_LOG_INFO));
}

/*
 * Options every OpenCL compiler refuses, whatever the kernel: the build
 * fails with an OpenCL status (CL_INVALID_BUILD_OPTIONS on PoCL).
 */
#define REFUSED_OPTIONS "-cl-clbt-no-such-option"

static bool is_opencl_status(clbt_status status) {
  return status < 0 && status > CLBT_NULL_ARGUMENT;
}

static clbt_table_config config_with_block_size(uint32_t block_size) {
  return (clbt_table_config){.block_size = block_size, .max_num_reqs = 2,
                             .max_num_blocks_per_req = 2,
                             .max_num_batched_tokens = 4};
}

START_TEST(environment_is_read_once) {
  ck_assert_int_eq(clbt_log_get_level(), CLBT_LOG_INFO);
  setenv("CLBT_LOG", "debug", 1);
  ck_assert_int_eq(clbt_log_get_level(), CLBT_LOG_INFO);
  unsetenv("CLBT_LOG");
}
END_TEST

START_TEST(level_names_are_the_environment_words) {
  const char *words[] = {"off", "error", "warn", "info", "debug"};
  for (int level = CLBT_LOG_OFF; level <= CLBT_LOG_DEBUG; ++level)
    ck_assert_str_eq(clbt_log_level_name((clbt_log_level)level), words[level]);
  ck_assert_str_eq(clbt_log_level_name((clbt_log_level)5), "unknown");
  ck_assert_str_eq(clbt_log_level_name((clbt_log_level)-1), "unknown");
}
END_TEST

START_TEST(bad_level_is_refused) {
  clbt_assert_fails(clbt_log_set_level((clbt_log_level)5),
                    CLBT_INVALID_ARGUMENT, "level 5 is outside");
  clbt_assert_fails(clbt_log_set_level((clbt_log_level)-1),
                    CLBT_INVALID_ARGUMENT, "CLBT_LOG_DEBUG (4)");
  ck_assert_int_eq(clbt_log_get_level(), CLBT_LOG_INFO);
}
END_TEST

/* Info names the device and the CLBT_DEVICE value that chose it. */
START_TEST(info_says_which_device_and_why) {
  const char *setting = getenv("CLBT_DEVICE");
  ck_assert_ptr_nonnull(setting);
  start_capture(CLBT_LOG_INFO);
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  stop_capture();
  char name[256] = "", reason[256];
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(device), CL_DEVICE_NAME,
                                   sizeof name - 1, name, NULL),
                   CL_SUCCESS);
  snprintf(reason, sizeof reason, "chosen by CLBT_DEVICE='%s'", setting);
  const char *message = find_message(CLBT_LOG_INFO, reason);
  ck_assert_msg(message, "no info message says '%s'", reason);
  ck_assert_ptr_nonnull(strstr(message, name));
  clbt_device_release(device);
}
END_TEST

/* An empty selector takes the default rule, and the message says so. */
START_TEST(info_explains_the_default_rule) {
  start_capture(CLBT_LOG_INFO);
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open("", &device));
  stop_capture();
  cl_device_type type = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(device), CL_DEVICE_TYPE,
                                   sizeof type, &type, NULL),
                   CL_SUCCESS);
  const char *rule = (type & CL_DEVICE_TYPE_GPU)
                         ? "the default rule (selector empty): the first GPU"
                         : "the default rule (selector empty): no GPU, so "
                           "the first device";
  ck_assert_msg(find_message(CLBT_LOG_INFO, rule), "no message says '%s'",
                rule);
  clbt_device_release(device);
}
END_TEST

/*
 * Debug reports each build once, with its time and its options: those the
 * device lists for the program, which name the block size.
 */
START_TEST(debug_reports_each_build) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_table_config config = config_with_block_size(48);
  start_capture(CLBT_LOG_DEBUG);
  clbt_assert_ok(clbt_table_prepare(device, &config));
  clbt_assert_ok(clbt_table_prepare(device, &config));
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_MARK=7"));
  clbt_assert_ok(clbt_table_prepare(device, &config));
  stop_capture();
  ck_assert_int_eq(messages.count, 2);
  char options[2][1024], quoted[1100];
  for (size_t i = 0; i < 2; ++i)
    clbt_assert_ok(clbt_device_program_options(device, i, options[i],
                                               sizeof options[i]));
  /* Newest first: options[1] is the first build's. */
  ck_assert_ptr_nonnull(strstr(options[1], "48"));
  snprintf(quoted, sizeof quoted, "options '%s'", options[1]);
  ck_assert_int_eq(messages.levels[0], CLBT_LOG_DEBUG);
  ck_assert_ptr_nonnull(strstr(messages.texts[0], quoted));
  ck_assert_ptr_nonnull(strstr(messages.texts[0], " ms; "));
  ck_assert_ptr_null(strstr(messages.texts[0], "appended"));
  snprintf(quoted, sizeof quoted, "options '%s'", options[0]);
  ck_assert_ptr_nonnull(strstr(options[0], "-DTEST_MARK=7"));
  ck_assert_ptr_nonnull(strstr(messages.texts[1], quoted));
  ck_assert_ptr_nonnull(strstr(
      messages.texts[1],
      "(the device's build options '-DTEST_MARK=7' appended)"));
  clbt_device_release(device);
}
END_TEST

/* Below their level nothing is delivered; off silences errors too. */
START_TEST(levels_filter) {
  clbt_device *device = NULL;
  clbt_table_config config = config_with_block_size(80);
  start_capture(CLBT_LOG_WARN);
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_assert_ok(clbt_table_prepare(device, &config));
  ck_assert_int_eq(messages.count, 0);
  clbt_assert_ok(clbt_log_set_level(CLBT_LOG_OFF));
  clbt_assert_ok(clbt_device_set_build_options(device, REFUSED_OPTIONS));
  ck_assert(is_opencl_status(clbt_table_prepare(device, &config)));
  ck_assert_int_eq(messages.count, 0);
  stop_capture();
  clbt_device_release(device);
}
END_TEST

/* OpenCL failures are errors, with the text clbt_last_error returns; a
   refused argument is the caller's to report and is not logged. */
START_TEST(opencl_failures_are_errors) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_table_config config = config_with_block_size(96);
  start_capture(CLBT_LOG_DEBUG);
  clbt_assert_ok(clbt_device_set_build_options(device, REFUSED_OPTIONS));
  ck_assert(is_opencl_status(clbt_table_prepare(device, &config)));
  ck_assert_int_eq(messages.count, 1);
  ck_assert_int_eq(messages.levels[0], CLBT_LOG_ERROR);
  /* capture() keeps the first 1023 characters */
  ck_assert_int_eq(strncmp(messages.texts[0], clbt_last_error(),
                           sizeof messages.texts[0] - 1),
                   0);
  ck_assert_int_eq(clbt_table_append_row(NULL, 0, NULL, 0),
                   CLBT_NULL_ARGUMENT);
  config.max_num_reqs = 0;
  ck_assert_int_eq(clbt_table_prepare(device, &config), CLBT_INVALID_CONFIG);
  ck_assert_int_eq(messages.count, 1);
  stop_capture();
  clbt_device_release(device);
}
END_TEST

/* Without a callback, messages go to stderr as "clbt: <level>: <text>". */
START_TEST(stderr_is_the_default_destination) {
  char path[] = "/tmp/clbt-log-XXXXXX";
  int file = mkstemp(path);
  ck_assert_int_ge(file, 0);
  fflush(stderr);
  int saved_stderr = dup(STDERR_FILENO);
  ck_assert_int_ge(saved_stderr, 0);
  ck_assert_int_ge(dup2(file, STDERR_FILENO), 0);
  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  fflush(stderr);
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  ck_assert_int_eq(status, CLBT_SUCCESS);
  char text[2048] = "";
  ck_assert_int_ge(pread(file, text, sizeof text - 1, 0), 1);
  close(file);
  unlink(path);
  ck_assert_msg(strncmp(text, "clbt: info: device ", 19) == 0,
                "stderr holds '%s'", text);
  ck_assert_ptr_nonnull(strstr(text, "chosen by CLBT_DEVICE="));
  clbt_device_release(device);
}
END_TEST

/*
 * A callback that calls clbt, here to hand over to another callback. (No
 * assertion inside a callback: a failing one would leave it by longjmp.)
 */
static captured handed_over;
static clbt_log_level level_seen_inside;

static void hand_over(clbt_log_level level, const char *message, void *user) {
  (void)level;
  (void)message;
  ++*(int *)user;
  level_seen_inside = clbt_log_get_level();
  clbt_log_set_callback(capture, &handed_over);
}

START_TEST(callback_may_call_clbt) {
  int calls = 0;
  ck_assert_int_eq(mtx_init(&handed_over.lock, mtx_plain), thrd_success);
  handed_over.count = 0;
  clbt_log_set_callback(hand_over, &calls);
  clbt_device *first = NULL, *second = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &first));
  clbt_assert_ok(clbt_device_open(NULL, &second));
  clbt_log_set_callback(NULL, NULL);
  ck_assert_int_eq(calls, 1);
  ck_assert_int_eq(level_seen_inside, CLBT_LOG_INFO);
  ck_assert_int_eq(handed_over.count, 1);
  mtx_destroy(&handed_over.lock);
  clbt_device_release(first);
  clbt_device_release(second);
}
END_TEST

/* Threads that log at once: the callback never runs twice at a time. */
static atomic_int inside, overlaps, delivered;

static void exclusive(clbt_log_level level, const char *message, void *user) {
  (void)level;
  (void)message;
  (void)user;
  if (atomic_fetch_add(&inside, 1) != 0) atomic_fetch_add(&overlaps, 1);
  thrd_sleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
  atomic_fetch_sub(&inside, 1);
  atomic_fetch_add(&delivered, 1);
}

static int open_devices(void *unused) {
  (void)unused;
  for (int i = 0; i < 4; ++i) {
    clbt_device *device = NULL;
    if (clbt_device_open(NULL, &device) != CLBT_SUCCESS) return 1;
    clbt_device_release(device);
  }
  return 0;
}

START_TEST(callback_runs_one_message_at_a_time) {
  clbt_log_set_callback(exclusive, NULL);
  thrd_t threads[4];
  for (int t = 0; t < 4; ++t)
    ck_assert_int_eq(thrd_create(&threads[t], open_devices, NULL),
                     thrd_success);
  for (int t = 0; t < 4; ++t) {
    int result = 1;
    ck_assert_int_eq(thrd_join(threads[t], &result), thrd_success);
    ck_assert_int_eq(result, 0);
  }
  clbt_log_set_callback(NULL, NULL);
  ck_assert_int_eq(atomic_load(&delivered), 16);
  ck_assert_int_eq(atomic_load(&overlaps), 0);
}
END_TEST

int main(void) {
  if (mtx_init(&messages.lock, mtx_plain) != thrd_success) return 1;
  Suite *suite = suite_create("log");
  TCase *tc = tcase_create("log");
  tcase_set_timeout(tc, 0);
  tcase_add_checked_fixture(tc, NULL, stop_capture);
  tcase_add_test(tc, environment_is_read_once);
  tcase_add_test(tc, level_names_are_the_environment_words);
  tcase_add_test(tc, bad_level_is_refused);
  tcase_add_test(tc, info_says_which_device_and_why);
  tcase_add_test(tc, info_explains_the_default_rule);
  tcase_add_test(tc, debug_reports_each_build);
  tcase_add_test(tc, levels_filter);
  tcase_add_test(tc, opencl_failures_are_errors);
  tcase_add_test(tc, stderr_is_the_default_destination);
  tcase_add_test(tc, callback_may_call_clbt);
  tcase_add_test(tc, callback_runs_one_message_at_a_time);
  suite_add_tcase(suite, tc);
  int result = clbt_test_run(suite);
  mtx_destroy(&messages.lock);
  return result;
}
