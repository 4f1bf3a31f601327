/*
 * The tile kernel, for batches with more than one query token a sequence
 * (prefills, chunked prefills beside decodes, speculative decodes): one
 * work-group per (block of TQ query tokens of one sequence, KV head,
 * group of its query heads), which brings each tile of TN keys' K and V
 * into local memory once, as floats, for all of its TM = TQ x ROWS query
 * rows (the query tile stays in local memory throughout). A tile is
 * scored (every work-item a few (row, key) dot products), each row's team
 * of work-items takes its maximum and weights, and every work-item adds
 * its (row, four elements) shares of the weighted values to registers.
 * Query blocks are numbered as vLLM's kernel numbers them: sequence s's
 * first is cu_seqlens_q[s] / TQ + s. A GPU's kernel only: a CPU runs
 * every batch through the decode kernel.
 */
#pragma once
#include "attention_common.cl"
#if CLBT_ATT_TILE_LOCAL

#define TL CLBT_ATT_TILE_LOCAL
#define TQ CLBT_ATT_TILE_QUERIES
#define TN CLBT_ATT_TILE_KEYS
#define TM (TQ * ROWS)
#define TEAM (TL / TM)
#define PAD (HEAD + 4)
#define D4 (HEAD / 4)
#define SCORE_SHARES ((TM * TN + TL - 1) / TL)
#define OUTPUT_SHARES ((TM * D4 + TL - 1) / TL)

/* A key of the tile: none (past the range), attended, or refused (its
   block is outside the row or the cache: never read). */
enum { KEY_NONE, KEY_OK, KEY_REFUSED };

/* What a tile work-group serves: its query block, KV head and heads. */
typedef struct tile_work {
  uint block, kv_head, first_head;
  bool counts;
} tile_work;

static tile_work tile_work_of(clbt_attention_arguments a) {
  uint w = get_group_id(0);
  tile_work work;
  uint head_group = w % HEAD_GROUPS;
  w /= HEAD_GROUPS;
  work.kv_head = w % a.num_kv_heads;
  work.block = w / a.num_kv_heads;
  work.first_head = work.kv_head * GROUP + head_group * ROWS;
  work.counts = work.kv_head == 0 && head_group == 0;
  return work;
}

/* Row r's query head, when it is one of the work-group's. */
static bool tile_row_is_head(tile_work work, uint r) {
  return work.first_head + r % ROWS < (work.kv_head + 1) * GROUP;
}

/* Rows of query tokens [first, first + count) of a sequence that attend
   nothing: 0 and lse -infinity (rejected) or the sink's (padding). */
static void tile_zero(clbt_attention_arguments a, tile_work work,
                      uint first, uint count, bool rejected,
                      __global ATT_OUT_BITS *output, __global float *lse,
                      __global const float *sinks) {
  for (uint i = get_local_id(0); i < count * ROWS * HEAD; i += TL) {
    uint r = i / HEAD, d = i % HEAD, head = work.first_head + r % ROWS;
    if (!tile_row_is_head(work, r)) continue;
    uint token = first + r / ROWS;
    store_output(output, output_at(a, token, head) + d, 0.0f, a.out_scale);
    float factor;
    if (d == 0)
      store_lse(a, lse, token, head,
                rejected ? -INFINITY
                         : lse_of(with_sink(a, sinks, head, -INFINITY, 0.0f,
                                            &factor)));
  }
}

__kernel __attribute__((reqd_work_group_size(TL, 1, 1)))
void clbt_attention_tiles(clbt_attention_arguments a ATT_PARAMETERS) {
  __local int cu_cache[CLBT_ATT_CU_WORDS ? CLBT_ATT_CU_WORDS : 1];
  __local int verdict[2];
  __local float qs[TM * PAD], ks[TN * PAD], vs[TN * PAD];
  __local float ps[TM * (TN + 1)];
  __local float team_max[TL], team_sum[TL];
  __local float row_m[TM], row_l[TM], row_alpha[TM];
  __local int key_block[TN], key_position[TN], key_state[TN];
  __local int refused[TQ];
  cu_view cu;
  const tile_work work = tile_work_of(a);
  const uint lid = get_local_id(0);
  clbt_kv_pages pages = a.pages;
  pages.block_size = CLBT_ATT_BLOCK; /* the same value, folded */

  /* What the work-group does: every work-item goes through every barrier
     below, whatever it finds (no return before the end: a barrier after
     a return some compilers take for one not every work-item meets). */
  bool well_formed = batch_is_well_formed(a, cu_seqlens_q, cu_cache, verdict,
                                          &cu);
  int seq = well_formed ? find_sequence(cu, a.num_seqs, work.block, TQ) : -1;
  att_seq s = {SEQ_REJECTED, 0, 0, 0, 0, -1, 0};
  uint q0 = 0, count = 0;
  if (seq >= 0 && seq < (int)a.num_seqs) {
    s = sequence_of(a, cu, (uint)seq, seqused_k, rows, idx_mapping);
    q0 = (work.block - ((uint)cu_at(cu, seq) / TQ + (uint)seq)) * TQ;
    count = q0 < s.q_len ? min((uint)TQ, s.q_len - q0) : 0u; /* 0: unused */
  }
  bool attending = count && s.status == SEQ_OK;
  uint first_position = s.seq_len - s.q_len + q0, lo = 0, hi = 0;
  if (attending)
    key_range(a, first_position, first_position + count - 1, &lo, &hi);

  /* The query tile, scaled; the rows' softmax. */
  float qscale = attending ? a.scale * k_descale_of(a, k_descales, s.seq,
                                                    work.kv_head)
                           : 0.0f;
  for (uint i = lid; i < TM * HEAD; i += TL) {
    uint r = i / HEAD, d = i % HEAD;
    bool used = attending && r / ROWS < count && tile_row_is_head(work, r);
    ulong at = a.query_at + (ulong)(s.first + q0 + r / ROWS) * a.query_token_stride +
               (ulong)(work.first_head + r % ROWS) * a.query_head_stride + d;
    qs[r * PAD + d] = used ? query_value(query, at) * qscale : 0.0f;
  }
  for (uint r = lid; r < TM; r += TL) row_m[r] = -INFINITY, row_l[r] = 0.0f;
  for (uint q = lid; q < TQ; q += TL) refused[q] = 0;
  float4 acc[OUTPUT_SHARES];
  for (uint k = 0; k < OUTPUT_SHARES; ++k) acc[k] = (float4)(0.0f);
  SYNC();

  for (uint base = lo; base < hi; base += TN) {
    /* The tile's keys: their blocks, positions and states. */
    for (uint c = lid; c < TN; c += TL) {
      uint j = base + c;
      int block = j < hi ? clbt_kv_pages_block(pages, rows, s.row,
                                               s.row_blocks, j)
                         : -1;
      key_block[c] = block;
      key_position[c] = (int)clbt_kv_pages_position(pages, j);
      key_state[c] = j >= hi ? KEY_NONE : block < 0 ? KEY_REFUSED : KEY_OK;
    }
    SYNC();
    /* K and V as floats, VEC elements a load. */
    for (uint i = lid; i < TN * (HEAD / VEC); i += TL) {
      uint c = i / (HEAD / VEC), d = i % (HEAD / VEC) * VEC;
      int block = key_block[c];
      float k[VEC], v[VEC];
      if (block >= 0) {
        uint offset = (base + c) % CLBT_ATT_BLOCK;
        ulong k_at = clbt_kv_pages_key(pages, (uint)block, offset, work.kv_head);
        ulong v_at =
            clbt_kv_pages_value(pages, (uint)block, offset, work.kv_head);
        kv_values(ATT_KV_LOAD((k_at + d) / VEC, key_cache), k);
        kv_values(ATT_KV_LOAD((v_at + d) / VEC, value_cache), v);
      } else {
        for (uint e = 0; e < VEC; ++e) k[e] = v[e] = 0.0f;
      }
      for (uint e = 0; e < VEC; ++e)
        ks[c * PAD + d + e] = k[e], vs[c * PAD + d + e] = v[e];
    }
    SYNC();
    /* Scores: (row, key) pairs across the work-group. */
    for (uint k = 0; k < SCORE_SHARES; ++k) {
      uint i = lid + k * TL;
      if (i >= TM * TN) break;
      uint r = i / TN, c = i % TN, q = r / ROWS;
      float4 dot4 = (float4)(0.0f);
      for (uint d = 0; d < D4; ++d)
        dot4 = fma(vload4(d, qs + r * PAD), vload4(d, ks + c * PAD), dot4);
      float dot = dot4.x + dot4.y + dot4.z + dot4.w;
      bool row = q < count && tile_row_is_head(work, r);
      bool sees = row && key_state[c] != KEY_NONE &&
                  attends(a, first_position + q, (uint)key_position[c]);
      if (sees && key_state[c] == KEY_REFUSED) atomic_or(&refused[q], 1);
      ps[r * (TN + 1) + c] =
          sees && key_state[c] == KEY_OK ? capped(dot, a.softcap) : -INFINITY;
    }
    SYNC();
    /* Each row's team: the tile's maximum, then the weights. */
    uint r = lid / TEAM, member = lid % TEAM;
    if (r < TM) {
      float top = -INFINITY;
      for (uint c = member; c < TN; c += TEAM)
        top = fmax(top, ps[r * (TN + 1) + c]);
      team_max[r * TEAM + member] = top;
    }
    SYNC();
    if (r < TM) {
      float top = row_m[r], sum = 0.0f;
      for (uint i = 0; i < TEAM; ++i) top = fmax(top, team_max[r * TEAM + i]);
      float safe = top == -INFINITY ? 0.0f : top;
      for (uint c = member; c < TN; c += TEAM) {
        float p = exp2(ps[r * (TN + 1) + c] - safe);
        ps[r * (TN + 1) + c] = p;
        sum += p;
      }
      team_sum[r * TEAM + member] = sum;
    }
    SYNC();
    if (r < TM && member == 0) {
      float top = row_m[r], sum = 0.0f;
      for (uint i = 0; i < TEAM; ++i) {
        top = fmax(top, team_max[r * TEAM + i]);
        sum += team_sum[r * TEAM + i];
      }
      float alpha = exp2(row_m[r] - (top == -INFINITY ? 0.0f : top));
      row_alpha[r] = alpha;
      row_l[r] = row_l[r] * alpha + sum;
      row_m[r] = top;
    }
    SYNC();
    /* The weighted values: (row, four elements) shares. */
    for (uint k = 0; k < OUTPUT_SHARES; ++k) {
      uint i = lid + k * TL;
      if (i >= TM * D4) break;
      uint row = i / D4, d = i % D4;
      float4 sum = acc[k] * row_alpha[row];
      for (uint c = 0; c < TN; ++c)
        sum = fma((float4)(ps[row * (TN + 1) + c]), vload4(d, vs + c * PAD), sum);
      acc[k] = sum;
    }
    SYNC();
  }

  /* The rows' ends: normalised, with the sink; a refused token's 0. */
  float vscale = attending ? v_descale_of(a, v_descales, s.seq, work.kv_head)
                           : 0.0f;
  for (uint k = 0; attending && k < OUTPUT_SHARES; ++k) {
    uint i = lid + k * TL;
    if (i >= TM * D4) break;
    uint row = i / D4, q = row / ROWS, head = work.first_head + row % ROWS;
    if (q >= count || !tile_row_is_head(work, row)) continue;
    float factor;
    float2 ml = with_sink(a, sinks, head, row_m[row], row_l[row], &factor);
    float4 value = ml.y > 0.0f && !refused[q] ? acc[k] * (vscale * factor / ml.y)
                                              : (float4)(0.0f);
    ulong at = output_at(a, s.first + q0 + q, head) + (ulong)(i % D4) * 4;
    store_output(output, at, value.x, a.out_scale);
    store_output(output, at + 1, value.y, a.out_scale);
    store_output(output, at + 2, value.z, a.out_scale);
    store_output(output, at + 3, value.w, a.out_scale);
    if (i % D4 == 0)
      store_lse(a, lse, s.first + q0 + q, head,
                refused[q] ? -INFINITY : lse_of(ml));
  }
  if (attending && work.counts && lid < count && refused[lid])
    atomic_inc(rejected);

  /* The rows of tokens not attended: 0, and their count, once a token. */
  if (!well_formed && work.counts) {
    uint zeroed = 0;
    for (uint t = work.block; t < a.num_tokens; t += a.query_blocks, ++zeroed)
      zero_token(a, output, lse, t);
    if (lid == 0 && zeroed) atomic_add(rejected, zeroed);
  } else if (count && !attending) {
    bool rejecting = s.status == SEQ_REJECTED;
    tile_zero(a, work, s.first + q0, count, rejecting, output, lse, sinks);
    if (rejecting && work.counts && lid == 0) atomic_add(rejected, count);
  }
}

#endif /* CLBT_ATT_TILE_LOCAL */
