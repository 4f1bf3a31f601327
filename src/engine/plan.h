/*
 * A call's plan (plan.c): how each group's commit travels, where each
 * launch's part of the commit packet goes, which entry of the step kernel
 * each launch runs and in which record size. Plain data, decided by pure
 * functions of what each launch offers (clbt__launch_shape) and what the
 * call asks, so that the runner (calls/run.c) makes every choice before it
 * enqueues anything, and the choices are tested without a device
 * (tests/engine/test_plan.c).
 */
#ifndef CLBT_PLAN_H
#define CLBT_PLAN_H

#include "base/tuning.h"
#include "cl/contract.h"

/* The step kernel's entries (cl/contract.h), by name. */
typedef enum clbt__entry {
#define CLBT__ENTRY(NAME, name, parts) CLBT__ENTRY_##NAME,
  CLBT_STEP_ENTRIES(CLBT__ENTRY)
#undef CLBT__ENTRY
  CLBT__NUM_ENTRIES
} clbt__entry;

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
  CLBT__PACKET_NONE,         /* the launch's groups scatter nothing */
  CLBT__PACKET_INLINE,       /* in its step kernel's record: no upload */
  CLBT__PACKET_INLINE_APART, /* in the record of a scatter launch of its
                                own, before the step kernel: no upload */
  CLBT__PACKET_FOLDED,       /* uploaded; its step kernel applies it */
  CLBT__PACKET_SCATTERED     /* uploaded; a scatter launch of its own */
} clbt__packet_place;

/* What a launch offers a plan: its groups' kinds, its device's row of the
   tuning table and the record sizes its program has. */
typedef struct clbt__launch_shape {
  uint32_t num_groups;       /* 1..8 */
  uint32_t token_groups;     /* bit g: group g maps tokens */
  const clbt__tuning *tuning;
  uint32_t num_classes;      /* the record's sizes */
  uint32_t record_words[CLBT_MAX_RECORD_CLASSES]; /* ascending */
  bool has_inline;           /* a packet can travel in the record */
  uint32_t compute_units;    /* its device's */
  uint32_t max_num_tokens;   /* each slot mapping's */
} clbt__launch_shape;

/*
 * The grid of a launch's step kernel for the groups of groups_mask, and on
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
clbt__grid clbt__plan_grid(const clbt__launch_shape *shape,
                           size_t local_size, uint32_t work,
                           uint32_t groups_mask, uint32_t num_tokens,
                           uint32_t padded);

/* The grid of a launch spread over `items` items: a scatter's packet
   items, or the entries of token slots. */
size_t clbt__plan_items_grid(const clbt__launch_shape *shape,
                             size_t local_size, size_t items);

/* One launch's share of a call. */
typedef struct clbt__launch_plan {
  uint32_t groups;            /* the scope's groups in it: bit g, group g */
  uint32_t work;              /* CLBT_WORK_* of its step kernel; 0: none */
  clbt__packet_place place;
  size_t part_at, part_words; /* its part of the packet, words; part_at
                                 in the call's upload */
  size_t scatter_items;       /* its largest group's rows and ids */
  bool scatters;              /* it runs a scatter launch of its own */
  clbt__entry step_entry, scatter_entry;
  uint32_t step_class, scatter_class; /* their record sizes */
} clbt__launch_plan;

/* The words of a scatter packet of `rows` rows and `cells` changed ids. */
uint64_t clbt__scatter_words(uint64_t rows, uint64_t cells);

/* The words a group's section of its launch's part takes: 0 unless the
   group scatters. */
size_t clbt__commit_section_words(const clbt__commit_plan *plan);

/*
 * Plans one launch's share of a call that asks `work` (CLBT_WORK_MAP,
 * _GATHER, _EXPORT with its parts, _STATE_SLOTS, _TOKEN_SLOTS; 0: none)
 * of the launch's groups in `groups` (bit g: group g), on a batch of
 * num_tokens tokens and `padded` requests. commits (NULL: the call commits
 * nothing) are the launch's groups' commit plans, their modes and counts
 * made; this places each scattering group's section in the launch's part
 * (packet_at). Sets all of *share but part_at, which the runner gives each
 * uploaded part in the call's one upload.
 */
void clbt__plan_launch(const clbt__launch_shape *shape, uint32_t groups,
                       uint32_t work, uint32_t num_tokens, uint32_t padded,
                       clbt__commit_plan *commits, clbt__launch_plan *share);

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

#endif /* CLBT_PLAN_H */
