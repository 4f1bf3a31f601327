/*
 * The attention export (src/calls/export.c, cl/export.cl). The round trip does
 * not trust the exporter's arithmetic: each step writes per-token values
 * into a paged KV cache (a host array per rank and group) through the
 * slot mapping, then reads every request's tokens back in order through
 * the exported FlashInfer CSR arrays (its lengths as FlashInfer's
 * get_seq_lens computes them), the OpenVINO arrays, the context-only CSR
 * and the dense page table with its lengths, and compares them with what
 * the steps wrote. Which positions a CP rank owns comes from vLLM's rule
 * (block_table.py), enumerated position by position.
 * tests/calls/test_export_attention.c reads K/V through the same layouts
 * with a paged-attention reference.
 */
#include "clbt_test.h"

#include <stddef.h>
#include <stdlib.h>

#define MAX_RANKS 3
#define MAX_GROUPS 3
#define MAX_REQS 6
#define MAX_TOKENS 96
#define MAX_POSITIONS 256
#define KV_BLOCKS 509 /* a prime: ids dealt as (n * 37) mod 509 are distinct */

/* The exported arrays of one group, read back. */
typedef struct exported {
  int32_t indptr[MAX_REQS + 1], last_page_len[MAX_REQS], past_lens[MAX_REQS],
      subsequence_begins[MAX_REQS + 1], seq_lens[MAX_REQS],
      local_seq_lens[MAX_REQS], max_seq_len, context_indptr[MAX_REQS + 1],
      context_last_page_len[MAX_REQS];
  int32_t *indices, *context_indices, *page_table; /* [requests * width] */
  uint32_t page_size;
} exported;

static void poison_export(const clbt_table *group) {
  clbt_export_buffers b = CLBT_EXPORT_BUFFERS_INIT;
  clbt_assert_ok(clbt_table_export_buffers(group, &b));
  const cl_mem all[] = {b.paged_kv_indptr, b.paged_kv_indices,
                        b.paged_kv_last_page_len, b.past_lens,
                        b.subsequence_begins, b.seq_lens,
                        b.dcp_local_seq_lens, b.max_seq_len,
                        b.context_kv_indptr, b.context_kv_indices,
                        b.context_kv_last_page_len, b.page_table};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    ck_assert_ptr_nonnull(all[i]);
    clbt_test_poison32(all[i]);
  }
}

static int32_t *read_pages_of(cl_mem buffer, size_t count) {
  int32_t *out = malloc(count * sizeof *out);
  ck_assert_ptr_nonnull(out);
  clbt_test_read(buffer, count * sizeof *out, out);
  return out;
}

/* The first `requests` entries (max_num_reqs at most) of each array. */
static exported read_export(const clbt_table *group, uint32_t requests) {
  clbt_export_buffers b = CLBT_EXPORT_BUFFERS_INIT;
  exported e;
  size_t pages = (size_t)requests * clbt_table_width(group);
  clbt_assert_ok(clbt_table_export_buffers(group, &b));
  size_t per_request = requests * sizeof(int32_t);
  size_t offsets = per_request + sizeof(int32_t);
  clbt_test_read(b.paged_kv_indptr, offsets, e.indptr);
  clbt_test_read(b.paged_kv_last_page_len, per_request, e.last_page_len);
  clbt_test_read(b.past_lens, per_request, e.past_lens);
  clbt_test_read(b.subsequence_begins, offsets, e.subsequence_begins);
  clbt_test_read(b.seq_lens, per_request, e.seq_lens);
  clbt_test_read(b.dcp_local_seq_lens, per_request, e.local_seq_lens);
  clbt_test_read(b.max_seq_len, sizeof e.max_seq_len, &e.max_seq_len);
  clbt_test_read(b.context_kv_indptr, offsets, e.context_indptr);
  clbt_test_read(b.context_kv_last_page_len, per_request,
                 e.context_last_page_len);
  e.indices = read_pages_of(b.paged_kv_indices, pages);
  e.context_indices = read_pages_of(b.context_kv_indices, pages);
  e.page_table = read_pages_of(b.page_table, pages);
  e.page_size = b.page_size;
  return e;
}

static void free_export(exported *e) {
  free(e->indices);
  free(e->context_indices);
  free(e->page_table);
}

/* ---- a hand-worked example on a single table --------------------------- */

/* Rows {7, 3} and {5} of 4-token blocks, committed. */
static clbt_table *worked_table(uint32_t max_num_reqs) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = max_num_reqs,
                              .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 8};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 3}, 2));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  return table;
}

/*
 * The worked table, max_num_reqs 4. Request 0 has tokens at positions
 * 4, 5 (length 6: pages 7 and 3, 2 tokens in the last, 4 before the
 * query, whose one context page 7 holds all 4), request 1 one at position
 * 2 (length 3: page 5, 3 tokens, 2 before, context page 5 with 2). Padded
 * to 3: request 2 repeats both indptrs and has no tokens, every length 0.
 * The dense page table, at the width 2: rows {7, 3}, {5, 0}, {0, 0}.
 */
START_TEST(worked_example) {
  clbt_table *table = worked_table(4);
  const int32_t qsl[] = {0, 2, 3};
  const int64_t positions[] = {4, 5, 2};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  poison_export(table);
  clbt_export_request request = {.num_reqs = 2, .num_reqs_padded = 3,
                                 .query_start_loc = qsl_buffer,
                                 .positions = positions_buffer,
                                 .num_tokens = 3,
                                 .flags = CLBT_EXPORT_CONTEXT |
                                          CLBT_EXPORT_DENSE};
  cl_event done = NULL;
  clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, &done));
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
  exported e = read_export(table, 4);
  const int32_t P = CLBT_TEST_POISON32;
  const int32_t indptr[] = {0, 2, 3, 3, P}, indices[] = {7, 3, 5, P};
  const int32_t last[] = {2, 3, 0, P}, past[] = {4, 2, 0, P};
  const int32_t begins[] = {0, 2, 3, 3, P};
  const int32_t seq_lens[] = {6, 3, 0, P}, context_indptr[] = {0, 1, 2, 2, P};
  const int32_t context_indices[] = {7, 5, P}, context_last[] = {4, 2, 0, P};
  const int32_t page_table[] = {7, 3, 5, 0, 0, 0, P, P};
  for (int i = 0; i < 5; ++i) {
    ck_assert_int_eq(e.indptr[i], indptr[i]);
    ck_assert_int_eq(e.subsequence_begins[i], begins[i]);
    ck_assert_int_eq(e.context_indptr[i], context_indptr[i]);
  }
  for (int i = 0; i < 4; ++i) {
    ck_assert_int_eq(e.indices[i], indices[i]);
    ck_assert_int_eq(e.last_page_len[i], last[i]);
    ck_assert_int_eq(e.past_lens[i], past[i]);
    ck_assert_int_eq(e.seq_lens[i], seq_lens[i]);
    ck_assert_int_eq(e.local_seq_lens[i], seq_lens[i]);
    ck_assert_int_eq(e.context_last_page_len[i], context_last[i]);
  }
  for (int i = 0; i < 3; ++i)
    ck_assert_int_eq(e.context_indices[i], context_indices[i]);
  for (int i = 0; i < 8; ++i) ck_assert_int_eq(e.page_table[i], page_table[i]);
  ck_assert_int_eq(e.max_seq_len, 6);
  ck_assert_uint_eq(e.page_size, 4);
  free_export(&e);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * FlashInfer's own readers of the CSR arrays on a batch with empty
 * requests: get_seq_lens (flashinfer/page.py) gives each request
 * clamp(pages - 1, 0) * page_size + last_page_len tokens, and the
 * trtllm-gen plan (BatchDecodeWithPagedKVCacheWrapper.plan) takes each
 * request's ceil(tokens / page_size) pages from indices, one request after
 * the other from indptr[0]. Both must give every request its own pages
 * and vLLM's lengths (0 for a request with no page): a request of length
 * 0, a padding entry, a rejected one and padding past the batch sit
 * between requests with pages.
 */
START_TEST(empty_requests_read_no_tokens) {
  clbt_table *table = worked_table(6);
  clbt_assert_ok(clbt_table_add_row(table, 2, (const int32_t[]){9, 4}, 2));
  clbt_assert_ok(clbt_table_commit(table, 3));
  /* Row 0 (length 6), row 1 with no token (length 0), padding, a row past
     the table (rejected), row 2 (length 5), padded to 6. */
  const int32_t idx[] = {0, 1, -1, 6, 2}, qsl[] = {0, 2, 2, 3, 4, 5};
  const int64_t positions[] = {4, 5, 0, 0, 4};
  const int32_t want_lengths[] = {6, 0, 0, 0, 5, 0};
  cl_mem idx_buffer = clbt_test_buffer(sizeof idx, idx);
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  poison_export(table);
  clbt_export_request request = {.num_reqs = 5, .num_reqs_padded = 6,
                                 .query_start_loc = qsl_buffer,
                                 .positions = positions_buffer,
                                 .num_tokens = 5, .idx_mapping = idx_buffer};
  clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
  exported e = read_export(table, 6);
  const int32_t rows[][2] = {{7, 3}, {0, 0}, {0, 0}, {0, 0}, {9, 4}, {0, 0}};
  int32_t block_id = e.indptr[0];
  for (int r = 0; r < 6; ++r) {
    int32_t pages = e.indptr[r + 1] - e.indptr[r];
    int32_t tokens = (pages - 1 > 0 ? pages - 1 : 0) * 4 + e.last_page_len[r];
    ck_assert_msg(tokens == want_lengths[r],
                  "request %d: get_seq_lens gives %d, want %d", r, tokens,
                  want_lengths[r]);
    ck_assert_int_eq(e.seq_lens[r], want_lengths[r]);
    int32_t needed = (tokens + 3) / 4;
    for (int32_t p = 0; p < needed; ++p)
      ck_assert_msg(e.indices[block_id + p] == rows[r][p],
                    "request %d page %d: %d, want %d", r, p,
                    e.indices[block_id + p], rows[r][p]);
    block_id += needed;
    ck_assert_int_eq(block_id, e.indptr[r + 1]);
  }
  free_export(&e);
  clReleaseMemObject(idx_buffer);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * OpenVINO's PagedAttention writes sequence b's tokens, rows
 * [subsequence_begins[b], subsequence_begins[b+1]) of its input, into
 * positions past_lens[b] on of its blocks: a request with tokens and no
 * block would write into a block it does not have. A padding entry and a
 * rejected request have no tokens: padding at the end of the batch (how
 * Model Runner V2 pads) leaves query_start_loc as it is for the requests
 * before it; one in the middle moves the begins after it back by its
 * tokens, so that the begins still count only tokens with blocks.
 */
START_TEST(requests_without_blocks_have_no_tokens) {
  clbt_table *table = worked_table(6);
  const int64_t positions[] = {4, 5, 2, 0, 0, 7};
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  /* Rows 0 and 1, then two padding entries of one token each. */
  const int32_t tail_idx[] = {0, 1, -1, -1}, tail_qsl[] = {0, 2, 3, 4, 5};
  const int32_t tail_begins[] = {0, 2, 3, 3, 3, 3};
  /* Row 0, padding of 2 tokens, row 1, a row past the table: the begins of
     row 1 move back by 2, and the rejected one has none. */
  const int32_t mid_idx[] = {0, -1, 1, 9}, mid_qsl[] = {0, 2, 4, 5, 6};
  const int32_t mid_begins[] = {0, 2, 2, 3, 3, 3};
  const int32_t *idx[] = {tail_idx, mid_idx}, *qsl[] = {tail_qsl, mid_qsl};
  const int32_t *begins[] = {tail_begins, mid_begins};
  const int64_t mid_positions[] = {4, 5, 0, 0, 2, 0};
  for (int c = 0; c < 2; ++c) {
    cl_mem idx_buffer = clbt_test_buffer(4 * sizeof(int32_t), idx[c]);
    cl_mem qsl_buffer = clbt_test_buffer(5 * sizeof(int32_t), qsl[c]);
    if (c == 1)
      clbt_test_write(positions_buffer, sizeof mid_positions, mid_positions);
    poison_export(table);
    clbt_export_request request = {
        .num_reqs = 4, .num_reqs_padded = 5, .query_start_loc = qsl_buffer,
        .positions = positions_buffer, .num_tokens = (uint32_t)qsl[c][4],
        .idx_mapping = idx_buffer};
    clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
    exported e = read_export(table, 6);
    for (int b = 0; b <= 5; ++b)
      ck_assert_msg(e.subsequence_begins[b] == begins[c][b],
                    "case %d: subsequence_begins[%d] is %d, want %d", c, b,
                    e.subsequence_begins[b], begins[c][b]);
    ck_assert_int_eq(e.subsequence_begins[6], CLBT_TEST_POISON32);
    /* Row 1's one token is still its position 2, of length 3. */
    ck_assert_int_eq(e.past_lens[c == 0 ? 1 : 2], 2);
    ck_assert_int_eq(e.max_seq_len, 6);
    free_export(&e);
    clReleaseMemObject(idx_buffer);
    clReleaseMemObject(qsl_buffer);
  }
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * The dense page table at a pitch the caller chose. Rows of 4-token
 * blocks {7, 3, 8}, {5}, {6, 2}; requests of lengths 9, 1 and 6 need 3, 1
 * and 2 pages. At pitch 3 every row fits, zeros after its pages; at pitch
 * 2 request 0 (3 pages) is rejected everywhere, counted, and its row is
 * zero; a pitch whose rows pass the table's max_num_reqs x width entries
 * is refused before anything runs; without CLBT_EXPORT_DENSE the table is
 * not written.
 */
START_TEST(dense_rows_at_a_chosen_pitch) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 3,
                              .max_num_blocks_per_req = 3,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 3, 8}, 3));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_add_row(table, 2, (const int32_t[]){6, 2}, 2));
  clbt_assert_ok(clbt_table_commit(table, 3));
  const int32_t qsl[] = {0, 1, 2, 3}, seq_lens[] = {9, 1, 6};
  const int64_t positions[] = {8, 0, 5};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem lengths_buffer = clbt_test_buffer(sizeof seq_lens, seq_lens);
  clbt_export_request request = {
      .num_reqs = 3, .query_start_loc = qsl_buffer,
      .positions = positions_buffer, .num_tokens = 3,
      .seq_lens = lengths_buffer, .flags = CLBT_EXPORT_DENSE,
      .dense_row_pitch = 3};
  const int32_t P = CLBT_TEST_POISON32;
  const int32_t at_3[] = {7, 3, 8, 5, 0, 0, 6, 2, 0};
  const int32_t at_2[] = {0, 0, 5, 0, 6, 2, P, P, P};
  const int32_t *want[] = {at_3, at_2};
  for (int c = 0; c < 2; ++c) {
    uint32_t before = 0, after = 0;
    request.dense_row_pitch = c == 0 ? 3 : 2;
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &before));
    poison_export(table);
    clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
    exported e = read_export(table, 3);
    for (int i = 0; i < 9; ++i)
      ck_assert_msg(e.page_table[i] == want[c][i],
                    "pitch %u entry %d: %d, want %d", request.dense_row_pitch,
                    i, e.page_table[i], want[c][i]);
    ck_assert_int_eq(e.seq_lens[0], c == 0 ? 9 : 0);
    ck_assert_int_eq(e.indptr[1], c == 0 ? 3 : 0);
    ck_assert_int_eq(e.seq_lens[2], 6);
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &after));
    ck_assert_uint_eq(after - before, (uint32_t)c);
    free_export(&e);
  }
  /* Four rows of 3 exceed the table's 3 x 3 entries. */
  request.dense_row_pitch = 4;
  clbt_assert_fails(
      clbt_table_enqueue_export(table, &request, 0, NULL, NULL),
      CLBT_INVALID_ARGUMENT, "dense_row_pitch 4 x num_reqs_padded 3");
  /* Pitch 0 is the width; without the flag nothing is written. */
  request.dense_row_pitch = 0;
  poison_export(table);
  clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
  exported e = read_export(table, 3);
  for (int i = 0; i < 9; ++i) ck_assert_int_eq(e.page_table[i], at_3[i]);
  free_export(&e);
  request.flags = 0;
  poison_export(table);
  clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
  e = read_export(table, 3);
  for (int i = 0; i < 9; ++i) {
    ck_assert_int_eq(e.page_table[i], CLBT_TEST_POISON32);
    ck_assert_int_eq(e.context_indices[i], CLBT_TEST_POISON32);
  }
  ck_assert_int_eq(e.context_indptr[0], CLBT_TEST_POISON32);
  ck_assert_int_eq(e.seq_lens[0], 9);
  free_export(&e);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clReleaseMemObject(lengths_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * Request 1 of the worked example made inconsistent four ways: its end
 * past num_tokens, its end before its begin, a caller's length below its
 * scheduled tokens, and its end past num_tokens again with a caller's
 * length (3) that holds its 2 tokens, so that only the bound on its end
 * rejects it (from positions, the read past the batch could give a length
 * that rejects it anyway). Each time it alone gets no pages, no length
 * and no tokens, and is counted; request 0 keeps its pages 7 and 3.
 */
START_TEST(inconsistent_requests_are_rejected) {
  clbt_table *table = worked_table(2);
  const int32_t qsls[4][3] = {{0, 2, 4}, {0, 2, 1}, {0, 2, 3}, {0, 2, 4}};
  const uint32_t num_tokens[4] = {3, 3, 3, 3};
  const int32_t lengths[2] = {6, 0}; /* request 1 schedules 1 token */
  const int32_t long_lengths[2] = {6, 3};
  const int64_t positions[] = {4, 5, 2};
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem lengths_buffer = clbt_test_buffer(sizeof lengths, lengths);
  cl_mem long_lengths_buffer =
      clbt_test_buffer(sizeof long_lengths, long_lengths);
  for (int c = 0; c < 4; ++c) {
    cl_mem qsl = clbt_test_buffer(sizeof qsls[c], qsls[c]);
    uint32_t before = 0, after = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &before));
    poison_export(table);
    cl_mem seq_lens = c == 2   ? lengths_buffer
                      : c == 3 ? long_lengths_buffer
                               : NULL;
    clbt_export_request request = {
        .num_reqs = 2, .query_start_loc = qsl, .positions = positions_buffer,
        .num_tokens = num_tokens[c], .seq_lens = seq_lens,
        .flags = CLBT_EXPORT_CONTEXT};
    clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
    exported e = read_export(table, 2);
    ck_assert_int_eq(e.indptr[1], 2);
    ck_assert_int_eq(e.indices[0], 7);
    ck_assert_int_eq(e.indices[1], 3);
    ck_assert_int_eq(e.last_page_len[0], 2);
    ck_assert_msg(e.indptr[2] == 2, "case %d: request 1 has pages", c);
    ck_assert_int_eq(e.last_page_len[1], 0);
    ck_assert_int_eq(e.past_lens[1], 0);
    ck_assert_int_eq(e.seq_lens[1], 0);
    ck_assert_int_eq(e.local_seq_lens[1], 0);
    ck_assert_int_eq(e.context_indptr[2], e.context_indptr[1]);
    ck_assert_int_eq(e.context_last_page_len[1], 0);
    ck_assert_int_eq(e.subsequence_begins[2], 2);
    ck_assert_int_eq(e.max_seq_len, 6);
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &after));
    ck_assert_uint_eq(after - before, 1);
    free_export(&e);
    clReleaseMemObject(qsl);
  }
  clReleaseMemObject(positions_buffer);
  clReleaseMemObject(lengths_buffer);
  clReleaseMemObject(long_lengths_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * subsequence_begins[0] is query_start_loc[0] clamped to [0, num_tokens]
 * (docs/semantics.md): {-2, 2, 3} of 3 tokens begins at 0. Request 0
 * (begin -2) is rejected, with no pages or tokens; request 1 has its 1
 * token at position 2 (length 3, page 5 with 3 tokens): begins {0, 0, 1}.
 */
START_TEST(subsequences_begin_within_the_batch) {
  clbt_table *table = worked_table(2);
  const int32_t qsl[3] = {-2, 2, 3};
  const int64_t positions[] = {4, 5, 2};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  uint32_t before = 0, after = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &before));
  poison_export(table);
  clbt_export_request request = {
      .num_reqs = 2, .query_start_loc = qsl_buffer,
      .positions = positions_buffer, .num_tokens = 3};
  clbt_assert_ok(clbt_table_enqueue_export(table, &request, 0, NULL, NULL));
  exported e = read_export(table, 2);
  const int32_t begins[3] = {0, 0, 1}, indptr[3] = {0, 0, 1};
  for (int i = 0; i < 3; ++i) {
    ck_assert_int_eq(e.subsequence_begins[i], begins[i]);
    ck_assert_int_eq(e.indptr[i], indptr[i]);
  }
  ck_assert_int_eq(e.indices[0], 5);
  ck_assert_int_eq(e.last_page_len[1], 3);
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &after));
  ck_assert_uint_eq(after - before, 1);
  free_export(&e);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/*
 * Earlier layouts keep working. clbt_export_buffers, which clbt fills, is
 * frozen and written whole: struct_size 0 (0.4's way of asking for 0.3's
 * fields) receives every field, as its size does (tests/base/test_abi.c
 * tries every other value). A step whose struct_size is 0.3's has no
 * export_flags: the bytes past it are not read, so the page table is not
 * written; with the struct's size it is.
 */
START_TEST(structs_of_earlier_layouts_keep_working) {
  clbt_table *table = worked_table(2);
  clbt_export_buffers zero = {.struct_size = 0};
  clbt_assert_ok(clbt_table_export_buffers(table, &zero));
  ck_assert_ptr_nonnull(zero.paged_kv_indptr);
  ck_assert_uint_eq(zero.page_size, 4);
  clbt_export_buffers all = CLBT_EXPORT_BUFFERS_INIT;
  clbt_assert_ok(clbt_table_export_buffers(table, &all));
  ck_assert_ptr_nonnull(all.page_table);
  ck_assert_ptr_nonnull(all.context_kv_last_page_len);
  ck_assert_uint_eq(all.struct_size, sizeof all);
  ck_assert_mem_eq(&zero, &all, sizeof all);

  const int32_t qsl[] = {0, 2, 3};
  const int64_t positions[] = {4, 5, 2};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_EXPORT;
  step.num_reqs = 2;
  step.num_tokens = 3;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  step.export_flags = CLBT_EXPORT_DENSE;
  for (int c = 0; c < 2; ++c) {
    step.struct_size =
        c == 0 ? (uint32_t)offsetof(clbt_step, export_flags) : sizeof step;
    poison_export(table);
    clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
    exported e = read_export(table, 2);
    ck_assert_int_eq(e.indptr[2], 3);
    ck_assert_int_eq(e.page_table[0], c == 0 ? CLBT_TEST_POISON32 : 7);
    ck_assert_int_eq(e.page_table[2], c == 0 ? CLBT_TEST_POISON32 : 5);
    free_export(&e);
  }
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/* ---- the round trip ---------------------------------------------------- */

/* A served world: one multi-group table per CP rank, with the same rows. */
typedef struct world {
  const clbt_group_config *groups;
  uint32_t num_groups, cp_world_size, cp_interleave_size;
  clbt_multi_table *ranks[MAX_RANKS];
  int32_t *cache[MAX_RANKS][MAX_GROUPS]; /* by slot */
  size_t cache_slots[MAX_GROUPS];
  uint32_t length[MAX_REQS];             /* tokens each request holds */
  size_t row_blocks[MAX_GROUPS][MAX_REQS];
  uint32_t dealt;                        /* KV-manager ids handed out */
  int32_t written[MAX_REQS][MAX_POSITIONS]; /* -1: nothing */
  uint32_t step;
} world;

static bool maps_tokens(const world *w, uint32_t g) {
  return w->groups[g].slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
}

/* vLLM's rule: position p lives on the rank its interleave slice is dealt to. */
static bool owns(const world *w, uint32_t g, uint32_t rank, uint32_t p) {
  uint32_t virtual_block = w->groups[g].block_size * w->cp_world_size;
  return (p % virtual_block) / w->cp_interleave_size % w->cp_world_size == rank;
}

static void world_create(world *w, const clbt_group_config *groups,
                         uint32_t num_groups, uint32_t cp_world_size,
                         uint32_t cp_interleave_size) {
  memset(w, 0, sizeof *w);
  w->groups = groups;
  w->num_groups = num_groups;
  w->cp_world_size = cp_world_size;
  w->cp_interleave_size = cp_interleave_size;
  /* Never written: -1, as in the caches. */
  memset(w->written, 0xFF, sizeof w->written);
  for (uint32_t rank = 0; rank < cp_world_size; ++rank) {
    clbt_multi_table_config config = {
        .max_num_reqs = MAX_REQS, .max_num_batched_tokens = MAX_TOKENS,
        .num_groups = num_groups, .groups = groups,
        .cp_world_size = cp_world_size, .cp_rank = rank,
        .cp_interleave_size = cp_interleave_size};
    clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config,
                                           &w->ranks[rank]));
    for (uint32_t g = 0; g < num_groups; ++g) {
      uint32_t kernel = groups[g].kernel_block_size ? groups[g].kernel_block_size
                                                    : groups[g].block_size;
      w->cache_slots[g] = (size_t)KV_BLOCKS * (groups[g].block_size / kernel) *
                          kernel;
      w->cache[rank][g] = malloc(w->cache_slots[g] * sizeof(int32_t));
      ck_assert_ptr_nonnull(w->cache[rank][g]);
      for (size_t s = 0; s < w->cache_slots[g]; ++s) w->cache[rank][g][s] = -1;
    }
  }
}

static void world_destroy(world *w) {
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank) {
    clbt_multi_table_destroy(w->ranks[rank]);
    for (uint32_t g = 0; g < w->num_groups; ++g) free(w->cache[rank][g]);
  }
}

/* Gives every token group's row r the KV-manager blocks `length` needs. */
static void grow_rows(world *w, uint32_t r, uint32_t length) {
  int32_t ids[MAX_GROUPS][MAX_POSITIONS];
  const int32_t *id_lists[MAX_GROUPS];
  size_t counts[MAX_GROUPS] = {0};
  for (uint32_t g = 0; g < w->num_groups; ++g) {
    id_lists[g] = ids[g];
    if (!maps_tokens(w, g)) continue;
    uint32_t span = w->groups[g].block_size * w->cp_world_size;
    size_t needed = (length + span - 1) / span;
    for (; w->row_blocks[g][r] + counts[g] < needed; ++counts[g])
      ids[g][counts[g]] = (int32_t)((++w->dealt * 37u) % KV_BLOCKS);
    w->row_blocks[g][r] += counts[g];
  }
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
    clbt_assert_ok(clbt_multi_table_append_row(w->ranks[rank], r, id_lists,
                                               counts));
}

/* Speculative rollback: request r keeps its first `length` tokens. */
static void roll_back(world *w, uint32_t r, uint32_t length) {
  size_t keep[MAX_GROUPS] = {0};
  for (uint32_t g = 0; g < w->num_groups; ++g) {
    uint32_t span = w->groups[g].block_size * w->cp_world_size;
    if (maps_tokens(w, g)) w->row_blocks[g][r] = (length + span - 1) / span;
    keep[g] = w->row_blocks[g][r];
  }
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
    clbt_assert_ok(clbt_multi_table_truncate_row(w->ranks[rank], r, keep));
  for (uint32_t p = length; p < w->length[r]; ++p) w->written[r][p] = -1;
  w->length[r] = length;
}

/* One step's schedule, and how it is exported. */
typedef struct schedule {
  uint32_t num_reqs, num_reqs_padded;
  uint32_t tokens[MAX_REQS];  /* new tokens per request */
  const int32_t *seq_lens;    /* NULL: from the batch */
} schedule;

/*
 * The tokens request r of group g must read back on a rank: the values
 * written at the positions below `length` the rank owns, in order.
 */
static uint32_t expected_tokens(const world *w, uint32_t g, uint32_t rank,
                                uint32_t r, uint32_t length, int32_t *out) {
  uint32_t count = 0;
  for (uint32_t p = 0; p < length; ++p)
    if (owns(w, g, rank, p))
      out[count++] = p < MAX_POSITIONS ? w->written[r][p] : -1;
  return count;
}

/* Reads `count` tokens of a page list: token i is page i / size, at i % size. */
static void read_pages(const int32_t *cache, const int32_t *pages,
                       uint32_t page_size, uint32_t count, int32_t *out) {
  for (uint32_t i = 0; i < count; ++i)
    out[i] = cache[(size_t)pages[i / page_size] * page_size + i % page_size];
}

/* What a batch request reads: a request's row, or no row; an empty row
   (a request slot nobody holds) rejects the tokens scheduled on it. */
enum { PADDING = -1, OUT_OF_RANGE = -2, EMPTY_SLOT = -3 };

/* An exported batch: per request b, the world's request it reads (or
   PADDING, OUT_OF_RANGE, EMPTY_SLOT) and its length; the export's flags
   and dense row pitch. */
typedef struct batch_view {
  uint32_t num_reqs, num_reqs_padded;
  const int32_t *qsl;
  int32_t request[MAX_REQS];
  uint32_t length[MAX_REQS];
  uint32_t flags, pitch;
} batch_view;

/*
 * Reads a CSR list of `pages` pages whose last holds `last` tokens, as
 * FlashInfer's get_seq_lens counts them: (pages - 1) * size + last tokens,
 * and every page it counts must be listed (the trtllm-gen plan takes
 * ceil(tokens / size) pages of each request in turn). Returns the count.
 */
static uint32_t read_csr(const int32_t *cache, const int32_t *pages,
                         int32_t count, int32_t last, uint32_t page_size,
                         int32_t *out) {
  ck_assert_int_ge(count, 0);
  uint32_t tokens =
      (uint32_t)(count > 1 ? count - 1 : 0) * page_size + (uint32_t)last;
  if (count) ck_assert_int_ge(last, 1);
  else ck_assert_int_eq(last, 0);
  ck_assert_int_le(last, (int32_t)page_size);
  ck_assert_uint_eq((tokens + page_size - 1) / page_size, (uint32_t)count);
  read_pages(cache, pages, page_size, tokens, out);
  return tokens;
}

static void assert_tokens(const int32_t *got, const int32_t *want,
                          uint32_t count, const char *layout, uint32_t rank,
                          uint32_t g, uint32_t b) {
  for (uint32_t i = 0; i < count; ++i)
    ck_assert_msg(got[i] == want[i],
                  "%s, rank %u group %u request %u token %u: %d, want %d",
                  layout, rank, g, b, i, got[i], want[i]);
}

/*
 * Batch request b's tokens through every layout: those of the world's
 * request r, whose row b reads. It must read nothing when the pages its
 * tokens on this rank fill are more than its row holds, or than a dense
 * row's pitch; returns whether it was so rejected.
 */
static bool check_request(const world *w, uint32_t g, uint32_t rank,
                          const exported *e, const batch_view *v, uint32_t b,
                          uint32_t width) {
  int32_t want[MAX_POSITIONS * 16], got[MAX_POSITIONS * 16];
  uint32_t r = (uint32_t)v->request[b], length = v->length[b];
  uint32_t page = e->page_size;
  uint32_t query = (uint32_t)(v->qsl[b + 1] - v->qsl[b]);
  uint32_t want_count = expected_tokens(w, g, rank, r, length, want);
  uint32_t pages = (want_count + page - 1) / page;
  size_t row_pages = w->row_blocks[g][r] * (w->groups[g].block_size / page);
  uint32_t pitch = v->pitch ? v->pitch : width;
  bool dense = v->flags & CLBT_EXPORT_DENSE;
  bool rejected = pages > row_pages || (dense && pages > pitch);
  if (rejected) want_count = pages = 0;
  const int32_t *cache = w->cache[rank][g];
  /* FlashInfer: pages from indptr, the last one cut by last_page_len. */
  uint32_t csr_count =
      read_csr(cache, e->indices + e->indptr[b], e->indptr[b + 1] - e->indptr[b],
               e->last_page_len[b], page, got);
  ck_assert_msg(csr_count == want_count,
                "rank %u group %u request %u (row of %u): %u tokens through "
                "CSR, want %u",
                rank, g, b, r, csr_count, want_count);
  assert_tokens(got, want, want_count, "CSR", rank, g, b);
  /* The lengths: the whole length and this rank's part. */
  ck_assert_int_eq(e->seq_lens[b], rejected ? 0 : (int32_t)length);
  ck_assert_int_eq(e->local_seq_lens[b], (int32_t)want_count);
  /* OpenVINO: past_lens, then the query's tokens this rank holds. */
  uint32_t query_owned = 0;
  for (uint32_t p = length - query; !rejected && p < length; ++p)
    query_owned += owns(w, g, rank, p);
  uint32_t ov_count = (uint32_t)e->past_lens[b] + query_owned;
  ck_assert_msg(rejected ? e->past_lens[b] == 0 : ov_count == want_count,
                "rank %u group %u request %u: past %d + query %u, want %u",
                rank, g, b, e->past_lens[b], query_owned, want_count);
  /* The context alone: the positions before the query this rank holds. */
  if (v->flags & CLBT_EXPORT_CONTEXT) {
    int32_t context[MAX_POSITIONS * 16];
    uint32_t context_count =
        rejected ? 0 : expected_tokens(w, g, rank, r, length - query, context);
    uint32_t got_count = read_csr(
        cache, e->context_indices + e->context_indptr[b],
        e->context_indptr[b + 1] - e->context_indptr[b],
        e->context_last_page_len[b], page, got);
    ck_assert_msg(got_count == context_count,
                  "rank %u group %u request %u: %u context tokens, want %u",
                  rank, g, b, got_count, context_count);
    assert_tokens(got, context, context_count, "context CSR", rank, g, b);
    ck_assert_int_eq(e->past_lens[b], (int32_t)context_count);
  }
  /* The dense row: its pages, then zeros, read up to the rank's length. */
  if (dense) {
    const int32_t *row = e->page_table + (size_t)b * pitch;
    read_pages(cache, row, page, (uint32_t)e->local_seq_lens[b], got);
    assert_tokens(got, want, want_count, "page_table", rank, g, b);
    for (uint32_t p = pages; p < pitch; ++p) ck_assert_int_eq(row[p], 0);
  }
  return rejected;
}

/* A request with nothing to export: no pages and no lengths anywhere. */
static void check_nothing(const exported *e, const batch_view *v, uint32_t b,
                          uint32_t width, bool has_length) {
  ck_assert_int_eq(e->indptr[b + 1], e->indptr[b]);
  ck_assert_int_eq(e->last_page_len[b], 0);
  ck_assert_int_eq(e->past_lens[b], 0);
  ck_assert_int_eq(e->seq_lens[b], has_length ? (int32_t)v->length[b] : 0);
  ck_assert_int_eq(e->local_seq_lens[b], 0);
  if (v->flags & CLBT_EXPORT_CONTEXT) {
    ck_assert_int_eq(e->context_indptr[b + 1], e->context_indptr[b]);
    ck_assert_int_eq(e->context_last_page_len[b], 0);
  }
  uint32_t pitch = v->pitch ? v->pitch : width;
  for (uint32_t p = 0; (v->flags & CLBT_EXPORT_DENSE) && p < pitch; ++p)
    ck_assert_int_eq(e->page_table[(size_t)b * pitch + p], 0);
}

/*
 * Checks a group's export on a rank; returns the requests it must reject
 * (those whose row is too short, and those whose row is out of range).
 * subsequence_begins counts the tokens of requests that export pages or a
 * length: padding and rejected requests have none.
 */
static uint32_t check_export(const world *w, uint32_t g, uint32_t rank,
                             const batch_view *v) {
  const clbt_table *group = clbt_multi_table_group(w->ranks[rank], g);
  uint32_t rejected = 0, width = clbt_table_width(group);
  exported e = read_export(group, MAX_REQS);
  uint32_t padded = v->num_reqs_padded ? v->num_reqs_padded : v->num_reqs;
  const int32_t *qsl = v->qsl;
  int32_t begin = qsl[0], longest = 0;
  ck_assert_int_eq(e.indptr[0], 0);
  if (v->flags & CLBT_EXPORT_CONTEXT) ck_assert_int_eq(e.context_indptr[0], 0);
  for (uint32_t b = 0; b < padded; ++b) {
    ck_assert_msg(e.subsequence_begins[b] == begin,
                  "rank %u group %u: subsequence_begins[%u] is %d, want %d",
                  rank, g, b, e.subsequence_begins[b], begin);
    int32_t request = b < v->num_reqs ? v->request[b] : PADDING;
    bool exports;
    if (request >= 0) {
      exports = !check_request(w, g, rank, &e, v, b, width);
    } else {
      /* An empty row is too short when this rank owns any of the length. */
      uint32_t owned = 0;
      for (uint32_t p = 0; p < v->length[b]; ++p) owned += owns(w, g, rank, p);
      exports = request == EMPTY_SLOT && owned == 0;
      check_nothing(&e, v, b, width, exports);
    }
    rejected += request >= 0 ? !exports
                : request == OUT_OF_RANGE || (request == EMPTY_SLOT && !exports);
    if (exports) {
      begin += qsl[b + 1] - qsl[b];
      if ((int32_t)v->length[b] > longest) longest = (int32_t)v->length[b];
    }
  }
  ck_assert_int_eq(e.subsequence_begins[padded], begin);
  ck_assert_int_eq(e.max_seq_len, longest);
  /* Nothing past the padded batch is written. */
  if (padded < MAX_REQS) {
    ck_assert_int_eq(e.indptr[padded + 1], CLBT_TEST_POISON32);
    ck_assert_int_eq(e.last_page_len[padded], CLBT_TEST_POISON32);
    ck_assert_int_eq(e.seq_lens[padded], CLBT_TEST_POISON32);
    ck_assert_int_eq(e.context_indptr[padded + 1], CLBT_TEST_POISON32);
  }
  ck_assert_int_eq(e.indices[e.indptr[padded]], CLBT_TEST_POISON32);
  if (v->flags & CLBT_EXPORT_CONTEXT)
    ck_assert_int_eq(e.context_indices[e.context_indptr[padded]],
                     CLBT_TEST_POISON32);
  else
    ck_assert_int_eq(e.context_indptr[0], CLBT_TEST_POISON32);
  uint32_t pitch = v->pitch ? v->pitch : width;
  size_t dense_end = v->flags & CLBT_EXPORT_DENSE ? (size_t)padded * pitch : 0;
  if (dense_end < (size_t)MAX_REQS * width)
    ck_assert_int_eq(e.page_table[dense_end], CLBT_TEST_POISON32);
  free_export(&e);
  return rejected;
}

/* Maps a step's tokens on every rank and writes their values to the caches. */
static void write_tokens(world *w, const int32_t *qsl, const int64_t *positions,
                         uint32_t num_reqs, uint32_t num_tokens) {
  cl_mem qsl_buffer = clbt_test_buffer((num_reqs + 1) * sizeof *qsl, qsl);
  cl_mem positions_buffer =
      clbt_test_buffer(num_tokens * sizeof *positions, positions);
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank) {
    clbt_assert_ok(clbt_multi_table_compute_slot_mapping(
        w->ranks[rank], num_reqs, qsl_buffer, positions_buffer, num_tokens));
    for (uint32_t g = 0; g < w->num_groups; ++g) {
      if (!maps_tokens(w, g)) continue;
      int64_t slots[MAX_TOKENS];
      clbt_test_read(clbt_table_slot_mapping(
                         clbt_multi_table_group(w->ranks[rank], g)),
                     sizeof slots, slots);
      for (uint32_t r = 0; r < num_reqs; ++r)
        for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t) {
          if (slots[t] == CLBT_PAD_SLOT_ID) continue;
          ck_assert_int_lt(slots[t], (int64_t)w->cache_slots[g]);
          w->cache[rank][g][slots[t]] = w->written[r][positions[t]];
        }
    }
  }
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
}

static uint32_t read_rejected(const world *w, uint32_t rank, uint32_t g) {
  uint32_t count = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(
      clbt_multi_table_group(w->ranks[rank], g), &count));
  return count;
}

/*
 * Exports a batch on every rank (the request's buffers are the caller's)
 * and checks every token group's export and rejected-token count.
 */
static void export_and_check(world *w, const clbt_export_request *request,
                             const batch_view *view) {
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank) {
    uint32_t before[MAX_GROUPS] = {0};
    for (uint32_t g = 0; g < w->num_groups; ++g)
      if (maps_tokens(w, g)) {
        poison_export(clbt_multi_table_group(w->ranks[rank], g));
        before[g] = read_rejected(w, rank, g);
      }
    clbt_assert_ok(
        clbt_multi_table_enqueue_export(w->ranks[rank], request, 0, NULL, NULL));
    for (uint32_t g = 0; g < w->num_groups; ++g) {
      if (!maps_tokens(w, g)) continue;
      uint32_t rejected = check_export(w, g, rank, view);
      ck_assert_uint_eq(read_rejected(w, rank, g) - before[g], rejected);
    }
  }
}

/*
 * One step: grow the rows, commit, write the new tokens through the slot
 * mapping, export on every rank and read every request back.
 */
static void run_step(world *w, const schedule *s) {
  int32_t qsl[MAX_REQS + 1] = {0};
  int64_t positions[MAX_TOKENS];
  uint32_t lengths[MAX_REQS];
  ++w->step;
  for (uint32_t r = 0; r < s->num_reqs; ++r) {
    qsl[r + 1] = qsl[r] + (int32_t)s->tokens[r];
    for (uint32_t i = 0; i < s->tokens[r]; ++i) {
      uint32_t p = w->length[r] + i;
      positions[qsl[r] + (int32_t)i] = p;
      w->written[r][p] = (int32_t)(r * 1000000 + w->step * 1000 + p);
    }
    w->length[r] += s->tokens[r];
    grow_rows(w, r, w->length[r]);
    /* A request with no token here has length 0 unless lengths are given. */
    lengths[r] = s->seq_lens ? (uint32_t)s->seq_lens[r]
                 : s->tokens[r] ? w->length[r]
                                : 0;
  }
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
    clbt_assert_ok(clbt_multi_table_commit(w->ranks[rank], s->num_reqs));
  uint32_t num_tokens = (uint32_t)qsl[s->num_reqs];
  write_tokens(w, qsl, positions, s->num_reqs, num_tokens);

  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem lengths_buffer =
      s->seq_lens ? clbt_test_buffer(s->num_reqs * sizeof(int32_t), s->seq_lens)
                  : NULL;
  /* Steps take turns: the base export; with the context CSR and the page
     table at the width; at a pitch of 3, which some requests outgrow. */
  const uint32_t flags = w->step % 3 ? CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE
                                     : 0;
  const uint32_t pitch = w->step % 3 == 2 ? 3 : 0;
  clbt_export_request request = {
      .num_reqs = s->num_reqs, .num_reqs_padded = s->num_reqs_padded,
      .query_start_loc = qsl_buffer, .positions = positions_buffer,
      .num_tokens = num_tokens, .seq_lens = lengths_buffer, .flags = flags,
      .dense_row_pitch = pitch};
  batch_view view = {s->num_reqs, s->num_reqs_padded, qsl, {0}, {0}, flags,
                     pitch};
  for (uint32_t r = 0; r < s->num_reqs; ++r) {
    view.request[r] = (int32_t)r;
    view.length[r] = lengths[r];
  }
  export_and_check(w, &request, &view);
  if (lengths_buffer) clReleaseMemObject(lengths_buffer);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
}

/* ---- the persistent model: rows in request slots, read through
   idx_mapping ------------------------------------------------------------ */

/*
 * Where the world's requests 0..3 live: request 0 in slot 5, 1 in 2, 2 in
 * 0, 3 in 3; slots 1 and 4 are empty. The moves that put them there
 * (clbt_multi_table_move_row clears its source), undone in reverse.
 */
static const int32_t slot_of[4] = {5, 2, 0, 3};
static const uint32_t to_slots[3][2] = {{0, 5}, {2, 0}, {1, 2}};

static void move_rows(world *w, bool back) {
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
    for (uint32_t i = 0; i < 3; ++i) {
      const uint32_t *move = to_slots[back ? 2 - i : i];
      clbt_assert_ok(clbt_multi_table_move_row(w->ranks[rank], move[back],
                                               move[!back]));
    }
}

/* The world's request in slot `entry`, or what the entry is instead. */
static int32_t request_in(int32_t entry) {
  if (entry < 0) return PADDING;
  if (entry >= MAX_REQS) return OUT_OF_RANGE;
  for (int32_t r = 0; r < 4; ++r)
    if (slot_of[r] == entry) return r;
  return EMPTY_SLOT;
}

/* A batch in the persistent model: idx_mapping, and whether it passes
   lengths (seq_lens, by batch request). */
typedef struct slot_batch {
  uint32_t num_reqs, num_reqs_padded;
  int32_t idx_mapping[MAX_REQS];
  bool seq_lens;
  uint32_t flags, pitch; /* the export's */
} slot_batch;

/*
 * Exports a batch that reads the world's rows through idx_mapping: batch
 * request b reading request r schedules its last 1 + b % 2 tokens (length:
 * all r holds); the other entries schedule one token at position 0, which
 * they must not read. Every request must read back what
 * the slot mapping wrote for its request.
 */
static void export_slot_batch(world *w, const slot_batch *sb) {
  int32_t qsl[MAX_REQS + 1] = {0}, seq_lens[MAX_REQS];
  int64_t positions[MAX_REQS * 2];
  batch_view view = {sb->num_reqs, sb->num_reqs_padded, qsl, {0}, {0},
                     sb->flags, sb->pitch};
  for (uint32_t b = 0; b < sb->num_reqs; ++b) {
    int32_t r = request_in(sb->idx_mapping[b]);
    uint32_t length = r >= 0 ? w->length[r] : 1;
    uint32_t tokens = r >= 0 ? 1 + b % 2 : 1;
    view.request[b] = r;
    view.length[b] = length;
    seq_lens[b] = r >= 0 ? (int32_t)length : 1000; /* padding: ignored */
    qsl[b + 1] = qsl[b] + (int32_t)tokens;
    for (uint32_t i = 0; i < tokens; ++i)
      positions[qsl[b] + (int32_t)i] = length - tokens + i;
  }
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem idx_buffer = clbt_test_buffer(
      sb->num_reqs * sizeof(int32_t), sb->idx_mapping);
  cl_mem lengths_buffer =
      clbt_test_buffer(sb->num_reqs * sizeof(int32_t), seq_lens);
  clbt_export_request request = {
      .num_reqs = sb->num_reqs, .num_reqs_padded = sb->num_reqs_padded,
      .query_start_loc = qsl_buffer, .positions = positions_buffer,
      .num_tokens = (uint32_t)qsl[sb->num_reqs],
      .seq_lens = sb->seq_lens ? lengths_buffer : NULL,
      .idx_mapping = idx_buffer, .flags = sb->flags,
      .dense_row_pitch = sb->pitch};
  export_and_check(w, &request, &view);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clReleaseMemObject(idx_buffer);
  clReleaseMemObject(lengths_buffer);
}

/*
 * Padding entries, a request read twice, a padded batch, rows past
 * max_num_reqs and an empty slot (rejected, counted), a request left out,
 * lengths by batch request.
 */
static const slot_batch slot_batches[] = {
    {5, 6, {2, -1, 5, 0, 5}, false, CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE, 0},
    {6, 0, {3, 7, -5, 2, 2, 0}, true, CLBT_EXPORT_CONTEXT, 0},
    {4, 5, {5, 3, INT32_MAX, 1}, false, CLBT_EXPORT_DENSE, 4},
};

/*
 * Moves the rows into their slots, commits every row, exports the slot
 * batches, and moves the rows back for the steps that follow.
 */
static void export_through_slots(world *w) {
  move_rows(w, false);
  for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
    clbt_assert_ok(clbt_multi_table_commit(w->ranks[rank], MAX_REQS));
  for (size_t i = 0; i < sizeof slot_batches / sizeof slot_batches[0]; ++i)
    export_slot_batch(w, &slot_batches[i]);
  move_rows(w, true);
}

/* Every position of every request lives on exactly one rank. */
static void check_union(const world *w, uint32_t num_reqs) {
  for (uint32_t g = 0; g < w->num_groups; ++g)
    for (uint32_t r = 0; r < num_reqs && maps_tokens(w, g); ++r)
      for (uint32_t p = 0; p < w->length[r]; ++p) {
        uint32_t holders = 0;
        for (uint32_t rank = 0; rank < w->cp_world_size; ++rank)
          holders += owns(w, g, rank, p);
        ck_assert_uint_eq(holders, 1);
      }
}

/* Block 16; block 32 over kernel blocks of 16; a Mamba group (NONE). */
static const clbt_group_config mixed_groups[] = {
    {.block_size = 16, .max_num_blocks = 16},
    {.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 8},
    {.block_size = 64, .max_num_blocks = 2, .slot_mode = CLBT_SLOT_MODE_NONE},
};

/*
 * Prefill of uneven lengths, decodes that cross page boundaries, a step
 * where one request has no token (length 0, no pages), a padded batch, a
 * rollback (truncate) and the decode after it, lengths passed by the
 * caller, and a length past the row (rejected, counted).
 */
static void serve(uint32_t cp_world_size, uint32_t cp_interleave_size) {
  world w;
  world_create(&w, mixed_groups, 3, cp_world_size, cp_interleave_size);
  ck_assert_int_eq(clbt_table_export_buffers(
                       clbt_multi_table_group(w.ranks[0], 2),
                       &(clbt_export_buffers){0}),
                   CLBT_INVALID_ARGUMENT);
  run_step(&w, &(schedule){.num_reqs = 4, .tokens = {37, 5, 16, 1}});
  run_step(&w, &(schedule){.num_reqs = 4, .tokens = {1, 1, 1, 1}});
  run_step(&w, &(schedule){.num_reqs = 4, .num_reqs_padded = 6,
                           .tokens = {1, 0, 2, 1}});
  for (int decode = 0; decode < 12; ++decode)
    run_step(&w, &(schedule){.num_reqs = 4, .num_reqs_padded = 5,
                             .tokens = {1, 1, 1, 1}});
  export_through_slots(&w);
  roll_back(&w, 0, w.length[0] - 9);
  roll_back(&w, 2, w.length[2] - 1);
  run_step(&w, &(schedule){.num_reqs = 4, .tokens = {1, 3, 1, 1}});
  /* The caller's lengths: one token short of what the batch says. */
  int32_t shorter[4];
  for (uint32_t r = 0; r < 4; ++r)
    shorter[r] = (int32_t)w.length[r]; /* the step adds one token */
  run_step(&w, &(schedule){.num_reqs = 4, .tokens = {1, 1, 1, 1},
                           .seq_lens = shorter});
  /*
   * Past the rows: request 1 claims exactly what group 0's row holds,
   * request 2 one token more (group 0's last rank-0 page is then one past
   * its row), request 3 forty blocks' worth.
   */
  uint32_t span = mixed_groups[0].block_size * cp_world_size;
  int32_t too_long[4] = {(int32_t)w.length[0] + 1,
                         (int32_t)(w.row_blocks[0][1] * span),
                         (int32_t)(w.row_blocks[0][2] * span + 1), 40 * 64};
  run_step(&w, &(schedule){.num_reqs = 4, .tokens = {1, 0, 0, 1},
                           .seq_lens = too_long});
  export_through_slots(&w);
  check_union(&w, 4);
  world_destroy(&w);
}

START_TEST(round_trip) { serve(1, 1); }
END_TEST

START_TEST(round_trip_context_parallel) { serve(2, 4); }
END_TEST

START_TEST(round_trip_context_parallel_interleave_1) { serve(2, 1); }
END_TEST

/* Three ranks dealt two tokens at a time: rank 2's share of a virtual
   block is not its neighbours'. */
START_TEST(round_trip_three_ranks) { serve(3, 2); }
END_TEST

/* A multi-group table with no token group exports nothing: a marker. */
START_TEST(only_none_groups) {
  const clbt_group_config none = {.block_size = 8, .max_num_blocks = 2,
                                  .slot_mode = CLBT_SLOT_MODE_NONE};
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = 1, .groups = &none};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  const int32_t qsl[] = {0, 1};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions = clbt_test_buffer(sizeof(int64_t), (const int64_t[]){0});
  clbt_export_request request = {.num_reqs = 1, .query_start_loc = qsl_buffer,
                                 .positions = positions, .num_tokens = 1};
  cl_event done = NULL;
  clbt_assert_ok(
      clbt_multi_table_enqueue_export(table, &request, 0, NULL, &done));
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions);
  clbt_multi_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("export");
  TCase *c = tcase_create("export");
  tcase_add_test(c, worked_example);
  tcase_add_test(c, empty_requests_read_no_tokens);
  tcase_add_test(c, requests_without_blocks_have_no_tokens);
  tcase_add_test(c, dense_rows_at_a_chosen_pitch);
  tcase_add_test(c, inconsistent_requests_are_rejected);
  tcase_add_test(c, subsequences_begin_within_the_batch);
  tcase_add_test(c, structs_of_earlier_layouts_keep_working);
  tcase_add_test(c, round_trip);
  tcase_add_test(c, round_trip_context_parallel);
  tcase_add_test(c, round_trip_context_parallel_interleave_1);
  tcase_add_test(c, round_trip_three_ranks);
  tcase_add_test(c, only_none_groups);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
