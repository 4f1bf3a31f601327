/*
 * The kv_cache section of `clbt bench` (issue 26): the KV-cache write of a
 * layer of 8 KV heads x 128, fp16, 16-token blocks, vLLM's flash layout
 * (K's blocks then V's, FlashAttention's [2][num_blocks] in one buffer).
 * A prefill-sized write (8192 and 16384 tokens into scattered blocks)
 * against clEnqueueCopyBuffer of the same bytes, both timed on the device
 * (profiling events), so that the write's share of the copy's bandwidth
 * shows; and a decode-sized write (256 tokens, one slot each anywhere in
 * the cache) against an empty kernel's call, both to completion. The
 * issue's targets are the H200's: at least 80% of the copy's bandwidth,
 * at most 1.2x an empty kernel's call; each record says whether it met
 * them (on a CPU, for reading).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

enum { HEADS = 8, HEAD = 128, BLOCK = 16, DECODE_TOKENS = 256 };
#define ROW_BYTES ((size_t)HEADS * HEAD * 2) /* a token's K (or V), fp16 */

#define PREFILL_TARGET 0.80 /* of the copy's bandwidth, at least */
#define DECODE_TARGET 1.20  /* an empty kernel's call, at most */

/* A layer's cache of `slots` token slots and an input of as many tokens:
   K then V in one buffer each. */
typedef struct kv_layer {
  uint32_t slots;
  cl_mem input, cache, slot_mapping;
  clbt_kv_cache *timed, *profiled; /* on the timed and profiling queues */
  clbt_kv_write write;
} kv_layer;

static cl_mem filled_buffer(bench *b, size_t bytes, uint8_t pattern) {
  return bench_filled_buffer(b, bytes, &pattern, sizeof pattern);
}

static clbt_kv_cache *layer_cache(clbt_device *device, const kv_layer *l) {
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = CLBT_KV_FLOAT16;
  config.num_kv_heads = HEADS;
  config.head_size = HEAD;
  config.block_size = BLOCK;
  config.num_blocks = l->slots / BLOCK;
  config.key_cache = l->cache;
  config.block_stride = (uint64_t)BLOCK * HEADS * HEAD;
  config.value_offset = (uint64_t)l->slots * HEADS * HEAD;
  clbt_kv_cache *cache = NULL;
  bench_check(clbt_kv_cache_create(device, &config, &cache), "kv cache create");
  return cache;
}

static kv_layer make_layer(bench *b, uint32_t slots) {
  kv_layer l = {.slots = slots};
  l.input = filled_buffer(b, 2 * slots * ROW_BYTES, 0x3c);
  l.cache = filled_buffer(b, 2 * slots * ROW_BYTES, 0);
  l.slot_mapping = filled_buffer(b, slots * sizeof(int64_t), 0);
  l.timed = layer_cache(b->device, &l);
  l.profiled = layer_cache(b->profiled, &l);
  l.write = (clbt_kv_write)CLBT_KV_WRITE_INIT;
  l.write.key = l.write.value = l.input;
  l.write.value_offset = (uint64_t)slots * HEADS * HEAD;
  l.write.slot_mapping = l.slot_mapping;
  return l;
}

static void free_layer(kv_layer *l) {
  clbt_kv_cache_destroy(l->timed);
  clbt_kv_cache_destroy(l->profiled);
  clReleaseMemObject(l->input);
  clReleaseMemObject(l->cache);
  clReleaseMemObject(l->slot_mapping);
}

/* A prefill's slots: its tokens in order, filling blocks taken in a
   shuffled order (as a KV manager hands them out). */
static void prefill_slots(bench *b, kv_layer *l) {
  uint32_t blocks = l->slots / BLOCK;
  uint32_t *order = malloc(blocks * sizeof *order);
  int64_t *slots = malloc(l->slots * sizeof *slots);
  if (!order || !slots) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t i = 0; i < blocks; ++i) order[i] = i;
  for (uint32_t i = blocks - 1; i > 0; --i) {
    uint32_t j = bench_random(b) % (i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (uint32_t t = 0; t < l->slots; ++t)
    slots[t] = (int64_t)order[t / BLOCK] * BLOCK + t % BLOCK;
  bench_check_cl(clEnqueueWriteBuffer(b->queue, l->slot_mapping, CL_TRUE, 0,
                                      l->slots * sizeof *slots, slots, 0, NULL,
                                      NULL),
                 "clEnqueueWriteBuffer");
  free(order);
  free(slots);
}

/* A decode batch's slots: one token of each request, anywhere. */
static void decode_slots(bench *b, kv_layer *l) {
  int64_t slots[DECODE_TOKENS];
  for (uint32_t t = 0; t < DECODE_TOKENS; ++t)
    slots[t] = (int64_t)(t * (l->slots / DECODE_TOKENS) +
                         bench_random(b) % (l->slots / DECODE_TOKENS));
  bench_check_cl(clEnqueueWriteBuffer(b->queue, l->slot_mapping, CL_TRUE, 0,
                                      sizeof slots, slots, 0, NULL, NULL),
                 "clEnqueueWriteBuffer");
}

static void run_write(bench *b, void *context, cl_event *event) {
  (void)b;
  kv_layer *l = context;
  bench_check(clbt_kv_cache_enqueue_write(event ? l->profiled : l->timed,
                                          &l->write, 0, NULL, event),
              "kv cache write");
}

/* The copy of the write's bytes: the whole input, K and V, to the cache. */
static void run_copy(bench *b, void *context, cl_event *event) {
  kv_layer *l = context;
  size_t bytes = 2 * (size_t)l->write.num_tokens * ROW_BYTES;
  bench_check_cl(clEnqueueCopyBuffer(event ? b->profiling_queue : b->queue,
                                     l->input, l->cache, 0, 0, bytes, 0, NULL,
                                     event),
                 "clEnqueueCopyBuffer");
}

static void verdict(report *record, double value, double target, bool least) {
  char text[48];
  bool met = least ? value >= target : value <= target;
  double missed = least ? (target - value) / target : (value - target) / target;
  if (met)
    snprintf(text, sizeof text, "met");
  else
    snprintf(text, sizeof text, "missed by %.0f%%", 100.0 * missed);
  report_number(record, "target", target, 2);
  report_string(record, "verdict", text);
}

static void prefill_case(bench *b, report *section, uint32_t tokens) {
  kv_layer l = make_layer(b, tokens);
  prefill_slots(b, &l);
  l.write.num_tokens = tokens;
  const bench_call calls[] = {{run_write, &l, BENCH_DEVICE},
                              {run_copy, &l, BENCH_DEVICE},
                              {run_write, &l, BENCH_TO_COMPLETION},
                              {run_copy, &l, BENCH_TO_COMPLETION}};
  double us[4];
  bench_time(b, 4, calls, us);
  free_layer(&l);
  /* Bytes read plus bytes written, each side. */
  double moved = 4.0 * tokens * (double)ROW_BYTES;
  char name[32];
  snprintf(name, sizeof name, "prefill-%u", (unsigned)tokens);
  report *record = bench_record(section, name);
  report_uint(record, "tokens", tokens);
  report_number(record, "write_device_us", us[0], 1);
  report_number(record, "copy_device_us", us[1], 1);
  report_number(record, "write_gb_s", moved / us[0] / 1e3, 1);
  report_number(record, "copy_gb_s", moved / us[1] / 1e3, 1);
  report_number(record, "write_call_us", us[2], 1);
  report_number(record, "copy_call_us", us[3], 1);
  report_number(record, "of_copy_bandwidth", us[1] / us[0], 3);
  verdict(record, us[1] / us[0], PREFILL_TARGET, true);
}

static void decode_case(bench *b, report *section) {
  kv_layer l = make_layer(b, 8192);
  decode_slots(b, &l);
  l.write.num_tokens = DECODE_TOKENS;
  const bench_call calls[] = {{run_write, &l, BENCH_TO_COMPLETION},
                              {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                              {run_write, &l, BENCH_ENQUEUE_ONLY},
                              {run_write, &l, BENCH_DEVICE},
                              {bench_run_empty, NULL, BENCH_DEVICE}};
  double us[5];
  bench_time(b, 5, calls, us);
  free_layer(&l);
  report *record = bench_record(section, "decode-256");
  report_uint(record, "tokens", DECODE_TOKENS);
  report_number(record, "write_call_us", us[0], 1);
  report_number(record, "empty_call_us", us[1], 1);
  report_number(record, "write_enqueue_us", us[2], 1);
  report_number(record, "write_device_us", us[3], 2);
  report_number(record, "empty_device_us", us[4], 2);
  report_number(record, "call_over_empty", us[0] / us[1], 3);
  verdict(record, us[0] / us[1], DECODE_TARGET, false);
}

static void bench_kv_cache(bench *b) {
  char caption[400];
  snprintf(caption, sizeof caption,
           "the KV-cache write of %d heads x %d, fp16, %d-token blocks: "
           "prefills against clEnqueueCopyBuffer of the same bytes (device "
           "times; of_copy_bandwidth, target >= %.2f), a decode of %d tokens "
           "against an empty kernel's call (to completion; target <= %.2f); "
           "the targets are the H200's; medians of %u runs, microseconds",
           HEADS, HEAD, BLOCK, PREFILL_TARGET, DECODE_TOKENS, DECODE_TARGET,
           (unsigned)b->options.runs);
  report *section = bench_section(b, "kv_cache", caption);
  prefill_case(b, section, 8192);
  prefill_case(b, section, 16384);
  decode_case(b, section);
}

const bench_section_entry bench_kv_cache_section = {"kv_cache", bench_kv_cache};
