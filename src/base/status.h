/*
 * Errors (status.c): a status code plus this thread's message, and the
 * checks of every OpenCL call. The bottom of clbt's sources, with log.h;
 * not installed, and every internal name carries the clbt__ prefix.
 */
#ifndef CLBT_STATUS_H
#define CLBT_STATUS_H

#include "clbt/clbt.h"

#if defined(__GNUC__)
#define CLBT__PRINTF(fmt_index, first_arg) \
  __attribute__((format(printf, fmt_index, first_arg)))
#else
#define CLBT__PRINTF(fmt_index, first_arg)
#endif

/* Records a formatted message as this thread's last error; returns status. */
clbt_status clbt__fail(clbt_status status, const char *format, ...)
    CLBT__PRINTF(2, 3);

/*
 * Records that an OpenCL call failed ("clCreateBuffer failed:
 * CL_OUT_OF_RESOURCES (-5)"); returns the OpenCL code as a status. call is
 * the call's source text; only the function name is kept.
 */
clbt_status clbt__cl_fail(cl_int error, const char *call);

/* Puts "<prefix>: " in front of this thread's last error; returns status. */
clbt_status clbt__prefix_error(clbt_status status, const char *format, ...)
    CLBT__PRINTF(2, 3);

/*
 * Checks an OpenCL error code; on failure records it against the call named
 * call_name, stores the status in `status` and jumps to `label`, the
 * function's one cleanup path.
 */
#define CLBT__CL_CHECK(error, call_name, status, label)   \
  do {                                                    \
    cl_int clbt__error = (error);                         \
    if (clbt__error != CL_SUCCESS) {                      \
      (status) = clbt__cl_fail(clbt__error, call_name);   \
      goto label;                                         \
    }                                                     \
  } while (0)

/* Runs an OpenCL call that returns its error code, as CLBT__CL_CHECK. */
#define CLBT__CL_TRY(call, status, label) \
  CLBT__CL_CHECK((call), #call, status, label)

#endif /* CLBT_STATUS_H */
