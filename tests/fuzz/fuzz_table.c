/*
 * libFuzzer target: decodes its input into a table config (from a small
 * menu, so that the device's program cache stays warm: each distinct
 * kernel specialisation is a compile) and a sequence of row operations,
 * commits and slot-mapping calls with hostile values mixed in. Every
 * status, the host rows, the committed rows, every slot and the count of
 * rejected tokens are checked against a model kept here: the rows as
 * block_table.py keeps them and the slot rule of docs/semantics.md; the
 * slots against the library's host reference as well. A mismatch aborts,
 * which libFuzzer reports as a crash with the input that caused it.
 */
#include "clbt/clbt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_REQS = 8, MAX_BLOCKS = 8, MAX_TOKENS = 64, MAX_IDS = 4 };
enum { MAX_WIDTH = MAX_BLOCKS * 4 }; /* the menu splits blocks in at most 4 */

/* The menu: three kernel specialisations and a table that maps nothing. */
static const clbt_table_config menu[] = {
    {.block_size = 16},
    {.block_size = 16, .kernel_block_size = 4},
    {.block_size = 8, .cp_world_size = 2, .cp_rank = 1,
     .cp_interleave_size = 2},
    {.block_size = 4, .slot_mode = CLBT_SLOT_MODE_NONE},
};

/* ---- decoding: every byte string is a valid program --------------------- */

typedef struct reader {
  const uint8_t *data;
  size_t size;
} reader;

static uint8_t next_byte(reader *r) {
  if (r->size == 0) return 0;
  --r->size;
  return *r->data++;
}

static uint32_t below(reader *r, uint32_t n) { return next_byte(r) % n; }

/* Mostly small values; a byte from 240 up picks an edge. */
static int64_t next_value(reader *r, const int64_t *edges, size_t edge_count) {
  uint8_t byte = next_byte(r);
  return byte < 240 ? byte : edges[(byte - 240) % edge_count];
}

/* ---- the model ---------------------------------------------------------- */

typedef struct model {
  clbt_table_config config; /* defaults filled in */
  uint32_t per_block, width;
  int32_t rows[MAX_REQS][MAX_WIDTH];
  uint32_t lengths[MAX_REQS];
} model;

typedef struct fuzz_case {
  clbt_table *table;
  cl_mem query_start_loc, positions;
  model m;
} fuzz_case;

static void fail(const char *what, long long got, long long expected) {
  fprintf(stderr, "fuzz_table: %s: got %lld, expected %lld (%s)\n", what, got,
          expected, clbt_last_error());
  abort();
}

static void expect_status(const char *operation, clbt_status got,
                          clbt_status expected) {
  if (got != expected) fail(operation, got, expected);
}

static clbt_device *shared_device(void) {
  static clbt_device *device;
  if (!device && clbt_device_open(NULL, &device) != CLBT_SUCCESS) {
    fprintf(stderr, "fuzz_table: no device: %s\n", clbt_last_error());
    abort();
  }
  return device;
}

/* The status the rules give an append or add, in their order. */
static clbt_status append_status(const model *m, uint32_t row,
                                 const int32_t *ids, size_t n, bool replace) {
  if (row >= m->config.max_num_reqs) return CLBT_ROW_OUT_OF_RANGE;
  uint32_t start = replace ? 0 : m->lengths[row];
  if (n * m->per_block > m->width - start) return CLBT_ROW_OVERFLOW;
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 ||
        (int64_t)ids[i] * m->per_block + m->per_block - 1 > INT32_MAX)
      return CLBT_INVALID_BLOCK_ID;
  return CLBT_SUCCESS;
}

static void model_append(model *m, uint32_t row, const int32_t *ids, size_t n,
                         bool replace) {
  if (replace) m->lengths[row] = 0;
  for (size_t i = 0; i < n; ++i)
    for (uint32_t k = 0; k < m->per_block; ++k)
      m->rows[row][m->lengths[row]++] = ids[i] * (int32_t)m->per_block +
                                        (int32_t)k;
}

static void model_clear_row(model *m, uint32_t row) {
  memset(m->rows[row], 0, m->lengths[row] * sizeof(int32_t));
  m->lengths[row] = 0;
}

static void model_move_row(model *m, uint32_t src, uint32_t dst) {
  if (src == dst) return;
  memcpy(m->rows[dst], m->rows[src], m->lengths[src] * sizeof(int32_t));
  m->lengths[dst] = m->lengths[src];
  model_clear_row(m, src);
}

static void model_swap_row(model *m, uint32_t a, uint32_t b) {
  int32_t row[MAX_WIDTH];
  uint32_t length = m->lengths[a];
  memcpy(row, m->rows[a], sizeof row);
  memcpy(m->rows[a], m->rows[b], sizeof row);
  memcpy(m->rows[b], row, sizeof row);
  m->lengths[a] = m->lengths[b];
  m->lengths[b] = length;
}

/* ---- slots by the rule -------------------------------------------------- */

/* A token's slot, and whether the kernel must count it as rejected. */
typedef struct mapped {
  int64_t slot;
  bool rejected;
} mapped;

static mapped map_position(const model *m, uint32_t row, int64_t position) {
  const clbt_table_config *c = &m->config;
  uint64_t world = c->cp_world_size, interleave = c->cp_interleave_size;
  uint64_t kernel_block = c->kernel_block_size;
  if (position < 0) return (mapped){CLBT_PAD_SLOT_ID, true};
  uint64_t virtual_block = (uint64_t)c->block_size * world;
  uint64_t index = (uint64_t)position / virtual_block;
  uint64_t offset = (uint64_t)position % virtual_block;
  if ((offset / interleave) % world != c->cp_rank)
    return (mapped){CLBT_PAD_SLOT_ID, false};
  uint64_t local = offset / (world * interleave) * interleave +
                   offset % interleave;
  if (index >= m->lengths[row]) return (mapped){CLBT_PAD_SLOT_ID, true};
  uint64_t block = index * m->per_block + local / kernel_block;
  if (block >= m->lengths[row]) return (mapped){CLBT_PAD_SLOT_ID, true};
  return (mapped){(int64_t)m->rows[row][block] * (int64_t)kernel_block +
                      (int64_t)(local % kernel_block),
                  false};
}

static bool well_formed(const int32_t *qsl, uint32_t num_reqs,
                        uint32_t num_tokens) {
  if (qsl[0] < 0 || qsl[num_reqs] > (int64_t)num_tokens) return false;
  for (uint32_t r = 0; r < num_reqs; ++r)
    if (qsl[r + 1] < qsl[r]) return false;
  return true;
}

/* Expected slots of the whole output and the count of rejected tokens. */
static uint32_t expected_slots(const model *m, uint32_t num_reqs,
                               const int32_t *qsl, const int64_t *positions,
                               uint32_t num_tokens, int64_t *slots) {
  for (uint32_t t = 0; t < m->config.max_num_batched_tokens; ++t)
    slots[t] = CLBT_PAD_SLOT_ID;
  if (!well_formed(qsl, num_reqs, num_tokens)) return num_tokens;
  uint32_t rejected = 0;
  for (uint32_t r = 0; r < num_reqs; ++r)
    for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t) {
      mapped token = map_position(m, r, positions[t]);
      slots[t] = token.slot;
      rejected += token.rejected;
    }
  return rejected;
}

/* ---- operations ---------------------------------------------------------- */

static void row_update(fuzz_case *f, reader *r, bool replace) {
  /* 536870911 is the largest id whose 4 kernel blocks fit in int32. */
  static const int64_t edges[] = {-1, INT32_MIN, INT32_MAX, 536870911,
                                  536870912};
  uint32_t row = below(r, f->m.config.max_num_reqs + 2);
  size_t n = below(r, MAX_IDS + 1);
  int32_t ids[MAX_IDS];
  for (size_t i = 0; i < n; ++i)
    ids[i] = (int32_t)next_value(r, edges, sizeof edges / sizeof edges[0]);
  clbt_status expected = append_status(&f->m, row, ids, n, replace);
  clbt_status got = replace ? clbt_table_add_row(f->table, row, ids, n)
                            : clbt_table_append_row(f->table, row, ids, n);
  expect_status(replace ? "add_row" : "append_row", got, expected);
  if (expected == CLBT_SUCCESS) model_append(&f->m, row, ids, n, replace);
}

static void row_pair(fuzz_case *f, reader *r, uint8_t operation) {
  uint32_t a = below(r, f->m.config.max_num_reqs + 2);
  uint32_t b = below(r, f->m.config.max_num_reqs + 2);
  bool in_range = a < f->m.config.max_num_reqs &&
                  (operation == 2 || b < f->m.config.max_num_reqs);
  clbt_status got = operation == 2   ? clbt_table_clear_row(f->table, a)
                    : operation == 3 ? clbt_table_move_row(f->table, a, b)
                                     : clbt_table_swap_row(f->table, a, b);
  expect_status("clear, move or swap", got,
                in_range ? CLBT_SUCCESS : CLBT_ROW_OUT_OF_RANGE);
  if (!in_range) return;
  if (operation == 2) model_clear_row(&f->m, a);
  if (operation == 3) model_move_row(&f->m, a, b);
  if (operation == 4) model_swap_row(&f->m, a, b);
}

/* Commits and reads the committed rows back. */
static void commit(fuzz_case *f, uint32_t num_reqs) {
  uint32_t max_reqs = f->m.config.max_num_reqs;
  expect_status("commit", clbt_table_commit(f->table, num_reqs),
                num_reqs > max_reqs ? CLBT_TOO_MANY_REQUESTS : CLBT_SUCCESS);
  if (num_reqs == 0 || num_reqs > max_reqs) return;
  int32_t rows[MAX_REQS * MAX_WIDTH];
  cl_int error = clEnqueueReadBuffer(
      clbt_device_queue(shared_device()), clbt_table_device_data(f->table),
      CL_TRUE, 0, (size_t)num_reqs * f->m.width * sizeof(int32_t), rows, 0,
      NULL, NULL);
  if (error != CL_SUCCESS) fail("reading committed rows", error, 0);
  for (uint32_t q = 0; q < num_reqs; ++q)
    for (uint32_t i = 0; i < f->m.width; ++i)
      if (rows[q * f->m.width + i] != f->m.rows[q][i])
        fail("committed row entry", rows[q * f->m.width + i],
             f->m.rows[q][i]);
}

/* A batch, well formed or not, decoded from the input. */
static uint32_t decode_batch(fuzz_case *f, reader *r, int32_t *qsl,
                             int64_t *positions, uint32_t *num_tokens) {
  static const int64_t position_edges[] = {-1, INT64_MIN, INT64_MAX,
                                           (int64_t)1 << 40, 4096, 255};
  static const int64_t qsl_edges[] = {-1, INT32_MIN, INT32_MAX, 65};
  uint32_t num_reqs = below(r, f->m.config.max_num_reqs + 1);
  uint32_t max_tokens = f->m.config.max_num_batched_tokens;
  qsl[0] = (int32_t)below(r, 3);
  for (uint32_t q = 0; q < num_reqs; ++q)
    qsl[q + 1] = qsl[q] + (int32_t)below(r, 5);
  if (below(r, 8) == 0)
    qsl[below(r, num_reqs + 1)] = (int32_t)next_value(r, qsl_edges, 4);
  *num_tokens = below(r, max_tokens + 1);
  for (uint32_t t = 0; t < *num_tokens; ++t)
    positions[t] = next_value(r, position_edges, 6);
  return num_reqs;
}

/* Commits the batch's rows, so that host and committed rows agree, maps it
   on the device and checks it against the model and the host reference. */
static void slot_mapping(fuzz_case *f, reader *r) {
  int32_t qsl[MAX_REQS + 1] = {0};
  int64_t positions[MAX_TOKENS] = {0}, expected[MAX_TOKENS],
          reference[MAX_TOKENS], got[MAX_TOKENS];
  uint32_t num_tokens = 0;
  uint32_t num_reqs = decode_batch(f, r, qsl, positions, &num_tokens);
  commit(f, num_reqs);
  cl_command_queue queue = clbt_device_queue(shared_device());
  const int64_t poison = 0x5A5A5A5A5A5A5A5A;
  size_t out_bytes = f->m.config.max_num_batched_tokens * sizeof(int64_t);
  cl_int error = clEnqueueWriteBuffer(queue, f->query_start_loc, CL_TRUE, 0,
                                      sizeof qsl, qsl, 0, NULL, NULL);
  if (!error)
    error = clEnqueueWriteBuffer(queue, f->positions, CL_TRUE, 0,
                                 sizeof positions, positions, 0, NULL, NULL);
  if (!error)
    error = clEnqueueFillBuffer(queue, clbt_table_slot_mapping(f->table),
                                &poison, sizeof poison, 0, out_bytes, 0, NULL,
                                NULL);
  if (error) fail("uploading a batch", error, 0);
  expect_status("compute_slot_mapping",
                clbt_table_compute_slot_mapping(f->table, num_reqs,
                                                f->query_start_loc,
                                                f->positions, num_tokens),
                CLBT_SUCCESS);
  uint32_t count = 0;
  error = clEnqueueReadBuffer(queue, clbt_table_slot_mapping(f->table),
                              CL_TRUE, 0, out_bytes, got, 0, NULL, NULL);
  if (error) fail("reading slots", error, 0);
  expect_status("read_rejected_tokens",
                clbt_table_read_rejected_tokens(f->table, &count),
                CLBT_SUCCESS);
  expect_status("reset_rejected_tokens",
                clbt_table_reset_rejected_tokens(f->table), CLBT_SUCCESS);
  expect_status("compute_slot_mapping_host",
                clbt_table_compute_slot_mapping_host(f->table, num_reqs, qsl,
                                                     positions, num_tokens,
                                                     reference),
                CLBT_SUCCESS);
  uint32_t rejected =
      expected_slots(&f->m, num_reqs, qsl, positions, num_tokens, expected);
  if (f->m.config.slot_mode == CLBT_SLOT_MODE_NONE) { /* maps nothing */
    for (uint32_t t = 0; t < f->m.config.max_num_batched_tokens; ++t)
      expected[t] = reference[t] = poison;
    rejected = 0;
  }
  for (uint32_t t = 0; t < f->m.config.max_num_batched_tokens; ++t) {
    if (got[t] != expected[t]) fail("device slot", got[t], expected[t]);
    if (reference[t] != expected[t])
      fail("host reference slot", reference[t], expected[t]);
  }
  if (count != rejected) fail("rejected tokens", count, rejected);
}

static void clear(fuzz_case *f) {
  expect_status("clear", clbt_table_clear(f->table), CLBT_SUCCESS);
  memset(f->m.rows, 0, sizeof f->m.rows);
  memset(f->m.lengths, 0, sizeof f->m.lengths);
}

/* ---- one input ----------------------------------------------------------- */

static bool fuzz_case_create(fuzz_case *f, reader *r) {
  memset(f, 0, sizeof *f);
  clbt_table_config config = menu[below(r, sizeof menu / sizeof menu[0])];
  config.max_num_reqs = 1 + below(r, MAX_REQS);
  config.max_num_blocks_per_req = 1 + below(r, MAX_BLOCKS);
  config.max_num_batched_tokens = 1 + below(r, MAX_TOKENS);
  if (clbt_table_create(shared_device(), &config, &f->table) != CLBT_SUCCESS)
    fail("clbt_table_create", 0, 0);
  if (!config.kernel_block_size) config.kernel_block_size = config.block_size;
  if (!config.cp_world_size) config.cp_world_size = 1;
  if (!config.cp_interleave_size) config.cp_interleave_size = 1;
  f->m.config = config;
  f->m.per_block = config.block_size / config.kernel_block_size;
  f->m.width = config.max_num_blocks_per_req * f->m.per_block;
  cl_int errors[2];
  cl_context context = clbt_device_context(shared_device());
  f->query_start_loc = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                      (MAX_REQS + 1) * sizeof(int32_t), NULL,
                                      &errors[0]);
  f->positions = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                MAX_TOKENS * sizeof(int64_t), NULL, &errors[1]);
  return errors[0] == CL_SUCCESS && errors[1] == CL_SUCCESS;
}

static void fuzz_case_destroy(fuzz_case *f) {
  clbt_table_destroy(f->table);
  if (f->query_start_loc) clReleaseMemObject(f->query_start_loc);
  if (f->positions) clReleaseMemObject(f->positions);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  fuzz_case f;
  if (!fuzz_case_create(&f, &r)) fail("creating the batch buffers", 0, 0);
  for (int operations = 0; r.size > 0 && operations < 64; ++operations) {
    uint8_t operation = below(&r, 8);
    if (operation <= 1) row_update(&f, &r, operation == 1);
    else if (operation <= 4) row_pair(&f, &r, operation);
    else if (operation == 5) commit(&f, below(&r, f.m.config.max_num_reqs + 2));
    else if (operation == 6) slot_mapping(&f, &r);
    else clear(&f);
  }
  fuzz_case_destroy(&f);
  return 0;
}
