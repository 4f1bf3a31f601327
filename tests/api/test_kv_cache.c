/*
 * The KV-cache write (clbt_kv_cache_*, src/kv/, cl/kv_cache.cl)
 * against an independent model of vLLM's reshape_and_cache_flash
 * (csrc/cache_kernels.cu) on the shapes of vLLM's
 * tests/kernels/attention/test_cache.py, scaled down for PoCL: several
 * head counts, head sizes 64 to 256, block sizes 16 to 64, both layouts,
 * one buffer and two, inputs that are views of a qkv tensor, every type.
 * The model writes token t's elements to slot slot_mapping[t] with the
 * address arithmetic of the config's documentation, skips negative slots
 * and counts slots past the cache; it converts by the formats'
 * definitions, not by bit tricks: a value becomes the nearest one of the
 * target type found among all its finite values (ties to the even code),
 * past the largest by the overflow rule (infinity for fp16 and bf16, 448
 * for fp8 e4m3fn, as CUDA's __NV_SATFINITE), and fp8 takes x / scale as
 * float division gives it. Caches are poisoned first, so that an element
 * written where none should be shows; the whole buffer is compared. Hand-
 * worked values pin the rounding at every boundary. The seed is printed;
 * CLBT_TEST_SEED=<seed> replays a run.
 */
#include "clbt_test.h"
#include "kernel_arg_spy.h"

#include <math.h>
#include <stdlib.h>

#define POISON_BYTE 0x5a

/* ---- the model's formats ------------------------------------------------- */

static size_t dtype_size(clbt_kv_dtype t) {
  return t == CLBT_KV_FLOAT32 ? 4 : t == CLBT_KV_FP8_E4M3 ? 1 : 2;
}

/* The value of a code of a type, from the format's definition. */
static double decode(clbt_kv_dtype t, uint32_t code) {
  int sign_bit, exponent_bits, mantissa_bits, bias;
  switch (t) {
    case CLBT_KV_FLOAT16: sign_bit = 15, exponent_bits = 5, mantissa_bits = 10, bias = 15; break;
    case CLBT_KV_BFLOAT16: sign_bit = 15, exponent_bits = 8, mantissa_bits = 7, bias = 127; break;
    case CLBT_KV_FP8_E4M3: sign_bit = 7, exponent_bits = 4, mantissa_bits = 3, bias = 7; break;
    default: {
      float f;
      memcpy(&f, &code, sizeof f);
      return f;
    }
  }
  uint32_t mantissa = code & ((1u << mantissa_bits) - 1);
  uint32_t exponent = (code >> mantissa_bits) & ((1u << exponent_bits) - 1);
  double sign = (code >> sign_bit) & 1 ? -1.0 : 1.0;
  uint32_t top = (1u << exponent_bits) - 1;
  if (exponent == top && t != CLBT_KV_FP8_E4M3)
    return mantissa ? NAN : sign * INFINITY;
  if (t == CLBT_KV_FP8_E4M3 && exponent == top && mantissa == 7) return NAN;
  if (exponent == 0) return sign * ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * ldexp(mantissa + (1u << mantissa_bits),
                      (int)exponent - bias - mantissa_bits);
}

/* The largest finite positive code of a type (fp32 is not a target). */
static uint32_t largest_code(clbt_kv_dtype t) {
  return t == CLBT_KV_FLOAT16 ? 0x7bffu : t == CLBT_KV_BFLOAT16 ? 0x7f7fu : 0x7eu;
}

/* The nearest finite positive code to a >= 0, ties to the even code, by
   binary search over the codes (whose values grow with them). */
static uint32_t nearest_code(clbt_kv_dtype t, double a) {
  uint32_t low = 0, high = largest_code(t);
  while (high - low > 1) {
    uint32_t middle = (low + high) / 2;
    if (decode(t, middle) <= a) low = middle; else high = middle;
  }
  double below = a - decode(t, low), above = decode(t, high) - a;
  if (below < above) return low;
  if (above < below) return high;
  return low % 2 == 0 ? low : high;
}

/* x in type t, rounded to nearest even, by the overflow rules above. */
static uint32_t encode(clbt_kv_dtype t, float x) {
  uint32_t sign_shift = t == CLBT_KV_FP8_E4M3 ? 7 : 15;
  uint32_t sign = signbit(x) ? 1u << sign_shift : 0;
  if (t == CLBT_KV_FLOAT32) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
  }
  if (isnan(x))
    return t == CLBT_KV_FLOAT16 ? sign | 0x7e00u
           : t == CLBT_KV_BFLOAT16 ? 0x7fc0u : 0x7fu;
  double a = fabs((double)x);
  double largest = decode(t, largest_code(t));
  /* Half an ulp past the largest value. */
  double ulp = largest - decode(t, largest_code(t) - 1);
  if (a >= largest + ulp / 2 && t != CLBT_KV_FP8_E4M3)
    return sign | (t == CLBT_KV_FLOAT16 ? 0x7c00u : 0x7f80u);
  if (a > largest + ulp / 2) return sign | 0x7eu;
  return sign | nearest_code(t, a);
}

/* An input element's value as float (exact for every input type). */
static float input_value(clbt_kv_dtype t, uint32_t bits) {
  return (float)decode(t, bits);
}

/* An input element written to a cache of type `cache`. */
static uint32_t convert(clbt_kv_dtype input, clbt_kv_dtype cache,
                        uint32_t bits, float scale) {
  if (input == cache) return bits;
  float x = input_value(input, bits);
  if (cache == CLBT_KV_FP8_E4M3) x = x / scale;
  return encode(cache, x);
}

static uint32_t load(const uint8_t *bytes, size_t size, uint64_t index) {
  uint32_t v = 0;
  memcpy(&v, bytes + index * size, size); /* little-endian hosts */
  return v;
}

static void store(uint8_t *bytes, size_t size, uint64_t index, uint32_t v) {
  memcpy(bytes + index * size, &v, size);
}

/* ---- the fixture: a cache, its inputs, and the model ------------------- */

typedef struct kv_case {
  const char *name;
  clbt_kv_layout layout;
  clbt_kv_dtype input, cache;
  uint32_t heads, head_size, block_size, num_blocks, num_tokens;
  bool one_buffer;
  bool split_halves;  /* one buffer as [2][num_blocks] (FlashAttention) */
  uint64_t page_padding; /* elements added to the layout's page stride */
  bool qkv;           /* key and value are views of one [t][3][h][d] */
  uint32_t input_shift; /* elements before the inputs: misaligned if odd */
  float k_scale, v_scale;
} kv_case;

typedef struct kv_run {
  clbt_kv_cache_config config;
  uint64_t block_elements;
  /* The model's strides and offsets, whatever the config leaves 0. */
  uint64_t block_stride, page_stride, head_stride, key_offset, value_offset;
  size_t cache_bytes, input_bytes;
  uint8_t *key_cache, *value_cache; /* the model's; value NULL: one buffer */
  uint8_t *key_in, *value_in;       /* value_in NULL: qkv, in key_in */
  int64_t *slots;
  uint64_t key_at, value_at, stride;
  uint32_t rejected;
} kv_run;

/* Random bits of type t, a quarter of them any pattern (NaN, infinity,
   subnormals), the rest values of a normal-ish spread. */
static uint32_t random_input(clbt_kv_dtype t) {
  uint32_t bits = (uint32_t)clbt_test_random();
  if (clbt_test_chance(25) || t == CLBT_KV_FP8_E4M3)
    return t == CLBT_KV_FLOAT32 ? bits
           : t == CLBT_KV_FP8_E4M3 ? bits & 0xffu : bits & 0xffffu;
  float x = (float)((int32_t)(bits >> 8) - (1 << 23)) / (float)(1 << 21);
  if (t == CLBT_KV_FLOAT32) return encode(t, x);
  return encode(t, x); /* fp16 and bf16 codes of the value */
}

/* Slots: distinct ones in [0, num_slots), some -1, some past the cache. */
static void draw_slots(kv_run *r, const kv_case *c) {
  uint64_t num_slots = (uint64_t)c->num_blocks * c->block_size;
  r->rejected = 0;
  for (uint32_t t = 0; t < c->num_tokens; ++t) {
    uint32_t kind = clbt_test_below(10);
    if (kind == 0) {
      r->slots[t] = CLBT_PAD_SLOT_ID;
    } else if (kind == 1) {
      r->slots[t] = t % 2 ? (int64_t)num_slots + t : INT64_MAX - t;
      ++r->rejected;
    } else {
      bool taken;
      do {
        r->slots[t] = (int64_t)clbt_test_below((uint32_t)num_slots);
        taken = false;
        for (uint32_t u = 0; u < t; ++u) taken |= r->slots[u] == r->slots[t];
      } while (taken);
    }
  }
}

static void model_write(kv_run *r, const kv_case *c) {
  size_t in = dtype_size(c->input), out = dtype_size(c->cache);
  uint8_t *value_cache = r->value_cache ? r->value_cache : r->key_cache;
  const uint8_t *value_in = r->value_in ? r->value_in : r->key_in;
  uint64_t num_slots = (uint64_t)c->num_blocks * c->block_size;
  for (uint32_t t = 0; t < c->num_tokens; ++t) {
    int64_t slot = r->slots[t];
    if (slot < 0 || (uint64_t)slot >= num_slots) continue;
    uint64_t page = (uint64_t)slot / c->block_size * r->block_stride +
                    (uint64_t)slot % c->block_size * r->page_stride;
    for (uint32_t h = 0; h < c->heads; ++h)
      for (uint32_t e = 0; e < c->head_size; ++e) {
        uint64_t src = t * r->stride + (uint64_t)h * c->head_size + e;
        uint64_t dst = page + h * r->head_stride + e;
        store(r->key_cache, out, r->key_offset + dst,
              convert(c->input, c->cache, load(r->key_in, in, r->key_at + src),
                      c->k_scale));
        store(value_cache, out, r->value_offset + dst,
              convert(c->input, c->cache,
                      load(value_in, in, r->value_at + src), c->v_scale));
      }
  }
}

/* The config of a case, with its strides explicit where the case says. */
static void make_config(kv_run *r, const kv_case *c) {
  clbt_kv_cache_config *k = &r->config;
  *k = (clbt_kv_cache_config)CLBT_KV_CACHE_CONFIG_INIT;
  k->layout = c->layout;
  k->cache_dtype = c->cache;
  /* An fp8 cache names its input; the others leave it to default. */
  k->input_dtype = c->input == c->cache && c->cache != CLBT_KV_FP8_E4M3
                       ? CLBT_KV_DTYPE_NONE
                       : c->input;
  k->num_kv_heads = c->heads;
  k->head_size = c->head_size;
  k->block_size = c->block_size;
  k->num_blocks = c->num_blocks;
  uint64_t row = (uint64_t)c->heads * c->head_size;
  bool flash = c->layout == CLBT_KV_LAYOUT_FLASH;
  /* The layout's strides, written out (the padding widens each page). */
  r->page_stride = (flash ? row : c->head_size) + c->page_padding;
  r->head_stride = flash ? c->head_size : r->page_stride * c->block_size;
  r->block_elements =
      flash ? r->page_stride * c->block_size : r->head_stride * c->heads;
  r->block_stride = c->one_buffer && !c->split_halves ? 2 * r->block_elements
                                                      : r->block_elements;
  r->key_offset = 0;
  r->value_offset = !c->one_buffer ? 0
                    : c->split_halves ? r->block_elements * c->num_blocks
                                      : r->block_elements;
  /* Without padding or halves the defaults are the library's to find. */
  if (c->page_padding || c->split_halves) {
    k->page_stride = r->page_stride;
    k->head_stride = r->head_stride;
    k->block_stride = r->block_stride;
    k->value_offset = r->value_offset;
  }
}

static void run_case(const kv_case *c) {
  kv_run r = {0};
  make_config(&r, c);
  size_t in = dtype_size(c->input), out = dtype_size(c->cache);
  uint64_t row = (uint64_t)c->heads * c->head_size;
  uint64_t tensor = r.block_elements * c->num_blocks;
  r.cache_bytes = (size_t)(c->one_buffer ? 2 * tensor : tensor) * out;
  r.key_cache = malloc(r.cache_bytes);
  r.value_cache = c->one_buffer ? NULL : malloc(r.cache_bytes);
  memset(r.key_cache, POISON_BYTE, r.cache_bytes);
  if (r.value_cache) memset(r.value_cache, POISON_BYTE, r.cache_bytes);
  /* Inputs: [t][3][h][d] views (token stride 3 x row, key at row, value at
     2 x row), or two [t][h][d] tensors; input_shift elements before. */
  r.stride = c->qkv ? 3 * row : row;
  r.key_at = c->input_shift + (c->qkv ? row : 0);
  r.value_at = c->input_shift + (c->qkv ? 2 * row : 0);
  uint64_t elements = c->input_shift + (uint64_t)c->num_tokens * r.stride;
  r.input_bytes = (size_t)elements * in;
  r.key_in = malloc(r.input_bytes);
  r.value_in = c->qkv ? NULL : malloc(r.input_bytes);
  for (uint64_t i = 0; i < elements; ++i) {
    store(r.key_in, in, i, random_input(c->input));
    if (r.value_in) store(r.value_in, in, i, random_input(c->input));
  }
  r.slots = malloc(c->num_tokens * sizeof *r.slots);
  draw_slots(&r, c);

  cl_mem key_cache = clbt_test_buffer(r.cache_bytes, r.key_cache);
  cl_mem value_cache =
      r.value_cache ? clbt_test_buffer(r.cache_bytes, r.value_cache) : NULL;
  cl_mem key_in = clbt_test_buffer(r.input_bytes, r.key_in);
  cl_mem value_in = r.value_in ? clbt_test_buffer(r.input_bytes, r.value_in)
                               : key_in;
  cl_mem slots = clbt_test_buffer(c->num_tokens * sizeof *r.slots, r.slots);
  r.config.key_cache = key_cache;
  r.config.value_cache = value_cache;
  clbt_kv_cache *cache = NULL;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &r.config, &cache));
  clbt_kv_write w = CLBT_KV_WRITE_INIT;
  w.num_tokens = c->num_tokens;
  w.key = key_in;
  w.value = value_in;
  w.slot_mapping = slots;
  w.key_offset = r.key_at;
  w.value_offset = r.value_at;
  w.key_token_stride = w.value_token_stride = c->qkv ? r.stride : 0;
  w.k_scale = c->k_scale;
  w.v_scale = c->v_scale;
  cl_event done = NULL;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(cache, &w, 0, NULL, &done));
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
  model_write(&r, c);

  uint8_t *device = malloc(r.cache_bytes);
  for (int side = 0; side < (c->one_buffer ? 1 : 2); ++side) {
    const uint8_t *expected = side ? r.value_cache : r.key_cache;
    clbt_test_read(side ? value_cache : key_cache, r.cache_bytes, device);
    for (size_t i = 0; i < r.cache_bytes / out; ++i) {
      uint32_t want = load(expected, out, i), got = load(device, out, i);
      ck_assert_msg(want == got,
                    "%s: %s cache element %zu is 0x%x, the model says 0x%x",
                    c->name, side ? "value" : "key", i, (unsigned)got,
                    (unsigned)want);
    }
  }
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_kv_cache_read_rejected_tokens(cache, &rejected));
  ck_assert_msg(rejected == r.rejected, "%s: %u rejected, the model says %u",
                c->name, (unsigned)rejected, (unsigned)r.rejected);
  clbt_kv_cache_destroy(cache);
  clReleaseMemObject(key_cache);
  if (value_cache) clReleaseMemObject(value_cache);
  clReleaseMemObject(key_in);
  if (r.value_in) clReleaseMemObject(value_in);
  clReleaseMemObject(slots);
  free(device);
  free(r.key_cache);
  free(r.value_cache);
  free(r.key_in);
  free(r.value_in);
  free(r.slots);
}

/* The shapes of test_cache.py's test_reshape_and_cache_flash (8 heads, head
   sizes 64/80/256, block sizes 8-32, one FlashInfer buffer of K and V,
   NHC and HNC, views of a qkv tensor), with more head counts and block
   sizes, fewer blocks and tokens. Each type pair and alignment is one
   program; the shapes vary within them. */
static const kv_case cases[] = {
    {"fp16 flash, two buffers", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FLOAT16,
     CLBT_KV_FLOAT16, 4, 64, 16, 24, 40, false, false, 0, false, 0, 1, 1},
    {"fp16 head-major, one buffer, qkv", CLBT_KV_LAYOUT_HEAD_MAJOR,
     CLBT_KV_FLOAT16, CLBT_KV_FLOAT16, 8, 80, 32, 12, 21, true, false, 0,
     true, 0, 1, 1},
    {"bf16 head-major, one buffer, qkv", CLBT_KV_LAYOUT_HEAD_MAJOR,
     CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 2, 128, 32, 16, 33, true, false, 0,
     true, 0, 1, 1},
    {"bf16 flash, FlashAttention's halves", CLBT_KV_LAYOUT_FLASH,
     CLBT_KV_BFLOAT16, CLBT_KV_BFLOAT16, 8, 256, 16, 6, 21, true, true, 0,
     true, 0, 1, 1},
    {"fp32 flash, one buffer, qkv", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FLOAT32,
     CLBT_KV_FLOAT32, 8, 64, 64, 4, 21, true, false, 0, true, 0, 1, 1},
    {"fp32 head-major, padded pages", CLBT_KV_LAYOUT_HEAD_MAJOR,
     CLBT_KV_FLOAT32, CLBT_KV_FLOAT32, 1, 256, 16, 8, 17, false, false, 4,
     false, 0, 1, 1},
    {"fp16 to fp8, head-major, one buffer", CLBT_KV_LAYOUT_HEAD_MAJOR,
     CLBT_KV_FLOAT16, CLBT_KV_FP8_E4M3, 8, 64, 16, 16, 21, true, false, 0,
     true, 0, 0.0173f, 0.0291f},
    {"fp16 to fp8, flash, two buffers", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FLOAT16,
     CLBT_KV_FP8_E4M3, 2, 256, 64, 4, 40, false, false, 0, false, 0, 3.5f,
     0.7f},
    {"bf16 to fp8, flash, one buffer", CLBT_KV_LAYOUT_FLASH, CLBT_KV_BFLOAT16,
     CLBT_KV_FP8_E4M3, 8, 80, 16, 12, 21, true, false, 0, true, 0, 0.0213f,
     0.0456f},
    {"fp32 to fp8, head-major", CLBT_KV_LAYOUT_HEAD_MAJOR, CLBT_KV_FLOAT32,
     CLBT_KV_FP8_E4M3, 4, 128, 32, 8, 30, false, false, 0, false, 0, 0.011f,
     1.0f},
    {"fp8 to fp8, flash", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FP8_E4M3,
     CLBT_KV_FP8_E4M3, 4, 64, 16, 8, 20, true, false, 0, true, 0, 0, 0},
    {"fp32 to bf16, flash", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FLOAT32,
     CLBT_KV_BFLOAT16, 2, 64, 16, 8, 20, false, false, 0, false, 0, 0, 0},
    {"fp32 to fp16, head-major", CLBT_KV_LAYOUT_HEAD_MAJOR, CLBT_KV_FLOAT32,
     CLBT_KV_FLOAT16, 2, 64, 16, 8, 20, true, false, 0, true, 0, 0, 0},
    {"fp16, misaligned inputs", CLBT_KV_LAYOUT_FLASH, CLBT_KV_FLOAT16,
     CLBT_KV_FLOAT16, 4, 64, 16, 8, 20, true, false, 0, true, 1, 1, 1},
};

/* ---- hand-worked values --------------------------------------------- */

/*
 * Writes n fp32 values, one token of one head of n elements, to a cache
 * of `type` with scale `scale`, and returns the codes it wrote.
 */
static void write_values(clbt_kv_dtype type, const float *values, uint32_t n,
                         float scale, uint32_t *codes) {
  size_t size = dtype_size(type);
  uint8_t poison[64 * 4], bytes[64 * 4];
  memset(poison, POISON_BYTE, sizeof poison);
  cl_mem cache_buffer = clbt_test_buffer(2 * n * size, poison);
  cl_mem input = clbt_test_buffer(n * sizeof(float), values);
  const int64_t slot = 0;
  cl_mem slots = clbt_test_buffer(sizeof slot, &slot);
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = type;
  config.input_dtype = CLBT_KV_FLOAT32;
  config.num_kv_heads = 1;
  config.head_size = n;
  config.block_size = 1;
  config.num_blocks = 1;
  config.key_cache = cache_buffer;
  clbt_kv_cache *cache = NULL;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &config, &cache));
  clbt_kv_write w = CLBT_KV_WRITE_INIT;
  w.num_tokens = 1;
  w.key = w.value = input;
  w.slot_mapping = slots;
  w.k_scale = w.v_scale = scale;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(cache, &w, 0, NULL, NULL));
  clbt_test_read(cache_buffer, 2 * n * size, bytes);
  for (uint32_t i = 0; i < n; ++i) {
    codes[i] = load(bytes, size, i);
    ck_assert_msg(codes[i] == load(bytes, size, n + i),
                  "K and V of one value differ at %u", (unsigned)i);
  }
  clbt_kv_cache_destroy(cache);
  clReleaseMemObject(cache_buffer);
  clReleaseMemObject(input);
  clReleaseMemObject(slots);
}

static void expect_codes(clbt_kv_dtype type, const float *values,
                         const uint32_t *expected, uint32_t n, float scale) {
  uint32_t codes[64];
  write_values(type, values, n, scale, codes);
  for (uint32_t i = 0; i < n; ++i)
    ck_assert_msg(codes[i] == expected[i],
                  "type %d: %a / %g wrote 0x%x, expected 0x%x", (int)type,
                  (double)values[i], (double)scale, (unsigned)codes[i],
                  (unsigned)expected[i]);
}

/*
 * e4m3fn: bias 7, 3 mantissa bits, 448 = 0x7e the largest, 0x7f NaN.
 * Ties go to the even code: 1 + 1/16 lies between 0x38 (1) and 0x39
 * (1.125), 1 + 3/16 between 0x39 and 0x3a (1.25); 2^-10 is half the
 * smallest subnormal 2^-9 (0x01), 3 x 2^-10 between 0x01 and 0x02, 7.5 x
 * 2^-9 between 0x07 and 0x08 (2^-6). 464 = 448 + half its ulp of 32 ties
 * to 448, whose code is even; anything larger saturates to 448, infinity
 * too, as CUDA's __NV_SATFINITE; NaN of either sign is 0x7f. With scale 2
 * every value is halved first: 896 gives 448, 3 gives 1.5 (0x3c).
 */
START_TEST(fp8_boundaries) {
  const float values[] = {0.0f, -0.0f, 1.0f, 1.0625f, 1.1875f, -1.1875f,
                          0x1p-9f, 0x1p-10f, 0x1.0001p-10f, 3 * 0x1p-10f,
                          7.5f * 0x1p-9f, 0x1p-6f, 240.0f, 448.0f, 464.0f,
                          464.01f, 480.0f, 1e30f, -1e30f, INFINITY,
                          -INFINITY, NAN, -NAN, 0x1p-149f};
  const uint32_t expected[] = {0x00, 0x80, 0x38, 0x38, 0x3a, 0xba, 0x01,
                               0x00, 0x01, 0x02, 0x08, 0x08, 0x77, 0x7e,
                               0x7e, 0x7e, 0x7e, 0x7e, 0xfe, 0x7e, 0xfe,
                               0x7f, 0x7f, 0x00};
  uint32_t n = sizeof values / sizeof values[0];
  expect_codes(CLBT_KV_FP8_E4M3, values, expected, n, 1.0f);
  const float halved[] = {896.0f, 3.0f, -928.0f, 0x1p-9f};
  const uint32_t halved_codes[] = {0x7e, 0x3c, 0xfe, 0x00};
  expect_codes(CLBT_KV_FP8_E4M3, halved, halved_codes, 4, 2.0f);
}
END_TEST

/*
 * fp16 (bias 15, 10 bits): 65504 = 0x7bff the largest, 65520 halfway to
 * 65536 rounds to infinity (0x7bff is odd); 2^-24 = 0x0001, 2^-25 ties to
 * 0, 3 x 2^-25 to 0x0002; 1 + 2^-11 ties to 0x3c00, 1 + 3 x 2^-11 to
 * 0x3c02; NaN keeps its sign as 0x7e00. bf16 (bias 127, 7 bits): 1 + 2^-8
 * ties to 0x3f80, 1 + 3 x 2^-8 to 0x3f82; FLT_MAX is past the largest,
 * 0x7f7f, by more than half an ulp: infinity; NaN is 0x7fc0 of either sign.
 */
START_TEST(fp16_and_bf16_boundaries) {
  const float half_values[] = {65504.0f, 65519.0f, 65520.0f, -70000.0f,
                               0x1p-24f, 0x1p-25f, 3 * 0x1p-25f,
                               1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, NAN,
                               -NAN, -INFINITY, 0x1p-14f, -0.0f};
  const uint32_t half_codes[] = {0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x0001,
                                 0x0000, 0x0002, 0x3c00, 0x3c02, 0x7e00,
                                 0xfe00, 0xfc00, 0x0400, 0x8000};
  expect_codes(CLBT_KV_FLOAT16, half_values, half_codes, 14, 1.0f);
  const float bf16_values[] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                               -2.0f, 3.4028235e38f, NAN, -NAN, INFINITY,
                               0x1p-133f, -0.0f};
  const uint32_t bf16_codes[] = {0x3f80, 0x3f80, 0x3f82, 0xc000, 0x7f80,
                                 0x7fc0, 0x7fc0, 0x7f80, 0x0001, 0x8000};
  expect_codes(CLBT_KV_BFLOAT16, bf16_values, bf16_codes, 10, 1.0f);
}
END_TEST

/* ---- the call's other behaviour --------------------------------------- */

typedef struct small_cache {
  cl_mem buffer, input, slots;
  clbt_kv_cache *cache;
  clbt_kv_write write;
} small_cache;

/* A one-buffer fp32 cache of 4 blocks of 4 slots of 1 head of 4, and 8
   tokens of input 0, 1, 2, ...; the slot mapping as given. */
static small_cache make_small_cache(const int64_t *slots, uint32_t count) {
  small_cache s;
  float poison[2 * 4 * 4 * 4], input[8 * 4];
  for (size_t i = 0; i < 128; ++i) poison[i] = -1.0f;
  for (size_t i = 0; i < 32; ++i) input[i] = (float)i;
  s.buffer = clbt_test_buffer(sizeof poison, poison);
  s.input = clbt_test_buffer(sizeof input, input);
  s.slots = clbt_test_buffer(count * sizeof *slots, slots);
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = CLBT_KV_FLOAT32;
  config.num_kv_heads = 1;
  config.head_size = 4;
  config.block_size = 4;
  config.num_blocks = 4;
  config.key_cache = s.buffer;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &config, &s.cache));
  s.write = (clbt_kv_write)CLBT_KV_WRITE_INIT;
  s.write.key = s.write.value = s.input;
  s.write.slot_mapping = s.slots;
  return s;
}

static void free_small_cache(small_cache *s) {
  clbt_kv_cache_destroy(s->cache);
  clReleaseMemObject(s->buffer);
  clReleaseMemObject(s->input);
  clReleaseMemObject(s->slots);
}

/* Slot s of block b = s / 4 holds K at b x 32 + (s % 4) x 4 and V 16 on. */
static float cached(const float *cache, int64_t slot, int kv, int e) {
  return cache[slot / 4 * 32 + kv * 16 + slot % 4 * 4 + e];
}

/*
 * Slots 5, -1, 16 (one past the 16 slots), 0, INT64_MIN, 15, then from
 * slot_mapping_offset 2 a second write: tokens 0..3 read entries 2..5.
 * Negative slots are skipped uncounted, 16 counted; every other element
 * keeps its poison. The counter adds up over writes and resets to 0.
 */
START_TEST(skips_counts_and_offsets) {
  const int64_t slots[] = {5, -1, 16, 0, INT64_MIN, 15};
  small_cache s = make_small_cache(slots, 6);
  s.write.num_tokens = 6;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL, NULL));
  float cache[128];
  clbt_test_read(s.buffer, sizeof cache, cache);
  for (int64_t slot = 0; slot < 16; ++slot)
    for (int e = 0; e < 4; ++e) {
      int token = slot == 5 ? 0 : slot == 0 ? 3 : slot == 15 ? 5 : -1;
      float want = token < 0 ? -1.0f : (float)(token * 4 + e);
      ck_assert_msg(cached(cache, slot, 0, e) == want &&
                        cached(cache, slot, 1, e) == want,
                    "slot %d element %d: K %g V %g, expected %g", (int)slot,
                    e, (double)cached(cache, slot, 0, e),
                    (double)cached(cache, slot, 1, e), (double)want);
    }
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_kv_cache_read_rejected_tokens(s.cache, &rejected));
  ck_assert_uint_eq(rejected, 1);
  /* Entries 2..5 (16, 0, INT64_MIN, 15) for tokens 0..3: token 1 to slot
     0, token 3 to slot 15. */
  s.write.num_tokens = 4;
  s.write.slot_mapping_offset = 2;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL, NULL));
  clbt_test_read(s.buffer, sizeof cache, cache);
  ck_assert(cached(cache, 0, 0, 2) == 6.0f && cached(cache, 15, 1, 3) == 15.0f);
  ck_assert(cached(cache, 5, 0, 0) == 0.0f);
  clbt_assert_ok(clbt_kv_cache_read_rejected_tokens(s.cache, &rejected));
  ck_assert_uint_eq(rejected, 2);
  clbt_assert_ok(clbt_kv_cache_reset_rejected_tokens(s.cache));
  clbt_assert_ok(clbt_kv_cache_read_rejected_tokens(s.cache, &rejected));
  ck_assert_uint_eq(rejected, 0);
  ck_assert_ptr_nonnull(clbt_kv_cache_rejected_tokens(s.cache));
  ck_assert_ptr_null(clbt_kv_cache_rejected_tokens(NULL));
  free_small_cache(&s);
}
END_TEST

/* The addressing clbt resolved for a config, against hand-worked values
   (clbt.h's defaults) and the given ones where set. */
static void expect_addressing(const clbt_kv_cache_config *given,
                              const clbt_kv_cache_addressing *want) {
  clbt_kv_cache *cache = NULL;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), given, &cache));
  clbt_kv_cache_addressing got;
  memset(&got, 0x5a, sizeof got);
  clbt_assert_ok(clbt_kv_cache_get_addressing(cache, &got));
  ck_assert_msg(got.key_offset == want->key_offset &&
                    got.value_offset == want->value_offset &&
                    got.block_stride == want->block_stride &&
                    got.page_stride == want->page_stride &&
                    got.head_stride == want->head_stride &&
                    got.tensor_span == want->tensor_span,
                "K at %llu, V at %llu, strides %llu %llu %llu, span %llu",
                (unsigned long long)got.key_offset,
                (unsigned long long)got.value_offset,
                (unsigned long long)got.block_stride,
                (unsigned long long)got.page_stride,
                (unsigned long long)got.head_stride,
                (unsigned long long)got.tensor_span);
  clbt_kv_cache_destroy(cache);
}

/*
 * One buffer, flash, 4 blocks of 4 slots of 1 head of 4 (E = 16): heads 4
 * apart, slots 4, blocks 2E = 32, V at E; K's last element is
 * 3 x 32 + 3 x 4 + 3 = 111. Two buffers, head-major, 3 blocks of 2 slots
 * of 2 heads of 4, K from 5 (E = 16): heads block_size x 4 = 8 apart,
 * slots 4, blocks E; V stays at 0; the last element 2 x 16 + 4 + 8 + 3 =
 * 47. FlashAttention's [2][4 blocks] in one buffer: V at 4E and blocks E
 * as given; the last element 3 x 16 + 12 + 3 = 63.
 */
START_TEST(addressing_resolves_the_defaults) {
  cl_mem one = clbt_test_buffer(128 * sizeof(float), NULL);
  cl_mem key = clbt_test_buffer(53 * sizeof(float), NULL);
  cl_mem value = clbt_test_buffer(48 * sizeof(float), NULL);
  clbt_kv_cache_config c = CLBT_KV_CACHE_CONFIG_INIT;
  c.cache_dtype = CLBT_KV_FLOAT32;
  c.num_kv_heads = 1;
  c.head_size = 4;
  c.block_size = 4;
  c.num_blocks = 4;
  c.key_cache = one;
  expect_addressing(&c, &(clbt_kv_cache_addressing){0, 16, 32, 4, 4, 112});
  c.value_offset = 64;
  c.block_stride = 16;
  expect_addressing(&c, &(clbt_kv_cache_addressing){0, 64, 16, 4, 4, 64});
  clbt_kv_cache_config h = CLBT_KV_CACHE_CONFIG_INIT;
  h.layout = CLBT_KV_LAYOUT_HEAD_MAJOR;
  h.cache_dtype = CLBT_KV_FLOAT32;
  h.num_kv_heads = 2;
  h.head_size = 4;
  h.block_size = 2;
  h.num_blocks = 3;
  h.key_cache = key;
  h.value_cache = value;
  h.key_offset = 5;
  expect_addressing(&h, &(clbt_kv_cache_addressing){5, 0, 16, 4, 8, 48});
  clReleaseMemObject(one);
  clReleaseMemObject(key);
  clReleaseMemObject(value);
}
END_TEST

/*
 * A cache buffer kernels may only read (CL_MEM_READ_ONLY), where OpenCL
 * leaves the write's stores undefined (a strict driver may fault or drop
 * them), is refused at creation, naming it: key_cache holding both, then
 * value_cache of two. It was taken, and every write wrote it. No cache is
 * made, and the buffer keeps its poison.
 */
START_TEST(a_read_only_cache_is_refused) {
  float poison[2 * 4 * 4 * 4];
  for (size_t i = 0; i < 128; ++i) poison[i] = -1.0f;
  cl_mem read_only = clbt_test_read_only_buffer(sizeof poison, poison);
  cl_mem writable = clbt_test_buffer(sizeof poison, poison);
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = CLBT_KV_FLOAT32;
  config.num_kv_heads = 1;
  config.head_size = 4;
  config.block_size = 4;
  config.num_blocks = 4;
  const struct {
    cl_mem key_cache, value_cache;
    const char *words;
  } refusals[] = {
      {read_only, NULL,
       "config->key_cache is a CL_MEM_READ_ONLY buffer, which kernels may "
       "only read; clbt's kernel writes it: make it CL_MEM_READ_WRITE"},
      {writable, read_only, "config->value_cache is a CL_MEM_READ_ONLY buffer"},
  };
  for (int i = 0; i < 2; ++i) {
    config.key_cache = refusals[i].key_cache;
    config.value_cache = refusals[i].value_cache;
    clbt_kv_cache *cache = NULL;
    clbt_assert_fails(clbt_kv_cache_create(clbt_test_device(), &config, &cache),
                      CLBT_READ_ONLY_BUFFER, refusals[i].words);
    ck_assert_ptr_null(cache);
  }
  float after[128];
  clbt_test_read(read_only, sizeof after, after);
  ck_assert(memcmp(after, poison, sizeof after) == 0);
  clReleaseMemObject(read_only);
  clReleaseMemObject(writable);
}
END_TEST

/* A write waits for its wait list and hands back its event; with no
   tokens, a marker after the wait list, and nothing written. */
START_TEST(events_and_empty_writes) {
  const int64_t slots[] = {3};
  small_cache s = make_small_cache(slots, 1);
  cl_int error = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(clbt_device_context(clbt_test_device()),
                                    &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  cl_event done = NULL, empty = NULL;
  s.write.num_tokens = 1;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 1, &gate,
                                             &done));
  s.write.num_tokens = 0;
  s.write.key = s.write.value = s.write.slot_mapping = NULL;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 1, &done,
                                             &empty));
  cl_int state = CL_COMPLETE;
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state,
                 NULL);
  ck_assert_int_ne(state, CL_COMPLETE);
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  ck_assert_int_eq(clWaitForEvents(1, &empty), CL_SUCCESS);
  float cache[128];
  clbt_test_read(s.buffer, sizeof cache, cache);
  for (int e = 0; e < 4; ++e)
    ck_assert(cached(cache, 3, 0, e) == (float)e &&
              cached(cache, 3, 1, e) == (float)e);
  ck_assert(cached(cache, 0, 0, 0) == -1.0f);
  clReleaseEvent(gate);
  clReleaseEvent(done);
  clReleaseEvent(empty);
  free_small_cache(&s);
}
END_TEST

/*
 * A buffer the aligned kernel was given is set again once the cache's
 * record of it has let it go, though its handle is the same: a second
 * aligned write from it sets nothing; eight misaligned writes (the
 * single-element kernel) from new buffers push it out of the last eight
 * the cache checked (and their references); the next aligned write sets
 * it again, as K and as V. Had it been released and a new buffer made at
 * its handle, the skipped set would have left the kernel reading the
 * freed one. That write reads it where it is: slot 3 gets token 1's 4..7.
 */
START_TEST(a_buffer_let_go_is_set_again) {
  const int64_t slots[] = {3};
  small_cache s = make_small_cache(slots, 1);
  s.write.num_tokens = 1;
  s.write.key_offset = s.write.value_offset = 4;
  clbt_test_watched = s.input;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL,
                                             NULL));
  ck_assert_uint_eq(clbt_test_watched_sets, 2);
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL,
                                             NULL));
  ck_assert_uint_eq(clbt_test_watched_sets, 2);
  float other[8];
  for (int i = 0; i < 8; ++i) other[i] = 100.0f;
  for (int n = 0; n < 8; ++n) {
    clbt_kv_write misaligned = s.write;
    misaligned.key = misaligned.value = clbt_test_buffer(sizeof other, other);
    misaligned.key_offset = misaligned.value_offset = 1;
    clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &misaligned, 0, NULL,
                                               NULL));
    clReleaseMemObject(misaligned.key);
  }
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL,
                                             NULL));
  ck_assert_uint_eq(clbt_test_watched_sets, 4);
  clbt_test_watched = NULL;
  float cache[128];
  clbt_test_read(s.buffer, sizeof cache, cache);
  for (int e = 0; e < 4; ++e)
    ck_assert(cached(cache, 3, 0, e) == 4.0f + e &&
              cached(cache, 3, 1, e) == 4.0f + e);
  free_small_cache(&s);
}
END_TEST

/*
 * The slot mapping of a table's step, read where it lies: requests of 3
 * and 2 tokens at positions 0-2 and 5-6, rows {2, 0} and {1, 3} of 4-slot
 * blocks, give slots 8 9 10 and 13 14 (clbt_table_compute_slot_mapping_host
 * says the same); the write of those 5 tokens puts token t's values there.
 */
START_TEST(writes_through_a_tables_slot_mapping) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 4;
  config.max_num_reqs = 2;
  config.max_num_blocks_per_req = 2;
  config.max_num_batched_tokens = 8;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){2, 0}, 2));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){1, 3}, 2));
  clbt_assert_ok(clbt_table_commit(table, 2));
  const int32_t qsl[] = {0, 3, 5};
  const int64_t positions[] = {0, 1, 2, 5, 6};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 2, qsl_buffer,
                                                 positions_buffer, 5));
  int64_t host[8];
  clbt_assert_ok(clbt_table_compute_slot_mapping_host(table, 2, qsl, positions,
                                                      5, host));
  const int64_t expected[] = {8, 9, 10, 13, 14};
  ck_assert_mem_eq(host, expected, sizeof expected);
  small_cache s = make_small_cache(expected, 1);
  s.write.num_tokens = 5;
  s.write.slot_mapping = clbt_table_slot_mapping(table);
  clbt_assert_ok(clbt_kv_cache_enqueue_write(s.cache, &s.write, 0, NULL, NULL));
  float cache[128];
  clbt_test_read(s.buffer, sizeof cache, cache);
  for (int t = 0; t < 5; ++t)
    for (int e = 0; e < 4; ++e)
      ck_assert(cached(cache, expected[t], 0, e) == (float)(t * 4 + e) &&
                cached(cache, expected[t], 1, e) == (float)(t * 4 + e));
  ck_assert(cached(cache, 0, 0, 0) == -1.0f);
  free_small_cache(&s);
  clbt_table_destroy(table);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
}
END_TEST

/* A sub-buffer of `parent` of `bytes` from `origin`. */
static cl_mem sub_buffer(cl_mem parent, size_t origin, size_t bytes) {
  cl_buffer_region region = {origin, bytes};
  cl_int error = CL_SUCCESS;
  cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE,
                                 CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return sub;
}

/*
 * K and V in two cl_mem that are one buffer: the parent and a sub-buffer
 * of it. A = the device's sub-buffer alignment in bytes; 2 blocks of 2
 * slots of 1 head of A / 4 floats, so a block is E = A / 2 floats (2A
 * bytes) and a tensor of two buffers spans 2E (4A bytes). V in a
 * sub-buffer from byte A shares K's bytes A .. 4A: refused, as the same
 * layout in one buffer is. V from byte 2A with blocks 2E apart in both
 * ([blocks][2][...] seen through two handles) shares none: taken, and a
 * write puts K and V in their own halves (slot 3: block 1, page 1, K at
 * float 2E + A / 4, V E floats on).
 */
START_TEST(k_and_v_in_one_buffer_through_a_sub_buffer) {
  cl_uint align_bits = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(clbt_test_device()),
                                   CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                                   sizeof align_bits, &align_bits, NULL),
                   CL_SUCCESS);
  const size_t a = align_bits / 8, floats = 2 * a; /* 8A bytes */
  float *poison = malloc(floats * sizeof *poison);
  ck_assert_ptr_nonnull(poison);
  for (size_t i = 0; i < floats; ++i) poison[i] = -1.0f;
  cl_mem parent = clbt_test_buffer(floats * sizeof *poison, poison);
  cl_mem overlapping = sub_buffer(parent, a, 4 * a);
  cl_mem interleaved = sub_buffer(parent, 2 * a, 6 * a);
  clbt_kv_cache_config c = CLBT_KV_CACHE_CONFIG_INIT;
  c.cache_dtype = CLBT_KV_FLOAT32;
  c.num_kv_heads = 1;
  c.head_size = (uint32_t)(a / 4);
  c.block_size = 2;
  c.num_blocks = 2;
  c.key_cache = parent;
  c.value_cache = overlapping;
  clbt_kv_cache *cache = NULL;
  char words[160];
  snprintf(words, sizeof words,
           "config->key_cache and value_cache are one buffer (a sub-buffer "
           "and its parent, or two sub-buffers of one): V, %zu bytes from K, "
           "would share an address",
           a);
  clbt_assert_fails(clbt_kv_cache_create(clbt_test_device(), &c, &cache),
                    CLBT_INVALID_CONFIG, words);
  ck_assert_ptr_null(cache);
  c.key_cache = overlapping; /* the other way round */
  c.value_cache = parent;
  clbt_assert_fails(clbt_kv_cache_create(clbt_test_device(), &c, &cache),
                    CLBT_INVALID_CONFIG, "share");
  const uint64_t e = a / 2; /* a block, in floats */
  c.key_cache = parent;
  c.value_cache = interleaved;
  c.block_stride = 2 * e;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &c, &cache));
  float *input = malloc(2 * c.head_size * sizeof *input);
  ck_assert_ptr_nonnull(input);
  for (uint32_t i = 0; i < 2 * c.head_size; ++i) input[i] = (float)i;
  const int64_t slot = 3;
  cl_mem input_buffer =
      clbt_test_buffer(2 * c.head_size * sizeof *input, input);
  cl_mem slots = clbt_test_buffer(sizeof slot, &slot);
  clbt_kv_write w = CLBT_KV_WRITE_INIT;
  w.num_tokens = 1;
  w.key = w.value = input_buffer;
  w.value_offset = c.head_size; /* V is the second row */
  w.slot_mapping = slots;
  clbt_assert_ok(clbt_kv_cache_enqueue_write(cache, &w, 0, NULL, NULL));
  float *got = malloc(floats * sizeof *got);
  ck_assert_ptr_nonnull(got);
  clbt_test_read(parent, floats * sizeof *got, got);
  for (size_t i = 0; i < floats; ++i) {
    size_t k_at = 2 * e + c.head_size, v_at = k_at + e;
    float want = i >= k_at && i < k_at + c.head_size ? (float)(i - k_at)
                 : i >= v_at && i < v_at + c.head_size
                     ? (float)(c.head_size + i - v_at)
                     : -1.0f;
    ck_assert_msg(got[i] == want, "float %zu: %g, expected %g", i,
                  (double)got[i], (double)want);
  }
  clbt_kv_cache_destroy(cache);
  clReleaseMemObject(input_buffer);
  clReleaseMemObject(slots);
  clReleaseMemObject(overlapping);
  clReleaseMemObject(interleaved);
  clReleaseMemObject(parent);
  free(poison);
  free(input);
  free(got);
}
END_TEST

START_TEST(writes_agree_with_the_model) {
  static bool seeded;
  if (!seeded) clbt_test_seed("kv_cache");
  seeded = true;
  run_case(&cases[_i]);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("kv_cache");
  TCase *c = tcase_create("kv_cache");
  tcase_add_loop_test(c, writes_agree_with_the_model, 0,
                      (int)(sizeof cases / sizeof cases[0]));
  tcase_add_test(c, fp8_boundaries);
  tcase_add_test(c, fp16_and_bf16_boundaries);
  tcase_add_test(c, skips_counts_and_offsets);
  tcase_add_test(c, addressing_resolves_the_defaults);
  tcase_add_test(c, events_and_empty_writes);
  tcase_add_test(c, a_read_only_cache_is_refused);
  tcase_add_test(c, a_buffer_let_go_is_set_again);
  tcase_add_test(c, writes_through_a_tables_slot_mapping);
  tcase_add_test(c, k_and_v_in_one_buffer_through_a_sub_buffer);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
