/*
 * Bound buffers (src/device/bound_buffer.c): a kernel's buffer argument is
 * set again when the buffer or the record that holds it changes, and only
 * then. The kernel has two arguments, so a set at index 2 is refused by the
 * driver: a call there that succeeds made no set, one that fails made one.
 */
#include "clbt_test.h"
#include "device/bound_buffer.h"
#include "device/handle.h"

#include <string.h>

static const char *source =
    "__kernel void copy(__global int *a, __global int *b) { b[0] = a[0]; }";

static cl_kernel copy_kernel(clbt_device *device, cl_program *program) {
  cl_int error = CL_SUCCESS;
  *program = clCreateProgramWithSource(device->context, 1, &source, NULL,
                                       &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  ck_assert_int_eq(clBuildProgram(*program, 1, &device->id, "", NULL, NULL),
                   CL_SUCCESS);
  cl_kernel kernel = clCreateKernel(*program, "copy", &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return kernel;
}

/* Whether a call set the argument: at index 2 the driver refuses it. */
static bool sets(cl_kernel kernel, clbt__bound_buffer *bound, cl_mem buffer,
                 uint64_t serial) {
  clbt_status status =
      clbt__bound_buffer_set(kernel, 2, bound, buffer, serial);
  ck_assert(status == CLBT_SUCCESS || status == CLBT_CL_INVALID_ARG_INDEX);
  return status != CLBT_SUCCESS;
}

START_TEST(a_set_is_skipped_only_while_the_same_record_holds_it) {
  clbt_device *device = clbt_test_device();
  cl_program program;
  cl_kernel kernel = copy_kernel(device, &program);
  cl_mem a = clbt_test_buffer(sizeof(cl_int), NULL);
  cl_mem b = clbt_test_buffer(sizeof(cl_int), NULL);
  clbt__bound_buffer bound = {NULL, 0, false};

  /* Unknown at first: set, even to NULL. */
  ck_assert(sets(kernel, &bound, NULL, 0));
  clbt_assert_ok(clbt__bound_buffer_set(kernel, 0, &bound, a, 7));
  ck_assert(bound.set && bound.buffer == a && bound.serial == 7);
  ck_assert(!sets(kernel, &bound, a, 7));
  /* The same handle from another record: it may be another buffer. */
  ck_assert(sets(kernel, &bound, a, 8));
  ck_assert(!bound.set);
  /* After that failure the argument is unknown, whatever comes. */
  ck_assert(sets(kernel, &bound, a, 7));
  clbt_assert_ok(clbt__bound_buffer_set(kernel, 0, &bound, a, 7));
  ck_assert(sets(kernel, &bound, b, 7));
  clbt_assert_ok(clbt__bound_buffer_set(kernel, 0, &bound, NULL, 0));
  ck_assert(!sets(kernel, &bound, NULL, 0));
  /* A buffer no record holds is set every time. */
  clbt_assert_ok(clbt__bound_buffer_set(kernel, 0, &bound, a, 0));
  ck_assert(sets(kernel, &bound, a, 0));

  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bound_buffer");
  TCase *c = tcase_create("core");
  tcase_add_test(c, a_set_is_skipped_only_while_the_same_record_holds_it);
  suite_add_tcase(s, c);
  return clbt_test_run(s);
}
