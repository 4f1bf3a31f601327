/* What clbt gives its kernels, seen through clSetKernelArg
   (kernel_arg_spy.h). */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "kernel_arg_spy.h"

#include <dlfcn.h>
#include <stdlib.h>

clbt_test_arg_hook *clbt_test_arg_seen;
cl_mem clbt_test_watched;
unsigned clbt_test_watched_sets;

cl_int CL_API_CALL clSetKernelArg(cl_kernel kernel, cl_uint index,
                                  size_t size, const void *value) {
  static union {
    void *object;
    cl_int(CL_API_CALL *function)(cl_kernel, cl_uint, size_t, const void *);
  } driver;
  if (!driver.object) driver.object = dlsym(RTLD_NEXT, "clSetKernelArg");
  if (!driver.object) abort();
  if (clbt_test_arg_seen) clbt_test_arg_seen(kernel, index, size, value);
  if (clbt_test_watched && size == sizeof(cl_mem) && value &&
      *(const cl_mem *)value == clbt_test_watched)
    ++clbt_test_watched_sets;
  return driver.function(kernel, index, size, value);
}
