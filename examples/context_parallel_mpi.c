/*
 * Decode context parallelism across processes: one MPI rank per
 * context-parallel rank, each with its own device, as vLLM runs DCP with
 * torch.distributed.
 *
 * Every rank opens its own device, creates the same multi-group table with
 * cp_rank = its rank and cp_world_size = the number of ranks, and replays
 * the same deterministic scheduler (scheduler.c), so that every rank makes
 * the same row calls and lays out the same batches; an engine runs its
 * scheduler once and broadcasts those decisions instead (docs/scaling.md).
 * Each rank commits its table and computes its slot mappings, in which the
 * tokens other ranks own are -1. The ranks then check together, with MPI
 * collectives, that
 *   - every scheduled token of a sharded group has exactly one owner,
 *   - the replicated group's slot mapping is the same on every rank,
 *   - the block tables are the same on every rank,
 *   - the union of the ranks' slot mappings equals a single-process
 *     reference computed here from the scheduler's own blocks,
 * and rank 0 prints a PASS or FAIL line per check, how evenly each sharded
 * group's KV tokens spread across the ranks, and each rank's step time.
 *
 *   mpirun -n 2 context_parallel_mpi [--interleave N] [--steps N] [--seed N]
 *
 * Each rank opens the device CLBT_DEVICE selects; when CLBT_DEVICE is unset
 * and the machine has several GPUs, the i-th rank of a machine takes GPU i
 * (modulo their number). Exits 0 when every check passed.
 */
#include <clbt/clbt.h>
#include <mpi.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

/* The model's KV-cache groups: three sharded across the ranks (one splits
   its blocks for an attention kernel of block size 8), one whose cache
   every rank holds whole, and a Mamba group whose rows are state indices. */
#define NUM_GROUPS 5
static const clbt_group_config model_groups[NUM_GROUPS] = {
    {.block_size = 16},
    {.block_size = 32},
    {.block_size = 32, .kernel_block_size = 8},
    {.block_size = 16, .cp_replicated = 1},
    {.block_size = MAX_MODEL_LEN, .slot_mode = CLBT_SLOT_MODE_NONE},
};
static const char *const group_names[NUM_GROUPS] = {
    "block 16", "block 32", "block 32 kernel 8", "replicated block 16",
    "Mamba state"};
/* Each token group's KV cache holds this many tokens of requests (a
   sharded group's spread over the ranks); a Mamba state per request. */
#define POOL_TOKENS 1024

typedef struct rank_info {
  int rank, world, local_rank;
  uint32_t interleave;
} rank_info;

/* This rank's OpenCL side: its device, its table, the batch's buffers. */
typedef struct engine {
  clbt_device *device;
  clbt_multi_table *table;
  cl_mem query_start_loc, positions;
} engine;

/* The checks, each over every step. */
enum { ONE_OWNER, REPLICATED_AGREE, TABLES_AGREE, UNION_IS_REFERENCE,
       NUM_CHECKS };
static const char *const claims[NUM_CHECKS] = {
    "every scheduled token of a sharded group has exactly one owner",
    "the replicated group's slot mapping is the same on every rank",
    "the block tables are the same on every rank",
    "the union of the ranks' slot mappings equals the reference"};

typedef struct verdict {
  uint64_t checked, wrong;
  char first_wrong[96]; /* where the first wrong one was */
} verdict;

static void check(clbt_status status, const char *what) {
  if (status == CLBT_SUCCESS) return;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "context_parallel_mpi: rank %d: %s failed: %s: %s\n", rank,
          what, clbt_status_name(status), clbt_last_error());
  MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE); /* the other ranks stop too */
}

static void check_cl(cl_int error, const char *what) {
  check(error == CL_SUCCESS ? CLBT_SUCCESS : (clbt_status)error, what);
}

static bool sharded(uint32_t g) {
  return model_groups[g].slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT &&
         !model_groups[g].cp_replicated;
}

/* A request's tokens one block of group g holds: a sharded group's block
   holds block_size tokens on each rank. */
static uint32_t block_tokens(uint32_t g, int world) {
  return model_groups[g].block_size * (sharded(g) ? (uint32_t)world : 1);
}

/* ---- the device of each rank --------------------------------------------- */

/* GPUs on this machine, over every platform. A platform that fails to
   answer counts none; clbt_device_open then says what is wrong. */
static cl_uint count_gpus(void) {
  cl_platform_id platforms[16];
  cl_uint num_platforms = 0, gpus = 0;
  if (clGetPlatformIDs(16, platforms, &num_platforms) != CL_SUCCESS) return 0;
  for (cl_uint p = 0; p < num_platforms && p < 16; ++p) {
    cl_uint n = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_GPU, 0, NULL, &n) ==
        CL_SUCCESS)
      gpus += n;
  }
  return gpus;
}

/* CLBT_DEVICE's device when it is set; else, with several GPUs, the ranks
   of a machine take them in turn (":gpu:N" is the N-th GPU of any
   platform); else the default device. */
static clbt_device *open_device(int local_rank) {
  const char *chosen = getenv("CLBT_DEVICE");
  char gpu[32] = "";
  cl_uint gpus = chosen && *chosen ? 0 : count_gpus();
  if (gpus > 1)
    snprintf(gpu, sizeof gpu, ":gpu:%u", (unsigned)local_rank % gpus);
  clbt_device *device = NULL;
  check(clbt_device_open(gpu[0] ? gpu : NULL, &device), "clbt_device_open");
  return device;
}

static void read_buffer(engine *e, cl_mem buffer, size_t bytes, void *data) {
  check_cl(clEnqueueReadBuffer(clbt_device_queue(e->device), buffer, CL_TRUE,
                               0, bytes, data, 0, NULL, NULL),
           "clEnqueueReadBuffer");
}

/* The same table on every rank but for cp_rank. */
static void engine_start(engine *e, const rank_info *me) {
  e->device = open_device(me->local_rank);
  clbt_group_config groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
    uint32_t size = block_tokens(g, me->world);
    groups[g] = model_groups[g];
    groups[g].max_num_blocks = (MAX_MODEL_LEN + size - 1) / size;
  }
  clbt_multi_table_config config = {
      .max_num_reqs = MAX_REQS,
      .max_num_batched_tokens = MAX_TOKENS,
      .num_groups = NUM_GROUPS,
      .groups = groups,
      .cp_world_size = (uint32_t)me->world,
      .cp_rank = (uint32_t)me->rank,
      .cp_interleave_size = me->interleave};
  check(clbt_multi_table_create(e->device, &config, &e->table),
        "clbt_multi_table_create");
  cl_int error = CL_SUCCESS;
  e->query_start_loc =
      clCreateBuffer(clbt_device_context(e->device), CL_MEM_READ_ONLY,
                     sizeof(int32_t) * (MAX_REQS + 1), NULL, &error);
  check_cl(error, "clCreateBuffer");
  e->positions = clCreateBuffer(clbt_device_context(e->device),
                                CL_MEM_READ_ONLY, sizeof(int64_t) * MAX_TOKENS,
                                NULL, &error);
  check_cl(error, "clCreateBuffer");
}

static void engine_stop(engine *e) {
  clReleaseMemObject(e->query_start_loc);
  clReleaseMemObject(e->positions);
  clbt_multi_table_destroy(e->table);
  clbt_device_release(e->device);
}

/* The device work of one step, timed on this rank: commit, the batch's
   upload, every group's slot mapping, until the queue is done. */
static double run_step(engine *e, uint32_t num_reqs, const batch *b) {
  cl_command_queue queue = clbt_device_queue(e->device);
  MPI_Barrier(MPI_COMM_WORLD); /* the ranks start each step together */
  double start = MPI_Wtime();
  check(clbt_multi_table_commit(e->table, num_reqs), "commit");
  check_cl(clEnqueueWriteBuffer(queue, e->query_start_loc, CL_FALSE, 0,
                                sizeof(int32_t) * (num_reqs + 1),
                                b->query_start_loc, 0, NULL, NULL),
           "clEnqueueWriteBuffer");
  if (b->num_tokens > 0)
    check_cl(clEnqueueWriteBuffer(queue, e->positions, CL_FALSE, 0,
                                  sizeof(int64_t) * b->num_tokens,
                                  b->positions, 0, NULL, NULL),
             "clEnqueueWriteBuffer");
  check(clbt_multi_table_compute_slot_mapping(e->table, num_reqs,
                                              e->query_start_loc, e->positions,
                                              b->num_tokens),
        "compute_slot_mapping");
  check_cl(clFinish(queue), "clFinish");
  return MPI_Wtime() - start;
}

/* ---- the single-process reference ----------------------------------------- */

/* Where a token's KV goes: the rank that holds it and the slot there. */
typedef struct kv_home {
  int rank;
  int64_t slot;
} kv_home;

/*
 * vLLM's rule (block_table.py, the slot-mapping kernel), written here from
 * the scheduler's own blocks and nothing of clbt's. A request's tokens
 * fall in virtual blocks of block_size * world tokens, one KV-manager block
 * id each; within a virtual block the tokens are dealt to the ranks
 * interleave at a time, and each rank keeps its share, in order, in its own
 * copy of that block. The slot is block id * block_size + offset whatever
 * the kernel block size: the kernel blocks of id b are b*k .. b*k+k-1.
 */
static kv_home reference_home(const request *r, uint32_t g, int world,
                              uint32_t interleave, uint32_t position) {
  uint32_t size = model_groups[g].block_size, w = (uint32_t)world;
  if (!sharded(g)) w = interleave = 1;
  uint32_t offset = position % (size * w); /* within its virtual block */
  uint32_t local = offset / (interleave * w) * interleave + offset % interleave;
  return (kv_home){
      .rank = (int)(offset / interleave % w),
      .slot = (int64_t)r->blocks[g][position / (size * w)] * size + local};
}

/* ---- checking together ---------------------------------------------------- */

/* MPI's default error handler ends the job on any failure, so MPI calls
   are not checked one by one here. */

static void record(verdict *v, bool ok, uint32_t step, uint32_t g,
                   const char *what, uint32_t index) {
  ++v->checked;
  if (!ok && v->wrong++ == 0)
    snprintf(v->first_wrong, sizeof v->first_wrong, "step %u, %s group, %s %u",
             step, group_names[g], what, index);
}

/* Group g's slot mapping on every rank, combined: for each token, how many
   ranks own it (their slot is not -1), the highest rank that does, and the
   lowest and highest slot over the ranks. For a sharded group, the highest
   slot is the union of the ranks' mappings, the others holding -1. */
typedef struct combined {
  int32_t owners[MAX_TOKENS], owner[MAX_TOKENS];
  int64_t lowest[MAX_TOKENS], highest[MAX_TOKENS];
} combined;

static void combine(const rank_info *me, const int64_t *slots, combined *c) {
  int32_t owns[MAX_TOKENS], owner[MAX_TOKENS];
  for (uint32_t t = 0; t < MAX_TOKENS; ++t) {
    owns[t] = slots[t] != CLBT_PAD_SLOT_ID;
    owner[t] = owns[t] ? me->rank : -1;
  }
  MPI_Allreduce(owns, c->owners, MAX_TOKENS, MPI_INT32_T, MPI_SUM,
                MPI_COMM_WORLD);
  MPI_Allreduce(owner, c->owner, MAX_TOKENS, MPI_INT32_T, MPI_MAX,
                MPI_COMM_WORLD);
  MPI_Allreduce(slots, c->lowest, MAX_TOKENS, MPI_INT64_T, MPI_MIN,
                MPI_COMM_WORLD);
  MPI_Allreduce(slots, c->highest, MAX_TOKENS, MPI_INT64_T, MPI_MAX,
                MPI_COMM_WORLD);
}

/* Checks token group g's slot mappings of this step against each other and
   against the reference; adds the tokens this rank owns to *owned. */
static void check_slots(engine *e, const rank_info *me, const scheduler *s,
                        uint32_t step, uint32_t g, verdict *v,
                        uint64_t *owned) {
  int64_t slots[MAX_TOKENS];
  combined c;
  read_buffer(e, clbt_table_slot_mapping(clbt_multi_table_group(e->table, g)),
              sizeof slots, slots);
  combine(me, slots, &c);
  uint32_t token = 0;
  for (uint32_t row = 0; row < s->num_running; ++row) {
    const request *r = &s->running[row];
    for (uint32_t i = 0; i < r->scheduled; ++i, ++token) {
      kv_home home =
          reference_home(r, g, me->world, me->interleave, r->computed + i);
      *owned += slots[token] != CLBT_PAD_SLOT_ID;
      if (sharded(g))
        record(&v[ONE_OWNER], c.owners[token] == 1, step, g, "token", token);
      else
        record(&v[REPLICATED_AGREE], c.lowest[token] == c.highest[token],
               step, g, "token", token);
      bool union_ok = c.highest[token] == home.slot &&
                      (!sharded(g) || c.owner[token] == home.rank);
      record(&v[UNION_IS_REFERENCE], union_ok, step, g, "token", token);
    }
  }
  for (; token < MAX_TOKENS; ++token) /* padding, on every rank */
    record(&v[UNION_IS_REFERENCE], c.highest[token] == CLBT_PAD_SLOT_ID, step,
           g, "padding token", token);
}

/* Checks that group g's committed rows are the same on every rank. */
static void check_rows(engine *e, uint32_t num_reqs, uint32_t step,
                       uint32_t g, verdict *v) {
  clbt_table *table = clbt_multi_table_group(e->table, g);
  size_t cells = (size_t)num_reqs * clbt_table_width(table);
  if (cells == 0) return;
  int32_t *rows = malloc(3 * cells * sizeof *rows);
  if (!rows) check(CLBT_CL_OUT_OF_HOST_MEMORY, "malloc");
  int32_t *lowest = rows + cells, *highest = rows + 2 * cells;
  read_buffer(e, clbt_table_device_data(table), cells * sizeof *rows, rows);
  MPI_Allreduce(rows, lowest, (int)cells, MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(rows, highest, (int)cells, MPI_INT32_T, MPI_MAX,
                MPI_COMM_WORLD);
  for (size_t i = 0; i < cells; ++i)
    record(&v[TABLES_AGREE], lowest[i] == highest[i], step, g, "table entry",
           (uint32_t)i);
  free(rows);
}

/* ---- the report ------------------------------------------------------------ */

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *values, uint32_t n) {
  qsort(values, n, sizeof *values, compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* Rank 0 prints each rank's device and median step time. */
static void report_ranks(engine *e, const rank_info *me, double median_s) {
  char selector[CLBT_SELECTOR_SIZE] = "?", *selectors = NULL;
  double *medians = NULL;
  clbt_device_selector(clbt_device_id(e->device), selector, sizeof selector);
  if (me->rank == 0) {
    selectors = malloc(sizeof selector * (size_t)me->world);
    medians = malloc(sizeof *medians * (size_t)me->world);
    if (!selectors || !medians) check(CLBT_CL_OUT_OF_HOST_MEMORY, "malloc");
  }
  MPI_Gather(selector, sizeof selector, MPI_CHAR, selectors, sizeof selector,
             MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&median_s, 1, MPI_DOUBLE, medians, 1, MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  if (me->rank == 0) {
    double fastest = medians[0], slowest = medians[0];
    for (int r = 0; r < me->world; ++r) {
      printf("rank %d: device %s, median step %.1f us\n", r,
             selectors + r * sizeof selector, medians[r] * 1e6);
      fastest = medians[r] < fastest ? medians[r] : fastest;
      slowest = medians[r] > slowest ? medians[r] : slowest;
    }
    printf("step time spread: slowest/fastest median %.2f\n",
           slowest / fastest);
  }
  free(selectors);
  free(medians);
}

/* Rank 0 prints the KV tokens each rank owns, per sharded group, and how
   far the busiest rank is above the mean. */
static void report_balance(const rank_info *me, const uint64_t *owned) {
  uint64_t *all = NULL;
  if (me->rank == 0 &&
      !(all = malloc(sizeof *all * NUM_GROUPS * (size_t)me->world)))
    check(CLBT_CL_OUT_OF_HOST_MEMORY, "malloc");
  MPI_Gather(owned, NUM_GROUPS, MPI_UINT64_T, all, NUM_GROUPS, MPI_UINT64_T, 0,
             MPI_COMM_WORLD);
  for (uint32_t g = 0; me->rank == 0 && g < NUM_GROUPS; ++g) {
    if (!sharded(g)) continue;
    uint64_t total = 0, most = 0;
    printf("KV tokens per rank, %s group:", group_names[g]);
    for (int r = 0; r < me->world; ++r) {
      uint64_t n = all[(size_t)r * NUM_GROUPS + g];
      printf(" %" PRIu64, n);
      total += n;
      most = n > most ? n : most;
    }
    printf("; max/mean %.3f\n", total ? (double)most * me->world / total : 0);
  }
  free(all);
}

static bool report_checks(const rank_info *me, const verdict *v) {
  bool passed = true;
  for (int c = 0; c < NUM_CHECKS; ++c) {
    bool ok = v[c].wrong == 0 && v[c].checked > 0;
    passed = passed && ok;
    if (me->rank != 0) continue;
    printf("%s %s (%" PRIu64 " checked", ok ? "PASS" : "FAIL", claims[c],
           v[c].checked);
    if (v[c].wrong)
      printf(", %" PRIu64 " wrong, the first at %s", v[c].wrong,
             v[c].first_wrong);
    printf(")\n");
  }
  return passed;
}

/* ---- the loop --------------------------------------------------------------- */

static bool parse_count(const char *text, uint64_t *value) {
  char *end = NULL;
  *value = strtoull(text, &end, 10);
  return *text && !*end && *value > 0 && *value <= UINT32_MAX;
}

#define USAGE "usage: context_parallel_mpi [--interleave N] [--steps N] [--seed N]\n"

typedef enum { ARGUMENTS_RUN, ARGUMENTS_HELP, ARGUMENTS_BAD } arguments;

/* --help anywhere asks for the usage; otherwise pairs of an option and a
   count, the first argument that is neither left in *bad. */
static arguments parse_arguments(int argc, char **argv, uint32_t *steps,
                                 uint64_t *seed, uint32_t *interleave,
                                 const char **bad) {
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return ARGUMENTS_HELP;
  for (int i = 1; i < argc; i += 2) {
    uint64_t value = 0;
    bool known = strcmp(argv[i], "--steps") == 0 ||
                 strcmp(argv[i], "--seed") == 0 ||
                 strcmp(argv[i], "--interleave") == 0;
    if (!known || i + 1 == argc) {
      *bad = argv[i];
      return ARGUMENTS_BAD;
    }
    if (!parse_count(argv[i + 1], &value)) {
      *bad = argv[i + 1];
      return ARGUMENTS_BAD;
    }
    if (strcmp(argv[i], "--steps") == 0) *steps = (uint32_t)value;
    else if (strcmp(argv[i], "--seed") == 0) *seed = value;
    else *interleave = (uint32_t)value;
  }
  return ARGUMENTS_RUN;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  rank_info me = {.interleave = 1};
  uint32_t steps = 40;
  uint64_t seed = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &me.world);
  /* The ranks that share this machine, to spread them over its GPUs. */
  MPI_Comm machine;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me.rank,
                      MPI_INFO_NULL, &machine);
  MPI_Comm_rank(machine, &me.local_rank);
  MPI_Comm_free(&machine);
  const char *bad = NULL;
  arguments parsed =
      parse_arguments(argc, argv, &steps, &seed, &me.interleave, &bad);
  if (parsed != ARGUMENTS_RUN) {
    if (me.rank == 0 && parsed == ARGUMENTS_HELP)
      fputs(USAGE "  --interleave N  cp_kv_cache_interleave_size (default 1)\n"
                  "  --steps N       steps to serve (default 40)\n"
                  "  --seed N        the simulated scheduler's seed "
                  "(default 1)\n"
                  "Run it under mpirun, a rank per CP rank.\n"
                  "CLBT_DEVICE selects the device (unset: the machine's "
                  "GPUs, spread over the ranks).\n",
            stdout);
    else if (me.rank == 0)
      fprintf(stderr, "context_parallel_mpi: bad argument '%s'\n" USAGE, bad);
    MPI_Finalize();
    return parsed == ARGUMENTS_HELP ? 0 : 2;
  }

  engine e = {0};
  engine_start(&e, &me);
  static scheduler s;
  scheduler_group groups[NUM_GROUPS];
  for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
    uint32_t size = block_tokens(g, me.world);
    groups[g] = (scheduler_group){
        .block_tokens = size,
        .pool_blocks = model_groups[g].slot_mode == CLBT_SLOT_MODE_NONE
                           ? MAX_REQS
                           : POOL_TOKENS / size};
  }
  if (!scheduler_init(&s, seed, SCHEDULER_BATCH_ROWS, NUM_GROUPS, groups,
                      e.table))
    check(CLBT_INVALID_CONFIG, "scheduler_init");

  verdict v[NUM_CHECKS] = {{0}};
  uint64_t owned[NUM_GROUPS] = {0}, tokens = 0;
  double *step_s = malloc(sizeof *step_s * steps);
  if (!step_s) check(CLBT_CL_OUT_OF_HOST_MEMORY, "malloc");
  static batch b;
  for (uint32_t step = 1; step <= steps; ++step) {
    step_summary summary;
    check(scheduler_step(&s, &b, &summary), "the scheduler's step");
    step_s[step - 1] = run_step(&e, s.num_running, &b);
    for (uint32_t g = 0; g < NUM_GROUPS; ++g) {
      check_rows(&e, s.num_running, step, g, v);
      if (model_groups[g].slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT)
        check_slots(&e, &me, &s, step, g, v, &owned[g]);
    }
    scheduler_advance(&s);
    tokens += b.num_tokens;
  }

  if (me.rank == 0)
    printf("context_parallel_mpi: %d ranks, interleave %u, %u steps, "
           "%" PRIu64 " tokens\n",
           me.world, me.interleave, steps, tokens);
  report_ranks(&e, &me, median(step_s, steps));
  report_balance(&me, owned);
  bool passed = report_checks(&me, v);
  free(step_s);
  engine_stop(&e);
  MPI_Finalize();
  return passed ? EXIT_SUCCESS : EXIT_FAILURE;
}
