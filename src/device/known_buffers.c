/*
 * The caller's buffers a handle has checked lately (known_buffers.h): a table
 * engine's batch buffers and outputs, a KV cache's inputs; and the check
 * of every caller buffer clbt writes.
 */
#include "device/known_buffers.h"

#include "base/status.h"
#include "device/handle.h"

#include <string.h>

/* The record of a known buffer, or NULL. */
static const clbt__known_buffer *find(const clbt__known_buffers *known,
                                      cl_mem buffer) {
  for (uint32_t k = 0; k < CLBT__KNOWN_BUFFERS; ++k)
    if (known->buffers[k].buffer == buffer) return &known->buffers[k];
  return NULL;
}

clbt_status clbt__known_buffer_size(const clbt_device *device,
                                    clbt__known_buffers *known, cl_mem buffer,
                                    const char *name, const char *owner,
                                    size_t *size) {
  const clbt__known_buffer *found = find(known, buffer);
  if (found) {
    *size = found->size;
    return CLBT_SUCCESS;
  }
  clbt_status status = CLBT_SUCCESS;
  cl_context context;
  cl_mem parent = NULL;
  cl_mem_flags flags = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof context,
                                  &context, NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_FLAGS, sizeof flags, &flags,
                                  NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof *size, size,
                                  NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_ASSOCIATED_MEMOBJECT,
                                  sizeof parent, &parent, NULL),
               status, done);
  if (context != device->context)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "%s belongs to another OpenCL context than the "
                      "%s's device",
                      name, owner);
  CLBT__CL_TRY(clRetainMemObject(buffer), status, done);
  clbt__known_buffer *oldest = &known->buffers[known->next];
  if (oldest->buffer) clReleaseMemObject(oldest->buffer);
  *oldest = (clbt__known_buffer){buffer, *size, flags, parent,
                                 ++known->last_serial};
  known->next = (known->next + 1) % CLBT__KNOWN_BUFFERS;
done:
  return status;
}

clbt_status clbt__check_writable(const clbt__known_buffers *known,
                                 cl_mem buffer, const char *name) {
  const clbt__known_buffer *found = known ? find(known, buffer) : NULL;
  cl_mem_flags flags = found ? found->flags : 0;
  if (!found) {
    cl_int error = clGetMemObjectInfo(buffer, CL_MEM_FLAGS, sizeof flags,
                                      &flags, NULL);
    if (error) return clbt__cl_fail(error, "clGetMemObjectInfo");
  }
  if (flags & CL_MEM_READ_ONLY)
    return clbt__fail(CLBT_READ_ONLY_BUFFER,
                      "%s is a CL_MEM_READ_ONLY buffer, which kernels may "
                      "only read; clbt's kernel writes it: make it "
                      "CL_MEM_READ_WRITE",
                      name);
  return CLBT_SUCCESS;
}

cl_mem clbt__known_buffer_parent(const clbt__known_buffers *known,
                                 cl_mem buffer) {
  const clbt__known_buffer *found = find(known, buffer);
  return found ? found->parent : NULL;
}

uint64_t clbt__known_buffer_serial(const clbt__known_buffers *known,
                                   cl_mem buffer) {
  const clbt__known_buffer *found = buffer ? find(known, buffer) : NULL;
  return found ? found->serial : 0;
}

void clbt__known_buffers_release(clbt__known_buffers *known) {
  for (uint32_t k = 0; k < CLBT__KNOWN_BUFFERS; ++k)
    if (known->buffers[k].buffer) clReleaseMemObject(known->buffers[k].buffer);
  memset(known, 0, sizeof *known);
}
