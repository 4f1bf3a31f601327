/*
 * A serving loop that embeds clbt the way an inference engine does.
 *
 * A simulated scheduler (scheduler.c) admits requests as they arrive,
 * schedules their prompt tokens and then one generated token per step,
 * grows each request's KV cache a block at a time as its tokens arrive,
 * finishes requests, and keeps the batch dense by moving the last row into
 * a finished one's, making the matching row calls on the table as it
 * decides (add_row, append_row, clear_row, move_row). Each step the loop
 * commits the block table, computes the slot mapping, and hands it
 * to a KV-cache write kernel (the part of attention that stores each
 * token's key and value at its slot) on the same queue. It then checks
 * every slot, and every value written, against its own bookkeeping of the
 * blocks, which is all an engine knows.
 *
 *   serving_loop [--steps N] [--seed N] [--verbose]
 *
 * Runs on the device CLBT_DEVICE selects. Prints a line per step with
 * --verbose, and a summary; exits 0 when every slot was as expected.
 * docs/guide.md walks through the same calls.
 */
#include <clbt/clbt.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_NAME "serving_loop"
#include "example.h"
#include "scheduler.h"

/* Two KV-cache groups with their own block sizes, as hybrid models have;
   each group's KV cache holds 768 tokens: 48 and 24 blocks. */
#define NUM_GROUPS 2
static const uint32_t block_sizes[NUM_GROUPS] = {16, 32};
#define POOL_TOKENS 768

/* The "attention" kernel: stores each token's value at its KV slot and,
   as vLLM's reshape_and_cache does, skips padding (slot < 0). */
static const char kv_write_source[] =
    "__kernel void write_kv(uint num_tokens, __global const long *slots,\n"
    "                       __global const long *values,\n"
    "                       __global long *cache) {\n"
    "  uint i = get_global_id(0);\n"
    "  if (i < num_tokens && slots[i] >= 0) cache[slots[i]] = values[i];\n"
    "}\n";

/* The engine's OpenCL side: clbt's device and table, and its own kernel. */
typedef struct engine {
  clbt_device *device;
  clbt_multi_table *table;
  cl_program program;
  cl_kernel write_kv;
  cl_mem query_start_loc, positions, values, caches[NUM_GROUPS];
} engine;

typedef struct totals {
  uint64_t tokens, slots_checked, wrong, finished;
} totals;

/* What each token stores in the KV cache: its request and its position. */
static void token_values(const scheduler *s, const batch *b,
                         int64_t *values) {
  for (uint32_t row = 0; row < s->num_running; ++row)
    for (int32_t t = b->query_start_loc[row]; t < b->query_start_loc[row + 1];
         ++t)
      values[t] = (int64_t)s->running[row].id << 32 | b->positions[t];
}

/* ---- the device side ---------------------------------------------------- */

static void engine_start(engine *e) {
  check(clbt_device_open(NULL, &e->device), "clbt_device_open");
  clbt_group_config groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    groups[g] = (clbt_group_config){
        .block_size = block_sizes[g],
        .max_num_blocks = (MAX_MODEL_LEN + block_sizes[g] - 1) / block_sizes[g]};
  clbt_multi_table_config config = {.max_num_reqs = MAX_REQS,
                                    .max_num_batched_tokens = MAX_TOKENS,
                                    .num_groups = NUM_GROUPS,
                                    .groups = groups};
  check(clbt_multi_table_create(e->device, &config, &e->table),
        "clbt_multi_table_create");

  cl_int error = CL_SUCCESS;
  const char *source = kv_write_source;
  cl_device_id id = clbt_device_id(e->device);
  e->program = clCreateProgramWithSource(clbt_device_context(e->device), 1,
                                         &source, NULL, &error);
  check_cl(error, "clCreateProgramWithSource");
  check_cl(clBuildProgram(e->program, 1, &id, "-cl-std=CL1.2", NULL, NULL),
           "clBuildProgram");
  e->write_kv = clCreateKernel(e->program, "write_kv", &error);
  check_cl(error, "clCreateKernel");
  e->query_start_loc = create_buffer(e->device, sizeof(int32_t) * (MAX_REQS + 1));
  e->positions = create_buffer(e->device, sizeof(int64_t) * MAX_TOKENS);
  e->values = create_buffer(e->device, sizeof(int64_t) * MAX_TOKENS);
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    e->caches[g] =
        create_buffer(e->device, sizeof(int64_t) * POOL_TOKENS);
}

static void engine_stop(engine *e) {
  cl_mem buffers[] = {e->query_start_loc, e->positions, e->values,
                      e->caches[0], e->caches[1]};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
  clReleaseKernel(e->write_kv);
  clReleaseProgram(e->program);
  clbt_multi_table_destroy(e->table);
  clbt_device_release(e->device);
}

/* Enqueues the KV-cache write of group g, reading its slot mapping. */
static void write_kv_cache(engine *e, uint32_t g, cl_uint num_tokens) {
  cl_mem slots = clbt_table_slot_mapping(clbt_multi_table_group(e->table, g));
  size_t global = MAX_TOKENS;
  check_cl(clSetKernelArg(e->write_kv, 0, sizeof num_tokens, &num_tokens),
           "clSetKernelArg");
  check_cl(clSetKernelArg(e->write_kv, 1, sizeof slots, &slots),
           "clSetKernelArg");
  check_cl(clSetKernelArg(e->write_kv, 2, sizeof e->values, &e->values),
           "clSetKernelArg");
  check_cl(clSetKernelArg(e->write_kv, 3, sizeof e->caches[g], &e->caches[g]),
           "clSetKernelArg");
  check_cl(clEnqueueNDRangeKernel(clbt_device_queue(e->device), e->write_kv, 1,
                                  NULL, &global, NULL, 0, NULL, NULL),
           "clEnqueueNDRangeKernel");
}

/* The device work of one step: commit, slot mapping, KV-cache write. All
   on the device's in-order queue, so nothing waits in between. */
static void run_step(engine *e, uint32_t num_reqs, const batch *b,
                     const int64_t *values) {
  check(clbt_multi_table_commit(e->table, num_reqs), "commit");
  write_buffer(e->device, e->query_start_loc, sizeof(int32_t) * (num_reqs + 1),
               b->query_start_loc);
  write_buffer(e->device, e->positions, sizeof(int64_t) * b->num_tokens, b->positions);
  write_buffer(e->device, e->values, sizeof(int64_t) * b->num_tokens, values);
  check(clbt_multi_table_compute_slot_mapping(e->table, num_reqs,
                                              e->query_start_loc, e->positions,
                                              b->num_tokens),
        "compute_slot_mapping");
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    write_kv_cache(e, g, b->num_tokens);
}

/* ---- checking ----------------------------------------------------------- */

/*
 * Compares group g's slot mapping and KV cache with the scheduler's own
 * account: token at position p of a request goes to slot
 * blocks[p / block_size] * block_size + p % block_size; the rest of the
 * mapping is -1. Returns the number of mismatches.
 */
static uint64_t check_group(engine *e, const scheduler *s,
                            const int64_t *values, uint32_t g, totals *t) {
  static int64_t slots[MAX_TOKENS], cache[POOL_TOKENS];
  clbt_table *table = clbt_multi_table_group(e->table, g);
  read_buffer(e->device, clbt_table_slot_mapping(table), sizeof slots, slots);
  read_buffer(e->device, e->caches[g], sizeof cache, cache);
  uint64_t wrong = 0;
  uint32_t token = 0, size = block_sizes[g];
  for (uint32_t row = 0; row < s->num_running; ++row) {
    const request *r = &s->running[row];
    for (uint32_t i = 0; i < r->scheduled; ++i, ++token) {
      uint32_t position = r->computed + i;
      int64_t expected =
          (int64_t)r->blocks[g][position / size] * size + position % size;
      wrong += slots[token] != expected || cache[expected] != values[token];
    }
  }
  for (; token < MAX_TOKENS; ++token) wrong += slots[token] != CLBT_PAD_SLOT_ID;
  t->slots_checked += MAX_TOKENS;
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
  static int64_t values[MAX_TOKENS];
  engine e = {0};
  totals t = {0};
  engine_start(&e);
  scheduler_group groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    groups[g] = (scheduler_group){.block_tokens = block_sizes[g],
                                  .pool_blocks = POOL_TOKENS / block_sizes[g]};
  if (!scheduler_init(&s, seed, SCHEDULER_BATCH_ROWS, NUM_GROUPS, groups,
                      e.table)) {
    fprintf(stderr, "serving_loop: the groups exceed the scheduler's limits\n");
    return EXIT_FAILURE;
  }

  for (uint32_t step = 1; step <= steps; ++step) {
    step_summary summary;
    check(scheduler_step(&s, &b, &summary), "the scheduler's step");
    token_values(&s, &b, values);
    run_step(&e, s.num_running, &b, values);
    uint64_t wrong = 0;
    for (uint32_t g = 0; g < NUM_GROUPS; ++g)
      wrong += check_group(&e, &s, values, g, &t);
    scheduler_advance(&s);
    t.tokens += b.num_tokens;
    t.wrong += wrong;
    t.finished += summary.finished;
    if (verbose)
      printf("step %u: %u running (+%u new, -%u finished, %u moved), "
             "%u tokens, blocks in use %u/%u and %u/%u, %s\n",
             step, s.num_running, summary.admitted, summary.finished,
             summary.moved, b.num_tokens, scheduler_blocks_in_use(&s, 0),
             groups[0].pool_blocks, scheduler_blocks_in_use(&s, 1),
             groups[1].pool_blocks, wrong ? "SLOTS WRONG" : "slots ok");
  }
  engine_stop(&e);
  printf("serving_loop: %u steps, %" PRIu64 " requests finished, %" PRIu64
         " tokens, %" PRIu64 " slots checked, %" PRIu64 " wrong\n",
         steps, t.finished, t.tokens, t.slots_checked, t.wrong);
  return t.wrong == 0 && t.tokens > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
