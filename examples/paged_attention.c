/*
 * A tiny attention layer served entirely on OpenCL: a prefill, then decode
 * steps (with a request joining midway), each step
 *
 *   1. clbt_table_enqueue_step with CLBT_STEP_EXPORT: the rows' changes
 *      committed, every token's KV-cache slot and FlashInfer's page table
 *      (paged_kv_indptr / paged_kv_indices / last_page_len, seq_lens);
 *   2. the example's projection kernel: qkv[t] = W x[t] for random weights;
 *   3. clbt_kv_cache_enqueue_write: each token's K and V into the paged
 *      cache (vLLM's flash layout, K and V of a block side by side as
 *      FlashInfer's kv_cache[:, 0] / [:, 1]) through the slot mapping;
 *   4. the example's paged-attention kernel: each query token attends,
 *      causally, over its request's pages as the CSR lists them;
 *
 * one in-order queue, no host sync inside a step. The output is then
 * compared with dense attention computed on the host from the same K and
 * V (read back from qkv, kept per request by position): a wrong slot, page
 * or write shows as a wrong output.
 *
 *   paged_attention [--steps N] [--seed N] [--verbose]
 *
 * Runs on the device CLBT_DEVICE selects (PoCL in CTest, the H200 with
 * CLBT_DEVICE=nvidia:gpu); prints a line per step with --verbose, a
 * summary always, and exits nonzero on a mismatch.
 */
#include <clbt/clbt.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define EXAMPLE_NAME "paged_attention"
#include "example.h"

#define HIDDEN 32
#define Q_HEADS 4
#define KV_HEADS 2 /* grouped-query attention: 2 query heads a KV head */
#define HEAD 64
#define QKV ((Q_HEADS + 2 * KV_HEADS) * HEAD) /* a token's q, k, v */
#define BLOCK 16
#define NUM_BLOCKS 64
#define MAX_REQS 4
#define MAX_BLOCKS_PER_REQ 16 /* 256 tokens a request */
#define MAX_TOKENS 128
#define MAX_LEN (MAX_BLOCKS_PER_REQ * BLOCK)

/* The example's kernels: the projection and the paged attention over
   FlashInfer's CSR (one work-item per query token and head, an online
   softmax over its request's positions 0..position). */
static const char *kernels =
    "__kernel void project(__global const float *x, __global const float *w,\n"
    "                      __global float *qkv, uint num_tokens) {\n"
    "  uint i = get_global_id(0);\n"
    "  if (i >= num_tokens * QKV) return;\n"
    "  uint t = i / QKV, o = i % QKV;\n"
    "  float sum = 0.0f;\n"
    "  for (uint h = 0; h < HIDDEN; ++h) sum += w[o * HIDDEN + h] * x[t * HIDDEN + h];\n"
    "  qkv[i] = sum;\n"
    "}\n"
    "__kernel void attend(__global const float *qkv, __global const float *cache,\n"
    "                     __global const int *qsl, uint num_reqs,\n"
    "                     __global const long *positions,\n"
    "                     __global const int *indptr, __global const int *indices,\n"
    "                     __global float *out, uint num_tokens) {\n"
    "  uint i = get_global_id(0);\n"
    "  if (i >= num_tokens * Q_HEADS) return;\n"
    "  uint t = i / Q_HEADS, head = i % Q_HEADS, kv_head = head / (Q_HEADS / KV_HEADS);\n"
    "  uint r = 0;\n"
    "  while (r + 1 < num_reqs && qsl[r + 1] <= (int)t) ++r;\n"
    "  long position = positions[t];\n"
    "  __global const float *q = qkv + t * QKV + head * HEAD;\n"
    "  float m = -INFINITY, l = 0.0f, acc[HEAD];\n"
    "  for (uint d = 0; d < HEAD; ++d) acc[d] = 0.0f;\n"
    "  for (long j = 0; j <= position; ++j) {\n"
    "    long page = indices[indptr[r] + j / BLOCK];\n"
    "    /* Where clbt put slot j % BLOCK of the page (its addressing). */\n"
    "    long at = page * BLOCK_STRIDE + j % BLOCK * PAGE_STRIDE + kv_head * HEAD_STRIDE;\n"
    "    __global const float *k = cache + KEY_AT + at, *v = cache + VALUE_AT + at;\n"
    "    float s = 0.0f;\n"
    "    for (uint d = 0; d < HEAD; ++d) s += q[d] * k[d];\n"
    "    s *= SCALE;\n"
    "    float m_new = fmax(m, s), correction = exp(m - m_new), p = exp(s - m_new);\n"
    "    l = l * correction + p;\n"
    "    for (uint d = 0; d < HEAD; ++d) acc[d] = acc[d] * correction + p * v[d];\n"
    "    m = m_new;\n"
    "  }\n"
    "  for (uint d = 0; d < HEAD; ++d) out[(t * Q_HEADS + head) * HEAD + d] = acc[d] / l;\n"
    "}\n";

/* ---- what the example knows by itself ----------------------------------- */

static uint64_t rng_state;

static float uniform(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
  return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

typedef struct request {
  uint32_t length;                  /* tokens whose K/V are cached */
  uint32_t blocks[MAX_BLOCKS_PER_REQ], num_blocks;
  float k[MAX_LEN][KV_HEADS][HEAD]; /* by position, from qkv */
  float v[MAX_LEN][KV_HEADS][HEAD];
} request;

typedef struct layer {
  clbt_device *device;
  cl_program program;
  cl_kernel project, attend;
  cl_mem x, w, qkv, cache, out, qsl, positions;
  clbt_table *table;
  clbt_kv_cache *kv;
  uint32_t free_blocks[NUM_BLOCKS], num_free;
} layer;

static cl_kernel kernel(cl_program program, const char *name) {
  cl_int error = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program, name, &error);
  check_cl(error, "clCreateKernel");
  return k;
}

/* The example's kernels, reading the cache where clbt's addressing says
   its elements are. */
static void build(layer *l) {
  clbt_kv_cache_addressing a;
  check(clbt_kv_cache_get_addressing(l->kv, &a),
        "clbt_kv_cache_get_addressing");
  cl_int error = CL_SUCCESS;
  cl_context context = clbt_device_context(l->device);
  cl_device_id id = clbt_device_id(l->device);
  l->program = clCreateProgramWithSource(context, 1, &kernels, NULL, &error);
  check_cl(error, "clCreateProgramWithSource");
  char options[512];
  snprintf(options, sizeof options,
           "-cl-std=CL1.2 -DHIDDEN=%d -DQ_HEADS=%d -DKV_HEADS=%d -DHEAD=%d "
           "-DQKV=%d -DBLOCK=%d -DSCALE=%.9ef -DKEY_AT=%llu -DVALUE_AT=%llu "
           "-DBLOCK_STRIDE=%llu -DPAGE_STRIDE=%llu -DHEAD_STRIDE=%llu",
           HIDDEN, Q_HEADS, KV_HEADS, HEAD, QKV, BLOCK, 1.0 / sqrt(HEAD),
           (unsigned long long)a.key_offset, (unsigned long long)a.value_offset,
           (unsigned long long)a.block_stride,
           (unsigned long long)a.page_stride,
           (unsigned long long)a.head_stride);
  error = clBuildProgram(l->program, 1, &id, options, NULL, NULL);
  if (error == CL_BUILD_PROGRAM_FAILURE) {
    char log[4096] = "";
    clGetProgramBuildInfo(l->program, id, CL_PROGRAM_BUILD_LOG, sizeof log - 1,
                          log, NULL);
    fprintf(stderr, EXAMPLE_NAME ": build log:\n%s\n", log);
  }
  check_cl(error, "clBuildProgram");
  l->project = kernel(l->program, "project");
  l->attend = kernel(l->program, "attend");
}

static void open_layer(layer *l, uint64_t seed) {
  check(clbt_device_open(NULL, &l->device), "clbt_device_open");
  rng_state = seed;
  float w[QKV * HIDDEN];
  for (size_t i = 0; i < QKV * HIDDEN; ++i) w[i] = uniform() * 0.3f;
  l->w = create_buffer(l->device, sizeof w);
  write_buffer(l->device, l->w, sizeof w, w);
  l->x = create_buffer(l->device, MAX_TOKENS * HIDDEN * sizeof(float));
  l->qkv = create_buffer(l->device, MAX_TOKENS * QKV * sizeof(float));
  l->out = create_buffer(l->device, MAX_TOKENS * Q_HEADS * HEAD * sizeof(float));
  l->qsl = create_buffer(l->device, (MAX_REQS + 1) * sizeof(int32_t));
  l->positions = create_buffer(l->device, MAX_TOKENS * sizeof(int64_t));
  size_t cache_bytes = (size_t)NUM_BLOCKS * 2 * BLOCK * KV_HEADS * HEAD *
                       sizeof(float);
  l->cache = create_buffer(l->device, cache_bytes);
  const float nan_pattern = NAN; /* unwritten K/V poisons every output */
  check_cl(clEnqueueFillBuffer(clbt_device_queue(l->device), l->cache,
                               &nan_pattern, sizeof nan_pattern, 0,
                               cache_bytes, 0, NULL, NULL),
           "clEnqueueFillBuffer");

  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = BLOCK;
  config.max_num_reqs = MAX_REQS;
  config.max_num_blocks_per_req = MAX_BLOCKS_PER_REQ;
  config.max_num_batched_tokens = MAX_TOKENS;
  check(clbt_table_create(l->device, &config, &l->table), "clbt_table_create");
  /* The cache: FlashInfer's [num_blocks][2][BLOCK][KV_HEADS][HEAD] in one
     buffer; the defaults say exactly that. */
  clbt_kv_cache_config kv = CLBT_KV_CACHE_CONFIG_INIT;
  kv.cache_dtype = CLBT_KV_FLOAT32;
  kv.num_kv_heads = KV_HEADS;
  kv.head_size = HEAD;
  kv.block_size = BLOCK;
  kv.num_blocks = NUM_BLOCKS;
  kv.key_cache = l->cache;
  check(clbt_kv_cache_create(l->device, &kv, &l->kv), "clbt_kv_cache_create");
  build(l);
  /* Blocks handed out in a scrambled order, so pages are not positions. */
  l->num_free = NUM_BLOCKS;
  for (uint32_t b = 0; b < NUM_BLOCKS; ++b)
    l->free_blocks[b] = (b * 37 + 11) % NUM_BLOCKS;
}

static void close_layer(layer *l) {
  clbt_kv_cache_destroy(l->kv);
  clbt_table_destroy(l->table);
  cl_mem buffers[] = {l->x, l->w, l->qkv, l->cache, l->out, l->qsl,
                      l->positions};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
  clReleaseKernel(l->project);
  clReleaseKernel(l->attend);
  clReleaseProgram(l->program);
  clbt_device_release(l->device);
}

/* ---- a step --------------------------------------------------------------- */

static void set_args(cl_kernel k, const void *const *values,
                     const size_t *sizes, cl_uint count) {
  for (cl_uint i = 0; i < count; ++i)
    check_cl(clSetKernelArg(k, i, sizes[i], values[i]), "clSetKernelArg");
}

static void launch(layer *l, cl_kernel k, size_t items) {
  check_cl(clEnqueueNDRangeKernel(clbt_device_queue(l->device), k, 1, NULL,
                                  &items, NULL, 0, NULL, NULL),
           "clEnqueueNDRangeKernel");
}

/*
 * Schedules `counts[r]` new tokens for each of num_reqs requests (rows in
 * batch order), giving each the blocks its new length needs, and runs the
 * step on the device. Returns the tokens scheduled; fills qsl/positions.
 */
static uint32_t run_step(layer *l, request *reqs, uint32_t num_reqs,
                         const uint32_t *counts, int32_t *qsl,
                         int64_t *positions) {
  uint32_t t = 0;
  qsl[0] = 0;
  for (uint32_t r = 0; r < num_reqs; ++r) {
    request *q = &reqs[r];
    uint32_t needed = (q->length + counts[r] + BLOCK - 1) / BLOCK;
    while (q->num_blocks < needed) {
      int32_t block = (int32_t)l->free_blocks[--l->num_free];
      q->blocks[q->num_blocks++] = (uint32_t)block;
      check(clbt_table_append_row(l->table, r, &block, 1),
            "clbt_table_append_row");
    }
    for (uint32_t i = 0; i < counts[r]; ++i) positions[t++] = q->length + i;
    qsl[r + 1] = (int32_t)t;
  }
  float x[MAX_TOKENS * HIDDEN];
  for (uint32_t i = 0; i < t * HIDDEN; ++i) x[i] = uniform();
  write_buffer(l->device, l->x, t * HIDDEN * sizeof(float), x);
  write_buffer(l->device, l->qsl, (num_reqs + 1) * sizeof(int32_t), qsl);
  write_buffer(l->device, l->positions, t * sizeof(int64_t), positions);

  /* 1. clbt's step: commit, slots, FlashInfer's page table. */
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_EXPORT;
  step.num_reqs = num_reqs;
  step.num_tokens = t;
  step.query_start_loc = l->qsl;
  step.positions = l->positions;
  check(clbt_table_enqueue_step(l->table, &step, 0, NULL, NULL),
        "clbt_table_enqueue_step");
  /* 2. the projection. */
  cl_uint num_tokens = t;
  set_args(l->project, (const void *[]){&l->x, &l->w, &l->qkv, &num_tokens},
           (const size_t[]){sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem),
                            sizeof num_tokens},
           4);
  launch(l, l->project, (size_t)t * QKV);
  /* 3. the KV write: K and V are views of qkv, a token QKV floats apart. */
  clbt_kv_write write = CLBT_KV_WRITE_INIT;
  write.num_tokens = t;
  write.key = write.value = l->qkv;
  write.key_offset = Q_HEADS * HEAD;
  write.value_offset = (Q_HEADS + KV_HEADS) * HEAD;
  write.key_token_stride = write.value_token_stride = QKV;
  write.slot_mapping = clbt_table_slot_mapping(l->table);
  check(clbt_kv_cache_enqueue_write(l->kv, &write, 0, NULL, NULL),
        "clbt_kv_cache_enqueue_write");
  /* 4. attention over the pages. */
  clbt_export_buffers pages = CLBT_EXPORT_BUFFERS_INIT;
  check(clbt_table_export_buffers(l->table, &pages),
        "clbt_table_export_buffers");
  cl_uint batch_reqs = num_reqs;
  set_args(l->attend,
           (const void *[]){&l->qkv, &l->cache, &l->qsl, &batch_reqs, &l->positions,
                            &pages.paged_kv_indptr, &pages.paged_kv_indices,
                            &l->out, &num_tokens},
           (const size_t[]){sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem),
                            sizeof batch_reqs, sizeof(cl_mem), sizeof(cl_mem),
                            sizeof(cl_mem), sizeof(cl_mem), sizeof num_tokens},
           9);
  launch(l, l->attend, (size_t)t * Q_HEADS);
  return t;
}

/* Dense causal attention of token t over its request's K/V, on the host. */
static void dense(const request *q, const float *query, int64_t position,
                  uint32_t head, double *out) {
  uint32_t kv_head = head / (Q_HEADS / KV_HEADS);
  double scores[MAX_LEN], top = -INFINITY, total = 0;
  for (int64_t j = 0; j <= position; ++j) {
    double s = 0;
    for (int d = 0; d < HEAD; ++d) s += (double)query[d] * q->k[j][kv_head][d];
    scores[j] = s / sqrt(HEAD);
    top = scores[j] > top ? scores[j] : top;
  }
  for (int d = 0; d < HEAD; ++d) out[d] = 0;
  for (int64_t j = 0; j <= position; ++j) {
    double p = exp(scores[j] - top);
    total += p;
    for (int d = 0; d < HEAD; ++d) out[d] += p * q->v[j][kv_head][d];
  }
  for (int d = 0; d < HEAD; ++d) out[d] /= total;
}

/* Reads the step's qkv and output back, records each token's K/V by
   position, and compares every output with dense attention. Returns the
   largest error. */
static double check_step(layer *l, request *reqs, uint32_t num_reqs,
                         const int32_t *qsl, const int64_t *positions,
                         uint32_t t, uint32_t *wrong) {
  static float qkv[MAX_TOKENS * QKV], out[MAX_TOKENS * Q_HEADS * HEAD];
  read_buffer(l->device, l->qkv, t * QKV * sizeof(float), qkv);
  read_buffer(l->device, l->out, t * Q_HEADS * HEAD * sizeof(float), out);
  double worst = 0;
  for (uint32_t r = 0; r < num_reqs; ++r)
    for (int32_t i = qsl[r]; i < qsl[r + 1]; ++i) {
      const float *k = qkv + (size_t)i * QKV + Q_HEADS * HEAD;
      for (int h = 0; h < KV_HEADS; ++h)
        for (int d = 0; d < HEAD; ++d) {
          reqs[r].k[positions[i]][h][d] = k[h * HEAD + d];
          reqs[r].v[positions[i]][h][d] = k[(KV_HEADS + h) * HEAD + d];
        }
    }
  for (uint32_t r = 0; r < num_reqs; ++r) {
    for (int32_t i = qsl[r]; i < qsl[r + 1]; ++i)
      for (uint32_t head = 0; head < Q_HEADS; ++head) {
        double expected[HEAD];
        dense(&reqs[r], qkv + (size_t)i * QKV + head * HEAD, positions[i],
              head, expected);
        for (int d = 0; d < HEAD; ++d) {
          double got = out[((size_t)i * Q_HEADS + head) * HEAD + d];
          double error = fabs(got - expected[d]);
          if (!(error <= 1e-4 + 1e-4 * fabs(expected[d]))) ++*wrong;
          if (!(error <= worst)) worst = error; /* NaN included */
        }
      }
    reqs[r].length += (uint32_t)(qsl[r + 1] - qsl[r]);
  }
  return worst;
}

int main(int argc, char **argv) {
  uint32_t steps = 6;
  uint64_t seed = 26;
  bool verbose = false;
  if (!parse_arguments(argc, argv, &steps, &seed, &verbose)) return 2;
  if (steps > MAX_LEN - 64) { /* the longest prompt's decodes fit a row */
    fprintf(stderr, EXAMPLE_NAME ": --steps is at most %d\n", MAX_LEN - 64);
    return 2;
  }
  layer l = {0};
  open_layer(&l, seed);
  static request reqs[MAX_REQS];
  /* A prefill of three prompts, decodes, then a fourth prompt joins. */
  const uint32_t prompts[MAX_REQS] = {37, 5, 60, 23};
  uint32_t wrong = 0, tokens = 0, num_reqs = 3;
  double worst = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    uint32_t counts[MAX_REQS];
    if (s == 3 && num_reqs < MAX_REQS) ++num_reqs;
    for (uint32_t r = 0; r < num_reqs; ++r)
      counts[r] = reqs[r].length == 0 ? prompts[r] : 1;
    int32_t qsl[MAX_REQS + 1];
    int64_t positions[MAX_TOKENS];
    uint32_t t = run_step(&l, reqs, num_reqs, counts, qsl, positions);
    uint32_t step_wrong = 0;
    double error = check_step(&l, reqs, num_reqs, qsl, positions, t,
                              &step_wrong);
    if (verbose)
      printf("step %u: %u requests, %u tokens, largest error %.2e, %s\n",
             (unsigned)s + 1, (unsigned)num_reqs, (unsigned)t, error,
             step_wrong ? "WRONG" : "ok");
    wrong += step_wrong;
    tokens += t;
    worst = error > worst || error != error ? error : worst;
  }
  uint32_t rejected = 1;
  check(clbt_kv_cache_read_rejected_tokens(l.kv, &rejected),
        "clbt_kv_cache_read_rejected_tokens");
  printf(EXAMPLE_NAME ": %u steps, %u tokens written and attended, largest "
         "error %.2e, %u wrong, %u rejected\n",
         (unsigned)steps, (unsigned)tokens, worst, (unsigned)wrong,
         (unsigned)rejected);
  close_layer(&l);
  return wrong || rejected ? EXIT_FAILURE : EXIT_SUCCESS;
}
