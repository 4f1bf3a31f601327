/*
 * The table engine: a group's layout and buffers, its row operations,
 * commits and their staging, slot-mapping launches, batch checks, and the
 * engine that makes groups and launches together (see base.h for the
 * layers). The kernels' side of the contract is cl/contract.h.
 */
#ifndef CLBT_ENGINE_H
#define CLBT_ENGINE_H

#include "devices.h"
#include "../cl/contract.h"

/* ---- groups (group.c, table_rows.c), launches (launch.c), batches
        (batch.c) ---------------------------------------------------------- */

/*
 * What specialises the slot-mapping kernel for one group: its -D values,
 * one field per entry of CLBT_GROUP_CONSTANTS (cl/contract.h).
 */
typedef struct clbt__group_spec {
#define CLBT__SPEC_FIELD(g, name) uint32_t name;
  CLBT_GROUP_CONSTANTS(CLBT__SPEC_FIELD, 0)
#undef CLBT__SPEC_FIELD
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

/* The most groups one launch serves (cl/slot_mapping.cl). */
#define CLBT__MAX_LAUNCH_GROUPS CLBT_MAX_LAUNCH_GROUPS

/*
 * A batch as the caller gave it: a slot mapping's, an export's (and a
 * step's, which does both). The fields after num_tokens are 0 or NULL
 * where a call has no such argument.
 */
typedef struct clbt__batch {
  uint32_t num_reqs;
  cl_mem query_start_loc;   /* int32[num_reqs + 1] */
  cl_mem positions;         /* int64[num_tokens]; NULL when num_tokens is 0 */
  uint32_t num_tokens;
  uint32_t num_reqs_padded; /* 0: num_reqs */
  cl_mem seq_lens;          /* int32[num_reqs], or NULL */
  cl_mem idx_mapping;       /* int32[num_reqs], or NULL: the identity */
} clbt__batch;

/*
 * The kernels of 1..8 groups, bound to their buffers: the step kernel
 * (slot mappings and gather) and, from the first scatter commit on, the
 * commit scatter. An engine launches its groups eight at a time; a group
 * of a multi-group table used on its own has a launch of its own.
 */
typedef struct clbt__launch {
  cl_kernel kernel;
  size_t global_size;
  size_t local_size;
  clbt_table *const *groups; /* num_groups of them, not owned */
  uint32_t num_groups;
  cl_kernel scatter;         /* NULL until the first scatter commit */
  /* A commit's packet that the next step kernel applies itself (folded;
     commit.c): in a buffer, or in the kernel's arguments. */
  cl_uint packet_kind;       /* CLBT_PACKET_NONE, _IN_BUFFER, _INLINE */
  cl_mem packet;             /* _IN_BUFFER: the buffer */
  cl_ulong packet_at;        /* where the launch's part starts, words */
  cl_uint packet_version;
  uint32_t inline_words;     /* what an inline packet may hold; 1: none */
  cl_uint inline_packet[CLBT_INLINE_PACKET_WORDS];
} clbt__launch;

/*
 * A group's export kernel, bound to the group's buffer, and its
 * work-group size; how many work-groups is each batch's (export.c).
 */
typedef struct clbt__exporter {
  cl_kernel kernel;
  size_t local_size;
} clbt__exporter;

/*
 * A step as the engine runs it: a batch (whose idx_mapping names the rows
 * it reads) and how many positions it gathers (0: none).
 */
typedef struct clbt__step_batch {
  clbt__batch batch;
  uint32_t gathered_reqs;
} clbt__step_batch;

/*
 * Builds (or finds) the step program for 1..8 group specs of tables with
 * max_num_reqs rows.
 */
clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program);

/*
 * A launch of these tables, which share max_num_reqs and
 * max_num_batched_tokens and outlive it. Its step kernel is built now when
 * a table maps tokens, else on the first gather (clbt__launch_build): a
 * table of NONE groups builds nothing until it gathers.
 */
clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *tables,
                              uint32_t num_tables);
/* Builds (or finds) the step program of the launch's tables and binds their
   buffers, unless the kernel is there. */
clbt_status clbt__launch_build(clbt__launch *launch);
/* Whether a launch has a group that maps tokens. */
bool clbt__launch_maps_tokens(const clbt__launch *launch);
void clbt__launch_release(clbt__launch *launch);

/* The commit scatter kernel of a launch's groups, made on first use. */
clbt_status clbt__launch_scatter(clbt__launch *launch);

/*
 * Sets the packet a launch kernel applies (NULL: none), where the launch's
 * part of it starts, and the version its rows get.
 */
clbt_status clbt__launch_set_packet(cl_kernel kernel, const cl_mem *packet,
                                    cl_ulong packet_at, cl_uint version);


/*
 * Checks a batch's arguments against a table's bounds and context (the
 * optional buffers when given), and the wait list.
 */
clbt_status clbt__check_batch_arguments(const clbt_table *table,
                                        const clbt__batch *batch,
                                        cl_uint num_events,
                                        const cl_event *wait_list);

/* Enqueues a checked step. */
clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 cl_command_queue queue,
                                 const clbt__step_batch *step,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event);

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
  cl_event readers[3];      /* the commands of its commit (each kept until
                               it ends: PoCL 3.1 aborts when a failure
                               reaches a command whose event was released);
                               NULL: none */
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
  CLBT__ROW_VERSIONS,    /* uint32 [max_num_reqs], each committed row's
                            version: the commit that last wrote it */
  CLBT__GATHERED,        /* int32 [max_num_reqs][width], the gather's output */
  CLBT__GATHER_RECORDS,  /* uint32 [max_num_reqs][CLBT_GATHER_RECORD_WORDS] */
  /* The attention export (export.c), token-mapping groups only (empty in a
     NONE group), int32: */
  CLBT__EXPORT_INDPTR,   /* [max_num_reqs + 1] */
  CLBT__EXPORT_INDICES,  /* [max_num_reqs * width] */
  CLBT__EXPORT_LAST_PAGE_LEN,      /* [max_num_reqs] */
  CLBT__EXPORT_PAST_LENS,          /* [max_num_reqs] */
  CLBT__EXPORT_SUBSEQUENCE_BEGINS, /* [max_num_reqs + 1] */
  CLBT__NUM_REGIONS
} clbt__region;

struct clbt_table {
  clbt_device *device;
  clbt__table_layout layout;
  int32_t *rows;           /* [max_num_reqs][width] */
  uint32_t *row_lengths;   /* [max_num_reqs], kernel blocks */
  clbt__changes changes;
  bool device_stale;       /* the device copy may differ from the host
                              beyond what changes lists: the next commit
                              rewrites every row */
  clbt__exporter exporter; /* built on the first export */
  clbt_commit_mode commit_mode;
  clbt_commit_info last_commit;
  cl_mem storage;
  cl_mem regions[CLBT__NUM_REGIONS];       /* sub-buffers of storage */
  cl_ulong region_words[CLBT__NUM_REGIONS]; /* their offsets, 32-bit words */
  clbt_multi_table *engine; /* the engine the group belongs to */
  clbt__launch launch;     /* this group alone, built when a group of a
                              multi-group table is used on its own */
};

/*
 * A group of an engine (group.c): zeroed host rows, zeroed device rows, a
 * pad-filled slot mapping.
 */
clbt_status clbt__group_create(clbt_device *device,
                               const clbt__table_layout *layout,
                               clbt_multi_table *engine, clbt_table **out);
void clbt__group_destroy(clbt_table *table);

/* Enqueues a fill of one of a group's buffers. */
clbt_status clbt__group_fill(const clbt_table *table, cl_mem buffer,
                             const void *pattern, size_t pattern_size,
                             size_t size);

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
/*
 * The batch form of check_append and apply_append: entry i appends (or,
 * with replace, writes) counts[i] ids to rows[i], its ids following entry
 * i-1's in block_ids. The check sees the table as consecutive calls would,
 * so that a row named twice is checked against its length after the first.
 */
clbt_status clbt__check_rows(clbt_table *table, size_t num_rows,
                             const uint32_t *rows, const uint32_t *counts,
                             const int32_t *block_ids, bool replace);
void clbt__apply_rows(clbt_table *table, size_t num_rows, const uint32_t *rows,
                      const uint32_t *counts, const int32_t *block_ids,
                      bool replace);
void clbt__apply_clear_row(clbt_table *table, uint32_t row);
/* A truncate keeps a row's first num_blocks KV-manager blocks. */
clbt_status clbt__check_truncate(const clbt_table *table, uint32_t row,
                                 size_t num_blocks);
void clbt__apply_truncate(clbt_table *table, uint32_t row, size_t num_blocks);
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

/*
 * Checks that a caller's buffer belongs to the table's context and holds
 * `needed` bytes, which count_name's value count asks for.
 */
clbt_status clbt__check_buffer(const clbt_table *table, cl_mem buffer,
                               const char *name, size_t needed,
                               const char *count_name, uint32_t count);

/* Checks a batch's sizes against a table's bounds. */
clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens);

/*
 * Checks a padded request count, named `name`, against num_reqs (0 means
 * num_reqs) and the table's max_num_reqs.
 */
clbt_status clbt__check_padding(const clbt_table *table, const char *name,
                                uint32_t num_reqs, uint32_t padded);

/* Checks that a step's flags are CLBT_STEP_* flags. */
clbt_status clbt__check_step_flags(uint32_t flags);

/* ---- the engine (engine.c) ---------------------------------------------- */

/* The listed rows below a commit's bound: how many, and their changed
   cells. */
typedef struct clbt__pending {
  uint32_t rows;
  uint64_t cells;
} clbt__pending;

/* How one group's commit travels. */
typedef struct clbt__commit_plan {
  clbt_commit_mode mode; /* CLBT_COMMIT_AUTO: nothing to move */
  uint32_t rows;         /* rows [0, rows) are committed */
  clbt__pending pending;
  size_t packet_at;      /* its section of the scatter packet, words */
} clbt__commit_plan;


/*
 * Groups made, launched and freed together: a clbt_multi_table, or the one
 * group of a clbt_table, which then owns its engine (standalone).
 */
struct clbt_multi_table {
  uint32_t num_groups;
  clbt_table **groups;
  uint32_t num_launches;   /* one per eight groups */
  clbt__launch *launches;
  bool standalone;
  clbt__staging_pool staging; /* every commit's packets */
  uint32_t version;        /* the last version a commit gave rows */
  clbt__commit_plan *commit_plans; /* [num_groups], a commit's scratch */
};

/* Creates num_groups groups of these checked layouts, and their launches. */
clbt_status clbt__engine_create(clbt_device *device,
                                const clbt__table_layout *layouts,
                                uint32_t num_groups, bool standalone,
                                clbt_multi_table **out);
void clbt__engine_destroy(clbt_multi_table *engine);

/* Builds, without creating anything, the programs such an engine needs. */
clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups);

/*
 * The launches a call on group works on: with engine, the engine's; with
 * engine NULL, group's own (the engine's when it is standalone), built on
 * first use.
 */
clbt_status clbt__launches_of(clbt_table *group, clbt_multi_table *engine,
                              clbt__launch **launches, uint32_t *count);

/*
 * Enqueues the step kernel of each launch with work (a gather, a folded
 * packet, or a group that maps tokens) in the sequence; with want_event
 * the sequence keeps the last one's event.
 */
clbt_status clbt__run_launches(clbt__launch *launches,
                              uint32_t num_launches,
                              const clbt__step_batch *step,
                              clbt__sequence *sequence, bool want_event);

/*
 * Checks a batch against group (all of an engine's groups share their
 * bounds and context) and enqueues its slot mapping: for every
 * token-mapping group of engine, or, with engine NULL, for group alone.
 */
clbt_status clbt__enqueue_slot_mapping(clbt_table *group,
                                       clbt_multi_table *engine,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event);

/*
 * Checks num_reqs and the wait list and enqueues the commit of rows
 * [0, num_reqs) of every group of engine or, with engine NULL, of group
 * alone.
 */
clbt_status clbt__enqueue_commit(clbt_table *group, clbt_multi_table *engine,
                                 uint32_t num_reqs, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

/*
 * Checks a step against group and enqueues it, for every group of engine
 * or, with engine NULL, for group alone (clbt_table_enqueue_step).
 */
clbt_status clbt__enqueue_step(clbt_table *group, clbt_multi_table *engine,
                               const clbt_step *step, cl_uint num_events,
                               const cl_event *wait_list, cl_event *event);

/* ---- the host reference (reference.c) ----------------------------------- */

/* Checks a host step's batch against a table (all of an engine's groups
   share their bounds). */
clbt_status clbt__check_host_step(const clbt_table *table,
                                  const clbt_host_step *step);
/* Computes a checked host step of one table into the outputs it names. */
void clbt__compute_step_host(const clbt_table *table,
                             const clbt_host_step *step);

/* ---- the attention export (export.c) ------------------------------------ */

/* The batch of an export request. */
clbt__batch clbt__export_batch(const clbt_export_request *request);

/*
 * Checks a batch against group (all of an engine's groups share their
 * bounds and context) and enqueues the export of every token-mapping
 * group of engine, or, with engine NULL, of group alone (which must map
 * tokens). clbt__check_export makes the checks alone.
 */
clbt_status clbt__check_export(clbt_table *group,
                               const clbt_multi_table *engine,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list);
clbt_status clbt__enqueue_export(clbt_table *group,
                                 const clbt_multi_table *engine,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

/* Releases a group's export kernel, if built. */
void clbt__exporter_release(clbt__exporter *exporter);

/* ---- commits (commit.c) -------------------------------------------------- */

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs);
void clbt__changes_free(clbt__changes *changes);
/* Records that a row's columns [low, high) and its length changed. */
void clbt__changes_mark(clbt_table *table, uint32_t row, uint32_t low,
                        uint32_t high);
/* Forgets every change (after clear, which resets both sides). */
void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs);

/*
 * How a commit of `rows` listed rows and `cells` changed cells, among
 * num_reqs rows of `width`, travels in `mode`: SCATTER or WHOLE, or
 * CLBT_SIZE_OVERFLOW when SCATTER was asked for and the scatter kernel
 * cannot count the cells.
 */
clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen);

/*
 * Commits rows [0, num_reqs) of every group of the launches, each the way
 * its mode picks, or every row of a group whose device copy is stale: the
 * scatter commits of all groups share one upload and one kernel per
 * launch. With fold, a launch whose part of the packet is small gets no
 * scatter: its next step kernel applies it (launch->packet), and *folded is
 * the staging slot that kernel must be added to as a reader. A failure
 * leaves the groups stale.
 */
clbt_status clbt__commit(clbt__launch *launches, uint32_t num_launches,
                         uint32_t num_reqs, bool fold,
                         clbt__sequence *sequence, clbt__staging **folded);

/* Forgets the folded packets of the launches (their kernels ran). */
void clbt__unfold(clbt__launch *launches, uint32_t num_launches);

/* After a folded commit whose step kernels were not enqueued: the groups
   are stale, their packets forgotten. */
void clbt__commit_lost(clbt__launch *launches, uint32_t num_launches);

/* A new version for the rows a commit or clear writes. */
uint32_t clbt__next_version(clbt_table *group);

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

#endif /* CLBT_ENGINE_H */
