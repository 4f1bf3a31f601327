/*
 * The step kernel's state slots: the ids of the state blocks a hybrid
 * model's Mamba layers read and write, per batch request, from a NONE
 * group's committed row, as vLLM reads them from its block table
 * (get_aligned_state_indices_multi_group_kernel in
 * vllm/v1/worker/mamba_utils.py): request b's ids are columns
 * first .. first + S - 1 of its row, first = (L - 1) / block_size for its
 * KV length L, S ids a request (1 + the speculative blocks). A request with
 * no length, a padding request and the entries past the batch get the null
 * block; so do the columns past the row's committed length, which vLLM
 * reads past its row (the width-bounded load its review asked for, bounded
 * tighter: by what the row holds). docs/semantics.md has every rule;
 * cl/step.cl runs it.
 */
#pragma once
#include "common.cl"

/* What a batch request's state slots come from, the same in every group. */
typedef struct state_request {
  int row;       /* the row its ids come from; -1: none (the null block) */
  ulong last;    /* its length - 1: the position whose block is its state */
  bool rejected; /* no ids, and counted */
} state_request;

/*
 * Request b's row and length, by the export's rules (cl/export.cl): its
 * idx_mapping entry (or b), a negative one a padding request; its length
 * seq_lens[b], or its last scheduled position + 1, or 0 when it has no
 * token. A row not below max_num_reqs, query_start_loc entries out of order
 * or past num_tokens, or a length below the request's scheduled tokens or
 * above INT32_MAX reject it.
 */
static state_request state_request_of(
    uint b, uint num_reqs, uint num_tokens, uint max_num_reqs,
    __global const int *query_start_loc, __global const long *positions,
    __global const int *seq_lens, __global const int *idx_mapping,
    bool has_idx_mapping) {
  state_request request = {-1, 0, false};
  int row = row_of(b, num_reqs, idx_mapping, has_idx_mapping);
  if (row < 0) return request;
  int begin = query_start_loc[b], end = query_start_loc[b + 1];
  request.rejected = (uint)row >= max_num_reqs || begin < 0 || end < begin ||
                     (uint)end > num_tokens;
  if (request.rejected) return request;
  long length = seq_lens        ? (long)seq_lens[b]
                : end > begin   ? positions[end - 1] + 1
                                : 0;
  request.rejected = length < (long)(end - begin) || length > INT_MAX;
  if (request.rejected || length == 0) return request;
  request.row = row;
  request.last = (ulong)(length - 1);
  return request;
}

/*
 * Writes request b's `count` ids of one NONE group to out[b * count ..]:
 * the row's entries from column (L - 1) / block_size on, in the row's
 * kernel blocks, the null block past its committed length. Returns 1 when
 * the request is counted: rejected, or its ids run past its row.
 */
static uint write_state_slots(const state_request *request, uint b,
                              uint count, int null_block,
                              const committed_group *rows, __global int *out,
                              group_constants g) {
  ulong kernel_block_size = g.kv_block_size / g.blocks_per_kv_block;
  __global int *ids = out + (ulong)b * count;
  if (request->row < 0) {
    for (uint s = 0; s < count; ++s) ids[s] = null_block;
    return request->rejected ? 1 : 0;
  }
  ulong first = request->last / kernel_block_size;
  committed_row row;
  committed_row_of(rows, request->row, &row);
  ulong length = row.length;
  for (uint s = 0; s < count; ++s)
    ids[s] = first + s < length ? committed_id(rows, &row, first + s)
                                : null_block;
  return first + count > length ? 1 : 0;
}

/* What the state slots read of a launch. */
typedef struct state_batch {
  uint num_reqs, num_tokens, padded, max_num_reqs;
  __global const int *query_start_loc;
  __global const long *positions;
  __global const int *seq_lens; /* NULL: from positions */
  __global const int *idx_mapping;
  bool has_idx_mapping;
} state_batch;

/* Each of the part's work-items takes a run of the padded batch's
   requests: a request's row and length once, then its ids in every NONE
   group that takes part. */
static void write_state_slot_groups(const state_batch *batch,
                                    part_range part, clbt__record_head head,
                                    clbt__kernel_layout layout,
                                    const packet_view *packet,
                                    __global int *storage, uint *rejected) {
  uint begin, end;
  split_range(batch->padded, part_item(part), part_items(part), &begin, &end);
  for (uint b = begin; b < end; ++b) {
    state_request request = state_request_of(
        b, batch->num_reqs, batch->num_tokens, batch->max_num_reqs,
        batch->query_start_loc, batch->positions, batch->seq_lens,
        batch->idx_mapping, batch->has_idx_mapping);
    FOR_EACH_GROUP(g) {
      if (maps_tokens(g) || !takes_part(head, g)) continue;
      clbt__group_layout at = layout.groups[g];
      committed_group rows = committed_group_of(packet, g, storage, at);
      rejected[g] += write_state_slots(
          &request, b, head.state_slots, (int)head.state_null_block, &rows,
          region(storage, at, CLBT_REGION_STATE_SLOTS), group_table[g]);
    }
  }
}
