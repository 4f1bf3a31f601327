/*
 * The decode kernel: one work-group per (query token, KV head, group of
 * the query heads that read it, context split), which reads each of the
 * token's K/V bytes of its split once from global memory for every query
 * head it serves (GQA). A GPU's work-group spreads a head row over LANES
 * work-items of LANE elements each (loads of whole lines, a warp on
 * neighbouring rows), TOKEN_LANES such runs side by side on different
 * keys: each work-item forms its share of every head's dot product in
 * registers, the shares are summed in local memory, and each run of lanes
 * keeps its own running softmax (its owners' maximum and sum, every
 * lane's share of the output), so that a pass needs two barriers and no
 * work-group-wide maximum; the runs are merged once, at the end. The next
 * pass's K and V are loaded before this one's are used. A CPU's
 * work-group is one work-item that walks whole rows (LANE = head_size).
 *
 * With splits, each work-group writes its split's partial record and the
 * reduce (cl/attention_common.cl) merges them; else it writes the output.
 */
#pragma once
#include "attention_common.cl"

#define LOCAL CLBT_ATT_LOCAL
#define LANE CLBT_ATT_LANE
#define VEC CLBT_ATT_VEC
#define TOKENS CLBT_ATT_TOKENS
#define LANES (HEAD / LANE)
#define TOKEN_LANES (LOCAL / LANES)
#define PASS (TOKEN_LANES * TOKENS)
#define PARTS (LANE / VEC)
#define LANES_PAD (LANES + 1)

/* The local floats of a work-group: the dot products' shares (and, at the
   end, the runs' outputs), then each run's weights (and, at the end, its
   maximum and sum). */
#define SUMS CLBT_ATT_DECODE_SUMS(LOCAL, HEAD, LANE, TOKENS, ROWS)
#define WEIGHTS CLBT_ATT_DECODE_WEIGHTS(LOCAL, HEAD, LANE, TOKENS, ROWS)

/* What a work-group serves: its token, KV head, heads and split. */
typedef struct decode_work {
  uint token, kv_head, first_head, split;
  bool counts; /* the one work-group of the token that counts it */
} decode_work;

static decode_work decode_work_of(clbt_attention_arguments a) {
  uint w = get_group_id(0);
  decode_work work;
  work.split = w % a.splits;
  w /= a.splits;
  uint head_group = w % HEAD_GROUPS;
  w /= HEAD_GROUPS;
  work.kv_head = w % a.num_kv_heads;
  work.token = w / a.num_kv_heads;
  work.first_head = work.kv_head * GROUP + head_group * ROWS;
  work.counts = work.kv_head == 0 && head_group == 0 && work.split == 0;
  return work;
}

/* Whether row r of a work-group is one of its KV head's query heads. */
static bool row_is_head(decode_work work, uint r) {
  return work.first_head + r < (work.kv_head + 1) * GROUP;
}

/*
 * The end of a row whose keys are done: (m, l) its softmax, value its
 * element d of the unnormalised output. With splits, the split's record;
 * else the output, normalised, with the sink.
 */
static void end_row(clbt_attention_arguments a, decode_work work, uint head,
                    uint d, float value, float m, float l,
                    __global ATT_OUT_BITS *output, __global float *lse,
                    __global const float *sinks, __global float *partials) {
  if (a.flags & CLBT_ATT_SPLIT) {
    ulong at = partial_at(a, work.token, head, work.split);
    partials[at + d] = value;
    if (d == 0) partials[at + HEAD] = m, partials[at + HEAD + 1] = l;
    return;
  }
  float factor;
  float2 ml = with_sink(a, sinks, head, m, l, &factor);
  store_output(output, output_at(a, work.token, head) + d,
               ml.y > 0.0f ? value * factor / ml.y : 0.0f, a.out_scale);
  if (d == 0) store_lse(a, lse, work.token, head, lse_of(ml));
}

/* Every row of a work-group that attends nothing: 0 (a padding request,
   or, with m NaN, a rejected token, which a split marks for the reduce). */
static void end_empty(clbt_attention_arguments a, decode_work work, float m,
                      __global ATT_OUT_BITS *output, __global float *lse,
                      __global const float *sinks, __global float *partials) {
  for (uint r = 0; r < ROWS; ++r)
    for (uint d = get_local_id(0); row_is_head(work, r) && d < HEAD;
         d += LOCAL) {
      if (!isnan(m) || (a.flags & CLBT_ATT_SPLIT))
        end_row(a, work, work.first_head + r, d, 0.0f, m, 0.0f, output, lse,
                sinks, partials);
      else {
        store_output(output, output_at(a, work.token, work.first_head + r) + d,
                     0.0f, a.out_scale);
        if (d == 0)
          store_lse(a, lse, work.token, work.first_head + r, -INFINITY);
      }
    }
}

/* This work-item's LANE query elements of each row, as floats times
   scale (0 past the work-group's heads). */
static void load_query(clbt_attention_arguments a, decode_work work,
                       uint lane, float scale,
                       __global const ATT_Q_BITS *query,
                       float q[ROWS][LANE]) {
  for (uint r = 0; r < ROWS; ++r) {
    ulong at = a.query_at + (ulong)work.token * a.query_token_stride +
               (ulong)(work.first_head + r) * a.query_head_stride +
               (ulong)lane * LANE;
    for (uint e = 0; e < LANE; ++e)
      q[r][e] = row_is_head(work, r) ? query_value(query, at + e) * scale
                                     : 0.0f;
  }
}

/* One key's LANE elements of this lane, as loaded (zeros for none). */
typedef struct key_row {
  ATT_KV_VECTOR k[PARTS], v[PARTS];
} key_row;

static key_row load_key(clbt_kv_pages pages, int block, uint offset,
                        uint kv_head, uint lane,
                        __global const ATT_KV_BITS *key_cache,
                        __global const ATT_KV_BITS *value_cache) {
  key_row row;
  if (block < 0) {
    for (uint p = 0; p < PARTS; ++p) row.k[p] = 0, row.v[p] = 0;
    return row;
  }
  ulong k_at = clbt_kv_pages_key(pages, (uint)block, offset, kv_head) +
               (ulong)lane * LANE;
  ulong v_at = clbt_kv_pages_value(pages, (uint)block, offset, kv_head) +
               (ulong)lane * LANE;
  for (uint p = 0; p < PARTS; ++p) {
    row.k[p] = ATT_KV_LOAD(k_at / VEC + p, key_cache);
    row.v[p] = ATT_KV_LOAD(v_at / VEC + p, value_cache);
  }
  return row;
}

__kernel __attribute__((reqd_work_group_size(LOCAL, 1, 1)))
void clbt_attention_decode(clbt_attention_arguments a ATT_PARAMETERS) {
  __local int cu_cache[CLBT_ATT_CU_WORDS ? CLBT_ATT_CU_WORDS : 1];
  __local int verdict[2]; /* the batch is well formed; a key was refused */
  __local float sums[SUMS];
  __local float weights[WEIGHTS];
  cu_view cu;
  const decode_work work = decode_work_of(a);
  const uint lid = get_local_id(0);
  const uint run = lid / LANES, lane = lid % LANES;
  const bool in_run = run < TOKEN_LANES;
  clbt_kv_pages pages = a.pages;
  pages.block_size = CLBT_ATT_BLOCK; /* the same value, folded */

  /* What the work-group does: every work-item goes through every barrier
     below, whatever it finds (no return before the end: a barrier after
     a return some compilers take for one not every work-item meets). */
  bool well_formed = batch_is_well_formed(a, cu_seqlens_q, cu_cache, verdict,
                                          &cu);
  int seq = well_formed ? find_sequence(cu, a.num_seqs, work.token, 1) : -1;
  bool mine = seq >= 0 && seq < (int)a.num_seqs &&
              work.token < (uint)cu_at(cu, seq + 1); /* else a token of none */
  att_seq s = {SEQ_REJECTED, 0, 0, 0, 0, -1, 0};
  if (mine)
    s = sequence_of(a, cu, (uint)seq, seqused_k, rows, idx_mapping);
  bool attending = mine && s.status == SEQ_OK;

  /* This split's share of the keys the token attends. */
  uint begin = 0, end = 0;
  if (attending) {
    uint position = s.seq_len - s.q_len + (work.token - s.first), lo, hi;
    key_range(a, position, position, &lo, &hi);
    uint per_split = (hi - lo + PASS - 1) / PASS;
    per_split = (per_split + a.splits - 1) / a.splits * PASS;
    begin = min(hi, lo + work.split * per_split);
    end = min(hi, begin + per_split);
  }

  float q[ROWS][LANE], acc[ROWS][LANE];
  float m[ROWS], l[ROWS]; /* the run's softmax, kept by its owner lanes */
  float qscale = attending && in_run ? a.scale * k_descale_of(a, k_descales,
                                                              s.seq,
                                                              work.kv_head)
                                     : 0.0f;
  load_query(a, work, lane, qscale, query, q);
  for (uint r = 0; r < ROWS; ++r) {
    m[r] = -INFINITY, l[r] = 0.0f;
    for (uint e = 0; e < LANE; ++e) acc[r][e] = 0.0f;
  }

  /* The first pass's keys, then each pass loads the next one's. */
  int block[TOKENS];
  key_row next[TOKENS];
  bool refused = false;
  for (uint x = 0; x < TOKENS; ++x) {
    uint j = begin + run + x * TOKEN_LANES;
    block[x] = in_run && j < end ? clbt_kv_pages_block(pages, rows, s.row,
                                                       s.row_blocks, j)
                                 : -1;
    refused |= in_run && j < end && block[x] < 0;
    next[x] = load_key(pages, block[x], j % CLBT_ATT_BLOCK, work.kv_head, lane,
                       key_cache, value_cache);
  }
  for (uint base = begin; base < end; base += PASS) {
    key_row key[TOKENS];
    bool valid[TOKENS];
    for (uint x = 0; x < TOKENS; ++x) {
      key[x] = next[x];
      valid[x] = block[x] >= 0;
      uint j = base + PASS + run + x * TOKEN_LANES;
      block[x] = in_run && j < end ? clbt_kv_pages_block(pages, rows, s.row,
                                                         s.row_blocks, j)
                                   : -1;
      refused |= in_run && j < end && block[x] < 0;
      next[x] = load_key(pages, block[x], j % CLBT_ATT_BLOCK, work.kv_head, lane,
                         key_cache, value_cache);
    }
    /* Each row's share of each key's dot product. */
    for (uint x = 0; x < TOKENS; ++x) {
      float k[LANE];
      for (uint p = 0; p < PARTS; ++p) kv_values(key[x].k[p], k + p * VEC);
      for (uint r = 0; r < ROWS; ++r) {
        float dot = 0.0f;
        for (uint e = 0; e < LANE; ++e) dot = fma(q[r][e], k[e], dot);
        if (in_run)
          sums[((run * TOKENS + x) * ROWS + r) * LANES_PAD + lane] = dot;
      }
    }
    SYNC();
    /* The owners: the run's scores, its new maximum, the weights. */
    for (uint r = lane; in_run && r < ROWS; r += LANES) {
      float score[TOKENS], top = m[r];
      for (uint x = 0; x < TOKENS; ++x) {
        __local const float *share = sums + ((run * TOKENS + x) * ROWS + r) *
                                                LANES_PAD;
        float dot = 0.0f;
        for (uint i = 0; i < LANES; ++i) dot += share[i];
        score[x] = valid[x] ? capped(dot, a.softcap) : -INFINITY;
        top = fmax(top, score[x]);
      }
      float safe = top == -INFINITY ? 0.0f : top;
      float alpha = exp2(m[r] - safe), added = 0.0f;
      __local float *w = weights + (run * ROWS + r) * (TOKENS + 1);
      for (uint x = 0; x < TOKENS; ++x) {
        float p = exp2(score[x] - safe);
        w[1 + x] = p;
        added += p;
      }
      w[0] = alpha;
      l[r] = l[r] * alpha + added;
      m[r] = top;
    }
    SYNC();
    /* Every lane: its share of the output. */
    for (uint x = 0; x < TOKENS; ++x) {
      float v[LANE];
      for (uint p = 0; p < PARTS; ++p) kv_values(key[x].v[p], v + p * VEC);
      for (uint r = 0; r < ROWS; ++r) {
        __local const float *w = weights + (run * ROWS + r) * (TOKENS + 1);
        float alpha = x == 0 && in_run ? w[0] : 1.0f;
        float p = in_run ? w[1 + x] : 0.0f;
        for (uint e = 0; e < LANE; ++e) acc[r][e] = fma(p, v[e], acc[r][e] * alpha);
      }
    }
  }
  if (refused) atomic_or(&verdict[1], 1);
  SYNC();
  bool rejected_key = verdict[1] != 0;

  /* The runs merged, row by row: their maxima and sums, then outputs. */
  for (uint r = lane; in_run && r < ROWS; r += LANES)
    weights[(run * ROWS + r) * 2] = m[r], weights[(run * ROWS + r) * 2 + 1] = l[r];
  SYNC();
  float vscale = attending ? v_descale_of(a, v_descales, s.seq, work.kv_head)
                           : 0.0f;
  for (uint r = 0; r < ROWS; ++r) {
    float top = -INFINITY, total = 0.0f;
    for (uint t = 0; t < TOKEN_LANES; ++t)
      top = fmax(top, weights[(t * ROWS + r) * 2]);
    float safe = top == -INFINITY ? 0.0f : top;
    for (uint t = 0; t < TOKEN_LANES; ++t)
      total += weights[(t * ROWS + r) * 2 + 1] *
               exp2(weights[(t * ROWS + r) * 2] - safe);
    float mine = in_run ? exp2(weights[(run * ROWS + r) * 2] - safe) : 0.0f;
    SYNC();
    for (uint e = 0; in_run && e < LANE; ++e)
      sums[run * HEAD + lane * LANE + e] = acc[r][e] * mine;
    SYNC();
    for (uint d = lid; attending && !rejected_key && row_is_head(work, r) &&
                       d < HEAD;
         d += LOCAL) {
      float value = 0.0f;
      for (uint t = 0; t < TOKEN_LANES; ++t) value += sums[t * HEAD + d];
      end_row(a, work, work.first_head + r, d, value * vscale, top, total,
              output, lse, sinks, partials);
    }
  }

  /* The rows of a token not attended: 0, and its count, once a token. */
  bool split = a.flags & CLBT_ATT_SPLIT;
  if (!well_formed && work.counts && work.token < a.num_tokens) {
    zero_token(a, output, lse, work.token);
    if (lid == 0) atomic_inc(rejected);
  } else if (mine && (!attending || rejected_key)) {
    bool refused_token = rejected_key || s.status == SEQ_REJECTED;
    end_empty(a, work, refused_token ? NAN : -INFINITY, output, lse, sinks,
              partials);
    if (refused_token && work.counts && lid == 0 && !split)
      atomic_inc(rejected);
  }
}
