/*
 * Hostile batches on the device: query_start_loc that decreases, is
 * negative or points past num_tokens; positions negative or huge; rows
 * never committed and ids past a row's committed length. The rules are
 * docs/semantics.md's: a malformed query_start_loc maps no token and
 * counts all num_tokens; a negative position or a block index not below
 * the committed length gets -1 and is counted; a token outside every
 * request gets -1 and is not counted. Every expected slot and count below
 * is worked out by hand; where the host rows equal the committed ones the
 * host reference must agree as well.
 *
 * The inputs lie in host memory that the buffers use in place
 * (CL_MEM_USE_HOST_PTR, which PoCL honours without a copy; the test checks
 * that it does), flush against a page that cannot be read or written: once
 * ending at the fence, once starting at it. A kernel that touched one byte
 * outside its inputs would crash the test, and the inputs themselves must
 * come back unchanged.
 */
/* MAP_ANONYMOUS is a glibc and BSD extension to POSIX 2008's mmap. */
#define _DEFAULT_SOURCE

#include "clbt_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { MAX_REQS = 4, MAX_TOKENS = 8 };

/* Blocks of 4 tokens, rows of up to 3 blocks. */
static const clbt_table_config config = {.block_size = 4,
                                         .max_num_reqs = MAX_REQS,
                                         .max_num_blocks_per_req = 3,
                                         .max_num_batched_tokens = MAX_TOKENS};

/*
 * Committed: row 0 = {10, 11}; row 1 = {20}; row 2 = {40} of length 1 with
 * the stale ids 31, 32 behind it (add_row keeps the columns past the new
 * length, as vLLM does); row 3 never committed, though the host has {50}
 * in it. A token at position p of row r maps to row[p / 4] * 4 + p % 4.
 */
static clbt_table *create_table(void) {
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){10, 11}, 2));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){20}, 1));
  clbt_assert_ok(
      clbt_table_append_row(table, 2, (const int32_t[]){30, 31, 32}, 3));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_assert_ok(clbt_table_add_row(table, 2, (const int32_t[]){40}, 1));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_assert_ok(clbt_table_append_row(table, 3, (const int32_t[]){50}, 1));
  return table;
}

#define PAD CLBT_PAD_SLOT_ID

typedef struct hostile_batch {
  const char *name;
  uint32_t num_reqs, num_tokens;
  int32_t query_start_loc[MAX_REQS + 1];
  int64_t positions[MAX_TOKENS];
  int64_t expected[MAX_TOKENS]; /* tokens below num_tokens; the rest: PAD */
  uint32_t rejected;
} hostile_batch;

static const hostile_batch batches[] = {
    {"a well-formed batch, one token past its row", 3, 6,
     {0, 2, 4, 6}, {1, 5, 3, 4, 0, 2},
     {41, 45, 83, PAD, 160, 162}, 1},
    {"stale ids past the committed length", 3, 3,
     {0, 0, 0, 3}, {4, 6, 9},
     {PAD, PAD, PAD}, 3},
    {"rows never committed", 4, 3,
     {0, 1, 1, 1, 3}, {0, 0, 1},
     {40, PAD, PAD}, 2},
    {"query_start_loc decreasing", 3, 4,
     {0, 3, 2, 4}, {0, 1, 2, 3},
     {PAD, PAD, PAD, PAD}, 4},
    {"query_start_loc past num_tokens", 2, 4,
     {0, 2, 6}, {0, 1, 2, 3},
     {PAD, PAD, PAD, PAD}, 4},
    {"query_start_loc negative at the start", 2, 4,
     {-1, 2, 4}, {0, 1, 2, 3},
     {PAD, PAD, PAD, PAD}, 4},
    {"query_start_loc INT32_MIN inside", 2, 4,
     {0, INT32_MIN, 4}, {0, 1, 2, 3},
     {PAD, PAD, PAD, PAD}, 4},
    {"query_start_loc ending at INT32_MAX", 1, 8,
     {0, INT32_MAX}, {0, 1, 2, 3, 4, 5, 6, 7},
     {PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD}, 8},
    {"negative positions", 1, 3,
     {0, 3}, {-1, INT64_MIN, 2},
     {PAD, PAD, 42}, 2},
    {"huge positions", 1, 4,
     {0, 4}, {INT64_MAX, (int64_t)1 << 40, (int64_t)INT32_MAX * 4 + 3, 8},
     {PAD, PAD, PAD, PAD}, 4},
    {"tokens outside every request", 2, 7,
     {2, 3, 5}, {100, 100, 1, 0, 3, 100, 100},
     {PAD, PAD, 41, 80, 83, PAD, PAD}, 0},
    {"requests without tokens", 2, 0,
     {0, 0, 0}, {0},
     {PAD}, 0},
    {"tokens without requests", 0, 3,
     {0}, {0, 1, 2},
     {PAD, PAD, PAD}, 0},
};

/* ---- inputs fenced by inaccessible pages -------------------------------- */

typedef struct fenced {
  char *mapping; /* fence page, data page, fence page */
  size_t page;
  void *data;
  cl_mem buffer;
} fenced;

/* Copies bytes next to a fence page (after it, or ending at the next) and
   makes a buffer that uses them in place. */
static fenced fenced_create(const void *data, size_t bytes, bool at_end) {
  fenced f = {.page = (size_t)sysconf(_SC_PAGESIZE)};
  ck_assert_uint_le(bytes, f.page);
  f.mapping = mmap(NULL, 3 * f.page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(f.mapping, MAP_FAILED);
  ck_assert_int_eq(mprotect(f.mapping, f.page, PROT_NONE), 0);
  ck_assert_int_eq(mprotect(f.mapping + 2 * f.page, f.page, PROT_NONE), 0);
  f.data = at_end ? f.mapping + 2 * f.page - bytes : f.mapping + f.page;
  memcpy(f.data, data, bytes);
  cl_int error = CL_SUCCESS;
  f.buffer = clCreateBuffer(clbt_device_context(clbt_test_device()),
                            CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes,
                            f.data, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return f;
}

static void fenced_destroy(fenced *f) {
  clReleaseMemObject(f->buffer);
  ck_assert_int_eq(munmap(f->mapping, 3 * f->page), 0);
}

/* The fences prove something only if the device reads the host memory
   itself: a write through OpenCL must land in it. */
START_TEST(buffers_use_host_memory_in_place) {
  const int64_t before[2] = {1, 2}, written[2] = {3, 4};
  fenced f = fenced_create(before, sizeof before, true);
  clbt_test_write(f.buffer, sizeof written, written);
  ck_assert_mem_eq(f.data, written, sizeof written);
  fenced_destroy(&f);
}
END_TEST

/*
 * A batch's inputs, each against a fence, with idx_mapping (the identity)
 * and seq_lens (hostile too: a negative length, INT32_MAX) of num_reqs
 * entries. An input of no entries has no fence and no buffer (NULL).
 */
typedef struct fenced_batch {
  fenced qsl, positions, idx_mapping, seq_lens;
} fenced_batch;

static fenced_batch fenced_batch_create(const hostile_batch *b, bool at_end) {
  static const int32_t identity[MAX_REQS] = {0, 1, 2, 3};
  static const int32_t seq_lens[MAX_REQS] = {9, -3, INT32_MAX, 2};
  fenced_batch f = {0};
  f.qsl = fenced_create(b->query_start_loc, (b->num_reqs + 1) * sizeof(int32_t),
                        at_end);
  if (b->num_tokens)
    f.positions =
        fenced_create(b->positions, b->num_tokens * sizeof(int64_t), at_end);
  if (b->num_reqs) {
    size_t bytes = b->num_reqs * sizeof(int32_t);
    f.idx_mapping = fenced_create(identity, bytes, at_end);
    f.seq_lens = fenced_create(seq_lens, bytes, at_end);
  }
  return f;
}

/* Destroys the fences after checking that nothing wrote into the inputs. */
static void fenced_batch_destroy(fenced_batch *f, const hostile_batch *b) {
  ck_assert_msg(memcmp(f->qsl.data, b->query_start_loc,
                       (b->num_reqs + 1) * sizeof(int32_t)) == 0,
                "%s: query_start_loc was written", b->name);
  fenced_destroy(&f->qsl);
  if (b->num_tokens) {
    ck_assert_msg(memcmp(f->positions.data, b->positions,
                         b->num_tokens * sizeof(int64_t)) == 0,
                  "%s: positions were written", b->name);
    fenced_destroy(&f->positions);
  }
  if (b->num_reqs) {
    fenced_destroy(&f->idx_mapping);
    fenced_destroy(&f->seq_lens);
  }
}

/* ---- running a batch ---------------------------------------------------- */

static void check_slots(const hostile_batch *b, const int64_t *slots,
                        const char *oracle) {
  for (uint32_t t = 0; t < MAX_TOKENS; ++t) {
    int64_t expected = t < b->num_tokens ? b->expected[t] : PAD;
    ck_assert_msg(slots[t] == expected, "%s: %s slot[%u] is %lld, not %lld",
                  b->name, oracle, t, (long long)slots[t], (long long)expected);
  }
}

/* Runs a batch on the device with its inputs against a fence. */
static void run_fenced(clbt_table *table, const hostile_batch *b, bool at_end) {
  fenced_batch f = fenced_batch_create(b, at_end);
  clbt_test_snapshot before = clbt_test_snapshot_take(table, MAX_REQS);
  clbt_test_poison(clbt_table_slot_mapping(table), MAX_TOKENS);
  clbt_assert_ok(clbt_table_reset_rejected_tokens(table));

  clbt_assert_ok(clbt_table_compute_slot_mapping(
      table, b->num_reqs, f.qsl.buffer,
      b->num_tokens ? f.positions.buffer : NULL, b->num_tokens));
  int64_t slots[MAX_TOKENS];
  uint32_t rejected = 0;
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));

  check_slots(b, slots, "device");
  ck_assert_msg(rejected == b->rejected, "%s: %u tokens counted, not %u",
                b->name, rejected, b->rejected);
  clbt_test_snapshot_check(&before, table);
  fenced_batch_destroy(&f, b);
}

/* ---- every other reader of a batch ------------------------------------- */

static clbt_step fenced_step(const hostile_batch *b, const fenced_batch *f,
                             uint32_t flags) {
  clbt_step step = CLBT_STEP_INIT;
  step.flags = flags;
  step.num_reqs = b->num_reqs;
  step.num_reqs_padded = MAX_REQS; /* padding requests read no input */
  step.num_tokens = b->num_tokens;
  step.query_start_loc = f->qsl.buffer;
  step.positions = b->num_tokens ? f->positions.buffer : NULL;
  step.idx_mapping = b->num_reqs ? f->idx_mapping.buffer : NULL;
  step.seq_lens = b->num_reqs ? f->seq_lens.buffer : NULL;
  return step;
}

/*
 * A step with the gather and every part of the export, its padded
 * requests past num_reqs, reads nothing outside its inputs and maps as the
 * slot mapping does. Only batches that leave out row 3 have the hand
 * slots: the step commits the host rows, row 3's {50} with them.
 */
START_TEST(steps_read_only_their_inputs) {
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    const hostile_batch *b = &batches[i];
    if (b->num_reqs > 3) continue;
    for (int at_end = 0; at_end < 2; ++at_end) {
      clbt_table *table = create_table();
      fenced_batch f = fenced_batch_create(b, at_end);
      clbt_step step = fenced_step(b, &f, CLBT_STEP_GATHER | CLBT_STEP_EXPORT);
      step.export_flags = CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE;
      clbt_test_poison(clbt_table_slot_mapping(table), MAX_TOKENS);
      clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
      int64_t slots[MAX_TOKENS];
      clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
      check_slots(b, slots, "step");
      fenced_batch_destroy(&f, b);
      clbt_table_destroy(table);
    }
  }
}
END_TEST

/*
 * The state slots of a NONE table read the same inputs (seq_lens among
 * them) for the padded batch. Rows 0 = {10, 11}, 1 = {20}, 2 = {40} and
 * 3 = {50}, which the step itself commits. Whatever a request's length
 * picks, each of its ids is one of its row's ids or the null block (0),
 * and each padding request's is the null block.
 */
START_TEST(state_slots_read_only_their_inputs) {
  static const int32_t row_ids[MAX_REQS][2] = {{10, 11}, {20}, {40}, {50}};
  clbt_table_config none = config;
  none.slot_mode = CLBT_SLOT_MODE_NONE;
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    const hostile_batch *b = &batches[i];
    for (int at_end = 0; at_end < 2; ++at_end) {
      clbt_table *table = NULL;
      clbt_assert_ok(clbt_table_create(clbt_test_device(), &none, &table));
      clbt_assert_ok(clbt_table_append_row(table, 0, row_ids[0], 2));
      clbt_assert_ok(clbt_table_append_row(table, 1, row_ids[1], 1));
      clbt_assert_ok(clbt_table_append_row(table, 2, row_ids[2], 1));
      clbt_assert_ok(clbt_table_append_row(table, 3, row_ids[3], 1));
      fenced_batch f = fenced_batch_create(b, at_end);
      clbt_step step =
          fenced_step(b, &f, CLBT_STEP_GATHER | CLBT_STEP_STATE_SLOTS);
      clbt_test_poison32(clbt_table_state_slots(table));
      clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
      int32_t ids[MAX_REQS];
      clbt_test_read(clbt_table_state_slots(table), sizeof ids, ids);
      for (uint32_t r = 0; r < MAX_REQS; ++r) {
        bool in_row = r < b->num_reqs &&
                      (ids[r] == row_ids[r][0] || ids[r] == row_ids[r][1]);
        ck_assert_msg(ids[r] == 0 || in_row, "%s: request %u's state id is %d",
                      b->name, r, ids[r]);
      }
      fenced_batch_destroy(&f, b);
      clbt_table_destroy(table);
    }
  }
}
END_TEST

/*
 * Token slots read the batch's query_start_loc and idx_mapping and an
 * index matrix, each against a fence. Row t's first index is token t's
 * position where it fits int32 (else -1, none) and its second -1, so that
 * the first column must hold the slot mapping's slots and the second -1.
 */
START_TEST(token_slots_read_only_their_inputs) {
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    const hostile_batch *b = &batches[i];
    if (b->num_tokens == 0) continue; /* no matrix to fence */
    int32_t indices[MAX_TOKENS][2];
    for (uint32_t t = 0; t < b->num_tokens; ++t) {
      int64_t p = b->positions[t];
      indices[t][0] = p >= INT32_MIN && p <= INT32_MAX ? (int32_t)p : -1;
      indices[t][1] = -1;
    }
    size_t bytes = b->num_tokens * sizeof indices[0];
    for (int at_end = 0; at_end < 2; ++at_end) {
      clbt_table *table = create_table();
      fenced_batch f = fenced_batch_create(b, at_end);
      fenced matrix = fenced_create(indices, bytes, at_end);
      cl_mem out = clbt_test_buffer(bytes, NULL);
      clbt_test_poison32(out);
      clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
      request.num_reqs = b->num_reqs;
      request.num_rows = b->num_tokens;
      request.indices_per_row = 2;
      request.query_start_loc = f.qsl.buffer;
      request.idx_mapping = b->num_reqs ? f.idx_mapping.buffer : NULL;
      request.token_indices = matrix.buffer;
      request.token_slots = out;
      clbt_assert_ok(
          clbt_table_enqueue_token_slots(table, &request, 0, NULL, NULL));
      int32_t got[MAX_TOKENS][2];
      clbt_test_read(out, bytes, got);
      for (uint32_t t = 0; t < b->num_tokens; ++t)
        ck_assert_msg(got[t][0] == b->expected[t] && got[t][1] == PAD,
                      "%s: row %u holds %d, %d, not %lld, -1", b->name, t,
                      got[t][0], got[t][1], (long long)b->expected[t]);
      ck_assert_msg(memcmp(matrix.data, indices, bytes) == 0,
                    "%s: the index matrix was written", b->name);
      clReleaseMemObject(out);
      fenced_destroy(&matrix);
      fenced_batch_destroy(&f, b);
      clbt_table_destroy(table);
    }
  }
}
END_TEST

START_TEST(hostile_batches_map_to_pad_and_are_counted) {
  clbt_table *table = create_table();
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    const hostile_batch *b = &batches[i];
    run_fenced(table, b, true);
    run_fenced(table, b, false);
    /* The host rows equal the committed ones except row 3's. */
    if (b->num_reqs <= 3) {
      int64_t slots[MAX_TOKENS];
      clbt_assert_ok(clbt_table_compute_slot_mapping_host(
          table, b->num_reqs, b->query_start_loc, b->positions, b->num_tokens,
          slots));
      check_slots(b, slots, "host reference");
    }
  }
  clbt_table_destroy(table);
}
END_TEST

/* ---- device lengths past a row's width ---------------------------------- */

/*
 * The device's row lengths are a buffer clbt hands out
 * (clbt_table_device_row_lengths), so whatever lands there, a kernel reads
 * no further than a row's width: a length past it, or negative, reads as
 * the width. Rows 0-2 of create_table() with the lengths 1000, -5 and
 * INT32_MAX must give what the same ids committed at full width give (the
 * wide table; its own figures are worked out by hand below too): request
 * 2's token at position 20 reads block 5
 * of a 3-block row, so it maps to -1; request 2 (21 tokens, 6 pages) runs
 * past its row and exports none; row 2's {40, 31, 32} gives slot 130.
 */
static clbt_table *wide_table(void) {
  static const int32_t ids[3][3] = {{10, 11, 0}, {20, 0, 0}, {40, 31, 32}};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  for (uint32_t r = 0; r < 3; ++r)
    clbt_assert_ok(clbt_table_append_row(table, r, ids[r], 3));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_assert_ok(clbt_table_append_row(table, 3, (const int32_t[]){50}, 1));
  return table;
}

/* What a step and token slots of the batch below write. */
typedef struct long_row_outputs {
  int64_t slots[MAX_TOKENS];
  int32_t indptr[MAX_REQS + 1], indices[MAX_REQS * 3];
  int32_t last_page_len[MAX_REQS], gathered[MAX_REQS * 3];
  int32_t token_slots[4];
  uint32_t rejected;
} long_row_outputs;

static long_row_outputs run_long_row_batch(clbt_table *table) {
  static const int32_t qsl[] = {0, 1, 2, 4};
  static const int64_t positions[] = {9, 5, 10, 20};
  static const int32_t token_indices[] = {9, 5, 10, 20};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem indices = clbt_test_buffer(sizeof token_indices, token_indices);
  cl_mem slots = clbt_test_buffer(sizeof token_indices, NULL);
  clbt_export_buffers e;
  clbt_assert_ok(clbt_table_export_buffers(table, &e));
  const cl_mem outputs[] = {e.paged_kv_indptr, e.paged_kv_indices,
                            e.paged_kv_last_page_len,
                            clbt_table_gathered_rows(table), slots};
  for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; ++i)
    clbt_test_poison32(outputs[i]);
  clbt_test_poison(clbt_table_slot_mapping(table), MAX_TOKENS);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  step.num_reqs = 3;
  step.num_tokens = 4;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 3;
  request.num_rows = 4;
  request.indices_per_row = 1;
  request.query_start_loc = qsl_buffer;
  request.token_indices = indices;
  request.token_slots = slots;
  clbt_assert_ok(clbt_table_enqueue_token_slots(table, &request, 0, NULL,
                                                NULL));
  long_row_outputs out;
  clbt_test_read(clbt_table_slot_mapping(table), sizeof out.slots, out.slots);
  clbt_test_read(e.paged_kv_indptr, sizeof out.indptr, out.indptr);
  clbt_test_read(e.paged_kv_indices, sizeof out.indices, out.indices);
  clbt_test_read(e.paged_kv_last_page_len, sizeof out.last_page_len,
                 out.last_page_len);
  clbt_test_read(clbt_table_gathered_rows(table), sizeof out.gathered,
                 out.gathered);
  clbt_test_read(slots, sizeof out.token_slots, out.token_slots);
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &out.rejected));
  const cl_mem inputs[] = {qsl_buffer, positions_buffer, indices, slots};
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i)
    clReleaseMemObject(inputs[i]);
  return out;
}

START_TEST(lengths_past_the_width_read_as_the_width) {
  static const int32_t lengths[MAX_REQS] = {1000, -5, INT32_MAX, 0};
  clbt_table *wide = wide_table(), *table = create_table();
  clbt_test_write(clbt_table_device_row_lengths(table), sizeof lengths,
                  lengths);
  long_row_outputs expected = run_long_row_batch(wide);
  long_row_outputs got = run_long_row_batch(table);
  static const int64_t slots[] = {1, 1, 130, PAD};
  ck_assert_mem_eq(expected.slots, slots, sizeof slots);
  ck_assert_mem_eq(expected.indptr, ((const int32_t[]){0, 3, 5, 5}),
                   4 * sizeof(int32_t));
  ck_assert_mem_eq(expected.indices, ((const int32_t[]){10, 11, 0, 20, 0}),
                   5 * sizeof(int32_t));
  ck_assert_mem_eq(expected.token_slots, ((const int32_t[]){1, 1, 130, -1}),
                   4 * sizeof(int32_t));
  /* 10 and 6 tokens: 2 in the last of 4-token pages; request 2 has none. */
  ck_assert_mem_eq(expected.last_page_len, ((const int32_t[]){2, 2, 0}),
                   3 * sizeof(int32_t));
  ck_assert_mem_eq(expected.gathered,
                   ((const int32_t[]){10, 11, 0, 20, 0, 0, 40, 31, 32}),
                   9 * sizeof(int32_t));
  ck_assert_mem_eq(got.slots, expected.slots, sizeof got.slots);
  ck_assert_mem_eq(got.indptr, expected.indptr, sizeof got.indptr);
  ck_assert_mem_eq(got.indices, expected.indices, sizeof got.indices);
  ck_assert_mem_eq(got.last_page_len, expected.last_page_len,
                   sizeof got.last_page_len);
  ck_assert_mem_eq(got.gathered, expected.gathered, sizeof got.gathered);
  ck_assert_mem_eq(got.token_slots, expected.token_slots,
                   sizeof got.token_slots);
  ck_assert_uint_eq(got.rejected, expected.rejected);
  clbt_table_destroy(table);
  clbt_table_destroy(wide);
}
END_TEST

/*
 * A NONE table's state slots by the same rule: row 0 {10, 11} of device
 * length 1000, row 1 {20, 21, 22} after it. Request 0's last token, at
 * position 16, takes column 4 of a 3-column row: past the width, so the
 * null block 7 (read as 1000 long, it would be row 1's 21); request 1's,
 * at 2, column 0: 20.
 */
START_TEST(state_slots_read_no_further_than_the_width) {
  static const int32_t lengths[MAX_REQS] = {1000, 3, 0, 0};
  static const int32_t qsl[] = {0, 1, 2};
  static const int64_t positions[] = {16, 2};
  clbt_table_config none = config;
  none.slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &none, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){10, 11}, 2));
  clbt_assert_ok(
      clbt_table_append_row(table, 1, (const int32_t[]){20, 21, 22}, 3));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_test_write(clbt_table_device_row_lengths(table), sizeof lengths,
                  lengths);
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_STATE_SLOTS;
  step.num_reqs = 2;
  step.num_tokens = 2;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  step.state_null_block = 7;
  clbt_test_poison32(clbt_table_state_slots(table));
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  int32_t ids[2];
  clbt_test_read(clbt_table_state_slots(table), sizeof ids, ids);
  ck_assert_int_eq(ids[0], 7);
  ck_assert_int_eq(ids[1], 20);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("hostile_batches");
  TCase *tc = tcase_create("hostile_batches");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, buffers_use_host_memory_in_place);
  tcase_add_test(tc, hostile_batches_map_to_pad_and_are_counted);
  tcase_add_test(tc, steps_read_only_their_inputs);
  tcase_add_test(tc, state_slots_read_only_their_inputs);
  tcase_add_test(tc, token_slots_read_only_their_inputs);
  tcase_add_test(tc, lengths_past_the_width_read_as_the_width);
  tcase_add_test(tc, state_slots_read_no_further_than_the_width);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
