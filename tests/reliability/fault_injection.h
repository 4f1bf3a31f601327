/*
 * Fault injection: a copy of the library whose OpenCL calls and heap
 * allocations all come here first (cmake/fault_injection_wrappers.cmake
 * renames them in the library's objects), so that a test can make the Nth
 * call of a kind fail and count what the library holds afterwards. Only
 * the library's own calls are seen; the test's, Check's and PoCL's are not.
 * Single-threaded: one scenario at a time.
 */
#ifndef CLBT_FAULT_INJECTION_H
#define CLBT_FAULT_INJECTION_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum clbt_fault_kind {
  CLBT_FAULT_OPENCL,     /* every cl* call except releases */
  CLBT_FAULT_ALLOCATION, /* malloc, calloc, realloc, aligned_alloc, strdup */
  CLBT_FAULT_KINDS
} clbt_fault_kind;

/* What a failed OpenCL call returns, or stores in *errcode_ret. */
#define CLBT_FAULT_INJECTED_ERROR CL_OUT_OF_RESOURCES

/*
 * Starts a run: zeroes the call counts, forgets the objects and allocations
 * seen, and arms the fail_at-th call (1-based) of kind to fail; 0 fails
 * none.
 */
void clbt_fault_start(clbt_fault_kind kind, unsigned long fail_at);

/* Lets every later call through; the count of calls goes on. */
void clbt_fault_disarm(void);

/* Calls of kind that could have been failed since the run started. */
unsigned long clbt_fault_calls(clbt_fault_kind kind);

/* The function whose call was failed in this run; NULL before it fires. */
const char *clbt_fault_failed_function(void);

/*
 * What the library holds: OpenCL objects it created or retained and has
 * not released, heap blocks it allocated and has not freed. A release or
 * free of something it did not hold counts as an imbalance.
 */
size_t clbt_fault_live_objects(void);
size_t clbt_fault_live_allocations(void);
size_t clbt_fault_imbalances(void);

/* Since the process started: distinct call sites failed, and whether a
   call to function was failed. */
size_t clbt_fault_sites_failed(clbt_fault_kind kind);
bool clbt_fault_function_failed(clbt_fault_kind kind, const char *function);

/* ---- called by the generated wrappers ----------------------------------- */

/* Counts an OpenCL call; true when it is the one to fail. */
bool clbt_fault_opencl_call(const char *function, const void *call_site);
void clbt_fault_object_created(const void *object);
void clbt_fault_object_retained(const void *object);
void clbt_fault_object_released(const void *object);

/* The library's allocators, renamed to these. */
void *clbt_fault_wrap_malloc(size_t size);
void *clbt_fault_wrap_calloc(size_t count, size_t size);
void *clbt_fault_wrap_realloc(void *block, size_t size);
void *clbt_fault_wrap_aligned_alloc(size_t alignment, size_t size);
char *clbt_fault_wrap_strdup(const char *text);
char *clbt_fault_wrap_strndup(const char *text, size_t size);
void clbt_fault_wrap_free(void *block);

#endif /* CLBT_FAULT_INJECTION_H */
