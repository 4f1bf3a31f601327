/*
 * Paged attention on hostile batches: what the batch's device arrays hold
 * is checked on the device (docs/semantics.md, "Paged attention"). A
 * malformed cu_seqlens_q gives every token 0 and counts each; a sequence
 * whose query is longer than its context, or whose context is negative,
 * or whose row is outside the table, gives its tokens 0 and counts them; a
 * query token that would read a block id outside its row or the cache
 * gets 0 and is counted, while the tokens of the same sequence that do
 * not reach that block are attended; a padding request's tokens get 0
 * uncounted. Every other token is attended as the independent model
 * (attention_model.c) says.
 */
#include "clbt_test.h"
#include "kv/attention_model.h"

#include <stdlib.h>

static const uint32_t q_lens[] = {1, 7, 40, 1}, seq_lens[] = {150, 60, 300, 1};

static model_spec hostile_spec(uint64_t seed, uint32_t padding) {
  return (model_spec){.num_heads = 4, .num_kv_heads = 2, .head_size = 64,
                      .block_size = 16, .query = CLBT_KV_BFLOAT16,
                      .cache = CLBT_KV_BFLOAT16, .num_seqs = 4,
                      .q_lens = q_lens, .seq_lens = seq_lens,
                      .padding_tokens = padding, .lse = true, .seed = seed};
}

/* Runs a batch of the model, checks every row against the model (whose
   rejected tokens' expectation the test set to 0) and the count. */
static void run(model *m, const clbt_attention_batch *batch,
                uint32_t expected_rejected, const char *name) {
  clbt_attention_config config = model_config(m);
  clbt_attention *attention = NULL;
  clbt_assert_ok(clbt_attention_create(clbt_test_device(), &config,
                                       &attention));
  clbt_assert_ok(clbt_attention_enqueue(attention, m->cache, batch, 0, NULL,
                                        NULL));
  double worst;
  model_check(m, &worst);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_attention_read_rejected_tokens(attention, &rejected));
  ck_assert_msg(rejected == expected_rejected, "%s: %u rejected, expected %u",
                name, (unsigned)rejected, (unsigned)expected_rejected);
  printf("attention, %s: %u tokens rejected, the others within %.2e\n", name,
         (unsigned)rejected, worst);
  clbt_attention_destroy(attention);
}

/* The tokens of sequence q at positions from `from` on: 0; how many. */
static uint32_t reject_from(model *m, uint32_t q, uint32_t from) {
  uint32_t count = 0, first = m->spec.seq_lens[q] - m->spec.q_lens[q];
  for (uint32_t i = 0; i < m->spec.q_lens[q]; ++i)
    if (first + i >= from) {
      model_expect_zero(m, (uint32_t)m->cu[q] + i);
      ++count;
    }
  return count;
}

START_TEST(malformed_cu_seqlens_q) {
  model m;
  model_spec s = hostile_spec(50, 0);
  model_make(&m, &s);
  model_upload(&m);
  int32_t cu[5];
  memcpy(cu, m.cu, sizeof cu);
  cu[2] = cu[3] + 1; /* a sequence ending before it starts */
  clbt_test_write(m.cu_buffer, sizeof cu, cu);
  for (uint32_t t = 0; t < m.num_tokens; ++t) model_expect_zero(&m, t);
  clbt_attention_batch batch = model_batch(&m);
  run(&m, &batch, m.num_tokens, "cu_seqlens_q decreasing");
  model_free(&m);
}
END_TEST

START_TEST(impossible_lengths) {
  model m;
  model_spec s = hostile_spec(51, 2);
  model_make(&m, &s);
  model_upload(&m);
  int32_t used[4] = {-3, 5, 300, 1}; /* sequence 0 negative, 1 below q_len 7 */
  clbt_test_write(m.seqused, sizeof used, used);
  model_expect_zero(&m, 0);
  uint32_t rejected = 1 + reject_from(&m, 1, 0);
  clbt_attention_batch batch = model_batch(&m);
  run(&m, &batch, rejected, "a negative context and one below its query");
  model_free(&m);
}
END_TEST

/* Block ids outside the cache or the row: a decode that reads one, and a
   chunk whose later tokens reach one. */
START_TEST(refused_blocks) {
  model m;
  model_spec s = hostile_spec(52, 2);
  model_make(&m, &s);
  model_upload(&m);
  m.table[3] = (int32_t)m.num_blocks;            /* sequence 0, block 3 */
  m.table[2 * m.max_blocks + 17] = -1;           /* sequence 2, block 17 */
  clbt_test_write(m.block_table,
                  sizeof *m.table * s.num_seqs * m.max_blocks, m.table);
  uint32_t rejected = reject_from(&m, 0, 0) + reject_from(&m, 2, 17 * 16);
  clbt_attention_batch batch = model_batch(&m);
  run(&m, &batch, rejected, "block ids past the cache and -1");
  model_free(&m);
}
END_TEST

/* A table's rows: one committed shorter than its context, one outside the
   table through idx_mapping, one a padding request. */
START_TEST(table_rows_out_of_reach) {
  model m;
  model_spec s = hostile_spec(53, 0);
  model_make(&m, &s);
  model_upload(&m);
  clbt_table_config c = CLBT_TABLE_CONFIG_INIT;
  c.block_size = s.block_size;
  c.max_num_reqs = 4;
  c.max_num_blocks_per_req = m.max_kv_blocks;
  c.max_num_batched_tokens = 64;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &c, &table));
  /* Rows copied whole: no step kernel to build (PoCL takes minutes over
     the GPU code's), and the attention reads what any commit leaves. */
  clbt_assert_ok(clbt_table_set_commit_mode(table, CLBT_COMMIT_WHOLE));
  for (uint32_t q = 0; q < s.num_seqs; ++q)
    clbt_assert_ok(clbt_table_add_row(table, q,
                                      m.kv_table + (size_t)q * m.max_kv_blocks,
                                      m.kv_blocks[q] - (q == 2)));
  clbt_assert_ok(clbt_table_commit(table, 4));
  const int32_t rows[] = {0, 4, 2, -1}; /* 4: no row; -1: padding */
  cl_mem mapping = clbt_test_buffer(sizeof rows, rows);
  uint32_t rejected = reject_from(&m, 1, 0) +
                      reject_from(&m, 2, (m.kv_blocks[2] - 1) * 16);
  reject_from(&m, 3, 0);
  clbt_attention_batch batch = model_batch(&m);
  batch.block_table = NULL;
  batch.max_blocks_per_seq = 0;
  batch.table = table;
  batch.idx_mapping = mapping;
  run(&m, &batch, rejected, "a short row, a row past the table, a padding "
      "request");
  clReleaseMemObject(mapping);
  clbt_table_destroy(table);
  model_free(&m);
}
END_TEST

/* No tokens: nothing to launch, a marker for the event. */
START_TEST(an_empty_batch) {
  model m;
  model_spec s = hostile_spec(54, 0);
  model_make(&m, &s);
  model_upload(&m);
  clbt_attention_config config = model_config(&m);
  clbt_attention *attention = NULL;
  clbt_assert_ok(clbt_attention_create(clbt_test_device(), &config,
                                       &attention));
  clbt_attention_batch batch = model_batch(&m);
  batch.num_tokens = 0;
  batch.num_seqs = 0;
  cl_event event = NULL;
  clbt_assert_ok(clbt_attention_enqueue(attention, m.cache, &batch, 0, NULL,
                                        &event));
  ck_assert_ptr_nonnull(event);
  ck_assert_int_eq(clWaitForEvents(1, &event), CL_SUCCESS);
  clReleaseEvent(event);
  for (uint32_t t = 0; t < m.num_tokens; ++t) model_expect_zero(&m, t);
  m.cu[m.spec.num_seqs] = 0; /* every row a padding row: unwritten */
  double worst;
  model_check(&m, &worst);
  clbt_attention_destroy(attention);
  model_free(&m);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("attention_hostile");
  TCase *tc = tcase_create("attention_hostile");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, malformed_cu_seqlens_q);
  tcase_add_test(tc, impossible_lengths);
  tcase_add_test(tc, refused_blocks);
  tcase_add_test(tc, table_rows_out_of_reach);
  tcase_add_test(tc, an_empty_batch);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
