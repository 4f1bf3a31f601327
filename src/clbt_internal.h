/*
 * Declarations shared by clbt's source files; not installed. Internal names
 * carry the clbt__ prefix.
 */
#ifndef CLBT_INTERNAL_H
#define CLBT_INTERNAL_H

#include "clbt/clbt.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <threads.h>

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

/* ---- devices (device.c, device_select.c, program.c) --------------------- */

typedef struct clbt__program_entry clbt__program_entry;

/* What the library needs to know of a device, read once when it opens. */
typedef struct clbt__device_properties {
  cl_device_type type;
  cl_uint compute_units;
  size_t max_work_group_size;
} clbt__device_properties;

struct clbt_device {
  atomic_uint references; /* the caller's one, plus one per table */
  cl_context context;
  cl_device_id id;
  cl_command_queue queue;
  clbt__device_properties properties;
  mtx_t programs_lock;            /* guards programs */
  clbt__program_entry *programs;  /* built programs, keyed by options */
};

/* Takes a reference for a table that uses the device. */
void clbt__device_retain(clbt_device *device);

/*
 * Finds the device a selector picks (NULL or "": the default rule). source
 * names where the selector came from, for messages ("CLBT_DEVICE").
 */
clbt_status clbt__select_device(const char *selector, const char *source,
                                cl_platform_id *platform, cl_device_id *device);

/* Frees every cached program of a device (when the device is freed). */
void clbt__programs_release(clbt_device *device);

/* The specialisation of the slot-mapping kernel: its -D defines. */
typedef struct clbt__kernel_spec {
  uint32_t kv_block_size;
  uint32_t blocks_per_kv_block;
  uint32_t cp_world_size;
  uint32_t cp_rank;
  uint32_t cp_interleave_size;
} clbt__kernel_spec;

/*
 * Returns the program built for spec on device, building and caching it on
 * the first request; the cache keeps the reference. Thread-safe.
 */
clbt_status clbt__program_get(clbt_device *device, const clbt__kernel_spec *spec,
                              cl_program *program);

/* The slot-mapping kernel's name in cl/slot_mapping.cl. */
#define CLBT__SLOT_MAPPING_KERNEL "clbt_slot_mapping"

/* ---- tables (table.c, table_rows.c, multi_table.c, reference.c) --------- */

/* A table config with every default filled in and every rule checked. */
typedef struct clbt__table_layout {
  clbt__kernel_spec spec;
  uint32_t kernel_block_size;
  uint32_t width;               /* kernel blocks per row */
  uint32_t max_num_reqs;
  uint32_t max_num_batched_tokens;
  clbt_slot_mode slot_mode;
} clbt__table_layout;

/* Checks a config and derives the table's layout from it. */
clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout);

struct clbt_table {
  clbt_device *device;
  clbt__table_layout layout;
  int32_t *rows;           /* [max_num_reqs][width] */
  uint32_t *row_lengths;   /* [max_num_reqs], kernel blocks */
  cl_mem device_rows;
  cl_mem device_row_lengths;
  cl_mem slot_mapping;
  cl_mem rejected_tokens;
  cl_kernel kernel;
  size_t global_size;      /* the kernel's launch geometry */
  size_t local_size;
};

/*
 * Each row operation is a check, which changes nothing, and an apply, which
 * cannot fail: the multi-group table checks every group before it applies
 * any, so that its operations are all or nothing.
 */
clbt_status clbt__check_append(const clbt_table *table, uint32_t row,
                               const int32_t *block_ids, size_t n,
                               bool replace);
void clbt__apply_append(clbt_table *table, uint32_t row,
                        const int32_t *block_ids, size_t n, bool replace);
clbt_status clbt__check_row(const clbt_table *table, const char *name,
                            uint32_t row);
/* Checks the two rows of a move or swap; a NULL table fails too. */
clbt_status clbt__check_pair(const clbt_table *table, const char *first_name,
                             uint32_t first, const char *second_name,
                             uint32_t second);
void clbt__apply_clear_row(clbt_table *table, uint32_t row);
void clbt__apply_move_row(clbt_table *table, uint32_t src, uint32_t dst);
void clbt__apply_swap_row(clbt_table *table, uint32_t a, uint32_t b);

/* Checks the arguments of a slot-mapping call against a table's bounds. */
clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens);

/* ---- logging (log.c) ---------------------------------------------------- */

/* True when a message of this level would be delivered. */
bool clbt__log_enabled(clbt_log_level level);

/* Formats a message and delivers it when its level is enabled. */
void clbt__log(clbt_log_level level, const char *format, ...)
    CLBT__PRINTF(2, 3);

/* ---- the on-disk program cache (binary_cache.c) ------------------------- */

#define CLBT__CACHE_PATH_SIZE 4096

/* Where CLBT_CACHE_DIR keeps one program, and the key that names it. */
typedef struct clbt__cache_entry {
  char path[CLBT__CACHE_PATH_SIZE];
  uint64_t key;
} clbt__cache_entry;

/*
 * Finds the entry for a program built from source with options on device.
 * Returns false when the cache is off (CLBT_CACHE_DIR unset or empty) or
 * the entry cannot be named (logged as a warning).
 */
bool clbt__binary_cache_locate(const clbt_device *device, const char *source,
                               size_t length, const char *options,
                               clbt__cache_entry *entry);

/*
 * Returns the entry's program, created from its binary and built with
 * options, or NULL when there is no entry or it is unusable: damaged,
 * another key's, or refused by the driver; an unusable entry is deleted
 * and logged as a warning. Never fails otherwise: NULL means "build from
 * source".
 */
cl_program clbt__binary_cache_load(const clbt_device *device,
                                   const clbt__cache_entry *entry,
                                   const char *options);

/*
 * Writes a built program's binary to the entry through a temporary file
 * and a rename, creating missing directories. A failure is logged as a
 * warning and otherwise ignored.
 */
void clbt__binary_cache_store(cl_program program,
                              const clbt__cache_entry *entry);

#endif /* CLBT_INTERNAL_H */
