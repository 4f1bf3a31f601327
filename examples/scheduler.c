/*
 * The simulated scheduler of the examples (scheduler.h says what it does).
 */
#include "scheduler.h"

#include <stddef.h>

static uint32_t random_below(scheduler *s, uint32_t n) {
  s->random ^= s->random << 13;
  s->random ^= s->random >> 7;
  s->random ^= s->random << 17;
  return (uint32_t)(s->random % n);
}

static uint32_t blocks_for(const scheduler *s, uint32_t tokens, uint32_t g) {
  uint32_t size = s->groups[g].block_tokens;
  return (tokens + size - 1) / size;
}

/* Blocks the running requests will still take before they finish. */
static uint32_t promised_blocks(const scheduler *s, uint32_t g) {
  uint32_t promised = 0;
  for (uint32_t r = 0; r < s->num_running; ++r)
    promised += blocks_for(s, s->running[r].total_len, g) -
                s->running[r].num_blocks[g];
  return promised;
}

/* Every block of group g is free, in a shuffled order as after churn. */
static void fill_pool(scheduler *s, uint32_t g) {
  uint32_t pool = s->groups[g].pool_blocks;
  for (s->num_free[g] = 0; s->num_free[g] < pool; ++s->num_free[g])
    s->free_blocks[g][s->num_free[g]] = (int32_t)s->num_free[g];
  for (uint32_t i = s->num_free[g] - 1; i > 0; --i) {
    uint32_t j = random_below(s, i + 1);
    int32_t id = s->free_blocks[g][i];
    s->free_blocks[g][i] = s->free_blocks[g][j];
    s->free_blocks[g][j] = id;
  }
}

/* Every request slot is free, in a shuffled order: slots are anywhere. */
static void free_every_slot(scheduler *s) {
  for (s->num_free_slots = 0; s->num_free_slots < MAX_REQS; ++s->num_free_slots)
    s->free_slots[s->num_free_slots] = s->num_free_slots;
  for (uint32_t i = MAX_REQS - 1; i > 0; --i) {
    uint32_t j = random_below(s, i + 1), slot = s->free_slots[i];
    s->free_slots[i] = s->free_slots[j];
    s->free_slots[j] = slot;
  }
}

bool scheduler_init(scheduler *s, uint64_t seed, scheduler_rows rows,
                    uint32_t num_groups, const scheduler_group *groups,
                    clbt_multi_table *table) {
  if (num_groups == 0 || num_groups > SCHEDULER_MAX_GROUPS) return false;
  *s = (scheduler){.table = table, .rows = rows, .num_groups = num_groups,
                   .random = seed * 2654435761u + 1};
  if (rows == SCHEDULER_REQUEST_SLOTS) free_every_slot(s);
  for (uint32_t g = 0; g < num_groups; ++g) {
    if (groups[g].block_tokens < SCHEDULER_MIN_BLOCK_TOKENS ||
        groups[g].pool_blocks == 0 || groups[g].pool_blocks > SCHEDULER_MAX_POOL)
      return false;
    s->groups[g] = groups[g];
    fill_pool(s, g);
  }
  return true;
}

/* A request is admitted only when its whole life fits in the free blocks,
   so that no running request ever waits for a block. */
static bool fits(const scheduler *s, uint32_t total_len) {
  for (uint32_t g = 0; g < s->num_groups; ++g)
    if (blocks_for(s, total_len, g) + promised_blocks(s, g) > s->num_free[g])
      return false;
  return true;
}

/* New requests arrive: up to two per step, each at the end of the batch, in
   the next free row (batch rows) or a free slot (request slots). */
static clbt_status admit(scheduler *s, uint32_t *admitted) {
  uint32_t arrivals = random_below(s, 3);
  for (*admitted = 0; *admitted < arrivals && s->num_running < MAX_REQS;
       ++*admitted) {
    uint32_t prompt_len = 1 + random_below(s, 120);
    uint32_t total_len = prompt_len + 1 + random_below(s, 40);
    if (!fits(s, total_len)) break;
    uint32_t slot = s->rows == SCHEDULER_REQUEST_SLOTS
                        ? s->free_slots[--s->num_free_slots]
                        : s->num_running;
    s->running[s->num_running++] = (request){.id = s->next_id++,
                                             .prompt_len = prompt_len,
                                             .total_len = total_len,
                                             .slot = slot};
    /* add_row replaces whatever the row held; the blocks come later. */
    const int32_t *no_ids[SCHEDULER_MAX_GROUPS] = {NULL};
    const size_t no_counts[SCHEDULER_MAX_GROUPS] = {0};
    clbt_status status =
        clbt_multi_table_add_row(s->table, slot, no_ids, no_counts);
    if (status) return status;
  }
  return CLBT_SUCCESS;
}

/* Finished requests give back their blocks (and slots); the batch's last
   request fills the hole, its row moved along with batch rows. */
static clbt_status finish(scheduler *s, step_summary *summary) {
  for (uint32_t row = 0; row < s->num_running;) {
    request *r = &s->running[row];
    if (r->computed < r->total_len) {
      ++row;
      continue;
    }
    for (uint32_t g = 0; g < s->num_groups; ++g)
      for (uint32_t b = 0; b < r->num_blocks[g]; ++b)
        s->free_blocks[g][s->num_free[g]++] = r->blocks[g][b];
    clbt_status status = clbt_multi_table_clear_row(s->table, r->slot);
    if (s->rows == SCHEDULER_REQUEST_SLOTS)
      s->free_slots[s->num_free_slots++] = r->slot;
    uint32_t last = --s->num_running;
    if (!status && row != last) {
      s->running[row] = s->running[last];
      if (s->rows == SCHEDULER_BATCH_ROWS) {
        status = clbt_multi_table_move_row(s->table, last, row);
        s->running[row].slot = row;
        ++summary->moved;
      }
    }
    if (status) return status;
    ++summary->finished;
  }
  return CLBT_SUCCESS;
}

/* Appends blocks, one at a time, until the request's tokens fit. */
static clbt_status grow(scheduler *s, uint32_t row, uint32_t tokens) {
  request *r = &s->running[row];
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    while (r->num_blocks[g] < blocks_for(s, tokens, g)) {
      int32_t id = s->free_blocks[g][--s->num_free[g]];
      const int32_t *ids[SCHEDULER_MAX_GROUPS] = {NULL};
      size_t counts[SCHEDULER_MAX_GROUPS] = {0};
      ids[g] = &id;
      counts[g] = 1;
      clbt_status status =
          clbt_multi_table_append_row(s->table, r->slot, ids, counts);
      if (status) return status;
      r->blocks[g][r->num_blocks[g]++] = id;
    }
  }
  return CLBT_SUCCESS;
}

/* Schedules prompt tokens (chunked to the step's budget) or one new token
   per request, in row order, and lays out the batch. */
static clbt_status schedule(scheduler *s, batch *b) {
  b->num_tokens = 0;
  for (uint32_t row = 0; row < s->num_running; ++row) {
    request *r = &s->running[row];
    uint32_t budget = MAX_TOKENS - b->num_tokens;
    uint32_t wanted = r->computed < r->prompt_len
                          ? r->prompt_len - r->computed
                          : 1;
    r->scheduled = wanted < budget ? wanted : budget;
    clbt_status status = grow(s, row, r->computed + r->scheduled);
    if (status) return status;
    b->query_start_loc[row] = (int32_t)b->num_tokens;
    for (uint32_t t = 0; t < r->scheduled; ++t)
      b->positions[b->num_tokens++] = r->computed + t;
  }
  b->query_start_loc[s->num_running] = (int32_t)b->num_tokens;
  return CLBT_SUCCESS;
}

clbt_status scheduler_step(scheduler *s, batch *b, step_summary *summary) {
  *summary = (step_summary){0};
  clbt_status status = finish(s, summary);
  if (!status) status = admit(s, &summary->admitted);
  if (!status) status = schedule(s, b);
  return status;
}

void scheduler_advance(scheduler *s) {
  for (uint32_t row = 0; row < s->num_running; ++row)
    s->running[row].computed += s->running[row].scheduled;
}

uint32_t scheduler_blocks_in_use(const scheduler *s, uint32_t g) {
  return s->groups[g].pool_blocks - s->num_free[g];
}
