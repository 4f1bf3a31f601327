/*
 * The attention suites' independent model (attention_model.h). Values are
 * drawn as stored bits (a random sign, exponent in [-4, 0] and mantissa),
 * so that what the device reads is what the model computes with; cache
 * slots no sequence owns hold NaN, and so do the output rows before the
 * call, so that a read of a wrong slot or a row left unwritten shows.
 */
#include "attention_model.h"

#include "clbt_test.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rng;

/* Each phase of a drawing, and each cache element, from its own stream:
   the ranks of a context-parallel group draw the same query and the same
   K/V of each position, whatever positions they hold. */
static void reseed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = seed ^ a * 0x9e3779b97f4a7c15u ^ b * 0xc2b2ae3d27d4eb4fu ^
               c * 0x165667b19e3779f9u;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9u;
  rng = x ^ x >> 29;
}

static uint32_t draw(uint32_t n) { /* [0, n) */
  rng = rng * 6364136223846793005u + 1442695040888963407u;
  return n ? (uint32_t)((rng >> 33) % n) : 0;
}

size_t model_size(clbt_kv_dtype type) {
  return type == CLBT_KV_FLOAT32 ? 4 : type == CLBT_KV_FP8_E4M3 ? 1 : 2;
}

/* A type's exponent bias, mantissa bits and NaN. */
typedef struct format {
  int bias, mantissa;
  uint32_t nan;
} format;

static format format_of(clbt_kv_dtype type) {
  switch (type) {
    case CLBT_KV_FLOAT32: return (format){127, 23, 0x7fc00000u};
    case CLBT_KV_FLOAT16: return (format){15, 10, 0x7e00u};
    case CLBT_KV_BFLOAT16: return (format){127, 7, 0x7fc0u};
    default: return (format){7, 3, 0x7fu};
  }
}

static uint32_t bits_at(clbt_kv_dtype type, const void *bits, size_t i) {
  switch (model_size(type)) {
    case 4: return ((const uint32_t *)bits)[i];
    case 2: return ((const uint16_t *)bits)[i];
    default: return ((const uint8_t *)bits)[i];
  }
}

static void set_bits(clbt_kv_dtype type, void *bits, size_t i, uint32_t v) {
  switch (model_size(type)) {
    case 4: ((uint32_t *)bits)[i] = v; break;
    case 2: ((uint16_t *)bits)[i] = (uint16_t)v; break;
    default: ((uint8_t *)bits)[i] = (uint8_t)v;
  }
}

double model_value(clbt_kv_dtype type, const void *bits, size_t index) {
  format f = format_of(type);
  uint32_t b = bits_at(type, bits, index);
  int width = (int)model_size(type) * 8;
  uint32_t sign = b >> (width - 1), exponent_bits = width - 1 - f.mantissa;
  uint32_t e = (b >> f.mantissa) & ((1u << exponent_bits) - 1);
  uint32_t m = b & ((1u << f.mantissa) - 1);
  double value;
  bool top = e == (1u << exponent_bits) - 1;
  if (type == CLBT_KV_FP8_E4M3 ? top && m == 7 : top)
    value = m || type == CLBT_KV_FP8_E4M3 ? NAN : INFINITY;
  else if (e == 0)
    value = ldexp((double)m, 1 - f.bias - f.mantissa);
  else
    value = ldexp(1.0 + ldexp((double)m, -f.mantissa), (int)e - f.bias);
  return sign ? -value : value;
}

/* A random value of the type: 0 one time in 20, else a sign, an exponent
   in [-4, 0] and a mantissa. */
static uint32_t random_bits(clbt_kv_dtype type) {
  format f = format_of(type);
  int width = (int)model_size(type) * 8;
  if (draw(20) == 0) return 0;
  uint32_t e = (uint32_t)(f.bias - 4 + (int)draw(5));
  uint32_t m = f.mantissa > 16 ? draw(1u << 16) << (f.mantissa - 16)
                               : draw(1u << f.mantissa);
  return draw(2) << (width - 1) | e << f.mantissa | m;
}

/* ---- the scenario ------------------------------------------------------ */

/* The rank that holds global position p, as context parallelism deals
   them: virtual blocks of block_size x world, interleave at a time. */
static uint32_t kernel_blocks(const model_spec *s) {
  return s->kernel_blocks ? s->kernel_blocks : 1;
}

static uint32_t owner(const model_spec *s, uint32_t p) {
  uint32_t world = s->cp_world_size ? s->cp_world_size : 1;
  uint32_t interleave = s->cp_interleave_size ? s->cp_interleave_size : 1;
  uint32_t kv_block = s->block_size * kernel_blocks(s);
  return p % (kv_block * world) / interleave % world;
}

/* Sequence s's local keys' global positions, in order; returns how many. */
static uint32_t local_positions(const model_spec *spec, uint32_t s,
                                uint32_t *positions) {
  uint32_t n = 0;
  for (uint32_t p = 0; p < spec->seq_lens[s]; ++p)
    if (owner(spec, p) == spec->cp_rank) positions[n++] = p;
  return n;
}

/* Element d of KV head h of a local key's K (or V) in the cache. */
static size_t cache_index(const model *m, uint32_t s, uint32_t j, uint32_t h,
                          uint32_t d, bool value) {
  uint32_t block = (uint32_t)m->table[(size_t)s * m->max_blocks +
                                      j / m->spec.block_size];
  return (size_t)block * m->block_stride +
         (size_t)(j % m->spec.block_size) * m->page_stride +
         (size_t)h * m->head_stride + d + (value ? m->value_offset : 0);
}

static void draw_layout(model *m) {
  const model_spec *s = &m->spec;
  uint64_t row = (uint64_t)s->num_kv_heads * s->head_size;
  m->page_stride = s->layout == CLBT_KV_LAYOUT_FLASH ? row : s->head_size;
  m->head_stride = s->layout == CLBT_KV_LAYOUT_FLASH
                       ? s->head_size
                       : (uint64_t)s->block_size * s->head_size;
  m->value_offset = row * s->block_size;
  m->block_stride = 2 * m->value_offset;
}

/* The block table: each row's KV-manager blocks distinct, drawn from a
   shuffled pool a quarter larger than needed, each k cache blocks
   (b x k .. b x k + k - 1, a table's kernel blocks); entries past a row's
   -1. */
static void draw_table(model *m) {
  const model_spec *s = &m->spec;
  uint32_t k = kernel_blocks(s), kv_block = s->block_size * k, total = 0;
  uint32_t *positions = malloc(sizeof *positions * 65536);
  m->local_lens = calloc(s->num_seqs, sizeof *m->local_lens);
  m->kv_blocks = calloc(s->num_seqs, sizeof *m->kv_blocks);
  m->max_kv_blocks = 1;
  for (uint32_t q = 0; q < s->num_seqs; ++q) {
    m->local_lens[q] = local_positions(s, q, positions);
    m->kv_blocks[q] = (m->local_lens[q] + kv_block - 1) / kv_block;
    total += m->kv_blocks[q];
    if (m->kv_blocks[q] > m->max_kv_blocks) m->max_kv_blocks = m->kv_blocks[q];
  }
  uint32_t pool_size = total + total / 4 + 1;
  m->num_blocks = pool_size * k;
  m->max_blocks = m->max_kv_blocks * k;
  uint32_t *pool = malloc(sizeof *pool * pool_size);
  for (uint32_t b = 0; b < pool_size; ++b) pool[b] = b;
  reseed(s->seed, 1, s->cp_rank, 0);
  for (uint32_t b = pool_size - 1; b > 0; --b) {
    uint32_t o = draw(b + 1), t = pool[b];
    pool[b] = pool[o], pool[o] = t;
  }
  m->table = malloc(sizeof *m->table * s->num_seqs * m->max_blocks);
  m->kv_table = malloc(sizeof *m->kv_table * s->num_seqs * m->max_kv_blocks);
  for (uint32_t q = 0, next = 0; q < s->num_seqs; ++q)
    for (uint32_t b = 0; b < m->max_kv_blocks; ++b) {
      int32_t id = b < m->kv_blocks[q] ? (int32_t)pool[next++] : -1;
      m->kv_table[(size_t)q * m->max_kv_blocks + b] = id;
      for (uint32_t i = 0; i < k; ++i)
        m->table[(size_t)q * m->max_blocks + b * k + i] =
            id < 0 ? -1 : id * (int32_t)k + (int32_t)i;
    }
  free(pool);
  free(positions);
}

/* The cache: NaN everywhere, each sequence's local keys drawn, each
   element from the stream of its sequence, position, head and element. */
static void draw_cache(model *m) {
  const model_spec *s = &m->spec;
  size_t elements = (size_t)m->num_blocks * m->block_stride;
  uint32_t *positions = malloc(sizeof *positions * 65536);
  m->cache_bytes = elements * model_size(s->cache);
  m->cache_bits = malloc(m->cache_bytes);
  for (size_t i = 0; i < elements; ++i)
    set_bits(s->cache, m->cache_bits, i, format_of(s->cache).nan);
  for (uint32_t q = 0; q < s->num_seqs; ++q) {
    local_positions(s, q, positions);
    for (uint32_t j = 0; j < m->local_lens[q]; ++j)
      for (uint32_t h = 0; h < s->num_kv_heads; ++h)
        for (uint32_t v = 0; v < 2; ++v) {
          reseed(s->seed, 2 + q, positions[j], h * 2 + v);
          for (uint32_t d = 0; d < s->head_size; ++d)
            set_bits(s->cache, m->cache_bits, cache_index(m, q, j, h, d, v),
                     random_bits(s->cache));
        }
  }
  m->cache_values = malloc(sizeof(double) * elements);
  for (size_t i = 0; i < elements; ++i)
    m->cache_values[i] = model_value(s->cache, m->cache_bits, i);
  free(positions);
}

static void draw_scales(model *m) {
  const model_spec *s = &m->spec;
  reseed(s->seed, 3, 0, 0);
  size_t n = (size_t)s->num_seqs * s->num_kv_heads;
  m->q_descale = s->query == CLBT_KV_FP8_E4M3 ? 0.75f : 1.0f;
  m->k_descale = s->cache == CLBT_KV_FP8_E4M3 ? 0.5f : 1.0f;
  m->v_descale = s->cache == CLBT_KV_FP8_E4M3 ? 0.25f : 1.0f;
  m->k_descales = malloc(sizeof(float) * (n + 1));
  m->v_descales = malloc(sizeof(float) * (n + 1));
  for (size_t i = 0; i < n; ++i) {
    m->k_descales[i] = 0.5f + (float)draw(16) / 16.0f;
    m->v_descales[i] = 0.5f + (float)draw(16) / 16.0f;
  }
  m->sinks = malloc(sizeof(float) * s->num_heads);
  for (uint32_t h = 0; h < s->num_heads; ++h)
    m->sinks[h] = (float)draw(64) / 16.0f - 2.0f;
}

/* ---- the expectation --------------------------------------------------- */

/* What query token i of sequence q, head h, must give: out[head_size] and
   its lse, over this rank's keys. */
static void expect(const model *m, const uint32_t *positions, uint32_t q,
                   uint32_t i, uint32_t h, double *out, double *lse) {
  const model_spec *s = &m->spec;
  uint32_t group = s->num_heads / s->num_kv_heads, kv = h / group;
  uint32_t token = (uint32_t)m->cu[q] + i;
  uint32_t at = s->seq_lens[q] - s->q_lens[q] + i; /* the query's position */
  size_t n = (size_t)s->num_kv_heads * q + kv;
  double kd = s->per_seq_descales ? m->k_descales[n] : m->k_descale;
  double vd = s->per_seq_descales ? m->v_descales[n] : m->v_descale;
  double scale = 1.0 / sqrt((double)s->head_size), top = -INFINITY, sum = 0;
  double *scores = malloc(sizeof *scores * (m->local_lens[q] + 1));
  const double *query = m->query_values + ((size_t)token * s->num_heads + h) *
                                             s->head_size;
  for (uint32_t j = 0; j < m->local_lens[q]; ++j) {
    uint32_t p = positions[j];
    scores[j] = -INFINITY;
    if (p > at || (s->sliding_window && at - p >= s->sliding_window)) continue;
    double dot = 0;
    for (uint32_t d = 0; d < s->head_size; ++d)
      dot += query[d] * m->cache_values[cache_index(m, q, j, kv, d, 0)];
    dot *= m->q_descale * kd;
    dot *= scale;
    if (s->softcap > 0) dot = s->softcap * tanh(dot / s->softcap);
    scores[j] = dot;
    top = fmax(top, dot);
  }
  if (s->sinks) top = fmax(top, m->sinks[h]);
  for (uint32_t d = 0; d < s->head_size; ++d) out[d] = 0;
  for (uint32_t j = 0; j < m->local_lens[q] && top > -INFINITY; ++j) {
    if (scores[j] == -INFINITY) continue;
    double w = exp(scores[j] - top);
    sum += w;
    for (uint32_t d = 0; d < s->head_size; ++d)
      out[d] += w * m->cache_values[cache_index(m, q, j, kv, d, 1)] * vd;
  }
  if (s->sinks && top > -INFINITY) sum += exp(m->sinks[h] - top);
  for (uint32_t d = 0; d < s->head_size; ++d) out[d] = sum > 0 ? out[d] / sum : 0;
  *lse = sum > 0 ? top + log(sum) : -INFINITY;
  free(scores);
}

void model_make(model *m, const model_spec *spec) {
  *m = (model){.spec = *spec};
  model_spec *s = &m->spec;
  if (!s->output) s->output = s->query;
  m->cu = malloc(sizeof *m->cu * (s->num_seqs + 1));
  m->cu[0] = 0;
  for (uint32_t q = 0; q < s->num_seqs; ++q)
    m->cu[q + 1] = m->cu[q] + (int32_t)s->q_lens[q];
  m->num_tokens = (uint32_t)m->cu[s->num_seqs] + s->padding_tokens;
  draw_layout(m);
  draw_table(m);
  draw_cache(m);
  draw_scales(m);
  size_t row = (size_t)s->num_heads * s->head_size;
  m->query_bits = malloc(model_size(s->query) * row * (m->num_tokens + 1));
  m->query_values = malloc(sizeof(double) * row * (m->num_tokens + 1));
  reseed(s->seed, 4, 0, 0);
  for (size_t i = 0; i < row * m->num_tokens; ++i) {
    set_bits(s->query, m->query_bits, i, random_bits(s->query));
    m->query_values[i] = model_value(s->query, m->query_bits, i);
  }
  m->expected = calloc(row * (m->num_tokens + 1), sizeof *m->expected);
  m->expected_lse =
      calloc((size_t)s->num_heads * (m->num_tokens + 1), sizeof(double));
  uint32_t *positions = malloc(sizeof *positions * 65536);
  for (uint32_t q = 0; q < s->num_seqs; ++q) {
    local_positions(s, q, positions);
    for (uint32_t i = 0; i < s->q_lens[q]; ++i)
      for (uint32_t h = 0; h < s->num_heads; ++h) {
        size_t t = (size_t)m->cu[q] + i;
        expect(m, positions, q, i, h, m->expected + (t * s->num_heads + h) *
                                                        s->head_size,
               m->expected_lse + t * s->num_heads + h);
      }
  }
  free(positions);
  /* An fp8 output holds values up to about 200 x output_scale. */
  double largest = 1e-6;
  for (size_t i = 0; i < row * m->num_tokens; ++i)
    largest = fmax(largest, fabs(m->expected[i]));
  m->output_scale = (float)(largest / 200.0);
}

void model_expect_zero(model *m, uint32_t token) {
  const model_spec *s = &m->spec;
  for (uint32_t h = 0; h < s->num_heads; ++h) {
    for (uint32_t d = 0; d < s->head_size; ++d)
      m->expected[((size_t)token * s->num_heads + h) * s->head_size + d] = 0;
    m->expected_lse[(size_t)token * s->num_heads + h] = -INFINITY;
  }
}
