/*
 * Staging (staging.c): the host packets that commits hand to non-blocking
 * writes, each kept until the command that reads it has ended.
 */
#ifndef CLBT_STAGING_H
#define CLBT_STAGING_H

#include "base/tuning.h"

/*
 * A host packet that enqueued commands read, and (for packets the kernel
 * reads from the device) the buffer it is uploaded to. A slot is in flight
 * until its reader, the last command that reads its host memory, has
 * ended; the queue is in order, so the commands before it have too.
 */
typedef struct clbt__staging {
  uint32_t *packet;
  size_t capacity;          /* 32-bit words of packet */
  cl_mem buffer;            /* NULL until a packet is uploaded */
  size_t buffer_capacity;   /* 32-bit words of buffer */
  uint64_t buffer_serial;   /* buffer's, never another's of the pool */
  cl_event reader;          /* NULL: not in flight */
} clbt__staging;

/*
 * An engine's staging slots: those in flight, oldest first, in a ring, and
 * up to CLBT__IDLE_SLOTS free ones. A commit takes a free slot or makes
 * one, so no enqueue waits for the device: the pool holds one packet per
 * commit still in flight, and gives back all but CLBT__IDLE_SLOTS once they
 * end.
 */
typedef struct clbt__staging_pool {
  clbt__staging *ring;      /* [first, first + busy), modulo capacity */
  size_t capacity, first, busy;
  size_t taken;             /* acquired, not yet submitted or returned: the
                               ring keeps room for each */
  clbt__staging idle[CLBT__IDLE_SLOTS];
  size_t num_idle;
  uint64_t last_serial;     /* the newest buffer's */
} clbt__staging_pool;

/*
 * Frees the oldest slots whose reader has ended, stopping at the first
 * that has not: O(1) driver calls a commit. *failed becomes true when one
 * ended in error: what it carried never reached the device.
 */
clbt_status clbt__staging_reap(clbt__staging_pool *pool, bool *failed);

/*
 * Takes a free slot whose packet holds `words` (and, with on_device, a
 * device buffer of as many words in context), making one when none is
 * free, with room to be in flight: the caller submits it or returns it.
 */
clbt_status clbt__staging_acquire(clbt__staging_pool *pool, cl_context context,
                                  size_t words, bool on_device,
                                  clbt__staging *slot);

/* Puts a slot in flight until reader, whose reference it takes, ends. */
void clbt__staging_submit(clbt__staging_pool *pool, clbt__staging *slot,
                          cl_event reader);

/* Gives back a slot that nothing reads. */
void clbt__staging_return(clbt__staging_pool *pool, clbt__staging *slot);

/* Waits for every slot's reader, then frees the pool; a packet whose
   reader's end cannot be known is left allocated (logged), not freed. */
void clbt__staging_pool_free(clbt__staging_pool *pool);

#endif /* CLBT_STAGING_H */
