/* Device handles (src/device/device.c): wrapping, references, lifetime. */
#include "clbt_test.h"

typedef struct own_objects {
  cl_context context;
  cl_device_id id;
  cl_command_queue queue;
} own_objects;

/* A context and queue of the test's own on the test device. */
static own_objects make_own(cl_command_queue_properties properties) {
  own_objects own = {NULL, clbt_device_id(clbt_test_device()), NULL};
  cl_int error = CL_SUCCESS;
  own.context = clCreateContext(NULL, 1, &own.id, NULL, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  own.queue = clCreateCommandQueue(own.context, own.id, properties, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return own;
}

static void free_own(own_objects *own) {
  clReleaseCommandQueue(own->queue);
  clReleaseContext(own->context);
}

static cl_uint context_references(cl_context context) {
  cl_uint count = 0;
  ck_assert_int_eq(clGetContextInfo(context, CL_CONTEXT_REFERENCE_COUNT,
                                    sizeof count, &count, NULL),
                   CL_SUCCESS);
  return count;
}

/* wrap uses the caller's objects as given, retained until release. */
START_TEST(wrap_uses_and_retains_the_callers_objects) {
  own_objects own = make_own(0);
  cl_uint before = context_references(own.context);
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_wrap(own.context, own.id, own.queue, &device));
  ck_assert_ptr_eq(clbt_device_context(device), own.context);
  ck_assert_ptr_eq(clbt_device_id(device), own.id);
  ck_assert_ptr_eq(clbt_device_queue(device), own.queue);
  ck_assert_uint_eq(context_references(own.context), before + 1);
  clbt_device_release(device);
  ck_assert_uint_eq(context_references(own.context), before);
  free_own(&own);
}
END_TEST

START_TEST(wrap_refuses_mismatches) {
  own_objects first = make_own(0), second = make_own(0);
  clbt_device *device = NULL;
  clbt_assert_fails(clbt_device_wrap(first.context, first.id, second.queue, &device),
                    CLBT_CONTEXT_MISMATCH, "queue belongs to another context");
  clbt_assert_fails(clbt_device_wrap(NULL, first.id, first.queue, &device),
                    CLBT_NULL_ARGUMENT, "context is NULL");
  clbt_assert_fails(clbt_device_wrap(first.context, NULL, first.queue, &device),
                    CLBT_NULL_ARGUMENT, "device is NULL");
  clbt_assert_fails(clbt_device_wrap(first.context, first.id, NULL, &device),
                    CLBT_NULL_ARGUMENT, "queue is NULL");
  clbt_assert_fails(clbt_device_wrap(first.context, first.id, first.queue, NULL),
                    CLBT_NULL_ARGUMENT, "out is NULL");
  ck_assert_ptr_null(device);
  free_own(&first);
  free_own(&second);
}
END_TEST

/* clbt orders its commands by queue order, so it refuses out-of-order ones. */
START_TEST(wrap_refuses_out_of_order_queues) {
  own_objects own = make_own(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  clbt_device *device = NULL;
  clbt_assert_fails(clbt_device_wrap(own.context, own.id, own.queue, &device),
                    CLBT_INVALID_ARGUMENT, "out of order");
  ck_assert_ptr_null(device);
  free_own(&own);
}
END_TEST

/* Tables keep their device alive after the caller releases it. */
START_TEST(tables_outlive_the_callers_reference) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = 2};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(device, &config, &table));
  clbt_device_release(device);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){6}, 1));
  /* The commit is asynchronous; the read below, on another queue, waits
     for its event. */
  cl_event committed = NULL;
  clbt_assert_ok(clbt_table_enqueue_commit(table, 1, 0, NULL, &committed));
  /* Read the committed row through a queue of the table's own context,
     which only the table keeps alive now. */
  int32_t row;
  cl_int error = CL_SUCCESS;
  cl_mem rows = clbt_table_device_data(table);
  cl_context context;
  ck_assert_int_eq(clGetMemObjectInfo(rows, CL_MEM_CONTEXT, sizeof context,
                                      &context, NULL),
                   CL_SUCCESS);
  cl_device_id id = clbt_device_id(clbt_test_device());
  cl_command_queue reader = clCreateCommandQueue(context, id, 0, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueReadBuffer(reader, rows, CL_TRUE, 0, sizeof row,
                                       &row, 1, &committed, NULL),
                   CL_SUCCESS);
  ck_assert_int_eq(row, 6);
  clReleaseEvent(committed);
  clReleaseCommandQueue(reader);
  clbt_table_destroy(table);
}
END_TEST

START_TEST(null_handles) {
  clbt_device_release(NULL);
  ck_assert_ptr_null(clbt_device_context(NULL));
  ck_assert_ptr_null(clbt_device_id(NULL));
  ck_assert_ptr_null(clbt_device_queue(NULL));
  ck_assert_uint_eq(clbt_device_program_count(NULL), 0);
  clbt_assert_fails(clbt_device_open(NULL, NULL), CLBT_NULL_ARGUMENT, "out");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("device");
  TCase *tc = tcase_create("device");
  tcase_add_test(tc, wrap_uses_and_retains_the_callers_objects);
  tcase_add_test(tc, wrap_refuses_mismatches);
  tcase_add_test(tc, wrap_refuses_out_of_order_queues);
  tcase_add_test(tc, tables_outlive_the_callers_reference);
  tcase_add_test(tc, null_handles);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
