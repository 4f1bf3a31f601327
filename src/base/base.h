/*
 * The bottom layer of clbt's sources: errors, logging and the reading of a
 * caller's config structs, which the other files use. Not installed;
 * internal names carry the clbt__ prefix. The layers, each header
 * including the one below: base.h (status.c, log.c, version.c, width.c,
 * config.c), devices.h (device.c, device_select.c, device_settings.c,
 * driver_lock.c, program.c, binary_cache.c, queue.c, known_buffers.c),
 * engine.h (group.c, table_rows.c, staging.c, commit.c, launch.c,
 * batch.c, engine.c), and the public surfaces over the engine (table.c,
 * multi_table.c, reference.c); the KV-cache write (kv_cache.c) is a public
 * surface over the device layer alone.
 */
#ifndef CLBT_BASE_H
#define CLBT_BASE_H

#include "clbt/clbt.h"

#include <stdbool.h>

#if defined(__GNUC__)
#define CLBT__PRINTF(fmt_index, first_arg) \
  __attribute__((format(printf, fmt_index, first_arg)))
#else
#define CLBT__PRINTF(fmt_index, first_arg)
#endif

/* ---- errors (status.c) -------------------------------------------------- */

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

/* ---- logging (log.c) ---------------------------------------------------- */

/* True when a message of this level would be delivered. */
bool clbt__log_enabled(clbt_log_level level);

/* Formats a message and delivers it when its level is enabled. */
void clbt__log(clbt_log_level level, const char *format, ...)
    CLBT__PRINTF(2, 3);

/* ---- a caller's config structs (config.c) ------------------------------ */

/*
 * Reads a caller's config, of whichever version's layout its struct_size
 * says, into the layout this library declares (struct_size then is
 * sizeof): the fields the caller's struct has are copied, the others are
 * 0, their default. Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL
 * config; CLBT_INVALID_CONFIG for a struct_size that is no version's
 * layout (one that ends inside a field, say) or a field of a later version
 * that is not 0. Every public entry point that takes a struct the caller
 * fills reads it through these first.
 */
clbt_status clbt__table_config_read(const clbt_table_config *given,
                                    clbt_table_config *out);

/*
 * The same for a multi-group config, whose groups it checks too (each
 * group's struct_size must be the first's). out->groups still points at
 * the caller's array, whose elements may be larger or smaller than
 * clbt_group_config: read a group only with clbt__group_config_at.
 */
clbt_status clbt__multi_table_config_read(const clbt_multi_table_config *given,
                                          clbt_multi_table_config *out);

/* Reads a caller's clbt_step into this library's layout, as the configs. */
clbt_status clbt__step_read(const clbt_step *given, clbt_step *out);

/* The same for a token-slots request, whose first layout is 0.4's;
   CLBT_NULL_ARGUMENT names it "request". */
clbt_status clbt__token_slots_request_read(
    const clbt_token_slots_request *given, clbt_token_slots_request *out);

/* Group g of a config read by clbt__multi_table_config_read, in our layout. */
clbt_group_config clbt__group_config_at(const clbt_multi_table_config *config,
                                        uint32_t g);

/*
 * The same for a host step (clbt_table_compute_step_host), whose first
 * layout is 0.3's; CLBT_NULL_ARGUMENT names it "step".
 */
clbt_status clbt__host_step_read(const clbt_host_step *given,
                                 clbt_host_step *out);

/* The same for a multi-group host step, whose first layout is 0.4's. */
clbt_status clbt__multi_host_step_read(const clbt_multi_host_step *given,
                                       clbt_multi_host_step *out);

/* The same for an export request, whose first layout is 0.5's;
   CLBT_NULL_ARGUMENT names it "request". */
clbt_status clbt__export_request_read(const clbt_export_request *given,
                                      clbt_export_request *out);

/* The same for a KV cache's config and write (kv_cache.c), whose first
   layouts are 0.5's; CLBT_NULL_ARGUMENT names them "config" and "write". */
clbt_status clbt__kv_cache_config_read(const clbt_kv_cache_config *given,
                                       clbt_kv_cache_config *out);
clbt_status clbt__kv_write_read(const clbt_kv_write *given,
                                clbt_kv_write *out);

#endif /* CLBT_BASE_H */
