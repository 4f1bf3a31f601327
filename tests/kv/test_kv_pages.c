/*
 * The device page table as a user builds against it: a small kernel of
 * its own that includes the INSTALLED clbt/clbt_kv_pages.h (CTest
 * installs the build to a prefix and names its include directory in
 * CLBT_PAGES_INCLUDE), compiled with -I that directory, takes the pages
 * clbt_kv_pages_describe gives and a table's committed rows, and computes
 * each token's slot, its local token and position, and where its K and V
 * are. The slots must be the step's slot mapping of the same batch (the
 * host's contract, cl/contract.h's group constants, in the step's kernel):
 * one rule on both sides, on tables with kernel blocks below the
 * allocation block and on context-parallel ranks; a position's local token
 * and back, and the count below each position, must agree; the struct's
 * layout must be the host's.
 */
#include "clbt_test.h"

#include <stddef.h>
#include <stdlib.h>

#define TOKENS 96
#define ROWS 4

static const char *kernel_source =
    "#include <clbt/clbt_kv_pages.h>\n"
    "__kernel void walk(clbt_kv_pages pages, __global const int *rows,\n"
    "                   __global const int *lengths, __global const int *qsl,\n"
    "                   __global const long *positions, uint num_reqs,\n"
    "                   __global long *slots, __global ulong *facts) {\n"
    "  uint t = get_global_id(0);\n"
    "  uint r = 0;\n"
    "  while (r + 1 < num_reqs && qsl[r + 1] <= (int)t) ++r;\n"
    "  int row = clbt_kv_pages_row(pages, 0, r);\n"
    "  uint blocks = clbt_kv_pages_row_blocks(pages, lengths, row);\n"
    "  long p = positions[t];\n"
    "  slots[t] = clbt_kv_pages_slot(pages, rows, row, blocks, p);\n"
    "  long j = clbt_kv_pages_local_token(pages, p);\n"
    "  ulong fact = 0;\n"
    "  if (j >= 0) {\n"
    "    int block = clbt_kv_pages_block(pages, rows, row, blocks, (ulong)j);\n"
    "    uint offset = (uint)j % pages.block_size;\n"
    "    fact = block < 0 ? 1 : clbt_kv_pages_value(pages, block, offset, 1)\n"
    "                           - clbt_kv_pages_key(pages, block, offset, 1);\n"
    "    if (clbt_kv_pages_position(pages, (uint)j) != (uint)p) fact = 2;\n"
    "    if (clbt_kv_pages_local_tokens(pages, (uint)p + 1) != (uint)j + 1)\n"
    "      fact = 3;\n"
    "  }\n"
    "  facts[t] = fact;\n"
    "  if (t == 0) {\n"
    "    clbt_kv_pages s;\n"
    "    facts[TOKENS] = sizeof s;\n"
    "    facts[TOKENS + 1] = (ulong)((uchar *)&s.row_stride - (uchar *)&s);\n"
    "    facts[TOKENS + 2] = (ulong)((uchar *)&s.cp_interleave_size -\n"
    "                                (uchar *)&s);\n"
    "  }\n"
    "}\n";

static cl_kernel build_walk(cl_program *program) {
  const char *include = getenv("CLBT_PAGES_INCLUDE");
  ck_assert_msg(include != NULL, "CLBT_PAGES_INCLUDE names no installed "
                "include directory");
  cl_int error = CL_SUCCESS;
  cl_device_id id = clbt_device_id(clbt_test_device());
  *program = clCreateProgramWithSource(clbt_device_context(clbt_test_device()),
                                       1, &kernel_source, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  char options[1024];
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DTOKENS=%d -I%s", TOKENS,
           include);
  error = clBuildProgram(*program, 1, &id, options, NULL, NULL);
  if (error != CL_SUCCESS) {
    char log[8192] = "";
    clGetProgramBuildInfo(*program, id, CL_PROGRAM_BUILD_LOG, sizeof log - 1,
                          log, NULL);
    ck_abort_msg("the kernel did not build against %s: %s", include, log);
  }
  cl_kernel kernel = clCreateKernel(*program, "walk", &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return kernel;
}

/* A table of random rows and a batch of random positions (some another
   rank's, some past a row's blocks, one negative). */
typedef struct scenario {
  uint32_t block_size, kernel_block_size, world, rank, interleave;
} scenario;

static void check_scenario(cl_kernel walk, const scenario *s) {
  clbt_table_config c = CLBT_TABLE_CONFIG_INIT;
  c.block_size = s->block_size;
  c.kernel_block_size = s->kernel_block_size;
  c.max_num_reqs = ROWS;
  c.max_num_blocks_per_req = 6;
  c.max_num_batched_tokens = TOKENS;
  c.cp_world_size = s->world;
  c.cp_rank = s->rank;
  c.cp_interleave_size = s->interleave;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &c, &table));
  for (uint32_t r = 0; r < ROWS; ++r) {
    int32_t ids[6];
    uint32_t n = 1 + clbt_test_below(6);
    for (uint32_t i = 0; i < n; ++i) ids[i] = (int32_t)clbt_test_below(500);
    clbt_assert_ok(clbt_table_add_row(table, r, ids, n));
  }
  int32_t qsl[ROWS + 1] = {0, 10, 40, 41, TOKENS};
  int64_t positions[TOKENS];
  uint32_t span = s->block_size * 7 * (s->world ? s->world : 1);
  for (uint32_t t = 0; t < TOKENS; ++t)
    positions[t] = (int64_t)clbt_test_below(span);
  positions[5] = -4;
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_step step = CLBT_STEP_INIT;
  step.num_reqs = ROWS;
  step.num_tokens = TOKENS;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  int64_t expected[TOKENS], slots[TOKENS];
  clbt_test_read(clbt_table_slot_mapping(table), sizeof expected, expected);

  /* The pages of a cache of kernel blocks, described for the table. */
  uint32_t blocks = 500 * (s->block_size / s->kernel_block_size) + 1;
  cl_mem cache_buffer = clbt_test_buffer((size_t)blocks * 2 * s->kernel_block_size *
                                         2 * 8 * 2, NULL);
  clbt_kv_cache_config kv = CLBT_KV_CACHE_CONFIG_INIT;
  kv.cache_dtype = CLBT_KV_FLOAT16;
  kv.num_kv_heads = 2;
  kv.head_size = 8;
  kv.block_size = s->kernel_block_size;
  kv.num_blocks = blocks;
  kv.key_cache = cache_buffer;
  clbt_kv_cache *cache = NULL;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &kv, &cache));
  clbt_kv_pages pages;
  clbt_assert_ok(clbt_kv_pages_describe(cache, table, &pages));
  cl_mem slots_buffer = clbt_test_buffer(sizeof slots, NULL);
  cl_mem facts_buffer = clbt_test_buffer(sizeof(uint64_t) * (TOKENS + 3),
                                         NULL);
  cl_mem rows = clbt_table_device_data(table);
  cl_mem lengths = clbt_table_device_row_lengths(table);
  cl_uint num_reqs = ROWS;
  const void *values[] = {&pages, &rows, &lengths, &qsl_buffer,
                          &positions_buffer, &num_reqs, &slots_buffer,
                          &facts_buffer};
  const size_t sizes[] = {sizeof pages, sizeof(cl_mem), sizeof(cl_mem),
                          sizeof(cl_mem), sizeof(cl_mem), sizeof num_reqs,
                          sizeof(cl_mem), sizeof(cl_mem)};
  for (cl_uint i = 0; i < 8; ++i)
    ck_assert_int_eq(clSetKernelArg(walk, i, sizes[i], values[i]), CL_SUCCESS);
  size_t global = TOKENS;
  ck_assert_int_eq(clEnqueueNDRangeKernel(clbt_device_queue(clbt_test_device()),
                                          walk, 1, NULL, &global, NULL, 0,
                                          NULL, NULL),
                   CL_SUCCESS);
  uint64_t facts[TOKENS + 3];
  clbt_test_read(slots_buffer, sizeof slots, slots);
  clbt_test_read(facts_buffer, sizeof facts, facts);
  uint32_t mapped = 0;
  for (uint32_t t = 0; t < TOKENS; ++t) {
    ck_assert_msg(slots[t] == expected[t], "block %u/%u, rank %u of %u, "
                  "interleave %u: token %u at %lld: the header's slot %lld, "
                  "the step's %lld", s->block_size, s->kernel_block_size,
                  s->rank, s->world, s->interleave, t,
                  (long long)positions[t], (long long)slots[t],
                  (long long)expected[t]);
    ck_assert_msg(facts[t] == 0 || facts[t] == 1 ||
                      facts[t] == 2 * 8 * s->kernel_block_size,
                  "token %u: local token, position or count disagree (%llu)",
                  t, (unsigned long long)facts[t]);
    mapped += expected[t] >= 0;
  }
  ck_assert_uint_eq(facts[TOKENS], sizeof(clbt_kv_pages));
  ck_assert_uint_eq(facts[TOKENS + 1], offsetof(clbt_kv_pages, row_stride));
  ck_assert_uint_eq(facts[TOKENS + 2],
                    offsetof(clbt_kv_pages, cp_interleave_size));
  printf("kv_pages: block %u/%u, rank %u of %u, interleave %u: %u slots of "
         "%d as the step's\n", s->block_size, s->kernel_block_size, s->rank,
         s->world, s->interleave, mapped, TOKENS);
  clbt_kv_cache_destroy(cache);
  clbt_table_destroy(table);
  cl_mem buffers[] = {qsl_buffer, positions_buffer, cache_buffer,
                      slots_buffer, facts_buffer};
  for (int i = 0; i < 5; ++i) clReleaseMemObject(buffers[i]);
}

START_TEST(an_outside_kernel_walks_the_rows_as_the_step_maps_them) {
  clbt_test_seed("kv_pages");
  cl_program program = NULL;
  cl_kernel walk = build_walk(&program);
  const scenario scenarios[] = {{16, 16, 1, 0, 1},  {32, 16, 1, 0, 1},
                                {64, 16, 2, 1, 1},  {16, 16, 4, 2, 8},
                                {32, 8, 2, 0, 4},   {128, 32, 3, 2, 16}};
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i)
    check_scenario(walk, &scenarios[i]);
  clReleaseKernel(walk);
  clReleaseProgram(program);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("kv_pages");
  TCase *tc = tcase_create("kv_pages");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, an_outside_kernel_walks_the_rows_as_the_step_maps_them);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
