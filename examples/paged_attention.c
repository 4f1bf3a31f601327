/*
 * A small model's attention served entirely through clbt on OpenCL: three
 * layers of 8 query heads on 2 KV heads of 64, fp16, a paged cache per
 * layer, and a batch of requests that prefill, decode, and a request that
 * joins with a prompt chunked over two steps beside the decodes. Each step:
 *
 *   1. clbt_table_enqueue_step: the rows' changes committed and every
 *      token's KV-cache slot;
 *   2. for each layer, the layer's q, k and v (here drawn on the host, as
 *      a model's projection would make them) and then
 *      clbt_kv_cache_enqueue_write: each token's K and V into the layer's
 *      cache through the slot mapping, and
 *      clbt_attention_enqueue: each query token attends, causally, over its
 *      request's cached keys, read through the table's committed rows;
 *
 * one descriptor for the three layers (one shape), one in-order queue, no
 * host wait inside a step. Every output is then compared with dense
 * attention computed on the host in double from the same fp16 K and V,
 * kept per request by position, within vLLM's tolerance for its own
 * kernel: a wrong slot, row, block or softmax shows as a wrong output.
 *
 *   paged_attention [--steps N] [--seed N] [--verbose]
 *
 * Runs on the device CLBT_DEVICE selects (PoCL in CTest, an NVIDIA GPU
 * with CLBT_DEVICE=nvidia:gpu); prints a line per step with --verbose, a
 * summary always, and exits nonzero on a mismatch.
 */
#include <clbt/clbt.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define EXAMPLE_NAME "paged_attention"
#include "example.h"

#define LAYERS 3
#define Q_HEADS 8
#define KV_HEADS 2 /* grouped-query attention: 4 query heads a KV head */
#define HEAD 64
#define QKV ((Q_HEADS + 2 * KV_HEADS) * HEAD) /* a token's q, k, v */
#define BLOCK 16
#define NUM_BLOCKS 128
#define MAX_REQS 4
#define MAX_BLOCKS_PER_REQ 24 /* 384 tokens a request */
#define MAX_TOKENS 256
#define MAX_LEN (MAX_BLOCKS_PER_REQ * BLOCK)

/* ---- fp16 on the host ----------------------------------------------------- */

static uint16_t to_half(float x) { /* to nearest even; |x| < 2 here */
  union { float f; uint32_t u; } v = {x};
  uint32_t sign = (v.u >> 16) & 0x8000u, magnitude = v.u & 0x7fffffffu;
  if (magnitude < 0x38800000u) /* a subnormal half, in 2^-24s */
    return (uint16_t)(sign | (uint32_t)lrintf(fabsf(x) * 16777216.0f));
  uint32_t kept = magnitude - 0x38000000u;
  return (uint16_t)(sign | (kept + 0x0fffu + ((kept >> 13) & 1u)) >> 13);
}

static double from_half(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double value = exponent ? ldexp(1024 + mantissa, exponent - 25)
                          : ldexp(mantissa, -24);
  return h & 0x8000 ? -value : value;
}

static uint64_t rng_state;

static float uniform(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
  return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* ---- the model -------------------------------------------------------------- */

typedef struct request {
  uint32_t length; /* tokens whose K/V are cached */
  uint32_t num_blocks;
} request;

/* Every layer's K and V of every request, by position, as fp16. */
static uint16_t kv_store[LAYERS][MAX_REQS][MAX_LEN][2][KV_HEADS * HEAD];

typedef struct model {
  clbt_device *device;
  clbt_table *table;
  clbt_attention *attention; /* one shape: every layer's */
  clbt_kv_cache *caches[LAYERS];
  cl_mem cache_buffers[LAYERS], qkv[LAYERS], out[LAYERS];
  cl_mem qsl, positions, seq_lens;
  uint32_t free_blocks[NUM_BLOCKS], num_free;
} model;

static void open_model(model *m, uint64_t seed) {
  check(clbt_device_open(NULL, &m->device), "clbt_device_open");
  rng_state = seed;
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = BLOCK;
  config.max_num_reqs = MAX_REQS;
  config.max_num_blocks_per_req = MAX_BLOCKS_PER_REQ;
  config.max_num_batched_tokens = MAX_TOKENS;
  check(clbt_table_create(m->device, &config, &m->table), "clbt_table_create");
  /* Each layer's cache: [NUM_BLOCKS][2][BLOCK][KV_HEADS][HEAD] fp16 in one
     buffer (vLLM's kv_cache[:, 0] / [:, 1]), the defaults' layout. */
  size_t cache_bytes = (size_t)NUM_BLOCKS * 2 * BLOCK * KV_HEADS * HEAD * 2;
  for (int l = 0; l < LAYERS; ++l) {
    m->cache_buffers[l] = create_buffer(m->device, cache_bytes);
    m->qkv[l] = create_buffer(m->device, (size_t)MAX_TOKENS * QKV * 2);
    m->out[l] = create_buffer(m->device, (size_t)MAX_TOKENS * Q_HEADS * HEAD * 2);
    clbt_kv_cache_config kv = CLBT_KV_CACHE_CONFIG_INIT;
    kv.cache_dtype = CLBT_KV_FLOAT16;
    kv.num_kv_heads = KV_HEADS;
    kv.head_size = HEAD;
    kv.block_size = BLOCK;
    kv.num_blocks = NUM_BLOCKS;
    kv.key_cache = m->cache_buffers[l];
    check(clbt_kv_cache_create(m->device, &kv, &m->caches[l]),
          "clbt_kv_cache_create");
  }
  clbt_attention_config attention = CLBT_ATTENTION_CONFIG_INIT;
  attention.num_heads = Q_HEADS;
  attention.num_kv_heads = KV_HEADS;
  attention.head_size = HEAD;
  attention.block_size = BLOCK;
  attention.cache_dtype = CLBT_KV_FLOAT16; /* q and out: the same */
  check(clbt_attention_create(m->device, &attention, &m->attention),
        "clbt_attention_create");
  m->qsl = create_buffer(m->device, (MAX_REQS + 1) * sizeof(int32_t));
  m->positions = create_buffer(m->device, MAX_TOKENS * sizeof(int64_t));
  m->seq_lens = create_buffer(m->device, MAX_REQS * sizeof(int32_t));
  /* Blocks handed out in a scrambled order, so pages are not positions. */
  m->num_free = NUM_BLOCKS;
  for (uint32_t b = 0; b < NUM_BLOCKS; ++b)
    m->free_blocks[b] = (b * 37 + 11) % NUM_BLOCKS;
}

static void close_model(model *m) {
  clbt_attention_destroy(m->attention);
  for (int l = 0; l < LAYERS; ++l) {
    clbt_kv_cache_destroy(m->caches[l]);
    clReleaseMemObject(m->cache_buffers[l]);
    clReleaseMemObject(m->qkv[l]);
    clReleaseMemObject(m->out[l]);
  }
  clbt_table_destroy(m->table);
  clReleaseMemObject(m->qsl);
  clReleaseMemObject(m->positions);
  clReleaseMemObject(m->seq_lens);
  clbt_device_release(m->device);
}

/* ---- a step ------------------------------------------------------------------ */

/* One step's batch: counts[r] new tokens of each of num_reqs requests. */
typedef struct batch {
  uint32_t num_reqs, num_tokens, longest_query, longest_context;
  int32_t qsl[MAX_REQS + 1], seq_lens[MAX_REQS];
  int64_t positions[MAX_TOKENS];
} batch;

/* Gives each request the blocks its new length needs (rows in batch
   order), and lays out the batch. */
static batch schedule(model *m, request *reqs, uint32_t num_reqs,
                      const uint32_t *counts) {
  batch b = {.num_reqs = num_reqs};
  for (uint32_t r = 0; r < num_reqs; ++r) {
    request *q = &reqs[r];
    uint32_t needed = (q->length + counts[r] + BLOCK - 1) / BLOCK;
    for (; q->num_blocks < needed; ++q->num_blocks) {
      int32_t block = (int32_t)m->free_blocks[--m->num_free];
      check(clbt_table_append_row(m->table, r, &block, 1),
            "clbt_table_append_row");
    }
    for (uint32_t i = 0; i < counts[r]; ++i)
      b.positions[b.num_tokens++] = q->length + i;
    b.qsl[r + 1] = (int32_t)b.num_tokens;
    b.seq_lens[r] = (int32_t)(q->length + counts[r]);
    if (counts[r] > b.longest_query) b.longest_query = counts[r];
    if ((uint32_t)b.seq_lens[r] > b.longest_context)
      b.longest_context = (uint32_t)b.seq_lens[r];
  }
  return b;
}

/* Enqueues the step: the table's step, then each layer's write and
   attention. qkv[l] holds layer l's [num_tokens][QKV] fp16. */
static void run_step(model *m, const batch *b, uint16_t (*qkv)[QKV]) {
  write_buffer(m->device, m->qsl, (b->num_reqs + 1) * sizeof(int32_t), b->qsl);
  write_buffer(m->device, m->positions, b->num_tokens * sizeof(int64_t),
               b->positions);
  write_buffer(m->device, m->seq_lens, b->num_reqs * sizeof(int32_t),
               b->seq_lens);
  clbt_step step = CLBT_STEP_INIT;
  step.num_reqs = b->num_reqs;
  step.num_tokens = b->num_tokens;
  step.query_start_loc = m->qsl;
  step.positions = m->positions;
  check(clbt_table_enqueue_step(m->table, &step, 0, NULL, NULL),
        "clbt_table_enqueue_step");
  for (int l = 0; l < LAYERS; ++l) {
    write_buffer(m->device, m->qkv[l], (size_t)b->num_tokens * QKV * 2,
                 qkv[l * MAX_TOKENS]);
    /* K and V are views of qkv, a token QKV elements apart. */
    clbt_kv_write write = CLBT_KV_WRITE_INIT;
    write.num_tokens = b->num_tokens;
    write.key = write.value = m->qkv[l];
    write.key_offset = Q_HEADS * HEAD;
    write.value_offset = (Q_HEADS + KV_HEADS) * HEAD;
    write.key_token_stride = write.value_token_stride = QKV;
    write.slot_mapping = clbt_table_slot_mapping(m->table);
    check(clbt_kv_cache_enqueue_write(m->caches[l], &write, 0, NULL, NULL),
          "clbt_kv_cache_enqueue_write");
    /* The attention reads the table's committed rows as they are. */
    clbt_attention_batch attend = CLBT_ATTENTION_BATCH_INIT;
    attend.num_seqs = b->num_reqs;
    attend.num_tokens = b->num_tokens;
    attend.max_seqlen_q = b->longest_query;
    attend.max_seqlen_k = b->longest_context;
    attend.query = m->qkv[l];
    attend.query_token_stride = QKV;
    attend.output = m->out[l];
    attend.cu_seqlens_q = m->qsl;
    attend.seqused_k = m->seq_lens;
    attend.table = m->table;
    check(clbt_attention_enqueue(m->attention, m->caches[l], &attend, 0, NULL,
                                 NULL),
          "clbt_attention_enqueue");
  }
}

/* Dense causal attention of one query head over a request's K/V up to
   position `last`, in double. */
static void dense(const uint16_t (*kv)[2][KV_HEADS * HEAD],
                  const uint16_t *query, uint32_t last, uint32_t head,
                  double *out) {
  uint32_t kv_head = head / (Q_HEADS / KV_HEADS);
  double scores[MAX_LEN], top = -INFINITY, total = 0;
  for (uint32_t j = 0; j <= last; ++j) {
    double s = 0;
    for (int d = 0; d < HEAD; ++d)
      s += from_half(query[d]) * from_half(kv[j][0][kv_head * HEAD + d]);
    scores[j] = s / sqrt(HEAD);
    top = fmax(top, scores[j]);
  }
  for (int d = 0; d < HEAD; ++d) out[d] = 0;
  for (uint32_t j = 0; j <= last; ++j) {
    double p = exp(scores[j] - top);
    total += p;
    for (int d = 0; d < HEAD; ++d)
      out[d] += p * from_half(kv[j][1][kv_head * HEAD + d]);
  }
  for (int d = 0; d < HEAD; ++d) out[d] /= total;
}

/* Keeps the step's K/V by position, then compares every layer's every
   output with dense attention. Returns the largest error. */
static double check_step(model *m, request *reqs, const batch *b,
                         uint16_t (*qkv)[QKV], uint32_t *wrong) {
  static uint16_t out[MAX_TOKENS * Q_HEADS * HEAD];
  double worst = 0;
  for (int l = 0; l < LAYERS; ++l)
    for (uint32_t r = 0; r < b->num_reqs; ++r)
      for (int32_t t = b->qsl[r]; t < b->qsl[r + 1]; ++t)
        for (int kv = 0; kv < 2; ++kv)
          memcpy(kv_store[l][r][b->positions[t]][kv],
                 qkv[l * MAX_TOKENS + t] + (Q_HEADS + kv * KV_HEADS) * HEAD,
                 KV_HEADS * HEAD * sizeof(uint16_t));
  for (int l = 0; l < LAYERS; ++l) {
    read_buffer(m->device, m->out[l], (size_t)b->num_tokens * Q_HEADS * HEAD * 2,
                out);
    for (uint32_t r = 0; r < b->num_reqs; ++r)
      for (int32_t t = b->qsl[r]; t < b->qsl[r + 1]; ++t)
        for (uint32_t head = 0; head < Q_HEADS; ++head) {
          double expected[HEAD];
          dense((const uint16_t(*)[2][KV_HEADS * HEAD])kv_store[l][r],
                qkv[l * MAX_TOKENS + t] + head * HEAD,
                (uint32_t)b->positions[t], head, expected);
          for (int d = 0; d < HEAD; ++d) {
            double got = from_half(out[((size_t)t * Q_HEADS + head) * HEAD + d]);
            double error = fabs(got - expected[d]);
            if (!(error <= 1.5e-2 + 1e-2 * fabs(expected[d]))) ++*wrong;
            if (!(error <= worst)) worst = error; /* NaN included */
          }
        }
  }
  for (uint32_t r = 0; r < b->num_reqs; ++r)
    reqs[r].length = (uint32_t)b->seq_lens[r];
  return worst;
}

int main(int argc, char **argv) {
  uint32_t steps = 8;
  uint64_t seed = 41;
  bool verbose = false;
  if (!parse_arguments(argc, argv, &steps, &seed, &verbose)) return 2;
  if (steps > MAX_LEN - 210) { /* the longest request's decodes fit a row */
    fprintf(stderr, EXAMPLE_NAME ": --steps is at most %d\n", MAX_LEN - 210);
    return 2;
  }
  static model m;
  static request reqs[MAX_REQS];
  static uint16_t qkv[LAYERS * MAX_TOKENS][QKV];
  open_model(&m, seed);
  /* Three prompts, decodes, then a fourth prompt of 200 tokens joins,
     chunked over two steps beside the others' decodes. */
  const uint32_t prompts[MAX_REQS] = {150, 40, 60, 200};
  uint32_t wrong = 0, tokens = 0, num_reqs = 3;
  double worst = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    uint32_t counts[MAX_REQS];
    if (s == 3) ++num_reqs;
    for (uint32_t r = 0; r < num_reqs; ++r)
      counts[r] = reqs[r].length >= prompts[r] ? 1
                  : r == 3 ? 100 : prompts[r];
    batch b = schedule(&m, reqs, num_reqs, counts);
    for (size_t i = 0; i < (size_t)LAYERS * MAX_TOKENS * QKV; ++i)
      qkv[i / QKV][i % QKV] = to_half(uniform());
    run_step(&m, &b, qkv);
    uint32_t step_wrong = 0;
    double error = check_step(&m, reqs, &b, qkv, &step_wrong);
    if (verbose)
      printf("step %u: %u requests, %u tokens, %d layers, largest error "
             "%.2e, %s\n",
             (unsigned)s + 1, (unsigned)num_reqs, (unsigned)b.num_tokens,
             LAYERS, error, step_wrong ? "WRONG" : "ok");
    wrong += step_wrong;
    tokens += b.num_tokens;
    worst = error > worst || error != error ? error : worst;
  }
  uint32_t rejected = 0, counted;
  check(clbt_attention_read_rejected_tokens(m.attention, &counted),
        "clbt_attention_read_rejected_tokens");
  rejected += counted;
  for (int l = 0; l < LAYERS; ++l) {
    check(clbt_kv_cache_read_rejected_tokens(m.caches[l], &counted),
          "clbt_kv_cache_read_rejected_tokens");
    rejected += counted;
  }
  printf(EXAMPLE_NAME ": %u steps, %u tokens through %d layers, largest "
         "error %.2e, %u wrong, %u rejected\n",
         (unsigned)steps, (unsigned)tokens, LAYERS, worst, (unsigned)wrong,
         (unsigned)rejected);
  close_model(&m);
  return wrong || rejected ? EXIT_FAILURE : EXIT_SUCCESS;
}
