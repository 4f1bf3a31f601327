/*
 * Staging: the host packets that commits hand to non-blocking writes. An
 * OpenCL write reads its host memory at some later time, so a packet stays
 * untouched until its write has ended. Instead of waiting for that, a
 * commit takes another slot: no enqueue ever waits on the device, and a
 * caller that keeps N commits in flight keeps N packets, until they end.
 *
 * Slots in flight sit in a ring, oldest first. The queue is in order, so
 * they end in that order (a command failed by its wait list ends early, and
 * so does every command queued behind it): reaping asks the oldest, frees
 * it if it ended and asks the next, and stops at the first that has not,
 * which makes a commit's reaping O(1) driver calls however many are in
 * flight. Reaping is also where a commit that failed after its enqueue
 * returned (a wait-list event that ended in error, say) comes to light:
 * its write ended with a negative status, and the engine is marked stale so
 * that the next commit rewrites what never arrived.
 */
#include "engine/staging.h"

#include "base/log.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

/* The smallest packet a slot gets, in 32-bit words. */
#define CLBT__MIN_PACKET_WORDS 256

static void free_slot(clbt__staging *slot) {
  if (slot->buffer) clReleaseMemObject(slot->buffer);
  free(slot->packet);
  memset(slot, 0, sizeof *slot);
}

/* Keeps an ended slot for reuse, or frees it past CLBT__IDLE_SLOTS. */
static void keep_idle(clbt__staging_pool *pool, clbt__staging *slot) {
  slot->reader = NULL;
  if (pool->num_idle < CLBT__IDLE_SLOTS)
    pool->idle[pool->num_idle++] = *slot;
  else
    free_slot(slot);
}

static clbt__staging *busy_slot(clbt__staging_pool *pool, size_t i) {
  return &pool->ring[(pool->first + i) % pool->capacity];
}

/* Whether a slot's reader has ended, and whether it failed. */
static clbt_status reader_ended(const clbt__staging *slot, bool *ended,
                                bool *failed) {
  cl_int execution = CL_QUEUED;
  cl_int error =
      clGetEventInfo(slot->reader, CL_EVENT_COMMAND_EXECUTION_STATUS,
                     sizeof execution, &execution, NULL);
  if (error) return clbt__cl_fail(error, "clGetEventInfo");
  *ended = execution <= CL_COMPLETE;
  *failed = execution < 0;
  return CLBT_SUCCESS;
}

clbt_status clbt__staging_reap(clbt__staging_pool *pool, bool *failed) {
  while (pool->busy > 0) {
    clbt__staging *oldest = busy_slot(pool, 0);
    bool ended = false, oldest_failed = false;
    clbt_status status = reader_ended(oldest, &ended, &oldest_failed);
    if (status) return status;
    if (!ended) break;
    *failed = *failed || oldest_failed;
    clReleaseEvent(oldest->reader);
    keep_idle(pool, oldest);
    pool->first = (pool->first + 1) % pool->capacity;
    --pool->busy;
  }
  /* A deep burst of commits in flight leaves no large ring behind it. */
  if (pool->busy == 0 && pool->taken == 0 &&
      pool->capacity > CLBT__KEPT_RING) {
    free(pool->ring);
    pool->ring = NULL;
    pool->capacity = pool->first = 0;
  }
  return CLBT_SUCCESS;
}

/* Room in the ring for one more slot in flight than those in flight and
   taken: a call takes several (its WHOLE commits' and its upload's) before
   it submits any. */
static clbt_status reserve_ring(clbt__staging_pool *pool) {
  if (pool->busy + pool->taken < pool->capacity) return CLBT_SUCCESS;
  size_t capacity = pool->capacity ? 2 * pool->capacity : 4;
  clbt__staging *ring = malloc(capacity * sizeof *ring);
  if (!ring)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for %zu staging slots", capacity);
  for (size_t i = 0; i < pool->busy; ++i) ring[i] = *busy_slot(pool, i);
  free(pool->ring);
  pool->ring = ring;
  pool->capacity = capacity;
  pool->first = 0;
  return CLBT_SUCCESS;
}

static size_t grown(size_t capacity, size_t words) {
  capacity = capacity ? capacity : CLBT__MIN_PACKET_WORDS;
  while (capacity < words) capacity *= 2;
  return capacity;
}

static clbt_status reserve_packet(clbt__staging *slot, size_t words) {
  if (words <= slot->capacity) return CLBT_SUCCESS;
  size_t capacity = grown(slot->capacity, words);
  uint32_t *packet = realloc(slot->packet, capacity * sizeof *packet);
  if (!packet)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for a %zu-word commit packet", capacity);
  slot->packet = packet;
  slot->capacity = capacity;
  return CLBT_SUCCESS;
}

static clbt_status reserve_buffer(clbt__staging_pool *pool,
                                  clbt__staging *slot, cl_context context,
                                  size_t words) {
  if (words <= slot->buffer_capacity) return CLBT_SUCCESS;
  size_t capacity = grown(slot->buffer_capacity, words);
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                 capacity * sizeof(uint32_t), NULL, &error);
  if (error) return clbt__cl_fail(error, "clCreateBuffer");
  if (slot->buffer) clReleaseMemObject(slot->buffer);
  slot->buffer = buffer;
  slot->buffer_capacity = capacity;
  slot->buffer_serial = ++pool->last_serial;
  return CLBT_SUCCESS;
}

/* The idle slot that needs the least growing: the first large enough, else
   the largest; -1 when there is none. */
static int best_idle(const clbt__staging_pool *pool, size_t words) {
  int best = -1;
  for (size_t i = 0; i < pool->num_idle; ++i) {
    if (pool->idle[i].capacity >= words) return (int)i;
    if (best < 0 || pool->idle[i].capacity > pool->idle[best].capacity)
      best = (int)i;
  }
  return best;
}

clbt_status clbt__staging_acquire(clbt__staging_pool *pool, cl_context context,
                                  size_t words, bool on_device,
                                  clbt__staging *slot) {
  clbt_status status = reserve_ring(pool);
  if (status) return status;
  ++pool->taken;
  memset(slot, 0, sizeof *slot);
  int found = best_idle(pool, words);
  if (found >= 0) {
    *slot = pool->idle[found];
    pool->idle[found] = pool->idle[--pool->num_idle];
  }
  status = reserve_packet(slot, words);
  if (!status && on_device)
    status = reserve_buffer(pool, slot, context, words);
  if (status) clbt__staging_return(pool, slot);
  return status;
}

void clbt__staging_submit(clbt__staging_pool *pool, clbt__staging *slot,
                          cl_event reader) {
  /* acquire() made room in the ring. */
  slot->reader = reader;
  --pool->taken;
  *busy_slot(pool, pool->busy++) = *slot;
  memset(slot, 0, sizeof *slot);
}

void clbt__staging_return(clbt__staging_pool *pool, clbt__staging *slot) {
  --pool->taken;
  keep_idle(pool, slot);
  memset(slot, 0, sizeof *slot);
}

/*
 * Whether a slot's reader has ended, waiting for it. A reader that ended in
 * error has ended all the same. A wait that failed says nothing of the
 * write, which may still be reading the packet, so its status is then
 * polled until it ends; when that fails too the write's end is unknown.
 */
static bool wait_for_reader(const clbt__staging *slot) {
  cl_int error = clWaitForEvents(1, &slot->reader);
  if (!error || error == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    return true;
  clbt__cl_fail(error, "clWaitForEvents");
  for (;;) {
    bool ended = false, failed = false;
    if (reader_ended(slot, &ended, &failed)) return false;
    if (ended) return true;
    thrd_sleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
  }
}

/* A packet whose write may still read it is left to the process: freeing
   it would let the driver read freed memory. */
void clbt__staging_pool_free(clbt__staging_pool *pool) {
  for (size_t i = 0; i < pool->busy; ++i) {
    clbt__staging *slot = busy_slot(pool, i);
    if (!wait_for_reader(slot)) {
      clbt__log(CLBT_LOG_WARN, "a staging packet of %zu words is not freed: "
                "its write may still read it", slot->capacity);
      slot->packet = NULL;
    }
    clReleaseEvent(slot->reader);
    free_slot(slot);
  }
  for (size_t i = 0; i < pool->num_idle; ++i) free_slot(&pool->idle[i]);
  free(pool->ring);
  memset(pool, 0, sizeof *pool);
}
