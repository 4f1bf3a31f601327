/*
 * The Triton comparison of `clbt bench --compare DIR`: slot ids bit for bit
 * against those of vLLM's Triton slot-mapping kernel, run on the same
 * inputs by a script that writes, per shape, DIR/<shape>/:
 *   meta.json            a flat JSON object: the sizes below, the config
 *   query_start_loc.i32  int32 [num_reqs + 1], little-endian
 *   positions.i64        int64 [num_tokens]
 *   block_table.i32      int32 [max_num_reqs][width] of kernel block ids
 *   slot_mapping.i64     int64 [max_num_batched_tokens], the kernel's output
 * (tools/gpu/bench.sh runs it; see docs/benchmarks.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"
#include "flat_json.h"

/* What meta.json says about one shape. */
typedef struct triton_meta {
  uint32_t num_reqs, num_tokens, max_num_batched_tokens, max_num_reqs, width;
  uint32_t kv_block_size, kernel_block_size;
  uint32_t cp_world_size, cp_rank, cp_interleave_size;
} triton_meta;

typedef struct triton_case {
  const char *dir, *name;
  triton_meta meta;
  int32_t *query_start_loc, *rows;
  int64_t *positions, *slots;
} triton_case;

static void fail(const triton_case *c, const char *file, const char *problem) {
  fprintf(stderr, "clbt bench: %s/%s/%s: %s\n", c->dir, c->name, file, problem);
  exit(1);
}

/* The whole file, NUL-terminated; it must hold expected bytes unless
   expected is 0. */
static void *read_file(const triton_case *c, const char *file,
                       size_t expected) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", c->dir, c->name, file);
  FILE *in = fopen(path, "rb");
  if (!in) fail(c, file, "cannot be opened");
  long size = fseek(in, 0, SEEK_END) == 0 ? ftell(in) : -1;
  char *data = size >= 0 ? malloc((size_t)size + 1) : NULL;
  rewind(in);
  if (!data || fread(data, 1, (size_t)size, in) != (size_t)size)
    fail(c, file, "cannot be read");
  fclose(in);
  data[size] = '\0';
  if (expected && (size_t)size != expected) {
    char problem[128];
    snprintf(problem, sizeof problem, "holds %ld bytes; meta.json implies %zu",
             size, expected);
    fail(c, file, problem);
  }
  return data;
}

static void read_meta(triton_case *c) {
  char *text = read_file(c, "meta.json", 0);
  const struct {
    const char *key;
    uint32_t *into;
  } fields[] = {{"num_reqs", &c->meta.num_reqs},
                {"num_tokens", &c->meta.num_tokens},
                {"max_num_batched_tokens", &c->meta.max_num_batched_tokens},
                {"max_num_reqs", &c->meta.max_num_reqs},
                {"width", &c->meta.width},
                {"kv_block_size", &c->meta.kv_block_size},
                {"kernel_block_size", &c->meta.kernel_block_size},
                {"cp_world_size", &c->meta.cp_world_size},
                {"cp_rank", &c->meta.cp_rank},
                {"cp_interleave_size", &c->meta.cp_interleave_size}};
  char error[256];
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i)
    if (!flat_json_uint32(text, fields[i].key, fields[i].into, error,
                          sizeof error))
      fail(c, "meta.json", error);
  free(text);
  const triton_meta *m = &c->meta;
  if (m->kernel_block_size == 0 || m->kv_block_size % m->kernel_block_size ||
      m->width % (m->kv_block_size / m->kernel_block_size))
    fail(c, "meta.json", "the block sizes do not divide each other and width");
}

static void read_case(triton_case *c) {
  read_meta(c);
  const triton_meta *m = &c->meta;
  c->query_start_loc = read_file(c, "query_start_loc.i32",
                                 ((size_t)m->num_reqs + 1) * sizeof(int32_t));
  c->positions =
      read_file(c, "positions.i64", (size_t)m->num_tokens * sizeof(int64_t));
  c->rows = read_file(c, "block_table.i32",
                      (size_t)m->max_num_reqs * m->width * sizeof(int32_t));
  c->slots = read_file(c, "slot_mapping.i64",
                       (size_t)m->max_num_batched_tokens * sizeof(int64_t));
}

static void free_case(triton_case *c) {
  free(c->query_start_loc);
  free(c->positions);
  free(c->rows);
  free(c->slots);
}

/* A table holding the script's rows, which hold kernel blocks: KV block
   b's k kernel blocks are b*k .. b*k+k-1, so every k-th one divided by k
   is b. */
static clbt_table *case_table(bench *b, const triton_case *c) {
  const triton_meta *m = &c->meta;
  uint32_t per_block = m->kv_block_size / m->kernel_block_size;
  clbt_table_config config = {
      .block_size = m->kv_block_size,
      .kernel_block_size = m->kernel_block_size,
      .max_num_reqs = m->max_num_reqs,
      .max_num_blocks_per_req = m->width / per_block,
      .max_num_batched_tokens = m->max_num_batched_tokens,
      .cp_world_size = m->cp_world_size,
      .cp_rank = m->cp_rank,
      .cp_interleave_size = m->cp_interleave_size};
  clbt_table *table = NULL;
  bench_check(clbt_table_create(b->device, &config, &table),
              "clbt_table_create");
  int32_t *ids = malloc(config.max_num_blocks_per_req * sizeof *ids);
  if (!ids) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < config.max_num_reqs; ++r) {
    for (uint32_t i = 0; i < config.max_num_blocks_per_req; ++i)
      ids[i] = c->rows[(size_t)r * m->width + (size_t)i * per_block] /
               (int32_t)per_block;
    bench_check(
        clbt_table_add_row(table, r, ids, config.max_num_blocks_per_req),
        "clbt_table_add_row");
  }
  free(ids);
  bench_check(clbt_table_commit(table, config.max_num_reqs),
              "clbt_table_commit");
  return table;
}

/* Adds the shape's record; returns the number of slots that differ. */
static size_t compare_shape(bench *b, report *section, const char *name) {
  triton_case c = {.dir = b->options.compare_dir, .name = name};
  read_case(&c);
  const triton_meta *m = &c.meta;
  clbt_table *table = case_table(b, &c);
  cl_mem starts = bench_upload(b, c.query_start_loc,
                               ((size_t)m->num_reqs + 1) * sizeof(int32_t));
  cl_mem positions =
      bench_upload(b, c.positions, (size_t)m->num_tokens * sizeof(int64_t));
  bench_check(clbt_table_compute_slot_mapping(table, m->num_reqs, starts,
                                              positions, m->num_tokens),
              "clbt_table_compute_slot_mapping");
  size_t slots = m->max_num_batched_tokens;
  int64_t *ours = malloc(slots * sizeof *ours);
  if (!ours) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  bench_check_cl(
      clEnqueueReadBuffer(b->queue, clbt_table_slot_mapping(table), CL_TRUE, 0,
                          slots * sizeof *ours, ours, 0, NULL, NULL),
      "clEnqueueReadBuffer");
  size_t mismatches = 0, mapped = 0;
  for (size_t t = 0; t < slots; ++t) {
    mismatches += ours[t] != c.slots[t];
    mapped += ours[t] != CLBT_PAD_SLOT_ID;
  }
  report *record = bench_record(section, name);
  report_uint(record, "slots", slots);
  report_uint(record, "mapped", mapped);
  report_uint(record, "mismatches", mismatches);
  free(ours);
  clReleaseMemObject(starts);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
  free_case(&c);
  return mismatches;
}

/* With --compare: every shape --only names against the Triton kernel's
   slot ids, each slot unlike its own a failure. */
static void bench_triton(bench *b) {
  if (!b->options.compare_dir) return;
  char caption[4200];
  snprintf(caption, sizeof caption, "slot ids against the Triton kernel's (%s)",
           b->options.compare_dir);
  report *section = bench_section(b, "triton_comparison", caption);
  for (size_t i = 0; i < bench_num_shapes; ++i)
    if (bench_shape_selected(b, &bench_shapes[i]))
      b->failures += compare_shape(b, section, bench_shapes[i].name);
}

const bench_section_entry bench_triton_section = {NULL, bench_triton};
