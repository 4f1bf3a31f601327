/*
 * The compatibility rule (docs/design.md, "Config structs and the ABI"),
 * struct by struct. Every struct a caller fills is read at exactly the
 * size its struct_size names, each layout a version declared: each one
 * here lies in a heap block of exactly that size (so that, under
 * AddressSanitizer, a read past it fails) or with a tail of garbage after
 * it (so that, in any build, a field read past the layout changes the
 * result or is refused), its padding garbage too. A struct_size that is no
 * version's layout is refused. The structs clbt fills are written whole,
 * whatever their struct_size holds, and not one byte further.
 *
 * The sizes are LP64's, derived by hand from each version's header: 0.2's
 * table config is ten 4-byte fields, 40 bytes, and 0.3 added one, 44; 0.2's
 * multi-group config is seven 4-byte fields, 4 bytes of padding and a
 * pointer, 40, 0.3 added two fields, 48, and 0.4 two more, 56; a group is
 * six 4-byte fields, 24; 0.3's step is five 4-byte counts, 4 bytes of
 * padding and four buffers, 56, and 0.4 added four 4-byte fields, 72; a
 * host step (0.3) and a multi-group host step (0.4) are the five counts,
 * the padding and five pointers, 64; a token-slots request (0.4) is four
 * counts and four buffers, 48; an export request (0.5's layout) six counts
 * and four buffers, 56; clbt_export_buffers five buffers, two 4-byte
 * fields and seven buffers, 104. A later version's size is a multiple of
 * the struct's alignment (8 with a pointer in it, else 4) above its size.
 *
 * The table: 16-token blocks, 4 rows of 4; row 0 holds blocks 1 2 3 4 and
 * row 1 blocks 11 12 13 14. The batch: request 0 at positions 0, 17, 33,
 * request 1 at 5 and 63, so the slots (block * 16 + position % 16) are 16,
 * 33, 49, 181 and 239, then pads (-1) up to max_num_batched_tokens 8.
 */
#include "clbt_test.h"

#include <stdalign.h>
#include <stdlib.h>

_Static_assert(sizeof(void *) == 8, "the sizes of this suite are LP64's");

#define GARBAGE 0xA5
#define TAIL 16 /* bytes of garbage after a struct, where it has a tail */

static const int64_t expected_slots[8] = {16, 33, 49, 181, 239, -1, -1, -1};

static const clbt_table_config table_config = {
    .block_size = 16, .max_num_reqs = 4, .max_num_blocks_per_req = 4,
    .max_num_batched_tokens = 8};

typedef struct fixture {
  clbt_table *table;
  cl_mem query_start_loc, positions;
} fixture;

static fixture setup(void) {
  static const int32_t row0[] = {1, 2, 3, 4}, row1[] = {11, 12, 13, 14};
  static const int32_t qsl[] = {0, 3, 5};
  static const int64_t positions[] = {0, 17, 33, 5, 63};
  fixture f = {NULL, clbt_test_buffer(sizeof qsl, qsl),
               clbt_test_buffer(sizeof positions, positions)};
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &table_config, &f.table));
  clbt_assert_ok(clbt_table_add_row(f.table, 0, row0, 4));
  clbt_assert_ok(clbt_table_add_row(f.table, 1, row1, 4));
  clbt_assert_ok(clbt_table_commit(f.table, 4));
  return f;
}

static void teardown(fixture *f) {
  clbt_table_destroy(f->table);
  clReleaseMemObject(f->query_start_loc);
  clReleaseMemObject(f->positions);
}

/*
 * A copy of good's first `size` bytes in a heap block of `size + tail`
 * bytes whose tail, and the `pad_size` bytes of padding at `pad_at`, are
 * garbage.
 */
static void *garbage_copy(const void *good, size_t size, size_t pad_at,
                          size_t pad_size, size_t tail) {
  unsigned char *copy = malloc(size + tail);
  ck_assert_ptr_nonnull(copy);
  memset(copy, GARBAGE, size + tail);
  memcpy(copy, good, size);
  memset(copy + pad_at, GARBAGE, pad_size);
  return copy;
}

/* The padding of the steps: after num_tokens, before the first pointer. */
#define STEP_PAD_AT(type) (offsetof(type, num_tokens) + sizeof(uint32_t))
#define STEP_PAD_SIZE(type) \
  (offsetof(type, query_start_loc) - STEP_PAD_AT(type))

static void assert_slots(cl_mem buffer) {
  int64_t slots[8];
  clbt_test_read(buffer, sizeof slots, slots);
  for (int t = 0; t < 8; ++t)
    ck_assert_msg(slots[t] == expected_slots[t], "slot %d is %lld, not %lld",
                  t, (long long)slots[t], (long long)expected_slots[t]);
}

/* ---- the structs a caller fills, at each layout's exact size ----------- */

START_TEST(steps_of_every_layout_are_read_at_their_size) {
  fixture f = setup();
  static const size_t layouts[] = {56, 72}; /* 0.3, 0.4 */
  ck_assert_uint_eq(sizeof(clbt_step), 72);
  ck_assert_uint_eq(STEP_PAD_SIZE(clbt_step), 4);
  for (size_t l = 0; l < 2; ++l)
    for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
      clbt_step good = CLBT_STEP_INIT;
      good.struct_size = (uint32_t)layouts[l];
      good.num_reqs = 2;
      good.num_tokens = 5;
      good.query_start_loc = f.query_start_loc;
      good.positions = f.positions;
      clbt_step *copy = garbage_copy(&good, layouts[l],
                                     STEP_PAD_AT(clbt_step),
                                     STEP_PAD_SIZE(clbt_step), tail);
      clbt_test_poison(clbt_table_slot_mapping(f.table), 8);
      clbt_assert_ok(clbt_table_enqueue_step(f.table, copy, 0, NULL, NULL));
      assert_slots(clbt_table_slot_mapping(f.table));
      free(copy);
    }
  teardown(&f);
}
END_TEST

START_TEST(host_steps_are_read_at_their_size) {
  fixture f = setup();
  static const int32_t qsl[] = {0, 3, 5};
  static const int64_t positions[] = {0, 17, 33, 5, 63};
  ck_assert_uint_eq(sizeof(clbt_host_step), 64);
  for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
    int64_t slots[8];
    memset(slots, GARBAGE, sizeof slots);
    clbt_host_step good = CLBT_HOST_STEP_INIT;
    good.num_reqs = 2;
    good.num_tokens = 5;
    good.query_start_loc = qsl;
    good.positions = positions;
    good.slot_mapping = slots;
    clbt_host_step *copy =
        garbage_copy(&good, sizeof good, STEP_PAD_AT(clbt_host_step),
                     STEP_PAD_SIZE(clbt_host_step), tail);
    clbt_assert_ok(clbt_table_compute_step_host(f.table, copy));
    ck_assert_mem_eq(slots, expected_slots, sizeof slots);
    free(copy);
  }
  teardown(&f);
}
END_TEST

/* The same rows in a one-group table (exact widths: 4 kernel blocks). */
START_TEST(multi_host_steps_are_read_at_their_size) {
  static const clbt_group_config group = {.block_size = 16,
                                          .max_num_blocks = 4};
  clbt_multi_table_config config = {.max_num_reqs = 4,
                                    .max_num_batched_tokens = 8,
                                    .num_groups = 1, .groups = &group,
                                    .struct_size =
                                        sizeof(clbt_multi_table_config),
                                    .exact_widths = 1};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  static const int32_t row0[] = {1, 2, 3, 4}, row1[] = {11, 12, 13, 14};
  const int32_t *ids[] = {row0};
  const size_t counts[] = {4};
  clbt_assert_ok(clbt_multi_table_add_row(table, 0, ids, counts));
  ids[0] = row1;
  clbt_assert_ok(clbt_multi_table_add_row(table, 1, ids, counts));
  static const int32_t qsl[] = {0, 3, 5};
  static const int64_t positions[] = {0, 17, 33, 5, 63};
  ck_assert_uint_eq(sizeof(clbt_multi_host_step), 64);
  for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
    int64_t slots[8];
    memset(slots, GARBAGE, sizeof slots);
    int64_t *const outputs[] = {slots};
    clbt_multi_host_step good = CLBT_MULTI_HOST_STEP_INIT;
    good.num_reqs = 2;
    good.num_tokens = 5;
    good.query_start_loc = qsl;
    good.positions = positions;
    good.slot_mappings = outputs;
    clbt_multi_host_step *copy =
        garbage_copy(&good, sizeof good, STEP_PAD_AT(clbt_multi_host_step),
                     STEP_PAD_SIZE(clbt_multi_host_step), tail);
    clbt_assert_ok(clbt_multi_table_compute_step_host(table, copy));
    ck_assert_mem_eq(slots, expected_slots, sizeof slots);
    free(copy);
  }
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * One matrix row per request (query_start_loc 0, 1, 2), two indices each:
 * tokens 0 and 17 of request 0, 5 and none (-1) of request 1.
 */
START_TEST(token_slots_requests_are_read_at_their_size) {
  fixture f = setup();
  static const int32_t rows_qsl[] = {0, 1, 2}, indices[] = {0, 17, 5, -1};
  static const int32_t expected[] = {16, 33, 181, -1};
  cl_mem qsl = clbt_test_buffer(sizeof rows_qsl, rows_qsl);
  cl_mem token_indices = clbt_test_buffer(sizeof indices, indices);
  cl_mem token_slots = clbt_test_buffer(sizeof expected, NULL);
  ck_assert_uint_eq(sizeof(clbt_token_slots_request), 48);
  for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
    clbt_token_slots_request good = CLBT_TOKEN_SLOTS_INIT;
    good.num_reqs = 2;
    good.num_rows = 2;
    good.indices_per_row = 2;
    good.query_start_loc = qsl;
    good.token_indices = token_indices;
    good.token_slots = token_slots;
    clbt_token_slots_request *copy =
        garbage_copy(&good, sizeof good, 0, 0, tail);
    clbt_test_poison32(token_slots);
    clbt_assert_ok(
        clbt_table_enqueue_token_slots(f.table, copy, 0, NULL, NULL));
    int32_t slots[4];
    clbt_test_read(token_slots, sizeof slots, slots);
    ck_assert_mem_eq(slots, expected, sizeof slots);
    free(copy);
  }
  clReleaseMemObject(qsl);
  clReleaseMemObject(token_indices);
  clReleaseMemObject(token_slots);
  teardown(&f);
}
END_TEST

/*
 * Each request's length is its last position + 1: 34 (three pages, the
 * last holding 2 tokens) and 64 (four, the last full).
 */
START_TEST(export_requests_are_read_at_their_size) {
  fixture f = setup();
  static const int32_t indptr[] = {0, 3, 7};
  static const int32_t indices[] = {1, 2, 3, 11, 12, 13, 14};
  static const int32_t last_page_len[] = {2, 16};
  clbt_export_buffers out;
  clbt_assert_ok(clbt_table_export_buffers(f.table, &out));
  ck_assert_uint_eq(sizeof(clbt_export_request), 56);
  for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
    clbt_export_request good = CLBT_EXPORT_REQUEST_INIT;
    good.num_reqs = 2;
    good.num_tokens = 5;
    good.query_start_loc = f.query_start_loc;
    good.positions = f.positions;
    clbt_export_request *copy = garbage_copy(&good, sizeof good, 0, 0, tail);
    clbt_test_poison32(out.paged_kv_indptr);
    clbt_test_poison32(out.paged_kv_indices);
    clbt_test_poison32(out.paged_kv_last_page_len);
    clbt_assert_ok(clbt_table_enqueue_export(f.table, copy, 0, NULL, NULL));
    int32_t read_indptr[3], read_indices[7], read_last[2];
    clbt_test_read(out.paged_kv_indptr, sizeof read_indptr, read_indptr);
    clbt_test_read(out.paged_kv_indices, sizeof read_indices, read_indices);
    clbt_test_read(out.paged_kv_last_page_len, sizeof read_last, read_last);
    ck_assert_mem_eq(read_indptr, indptr, sizeof indptr);
    ck_assert_mem_eq(read_indices, indices, sizeof indices);
    ck_assert_mem_eq(read_last, last_page_len, sizeof last_page_len);
    free(copy);
  }
  teardown(&f);
}
END_TEST

/* 0.2's and 0.3's table configs, the garbage past them unread. */
START_TEST(table_configs_of_every_layout_are_read_at_their_size) {
  static const size_t layouts[] = {40, 44};
  for (size_t l = 0; l < 2; ++l)
    for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
      clbt_table_config good = table_config;
      good.struct_size = (uint32_t)layouts[l];
      clbt_table_config *copy = garbage_copy(&good, layouts[l], 0, 0, tail);
      clbt_table *table = NULL;
      clbt_assert_ok(clbt_table_create(clbt_test_device(), copy, &table));
      ck_assert_uint_eq(clbt_table_width(table), 4);
      clbt_table_destroy(table);
      clbt_assert_ok(clbt_table_prepare(clbt_test_device(), copy));
      free(copy);
    }
}
END_TEST

/*
 * Multi-group configs of 0.2, 0.3 and 0.4 over an array of two groups at
 * its exact size: 9 blocks of 16 tokens align to 128-token rows, 16 blocks,
 * and 3 blocks of 64 over kernel blocks of 16 to 4 blocks, 16 kernel
 * blocks. Read, the garbage past 0.2's layout would be a commit mode
 * clbt refuses, past 0.3's a reserved field that is not 0.
 */
START_TEST(multi_configs_of_every_layout_are_read_at_their_size) {
  static const clbt_group_config known[2] = {
      {.block_size = 16, .max_num_blocks = 9},
      {.block_size = 64, .kernel_block_size = 16, .max_num_blocks = 3}};
  clbt_group_config *groups = malloc(sizeof known);
  ck_assert_ptr_nonnull(groups);
  memcpy(groups, known, sizeof known);
  static const size_t layouts[] = {40, 48, 56};
  const size_t pad_at = offsetof(clbt_multi_table_config, num_groups) + 4;
  ck_assert_uint_eq(offsetof(clbt_multi_table_config, groups) - pad_at, 4);
  for (size_t l = 0; l < 3; ++l)
    for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
      clbt_multi_table_config good = {
          .struct_size = (uint32_t)layouts[l], .max_num_reqs = 2,
          .max_num_batched_tokens = 4, .num_groups = 2, .groups = groups};
      clbt_multi_table_config *copy =
          garbage_copy(&good, layouts[l], pad_at, 4, tail);
      clbt_multi_table *table = NULL;
      clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), copy, &table));
      ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 0)), 16);
      ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 1)), 16);
      clbt_multi_table_destroy(table);
      free(copy);
    }
  free(groups);
}
END_TEST

/* ---- struct sizes that are no layout ------------------------------------ */

/*
 * For every struct_size from 1 to 24 bytes past the struct's size (the
 * struct at the start of a zeroed page, so that no size reads past it):
 * accepted exactly when it is one of `layouts`, else refused naming it.
 */
typedef clbt_status (*struct_call)(const fixture *f, void *given);

static void sweep_sizes(const fixture *f, void *page, size_t own,
                        const size_t *layouts, size_t num_layouts,
                        struct_call call) {
  for (size_t size = 1; size <= own + 24; ++size) {
    bool layout = false;
    for (size_t i = 0; i < num_layouts; ++i) layout |= layouts[i] == size;
    uint32_t declared = (uint32_t)size;
    memcpy(page, &declared, sizeof declared);
    clbt_status status = call(f, page);
    char words[32];
    snprintf(words, sizeof words, "struct_size is %zu;", size);
    if (layout)
      ck_assert_msg(status == CLBT_SUCCESS, "struct_size %zu: %s: %s", size,
                    clbt_status_name(status), clbt_last_error());
    else
      clbt_assert_fails(status, CLBT_INVALID_CONFIG, words);
  }
}

static clbt_status create_table(const fixture *f, void *config) {
  (void)f;
  clbt_table *table = NULL;
  clbt_status status = clbt_table_create(clbt_test_device(), config, &table);
  clbt_table_destroy(table);
  return status;
}

static clbt_status create_multi_table(const fixture *f, void *config) {
  (void)f;
  clbt_multi_table *table = NULL;
  clbt_status status =
      clbt_multi_table_create(clbt_test_device(), config, &table);
  clbt_multi_table_destroy(table);
  return status;
}

static clbt_status enqueue_step(const fixture *f, void *step) {
  return clbt_table_enqueue_step(f->table, step, 0, NULL, NULL);
}

static clbt_status enqueue_export(const fixture *f, void *request) {
  return clbt_table_enqueue_export(f->table, request, 0, NULL, NULL);
}

static clbt_status compute_step_host(const fixture *f, void *step) {
  return clbt_table_compute_step_host(f->table, step);
}

static clbt_status enqueue_token_slots(const fixture *f, void *request) {
  return clbt_table_enqueue_token_slots(f->table, request, 0, NULL, NULL);
}

START_TEST(sizes_that_are_no_layout_are_refused) {
  fixture f = setup();
  static int64_t host_slots[8];
  static const int32_t qsl[] = {0, 0};
  void *page = calloc(1, 4096);
  ck_assert_ptr_nonnull(page);

  memcpy(page, &table_config, sizeof table_config);
  static const size_t config_layouts[] = {40, 44, 48, 52, 56, 60, 64, 68};
  sweep_sizes(&f, page, sizeof(clbt_table_config), config_layouts, 8,
              create_table);

  static const clbt_group_config group = {.block_size = 16,
                                          .max_num_blocks = 4};
  const clbt_multi_table_config multi = {.max_num_reqs = 4,
                                         .max_num_batched_tokens = 8,
                                         .num_groups = 1, .groups = &group};
  memset(page, 0, 4096);
  memcpy(page, &multi, sizeof multi);
  static const size_t multi_layouts[] = {40, 48, 56, 64, 72, 80};
  sweep_sizes(&f, page, sizeof multi, multi_layouts, 6, create_multi_table);

  clbt_step step = CLBT_STEP_INIT;
  step.num_reqs = 1;
  step.query_start_loc = f.query_start_loc;
  memset(page, 0, 4096);
  memcpy(page, &step, sizeof step);
  static const size_t step_layouts[] = {56, 72, 80, 88, 96};
  sweep_sizes(&f, page, sizeof step, step_layouts, 5, enqueue_step);

  clbt_export_request request = CLBT_EXPORT_REQUEST_INIT;
  request.num_reqs = 1;
  request.query_start_loc = f.query_start_loc;
  memset(page, 0, 4096);
  memcpy(page, &request, sizeof request);
  static const size_t request_layouts[] = {56, 64, 72, 80};
  sweep_sizes(&f, page, sizeof request, request_layouts, 4, enqueue_export);

  clbt_host_step host = CLBT_HOST_STEP_INIT;
  host.num_reqs = 1;
  host.query_start_loc = qsl;
  host.slot_mapping = host_slots;
  memset(page, 0, 4096);
  memcpy(page, &host, sizeof host);
  static const size_t host_layouts[] = {64, 72, 80, 88};
  sweep_sizes(&f, page, sizeof host, host_layouts, 4, compute_step_host);

  clbt_token_slots_request slots = CLBT_TOKEN_SLOTS_INIT;
  slots.num_reqs = 1;
  slots.query_start_loc = f.query_start_loc;
  memset(page, 0, 4096);
  memcpy(page, &slots, sizeof slots);
  static const size_t slots_layouts[] = {48, 56, 64, 72};
  sweep_sizes(&f, page, sizeof slots, slots_layouts, 4, enqueue_token_slots);

  free(page);
  teardown(&f);
}
END_TEST

/* ---- the structs clbt fills --------------------------------------------- */

/*
 * clbt_export_buffers is written whole, whatever its struct_size holds (a
 * caller need not set it), and not one byte further: in a block of exactly
 * its size, and before a tail that keeps its garbage. Each buffer is the
 * one a struct set with CLBT_EXPORT_BUFFERS_INIT receives.
 */
START_TEST(export_buffers_are_written_whole_and_no_further) {
  fixture f = setup();
  clbt_export_buffers reference = CLBT_EXPORT_BUFFERS_INIT;
  clbt_assert_ok(clbt_table_export_buffers(f.table, &reference));
  ck_assert_uint_eq(sizeof reference, 104);
  const cl_mem *buffers[] = {
      &reference.paged_kv_indptr, &reference.paged_kv_indices,
      &reference.paged_kv_last_page_len, &reference.past_lens,
      &reference.subsequence_begins, &reference.seq_lens,
      &reference.dcp_local_seq_lens, &reference.max_seq_len,
      &reference.context_kv_indptr, &reference.context_kv_indices,
      &reference.context_kv_last_page_len, &reference.page_table};
  for (size_t b = 0; b < 12; ++b) ck_assert_ptr_nonnull(*buffers[b]);
  ck_assert_uint_eq(reference.page_size, 16);

  static const uint32_t sizes[] = {0, 1, 48, 103, 0xA5A5A5A5u, 4097};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s)
    for (size_t tail = 0; tail <= TAIL; tail += TAIL) {
      unsigned char *block = malloc(sizeof reference + tail);
      ck_assert_ptr_nonnull(block);
      memset(block, GARBAGE, sizeof reference + tail);
      clbt_export_buffers *out = (clbt_export_buffers *)block;
      out->struct_size = sizes[s];
      clbt_assert_ok(clbt_table_export_buffers(f.table, out));
      ck_assert_mem_eq(out, &reference, sizeof reference);
      for (size_t i = 0; i < tail; ++i)
        ck_assert_uint_eq(block[sizeof reference + i], GARBAGE);
      free(block);
    }
  teardown(&f);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("abi");
  TCase *tc = tcase_create("abi");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, steps_of_every_layout_are_read_at_their_size);
  tcase_add_test(tc, host_steps_are_read_at_their_size);
  tcase_add_test(tc, multi_host_steps_are_read_at_their_size);
  tcase_add_test(tc, token_slots_requests_are_read_at_their_size);
  tcase_add_test(tc, export_requests_are_read_at_their_size);
  tcase_add_test(tc, table_configs_of_every_layout_are_read_at_their_size);
  tcase_add_test(tc, multi_configs_of_every_layout_are_read_at_their_size);
  tcase_add_test(tc, sizes_that_are_no_layout_are_refused);
  tcase_add_test(tc, export_buffers_are_written_whole_and_no_further);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
