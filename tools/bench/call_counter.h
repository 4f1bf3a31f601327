/*
 * The library's OpenCL calls, counted. Where the build can make one
 * (cmake/ClbtFaultInjection.cmake), the clbt tool links a copy of the
 * library whose every cl* call goes through a wrapper generated from cl.h
 * (cmake/fault_injection_wrappers.cmake) that reports it here before it
 * calls the driver, so `clbt bench` can say which OpenCL functions a
 * library call made, and how often, on any driver. Only the library's
 * calls are counted: the tool's own go to the driver directly. Counting
 * never fails a call. Single-threaded, as the tool is.
 */
#ifndef TOOL_CALL_COUNTER_H
#define TOOL_CALL_COUNTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clbt/clbt.h"

/* Distinct OpenCL functions counted at most; cl.h declares about 100, the
   library calls a few dozen. */
#define CALL_COUNTER_MAX_FUNCTIONS 64

/* Everything counted since the process started. Functions are numbered in
   the order of their first call; a later snapshot extends an earlier one. */
typedef struct call_counts {
  size_t num_functions;
  uint64_t calls[CALL_COUNTER_MAX_FUNCTIONS];
  /* objects the library was handed by the driver (clCreate*, an enqueue's
     event), references it took (clRetain*) and gave back (clRelease*) */
  uint64_t created, retained, released;
} call_counts;

/* Whether this build counts: false where the tool links the plain library,
   and every count stays 0. */
bool call_counter_available(void);

/* The counts so far: calls[0 .. num_functions - 1] and the objects; the
   rest of calls is left as it was. */
void call_counter_read(call_counts *counts);

/* Function number i's name; i < a snapshot's num_functions. */
const char *call_counter_function(size_t i);

/* ---- called by the generated wrappers ------------------------------------ */

/* What a failed call would return; the counter fails none. */
#define CALL_COUNTER_INJECTED_ERROR CL_OUT_OF_RESOURCES

/* Counts a call of function (the wrapper's string, the same every call);
   false: let it through. */
bool call_counter_opencl_call(const char *function, const void *call_site);
void call_counter_object_created(const void *object);
void call_counter_object_retained(const void *object);
void call_counter_object_released(const void *object);

#endif /* TOOL_CALL_COUNTER_H */
