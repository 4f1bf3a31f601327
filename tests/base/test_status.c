/* Status codes and messages (src/base/status.c). */
#include "clbt_test.h"

#include <stdio.h>
#include <threads.h>

static const struct {
  clbt_status status;
  int value;
  const char *name;
} known[] = {
    {CLBT_SUCCESS, 0, "CLBT_SUCCESS"},
    {CLBT_CL_DEVICE_NOT_FOUND, CL_DEVICE_NOT_FOUND, "CLBT_CL_DEVICE_NOT_FOUND"},
    {CLBT_CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_HOST_MEMORY,
     "CLBT_CL_OUT_OF_HOST_MEMORY"},
    {CLBT_CL_BUILD_PROGRAM_FAILURE, CL_BUILD_PROGRAM_FAILURE,
     "CLBT_CL_BUILD_PROGRAM_FAILURE"},
    {CLBT_CL_KERNEL_ARG_INFO_NOT_AVAILABLE, CL_KERNEL_ARG_INFO_NOT_AVAILABLE,
     "CLBT_CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {CLBT_CL_INVALID_VALUE, CL_INVALID_VALUE, "CLBT_CL_INVALID_VALUE"},
    {CLBT_CL_INVALID_WORK_GROUP_SIZE, CL_INVALID_WORK_GROUP_SIZE,
     "CLBT_CL_INVALID_WORK_GROUP_SIZE"},
    {CLBT_CL_INVALID_DEVICE_PARTITION_COUNT, CL_INVALID_DEVICE_PARTITION_COUNT,
     "CLBT_CL_INVALID_DEVICE_PARTITION_COUNT"},
    /* OpenCL 2.x and 3.0 codes, by number (these headers may lack them) */
    {CLBT_CL_INVALID_PIPE_SIZE, -69, "CLBT_CL_INVALID_PIPE_SIZE"},
    {CLBT_CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72,
     "CLBT_CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {CLBT_CL_PLATFORM_NOT_FOUND_KHR, -1001, "CLBT_CL_PLATFORM_NOT_FOUND_KHR"},
    {CLBT_NULL_ARGUMENT, -4001, "CLBT_NULL_ARGUMENT"},
    {CLBT_UNSUPPORTED_DEVICE, -4014, "CLBT_UNSUPPORTED_DEVICE"},
};

START_TEST(values_and_names) {
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    ck_assert_int_eq(known[i].status, known[i].value);
    ck_assert_str_eq(clbt_status_name(known[i].status), known[i].name);
  }
  ck_assert_str_eq(clbt_status_string(CLBT_ROW_OUT_OF_RANGE),
                   "row index is not below max_num_reqs");
  ck_assert_str_eq(clbt_status_string(CLBT_CL_INVALID_VALUE), "invalid value");
}
END_TEST

/* Every error code of Khronos's cl.h, as that header spells it
   (tests/opencl_error_codes.cmake): clbt names each by number. */
static const struct {
  int value;
  const char *name;
} opencl_codes[] = {
#include "opencl_error_codes.h"
};
#define NUM_OPENCL_CODES (sizeof opencl_codes / sizeof opencl_codes[0])

/* clbt's own codes, from -4001 down, in docs/errors.md's order. */
static const char *const own_names[] = {
    "CLBT_NULL_ARGUMENT",     "CLBT_INVALID_ARGUMENT",   "CLBT_INVALID_CONFIG",
    "CLBT_SIZE_OVERFLOW",     "CLBT_ROW_OUT_OF_RANGE",   "CLBT_ROW_OVERFLOW",
    "CLBT_INVALID_BLOCK_ID",  "CLBT_TOO_MANY_REQUESTS",  "CLBT_TOO_MANY_TOKENS",
    "CLBT_BUFFER_TOO_SMALL",  "CLBT_CONTEXT_MISMATCH",   "CLBT_INVALID_SELECTOR",
    "CLBT_NO_MATCHING_DEVICE", "CLBT_UNSUPPORTED_DEVICE",
    "CLBT_READ_ONLY_BUFFER"};
#define NUM_OWN (sizeof own_names / sizeof own_names[0])

/* The name clbt must give value, or NULL for a value it must not know. */
static const char *expected_name(int value, char *buffer, size_t size) {
  if (value == 0) return "CLBT_SUCCESS";
  if (value == -1001) return "CLBT_CL_PLATFORM_NOT_FOUND_KHR";
  if (value <= -4001 && value > -4001 - (int)NUM_OWN)
    return own_names[-4001 - value];
  for (size_t i = 0; i < NUM_OPENCL_CODES; ++i)
    if (opencl_codes[i].value == value) {
      snprintf(buffer, size, "CLBT_%s", opencl_codes[i].name);
      return buffer;
    }
  return NULL;
}

/* docs/errors.md promises -1..-19 and -30..-72; cl.h must hold them all. */
START_TEST(opencl_header_lists_the_codes) {
  ck_assert_uint_eq(NUM_OPENCL_CODES, 19 + 43);
  for (size_t i = 0; i < NUM_OPENCL_CODES; ++i) {
    int value = opencl_codes[i].value;
    ck_assert_msg((value <= -1 && value >= -19) || (value <= -30 && value >= -72),
                  "%s is %d", opencl_codes[i].name, value);
  }
}
END_TEST

/* Each value clbt must know has exactly its name and a text; every other
   value is unknown to both functions. */
START_TEST(names_and_texts_by_value) {
  for (int value = -5000; value <= 5000; ++value) {
    char buffer[128];
    const char *name = expected_name(value, buffer, sizeof buffer);
    clbt_status status = (clbt_status)value;
    if (name) {
      ck_assert_str_eq(clbt_status_name(status), name);
      ck_assert_str_ne(clbt_status_string(status), "unknown status");
      ck_assert_str_ne(clbt_status_string(status), "");
    } else {
      ck_assert_msg(strcmp(clbt_status_name(status), "CLBT_UNKNOWN_STATUS") == 0,
                    "%d is named %s", value, clbt_status_name(status));
      ck_assert_str_eq(clbt_status_string(status), "unknown status");
    }
  }
}
END_TEST

static int other_thread(void *message) {
  *(const char **)message = clbt_last_error();
  return **(const char **)message == '\0';
}

/* The message belongs to the thread and outlives later successes. */
START_TEST(last_error_per_thread) {
  uint32_t width;
  ck_assert_int_eq(clbt_block_table_width(1, 0, 0, 0, &width),
                   CLBT_INVALID_CONFIG);
  ck_assert_str_eq(clbt_last_error(), "block_size is 0; it must be >= 1");
  clbt_assert_ok(clbt_block_table_width(1, 16, 0, 0, &width));
  ck_assert_str_eq(clbt_last_error(), "block_size is 0; it must be >= 1");
  thrd_t thread;
  const char *seen = NULL;
  int empty = 0;
  ck_assert_int_eq(thrd_create(&thread, other_thread, &seen), thrd_success);
  ck_assert_int_eq(thrd_join(thread, &empty), thrd_success);
  ck_assert_int_eq(empty, 1);
}
END_TEST

/* An OpenCL failure names the call and the code: a slot-mapping buffer
   larger than the device allows (PoCL here: 1 GiB; this asks 16 GiB). */
START_TEST(opencl_failures_name_the_call) {
  cl_ulong max_alloc = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(clbt_test_device()),
                                   CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                   sizeof max_alloc, &max_alloc, NULL),
                   CL_SUCCESS);
  ck_assert_msg(max_alloc < (cl_ulong)INT32_MAX * 8,
                "the test device allows %llu-byte buffers; this test needs a "
                "device that refuses 16 GiB", (unsigned long long)max_alloc);
  clbt_table_config config = {.block_size = 16, .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = INT32_MAX};
  clbt_table *table = NULL;
  clbt_assert_fails(clbt_table_create(clbt_test_device(), &config, &table),
                    CLBT_CL_INVALID_BUFFER_SIZE,
                    "clCreateBuffer failed: CL_INVALID_BUFFER_SIZE (-61)");
  ck_assert_ptr_null(table);
}
END_TEST

/* A message longer than CLBT_LAST_ERROR_SIZE is cut to fit, its start kept. */
START_TEST(long_messages_are_cut_to_the_bound) {
  static char selector[CLBT_LAST_ERROR_SIZE + 1000];
  memset(selector, 'x', sizeof selector - 1);
  clbt_device *device = NULL;
  ck_assert_int_eq(clbt_device_open(selector, &device),
                   CLBT_INVALID_SELECTOR);
  ck_assert_uint_eq(strlen(clbt_last_error()), CLBT_LAST_ERROR_SIZE - 1);
  ck_assert_int_eq(strncmp(clbt_last_error(), "selector='xxx", 13), 0);
  ck_assert_ptr_null(device);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("status");
  TCase *tc = tcase_create("status");
  tcase_add_test(tc, values_and_names);
  tcase_add_test(tc, opencl_header_lists_the_codes);
  tcase_add_test(tc, names_and_texts_by_value);
  tcase_add_test(tc, last_error_per_thread);
  tcase_add_test(tc, opencl_failures_name_the_call);
  tcase_add_test(tc, long_messages_are_cut_to_the_bound);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
