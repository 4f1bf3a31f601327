/*
 * Paged attention beyond vLLM's cases, against the independent model
 * (attention_model.c): fp16 and fp32, the head-major layout, sinks, lse,
 * an fp8 output, per-(sequence, KV head) descales, strided query and
 * output; decodes split over work-groups and merged by the reduce; block
 * ids read from a clbt table's committed rows (batch-ordered and through
 * idx_mapping, with kernel blocks below the allocation block); context-
 * parallel ranks whose outputs, merged by their lse, equal attention over
 * the whole context. (Hostile batches: test_attention_hostile.c.)
 */
#include "clbt_test.h"
#include "kv/attention_model.h"

#include <math.h>
#include <stdlib.h>

static const uint32_t mixed_q[] = {1, 7, 40, 1}, mixed_k[] = {150, 60, 300, 1};
static const uint32_t decode_q[] = {1, 1, 1}, decode_k[] = {700, 33, 1200};

static model_spec small_spec(uint64_t seed) {
  return (model_spec){.num_heads = 4, .num_kv_heads = 2, .head_size = 64,
                      .block_size = 16, .query = CLBT_KV_BFLOAT16,
                      .cache = CLBT_KV_BFLOAT16, .num_seqs = 4,
                      .q_lens = mixed_q, .seq_lens = mixed_k,
                      .padding_tokens = 3, .seed = seed};
}

static clbt_attention *make_attention(const model *m) {
  clbt_attention_config config = model_config(m);
  clbt_attention *attention = NULL;
  clbt_assert_ok(clbt_attention_create(clbt_test_device(), &config,
                                       &attention));
  return attention;
}

static uint32_t rejected_of(clbt_attention *attention) {
  uint32_t count = 0;
  clbt_assert_ok(clbt_attention_read_rejected_tokens(attention, &count));
  return count;
}

/* Runs a model's batch and checks it; returns the rejected count. */
static uint32_t run_checked(model *m, const clbt_attention_batch *batch,
                            const char *name) {
  clbt_attention *attention = make_attention(m);
  clbt_assert_ok(clbt_attention_enqueue(attention, m->cache, batch, 0, NULL,
                                        NULL));
  double worst;
  model_check(m, &worst);
  uint32_t rejected = rejected_of(attention);
  printf("attention %s: largest error %.2e, %u rejected\n", name, worst,
         (unsigned)rejected);
  clbt_attention_destroy(attention);
  return rejected;
}

static void run_spec(const model_spec *spec, const char *name) {
  model m;
  model_make(&m, spec);
  model_upload(&m);
  clbt_attention_batch batch = model_batch(&m);
  ck_assert_uint_eq(run_checked(&m, &batch, name), 0);
  model_free(&m);
}

START_TEST(types_layouts_and_options) {
  model_spec s = small_spec(7);
  s.query = s.cache = CLBT_KV_FLOAT16;
  s.sinks = s.lse = s.strided = true;
  run_spec(&s, "fp16, sinks, lse, strided");
  s = small_spec(8);
  s.query = s.cache = CLBT_KV_FLOAT32;
  s.layout = CLBT_KV_LAYOUT_HEAD_MAJOR;
  s.sliding_window = 20;
  s.lse = true;
  run_spec(&s, "fp32, head-major, window 20");
  s = small_spec(9);
  s.cache = CLBT_KV_FP8_E4M3;
  s.output = CLBT_KV_FP8_E4M3;
  s.per_seq_descales = s.sinks = true;
  s.softcap = 30;
  run_spec(&s, "fp8 cache and output, descales per sequence");
  s = small_spec(10);
  s.query = CLBT_KV_FLOAT32;
  s.output = CLBT_KV_FLOAT16;
  s.cache = CLBT_KV_BFLOAT16;
  s.layout = CLBT_KV_LAYOUT_HEAD_MAJOR;
  run_spec(&s, "fp32 query, bf16 cache, fp16 output");
}
END_TEST

/* Decodes whose contexts are split over work-groups, merged by the
   reduce, with sinks and lse. */
START_TEST(split_decodes) {
  const char *splits[] = {"splits=3", "splits=16,tokens=2"};
  for (int i = 0; i < 2; ++i) {
    model_spec s = small_spec(20 + (uint64_t)i);
    s.num_seqs = 3;
    s.q_lens = decode_q;
    s.seq_lens = decode_k;
    s.sinks = s.lse = true;
    s.num_kv_heads = i ? 2 : 4; /* one query head a KV head, then two */
    s.sliding_window = i ? 500 : 0;
    setenv("CLBT_ATTENTION_TUNING", splits[i], 1);
    char name[64];
    snprintf(name, sizeof name, "decodes, %s", splits[i]);
    run_spec(&s, name);
    unsetenv("CLBT_ATTENTION_TUNING");
  }
}
END_TEST

/* A clbt table of a model's KV-manager blocks (each kernel_blocks cache
   blocks), rows in batch order or permuted, committed. */
static clbt_table *table_of(const model *m, const int32_t *rows) {
  const model_spec *s = &m->spec;
  clbt_table_config c = CLBT_TABLE_CONFIG_INIT;
  c.block_size = s->block_size * s->kernel_blocks;
  c.kernel_block_size = s->block_size;
  c.max_num_reqs = s->num_seqs + 2;
  c.max_num_blocks_per_req = m->max_kv_blocks;
  c.max_num_batched_tokens = 64;
  c.cp_world_size = s->cp_world_size;
  c.cp_rank = s->cp_rank;
  c.cp_interleave_size = s->cp_interleave_size;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &c, &table));
  /* Rows copied whole: no step kernel to build (PoCL takes minutes over
     the GPU code's), and the attention reads what any commit leaves. */
  clbt_assert_ok(clbt_table_set_commit_mode(table, CLBT_COMMIT_WHOLE));
  for (uint32_t q = 0; q < s->num_seqs; ++q)
    clbt_assert_ok(clbt_table_add_row(
        table, (uint32_t)rows[q], m->kv_table + (size_t)q * m->max_kv_blocks,
        m->kv_blocks[q]));
  clbt_assert_ok(clbt_table_commit(table, s->num_seqs + 2));
  return table;
}

/* More sequences than a work-group keeps of cu_seqlens_q in local memory
   (1024 on either row): the searches read it where it is. */
START_TEST(more_sequences_than_a_local_copy) {
  enum { SEQS = 1100 };
  static uint32_t q_lens[SEQS], seq_lens[SEQS];
  for (uint32_t q = 0; q < SEQS; ++q)
    q_lens[q] = 1 + (q % 97 == 0), seq_lens[q] = 2 + q % 23;
  model_spec s = small_spec(25);
  s.head_size = 16;
  s.num_seqs = SEQS;
  s.q_lens = q_lens;
  s.seq_lens = seq_lens;
  run_spec(&s, "1100 sequences");
}
END_TEST

START_TEST(table_rows) {
  const int32_t in_order[] = {0, 1, 2, 3}, persistent[] = {5, 0, 3, 2};
  for (int i = 0; i < 3; ++i) {
    model_spec s = small_spec(30 + (uint64_t)i);
    s.kernel_blocks = 2;
    if (i == 2) s.cp_world_size = 2, s.cp_rank = 1, s.cp_interleave_size = 4;
    model m;
    model_make(&m, &s);
    model_upload(&m);
    const int32_t *rows = i == 1 ? persistent : in_order;
    clbt_table *table = table_of(&m, rows);
    cl_mem mapping = clbt_test_buffer(sizeof persistent, rows);
    clbt_attention_batch batch = model_batch(&m);
    batch.block_table = NULL;
    batch.max_blocks_per_seq = 0;
    batch.cp_world_size = batch.cp_rank = batch.cp_interleave_size = 0;
    batch.table = table;
    batch.idx_mapping = i == 1 ? mapping : NULL;
    const char *names[] = {"a table's rows in batch order",
                           "a table's persistent rows through idx_mapping",
                           "a CP rank's table, interleave 4"};
    ck_assert_uint_eq(run_checked(&m, &batch, names[i]), 0);
    clReleaseMemObject(mapping);
    clbt_table_destroy(table);
    model_free(&m);
  }
}
END_TEST

/* Each rank attends its shard and gives its lse; merged, the ranks'
   outputs are attention over the whole context. */
static void merge_ranks(uint32_t world, uint32_t interleave, uint64_t seed) {
  model_spec s = small_spec(seed);
  s.lse = true;
  model whole;
  model_make(&whole, &s);
  size_t rows = (size_t)whole.num_tokens * s.num_heads;
  double *total = calloc(rows * s.head_size, sizeof *total);
  double *lses = malloc(sizeof *lses * rows * world);
  double **outputs = malloc(sizeof *outputs * world);
  for (uint32_t r = 0; r < world; ++r) {
    model rank;
    s.cp_world_size = world, s.cp_rank = r, s.cp_interleave_size = interleave;
    model_make(&rank, &s);
    model_upload(&rank);
    clbt_attention *attention = make_attention(&rank);
    clbt_attention_batch batch = model_batch(&rank);
    clbt_assert_ok(clbt_attention_enqueue(attention, rank.cache, &batch, 0,
                                          NULL, NULL));
    double worst;
    model_check(&rank, &worst); /* the rank's own shard, as the model says */
    outputs[r] = model_read_output(&rank);
    float *lse = malloc(sizeof *lse * rows);
    clbt_test_read(rank.lse, sizeof *lse * rows, lse);
    for (size_t i = 0; i < rows; ++i) lses[r * rows + i] = lse[i];
    free(lse);
    ck_assert_uint_eq(rejected_of(attention), 0);
    clbt_attention_destroy(attention);
    model_free(&rank);
  }
  uint32_t used = (uint32_t)whole.cu[s.num_seqs];
  for (size_t i = 0; i < (size_t)used * s.num_heads; ++i) {
    double top = -INFINITY, sum = 0;
    for (uint32_t r = 0; r < world; ++r) top = fmax(top, lses[r * rows + i]);
    for (uint32_t r = 0; r < world; ++r) sum += exp(lses[r * rows + i] - top);
    for (uint32_t d = 0; d < s.head_size; ++d) {
      double value = 0;
      for (uint32_t r = 0; r < world; ++r)
        value += exp(lses[r * rows + i] - top) / sum *
                 outputs[r][i * s.head_size + d];
      double want = whole.expected[i * s.head_size + d];
      ck_assert_msg(fabs(value - want) <= 1.5e-2 + 1e-2 * fabs(want),
                    "%u ranks, interleave %u: merged row %zu element %u "
                    "%.6g, the whole context's %.6g",
                    world, interleave, i, d, value, want);
    }
  }
  printf("attention: %u CP ranks, interleave %u, merged by lse: the whole "
         "context's attention\n", world, interleave);
  for (uint32_t r = 0; r < world; ++r) free(outputs[r]);
  free(outputs);
  free(lses);
  free(total);
  model_free(&whole);
}

START_TEST(context_parallel_merge) {
  merge_ranks(2, 1, 40);
  merge_ranks(4, 8, 41);
}
END_TEST

static Suite *attention_batches_suite(void) {
  Suite *suite = suite_create("attention_batches");
  TCase *tc = tcase_create("attention_batches");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, types_layouts_and_options);
  tcase_add_test(tc, split_decodes);
  tcase_add_test(tc, more_sequences_than_a_local_copy);
  tcase_add_test(tc, table_rows);
  tcase_add_test(tc, context_parallel_merge);
  suite_add_tcase(suite, tc);
  return suite;
}

int main(void) { return clbt_test_run(attention_batches_suite()); }
