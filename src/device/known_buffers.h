/* The caller's buffers a handle has checked lately (known_buffers.c). */
#ifndef CLBT_KNOWN_BUFFERS_H
#define CLBT_KNOWN_BUFFERS_H

#include "clbt/clbt.h"
#include "base/tuning.h"

/*
 * The caller's buffers a handle (a table engine, a KV cache) has checked
 * lately, with their sizes: a steady loop passes the same few every step,
 * and asking the driver about each costs two calls a buffer a step. The
 * handle keeps a reference to each, so that a released buffer's handle
 * cannot come back as another buffer's while it is known.
 */
typedef struct clbt__known_buffer {
  cl_mem buffer;
  size_t size;
  cl_mem_flags flags; /* as created: CL_MEM_READ_ONLY and the rest */
  cl_mem parent;   /* the buffer it is a sub-buffer of, or NULL */
  uint64_t serial; /* this record's, never another's of the handle */
} clbt__known_buffer;
typedef struct clbt__known_buffers {
  clbt__known_buffer buffers[CLBT__KNOWN_BUFFERS];
  uint32_t next;         /* the oldest, replaced next */
  uint64_t last_serial;  /* the newest record's */
} clbt__known_buffers;

/*
 * A buffer's size, from the known buffers, or else asked of the driver
 * (with the buffer it is a sub-buffer of), its context checked against the
 * device's (CLBT_CONTEXT_MISMATCH: "<name> belongs to another OpenCL
 * context than the <owner>'s device"), and recorded in place of the oldest.
 */
clbt_status clbt__known_buffer_size(const clbt_device *device,
                                    clbt__known_buffers *known, cl_mem buffer,
                                    const char *name, const char *owner,
                                    size_t *size);

/*
 * Refuses a caller's buffer that a clbt kernel writes, named `name`, when
 * it was made CL_MEM_READ_ONLY (CLBT_READ_ONLY_BUFFER): OpenCL leaves a
 * kernel's store there undefined, and a strict driver may fault or drop
 * it. Its flags come from the known buffers (known may be NULL) when it is
 * one, else from the driver. Every caller buffer clbt writes is checked
 * here, before anything is enqueued.
 */
clbt_status clbt__check_writable(const clbt__known_buffers *known,
                                 cl_mem buffer, const char *name);

/* The buffer a known buffer is a sub-buffer of; NULL for a buffer of its
   own or one not known. */
cl_mem clbt__known_buffer_parent(const clbt__known_buffers *known,
                                 cl_mem buffer);

/* The serial of a known buffer's record, which holds a reference to it
   until the record is replaced (device/bound_buffer.h); 0 for a buffer
   not known. */
uint64_t clbt__known_buffer_serial(const clbt__known_buffers *known,
                                   cl_mem buffer);

/* Releases every known buffer. */
void clbt__known_buffers_release(clbt__known_buffers *known);

#endif /* CLBT_KNOWN_BUFFERS_H */
