/*
 * A kernel's buffer argument, set when it or the record holding it
 * changes (bound_buffer.h).
 */
#include "device/bound_buffer.h"

#include "base/status.h"

clbt_status clbt__bound_buffer_set(cl_kernel kernel, cl_uint index,
                                   clbt__bound_buffer *bound, cl_mem buffer,
                                   uint64_t serial) {
  /* A buffer no record holds (serial 0) could be freed at any time. */
  bool held = !buffer || serial != 0;
  if (held && bound->set && bound->buffer == buffer && bound->serial == serial)
    return CLBT_SUCCESS;
  bound->set = false;
  cl_int error = clSetKernelArg(kernel, index, sizeof(cl_mem),
                                buffer ? &buffer : NULL);
  if (error) return clbt__cl_fail(error, "clSetKernelArg");
  *bound = (clbt__bound_buffer){buffer, serial, true};
  return CLBT_SUCCESS;
}
