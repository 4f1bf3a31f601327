/*
 * The step kernel's token slots: request-local token indices translated
 * into the KV-cache slots they were written to, for an index matrix of
 * rows of k indices (the top-k tokens of DeepSeek's sparse-attention
 * indexer, a speculative tree's ancestors, the tokens a KV connector moves).
 * Row i belongs to the request whose query_start_loc range holds i, as
 * vLLM's req_id_per_token says; entry (i, j) is that request's token
 * index[i][j]. Its slot is the slot mapping's (slot_of): vLLM's
 * triton_convert_req_index_to_global_index
 * (vllm/v1/attention/backends/mla/sparse_utils.py) computes
 * block_table[req, tok / block_size] * block_size + tok % block_size, with
 * the context-parallel de-interleave of its DCP path, which is slot_of's
 * rule over kernel blocks. docs/semantics.md has every rule; cl/step.cl
 * runs it.
 */
#pragma once
#include "common.cl"
#include "slot_mapping.cl"

/* What the rows of a run of entries read, the same in every group. */
typedef struct token_row {
  int row;        /* the committed row its indices are tokens of; -1: none */
  bool counted;   /* no row, and its indices are counted */
} token_row;

/*
 * Row i's committed row: none for a row outside every request (padding
 * tokens) or a padding request (a negative idx_mapping entry); none, and
 * counted, for an idx_mapping entry not below max_num_reqs and for every
 * row of a batch whose query_start_loc is not well formed.
 */
static token_row token_row_of(int request, uint num_reqs, bool batch_ok,
                              uint max_num_reqs,
                              __global const int *idx_mapping,
                              bool has_idx_mapping) {
  token_row t = {-1, !batch_ok};
  if (!batch_ok || request < 0 || request >= (int)num_reqs) return t;
  int row = row_of((uint)request, num_reqs, idx_mapping, has_idx_mapping);
  t.counted = row >= (int)max_num_reqs;
  t.row = row >= 0 && !t.counted ? row : -1;
  return t;
}

/*
 * The slot of token `index` of a row, or -1: -1 is vLLM's padding index,
 * which stays -1 uncounted; another rank's token is -1 uncounted
 * (slot_of); a row with no committed row, a negative index, a token past
 * the committed row and a slot past INT32_MAX (the output is int32, as
 * vLLM's) are -1 and counted.
 */
static int token_slot_of(int index, token_row t, const committed_group *rows,
                         const committed_row *row, uint *rejected,
                         group_constants g) {
  if (index == -1) return -1;
  if (t.row < 0) {
    if (t.counted) ++*rejected;
    return -1;
  }
  long slot = slot_of((long)index, rows, row, rejected, g);
  if (slot <= INT_MAX) return (int)slot;
  ++*rejected;
  return -1;
}

/* What the token slots read of a launch: the index matrix's rows play the
   batch's tokens. */
typedef struct token_batch {
  uint num_reqs, num_rows, indices_per_row, max_num_reqs;
  QSL_SPACE const int *qsl;
  __global const int *idx_mapping;
  bool has_idx_mapping, well_formed;
  __global const int *token_indices;
  __global int *token_slots;
} token_batch;

/*
 * Each work-item takes a run of the matrix's entries (row-major, k to a
 * row): it finds the request of the run's first row by binary search and
 * advances it row by row, and writes each of the row's entries in the run
 * to the section of every token-mapping group that takes part, one loop a
 * group, so that each runs down the row's indices with unit stride.
 */
static void write_token_slot_groups(const token_batch *batch,
                                    part_range part, clbt__record_head head,
                                    clbt__kernel_layout layout,
                                    const packet_view *packet,
                                    __global int *storage, uint *rejected) {
  uint k = batch->indices_per_row, entries = batch->num_rows * k;
  uint begin, end;
  split_range(entries, part_item(part), part_items(part), &begin, &end);
  /* A run of no entries (k may be 0) has no rows. */
  bool runs = begin < end;
  uint first = runs ? begin / k : 1, last = runs ? (end - 1) / k : 0;
  bool ok = batch->well_formed;
  int request =
      runs && ok ? find_request(batch->qsl, batch->num_reqs, (int)first) : -1;
  for (uint i = first; i <= last; ++i) {
    uint start = i * k, from = max(begin, start);
    uint to = start + min(k, end - start); /* no wrap past 2^32 */
    while (ok && request < (int)batch->num_reqs &&
           batch->qsl[request + 1] <= (int)i)
      ++request;
    token_row t = token_row_of(request, batch->num_reqs, ok,
                               batch->max_num_reqs, batch->idx_mapping,
                               batch->has_idx_mapping);
    uint section = head.token_section;
    FOR_EACH_GROUP(g) {
      if (!maps_tokens(g) || !takes_part(head, g)) continue;
      clbt__group_layout at = layout.groups[g];
      __global int *out = batch->token_slots + section++ * (ulong)entries;
      committed_group rows = committed_group_of(packet, g, storage, at);
      committed_row row;
      committed_row_of(&rows, t.row, &row);
      for (uint e = from; e < to; ++e)
        out[e] = token_slot_of(batch->token_indices[e], t, &rows, &row,
                               &rejected[g], group_table[g]);
    }
  }
}
