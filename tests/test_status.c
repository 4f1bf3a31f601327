/* Status codes and messages (src/status.c). */
#include "clbt_test.h"

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

/* Every code has its own name and a text; unknown codes say so. */
START_TEST(map_is_complete) {
  static const clbt_status all[] = {
#define AS_STATUS(name, value, text) CLBT_##name,
      CLBT_STATUS_MAP(AS_STATUS)
#undef AS_STATUS
  };
  size_t count = sizeof all / sizeof all[0];
  ck_assert_uint_eq(count, 1 + 19 + 43 + 1 + 14);
  for (size_t i = 0; i < count; ++i) {
    ck_assert_str_ne(clbt_status_name(all[i]), "CLBT_UNKNOWN_STATUS");
    ck_assert_str_ne(clbt_status_string(all[i]), "unknown status");
    for (size_t j = 0; j < i; ++j)
      ck_assert_str_ne(clbt_status_name(all[i]), clbt_status_name(all[j]));
  }
  ck_assert_str_eq(clbt_status_name((clbt_status)-20), "CLBT_UNKNOWN_STATUS");
  ck_assert_str_eq(clbt_status_string((clbt_status)-5000), "unknown status");
  ck_assert_str_eq(clbt_status_string((clbt_status)1), "unknown status");
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

int main(void) {
  Suite *suite = suite_create("status");
  TCase *tc = tcase_create("status");
  tcase_add_test(tc, values_and_names);
  tcase_add_test(tc, map_is_complete);
  tcase_add_test(tc, last_error_per_thread);
  tcase_add_test(tc, opencl_failures_name_the_call);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
