/* The library's OpenCL calls, counted (see call_counter.h). */
#include "bench/call_counter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each wrapper passes its own string literal, so a call finds its counter
   by the literal's address in a table twice as large as there can be
   functions: a count costs a hash and a probe or two, nanoseconds beside
   the driver's microseconds. */
#define SLOTS (2 * CALL_COUNTER_MAX_FUNCTIONS)

static struct {
  const char *key;
  size_t function;
} slots[SLOTS];
static const char *names[CALL_COUNTER_MAX_FUNCTIONS];
static call_counts counts;

bool call_counter_available(void) {
#ifdef CLBT_TOOL_COUNTS_CALLS
  return true;
#else
  return false;
#endif
}

/* Only the functions seen so far: a snapshot costs tens of nanoseconds. */
void call_counter_read(call_counts *snapshot) {
  snapshot->num_functions = counts.num_functions;
  memcpy(snapshot->calls, counts.calls,
         counts.num_functions * sizeof counts.calls[0]);
  snapshot->created = counts.created;
  snapshot->retained = counts.retained;
  snapshot->released = counts.released;
}

const char *call_counter_function(size_t i) {
  return i < counts.num_functions ? names[i] : "?";
}

/* The number of the function named name, numbering it on its first call
   (under another literal of the same text it keeps its number). */
static size_t new_function(const char *name) {
  for (size_t i = 0; i < counts.num_functions; ++i)
    if (strcmp(names[i], name) == 0) return i;
  if (counts.num_functions == CALL_COUNTER_MAX_FUNCTIONS) {
    fprintf(stderr, "call counter: more than %d OpenCL functions\n",
            CALL_COUNTER_MAX_FUNCTIONS);
    abort();
  }
  names[counts.num_functions] = name;
  return counts.num_functions++;
}

static size_t function_number(const char *name) {
  uint64_t hash = (uint64_t)(uintptr_t)name * UINT64_C(0x9E3779B97F4A7C15);
  size_t s = (size_t)(hash >> 32) % SLOTS;
  while (slots[s].key && slots[s].key != name) s = (s + 1) % SLOTS;
  if (!slots[s].key) {
    slots[s].key = name;
    slots[s].function = new_function(name);
  }
  return slots[s].function;
}

bool call_counter_opencl_call(const char *function, const void *call_site) {
  (void)call_site;
  ++counts.calls[function_number(function)];
  return false;
}

void call_counter_object_created(const void *object) {
  (void)object;
  ++counts.created;
}

void call_counter_object_retained(const void *object) {
  (void)object;
  ++counts.retained;
}

void call_counter_object_released(const void *object) {
  (void)object;
  ++counts.released;
}
