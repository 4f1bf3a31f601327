/*
 * What the paged attention's kernels share (cl/attention.h lists their -D
 * options): the element types and their loads and stores, the check of a
 * batch's cu_seqlens_q and the search of a token's sequence in it, a
 * sequence's row and key range through the page table
 * (include/clbt/clbt_kv_pages.h), the end of a row (its output and lse,
 * or a split's partial record), and the reduce that merges the splits.
 * The decode and tile kernels include it; cl/attention.cl, the program's
 * root, includes them.
 *
 * Scores are kept in log2 units (the host folds log2(e) into the scale),
 * so that every exponential is an exp2; lse is given in natural log.
 * docs/semantics.md, "Paged attention", has every rule.
 */
#pragma once
#include "kv_cache.h" /* the element types' codes */
#include "attention.h"
#include "kv_types.cl"

#define ATT_CAT_(a, b) a##b
#define ATT_CAT(a, b) ATT_CAT_(a, b)

/* Each type's bits (the CLBT_KV_TYPE_* codes). */
#define ATT_BITS_1 uint
#define ATT_BITS_2 ushort
#define ATT_BITS_3 ushort
#define ATT_BITS_4 uchar
#define ATT_Q_BITS ATT_CAT(ATT_BITS_, CLBT_ATT_Q)
#define ATT_KV_BITS ATT_CAT(ATT_BITS_, CLBT_ATT_KV)
#define ATT_OUT_BITS ATT_CAT(ATT_BITS_, CLBT_ATT_OUT)

/* VEC elements of the cache's bits, loaded at once through a pointer to
   the vector type, whose alignment lets the compiler make it one wide load
   (every address of the cache is a multiple of VEC elements). */
#if CLBT_ATT_VEC == 1
#define ATT_KV_VECTOR ATT_KV_BITS
#else
#define ATT_KV_VECTOR ATT_CAT(ATT_KV_BITS, CLBT_ATT_VEC)
#endif
#define ATT_KV_LOAD(i, p) (((__global const ATT_KV_VECTOR *)(p))[i])

#define HEAD CLBT_ATT_HEAD
#define GROUP CLBT_ATT_GROUP
#define ROWS CLBT_ATT_ROWS
#define HEAD_GROUPS ((GROUP + ROWS - 1) / ROWS)
#define LOG2E 1.4426950408889634f
#define LN2 0.69314718055994531f

/* One parameter of the kernels' list (cl/attention.h). */
#define ATT_PARAMETER(NAME, type, name) , type name
#define ATT_PARAMETERS CLBT_ATTENTION_ARGUMENTS(ATT_PARAMETER)

/* A work-group barrier; a CPU's work-groups are one work-item. */
#if CLBT_ATT_GPU
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE)
#else
#define SYNC()
#endif

/* ---- elements ---------------------------------------------------------- */

/* Element i of the query, as float. */
static float query_value(__global const ATT_Q_BITS *query, ulong i) {
#if CLBT_ATT_Q == CLBT_KV_TYPE_FLOAT32
  return as_float(query[i]);
#elif CLBT_ATT_Q == CLBT_KV_TYPE_FLOAT16
  return vload_half(i, (__global const half *)query);
#elif CLBT_ATT_Q == CLBT_KV_TYPE_BFLOAT16
  return bfloat16_to_float(query[i]);
#else
  return e4m3_to_float(query[i]);
#endif
}

/* The cache's VEC elements in v as floats, out[0, VEC). */
static void kv_values(ATT_KV_VECTOR v, float *out) {
  ATT_KV_BITS bits[CLBT_ATT_VEC];
#if CLBT_ATT_VEC == 1
  bits[0] = v;
#else
  ATT_CAT(vstore, CLBT_ATT_VEC)(v, 0, bits);
#endif
  for (uint e = 0; e < CLBT_ATT_VEC; ++e) {
#if CLBT_ATT_KV == CLBT_KV_TYPE_FLOAT32
    out[e] = as_float(bits[e]);
#elif CLBT_ATT_KV == CLBT_KV_TYPE_FLOAT16
    out[e] = vload_half(e, (const half *)bits);
#elif CLBT_ATT_KV == CLBT_KV_TYPE_BFLOAT16
    out[e] = bfloat16_to_float(bits[e]);
#else
    out[e] = e4m3_to_float(bits[e]);
#endif
  }
}

/* Stores x as output element i; an fp8 output takes x x out_scale,
   saturated. */
static void store_output(__global ATT_OUT_BITS *output, ulong i, float x,
                         float out_scale) {
#if CLBT_ATT_OUT == CLBT_KV_TYPE_FLOAT32
  (void)out_scale;
  output[i] = as_uint(x);
#elif CLBT_ATT_OUT == CLBT_KV_TYPE_FLOAT16
  (void)out_scale;
  output[i] = float_to_half(x);
#elif CLBT_ATT_OUT == CLBT_KV_TYPE_BFLOAT16
  (void)out_scale;
  output[i] = float_to_bfloat16(x);
#else
  output[i] = float_to_e4m3(x * out_scale);
#endif
}

/* A score, log2-scaled: q.k as the scale left it, soft-capped when asked. */
static float capped(float dot, float softcap) {
  return softcap > 0.0f ? softcap * tanh(dot / softcap) * LOG2E : dot;
}

/* ---- the batch --------------------------------------------------------- */

/*
 * The batch's cu_seqlens_q as a work-group reads it: from its local copy
 * when the kernel keeps one and the array fits it, else from global memory
 * (a uniform choice, made once).
 */
typedef struct cu_view {
  __local const int *copy;
  __global const int *given;
  bool copied;
} cu_view;

static int cu_at(cu_view cu, uint i) {
  return cu.copied ? cu.copy[i] : cu.given[i];
}

/*
 * Whether cu_seqlens_q[0..num_seqs] is a non-decreasing run from >= 0 to
 * <= num_tokens. Every work-group reads the whole array, so that all reach
 * one verdict without a launch of its own, and copies it to local memory
 * (cu_cache, when it fits the kernel's), where the searches are cheap.
 * *cu gets the array to search. verdict[1] is cleared for the caller.
 */
static bool batch_is_well_formed(clbt_attention_arguments a,
                                 __global const int *cu_seqlens_q,
                                 __local int *cu_cache, __local int *verdict,
                                 cu_view *cu) {
  __global const int *given = cu_seqlens_q + a.cu_seqlens_at;
  bool copied = a.num_seqs < CLBT_ATT_CU_WORDS;
  if (get_local_id(0) == 0) verdict[0] = 1, verdict[1] = 0;
  SYNC();
  for (uint i = get_local_id(0); i <= a.num_seqs; i += get_local_size(0)) {
    int start = given[i];
    bool bad = i == 0 ? start < 0 : start < given[i - 1];
    if (i == a.num_seqs && (long)start > (long)a.num_tokens) bad = true;
    if (bad) atomic_and(&verdict[0], 0);
    if (copied) cu_cache[i] = start;
  }
  SYNC();
  *cu = (cu_view){cu_cache, given, copied};
  return verdict[0] != 0;
}

/* The last s with cu[s] <= key(s) in a well-formed batch, where key(s) is
   cu[s] / per + s (per 1: cu[s] itself); -1 when none. */
static int find_sequence(cu_view cu, uint num_seqs, uint target, uint per) {
  int low = -1, high = (int)num_seqs;
  while (low < high) {
    int middle = low + (high - low + 1) / 2;
    uint start = (uint)cu_at(cu, (uint)middle);
    uint key = per == 1 ? start : start / per + (uint)middle;
    if (key <= target)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

/* ---- a sequence -------------------------------------------------------- */

/* What a work-group knows of its sequence. */
typedef enum seq_status {
  SEQ_OK,       /* attended */
  SEQ_REJECTED, /* impossible lengths or row: its tokens get 0, counted */
  SEQ_PADDING   /* a padding request (a negative idx_mapping entry): 0 */
} seq_status;

typedef struct att_seq {
  seq_status status;
  uint seq;        /* its index in the batch */
  uint first;      /* its first query token */
  uint q_len;      /* query tokens */
  uint seq_len;    /* context, the query tokens included */
  int row;         /* its row of block ids */
  uint row_blocks; /* readable entries of the row */
} att_seq;

/* Sequence seq of a well-formed batch: its lengths checked (a query no
   longer than its context) and its row found. */
static att_seq sequence_of(clbt_attention_arguments a, cu_view cu,
                           uint seq, __global const int *seqused_k,
                           __global const int *row_lengths,
                           __global const int *idx_mapping) {
  att_seq s;
  s.seq = seq;
  s.first = (uint)cu_at(cu, seq);
  s.q_len = (uint)(cu_at(cu, seq + 1) - cu_at(cu, seq));
  int used = seqused_k[a.seqused_at + seq];
  s.seq_len = used < 0 ? 0u : (uint)used;
  bool mapped = a.flags & CLBT_ATT_IDX_MAPPING;
  __global const int *mapping = mapped ? idx_mapping + a.idx_mapping_at : 0;
  s.row = clbt_kv_pages_row(a.pages, mapping, seq);
  s.row_blocks = clbt_kv_pages_row_blocks(a.pages, row_lengths, s.row);
  s.status = SEQ_OK;
  if (mapped && mapping[seq] < 0)
    s.status = SEQ_PADDING;
  else if (used < 0 || s.q_len > s.seq_len || s.row < 0)
    s.status = SEQ_REJECTED;
  return s;
}

/* The local keys [*lo, *hi) that queries at positions [first, last] of a
   sequence attend: this rank's, causal, within the window. */
static void key_range(clbt_attention_arguments a, uint first, uint last,
                      uint *lo, uint *hi) {
  uint window = a.sliding_window;
  *hi = clbt_kv_pages_local_tokens(a.pages, last + 1);
  *lo = window && first + 1 > window
            ? clbt_kv_pages_local_tokens(a.pages, first + 1 - window)
            : 0u;
  *lo = min(*lo, *hi);
}

/* Whether the query at position q attends the key at position p. */
static bool attends(clbt_attention_arguments a, uint q, uint p) {
  return p <= q && (a.sliding_window == 0 || q - p < a.sliding_window);
}

/* The fp8 cache's descales of a sequence's KV head (1 for other caches). */
static float k_descale_of(clbt_attention_arguments a,
                          __global const float *k_descales, uint seq,
                          uint kv_head) {
  return a.flags & CLBT_ATT_K_DESCALES
             ? k_descales[a.k_descales_at + (ulong)seq * a.num_kv_heads +
                          kv_head]
             : a.k_descale;
}
static float v_descale_of(clbt_attention_arguments a,
                          __global const float *v_descales, uint seq,
                          uint kv_head) {
  return a.flags & CLBT_ATT_V_DESCALES
             ? v_descales[a.v_descales_at + (ulong)seq * a.num_kv_heads +
                          kv_head]
             : a.v_descale;
}

/* ---- the end of a row -------------------------------------------------- */

/*
 * A row's softmax so far: the running maximum m of its scores (log2
 * units; -infinity: none) and the sum l of exp2(score - m). The sink, when
 * there is one, joins here: it adds exp2(sink - m) to the sum and no value.
 * *factor gets what the row's unnormalised output is to be multiplied by.
 */
static float2 with_sink(clbt_attention_arguments a, __global const float *sinks,
                        uint head, float m, float l, float *factor) {
  *factor = 1.0f;
  if (!(a.flags & CLBT_ATT_SINKS)) return (float2)(m, l);
  float sink = sinks[a.sinks_at + head] * LOG2E;
  float top = fmax(m, sink);
  *factor = m == -INFINITY ? 0.0f : exp2(m - top);
  return (float2)(top, l * *factor + exp2(sink - top));
}

/* A finished row's lse, natural log; -infinity for no keys. */
static float lse_of(float2 ml) {
  return ml.y > 0.0f ? (ml.x + log2(ml.y)) * LN2 : -INFINITY;
}

/* Where a row's output starts. */
static ulong output_at(clbt_attention_arguments a, uint token, uint head) {
  return a.output_at + (ulong)token * a.output_token_stride +
         (ulong)head * a.output_head_stride;
}

static void store_lse(clbt_attention_arguments a, __global float *lse,
                      uint token, uint head, float value) {
  if (a.flags & CLBT_ATT_LSE)
    lse[a.lse_at + (ulong)token * a.lse_token_stride +
        (ulong)head * a.lse_head_stride] = value;
}

/* Where a split's partial record of (token, head) starts. */
static ulong partial_at(clbt_attention_arguments a, uint token, uint head,
                        uint split) {
  ulong num_heads = (ulong)a.num_kv_heads * GROUP;
  return (((ulong)token * num_heads + head) * a.splits + split) *
         CLBT_ATT_PARTIAL_FLOATS(HEAD);
}

/*
 * Every output row of a token, 0, and its lse -infinity: a token of no
 * sequence in a malformed batch, or one rejected. The work-items of a
 * work-group share the elements.
 */
static void zero_token(clbt_attention_arguments a, __global ATT_OUT_BITS *output,
                       __global float *lse, uint token) {
  uint num_heads = a.num_kv_heads * GROUP;
  for (uint i = get_local_id(0); i < num_heads * HEAD; i += get_local_size(0)) {
    uint head = i / HEAD;
    store_output(output, output_at(a, token, head) + i % HEAD, 0.0f,
                 a.out_scale);
    if (i % HEAD == 0) store_lse(a, lse, token, head, -INFINITY);
  }
}

/* ---- the reduce: a decode's splits merged ------------------------------ */

/*
 * One work-group per (token, head): the splits' partial records merged,
 * with the sink, into the output and lse; a token any split rejected gets
 * 0, and its head-0 work-group counts it. Tokens of no sequence, and
 * every token of a malformed batch (which the decode kernel wrote), are
 * left as they are.
 */
__kernel __attribute__((reqd_work_group_size(CLBT_ATT_REDUCE_LOCAL, 1, 1)))
void clbt_attention_reduce(clbt_attention_arguments a ATT_PARAMETERS) {
  __local int cu_cache[CLBT_ATT_CU_WORDS ? CLBT_ATT_CU_WORDS : 1];
  __local int verdict[2];
  cu_view cu;
  uint num_heads = a.num_kv_heads * GROUP;
  uint token = get_group_id(0) / num_heads, head = get_group_id(0) % num_heads;
  if (!batch_is_well_formed(a, cu_seqlens_q, cu_cache, verdict, &cu)) return;
  int seq = find_sequence(cu, a.num_seqs, token, 1);
  if (seq < 0 || seq >= (int)a.num_seqs || token >= (uint)cu_at(cu, seq + 1))
    return;
  __global const float *record = partials + partial_at(a, token, head, 0);
  const uint stride = CLBT_ATT_PARTIAL_FLOATS(HEAD);
  float top = -INFINITY;
  bool refused = false;
  for (uint s = 0; s < a.splits; ++s) {
    float m = record[s * stride + HEAD];
    refused |= isnan(m);
    top = fmax(top, m);
  }
  float l = 0.0f;
  for (uint s = 0; s < a.splits && top > -INFINITY; ++s)
    l += record[s * stride + HEAD + 1] * exp2(record[s * stride + HEAD] - top);
  float factor;
  float2 ml = with_sink(a, sinks, head, top, l, &factor);
  ulong at = output_at(a, token, head);
  for (uint d = get_local_id(0); d < HEAD; d += CLBT_ATT_REDUCE_LOCAL) {
    float sum = 0.0f;
    for (uint s = 0; s < a.splits && top > -INFINITY; ++s)
      sum += record[s * stride + d] * exp2(record[s * stride + HEAD] - top);
    float value = ml.y > 0.0f ? sum * factor / ml.y : 0.0f;
    store_output(output, at + d, refused ? 0.0f : value, a.out_scale);
  }
  if (get_local_id(0) == 0) {
    store_lse(a, lse, token, head, refused ? -INFINITY : lse_of(ml));
    if (refused && head == 0) atomic_inc(rejected);
  }
}
