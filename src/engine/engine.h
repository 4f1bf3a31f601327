/*
 * The table engine: a group's layout and buffers, its row operations,
 * commits and their staging, the step kernel's launches, batch checks, and
 * the engine that makes groups and launches together and runs every device
 * call through one plan (see base.h for the layers). The kernel's side of
 * the contract is cl/contract.h.
 */
#ifndef CLBT_ENGINE_H
#define CLBT_ENGINE_H

#include "devices.h"
#include "tuning.h"
#include "../cl/contract.h"

/* The host's forms of the step kernel's by-value arguments, for the most
   groups and the largest inline packet (cl/contract.h). */
CLBT_DECLARE_LAUNCH_LAYOUT(clbt__launch_layout, CLBT_LAUNCH_GROUPS)
CLBT_DECLARE_LAUNCH_RECORD(clbt__launch_record, CLBT_MAX_RECORD_WORDS)

/* ---- groups (group.c, table_rows.c), launches (launch.c), batches
        (batch.c) ---------------------------------------------------------- */

/*
 * What specialises the step kernel for one group: its -D values, one field
 * per entry of CLBT_GROUP_CONSTANTS (cl/contract.h).
 */
typedef struct clbt__group_spec {
#define CLBT__SPEC_FIELD(g, name) uint32_t name;
  CLBT_GROUP_CONSTANTS(CLBT__SPEC_FIELD, 0)
#undef CLBT__SPEC_FIELD
} clbt__group_spec;

/* A table config with every default filled in and every rule checked. */
typedef struct clbt__table_layout {
  clbt__group_spec spec; /* spec.maps_tokens: the slot mode */
  uint32_t kernel_block_size;
  uint32_t width;        /* kernel blocks per row */
  uint32_t max_num_reqs;
  uint32_t max_num_batched_tokens;
} clbt__table_layout;

/* Checks a config and derives the table's layout from it. */
clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout);

/* The most groups one launch serves (cl/contract.h). */
#define CLBT__MAX_LAUNCH_GROUPS CLBT_LAUNCH_GROUPS
_Static_assert(CLBT_LAUNCH_GROUPS == CLBT_MAX_LAUNCH_GROUPS,
               "the header's launch size is the kernel's");

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
  uint32_t export_flags;    /* CLBT_EXPORT_* of an export */
  uint32_t dense_row_pitch; /* with CLBT_EXPORT_DENSE; 0: each width */
  uint32_t num_state_slots; /* a step's state slots: ids per request */
  int32_t state_null_block; /* and the id of none */
  uint32_t indices_per_row; /* token slots: num_tokens rows of these */
  cl_mem token_indices;     /* int32[num_tokens][indices_per_row] */
  cl_mem token_slots;       /* int32[sections][num_tokens][indices_per_row] */
} clbt__batch;

/* The batch buffers a launch binds, in the step kernel's argument order. */
enum {
  CLBT__BOUND_QUERY_START_LOC,
  CLBT__BOUND_POSITIONS,
  CLBT__BOUND_IDX_MAPPING,
  CLBT__BOUND_SEQ_LENS,
  CLBT__BOUND_TOKEN_INDICES,
  CLBT__BOUND_TOKEN_SLOTS,
  CLBT__BOUND_PACKET,
  CLBT__NUM_BOUND
};

/* The step kernel's entries (cl/contract.h), by name. */
typedef enum clbt__entry {
#define CLBT__ENTRY(NAME, name, parts) CLBT__ENTRY_##NAME,
  CLBT_STEP_ENTRIES(CLBT__ENTRY)
#undef CLBT__ENTRY
  CLBT__NUM_ENTRIES
} clbt__entry;


/* A kernel object of one entry in one record size, bound to its
   launch's layout and the engine's storage. */
typedef struct clbt__kernel {
  cl_kernel kernel;              /* NULL until made */
  cl_mem bound[CLBT__NUM_BOUND]; /* the buffers it holds now */
  size_t local_size;             /* its work-groups' size */
} clbt__kernel;

/*
 * The launches of 1..8 groups of an engine: the step kernel's entries,
 * each in each record size, made on first use. Arguments persist between
 * launches and drivers copy every one at every enqueue (docs/design.md):
 * the layout and the storage are set once, and a launch sets only its
 * record and the buffers that changed.
 */
typedef struct clbt__launch {
  clbt_table *const *groups; /* num_groups of them, not owned */
  uint32_t num_groups;
  const clbt__tuning *tuning;
  uint32_t num_classes;      /* the record's sizes */
  uint32_t record_words[CLBT_MAX_RECORD_CLASSES]; /* ascending */
  bool has_inline;           /* a packet can travel in the record */
  cl_program program;        /* the device's, found on first need; its
                                kernels keep the options it was built with */
  clbt__kernel kernels[CLBT__NUM_ENTRIES][CLBT_MAX_RECORD_CLASSES];
} clbt__launch;

/*
 * Builds (or finds) the step program for 1..8 group specs of tables with
 * max_num_reqs rows.
 */
clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program);

/*
 * A launch of these groups, which share max_num_reqs and
 * max_num_batched_tokens and outlive it. Its program is built (or found)
 * now when a group maps tokens, else on first use: a table of NONE groups
 * builds nothing until it gathers or commits. Its kernels are made on
 * first use, from that program.
 */
clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *groups,
                              uint32_t num_groups);
/* The kernel of an entry in a record size, made unless it is there. */
clbt_status clbt__launch_kernel(clbt__launch *launch, clbt__entry entry,
                                uint32_t record_class, clbt__kernel **out);
void clbt__launch_release(clbt__launch *launch);

/* The entry of a launch whose parts hold work's: the first in
   cl/contract.h's order, or WHOLE on a GPU. */
clbt__entry clbt__entry_for(const clbt__launch *launch, uint32_t work);

/* The smallest record size whose packet holds `words`, or num_classes
   when none does. */
uint32_t clbt__record_class(const clbt__launch *launch, size_t words);

/*
 * One launch as a plan enqueues it: its kernel, its record (work, batch,
 * inline packet) of the kernel's size, the buffers it binds, and its grid.
 */
typedef struct clbt__launch_call {
  clbt__kernel *kernel;
  uint32_t record_class;
  const clbt__launch_record *record;
  cl_mem buffers[CLBT__NUM_BOUND];
  size_t global_size;
} clbt__launch_call;

/* Sets what changed of the call's kernel's arguments and enqueues it. */
clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 const clbt__launch_call *call,
                                 clbt__sequence *sequence);

/*
 * The grid of a launch's step kernel for the groups of groups_mask: its
 * slot mapping's (the tokens, and the pad entries a few to a work-item),
 * widened on a GPU for a gather, an export (for each exported group) or
 * state slots of `padded` positions.
 */
size_t clbt__launch_grid(const clbt__launch *launch,
                         const clbt__kernel *kernel, uint32_t work,
                         uint32_t groups_mask, uint32_t num_tokens,
                         uint32_t padded);

/* The grid of a launch spread over `items` items: a scatter's packet
   items, or the entries of token slots. */
size_t clbt__launch_items_grid(const clbt__launch *launch,
                               const clbt__kernel *kernel, size_t items);

/* Whether a group maps tokens (CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT). */
bool clbt__maps_tokens(const clbt_table *group);

/*
 * Checks a batch's arguments against a table's bounds and context (the
 * optional buffers when given), and the wait list.
 */
clbt_status clbt__check_batch_arguments(clbt_table *table,
                                        const clbt__batch *batch,
                                        cl_uint num_events,
                                        const cl_event *wait_list);

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
 * A host packet that enqueued commands read, and (for packets the kernel
 * reads from the device) the buffer it is uploaded to. A slot is in flight
 * until its reader, the last command that reads its host memory, has
 * ended; the queue is in order, so the commands before it have too.
 */
typedef struct clbt__staging {
  uint32_t *packet;
  size_t capacity;          /* 32-bit words of packet */
  cl_mem buffer;            /* NULL until a packet is uploaded */
  size_t buffer_capacity;   /* 32-bit words of buffer */
  cl_event reader;          /* NULL: not in flight */
} clbt__staging;

/*
 * An engine's staging slots: those in flight, oldest first, in a ring, and
 * up to CLBT__IDLE_SLOTS free ones. A commit takes a free slot or makes
 * one, so no enqueue waits for the device: the pool holds one packet per
 * commit still in flight, and gives back all but CLBT__IDLE_SLOTS once they
 * end.
 */
typedef struct clbt__staging_pool {
  clbt__staging *ring;      /* [first, first + busy), modulo capacity */
  size_t capacity, first, busy;
  size_t taken;             /* acquired, not yet submitted or returned: the
                               ring keeps room for each */
  clbt__staging idle[CLBT__IDLE_SLOTS];
  size_t num_idle;
} clbt__staging_pool;

struct clbt_table {
  clbt_device *device;
  clbt__table_layout layout;
  int32_t *rows;           /* [max_num_reqs][width] */
  uint32_t *row_lengths;   /* [max_num_reqs], kernel blocks */
  clbt__changes changes;
  bool device_stale;       /* the device copy may differ from the host
                              beyond what changes lists: the next commit
                              rewrites every row */
  clbt_commit_mode commit_mode;
  clbt_commit_info last_commit;
  cl_mem regions[CLBT_NUM_REGIONS]; /* sub-buffers of the engine's storage,
                                       for callers and commits; NULL when
                                       empty */
  clbt_group_layout at;    /* the regions' offsets in the engine's storage,
                              for the kernel */
  clbt_multi_table *engine; /* the engine the group belongs to */
};

/*
 * A group of an engine (group.c): zeroed host rows; its regions of the
 * engine's storage are planned (clbt__group_plan) before the storage is
 * made, then placed (clbt__group_place); the engine zeroes them and pads
 * the slot mapping.
 */
clbt_status clbt__group_create(clbt_device *device,
                               const clbt__table_layout *layout,
                               clbt_multi_table *engine, clbt_table **out);
/* Places the group's regions from *size bytes of the engine's storage on,
   and moves *size past them. */
clbt_status clbt__group_plan(clbt_table *group, size_t *size);
/* Makes the group's sub-buffers of the engine's storage. */
clbt_status clbt__group_place(clbt_table *group, cl_mem storage);
void clbt__group_destroy(clbt_table *table);

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
clbt_status clbt__table_zero_device(clbt_table *table,
                                    clbt__sequence *sequence);
void clbt__table_zero_host(clbt_table *table);

/*
 * Checks that a caller's buffer belongs to the table's context and holds
 * `needed` bytes, which count_name's value count asks for. A buffer the
 * engine has checked before costs no driver call (clbt__known_buffers).
 */
clbt_status clbt__check_buffer(clbt_table *table, cl_mem buffer,
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

/* Checks that a step's flags are CLBT_STEP_* flags: a host step's are
   CLBT_STEP_GATHER and CLBT_STEP_EXPORT, a device step may be a dummy run. */
clbt_status clbt__check_step_flags(uint32_t flags, bool on_device);

/* ---- the engine (engine.c) and its calls (step.c) ----------------------- */

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
  size_t packet_at;      /* its section in its launch's part, words */
} clbt__commit_plan;

/* Where a launch's part of a commit packet goes. */
typedef enum clbt__packet_place {
  CLBT__PACKET_NONE,      /* the launch's groups scatter nothing */
  CLBT__PACKET_INLINE,    /* in its record: no upload */
  CLBT__PACKET_FOLDED,    /* uploaded; its step kernel applies it */
  CLBT__PACKET_SCATTERED  /* uploaded; a scatter launch of its own */
} clbt__packet_place;

/* One launch's share of a call (step.c plans it). */
typedef struct clbt__launch_plan {
  uint32_t groups;            /* the scope's groups in it: bit g, group g */
  clbt__packet_place place;
  size_t part_at, part_words; /* its part of the packet, words */
  size_t scatter_items;       /* its largest group's rows and ids */
  uint32_t work;              /* CLBT_WORK_* of its step kernel; 0: none */
  clbt__kernel *step;         /* the kernels it runs, in their record */
  clbt__kernel *scatter;      /* sizes; NULL: none */
  uint32_t step_class, scatter_class;
} clbt__launch_plan;

/*
 * Groups made, launched and freed together: a clbt_multi_table, or the one
 * group of a clbt_table, which then owns its engine (standalone).
 */
struct clbt_multi_table {
  clbt_device *device;
  uint32_t num_groups;
  clbt_table **groups;
  uint32_t num_launches;   /* one per eight groups */
  clbt__launch *launches;
  bool standalone;
  cl_mem storage;          /* every group's regions, one allocation: drivers
                              charge every launch for every buffer argument */
  clbt__staging_pool staging; /* every commit's packets */
  uint64_t version;        /* the last version a commit gave rows */
  uint64_t seen_failures;  /* the device watch's count at the last commit */
  clbt__known_buffers known; /* the caller's buffers checked lately */
  /* Scratch for one call's plan and records, sized at creation so that a
     call allocates nothing; no value in it outlives the call. */
  clbt__commit_plan *commit_plans; /* [num_groups] */
  clbt__launch_plan *launch_plans; /* [num_launches] */
  clbt__launch_record *record;     /* the launch being enqueued */
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
 * What a device call works on: every group of an engine, or one group
 * alone (a call through the clbt_table API), groups [begin, end) of its
 * engine. Its launches are the engine's that hold them; in each, only the
 * scope's groups take part (clbt__scope_groups). Every group of a scope
 * shares its bounds and context with `first`.
 */
typedef struct clbt__scope {
  clbt_multi_table *engine;
  uint32_t begin, end;
  clbt_table *first;      /* engine->groups[begin] */
  bool alone;             /* one group named by the caller */
} clbt__scope;

/* The scope of every group of an engine. */
clbt__scope clbt__engine_scope(clbt_multi_table *engine);
/* The scope of one group alone, in its engine's launch. */
clbt__scope clbt__group_scope(clbt_table *group);

/* The scope's launches: engine->launches[first, end). */
uint32_t clbt__scope_first_launch(const clbt__scope *scope);
uint32_t clbt__scope_end_launch(const clbt__scope *scope);
/* Which of launch l's groups the scope holds: bit g for its group g. */
uint32_t clbt__scope_groups(const clbt__scope *scope, uint32_t l);

/*
 * A device call: an optional commit of rows [0, commit_rows), then the step
 * kernel's work (CLBT_WORK_MAP, _GATHER, _EXPORT; 0: none) on a batch.
 */
typedef struct clbt__call {
  bool commits;
  uint32_t commit_rows;
  uint32_t work;
  clbt__batch batch;        /* checked; unused when work is 0 */
} clbt__call;

/*
 * Runs a checked call on a scope: plans it (every kernel built, every
 * packet placed, nothing enqueued when that fails), then enqueues the plan
 * as one sequence after the wait list, handing back the last command's
 * event when event is not NULL. A commit that fails once something is
 * enqueued leaves the scope's groups stale.
 */
clbt_status clbt__run(const clbt__scope *scope, const clbt__call *call,
                      cl_uint num_events, const cl_event *wait_list,
                      cl_event *event);

/*
 * The public device calls on a scope, each checked before anything runs:
 * a commit of rows [0, num_reqs), a slot mapping, an export, a step.
 */
clbt_status clbt__enqueue_commit(const clbt__scope *scope, uint32_t num_reqs,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event);
clbt_status clbt__enqueue_slot_mapping(const clbt__scope *scope,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event);
clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);
clbt_status clbt__enqueue_step(const clbt__scope *scope, const clbt_step *step,
                               cl_uint num_events, const cl_event *wait_list,
                               cl_event *event);

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

/* The step kernel's work bits for a batch's export flags
   (CLBT_WORK_EXPORT_CONTEXT, _DENSE). */
uint32_t clbt__export_work(const clbt__batch *batch);

/*
 * Checks a batch for an export of a scope, in this order: a group named
 * alone must map tokens (clbt__check_export_target), the batch's arguments,
 * its export flags, which the messages call flags_name
 * (clbt__check_export_flags), and every exported group's worst-case page
 * count must fit the int32 indptr, and its dense page table's rows of the
 * batch its region (clbt__check_export_groups).
 */
clbt_status clbt__check_export(const clbt__scope *scope,
                               const clbt__batch *batch,
                               const char *flags_name, cl_uint num_events,
                               const cl_event *wait_list);
clbt_status clbt__check_export_target(const clbt__scope *scope);
clbt_status clbt__check_export_flags(const clbt__batch *batch,
                                     const char *flags_name);
clbt_status clbt__check_export_groups(const clbt__scope *scope,
                                      const clbt__batch *batch);

/* ---- state slots (state_slots.c) and token slots (token_slots.c) -------- */

/*
 * Checks a step's state slots for a scope: a group named alone must map no
 * tokens, and `count` ids a request must fit every NONE group's width.
 */
clbt_status clbt__check_state_slots(const clbt__scope *scope, uint32_t count);

/* The number of token-mapping groups of a scope in the engine's launches
   before l. */
uint32_t clbt__token_sections_before(const clbt__scope *scope, uint32_t l);

/*
 * Checks a token-slots request (already read) and enqueues its one call:
 * the index matrix's slots in every token-mapping group of the scope.
 */
clbt_status clbt__enqueue_token_slots(const clbt__scope *scope,
                                      const clbt_token_slots_request *request,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event);

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
 * CLBT_SIZE_OVERFLOW when SCATTER was asked for and the scatter cannot
 * count the cells.
 */
clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen);

/*
 * Plans group g's commit of rows [0, num_reqs) (every row of a stale
 * group) into plans[g]: its mode, and where its section of its launch's
 * packet part starts; nothing changes.
 */
clbt_status clbt__commit_plan_group(const clbt_table *group,
                                    uint32_t num_reqs,
                                    clbt__commit_plan *plan);

/* The words a group's scatter section takes. */
size_t clbt__commit_section_words(const clbt__commit_plan *plan);

/*
 * Packs a launch's part of the packet: each group's counts, then the
 * sections of the groups that scatter (cl/contract.h).
 */
void clbt__commit_pack(const clbt__launch *launch,
                       const clbt__commit_plan *plans, uint32_t *part);

/* Enqueues a WHOLE commit of a group's rows [0, rows), from a snapshot in a
   staging packet, every row given version. */
clbt_status clbt__commit_whole(clbt_table *group, uint32_t rows,
                               uint64_t version, clbt__sequence *sequence);

/* What a commit that enqueued everything leaves: synced rows unlisted. */
void clbt__commit_settle(clbt_table *group, const clbt__commit_plan *plan);

/* A new version for the rows a commit or clear writes. */
uint64_t clbt__next_version(clbt_multi_table *engine);

/*
 * Before a commit: reaps the device's watch and, with staging, the
 * engine's staging pool, and marks every group stale when a command that
 * never arrived is found; *lost (when not NULL) says whether one was.
 */
clbt_status clbt__commit_reap(clbt_multi_table *engine, bool staging,
                              bool *lost);

/* ---- staging (staging.c) ------------------------------------------------ */

/*
 * Frees the oldest slots whose reader has ended, stopping at the first
 * that has not: O(1) driver calls a commit. *failed becomes true when one
 * ended in error: what it carried never reached the device.
 */
clbt_status clbt__staging_reap(clbt__staging_pool *pool, bool *failed);

/*
 * Takes a free slot whose packet holds `words` (and, with on_device, a
 * device buffer of as many words in context), making one when none is
 * free, with room to be in flight: the caller submits it or returns it.
 */
clbt_status clbt__staging_acquire(clbt__staging_pool *pool, cl_context context,
                                  size_t words, bool on_device,
                                  clbt__staging *slot);

/* Puts a slot in flight until reader, whose reference it takes, ends. */
void clbt__staging_submit(clbt__staging_pool *pool, clbt__staging *slot,
                          cl_event reader);

/* Gives back a slot that nothing reads. */
void clbt__staging_return(clbt__staging_pool *pool, clbt__staging *slot);

/* Waits for every slot's reader, then frees the pool. */
void clbt__staging_pool_free(clbt__staging_pool *pool);

#endif /* CLBT_ENGINE_H */
