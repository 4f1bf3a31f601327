/*
 * The simulated scheduler the examples drive.
 *
 * Requests arrive, their prompt tokens are scheduled (chunked to the step's
 * token budget) and then one generated token per step; each request's KV
 * cache grows a block at a time as its tokens arrive; finished requests give
 * their blocks back, and the last request of the batch takes a finished
 * one's place so that the batch stays dense. Its rows are kept one of two
 * ways (scheduler_rows): in batch order, as vLLM's v1 worker keeps them (the
 * last row moves into the finished one's), or in persistent request slots,
 * as vLLM's Model Runner V2 keeps them (a finished request's slot is
 * cleared and goes back to a free list; no row moves, and the batch names
 * each request's slot through an idx_mapping). Every decision is mirrored
 * into a clbt multi-group table as it is made (add_row, append_row,
 * clear_row, move_row), as an engine's worker does, and the scheduler keeps
 * its own account of every request's blocks: what the examples check clbt's
 * slots against.
 *
 * It is deterministic: the same seed and groups give the same steps, which
 * is what lets every rank of examples/context_parallel_mpi.c replay it.
 */
#ifndef CLBT_EXAMPLE_SCHEDULER_H
#define CLBT_EXAMPLE_SCHEDULER_H

#include <clbt/clbt.h>

#include <stdbool.h>
#include <stdint.h>

#define MAX_REQS 8        /* rows of the block table (max_num_reqs) */
#define MAX_TOKENS 64     /* tokens per step (max_num_batched_tokens) */
#define MAX_MODEL_LEN 256 /* tokens per request */
#define SCHEDULER_MAX_GROUPS 8
#define SCHEDULER_MIN_BLOCK_TOKENS 16
#define SCHEDULER_MAX_BLOCKS (MAX_MODEL_LEN / SCHEDULER_MIN_BLOCK_TOKENS)
#define SCHEDULER_MAX_POOL 128 /* blocks of one group's KV cache */

/* A KV-cache group as the scheduler sees it. */
typedef struct scheduler_group {
  /* A request's tokens one block holds: the block size, times
     cp_world_size for a group sharded by context parallelism (each rank
     holds block_size of them). At least SCHEDULER_MIN_BLOCK_TOKENS. */
  uint32_t block_tokens;
  uint32_t pool_blocks; /* the group's KV cache, at most SCHEDULER_MAX_POOL */
} scheduler_group;

/* How the scheduler keeps its rows (see above). */
typedef enum scheduler_rows {
  SCHEDULER_BATCH_ROWS,   /* row r holds the batch's request r */
  SCHEDULER_REQUEST_SLOTS /* a request keeps its slot until it finishes */
} scheduler_rows;

typedef struct request {
  uint32_t id, prompt_len, total_len;
  uint32_t slot; /* its row of the table (its batch index in batch rows) */
  uint32_t computed;  /* tokens whose KV is in the cache */
  uint32_t scheduled; /* tokens this step */
  uint32_t num_blocks[SCHEDULER_MAX_GROUPS];
  int32_t blocks[SCHEDULER_MAX_GROUPS][SCHEDULER_MAX_BLOCKS];
} request;

/* The scheduler's state; running[r] is the batch's request r. */
typedef struct scheduler {
  clbt_multi_table *table; /* where every decision is mirrored */
  scheduler_rows rows;
  uint32_t free_slots[MAX_REQS], num_free_slots; /* request slots */
  uint32_t num_groups;
  scheduler_group groups[SCHEDULER_MAX_GROUPS];
  request running[MAX_REQS];
  uint32_t num_running, next_id;
  int32_t free_blocks[SCHEDULER_MAX_GROUPS][SCHEDULER_MAX_POOL];
  uint32_t num_free[SCHEDULER_MAX_GROUPS];
  uint64_t random;
} scheduler;

/* The batch of one step: row r's tokens are
   [query_start_loc[r], query_start_loc[r + 1]). */
typedef struct batch {
  int32_t query_start_loc[MAX_REQS + 1];
  int64_t positions[MAX_TOKENS];
  uint32_t num_tokens;
} batch;

/* What a step did: requests that finished, rows moved (batch rows only),
   requests admitted. */
typedef struct step_summary {
  uint32_t finished, moved, admitted;
} step_summary;

/*
 * Starts a scheduler with nothing running and every block of each group
 * free (and, with request slots, every slot, in a shuffled order), keeping
 * rows as rows says and mirroring into table (num_groups groups, as the
 * table has). Returns false when the groups exceed the limits above.
 */
bool scheduler_init(scheduler *s, uint64_t seed, scheduler_rows rows,
                    uint32_t num_groups, const scheduler_group *groups,
                    clbt_multi_table *table);

/*
 * Decides one step: finishes requests (clearing and moving rows), admits
 * new ones, schedules tokens, appends the blocks they need, and lays out
 * the batch. Returns the status of the first table call that failed.
 */
clbt_status scheduler_step(scheduler *s, batch *b, step_summary *summary);

/* Counts this step's scheduled tokens as computed; call after the step. */
void scheduler_advance(scheduler *s);

/* Blocks of group g that running requests hold. */
uint32_t scheduler_blocks_in_use(const scheduler *s, uint32_t g);

#endif /* CLBT_EXAMPLE_SCHEDULER_H */
