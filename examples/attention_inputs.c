/*
 * How one clbt step feeds attention backends. A hybrid model's table (a KV
 * group whose 32-token blocks the kernels read as 16-token pages, and a
 * Mamba group of state blocks) in the persistent model of vLLM's Model
 * Runner V2 serves a prefill and a few decodes, each batch padded to 4 as
 * a recorded graph wants, with ONE clbt_multi_table_enqueue_step a step.
 *
 * Each step writes every token's K and V into a small paged KV cache on
 * the host through the step's slot mapping, then hands the exported arrays
 * to readers shaped like each consumer's kernel, which attend one query per
 * request over the K/V their layout leads them to: FlashInfer's CSR
 * (paged_kv_indptr/indices/last_page_len, and the context-only CSR of a
 * DCP prefill), FA3's page_table + seqused_k at a pitch of our choosing
 * (FlashMLA's block_table + cache_seqlens is the same layout on 64-token
 * pages), OpenVINO's block_indices/block_indices_begins/past_lens/
 * subsequence_begins, Mamba's state_indices, and once the slots of a
 * sparse top-k index matrix (clbt_multi_table_enqueue_token_slots).
 *
 * Every result must equal attention computed directly over the request's
 * own K/V: K and V are functions of (request, position), which the example
 * knows from its own bookkeeping, never from clbt.
 *
 *   attention_inputs
 *
 * Runs on the device CLBT_DEVICE selects, prints a line per step and per
 * layout, and exits nonzero on any mismatch. docs/guide.md ("Feeding
 * FlashInfer, FA3, FlashMLA and OpenVINO") explains each array.
 */
#include <clbt/clbt.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define EXAMPLE_NAME "attention_inputs"
#include "example.h"

#define HEAD_DIM 4
#define MAX_REQS 4     /* request slots; every batch is padded to 4 */
#define MAX_TOKENS 128 /* a step's tokens */
#define KV_BLOCK 32    /* the KV manager's block ... */
#define PAGE 16        /* ... is two of the kernels' pages */
#define MAX_BLOCKS 8   /* KV blocks a request may hold: 256 tokens */
#define WIDTH (MAX_BLOCKS * KV_BLOCK / PAGE) /* a row, in pages */
#define STATE_BLOCK 64 /* Mamba: a state block per 64 tokens */
#define MAX_STATES 4
#define PITCH 12       /* the dense page table's row pitch: ours */
#define POOL_BLOCKS 32 /* KV blocks in the cache; 0 is vLLM's null block */
#define NUM_SLOTS (POOL_BLOCKS * KV_BLOCK)
#define TOP_K 4
#define NUM_REQUESTS 3
#define NUM_STEPS 4

enum { KV_GROUP, STATE_GROUP, NUM_GROUPS };

/* ---- what the example knows by itself ----------------------------------- */

/* A value in [-1, 1) per (request, position, dimension, what): K, V and
   the queries are functions of their coordinates (a 64-bit mixer). */
enum { KEY, VALUE, QUERY };
static double value_of(uint32_t request, uint32_t position, uint32_t d,
                       uint32_t what) {
  uint64_t x = (uint64_t)request << 40 ^ (uint64_t)position << 8 ^ d << 2 ^
               what;
  x = (x ^ x >> 33) * 0xff51afd7ed558ccdull;
  x = (x ^ x >> 33) * 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (double)(x >> 11) / (double)(1ull << 52) - 1.0;
}

/* A request as the engine's own bookkeeping has it. */
typedef struct request {
  uint32_t id, slot; /* our name for it; its row (request slot) */
  uint32_t length;   /* tokens with K/V, this step's included */
  uint32_t num_kv, num_states;
  int32_t kv[MAX_BLOCKS], states[MAX_STATES];
} request;

/* Tokens each request schedules at each step (0: not in the batch): A and
   B prefill, then decode; C prefills while they decode. A's 33rd token
   takes a second KV block, C's 65th a second state block. */
static const uint32_t schedule[NUM_STEPS][NUM_REQUESTS] = {
    {31, 20, 0}, {1, 1, 63}, {1, 1, 1}, {1, 1, 1}};

typedef struct batch {
  uint32_t step, num_reqs, num_tokens;
  request *reqs[MAX_REQS]; /* batch order */
  uint32_t query[MAX_REQS];
  int32_t query_start_loc[MAX_REQS + 1], idx_mapping[MAX_REQS];
  int64_t positions[MAX_TOKENS];
} batch;

/* One-query attention a token at a time, with a running maximum (online
   softmax), as the paged kernels compute it. */
typedef struct attention {
  double max, sum, out[HEAD_DIM];
  uint32_t tokens;
} attention;
/* What a reader gives for a layout that points outside its arrays. */
#define UNREADABLE ((attention){.tokens = ~0u})

static void attend(attention *a, const double *q, const double *k,
                   const double *v) {
  double score = 0;
  for (int d = 0; d < HEAD_DIM; ++d) score += q[d] * k[d];
  score /= sqrt(HEAD_DIM);
  if (a->tokens == 0) a->max = score;
  double max = fmax(a->max, score), rescale = exp(a->max - max);
  double weight = exp(score - max);
  a->max = max;
  a->sum = a->sum * rescale + weight;
  for (int d = 0; d < HEAD_DIM; ++d)
    a->out[d] = a->out[d] * rescale + weight * v[d];
  ++a->tokens;
}

/* Adds position p of request id with its K/V from value_of, not from any
   cache: the reference every layout must match. */
static void attend_own(attention *a, const double *q, uint32_t id, uint32_t p) {
  double k[HEAD_DIM], v[HEAD_DIM];
  for (uint32_t d = 0; d < HEAD_DIM; ++d) {
    k[d] = value_of(id, p, d, KEY);
    v[d] = value_of(id, p, d, VALUE);
  }
  attend(a, q, k, v);
}

static attention dense(const double *q, uint32_t id, uint32_t length) {
  attention a = {0};
  for (uint32_t p = 0; p < length; ++p) attend_own(&a, q, id, p);
  return a;
}

static bool same(const attention *got, const attention *want) {
  if (got->tokens != want->tokens) return false;
  for (int d = 0; got->tokens && d < HEAD_DIM; ++d)
    if (!(fabs(got->out[d] / got->sum - want->out[d] / want->sum) <= 1e-12))
      return false; /* NaN too: a cache entry never written */
  return true;
}

/* ---- the engine: the table, and the rows it keeps up to date ----------- */

typedef struct engine {
  clbt_device *device;
  clbt_multi_table *table;
  cl_mem query_start_loc, positions, idx_mapping, topk_indices, topk_slots;
  uint32_t kv_dealt, states_dealt; /* the block allocator: ids handed out */
} engine;

static void engine_start(engine *e) {
  check(clbt_device_open(NULL, &e->device), "clbt_device_open");
  clbt_group_config groups[NUM_GROUPS] = {CLBT_GROUP_CONFIG_INIT,
                                          CLBT_GROUP_CONFIG_INIT};
  groups[KV_GROUP].block_size = KV_BLOCK;
  groups[KV_GROUP].kernel_block_size = PAGE;
  groups[KV_GROUP].max_num_blocks = MAX_BLOCKS;
  groups[STATE_GROUP].block_size = STATE_BLOCK;
  groups[STATE_GROUP].max_num_blocks = MAX_STATES;
  groups[STATE_GROUP].slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_multi_table_config config = CLBT_MULTI_TABLE_CONFIG_INIT;
  config.max_num_reqs = MAX_REQS;
  config.max_num_batched_tokens = MAX_TOKENS;
  config.num_groups = NUM_GROUPS;
  config.groups = groups;
  check(clbt_multi_table_create(e->device, &config, &e->table),
        "clbt_multi_table_create");
  /* 256 tokens is a multiple of 128, so the table's alignment adds no
     column: a row is WIDTH pages, as the arrays below are sized. */
  if (clbt_table_width(clbt_multi_table_group(e->table, KV_GROUP)) != WIDTH) {
    fprintf(stderr, EXAMPLE_NAME ": the KV rows are not %d pages\n", WIDTH);
    exit(EXIT_FAILURE);
  }
  size_t int32 = sizeof(int32_t);
  e->query_start_loc = create_buffer(e->device, int32 * (MAX_REQS + 1));
  e->positions = create_buffer(e->device, sizeof(int64_t) * MAX_TOKENS);
  e->idx_mapping = create_buffer(e->device, int32 * MAX_REQS);
  e->topk_indices = create_buffer(e->device, int32 * MAX_REQS * TOP_K);
  e->topk_slots = create_buffer(e->device, int32 * MAX_REQS * TOP_K);
}

static void engine_stop(engine *e) {
  clReleaseMemObject(e->query_start_loc);
  clReleaseMemObject(e->positions);
  clReleaseMemObject(e->idx_mapping);
  clReleaseMemObject(e->topk_indices);
  clReleaseMemObject(e->topk_slots);
  clbt_multi_table_destroy(e->table);
  clbt_device_release(e->device);
}

/* Gives a request the KV and state blocks its new tokens need, both groups
   in one call. KV ids are dealt out of order (7n mod 31 + 1), as a real
   allocator's are, so that a layout that confused two pages shows. */
static void grow(engine *e, request *r, uint32_t tokens) {
  int32_t kv[MAX_BLOCKS], states[MAX_STATES];
  size_t counts[NUM_GROUPS] = {0, 0};
  r->length += tokens;
  for (; r->num_kv * KV_BLOCK < r->length; ++r->num_kv)
    kv[counts[KV_GROUP]++] = r->kv[r->num_kv] =
        (int32_t)(e->kv_dealt++ * 7 % 31 + 1);
  for (; r->num_states * STATE_BLOCK < r->length; ++r->num_states)
    states[counts[STATE_GROUP]++] = r->states[r->num_states] =
        (int32_t)(100 + e->states_dealt++);
  const int32_t *ids[NUM_GROUPS] = {kv, states};
  check(clbt_multi_table_append_row(e->table, r->slot, ids, counts),
        "clbt_multi_table_append_row");
}

/* The batch of a step: the requests the schedule names, in order. */
static void make_batch(engine *e, request *reqs, uint32_t step, batch *b) {
  *b = (batch){.step = step};
  for (uint32_t i = 0; i < NUM_REQUESTS; ++i) {
    uint32_t tokens = schedule[step][i];
    if (tokens == 0) continue;
    grow(e, &reqs[i], tokens);
    uint32_t n = b->num_reqs++;
    b->reqs[n] = &reqs[i];
    b->query[n] = tokens;
    b->idx_mapping[n] = (int32_t)reqs[i].slot;
    b->query_start_loc[n] = (int32_t)b->num_tokens;
    for (uint32_t p = reqs[i].length - tokens; p < reqs[i].length; ++p)
      b->positions[b->num_tokens++] = p;
  }
  b->query_start_loc[b->num_reqs] = (int32_t)b->num_tokens;
}

/* The step: one call commits the new blocks and writes the slot mapping,
   the gathered rows (the block table of kernels that read rows; unused
   here), every export and the Mamba state slots. */
static void run_step(engine *e, const batch *b) {
  write_buffer(e->device, e->query_start_loc,
               sizeof(int32_t) * (b->num_reqs + 1), b->query_start_loc);
  write_buffer(e->device, e->positions, sizeof(int64_t) * b->num_tokens,
               b->positions);
  write_buffer(e->device, e->idx_mapping, sizeof(int32_t) * b->num_reqs,
               b->idx_mapping);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT | CLBT_STEP_STATE_SLOTS;
  step.export_flags = CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE;
  step.dense_row_pitch = PITCH;
  step.num_reqs = b->num_reqs;
  step.num_reqs_padded = MAX_REQS; /* the graph's batch size */
  step.num_tokens = b->num_tokens;
  step.query_start_loc = e->query_start_loc;
  step.positions = e->positions;
  step.idx_mapping = e->idx_mapping;
  step.seq_lens = NULL;     /* lengths: the last position + 1 */
  step.num_state_slots = 1; /* no speculative blocks */
  cl_event done = NULL;
  check(clbt_multi_table_enqueue_step(e->table, &step, 0, NULL, &done),
        "clbt_multi_table_enqueue_step");
  check_cl(clWaitForEvents(1, &done), "clWaitForEvents");
  clReleaseEvent(done);
}

/* ---- the KV cache and the consumers' readers --------------------------- */

typedef struct kv_cache {
  double k[NUM_SLOTS][HEAD_DIM], v[NUM_SLOTS][HEAD_DIM];
} kv_cache;

/* vLLM's reshape_and_cache: token t's K and V go to slot_mapping[t]. */
static void write_kv(engine *e, const batch *b, kv_cache *cache) {
  int64_t slots[MAX_TOKENS];
  clbt_table *kv = clbt_multi_table_group(e->table, KV_GROUP);
  read_buffer(e->device, clbt_table_slot_mapping(kv), sizeof slots, slots);
  for (uint32_t i = 0; i < b->num_reqs; ++i)
    for (int32_t t = b->query_start_loc[i]; t < b->query_start_loc[i + 1];
         ++t) {
      if (slots[t] < 0 || slots[t] >= NUM_SLOTS) { /* every token has one */
        fprintf(stderr, EXAMPLE_NAME ": token %d got slot %lld\n", t,
                (long long)slots[t]);
        exit(EXIT_FAILURE);
      }
      for (uint32_t d = 0; d < HEAD_DIM; ++d) {
        uint32_t position = (uint32_t)b->positions[t];
        cache->k[slots[t]][d] = value_of(b->reqs[i]->id, position, d, KEY);
        cache->v[slots[t]][d] = value_of(b->reqs[i]->id, position, d, VALUE);
      }
    }
}

/* The arrays one step exported, read back to the host. */
typedef struct exported {
  int32_t page_size; /* out.page_size: the group's kernel block */
  int32_t indptr[MAX_REQS + 1], indices[MAX_REQS * WIDTH];
  int32_t last_page_len[MAX_REQS];
  int32_t context_indptr[MAX_REQS + 1], context_indices[MAX_REQS * WIDTH];
  int32_t context_last_page_len[MAX_REQS];
  int32_t past_lens[MAX_REQS], subsequence_begins[MAX_REQS + 1];
  int32_t seq_lens[MAX_REQS], page_table[MAX_REQS * PITCH];
  int32_t state_slots[MAX_REQS];
} exported;

static void read_exports(engine *e, exported *x) {
  clbt_export_buffers out = CLBT_EXPORT_BUFFERS_INIT;
  check(clbt_table_export_buffers(clbt_multi_table_group(e->table, KV_GROUP),
                                  &out),
        "clbt_table_export_buffers");
  x->page_size = (int32_t)out.page_size;
#define READ(buffer, array) \
  read_buffer(e->device, buffer, sizeof x->array, x->array)
  READ(out.paged_kv_indptr, indptr);
  READ(out.paged_kv_indices, indices);
  READ(out.paged_kv_last_page_len, last_page_len);
  READ(out.context_kv_indptr, context_indptr);
  READ(out.context_kv_indices, context_indices);
  READ(out.context_kv_last_page_len, context_last_page_len);
  READ(out.past_lens, past_lens);
  READ(out.subsequence_begins, subsequence_begins);
  READ(out.seq_lens, seq_lens);
  READ(out.page_table, page_table);
  READ(clbt_table_state_slots(clbt_multi_table_group(e->table, STATE_GROUP)),
       state_slots);
#undef READ
}

/* What every paged kernel does once its layout has said where a request's
   pages start (pages[first]) and how many tokens it has: token j is at
   offset j % page of page pages[first + j / page], the slot the slot
   mapping gave it. The kernels trust their inputs; this reader refuses a
   list that leaves its array (of size entries) or the cache, so that a
   wrong export fails here instead of reading outside them. */
static attention attend_pages(const kv_cache *cache, const double *q,
                              const int32_t *pages, int32_t size,
                              int32_t first, int32_t num_pages,
                              int32_t length, int32_t page) {
  if (first < 0 || num_pages < 0 || num_pages > size - first || page <= 0 ||
      length < 0 || length > (int64_t)num_pages * page)
    return UNREADABLE;
  attention a = {0};
  for (int32_t j = 0; j < length; ++j) {
    int64_t slot = (int64_t)pages[first + j / page] * page + j % page;
    if (slot < 0 || slot >= NUM_SLOTS) return UNREADABLE;
    attend(&a, q, cache->k[slot], cache->v[slot]);
  }
  return a;
}

/* FlashInfer's paged kernels: request r's pages are indices[indptr[r] ..
   indptr[r+1]), its length (pages - 1) * page_size + last_page_len
   (flashinfer.page.get_seq_lens; 0 with no page). */
static attention flashinfer_csr(const kv_cache *cache, const double *q,
                                const int32_t *indptr, const int32_t *indices,
                                const int32_t *last_page_len, int32_t page,
                                uint32_t r) {
  int32_t pages = indptr[r + 1] - indptr[r];
  int32_t length = pages > 0 ? (pages - 1) * page + last_page_len[r] : 0;
  return attend_pages(cache, q, indices, MAX_REQS * WIDTH, indptr[r], pages,
                      length, page);
}

/* FA3's flash_attn_varlen_func: row r of page_table, at our pitch, read up
   to seqused_k[r] tokens (FlashMLA reads block_table and cache_seqlens the
   same way). */
static attention fa3_dense(const kv_cache *cache, const double *q,
                           const exported *x, uint32_t r) {
  return attend_pages(cache, q, x->page_table, MAX_REQS * PITCH,
                      (int32_t)r * PITCH, PITCH, x->seq_lens[r], x->page_size);
}

/* OpenVINO's PagedAttention: request r's blocks start at
   block_indices_begins[r]; it has past_lens[r] tokens of context and
   subsequence_begins[r+1] - subsequence_begins[r] of query. */
static attention openvino(const kv_cache *cache, const double *q,
                          const exported *x, uint32_t r) {
  int32_t pages = x->indptr[r + 1] - x->indptr[r];
  int32_t query = x->subsequence_begins[r + 1] - x->subsequence_begins[r];
  return attend_pages(cache, q, x->indices, MAX_REQS * WIDTH, x->indptr[r],
                      pages, x->past_lens[r] + query, x->page_size);
}

/* ---- the checks ---------------------------------------------------------- */

enum { FLASHINFER, CONTEXT, DENSE, OPENVINO, MAMBA, TOP_K_SLOTS, NUM_LAYOUTS };
static const char *const layout_names[NUM_LAYOUTS] = {
    "FlashInfer paged_kv_indptr/indices/last_page_len",
    "FlashInfer context CSR (a DCP prefill's context pass)",
    "FA3 page_table + seqused_k at pitch 12 (FlashMLA's layout)",
    "OpenVINO block_indices(_begins), past_lens, subsequence_begins",
    "Mamba state_indices",
    "sparse top-k token slots (FlashMLA's sparse indices)"};
typedef struct tally {
  uint32_t checked[NUM_LAYOUTS], wrong[NUM_LAYOUTS];
} tally;

static void count(tally *t, int layout, bool ok) {
  t->checked[layout]++;
  t->wrong[layout] += !ok;
}

/* Batch entry r's request, or for a padding entry one with no tokens; and
   its query this step. */
static const request *entry(const batch *b, uint32_t r, double *q) {
  static const request padding = {0};
  const request *req = r < b->num_reqs ? b->reqs[r] : &padding;
  for (uint32_t d = 0; d < HEAD_DIM; ++d)
    q[d] = value_of(req->id, b->step, d, QUERY);
  return req;
}

/* Every batch entry through every layout. A padding entry must read
   nothing and get the null state block, 0. */
static void check_step(const batch *b, const exported *x,
                       const kv_cache *cache, tally *t) {
  for (uint32_t r = 0; r < MAX_REQS; ++r) {
    double q[HEAD_DIM];
    const request *req = entry(b, r, q);
    uint32_t query = r < b->num_reqs ? b->query[r] : 0;
    attention all = dense(q, req->id, req->length);
    attention context = dense(q, req->id, req->length - query);
    attention got = flashinfer_csr(cache, q, x->indptr, x->indices,
                                   x->last_page_len, x->page_size, r);
    count(t, FLASHINFER, same(&got, &all));
    got = flashinfer_csr(cache, q, x->context_indptr, x->context_indices,
                         x->context_last_page_len, x->page_size, r);
    count(t, CONTEXT, same(&got, &context));
    got = fa3_dense(cache, q, x, r);
    count(t, DENSE, same(&got, &all));
    got = openvino(cache, q, x, r);
    count(t, OPENVINO, same(&got, &all));
    /* vLLM's rule: the state block of the last token, (L - 1) / 64. */
    int32_t state =
        req->length ? req->states[(req->length - 1) / STATE_BLOCK] : 0;
    count(t, MAMBA, x->state_slots[r] == state);
  }
}

/* A decode step's sparse attention: each request's one query token picks
   TOP_K of its tokens (-1: none, as the indexer pads), a row per query
   token; one call turns the matrix into slots, and the sparse kernel
   attends over exactly those. The padding row past the batch's tokens must
   give no slot. */
static void check_top_k(engine *e, const batch *b, const kv_cache *cache,
                        tally *t) {
  int32_t indices[MAX_REQS][TOP_K], slots[MAX_REQS][TOP_K];
  for (uint32_t r = 0; r < MAX_REQS; ++r) {
    int32_t length = r < b->num_reqs ? (int32_t)b->reqs[r]->length : 0;
    int32_t picks[TOP_K] = {length - 1, 0, length / 3, -1};
    for (uint32_t j = 0; j < TOP_K; ++j) indices[r][j] = length ? picks[j] : -1;
  }
  write_buffer(e->device, e->topk_indices, sizeof indices, indices);
  clbt_token_slots_request topk = CLBT_TOKEN_SLOTS_INIT;
  topk.num_reqs = b->num_reqs;
  topk.query_start_loc = e->query_start_loc; /* row i: query token i */
  topk.idx_mapping = e->idx_mapping;
  topk.num_rows = MAX_REQS; /* the batch's tokens, then padding */
  topk.indices_per_row = TOP_K;
  topk.token_indices = e->topk_indices;
  topk.token_slots = e->topk_slots; /* one section: one KV group */
  check(clbt_multi_table_enqueue_token_slots(e->table, &topk, 0, NULL, NULL),
        "clbt_multi_table_enqueue_token_slots");
  read_buffer(e->device, e->topk_slots, sizeof slots, slots);
  for (uint32_t r = 0; r < MAX_REQS; ++r) {
    double q[HEAD_DIM];
    const request *req = entry(b, r, q);
    attention got = {0}, want = {0};
    for (uint32_t j = 0; j < TOP_K && got.tokens != ~0u; ++j) {
      if (indices[r][j] >= 0)
        attend_own(&want, q, req->id, (uint32_t)indices[r][j]);
      if (slots[r][j] >= NUM_SLOTS)
        got = UNREADABLE;
      else if (slots[r][j] >= 0)
        attend(&got, q, cache->k[slots[r][j]], cache->v[slots[r][j]]);
    }
    count(t, TOP_K_SLOTS, same(&got, &want));
  }
}

int main(int argc, char **argv) {
  if (!parse_no_arguments(argc, argv)) return 2;
  engine e = {0};
  engine_start(&e);
  /* Request slots as a free list deals them: no row is its request's id. */
  static request reqs[NUM_REQUESTS] = {
      {.id = 1, .slot = 2}, {.id = 2, .slot = 0}, {.id = 3, .slot = 3}};
  static kv_cache cache;
  for (uint32_t s = 0; s < NUM_SLOTS; ++s)
    for (uint32_t d = 0; d < HEAD_DIM; ++d)
      cache.k[s][d] = cache.v[s][d] = NAN; /* never written: no match */
  static exported x;
  tally t = {{0}, {0}};
  batch b;
  for (uint32_t step = 0; step < NUM_STEPS; ++step) {
    make_batch(&e, reqs, step, &b);
    run_step(&e, &b);
    write_kv(&e, &b, &cache);
    read_exports(&e, &x);
    check_step(&b, &x, &cache, &t);
    printf("step %u: %u requests padded to %u, %u tokens\n", step + 1,
           b.num_reqs, MAX_REQS, b.num_tokens);
  }
  check_top_k(&e, &b, &cache, &t); /* the last step is all decodes */
  engine_stop(&e);

  uint32_t wrong = 0;
  for (int l = 0; l < NUM_LAYOUTS; ++l) {
    printf("%-62s %2u checked, %u wrong\n", layout_names[l], t.checked[l],
           t.wrong[l]);
    wrong += t.wrong[l] + (t.checked[l] == 0);
  }
  return wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
