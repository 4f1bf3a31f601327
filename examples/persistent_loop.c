/*
 * A serving loop in the persistent model, as vLLM's Model Runner V2 keeps
 * its block tables: every request owns a request slot (a row of the table)
 * from its arrival to its end, and no row ever moves.
 *
 * The simulated scheduler (scheduler.c, with SCHEDULER_REQUEST_SLOTS) takes
 * a slot from its free list for each new request, appends blocks to a
 * request's slot as its tokens arrive, and clears a finished request's slot
 * and gives it back to the free list; the batch stays dense by putting its
 * last request in the finished one's place. Each step the loop builds the
 * idx_mapping (batch index -> slot), pads the batch to a power of two as a
 * recorded graph would want, and makes one call,
 * clbt_multi_table_enqueue_step with CLBT_STEP_GATHER | CLBT_STEP_EXPORT:
 * the commit of what changed, the slot mapping of every group through the
 * idx_mapping, the gather of each group's input block table in batch order
 * (clbt_table_gathered_rows), and each group's page table for attention
 * libraries that read pages, not rows (FlashInfer's CSR arrays and
 * OpenVINO's, clbt_table_export_buffers). It then checks every slot, every
 * entry of every gathered table and every exported entry against its own
 * model of what they must hold, made from the scheduler's account of the
 * blocks.
 *
 *   persistent_loop [--steps N] [--seed N] [--verbose]
 *
 * Runs on the device CLBT_DEVICE selects. Prints a line per step with
 * --verbose, and a summary; exits 0 when everything was as expected.
 * docs/guide.md ("Two ways to keep rows") walks through the same calls.
 */
#include <clbt/clbt.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_NAME "persistent_loop"
#include "example.h"
#include "scheduler.h"

/* Two KV-cache groups. Their gathered rows keep, past a row's length, what
   earlier steps gathered there, as vLLM's do; 1 zeroes them. */
#define NUM_GROUPS 2
static const uint32_t block_sizes[NUM_GROUPS] = {16, 32};
#define ZERO_TAILS 0
#define POOL_TOKENS 768
#define MAX_WIDTH (MAX_MODEL_LEN / 16)

typedef struct engine {
  clbt_device *device;
  clbt_multi_table *table;
  cl_mem query_start_loc, positions, idx_mapping;
} engine;

/* What the gathered tables must hold: the model the loop checks against. */
typedef struct gathered_model {
  uint32_t width[NUM_GROUPS];
  int32_t rows[NUM_GROUPS][MAX_REQS][MAX_WIDTH];
} gathered_model;

/* What one group's export must write for the padded batch: FlashInfer's
   paged_kv_indptr, paged_kv_indices and paged_kv_last_page_len, OpenVINO's
   past_lens and subsequence_begins (docs/semantics.md, "Export"). */
typedef struct export_model {
  int32_t indptr[MAX_REQS + 1], indices[MAX_REQS * MAX_WIDTH];
  int32_t last_page_len[MAX_REQS], past_lens[MAX_REQS];
  int32_t subsequence_begins[MAX_REQS + 1];
} export_model;

typedef struct totals {
  uint64_t tokens, slots_checked, entries_checked, exported_checked, wrong,
      finished;
} totals;

/* ---- the device side ---------------------------------------------------- */

static void engine_start(engine *e) {
  check(clbt_device_open(NULL, &e->device), "clbt_device_open");
  clbt_group_config groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
    groups[g] = (clbt_group_config)CLBT_GROUP_CONFIG_INIT;
    groups[g].block_size = block_sizes[g];
    groups[g].max_num_blocks = MAX_MODEL_LEN / block_sizes[g];
  }
  clbt_multi_table_config config = CLBT_MULTI_TABLE_CONFIG_INIT;
  config.max_num_reqs = MAX_REQS;
  config.max_num_batched_tokens = MAX_TOKENS;
  config.num_groups = NUM_GROUPS;
  config.groups = groups;
  config.zero_gathered_tails = ZERO_TAILS;
  check(clbt_multi_table_create(e->device, &config, &e->table),
        "clbt_multi_table_create");
  e->query_start_loc = create_buffer(e->device, sizeof(int32_t) * (MAX_REQS + 1));
  e->positions = create_buffer(e->device, sizeof(int64_t) * MAX_TOKENS);
  e->idx_mapping = create_buffer(e->device, sizeof(int32_t) * MAX_REQS);
}

static void engine_stop(engine *e) {
  clReleaseMemObject(e->query_start_loc);
  clReleaseMemObject(e->positions);
  clReleaseMemObject(e->idx_mapping);
  clbt_multi_table_destroy(e->table);
  clbt_device_release(e->device);
}

/* A recorded graph is replayed at a few batch sizes: the batch is padded
   to the next power of two; 0 for an empty batch (num_reqs). */
static uint32_t padded_size(uint32_t num_reqs) {
  uint32_t padded = num_reqs ? 1 : 0;
  while (padded < num_reqs) padded *= 2;
  return padded;
}

/* The step: the batch's inputs, then one call for commit, slot mappings,
   gathers and exports of both groups; waits for its event. */
static void run_step(engine *e, const scheduler *s, const batch *b,
                     uint32_t num_reqs_padded) {
  int32_t idx_mapping[MAX_REQS];
  for (uint32_t i = 0; i < s->num_running; ++i)
    idx_mapping[i] = (int32_t)s->running[i].slot;
  write_buffer(e->device, e->query_start_loc, sizeof(int32_t) * (s->num_running + 1),
               b->query_start_loc);
  write_buffer(e->device, e->positions, sizeof(int64_t) * b->num_tokens, b->positions);
  write_buffer(e->device, e->idx_mapping, sizeof(int32_t) * s->num_running,
               idx_mapping);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  step.num_reqs = s->num_running;
  step.num_reqs_padded = num_reqs_padded;
  step.num_tokens = b->num_tokens;
  step.query_start_loc = e->query_start_loc;
  step.positions = e->positions;
  step.idx_mapping = e->idx_mapping;
  step.seq_lens = NULL; /* the export's lengths: last position + 1 */
  cl_event done = NULL;
  check(clbt_multi_table_enqueue_step(e->table, &step, 0, NULL, &done),
        "clbt_multi_table_enqueue_step");
  check_cl(clWaitForEvents(1, &done), "clWaitForEvents");
  clReleaseEvent(done);
}

/* ---- the model and the checks ------------------------------------------- */

/*
 * The gather's rule applied to the model: batch request i's row is its
 * blocks, past them 0 (zeroed tails) or what was there; rows num_reqs ..
 * num_reqs_padded - 1 are 0; rows past them keep what they held.
 */
static void gather_model(gathered_model *m, const scheduler *s,
                         uint32_t num_reqs_padded) {
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    for (uint32_t i = 0; i < num_reqs_padded; ++i) {
      int32_t *row = m->rows[g][i];
      uint32_t length = 0;
      if (i < s->num_running) {
        length = s->running[i].num_blocks[g];
        memcpy(row, s->running[i].blocks[g], length * sizeof *row);
      }
      if (i >= s->num_running || ZERO_TAILS)
        memset(row + length, 0, (m->width[g] - length) * sizeof *row);
    }
}

/*
 * The export's rule applied to the model, for group g (pages are its
 * blocks: no kernel_block_size, no context parallelism). Batch request i
 * holds the KV of its computed tokens and of this step's; its pages are the
 * first ceil(length / page) of its blocks, listed from indptr[i], the last
 * holding the rest of its tokens (0 when it has none, as vLLM gives it);
 * its past length is what precedes this step's query. A
 * request with no token this step and the padding requests have no pages;
 * padding requests begin where the batch's tokens end.
 */
static void export_model_build(export_model *m, const scheduler *s,
                               const batch *b, uint32_t g,
                               uint32_t num_reqs_padded) {
  uint32_t page = block_sizes[g];
  m->indptr[0] = 0;
  m->subsequence_begins[0] = b->query_start_loc[0];
  for (uint32_t i = 0; i < num_reqs_padded; ++i) {
    const request *r = i < s->num_running ? &s->running[i] : NULL;
    uint32_t length = r && r->scheduled ? r->computed + r->scheduled : 0;
    uint32_t pages = (length + page - 1) / page;
    if (pages)
      memcpy(&m->indices[m->indptr[i]], r->blocks[g], pages * sizeof(int32_t));
    m->indptr[i + 1] = m->indptr[i] + (int32_t)pages;
    m->last_page_len[i] = pages ? (int32_t)(length - (pages - 1) * page) : 0;
    m->past_lens[i] = r ? (int32_t)(length - r->scheduled) : 0;
    m->subsequence_begins[i + 1] =
        b->query_start_loc[r ? i + 1 : s->num_running];
  }
}

/* Group g's slot mapping against the scheduler's account: the token at
   position p of a request is in slot blocks[p / size] * size + p % size;
   the rest of the buffer is -1. Returns the mismatches. */
static uint64_t check_slots(engine *e, const scheduler *s, uint32_t g,
                            totals *t) {
  int64_t slots[MAX_TOKENS];
  read_buffer(e->device, clbt_table_slot_mapping(clbt_multi_table_group(e->table, g)),
              sizeof slots, slots);
  uint64_t wrong = 0;
  uint32_t token = 0, size = block_sizes[g];
  for (uint32_t i = 0; i < s->num_running; ++i) {
    const request *r = &s->running[i];
    for (uint32_t k = 0; k < r->scheduled; ++k, ++token) {
      uint32_t position = r->computed + k;
      wrong += slots[token] != (int64_t)r->blocks[g][position / size] * size +
                                   position % size;
    }
  }
  for (; token < MAX_TOKENS; ++token) wrong += slots[token] != CLBT_PAD_SLOT_ID;
  t->slots_checked += MAX_TOKENS;
  return wrong;
}

/* Group g's whole gathered table against the model. */
static uint64_t check_gathered(engine *e, const gathered_model *m, uint32_t g,
                               totals *t) {
  static int32_t gathered[MAX_REQS * MAX_WIDTH];
  size_t entries = (size_t)MAX_REQS * m->width[g];
  read_buffer(e->device, clbt_table_gathered_rows(clbt_multi_table_group(e->table, g)),
              entries * sizeof *gathered, gathered);
  uint64_t wrong = 0;
  for (uint32_t i = 0; i < MAX_REQS; ++i)
    for (uint32_t k = 0; k < m->width[g]; ++k)
      wrong += gathered[(size_t)i * m->width[g] + k] != m->rows[g][i][k];
  t->entries_checked += entries;
  return wrong;
}

/* The first count entries of an int32 buffer against expected. */
static uint64_t check_ints(engine *e, cl_mem buffer, uint32_t count,
                           const int32_t *expected, totals *t) {
  static int32_t read[MAX_REQS * MAX_WIDTH];
  read_buffer(e->device, buffer, count * sizeof *read, read);
  uint64_t wrong = 0;
  for (uint32_t i = 0; i < count; ++i) wrong += read[i] != expected[i];
  t->exported_checked += count;
  return wrong;
}

/* Group g's export buffers against the model, where the step wrote them:
   entries [0, B] of the indptr and subsequence_begins, [0, B) of the
   per-request arrays, [0, indptr[B]) of the indices (B: num_reqs_padded). */
static uint64_t check_export(engine *e, const export_model *m, uint32_t g,
                             uint32_t num_reqs_padded, totals *t) {
  clbt_export_buffers out;
  check(clbt_table_export_buffers(clbt_multi_table_group(e->table, g), &out),
        "clbt_table_export_buffers");
  uint32_t b = num_reqs_padded;
  uint64_t wrong = out.page_size != block_sizes[g];
  wrong += check_ints(e, out.paged_kv_indptr, b + 1, m->indptr, t);
  wrong += check_ints(e, out.paged_kv_indices, (uint32_t)m->indptr[b],
                      m->indices, t);
  wrong += check_ints(e, out.paged_kv_last_page_len, b, m->last_page_len, t);
  wrong += check_ints(e, out.past_lens, b, m->past_lens, t);
  wrong += check_ints(e, out.subsequence_begins, b + 1,
                      m->subsequence_begins, t);
  return wrong;
}

/* ---- the loop ----------------------------------------------------------- */

int main(int argc, char **argv) {
  uint32_t steps = 50;
  uint64_t seed = 1;
  bool verbose = false;
  if (!parse_arguments(argc, argv, &steps, &seed, &verbose)) return 2;
  static scheduler s;
  static batch b;
  static gathered_model model; /* zero, as the gathered tables start */
  static export_model exported;
  engine e = {0};
  totals t = {0};
  engine_start(&e);
  scheduler_group groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
    groups[g] = (scheduler_group){.block_tokens = block_sizes[g],
                                  .pool_blocks = POOL_TOKENS / block_sizes[g]};
    model.width[g] = MAX_MODEL_LEN / block_sizes[g];
  }
  if (!scheduler_init(&s, seed, SCHEDULER_REQUEST_SLOTS, NUM_GROUPS, groups,
                      e.table)) {
    fprintf(stderr, "persistent_loop: the groups exceed the scheduler's "
                    "limits\n");
    return EXIT_FAILURE;
  }

  for (uint32_t step = 1; step <= steps; ++step) {
    step_summary summary;
    check(scheduler_step(&s, &b, &summary), "the scheduler's step");
    uint32_t padded = padded_size(s.num_running);
    run_step(&e, &s, &b, padded);
    gather_model(&model, &s, padded);
    uint64_t wrong = 0;
    for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
      export_model_build(&exported, &s, &b, g, padded);
      wrong += check_slots(&e, &s, g, &t) + check_gathered(&e, &model, g, &t) +
               check_export(&e, &exported, g, padded, &t);
    }
    scheduler_advance(&s);
    t.tokens += b.num_tokens;
    t.wrong += wrong;
    t.finished += summary.finished;
    if (verbose) {
      printf("step %u: %u running (+%u new, -%u finished), %u tokens, "
             "padded to %u, slots",
             step, s.num_running, summary.admitted, summary.finished,
             b.num_tokens, padded);
      for (uint32_t i = 0; i < s.num_running; ++i)
        printf("%c%u", i ? ',' : ' ', (unsigned)s.running[i].slot);
      printf(", %s\n", wrong ? "WRONG" : "ok");
    }
  }
  engine_stop(&e);
  printf("persistent_loop: %u steps, %" PRIu64 " requests finished, %" PRIu64
         " tokens, %" PRIu64 " slots, %" PRIu64 " gathered entries and %" PRIu64
         " exported entries checked, %" PRIu64 " wrong\n",
         steps, t.finished, t.tokens, t.slots_checked, t.entries_checked,
         t.exported_checked, t.wrong);
  return t.wrong == 0 && t.tokens > 0 && t.finished > 0 ? EXIT_SUCCESS
                                                         : EXIT_FAILURE;
}
