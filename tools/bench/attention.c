/*
 * The attention sections of `clbt bench` (issue 41): a layer of 32 query
 * heads on 8 KV heads of 128, bf16, 16-token blocks, vLLM's flash layout,
 * each sequence's blocks scattered over the cache through a dense block
 * table.
 *
 *   attention_decode: one query token a sequence, batches of 16 to 256
 *     sequences with contexts of 1k to 32k; the call to completion against
 *     clEnqueueCopyBuffer of the same bytes (half the K/V bytes copied,
 *     which moves as many as the attention reads), both on the timed
 *     queue, and the attention's device time; its bandwidth's share of the
 *     copy's, target >= 0.80 once a batch reads >= 256 MiB.
 *   attention_short: one sequence of a 256-token context against an empty
 *     kernel's call, target <= 2.
 *   attention_prefill: a 2048-token chunk (at the end of a 4096-token
 *     context) beside 63 decodes of 4096: its time and FLOP rate
 *     (tools/gpu/attention_triton.py sets it beside vLLM's Triton kernel).
 *
 * A CPU device runs smaller shapes of the same kinds, for reading. The
 * figures are medians of --runs; CLBT_ATTENTION_TUNING, when set, is
 * recorded with them (tools/gpu/attention.sh times several).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

enum { HEADS = 32, KV_HEADS = 8, HEAD = 128, BLOCK = 16 };
#define TOKEN_KV_BYTES ((uint64_t)KV_HEADS * HEAD * 2 * 2) /* K and V, bf16 */

#define DECODE_TARGET 0.80 /* of the copy's bandwidth, at least */
#define DECODE_TARGET_BYTES ((uint64_t)256 << 20)
#define SHORT_TARGET 2.0   /* an empty kernel's call, at most */

typedef struct attention_shape {
  const char *name;
  uint32_t seqs, context; /* every sequence's context */
  uint32_t chunk;         /* 0: decodes; else sequence 0's query tokens */
} attention_shape;

static const attention_shape gpu_shapes[] = {
    {"decode-16x1k", 16, 1024, 0},   {"decode-16x4k", 16, 4096, 0},
    {"decode-16x32k", 16, 32768, 0}, {"decode-64x1k", 64, 1024, 0},
    {"decode-64x8k", 64, 8192, 0},   {"decode-64x32k", 64, 32768, 0},
    {"decode-256x1k", 256, 1024, 0}, {"decode-256x4k", 256, 4096, 0},
    {"decode-256x8k", 256, 8192, 0}, {"short-1x256", 1, 256, 0},
    {"prefill-2k-beside-63x4k", 64, 4096, 2048}};
static const attention_shape cpu_shapes[] = {
    {"decode-4x512", 4, 512, 0},
    {"short-1x256", 1, 256, 0},
    {"prefill-64-beside-3x256", 4, 256, 64}};

/* A layer's cache and batch on both handles (timed and profiled). */
typedef struct layer {
  const attention_shape *shape;
  uint32_t tokens, blocks_per_seq;
  uint64_t kv_bytes; /* what the attention reads */
  cl_mem cache, query, output, cu, seqused, table;
  clbt_kv_cache *timed, *profiled;
  clbt_attention *timed_attention, *profiled_attention;
  clbt_attention_batch batch;
} layer;

/* A buffer of bytes, every 16 bits of it the pattern. */
static cl_mem pattern_buffer(bench *b, size_t bytes, uint16_t pattern) {
  return bench_filled_buffer(b, bytes, &pattern, sizeof pattern);
}

static clbt_kv_cache *make_cache(clbt_device *device, cl_mem buffer,
                                 uint32_t blocks) {
  clbt_kv_cache_config c = CLBT_KV_CACHE_CONFIG_INIT;
  c.cache_dtype = CLBT_KV_BFLOAT16;
  c.num_kv_heads = KV_HEADS;
  c.head_size = HEAD;
  c.block_size = BLOCK;
  c.num_blocks = blocks;
  c.key_cache = buffer;
  clbt_kv_cache *cache = NULL;
  bench_check(clbt_kv_cache_create(device, &c, &cache), "kv cache create");
  return cache;
}

static clbt_attention *make_attention(clbt_device *device) {
  clbt_attention_config c = CLBT_ATTENTION_CONFIG_INIT;
  c.num_heads = HEADS;
  c.num_kv_heads = KV_HEADS;
  c.head_size = HEAD;
  c.block_size = BLOCK;
  c.cache_dtype = CLBT_KV_BFLOAT16;
  clbt_attention *attention = NULL;
  bench_check(clbt_attention_create(device, &c, &attention),
              "attention create");
  return attention;
}

/* The batch's arrays: sequence s's blocks a random stretch of a shuffled
   pool; its query tokens the last of its context. */
static void upload_batch(bench *b, layer *l, uint32_t blocks) {
  const attention_shape *s = l->shape;
  uint32_t *pool = bench_allocate(sizeof *pool * blocks);
  int32_t *table = bench_allocate(sizeof *table * s->seqs * l->blocks_per_seq);
  int32_t *cu = bench_allocate(sizeof *cu * (s->seqs + 1));
  int32_t *used = bench_allocate(sizeof *used * s->seqs);
  for (uint32_t i = 0; i < blocks; ++i) pool[i] = i;
  for (uint32_t i = blocks - 1; i > 0; --i) {
    uint32_t j = bench_random(b) % (i + 1), t = pool[i];
    pool[i] = pool[j], pool[j] = t;
  }
  for (size_t i = 0; i < (size_t)s->seqs * l->blocks_per_seq; ++i)
    table[i] = (int32_t)pool[i];
  cu[0] = 0;
  for (uint32_t q = 0; q < s->seqs; ++q) {
    cu[q + 1] = cu[q] + (q == 0 && s->chunk ? (int32_t)s->chunk : 1);
    used[q] = (int32_t)s->context;
  }
  l->table = bench_upload(b, table, sizeof *table * s->seqs * l->blocks_per_seq);
  l->cu = bench_upload(b, cu, sizeof *cu * (s->seqs + 1));
  l->seqused = bench_upload(b, used, sizeof *used * s->seqs);
  free(pool);
  free(table);
  free(cu);
  free(used);
}

static bool make_layer(bench *b, const attention_shape *s, layer *l) {
  *l = (layer){.shape = s};
  l->blocks_per_seq = (s->context + BLOCK - 1) / BLOCK;
  l->tokens = s->chunk ? s->chunk + s->seqs - 1 : s->seqs;
  l->kv_bytes = (uint64_t)s->seqs * s->context * TOKEN_KV_BYTES;
  uint32_t blocks = s->seqs * l->blocks_per_seq + 1;
  uint64_t cache_bytes = (uint64_t)blocks * BLOCK * TOKEN_KV_BYTES;
  cl_ulong most = 0;
  bench_check_cl(clGetDeviceInfo(clbt_device_id(b->device),
                                 CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof most,
                                 &most, NULL),
                 "clGetDeviceInfo");
  if (cache_bytes > most) return false;
  l->cache = pattern_buffer(b, (size_t)cache_bytes, 0x3f80); /* bf16 1.0 */
  l->query = pattern_buffer(b, (size_t)l->tokens * HEADS * HEAD * 2, 0x3c00);
  l->output = pattern_buffer(b, (size_t)l->tokens * HEADS * HEAD * 2, 0);
  upload_batch(b, l, blocks);
  l->timed = make_cache(b->device, l->cache, blocks);
  l->profiled = make_cache(b->profiled, l->cache, blocks);
  l->batch = (clbt_attention_batch)CLBT_ATTENTION_BATCH_INIT;
  l->batch.num_seqs = s->seqs;
  l->batch.num_tokens = l->tokens;
  l->batch.max_seqlen_q = s->chunk ? s->chunk : 1;
  l->batch.max_seqlen_k = s->context;
  l->batch.query = l->query;
  l->batch.output = l->output;
  l->batch.cu_seqlens_q = l->cu;
  l->batch.seqused_k = l->seqused;
  l->batch.block_table = l->table;
  l->batch.max_blocks_per_seq = l->blocks_per_seq;
  return true;
}

static void free_layer(layer *l) {
  clbt_kv_cache_destroy(l->timed);
  clbt_kv_cache_destroy(l->profiled);
  cl_mem buffers[] = {l->cache, l->query, l->output, l->cu, l->seqused,
                      l->table};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
}

static void run_attention(bench *b, void *context, cl_event *event) {
  (void)b;
  layer *l = context;
  bench_check(clbt_attention_enqueue(event ? l->profiled_attention
                                           : l->timed_attention,
                                     event ? l->profiled : l->timed, &l->batch,
                                     0, NULL, event),
              "attention");
}

/* Half the K/V bytes copied onto the other half: as many bytes moved as
   the attention reads (the pattern copied onto itself). */
static void run_copy(bench *b, void *context, cl_event *event) {
  layer *l = context;
  size_t half = (size_t)(l->kv_bytes / 2);
  bench_check_cl(clEnqueueCopyBuffer(event ? b->profiling_queue : b->queue,
                                     l->cache, l->cache, 0, half, half, 0, NULL,
                                     event),
                 "clEnqueueCopyBuffer");
}

/* The attention's device time, one or two kernels: from the end of an
   empty kernel before it to the end of its last command. */
static double device_us(bench *b, layer *l) {
  for (uint64_t i = 0; i < b->options.runs; ++i) {
    cl_event before = NULL, after = NULL;
    bench_run_empty(b, NULL, &before);
    run_attention(b, l, &after);
    cl_ulong start = 0, end = 0;
    bench_check_cl(clWaitForEvents(1, &after), "clWaitForEvents");
    bench_check_cl(clGetEventProfilingInfo(before, CL_PROFILING_COMMAND_END,
                                           sizeof start, &start, NULL),
                   "profiling");
    bench_check_cl(clGetEventProfilingInfo(after, CL_PROFILING_COMMAND_END,
                                           sizeof end, &end, NULL),
                   "profiling");
    clReleaseEvent(before);
    clReleaseEvent(after);
    b->samples[0][i] = (double)(end - start) / 1e3;
  }
  return bench_median(b->samples[0], b->options.runs);
}

static void verdict(report *record, double value, double target, bool least,
                    bool judged) {
  char text[48] = "no target";
  double missed = least ? (target - value) / target : (value - target) / target;
  if (judged && (least ? value >= target : value <= target))
    snprintf(text, sizeof text, "met");
  else if (judged)
    snprintf(text, sizeof text, "missed by %.0f%%", 100.0 * missed);
  report_number(record, "target", target, 2);
  report_string(record, "verdict", text);
}

static void decode_record(bench *b, report *section, layer *l) {
  const bench_call calls[] = {{run_attention, l, BENCH_TO_COMPLETION},
                              {run_copy, l, BENCH_TO_COMPLETION}};
  double us[2];
  bench_time(b, 2, calls, us);
  double device = device_us(b, l);
  report *record = bench_record(section, l->shape->name);
  report_uint(record, "seqs", l->shape->seqs);
  report_uint(record, "context", l->shape->context);
  report_number(record, "kv_mib", (double)l->kv_bytes / 1048576.0, 1);
  report_number(record, "call_us", us[0], 1);
  report_number(record, "device_us", device, 1);
  report_number(record, "copy_us", us[1], 1);
  report_number(record, "gb_s", (double)l->kv_bytes / us[0] / 1e3, 1);
  report_number(record, "copy_gb_s", (double)l->kv_bytes / us[1] / 1e3, 1);
  report_number(record, "of_copy", us[1] / us[0], 3);
  verdict(record, us[1] / us[0], DECODE_TARGET, true,
          l->kv_bytes >= DECODE_TARGET_BYTES);
}

/* The call's ratio to an empty kernel's is the GPU's target; a CPU's
   attention is a fallback, read and not judged. */
static void short_record(bench *b, report *section, layer *l, bool gpu) {
  const bench_call calls[] = {{run_attention, l, BENCH_TO_COMPLETION},
                              {bench_run_empty, NULL, BENCH_TO_COMPLETION}};
  double us[2];
  bench_time(b, 2, calls, us);
  report *record = bench_record(section, l->shape->name);
  report_number(record, "call_us", us[0], 1);
  report_number(record, "empty_us", us[1], 1);
  report_number(record, "device_us", device_us(b, l), 1);
  report_number(record, "call_over_empty", us[0] / us[1], 3);
  verdict(record, us[0] / us[1], SHORT_TARGET, false, gpu);
}

/* Multiply-adds of the chunk's causal attention and the decodes': 4 x
   head_size flops per (query, key, head). */
static double flops_of(const attention_shape *s) {
  double chunk = s->chunk, start = s->context - s->chunk;
  double pairs = chunk * start + chunk * (chunk + 1) / 2 +
                 (double)(s->seqs - 1) * s->context;
  return pairs * HEADS * HEAD * 4.0;
}

static void prefill_record(bench *b, report *section, layer *l) {
  const bench_call calls[] = {{run_attention, l, BENCH_TO_COMPLETION}};
  double us;
  bench_time(b, 1, calls, &us);
  double device = device_us(b, l);
  report *record = bench_record(section, l->shape->name);
  report_uint(record, "tokens", l->tokens);
  report_number(record, "call_us", us, 1);
  report_number(record, "device_us", device, 1);
  report_number(record, "tflop_s", flops_of(l->shape) / device / 1e6, 2);
}

/* The kinds of shapes, a section each. */
typedef enum shape_kind { DECODES, SHORT, PREFILL } shape_kind;

static shape_kind kind_of(const attention_shape *s) {
  return s->chunk ? PREFILL : s->seqs == 1 ? SHORT : DECODES;
}

/* Runs a section's shapes of the device's list (a GPU's, or a CPU's
   smaller ones), each on descriptors made for the section. */
static void run_shapes(bench *b, shape_kind kind, report *section) {
  cl_device_type type = 0;
  bench_check_cl(clGetDeviceInfo(clbt_device_id(b->device), CL_DEVICE_TYPE,
                                 sizeof type, &type, NULL),
                 "clGetDeviceInfo");
  bool gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  const attention_shape *shapes = gpu ? gpu_shapes : cpu_shapes;
  size_t count = gpu ? sizeof gpu_shapes / sizeof gpu_shapes[0]
                     : sizeof cpu_shapes / sizeof cpu_shapes[0];
  clbt_attention *timed = make_attention(b->device);
  clbt_attention *profiled = make_attention(b->profiled);
  for (size_t i = 0; i < count; ++i) {
    layer l;
    if (kind_of(&shapes[i]) != kind) continue;
    if (!make_layer(b, &shapes[i], &l)) {
      fprintf(stderr, "clbt bench: %s does not fit one buffer, left out\n",
              shapes[i].name);
      continue;
    }
    l.timed_attention = timed;
    l.profiled_attention = profiled;
    if (kind == PREFILL)
      prefill_record(b, section, &l);
    else if (kind == SHORT)
      short_record(b, section, &l, gpu);
    else
      decode_record(b, section, &l);
    free_layer(&l);
  }
  clbt_attention_destroy(timed);
  clbt_attention_destroy(profiled);
}

static void bench_attention_decode(bench *b) {
  const char *tuning = getenv("CLBT_ATTENTION_TUNING");
  char caption[640];
  snprintf(caption, sizeof caption,
           "paged attention, %d query heads on %d KV heads of %d, bf16, "
           "%d-token blocks (tuning: %s): decodes to completion against "
           "clEnqueueCopyBuffer moving as many bytes (of_copy, target >= "
           "%.2f from 256 MiB on a GPU); medians of %u runs, microseconds",
           HEADS, KV_HEADS, HEAD, BLOCK, tuning ? tuning : "the device's row",
           DECODE_TARGET, (unsigned)b->options.runs);
  run_shapes(b, DECODES, bench_section(b, "attention_decode", caption));
}

static void bench_attention_short(bench *b) {
  char caption[320];
  snprintf(caption, sizeof caption,
           "one sequence's paged attention against an empty kernel's call, "
           "both to completion (target <= %.1f on a GPU); medians of %u "
           "runs, microseconds",
           SHORT_TARGET, (unsigned)b->options.runs);
  run_shapes(b, SHORT, bench_section(b, "attention_short", caption));
}

static void bench_attention_prefill(bench *b) {
  char caption[320];
  snprintf(caption, sizeof caption,
           "a chunked prefill beside decodes in one paged-attention call "
           "(tools/gpu/attention_triton.py sets it beside vLLM's Triton "
           "kernel); medians of %u runs, microseconds",
           (unsigned)b->options.runs);
  run_shapes(b, PREFILL, bench_section(b, "attention_prefill", caption));
}

const bench_section_entry bench_attention_decode_section = {
    "attention_decode", bench_attention_decode};
const bench_section_entry bench_attention_short_section = {
    "attention_short", bench_attention_short};
const bench_section_entry bench_attention_prefill_section = {
    "attention_prefill", bench_attention_prefill};
