/*
 * A call's plan (plan.c): how each launch takes part in the call and
 * where its part of the commit packet goes, which entry of the step kernel
 * runs it, in which record size, on which grid, and then the call's
 * commands, ready to enqueue: the WHOLE commits' writes and fills, the
 * upload, and per launch its scatter launch and its step kernel. Plain
 * data, decided by pure functions of what each launch offers
 * (clbt__launch_shape) and what the call asks, so that the runner
 * (calls/run.c) makes every choice before it enqueues anything, enqueues
 * the commands as they stand, and the choices are tested without a device
 * (tests/engine/test_plan.c).
 */
#ifndef CLBT_PLAN_H
#define CLBT_PLAN_H

#include "base/tuning.h"
#include "cl/contract.h"
#include "engine/staging.h"

/* The step kernel's entries (cl/contract.h), by name: a CPU's program's,
   then a GPU's, from CLBT__FIRST_GPU_ENTRY on. */
typedef enum clbt__entry {
#define CLBT__ENTRY(NAME, name, parts) CLBT__ENTRY_##NAME,
  CLBT_STEP_ENTRIES(CLBT__ENTRY)
#undef CLBT__ENTRY
  CLBT__NUM_ENTRIES
} clbt__entry;
enum {
#define CLBT__COUNT(NAME, name, parts) +1
  CLBT__FIRST_GPU_ENTRY = 0 CLBT_CPU_STEP_ENTRIES(CLBT__COUNT)
#undef CLBT__COUNT
};

/* The work only a group that maps tokens takes part in: a launch of NONE
   groups alone runs none of it (its gather, state slots and scatter it
   does). */
#define CLBT__TOKEN_GROUP_WORK                                       \
  (CLBT_WORK_MAP | CLBT_WORK_EXPORT | CLBT_WORK_EXPORT_CONTEXT |     \
   CLBT_WORK_EXPORT_DENSE | CLBT_WORK_TOKEN_SLOTS)

/* The listed rows below a commit's bound: how many, and their changed
   cells. */
typedef struct clbt__pending {
  uint32_t rows;
  uint64_t cells;
} clbt__pending;

/* Where a WHOLE commit writes, and the staging slot its snapshot is in. */
typedef struct clbt__whole_target {
  cl_mem rows, lengths, versions; /* the group's regions */
  uint32_t width;                 /* ids a row */
  uint32_t all_rows;              /* max_num_reqs: every row's version */
  clbt__staging *slot;            /* the plan's: cells, then lengths */
} clbt__whole_target;

/* How one group's commit travels. */
typedef struct clbt__commit_plan {
  clbt_commit_mode mode; /* CLBT_COMMIT_AUTO: nothing to move */
  uint32_t rows;         /* rows [0, rows) are committed */
  clbt__pending pending;
  size_t packet_at;      /* SCATTER: its section in its launch's part */
  clbt__whole_target whole; /* WHOLE */
} clbt__commit_plan;

/* Where a launch's part of a commit packet goes. */
typedef enum clbt__packet_place {
  CLBT__PACKET_NONE,         /* the launch's groups scatter nothing */
  CLBT__PACKET_INLINE,       /* in its step kernel's record: no upload */
  CLBT__PACKET_INLINE_APART, /* in the record of a scatter launch of its
                                own, before the step kernel: no upload */
  CLBT__PACKET_FOLDED,       /* uploaded; its step kernel applies it */
  CLBT__PACKET_SCATTERED     /* uploaded; a scatter launch of its own */
} clbt__packet_place;

/* What a launch offers a plan: its groups' kinds, its device's row of the
   tuning table, the record sizes its program has and its kernels'
   work-group sizes. */
typedef struct clbt__launch_shape {
  uint32_t num_groups;       /* 1..8 */
  uint32_t token_group_mask; /* bit g: group g maps tokens */
  const clbt__tuning *tuning;
  uint32_t num_classes;      /* the record's sizes */
  uint32_t record_words[CLBT_MAX_RECORD_CLASSES]; /* ascending */
  /* The work-group size of its kernels of each record size, as the launch
     runs them (launch.c): a GPU's program has one entry, and a CPU's
     work-groups are one work-item (base/tuning.c). Known once its
     program is (clbt__launch_ready). */
  size_t local_sizes[CLBT_MAX_RECORD_CLASSES];
  bool has_inline;           /* a packet can travel in the record */
  uint32_t compute_units;    /* its device's */
  uint32_t max_num_tokens;   /* each slot mapping's */
  uint32_t cpu_step_groups;  /* a CPU's work-groups of its step kernel: the
                                tuning table's for every group's slots */
} clbt__launch_shape;

/*
 * The grid of a launch's step kernel for the groups of group_mask, and on
 * a GPU the work-groups of each part (0 in each on a CPU: every part on
 * every work-group): the slot mapping's tokens and its pad entries a few
 * to a work-item, a gather, an export (for each exported group) and the
 * state slots of `padded` positions, side by side, each within the tuning
 * table's work-groups per compute unit; local_size is the step kernel's
 * work-group size.
 */
typedef struct clbt__grid {
  size_t global_size;
  uint32_t map_groups, gather_groups, export_groups, state_groups;
} clbt__grid;
clbt__grid clbt__plan_grid(const clbt__launch_shape *shape, size_t local_size,
                           uint32_t work, uint32_t group_mask,
                           uint32_t num_tokens, uint32_t padded);

/* The grid of a launch spread over `items` items: a scatter's packet
   items, or the entries of token slots. */
size_t clbt__plan_items_grid(const clbt__launch_shape *shape,
                             size_t local_size, size_t items);

/* One launch's share of a call. */
typedef struct clbt__launch_plan {
  uint32_t group_mask;        /* the scope's groups in it: bit g, group g */
  uint32_t work;              /* CLBT_WORK_* of its step kernel; 0: none */
  clbt__packet_place place;
  size_t part_at, part_words; /* its part of the packet, words; part_at
                                 in the call's upload */
  size_t scatter_items;       /* its largest group's rows and ids */
  bool scatters;              /* it runs a scatter launch of its own */
  clbt__entry step_entry, scatter_entry;
  uint32_t step_class, scatter_class; /* their record sizes */
  clbt__grid step_grid;       /* on the step kernel's work-groups */
  size_t scatter_global;      /* the scatter launch's grid */
} clbt__launch_plan;

/* The words of a scatter packet of `rows` rows and `cells` changed ids. */
uint64_t clbt__scatter_words(uint64_t rows, uint64_t cells);

/* Whether the launch's step kernel applies its part itself (folded). */
bool clbt__plan_folds(const clbt__launch_plan *share);

/* Whether a launch's part is uploaded (folded or scattered). */
bool clbt__plan_uploads(const clbt__launch_plan *share);

/* The packet words the record of the launch's step kernel (step) or of its
   scatter launch carries: its inline part, or none. */
size_t clbt__plan_inline_words(const clbt__launch_plan *share, bool step);

/* The smallest record size (a class) whose packet holds `words`, or
   num_classes when none does. */
uint32_t clbt__record_class(const clbt__launch_shape *shape, size_t words);

/* ---- the commands -------------------------------------------------------- */

/* The host's form of a launch record, for the largest inline packet
   (cl/contract.h). */
CLBT_DECLARE_LAUNCH_RECORD(clbt__launch_record, CLBT_MAX_RECORD_WORDS)

/* The bytes of a record whose packet holds `words` words. */
size_t clbt__record_bytes(size_t words);

/*
 * A record as a launch keeps it from call to call: what it sends, and how
 * many packet words from the start may be nonzero, so that a call zeroes
 * only what the last one wrote past its own packet (every byte sent is
 * set, and a call costs what it changed).
 */
typedef struct clbt__record {
  size_t dirty_words;
  clbt__launch_record sent;
} clbt__record;

/* A call's batch buffers, by what they hold. */
enum {
  CLBT__BATCH_QUERY_START_LOC,
  CLBT__BATCH_POSITIONS,
  CLBT__BATCH_IDX_MAPPING,
  CLBT__BATCH_SEQ_LENS,
  CLBT__BATCH_TOKEN_INDICES,
  CLBT__BATCH_TOKEN_SLOTS,
  CLBT__NUM_BATCH_BUFFERS
};

/* The buffers a launch binds, in the step kernel's argument order
   (cl/contract.h: token slots' two take the places of the positions and
   the seq_lens). */
enum {
  CLBT__BOUND_QUERY_START_LOC,
  CLBT__BOUND_POSITIONS,
  CLBT__BOUND_IDX_MAPPING,
  CLBT__BOUND_SEQ_LENS,
  CLBT__BOUND_PACKET,
  CLBT__NUM_BOUND
};

/*
 * One launch as the enqueue takes it: the launch's kernel of an entry in a
 * record size, its record (of that size), the buffers it binds with the
 * serials of the records that hold them (device/bound_buffer.h), and its
 * grid on the kernel's work-groups.
 */
typedef struct clbt__launch_call {
  uint32_t launch;       /* the engine's launch */
  clbt__entry entry;
  uint32_t record_class;
  const clbt__launch_record *record;
  size_t record_bytes;
  cl_mem buffers[CLBT__NUM_BOUND];
  uint64_t serials[CLBT__NUM_BOUND];
  size_t global_size, local_size;
} clbt__launch_call;

/* A command of a call, in the order the queue takes them. */
typedef enum clbt__command_kind {
  CLBT__COMMAND_WRITE, /* a staging slot's words into a buffer */
  CLBT__COMMAND_FILL,  /* a buffer's bytes with the call's version */
  CLBT__COMMAND_LAUNCH /* the step kernel */
} clbt__command_kind;

typedef struct clbt__command {
  clbt__command_kind kind;
  cl_mem buffer;       /* WRITE, FILL: from its first byte */
  size_t bytes;        /* WRITE, FILL */
  clbt__staging *slot; /* WRITE: the slot it reads ... */
  size_t slot_at;      /* ... from this word on */
  uint64_t pattern;    /* FILL: every 8 bytes */
  clbt__launch_call launch; /* LAUNCH */
} clbt__command;

/* One launch of a call, as its plan sees it. */
typedef struct clbt__launch_part {
  uint32_t index;           /* the engine's launch */
  const clbt__launch_shape *shape;
  uint32_t group_mask;      /* the scope's groups in it: bit g, group g */
  uint32_t token_section;   /* TOKEN_SLOTS: the output section of its
                               first token-mapping group */
  clbt__commit_plan *commits; /* its groups', NULL: the call commits none */
  clbt__record *step_record, *scatter_record; /* the launch's */
  clbt__launch_plan share;  /* what the plan decides */
} clbt__launch_part;

/*
 * A call's plan: what the runner gathers (the call, its launches, their
 * groups' commit plans) and what clbt__plan_place and clbt__plan_commands
 * make of it: the staging slots to take, then the commands.
 */
typedef struct clbt__call_plan {
  uint32_t work;           /* the call's step work; 0: none */
  uint32_t num_tokens, padded;
  clbt__record_head head;  /* a step record's batch fields */
  cl_mem batch[CLBT__NUM_BATCH_BUFFERS]; /* NULL: not given */
  uint64_t serials[CLBT__NUM_BATCH_BUFFERS]; /* of their records */
  uint64_t version;        /* the rows it moves get; 0: it moves none */
  clbt__launch_part *launches;
  uint32_t num_launches;
  clbt__staging *slots;    /* room for a slot a group, and the upload's */
  size_t *slot_words;      /* as many: the words each slot is taken for */
  uint32_t num_slots;      /* clbt__plan_place's: its WHOLE commits', then
                              the upload's */
  size_t upload_words;
  clbt__staging *upload;   /* the slot of the upload, when it has words */
  clbt__command *commands; /* clbt__plan_commands's */
  uint32_t num_commands;
} clbt__call_plan;

/*
 * Every launch's share of the call (launches[l].share): what its step
 * kernel does of the call's work (CLBT_WORK_MAP, _GATHER, _EXPORT with its
 * parts, _STATE_SLOTS, _TOKEN_SLOTS; 0: none) with which entry; its part
 * of the packet (each scattering group's section placed, packet_at) and
 * where it goes (in a record when it fits, else uploaded; folded when
 * every work-group of its step kernel may apply it); its record sizes and
 * its grids, on its kernels' work-group sizes. Then the staging slots the
 * call takes: one for each WHOLE commit's rows (its whole.slot) and one
 * for the upload of every uploaded part (each from its part_at).
 */
void clbt__plan_place(clbt__call_plan *plan);

/*
 * The call's commands, in order: each WHOLE commit's writes of its slot's
 * rows and lengths and the fill of its versions, the upload, then per
 * launch its scatter launch and its step kernel, each record's head set
 * and the packet words past its part zeroed (the parts are packed by
 * commit.c). commands has room for clbt__plan_max_commands.
 */
void clbt__plan_commands(clbt__call_plan *plan);

/* The most commands a call on this many groups and launches makes. */
size_t clbt__plan_max_commands(uint32_t num_groups, uint32_t num_launches);

#endif /* CLBT_PLAN_H */
