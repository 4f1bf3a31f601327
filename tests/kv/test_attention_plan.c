/*
 * The paged attention's pure plan (src/kv/attention_plan.c), without a
 * device: the kernels' geometry from a tuning row (lanes over a head row,
 * the heads a work-group serves, the tile shrunk to the device's local
 * memory), the launch's kernel and splits from its batch, and the
 * CLBT_ATTENTION_TUNING override. The numbers are worked by hand from the
 * rules attention_plan.h states.
 */
#include "clbt_test.h"

#include "base/tuning.h"
#include "kv/attention_plan.h"

#include <stdlib.h>

static const clbt__attention_device h100 = {48 * 1024, 132};

static clbt__attention_tuning row(const char *which) {
  clbt__attention_tuning t;
  unsetenv("CLBT_ATTENTION_TUNING");
  clbt_assert_ok(clbt__attention_tuning_row(!strcmp(which, "gpu"), &t));
  return t;
}

static clbt_attention_config config(uint32_t heads, uint32_t kv_heads,
                                    uint32_t head_size, clbt_kv_dtype type) {
  clbt_attention_config c = CLBT_ATTENTION_CONFIG_INIT;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_size = head_size;
  c.block_size = 16;
  c.cache_dtype = c.query_dtype = c.output_dtype = type;
  return c;
}

static clbt__attention_shape shape(const clbt__attention_tuning *t,
                                   clbt_attention_config c) {
  clbt__attention_shape s;
  clbt_assert_ok(clbt__attention_shape_of(&c, t, h100, &s));
  return s;
}

START_TEST(a_gpu_rows_shapes) {
  clbt__attention_tuning t = row("gpu");
  /* Llama's 32 query heads on 8 KV heads, bf16 x 128: 16-byte lanes of 8
     elements, 16 lanes a row, the 4 heads of a KV head together; tiles of
     8 tokens x 4 heads and 16 keys. */
  clbt__attention_shape s = shape(&t, config(32, 8, 128, CLBT_KV_BFLOAT16));
  ck_assert_uint_eq(s.gpu, 1);
  ck_assert_uint_eq(s.lane, 8);
  ck_assert_uint_eq(s.vec, 8);
  ck_assert_uint_eq(s.rows, 4);
  ck_assert_uint_eq(s.tile_queries, 8);
  ck_assert_uint_eq(s.tile_keys, 16);
  /* 5 heads on 1, fp8 x 96: lanes of 16 elements, 6 a row. */
  s = shape(&t, config(5, 1, 96, CLBT_KV_FP8_E4M3));
  ck_assert_uint_eq(s.lane, 16);
  ck_assert_uint_eq(s.vec, 16);
  ck_assert_uint_eq(s.rows, 5);
  /* MQA, 32 heads on 1: 4 groups of 8; 12 heads: 2 groups of 6. */
  ck_assert_uint_eq(shape(&t, config(32, 1, 64, CLBT_KV_FLOAT16)).rows, 8);
  ck_assert_uint_eq(shape(&t, config(12, 1, 64, CLBT_KV_FLOAT16)).rows, 6);
  /* fp32 x 256, one head: 4-element lanes; a tile of 32 rows and 16 keys
     takes 71 KiB, 8 keys 54 KiB, then 16 rows and 8 keys 36 KiB. */
  s = shape(&t, config(1, 1, 256, CLBT_KV_FLOAT32));
  ck_assert_uint_eq(s.lane, 4);
  ck_assert_uint_eq(s.tile_keys, 8);
  ck_assert_uint_eq(s.tile_queries, 16);
  ck_assert(clbt__attention_tile_local_bytes(&s) <= h100.local_mem_size);
  /* A head size that is no multiple of 4 has no tile kernel. */
  ck_assert_uint_eq(shape(&t, config(2, 1, 6, CLBT_KV_BFLOAT16)).tile_local, 0);
}
END_TEST

START_TEST(a_cpu_rows_shapes) {
  clbt__attention_tuning t = row("cpu");
  clbt__attention_shape s = shape(&t, config(32, 8, 128, CLBT_KV_BFLOAT16));
  ck_assert_uint_eq(s.gpu, 0);
  ck_assert_uint_eq(s.local, 1);
  ck_assert_uint_eq(s.lane, 128);
  ck_assert_uint_eq(s.vec, 8);
  ck_assert_uint_eq(s.tile_local, 0);
  ck_assert_uint_eq(clbt__attention_shape_with_vec(&s, 1).vec, 1);
}
END_TEST

START_TEST(a_tuning_row_that_cannot_shape_a_kernel) {
  clbt__attention_tuning t = row("gpu");
  clbt__attention_shape s;
  clbt_attention_config c = config(32, 8, 128, CLBT_KV_BFLOAT16);
  /* Four work-items: lanes of 32 elements, four a row. */
  t.local = 4;
  clbt_assert_ok(clbt__attention_shape_of(&c, &t, h100, &s));
  ck_assert_uint_eq(s.lane, 32);
  t.local = 0;
  clbt_assert_fails(clbt__attention_shape_of(&c, &t, h100, &s),
                    CLBT_INVALID_CONFIG, "CLBT_ATTENTION_TUNING: local is 0");
  t = row("gpu");
  t.reduce_local = 1;
  clbt_assert_fails(clbt__attention_shape_of(&c, &t, h100, &s),
                    CLBT_INVALID_CONFIG,
                    "reduce_local must be 1 exactly when local is 1");
  t = row("gpu");
  clbt__attention_device tiny = {1024, 1};
  clbt_assert_fails(clbt__attention_shape_of(&c, &t, tiny, &s),
                    CLBT_UNSUPPORTED_DEVICE, "bytes of local memory");
  /* 2^28 keys a pass, one head a work-group: 16 runs of 16 lanes keep
     16 x 2^28 x 17 shares, about 2^36 floats, far past 48 KiB (their
     count, 2^32 x 17, does not fit 32 bits). */
  t = row("gpu");
  t.tokens = 1u << 28;
  c = config(8, 8, 128, CLBT_KV_BFLOAT16);
  clbt_assert_fails(clbt__attention_shape_of(&c, &t, h100, &s),
                    CLBT_UNSUPPORTED_DEVICE, "bytes of local memory");
}
END_TEST

START_TEST(decodes_split_their_contexts) {
  clbt__attention_tuning t = row("gpu");
  clbt__attention_shape s = shape(&t, config(32, 8, 128, CLBT_KV_BFLOAT16));
  /* 16 decodes: 128 work-groups; two per unit of 132 want 264, 3 splits,
     but a 1024-key context keeps 512 keys a split: 2. */
  clbt__attention_work w = {16, 16, 8, 1, 1024};
  clbt__attention_plan p = clbt__attention_plan_of(&s, &t, h100, w);
  ck_assert(!p.tiles);
  ck_assert_uint_eq(p.splits, 2);
  ck_assert_uint_eq(p.groups, 256);
  ck_assert_uint_eq(p.reduce_groups, 16 * 32);
  ck_assert_uint_eq(p.partial_floats, (uint64_t)16 * 32 * 2 * 132);
  w.max_seqlen_k = 32768;
  ck_assert_uint_eq(clbt__attention_plan_of(&s, &t, h100, w).splits, 3);
  w.max_seqlen_k = 0; /* unknown: no split */
  ck_assert_uint_eq(clbt__attention_plan_of(&s, &t, h100, w).splits, 1);
  w = (clbt__attention_work){256, 256, 8, 1, 32768};
  p = clbt__attention_plan_of(&s, &t, h100, w);
  ck_assert_uint_eq(p.splits, 1);
  ck_assert_uint_eq(p.reduce_groups, 0);
  ck_assert_uint_eq(p.partial_floats, 0);
  w = (clbt__attention_work){1, 1, 8, 1, 1 << 20};
  ck_assert_uint_eq(clbt__attention_plan_of(&s, &t, h100, w).splits, 16);
  t.splits = 5;
  ck_assert_uint_eq(clbt__attention_plan_of(&s, &t, h100, w).splits, 5);
}
END_TEST

START_TEST(query_blocks_take_the_tile_kernel) {
  clbt__attention_tuning t = row("gpu");
  clbt__attention_shape s = shape(&t, config(32, 8, 128, CLBT_KV_BFLOAT16));
  /* 2048 prefill tokens beside 64 decodes: 2112 / 8 + 65 block slots. */
  clbt__attention_work w = {65, 2112, 8, 2048, 4096};
  clbt__attention_plan p = clbt__attention_plan_of(&s, &t, h100, w);
  ck_assert(p.tiles);
  ck_assert_uint_eq(p.query_blocks, 2112 / 8 + 65);
  ck_assert_uint_eq(p.groups, (uint64_t)(2112 / 8 + 65) * 8);
  ck_assert_uint_eq(p.splits, 1);
  w.max_seqlen_q = 0; /* unknown: as if longer than one */
  ck_assert(clbt__attention_plan_of(&s, &t, h100, w).tiles);
  t = row("cpu");
  s = shape(&t, config(32, 8, 128, CLBT_KV_BFLOAT16));
  ck_assert(!clbt__attention_plan_of(&s, &t, h100, w).tiles);
}
END_TEST

START_TEST(the_environment_sets_fields) {
  clbt__attention_tuning t;
  setenv("CLBT_ATTENTION_TUNING", "local=128,tokens=4,splits=8", 1);
  clbt_assert_ok(clbt__attention_tuning_row(true, &t));
  ck_assert_uint_eq(t.local, 128);
  ck_assert_uint_eq(t.tokens, 4);
  ck_assert_uint_eq(t.splits, 8);
  ck_assert_uint_eq(t.tile_local, 256);
  setenv("CLBT_ATTENTION_TUNING", "local=many", 1);
  clbt_assert_fails(clbt__attention_tuning_row(true, &t),
                    CLBT_INVALID_CONFIG, "local's value is not a whole number");
  setenv("CLBT_ATTENTION_TUNING", "locals=1", 1);
  clbt_assert_fails(clbt__attention_tuning_row(true, &t),
                    CLBT_INVALID_CONFIG, "no field 'locals'");
  setenv("CLBT_ATTENTION_TUNING", "local", 1);
  clbt_assert_fails(clbt__attention_tuning_row(true, &t),
                    CLBT_INVALID_CONFIG, "is not name=value");
  setenv("CLBT_ATTENTION_TUNING", "tokens=-1", 1);
  clbt_assert_fails(clbt__attention_tuning_row(true, &t),
                    CLBT_INVALID_CONFIG, "tokens's value");
  unsetenv("CLBT_ATTENTION_TUNING");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("attention_plan");
  TCase *tc = tcase_create("attention_plan");
  tcase_add_test(tc, a_gpu_rows_shapes);
  tcase_add_test(tc, a_cpu_rows_shapes);
  tcase_add_test(tc, a_tuning_row_that_cannot_shape_a_kernel);
  tcase_add_test(tc, decodes_split_their_contexts);
  tcase_add_test(tc, query_blocks_take_the_tile_kernel);
  tcase_add_test(tc, the_environment_sets_fields);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
