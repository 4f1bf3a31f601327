/*
 * The serving engine that the step section of `clbt bench` drives
 * (step.c): a multi-group table in vLLM's v1 model or the persistent
 * model, the batch buffers its scheduler writes, and its steps. A step is
 * split as an engine splits it: the plan (the scheduler's choices, the
 * batch buffers written, the queue finished: the engine's work, never
 * timed) and the apply (clbt's row calls, with block ids drawn ahead of
 * time, then clbt_multi_table_enqueue_step: clbt's work, what is timed).
 */
#ifndef TOOL_BENCH_STEP_H
#define TOOL_BENCH_STEP_H

#include "bench/harness.h"

enum {
  STEP_MAX_REQS = 1024,    /* the seed's max_num_reqs */
  STEP_MAX_TOKENS = 16384, /* and its slot-mapping buffer */
  STEP_MAX_GROUPS = 4,
  STEP_TOKENS_PER_BLOCK = 16, /* a row's length counts blocks of 16 */
  STEP_MIN_BLOCKS = 64,       /* the seed's rows: 64 to 511 blocks of 16 */
  STEP_MAX_BLOCKS = 512,
  STEP_GROWS_ONE_IN = 16 /* rows that gain a block per step */
};

/* A case of seed_step.py (or one beside them), by its name. */
typedef struct step_case {
  const char *name;
  uint32_t requests, num_groups;
  uint32_t block_sizes[STEP_MAX_GROUPS], max_blocks[STEP_MAX_GROUPS];
} step_case;

/* How a case's rows are kept and what its step does: the v1 model, the
   persistent model, and the persistent model with the export in the step. */
typedef struct step_variant {
  const char *name;
  bool persistent; /* rows in request slots, read through an idx_mapping */
  uint32_t flags;  /* clbt_step.flags */
  double steady_limit; /* issue 42's target for a steady step / empty call */
  const char *work; /* what the changed rows cost, for a missed target */
  uint32_t export_flags, pitch; /* clbt_step.export_flags, dense_row_pitch */
} step_variant;

/* What a step changes. Every step 1 request in STEP_GROWS_ONE_IN gains a
   block in every group; in a churning step 1 in leaves_one_in (a multiple
   of STEP_GROWS_ONE_IN, so that the two sets never meet) leaves and a new
   request takes its batch position. */
typedef struct step_kind {
  const char *suffix;     /* of the records' names: "", "/churn", ... */
  uint32_t leaves_one_in; /* 0: nobody leaves */
} step_kind;

/* A row update of a planned step: the row and, per group, its ids (a slice
   of the model's pool) and their count. */
typedef struct step_update {
  uint32_t row;
  const int32_t *ids[STEP_MAX_GROUPS];
  size_t counts[STEP_MAX_GROUPS];
} step_update;

/* One table and the batch that drives it, in one of the models. */
typedef struct step_model {
  const step_case *shape;
  bool persistent;
  clbt_multi_table *table;
  cl_command_queue queue; /* the table's device's */
  int32_t *rows;          /* batch request -> its row (request slot) */
  int64_t *positions;     /* each request's one token */
  uint32_t *free_slots;   /* a ring of free slots, oldest first */
  uint32_t first_free, num_free;
  cl_mem idx_mapping, other_idx_mapping, query_start_loc, positions_buffer;
  clbt_step step;
  uint64_t steps; /* planned so far: which rows grow, which leave */
  int32_t *pool;  /* block ids drawn at creation, taken in order */
  size_t pool_next;
  /* The planned step, in the order vLLM's engine applies it: the rows of
     the requests that left cleared, the new requests' rows added, the
     running requests' blocks appended. */
  uint32_t *cleared;
  step_update *added, *appended;
  uint32_t num_cleared, num_added, num_appended;
  uint32_t changed_ids;  /* block ids the planned updates write */
  uint32_t batch_writes; /* the plan's writes of positions and idx_mapping */
} step_model;

/* A table on device with the case's groups (zero_gathered_tails for all)
   and a request in each batch position: rows 0 .. requests - 1 in the v1
   model, random request slots of STEP_MAX_REQS in the persistent one;
   committed, its first two steps run (the second reaps the commit's
   staging slots), and the batch's buffers written: one token per request,
   at the end of its row. */
step_model *step_model_create(bench *b, clbt_device *device,
                              const step_case *shape,
                              const step_variant *variant,
                              uint32_t zero_tails);
void step_model_destroy(step_model *m); /* NULL is fine */

/* Plans the next step of kind: its row updates and the host's copy of the
   batch; writes positions and idx_mapping where new requests changed them,
   and finishes the model's queue. */
void step_plan(bench *b, step_model *m, const step_kind *kind);
/* The planned step's row calls; marks, when not NULL, gets the time after
   the clears, after the adds and after the appends. */
void step_apply(step_model *m, double *marks);
/* clbt_multi_table_enqueue_step; *event (when event is not NULL) is its
   last command's. */
void step_enqueue(step_model *m, cl_event *event);
/* Writes positions and idx_mapping from the host's copy, not waiting;
   returns the writes made. */
uint32_t step_send_batch(step_model *m);

/* After a finished step: each group's slot mapping, and in the persistent
   model its gathered rows, and with the export its page tables, against
   the host rows. Ends the process at the first difference. */
void step_check(const step_model *m);

#endif /* TOOL_BENCH_STEP_H */
