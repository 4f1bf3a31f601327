/*
 * A kernel's buffer argument as clbt last set it (bound_buffer.c), so that
 * it is set again only when it changes: drivers charge every enqueue for
 * every argument, but not for a set that is skipped, and a steady loop
 * sets nothing. A handle alone cannot say that nothing changed: OpenCL
 * does not say that a kernel keeps its buffer arguments alive, a driver
 * may take a buffer's device address when it is set, and a buffer freed
 * after its set can come back as a new one at the same handle. So each
 * buffer comes with the serial of the record that holds a reference to
 * it (a known buffer's, a staging slot's), and the set is skipped only
 * while that same record holds it.
 */
#ifndef CLBT_BOUND_BUFFER_H
#define CLBT_BOUND_BUFFER_H

#include "clbt/clbt.h"

#include <stdbool.h>

typedef struct clbt__bound_buffer {
  cl_mem buffer;   /* the kernel's argument, when set */
  uint64_t serial; /* of the record that holds it; 0 for NULL */
  bool set;        /* false: the argument is unknown */
} clbt__bound_buffer;

/*
 * Sets argument `index` of kernel to buffer (NULL: none), held by the
 * record of `serial` (serials of one source are never reused; 0: no
 * record holds it, and it is set every time), unless it is that already.
 * After a failure the argument is unknown, and the next call sets it.
 */
clbt_status clbt__bound_buffer_set(cl_kernel kernel, cl_uint index,
                                   clbt__bound_buffer *bound, cl_mem buffer,
                                   uint64_t serial);

#endif /* CLBT_BOUND_BUFFER_H */
