/*
 * Paged attention (clbt_attention_*, src/kv/attention*.c,
 * cl/attention_*.cl) against the independent model of attention_model.c,
 * on the cases of vLLM's tests/kernels/attention/
 * test_triton_unified_attention.py: query and context lengths
 * [(1, 1328), (5, 18), (129, 463)] and [(1, 523), (1, 37), (1, 2011)];
 * heads (4, 4), (8, 2), (5, 1); head sizes 96, 128, 256; 16-token blocks;
 * sliding windows none, 64, 128, 256; soft-cap none and 50; bf16, and fp8
 * caches (with an fp8 query too, as vLLM's q_dtype case), within vLLM's
 * tolerances; then fp16 and fp32, both layouts, sinks, lse, fp8 outputs
 * and per-(sequence, KV head) descales. Every value of each parameter is
 * covered, not their product: each distinct shape is a program PoCL
 * builds. CTest runs the suite on the device's own tuning row and on the
 * GPU's (CLBT_TUNING=gpu: the decode kernel's lanes and splits, the tile
 * kernel, the reduce).
 */
#include "clbt_test.h"
#include "kv/attention_model.h"

#include <math.h>

static const uint32_t set_a_q[] = {1, 5, 129}, set_a_k[] = {1328, 18, 463};
static const uint32_t set_b_q[] = {1, 1, 1}, set_b_k[] = {523, 37, 2011};

/* One case of the table: shape, types, options and which set. */
typedef struct vllm_case {
  uint32_t heads, kv_heads, head_size;
  clbt_kv_dtype query, cache, output;
  uint32_t window;
  float softcap;
  bool set_b;
} vllm_case;

static const vllm_case vllm_cases[] = {
    {4, 4, 128, CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 0, 0, 0, false},
    {8, 2, 128, CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 0, 64, 50, true},
    {5, 1, 128, CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 0, 128, 0, false},
    {8, 2, 96, CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 0, 256, 0, false},
    {5, 1, 256, CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 0, 0, 50, true},
    {4, 4, 256, CLBT_KV_BFLOAT16, CLBT_KV_FP8_E4M3, 0, 64, 0, true},
    {8, 2, 128, CLBT_KV_BFLOAT16, CLBT_KV_FP8_E4M3, 0, 0, 50, false},
    {5, 1, 96, CLBT_KV_FP8_E4M3, CLBT_KV_FP8_E4M3, CLBT_KV_BFLOAT16, 128, 0,
     true},
    {4, 4, 96, CLBT_KV_FP8_E4M3, CLBT_KV_FP8_E4M3, CLBT_KV_BFLOAT16, 0, 50,
     false},
};

static void run_case(const model_spec *spec, const char *name) {
  model m;
  model_make(&m, spec);
  model_upload(&m);
  clbt_attention_config config = model_config(&m);
  clbt_attention *attention = NULL;
  clbt_assert_ok(clbt_attention_create(clbt_test_device(), &config,
                                       &attention));
  clbt_attention_batch batch = model_batch(&m);
  clbt_assert_ok(clbt_attention_enqueue(attention, m.cache, &batch, 0, NULL,
                                        NULL));
  double worst;
  model_check(&m, &worst);
  uint32_t rejected = 1;
  clbt_assert_ok(clbt_attention_read_rejected_tokens(attention, &rejected));
  ck_assert_uint_eq(rejected, 0);
  printf("attention %s: largest error %.2e\n", name, worst);
  clbt_attention_destroy(attention);
  model_free(&m);
}

START_TEST(vllm_unified_attention_cases) {
  const vllm_case *c = &vllm_cases[_i];
  model_spec spec = {.num_heads = c->heads, .num_kv_heads = c->kv_heads,
                     .head_size = c->head_size, .block_size = 16,
                     .query = c->query, .cache = c->cache,
                     .output = c->output, .sliding_window = c->window,
                     .softcap = c->softcap, .num_seqs = 3,
                     .q_lens = c->set_b ? set_b_q : set_a_q,
                     .seq_lens = c->set_b ? set_b_k : set_a_k,
                     .seed = 41 + (uint64_t)_i};
  char name[64];
  snprintf(name, sizeof name, "vLLM case %d", _i);
  run_case(&spec, name);
}
END_TEST

static Suite *attention_suite(void) {
  Suite *suite = suite_create("attention");
  TCase *vllm = tcase_create("vllm_cases");
  tcase_set_timeout(vllm, 600);
  tcase_add_loop_test(vllm, vllm_unified_attention_cases, 0,
                      (int)(sizeof vllm_cases / sizeof vllm_cases[0]));
  suite_add_tcase(suite, vllm);
  return suite;
}

int main(void) { return clbt_test_run(attention_suite()); }
