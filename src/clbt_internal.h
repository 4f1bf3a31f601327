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

/* ---- devices (device.c, device_select.c, device_settings.c, program.c) -- */

typedef struct clbt__program_entry clbt__program_entry;

/* What the library needs to know of a device, read once when it opens. */
typedef struct clbt__device_properties {
  cl_device_type type;
  cl_uint compute_units;
  size_t max_work_group_size;
  cl_ulong local_mem_size;
  size_t base_address_alignment;  /* bytes; where sub-buffers may start */
} clbt__device_properties;

struct clbt_device {
  atomic_uint references; /* the caller's one, plus one per table */
  cl_context context;
  cl_device_id id;
  cl_command_queue queue;
  clbt__device_properties properties;
  mtx_t programs_lock;            /* guards programs and the settings */
  clbt__program_entry *programs;  /* built programs, keyed by options */
  /* The settings (device_settings.c); "": none. */
  char build_options[CLBT_BUILD_OPTIONS_SIZE]; /* appended to every build's */
  char cache_dir[CLBT_CACHE_DIR_SIZE];         /* the on-disk program cache */
};

/* Takes a reference for a table that uses the device. */
void clbt__device_retain(clbt_device *device);

/*
 * Gives a new handle the environment's settings (CLBT_BUILD_OPTIONS,
 * CLBT_CACHE_DIR); CLBT_INVALID_ARGUMENT for a value too long to keep.
 */
clbt_status clbt__device_settings_init(clbt_device *device);

/*
 * Finds the device a selector picks (NULL or "": the default rule). source
 * names where the selector came from, for messages ("CLBT_DEVICE").
 */
clbt_status clbt__select_device(const char *selector, const char *source,
                                cl_platform_id *platform, cl_device_id *device);

/* Frees every cached program of a device (when the device is freed). */
void clbt__programs_release(clbt_device *device);

/* The kernel sources in cl/. */
typedef enum clbt__source {
  CLBT__SOURCE_SLOT_MAPPING,
  CLBT__SOURCE_COMMIT_SCATTER
} clbt__source;

/*
 * The bytes a source's specific options take at most, with their NUL: eight
 * groups of five numbers of at most ten digits and the rest take about 630.
 * With clbt's common options and the device's build options they fit in
 * CLBT_PROGRAM_OPTIONS_SIZE (program.c checks).
 */
#define CLBT__SPECIFIC_OPTIONS_SIZE 704

/*
 * Returns the program of a source built with clbt's common options,
 * specific_options (shorter than CLBT__SPECIFIC_OPTIONS_SIZE) and the
 * device's build options, building and caching it on the first request;
 * the cache keeps the reference. Thread-safe.
 */
clbt_status clbt__program_get(clbt_device *device, clbt__source source,
                              const char *specific_options,
                              cl_program *program);

/*
 * The launch geometry for `items` work-items of a kernel whose own limit is
 * kernel_max_group: one item per work-item on a GPU, one work-group on a
 * CPU (docs/design.md says why).
 */
void clbt__geometry(const clbt_device *device, size_t kernel_max_group,
                    size_t items, size_t *global_size, size_t *local_size);

/* Checks an event wait list as clEnqueue* would, before anything runs. */
clbt_status clbt__check_wait_list(cl_uint num_events,
                                  const cl_event *wait_list);

/*
 * For a call with no work to enqueue: a marker that honours the wait list
 * and hands back the event asked for; nothing when neither is given.
 */
clbt_status clbt__enqueue_marker(cl_command_queue queue, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

/* ---- a caller's config structs (config.c) ------------------------------ */

/*
 * Reads a caller's config, of whichever version's layout its struct_size
 * says, into the layout this library declares (struct_size then is
 * sizeof): the fields the caller's struct has are copied, the others are
 * 0, their default. Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL
 * config; CLBT_INVALID_CONFIG for a struct_size clbt cannot read or a
 * field of a later version that is not 0. Every public entry point that
 * takes a config reads it through these first.
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

/* Group g of a config read by clbt__multi_table_config_read, in our layout. */
clbt_group_config clbt__group_config_at(const clbt_multi_table_config *config,
                                        uint32_t g);

/* ---- tables (table.c, table_rows.c, commit.c, launch.c, multi_table.c,
        reference.c) ------------------------------------------------------- */

/* What specialises the slot-mapping kernel for one group: its -D values. */
typedef struct clbt__group_spec {
  uint32_t kv_block_size;
  uint32_t blocks_per_kv_block;
  uint32_t cp_world_size;
  uint32_t cp_rank;
  uint32_t cp_interleave_size;
} clbt__group_spec;

/* A table config with every default filled in and every rule checked. */
typedef struct clbt__table_layout {
  clbt__group_spec spec;
  uint32_t kernel_block_size;
  uint32_t width;               /* kernel blocks per row */
  uint32_t max_num_reqs;
  uint32_t max_num_batched_tokens;
  clbt_slot_mode slot_mode;
} clbt__table_layout;

/* Checks a config and derives the table's layout from it. */
clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout);

/* The most groups one slot-mapping launch serves (cl/slot_mapping.cl). */
#define CLBT__MAX_LAUNCH_GROUPS CLBT_MAX_LAUNCH_GROUPS

/* One slot-mapping kernel bound to the buffers of 1..8 tables. */
typedef struct clbt__launch {
  cl_kernel kernel;
  size_t global_size;
  size_t local_size;
} clbt__launch;

/*
 * Builds (or finds) the slot-mapping program for 1..8 group specs of tables
 * with max_num_reqs rows.
 */
clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program);

/*
 * Builds (or finds) the program for these tables' specs and binds their
 * buffers. The tables share max_num_reqs and max_num_batched_tokens.
 */
clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *tables,
                              uint32_t num_tables);
void clbt__launch_release(clbt__launch *launch);

/*
 * Checks a slot-mapping call's arguments against a table's bounds and
 * context, and its wait list.
 */
clbt_status clbt__check_batch_arguments(const clbt_table *table,
                                        uint32_t num_reqs,
                                        cl_mem query_start_loc,
                                        cl_mem positions, uint32_t num_tokens,
                                        cl_uint num_events,
                                        const cl_event *wait_list);

/* Enqueues a checked batch. */
clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 cl_command_queue queue, uint32_t num_reqs,
                                 cl_mem query_start_loc, cl_mem positions,
                                 uint32_t num_tokens, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

/*
 * What the row operations changed since the last commit. Per row: the
 * columns [low, high) that changed and whether the row is listed at all
 * (a listed row's length is moved even when no column changed), plus its
 * extent: every column from extent on is zero on the host, which keeps
 * swaps and their commits proportional to what rows hold.
 */
typedef struct clbt__changes {
  uint32_t *listed_rows;  /* rows with changes, each once */
  uint32_t num_listed;
  bool *listed;           /* [max_num_reqs] */
  uint32_t *low, *high;   /* [max_num_reqs] */
  uint32_t *extent;       /* [max_num_reqs] */
} clbt__changes;

/*
 * A host packet that enqueued commands read, and (for scatter commits) the
 * device buffer it is uploaded to. A slot is in flight while any of its
 * readers has not ended; the host may rewrite it only once all have.
 */
typedef struct clbt__staging {
  uint32_t *packet;
  size_t capacity;          /* 32-bit words of packet */
  cl_mem buffer;            /* NULL until a scatter needs it */
  size_t buffer_capacity;   /* 32-bit words of buffer */
  cl_event readers[2];      /* the commands reading it; NULL: none */
} clbt__staging;

/*
 * A table's staging slots. A commit takes a slot that is not in flight or
 * adds one, so no enqueue waits for the device: the pool holds one packet
 * per commit still in flight, and settles at the depth the caller keeps.
 */
typedef struct clbt__staging_pool {
  clbt__staging *slots;
  size_t count;
} clbt__staging_pool;

/*
 * A table's device data lives in one allocation, because OpenCL drivers
 * charge every launch for every buffer argument (NVIDIA about a quarter of
 * a microsecond each): a launch binds the storage once and finds each
 * region by its offset, while commits and callers use the regions as
 * sub-buffers.
 */
typedef enum clbt__region {
  CLBT__ROWS,            /* int32 [max_num_reqs][width], committed rows */
  CLBT__ROW_LENGTHS,     /* int32 [max_num_reqs], committed lengths */
  CLBT__SLOTS,           /* int64 [max_num_batched_tokens], the output */
  CLBT__REJECTED_TOKENS, /* uint32, the rejected-token count */
  CLBT__NUM_REGIONS
} clbt__region;

struct clbt_table {
  clbt_device *device;
  clbt__table_layout layout;
  int32_t *rows;           /* [max_num_reqs][width] */
  uint32_t *row_lengths;   /* [max_num_reqs], kernel blocks */
  clbt__changes changes;
  clbt__staging_pool staging;
  bool device_stale;       /* the device copy may differ from the host
                              beyond what changes lists: the next commit
                              rewrites every row */
  cl_kernel scatter;       /* NULL until the first scatter commit */
  clbt_commit_mode commit_mode;
  clbt_commit_info last_commit;
  cl_mem storage;
  cl_mem regions[CLBT__NUM_REGIONS];       /* sub-buffers of storage */
  cl_ulong region_words[CLBT__NUM_REGIONS]; /* their offsets, 32-bit words */
  clbt__launch launch;     /* kernel NULL: not built (NONE, or a group
                              whose multi-group table launches for it) */
};

/* Creates a table; build_launch false defers the kernel to its first use. */
clbt_status clbt__table_create(clbt_device *device,
                               const clbt_table_config *config,
                               bool build_launch, clbt_table **out);

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

/*
 * clear, in two halves: zeroing the device, which on failure leaves the
 * table stale for the next commit to repair, and zeroing the host, which
 * cannot fail. A failed clear thus changes nothing the caller can see once
 * it commits.
 */
clbt_status clbt__table_zero_device(clbt_table *table);
void clbt__table_zero_host(clbt_table *table);

/* Checks a batch's sizes against a table's bounds. */
clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens);

/* ---- commits (commit.c) -------------------------------------------------- */

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs);
void clbt__changes_free(clbt__changes *changes);
/* Records that a row's columns [low, high) and its length changed. */
void clbt__changes_mark(clbt_table *table, uint32_t row, uint32_t low,
                        uint32_t high);
/* Forgets every change (after clear, which resets both sides). */
void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs);

/*
 * Commits a checked num_reqs the way the table's mode picks, or every row
 * when the device copy is stale. A failure leaves it stale.
 */
clbt_status clbt__commit(clbt_table *table, uint32_t num_reqs,
                         cl_uint num_events, const cl_event *wait_list,
                         cl_event *event);

/*
 * How a commit of `rows` listed rows and `cells` changed cells, among
 * num_reqs rows of `width`, travels in `mode`: SCATTER or WHOLE, or
 * CLBT_SIZE_OVERFLOW when SCATTER was asked for and the scatter kernel
 * cannot count the cells.
 */
clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen);

/* Releases the staging pool, waiting for its uploads, and the kernel. */
void clbt__commit_release(clbt_table *table);

/* ---- staging (staging.c) ------------------------------------------------ */

/*
 * Frees the slots whose readers have all ended. *failed becomes true when
 * any of them ended in error: what it carried never reached the device.
 */
clbt_status clbt__staging_reap(clbt__staging_pool *pool, bool *failed);

/*
 * A slot not in flight whose packet holds `words` (and, with on_device, a
 * device buffer of as many words in context), added when none is free.
 */
clbt_status clbt__staging_acquire(clbt__staging_pool *pool, cl_context context,
                                  size_t words, bool on_device,
                                  clbt__staging **slot);

/* Records a command that reads the slot; the slot keeps the event. */
void clbt__staging_add_reader(clbt__staging *slot, cl_event reader);

/* Waits for every slot's readers, then frees the pool. */
void clbt__staging_pool_free(clbt__staging_pool *pool);

/* ---- logging (log.c) ---------------------------------------------------- */

/* True when a message of this level would be delivered. */
bool clbt__log_enabled(clbt_log_level level);

/* Formats a message and delivers it when its level is enabled. */
void clbt__log(clbt_log_level level, const char *format, ...)
    CLBT__PRINTF(2, 3);

/* ---- the on-disk program cache (binary_cache.c) ------------------------- */

/* A cache directory, then "/<16 hex digits>.clbin" (binary_cache.c checks). */
#define CLBT__CACHE_PATH_SIZE (CLBT_CACHE_DIR_SIZE + 24)

/* Where the program cache keeps one program, and the key that names it. */
typedef struct clbt__cache_entry {
  char path[CLBT__CACHE_PATH_SIZE];
  uint64_t key;
} clbt__cache_entry;

/*
 * Finds the entry for a program built from source with options on device,
 * in the device's cache directory; the caller holds programs_lock. Returns
 * false when the device's cache is off or the entry cannot be named
 * (logged as a warning).
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
