/* Status codes and the per-thread message that details the last failure. */
#include "base/status.h"

#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[CLBT_LAST_ERROR_SIZE];

const char *clbt_status_string(clbt_status status) {
  switch (status) {
#define CLBT__STATUS_TEXT(name, value, text) \
  case CLBT_##name:                          \
    return text;
    CLBT_STATUS_MAP(CLBT__STATUS_TEXT)
#undef CLBT__STATUS_TEXT
  }
  return "unknown status";
}

const char *clbt_status_name(clbt_status status) {
  switch (status) {
#define CLBT__STATUS_NAME(name, value, text) \
  case CLBT_##name:                          \
    return "CLBT_" #name;
    CLBT_STATUS_MAP(CLBT__STATUS_NAME)
#undef CLBT__STATUS_NAME
  }
  return "CLBT_UNKNOWN_STATUS";
}

const char *clbt_last_error(void) { return last_error; }

/*
 * OpenCL's codes (and CL_OUT_OF_HOST_MEMORY) mean the device or the host
 * failed; clbt's own codes, from CLBT_NULL_ARGUMENT down, mean the caller
 * passed something clbt refuses, which the caller learns from the status.
 */
static bool is_opencl_status(clbt_status status) {
  return status < 0 && status > CLBT_NULL_ARGUMENT;
}

clbt_status clbt__fail(clbt_status status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
  if (is_opencl_status(status)) clbt__log(CLBT_LOG_ERROR, "%s", last_error);
  return status;
}

clbt_status clbt__cl_fail(cl_int error, const char *call) {
  size_t name_length = strcspn(call, "(");
  clbt_status status = (clbt_status)error;
  /* "CLBT_CL_INVALID_VALUE" reads as the OpenCL name without our prefix. */
  const char *name = clbt_status_name(status) + strlen("CLBT_");
  return clbt__fail(status, "%.*s failed: %s (%d)", (int)name_length, call,
                    name, (int)error);
}

clbt_status clbt__prefix_error(clbt_status status, const char *format, ...) {
  char prefix[256];
  va_list args;
  va_start(args, format);
  vsnprintf(prefix, sizeof prefix - 2, format, args);
  va_end(args);
  strcat(prefix, ": ");

  /* Shift the detail right to make room; its tail gives way if need be. */
  size_t prefix_length = strlen(prefix);
  size_t detail_length = strlen(last_error);
  if (prefix_length + detail_length >= sizeof last_error)
    detail_length = sizeof last_error - 1 - prefix_length;
  memmove(last_error + prefix_length, last_error, detail_length);
  memcpy(last_error, prefix, prefix_length);
  last_error[prefix_length + detail_length] = '\0';
  return status;
}
