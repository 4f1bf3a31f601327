/*
 * A serving loop that embeds clbt the way an inference engine does.
 *
 * A simulated scheduler admits requests as they arrive, schedules their
 * prompt tokens and then one generated token per step, grows each request's
 * KV cache a block at a time as its tokens arrive, finishes requests, and
 * keeps the batch dense by moving the last row into a finished one's. Each
 * step it commits the block table, computes the slot mapping, and hands it
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

/* Two KV-cache groups with their own block sizes, as hybrid models have. */
#define NUM_GROUPS 2
static const uint32_t block_sizes[NUM_GROUPS] = {16, 32};
#define MIN_BLOCK_SIZE 16
#define POOL_TOKENS 768 /* each group's KV cache: 48 and 24 blocks */
#define MAX_REQS 8
#define MAX_TOKENS 64     /* tokens per step (max_num_batched_tokens) */
#define MAX_MODEL_LEN 256 /* tokens per request */
#define MAX_BLOCKS (MAX_MODEL_LEN / MIN_BLOCK_SIZE)

/* The "attention" kernel: stores each token's value at its KV slot and,
   as vLLM's reshape_and_cache does, skips padding (slot < 0). */
static const char kv_write_source[] =
    "__kernel void write_kv(uint num_tokens, __global const long *slots,\n"
    "                       __global const long *values,\n"
    "                       __global long *cache) {\n"
    "  uint i = get_global_id(0);\n"
    "  if (i < num_tokens && slots[i] >= 0) cache[slots[i]] = values[i];\n"
    "}\n";

typedef struct request {
  uint32_t id, prompt_len, total_len;
  uint32_t computed;  /* tokens whose KV is in the cache */
  uint32_t scheduled; /* tokens this step */
  uint32_t num_blocks[NUM_GROUPS];
  int32_t blocks[NUM_GROUPS][MAX_BLOCKS];
} request;

/* The scheduler's state; running[r] is the request in block-table row r. */
typedef struct scheduler {
  request running[MAX_REQS];
  uint32_t num_running, next_id;
  int32_t free_blocks[NUM_GROUPS][POOL_TOKENS / MIN_BLOCK_SIZE];
  uint32_t num_free[NUM_GROUPS];
  uint64_t random;
} scheduler;

/* The batch of one step, as the host builds it. */
typedef struct batch {
  int32_t query_start_loc[MAX_REQS + 1];
  int64_t positions[MAX_TOKENS];
  int64_t values[MAX_TOKENS]; /* what each token stores in the cache */
  uint32_t num_tokens;
} batch;

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

static void check(clbt_status status, const char *what) {
  if (status == CLBT_SUCCESS) return;
  fprintf(stderr, "serving_loop: %s failed: %s: %s\n", what,
          clbt_status_name(status), clbt_last_error());
  exit(EXIT_FAILURE);
}

static void check_cl(cl_int error, const char *what) {
  check(error == CL_SUCCESS ? CLBT_SUCCESS : (clbt_status)error, what);
}

static uint32_t random_below(scheduler *s, uint32_t n) {
  s->random ^= s->random << 13;
  s->random ^= s->random >> 7;
  s->random ^= s->random << 17;
  return (uint32_t)(s->random % n);
}

/* ---- the scheduler's bookkeeping ---------------------------------------- */

static uint32_t pool_blocks(uint32_t g) { return POOL_TOKENS / block_sizes[g]; }

static uint32_t blocks_for(uint32_t tokens, uint32_t g) {
  return (tokens + block_sizes[g] - 1) / block_sizes[g];
}

/* Blocks the running requests will still take before they finish. */
static uint32_t promised_blocks(const scheduler *s, uint32_t g) {
  uint32_t promised = 0;
  for (uint32_t r = 0; r < s->num_running; ++r)
    promised += blocks_for(s->running[r].total_len, g) -
                s->running[r].num_blocks[g];
  return promised;
}

/* Every block of group g is free, in a shuffled order as after churn. */
static void fill_pool(scheduler *s, uint32_t g) {
  for (s->num_free[g] = 0; s->num_free[g] < pool_blocks(g); ++s->num_free[g])
    s->free_blocks[g][s->num_free[g]] = (int32_t)s->num_free[g];
  for (uint32_t i = s->num_free[g] - 1; i > 0; --i) {
    uint32_t j = random_below(s, i + 1);
    int32_t id = s->free_blocks[g][i];
    s->free_blocks[g][i] = s->free_blocks[g][j];
    s->free_blocks[g][j] = id;
  }
}

/* A request is admitted only when its whole life fits in the free blocks,
   so that no running request ever waits for a block. */
static bool fits(const scheduler *s, uint32_t total_len) {
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    if (blocks_for(total_len, g) + promised_blocks(s, g) > s->num_free[g])
      return false;
  return true;
}

/* New requests arrive: up to two per step, each in the next free row. */
static uint32_t admit(scheduler *s, engine *e) {
  uint32_t admitted = 0, arrivals = random_below(s, 3);
  for (; admitted < arrivals && s->num_running < MAX_REQS; ++admitted) {
    uint32_t prompt_len = 1 + random_below(s, 120);
    uint32_t total_len = prompt_len + 1 + random_below(s, 40);
    if (!fits(s, total_len)) break;
    uint32_t row = s->num_running++;
    s->running[row] = (request){.id = s->next_id++,
                                .prompt_len = prompt_len,
                                .total_len = total_len};
    /* add_row replaces whatever the row held; the blocks come later. */
    const int32_t *no_ids[NUM_GROUPS] = {NULL, NULL};
    const size_t no_counts[NUM_GROUPS] = {0, 0};
    check(clbt_multi_table_add_row(e->table, row, no_ids, no_counts),
          "add_row");
  }
  return admitted;
}

/* Finished requests give back their blocks; the last row fills the hole. */
static uint32_t finish(scheduler *s, engine *e, uint32_t *moved) {
  uint32_t finished = 0;
  for (uint32_t row = 0; row < s->num_running;) {
    request *r = &s->running[row];
    if (r->computed < r->total_len) {
      ++row;
      continue;
    }
    for (uint32_t g = 0; g < NUM_GROUPS; ++g)
      for (uint32_t b = 0; b < r->num_blocks[g]; ++b)
        s->free_blocks[g][s->num_free[g]++] = r->blocks[g][b];
    check(clbt_multi_table_clear_row(e->table, row), "clear_row");
    uint32_t last = --s->num_running;
    if (row != last) {
      check(clbt_multi_table_move_row(e->table, last, row), "move_row");
      s->running[row] = s->running[last];
      ++*moved;
    }
    ++finished;
  }
  return finished;
}

/* Appends blocks, one at a time, until the request's tokens fit. */
static void grow(scheduler *s, engine *e, uint32_t row, uint32_t tokens) {
  request *r = &s->running[row];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
    while (r->num_blocks[g] < blocks_for(tokens, g)) {
      int32_t id = s->free_blocks[g][--s->num_free[g]];
      const int32_t *ids[NUM_GROUPS] = {NULL, NULL};
      size_t counts[NUM_GROUPS] = {0, 0};
      ids[g] = &id;
      counts[g] = 1;
      check(clbt_multi_table_append_row(e->table, row, ids, counts),
            "append_row");
      r->blocks[g][r->num_blocks[g]++] = id;
    }
  }
}

/* Schedules prompt tokens (chunked to the step's budget) or one new token
   per request, in row order, and lays out the batch. */
static void schedule(scheduler *s, engine *e, batch *b) {
  b->num_tokens = 0;
  for (uint32_t row = 0; row < s->num_running; ++row) {
    request *r = &s->running[row];
    uint32_t budget = MAX_TOKENS - b->num_tokens;
    uint32_t wanted = r->computed < r->prompt_len
                          ? r->prompt_len - r->computed
                          : 1;
    r->scheduled = wanted < budget ? wanted : budget;
    grow(s, e, row, r->computed + r->scheduled);
    b->query_start_loc[row] = (int32_t)b->num_tokens;
    for (uint32_t t = 0; t < r->scheduled; ++t, ++b->num_tokens) {
      int64_t position = r->computed + t;
      b->positions[b->num_tokens] = position;
      b->values[b->num_tokens] = (int64_t)r->id << 32 | position;
    }
  }
  b->query_start_loc[s->num_running] = (int32_t)b->num_tokens;
}

/* ---- the device side ---------------------------------------------------- */

static cl_mem create_buffer(engine *e, size_t bytes) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(clbt_device_context(e->device),
                                 CL_MEM_READ_WRITE, bytes, NULL, &error);
  check_cl(error, "clCreateBuffer");
  return buffer;
}

static void write_buffer(engine *e, cl_mem buffer, size_t bytes,
                         const void *data) {
  if (bytes == 0) return;
  check_cl(clEnqueueWriteBuffer(clbt_device_queue(e->device), buffer, CL_TRUE,
                                0, bytes, data, 0, NULL, NULL),
           "clEnqueueWriteBuffer");
}

static void read_buffer(engine *e, cl_mem buffer, size_t bytes, void *data) {
  check_cl(clEnqueueReadBuffer(clbt_device_queue(e->device), buffer, CL_TRUE,
                               0, bytes, data, 0, NULL, NULL),
           "clEnqueueReadBuffer");
}

static void engine_start(engine *e) {
  check(clbt_device_open(NULL, &e->device), "clbt_device_open");
  clbt_group_config groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    groups[g] = (clbt_group_config){
        .block_size = block_sizes[g],
        .max_num_blocks = blocks_for(MAX_MODEL_LEN, g)};
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
  e->query_start_loc = create_buffer(e, sizeof(int32_t) * (MAX_REQS + 1));
  e->positions = create_buffer(e, sizeof(int64_t) * MAX_TOKENS);
  e->values = create_buffer(e, sizeof(int64_t) * MAX_TOKENS);
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    e->caches[g] =
        create_buffer(e, sizeof(int64_t) * POOL_TOKENS);
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
static void run_step(engine *e, uint32_t num_reqs, const batch *b) {
  check(clbt_multi_table_commit(e->table, num_reqs), "commit");
  write_buffer(e, e->query_start_loc, sizeof(int32_t) * (num_reqs + 1),
               b->query_start_loc);
  write_buffer(e, e->positions, sizeof(int64_t) * b->num_tokens, b->positions);
  write_buffer(e, e->values, sizeof(int64_t) * b->num_tokens, b->values);
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
static uint64_t check_group(engine *e, const scheduler *s, const batch *b,
                            uint32_t g, totals *t) {
  static int64_t slots[MAX_TOKENS], cache[POOL_TOKENS];
  clbt_table *table = clbt_multi_table_group(e->table, g);
  read_buffer(e, clbt_table_slot_mapping(table), sizeof slots, slots);
  read_buffer(e, e->caches[g], sizeof cache, cache);
  uint64_t wrong = 0;
  uint32_t token = 0, size = block_sizes[g];
  for (uint32_t row = 0; row < s->num_running; ++row) {
    const request *r = &s->running[row];
    for (uint32_t i = 0; i < r->scheduled; ++i, ++token) {
      uint32_t position = r->computed + i;
      int64_t expected =
          (int64_t)r->blocks[g][position / size] * size + position % size;
      wrong += slots[token] != expected || cache[expected] != b->values[token];
    }
  }
  for (; token < MAX_TOKENS; ++token) wrong += slots[token] != CLBT_PAD_SLOT_ID;
  t->slots_checked += MAX_TOKENS;
  return wrong;
}

/* ---- the loop ----------------------------------------------------------- */

static bool parse_arguments(int argc, char **argv, uint32_t *steps,
                            uint64_t *seed, bool *verbose) {
  for (int i = 1; i < argc; ++i) {
    char *end = NULL;
    if (strcmp(argv[i], "--verbose") == 0) {
      *verbose = true;
    } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
      *steps = (uint32_t)strtoul(argv[++i], &end, 10);
      if (*end || *steps == 0) return false;
    } else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0) {
      *seed = strtoull(argv[++i], &end, 10);
      if (*end) return false;
    } else {
      return false;
    }
  }
  return true;
}

int main(int argc, char **argv) {
  uint32_t steps = 50;
  uint64_t seed = 1;
  bool verbose = false;
  if (!parse_arguments(argc, argv, &steps, &seed, &verbose)) {
    fprintf(stderr, "usage: serving_loop [--steps N] [--seed N] [--verbose]\n");
    return 2;
  }
  static scheduler s;
  static batch b;
  engine e = {0};
  totals t = {0};
  s.random = seed * 2654435761u + 1;
  for (uint32_t g = 0; g < NUM_GROUPS; ++g)
    fill_pool(&s, g);
  engine_start(&e);

  for (uint32_t step = 1; step <= steps; ++step) {
    uint32_t moved = 0, finished = finish(&s, &e, &moved);
    uint32_t admitted = admit(&s, &e);
    schedule(&s, &e, &b);
    run_step(&e, s.num_running, &b);
    uint64_t wrong = 0;
    for (uint32_t g = 0; g < NUM_GROUPS; ++g)
      wrong += check_group(&e, &s, &b, g, &t);
    for (uint32_t row = 0; row < s.num_running; ++row)
      s.running[row].computed += s.running[row].scheduled;
    t.tokens += b.num_tokens;
    t.wrong += wrong;
    t.finished += finished;
    if (verbose)
      printf("step %u: %u running (+%u new, -%u finished, %u moved), "
             "%u tokens, blocks in use %u/%u and %u/%u, %s\n",
             step, s.num_running, admitted, finished, moved, b.num_tokens,
             pool_blocks(0) - s.num_free[0], pool_blocks(0),
             pool_blocks(1) - s.num_free[1], pool_blocks(1),
             wrong ? "SLOTS WRONG" : "slots ok");
  }
  engine_stop(&e);
  printf("serving_loop: %u steps, %" PRIu64 " requests finished, %" PRIu64
         " tokens, %" PRIu64 " slots checked, %" PRIu64 " wrong\n",
         steps, t.finished, t.tokens, t.slots_checked, t.wrong);
  return t.wrong == 0 && t.tokens > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
