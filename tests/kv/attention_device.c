/*
 * The attention model's device side (attention_model.h): its buffers and
 * cache on the test device, its descriptor config and batch, and the
 * check of what a launch wrote.
 */
#include "attention_model.h"

#include "clbt_test.h"

#include <math.h>
#include <stdlib.h>

static cl_mem upload(const void *data, size_t bytes) {
  return clbt_test_buffer(bytes ? bytes : 4, data);
}

/* A buffer of `count` elements of a type, every one its NaN. */
static cl_mem poisoned(clbt_kv_dtype type, size_t count) {
  size_t size = model_size(type);
  unsigned char *bits = malloc(size * count + 4);
  uint32_t nan = type == CLBT_KV_FLOAT32 ? 0x7fc00000u
                 : type == CLBT_KV_FLOAT16 ? 0x7e00u
                 : type == CLBT_KV_BFLOAT16 ? 0x7fc0u
                                            : 0x7fu;
  for (size_t i = 0; i < count; ++i) memcpy(bits + i * size, &nan, size);
  cl_mem buffer = upload(bits, size * count);
  free(bits);
  return buffer;
}

/* Where the query and output rows are: with spec.strided, rows apart and
   from an offset; the lse [heads][tokens]. */
#define QUERY_OFFSET 5
#define OUTPUT_OFFSET 3
uint64_t model_query_stride(const model *m) {
  uint64_t row = (uint64_t)m->spec.num_heads * m->spec.head_size;
  return m->spec.strided ? row + 24 : row;
}
uint64_t model_output_stride(const model *m) {
  uint64_t row = (uint64_t)m->spec.num_heads * m->spec.head_size;
  return m->spec.strided ? row + 8 : row;
}
static size_t output_elements(const model *m) {
  return (m->spec.strided ? OUTPUT_OFFSET : 0) +
         (size_t)model_output_stride(m) * m->num_tokens;
}

void model_upload(model *m) {
  const model_spec *s = &m->spec;
  size_t row = (size_t)s->num_heads * s->head_size, size = model_size(s->query);
  size_t offset = s->strided ? QUERY_OFFSET : 0;
  size_t stride = (size_t)model_query_stride(m);
  unsigned char *query = calloc(offset + stride * m->num_tokens + 1, size);
  for (uint32_t t = 0; t < m->num_tokens; ++t)
    memcpy(query + (offset + t * stride) * size,
           (unsigned char *)m->query_bits + t * row * size, row * size);
  int32_t *used = malloc(sizeof *used * (s->num_seqs + 1));
  for (uint32_t q = 0; q < s->num_seqs; ++q) used[q] = (int32_t)s->seq_lens[q];
  m->query = upload(query, size * (offset + stride * m->num_tokens));
  m->output = poisoned(s->output, output_elements(m));
  m->lse = poisoned(CLBT_KV_FLOAT32, (size_t)s->num_heads * m->num_tokens);
  m->cache_buffer = upload(m->cache_bits, m->cache_bytes);
  m->cu_buffer = upload(m->cu, sizeof *m->cu * (s->num_seqs + 1));
  m->seqused = upload(used, sizeof *used * s->num_seqs);
  m->block_table = upload(m->table, sizeof *m->table * s->num_seqs *
                                        m->max_blocks);
  m->sinks_buffer = upload(m->sinks, sizeof(float) * s->num_heads);
  size_t descales = (size_t)s->num_seqs * s->num_kv_heads;
  m->k_descales_buffer = upload(m->k_descales, sizeof(float) * descales);
  m->v_descales_buffer = upload(m->v_descales, sizeof(float) * descales);
  free(used);
  free(query);
  clbt_kv_cache_config c = CLBT_KV_CACHE_CONFIG_INIT;
  c.layout = s->layout;
  c.cache_dtype = s->cache;
  c.input_dtype = s->cache == CLBT_KV_FP8_E4M3 ? CLBT_KV_BFLOAT16 : s->cache;
  c.num_kv_heads = s->num_kv_heads;
  c.head_size = s->head_size;
  c.block_size = s->block_size;
  c.num_blocks = m->num_blocks;
  c.key_cache = m->cache_buffer;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &c, &m->cache));
}

void model_free(model *m) {
  clbt_kv_cache_destroy(m->cache);
  cl_mem buffers[] = {m->query,         m->output,         m->cache_buffer,
                      m->cu_buffer,     m->seqused,        m->block_table,
                      m->sinks_buffer,  m->k_descales_buffer,
                      m->v_descales_buffer, m->lse};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    if (buffers[i]) clReleaseMemObject(buffers[i]);
  void *arrays[] = {m->cu,         m->table,      m->local_lens,
                    m->kv_table,   m->kv_blocks,
                    m->k_descales, m->v_descales, m->sinks,
                    m->query_bits, m->cache_bits, m->expected,
                    m->expected_lse, m->query_values, m->cache_values};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
}

clbt_attention_config model_config(const model *m) {
  const model_spec *s = &m->spec;
  clbt_attention_config c = CLBT_ATTENTION_CONFIG_INIT;
  c.num_heads = s->num_heads;
  c.num_kv_heads = s->num_kv_heads;
  c.head_size = s->head_size;
  c.block_size = s->block_size;
  c.layout = s->layout;
  c.cache_dtype = s->cache;
  c.query_dtype = s->query;
  c.output_dtype = s->output;
  c.softcap = s->softcap;
  c.sliding_window = s->sliding_window;
  return c;
}

clbt_attention_batch model_batch(const model *m) {
  const model_spec *s = &m->spec;
  clbt_attention_batch b = CLBT_ATTENTION_BATCH_INIT;
  uint32_t longest = 1, context = 1;
  for (uint32_t q = 0; q < s->num_seqs; ++q) {
    if (s->q_lens[q] > longest) longest = s->q_lens[q];
    if (s->seq_lens[q] > context) context = s->seq_lens[q];
  }
  b.num_seqs = s->num_seqs;
  b.num_tokens = m->num_tokens;
  b.max_seqlen_q = longest;
  b.max_seqlen_k = context;
  b.query = m->query;
  b.output = m->output;
  b.cu_seqlens_q = m->cu_buffer;
  b.seqused_k = m->seqused;
  b.block_table = m->block_table;
  b.max_blocks_per_seq = m->max_blocks;
  b.cp_world_size = s->cp_world_size;
  b.cp_rank = s->cp_rank;
  b.cp_interleave_size = s->cp_interleave_size;
  b.sinks = s->sinks ? m->sinks_buffer : NULL;
  b.lse = s->lse ? m->lse : NULL;
  b.q_descale = m->q_descale;
  b.k_descale = m->k_descale;
  b.v_descale = m->v_descale;
  b.k_descales = s->per_seq_descales ? m->k_descales_buffer : NULL;
  b.v_descales = s->per_seq_descales ? m->v_descales_buffer : NULL;
  b.output_scale = m->output_scale;
  if (s->strided) {
    b.query_offset = QUERY_OFFSET;
    b.query_token_stride = model_query_stride(m);
    b.output_offset = OUTPUT_OFFSET;
    b.output_token_stride = model_output_stride(m);
    b.lse_token_stride = 1;
    b.lse_head_stride = m->num_tokens;
  }
  return b;
}

/* The output buffer's values, every element (*count of them). */
static double *read_all(const model *m, size_t *count) {
  const model_spec *s = &m->spec;
  *count = output_elements(m);
  void *bits = malloc(model_size(s->output) * *count + 4);
  double *values = malloc(sizeof *values * (*count + 1));
  clbt_test_read(m->output, model_size(s->output) * *count, bits);
  double scale = s->output == CLBT_KV_FP8_E4M3 ? m->output_scale : 1.0;
  for (size_t i = 0; i < *count; ++i)
    values[i] = model_value(s->output, bits, i) * scale;
  free(bits);
  return values;
}

/* Where output element (t, h, d) is. */
static size_t output_index(const model *m, uint32_t t, uint32_t h,
                           uint32_t d) {
  return (m->spec.strided ? OUTPUT_OFFSET : 0) +
         (size_t)t * model_output_stride(m) +
         ((size_t)h * m->spec.head_size + d);
}

double *model_read_output(const model *m) {
  const model_spec *s = &m->spec;
  size_t count, row = (size_t)s->num_heads * s->head_size;
  double *all = read_all(m, &count);
  double *values = malloc(sizeof *values * (row * m->num_tokens + 1));
  for (uint32_t t = 0; t < m->num_tokens; ++t)
    for (uint32_t h = 0; h < s->num_heads; ++h)
      for (uint32_t d = 0; d < s->head_size; ++d)
        values[((size_t)t * s->num_heads + h) * s->head_size + d] =
            all[output_index(m, t, h, d)];
  free(all);
  return values;
}

/* vLLM's tolerance: an error of at most atol + rtol x |expected|. */
static bool close_enough(const model_spec *s, double got, double expected) {
  bool fp8 = s->query == CLBT_KV_FP8_E4M3 || s->cache == CLBT_KV_FP8_E4M3 ||
             s->output == CLBT_KV_FP8_E4M3;
  double atol = fp8 ? 1.5e-1 : 1.5e-2, rtol = fp8 ? 1.5e-1 : 1e-2;
  return fabs(got - expected) <= atol + rtol * fabs(expected);
}

/* Elements between the strided output's rows were not written. */
static void check_gaps(const model *m) {
  const model_spec *s = &m->spec;
  size_t count, row = (size_t)s->num_heads * s->head_size;
  double *all = read_all(m, &count);
  for (size_t i = 0; i < count; ++i) {
    size_t from = s->strided ? OUTPUT_OFFSET : 0;
    bool gap = i < from || (i - from) % model_output_stride(m) >= row;
    ck_assert_msg(!gap || isnan(all[i]), "output element %zu, between rows, "
                  "was written", i);
  }
  free(all);
}

static void check_lse(const model *m, uint32_t used) {
  const model_spec *s = &m->spec;
  float *lse = malloc(sizeof *lse * s->num_heads * m->num_tokens);
  clbt_test_read(m->lse, sizeof *lse * s->num_heads * m->num_tokens, lse);
  for (uint32_t t = 0; t < m->num_tokens; ++t)
    for (uint32_t h = 0; h < s->num_heads; ++h) {
      double want = m->expected_lse[(size_t)t * s->num_heads + h];
      double have = lse[s->strided ? (size_t)h * m->num_tokens + t
                                   : (size_t)t * s->num_heads + h];
      if (t >= used)
        ck_assert_msg(isnan(have), "padding token %u's lse was written", t);
      else
        ck_assert_msg(want == -INFINITY
                          ? have == -INFINITY
                          : fabs(have - want) <= 1e-3 + 1e-4 * fabs(want),
                      "token %u head %u lse %.6g, expected %.6g", t, h, have,
                      want);
    }
  free(lse);
}

void model_check(const model *m, double *worst) {
  const model_spec *s = &m->spec;
  uint32_t used = (uint32_t)m->cu[s->num_seqs];
  double *got = model_read_output(m);
  *worst = 0;
  for (uint32_t t = 0; t < m->num_tokens; ++t)
    for (uint32_t h = 0; h < s->num_heads; ++h)
      for (uint32_t d = 0; d < s->head_size; ++d) {
        size_t i = ((size_t)t * s->num_heads + h) * s->head_size + d;
        if (t >= used) {
          ck_assert_msg(isnan(got[i]), "padding token %u head %u element %u "
                        "was written: %g", t, h, d, got[i]);
          continue;
        }
        ck_assert_msg(close_enough(s, got[i], m->expected[i]),
                      "token %u head %u element %u: %.6g, expected %.6g", t,
                      h, d, got[i], m->expected[i]);
        *worst = fmax(*worst, fabs(got[i] - m->expected[i]));
      }
  free(got);
  check_gaps(m);
  if (s->lse) check_lse(m, used);
}
