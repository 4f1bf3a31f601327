/*
 * Staging: the host packets that commits hand to non-blocking commands.
 * An OpenCL write reads its host memory at some later time, so a packet
 * stays untouched until every command reading it has ended. Instead of
 * waiting for that, a commit takes another slot: no enqueue ever waits on
 * the device, and a caller that keeps N commits in flight keeps N packets.
 *
 * Reaping is also where a commit that failed after its enqueue returned
 * (a wait-list event that ended in error, say) comes to light: its
 * readers end with a negative status, and the table is marked stale so
 * that the next commit rewrites what never arrived.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#define CLBT__MAX_READERS \
  (sizeof ((clbt__staging *)0)->readers / sizeof(cl_event))

/* The smallest packet a slot gets, in 32-bit words. */
#define CLBT__MIN_PACKET_WORDS 256

static bool in_flight(const clbt__staging *slot) {
  return slot->readers[0] != NULL;
}

static void forget_readers(clbt__staging *slot) {
  for (size_t i = 0; i < CLBT__MAX_READERS && slot->readers[i]; ++i) {
    clReleaseEvent(slot->readers[i]);
    slot->readers[i] = NULL;
  }
}

/* Whether every reader of a slot has ended, and whether one failed. */
static clbt_status readers_ended(const clbt__staging *slot, bool *ended,
                                 bool *failed) {
  clbt_status status = CLBT_SUCCESS;
  *ended = true;
  for (size_t i = 0; i < CLBT__MAX_READERS && slot->readers[i]; ++i) {
    cl_int execution = CL_QUEUED;
    CLBT__CL_TRY(clGetEventInfo(slot->readers[i],
                                CL_EVENT_COMMAND_EXECUTION_STATUS,
                                sizeof execution, &execution, NULL),
                 status, done);
    if (execution > CL_COMPLETE) *ended = false;
    if (execution < 0) *failed = true;
  }
done:
  return status;
}

clbt_status clbt__staging_reap(clbt__staging_pool *pool, bool *failed) {
  for (size_t s = 0; s < pool->count; ++s) {
    clbt__staging *slot = &pool->slots[s];
    if (!in_flight(slot)) continue;
    bool ended = false, slot_failed = false;
    clbt_status status = readers_ended(slot, &ended, &slot_failed);
    if (status) return status;
    if (!ended) continue;
    *failed = *failed || slot_failed;
    forget_readers(slot);
  }
  return CLBT_SUCCESS;
}

/* A free slot, the first large enough if any is; NULL when all are busy. */
static clbt__staging *free_slot(clbt__staging_pool *pool, size_t words) {
  clbt__staging *found = NULL;
  for (size_t s = 0; s < pool->count; ++s) {
    clbt__staging *slot = &pool->slots[s];
    if (in_flight(slot)) continue;
    if (slot->capacity >= words) return slot;
    if (!found) found = slot;
  }
  return found;
}

static clbt_status add_slot(clbt__staging_pool *pool, clbt__staging **slot) {
  clbt__staging *slots =
      realloc(pool->slots, (pool->count + 1) * sizeof *slots);
  if (!slots)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for staging slot %zu", pool->count + 1);
  pool->slots = slots;
  *slot = &slots[pool->count++];
  memset(*slot, 0, sizeof **slot);
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

static clbt_status reserve_buffer(clbt__staging *slot, cl_context context,
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
  return CLBT_SUCCESS;
}

clbt_status clbt__staging_acquire(clbt__staging_pool *pool, cl_context context,
                                  size_t words, bool on_device,
                                  clbt__staging **slot) {
  clbt__staging *found = free_slot(pool, words);
  clbt_status status = found ? CLBT_SUCCESS : add_slot(pool, &found);
  if (!status) status = reserve_packet(found, words);
  if (!status && on_device) status = reserve_buffer(found, context, words);
  if (!status) *slot = found;
  return status;
}

void clbt__staging_add_reader(clbt__staging *slot, cl_event reader) {
  for (size_t i = 0; i < CLBT__MAX_READERS; ++i)
    if (!slot->readers[i]) {
      slot->readers[i] = reader;
      return;
    }
}

/*
 * A reader that ended in error has ended all the same. Any other failure to
 * wait is logged; the packet is freed regardless, as nothing better can be
 * done with it when its table goes.
 */
static void wait_for_readers(const clbt__staging *slot) {
  for (size_t i = 0; i < CLBT__MAX_READERS && slot->readers[i]; ++i) {
    cl_int error = clWaitForEvents(1, &slot->readers[i]);
    if (error && error != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
      clbt__cl_fail(error, "clWaitForEvents");
  }
}

void clbt__staging_pool_free(clbt__staging_pool *pool) {
  for (size_t s = 0; s < pool->count; ++s) {
    clbt__staging *slot = &pool->slots[s];
    wait_for_readers(slot);
    forget_readers(slot);
    if (slot->buffer) clReleaseMemObject(slot->buffer);
    free(slot->packet);
  }
  free(pool->slots);
  memset(pool, 0, sizeof *pool);
}
