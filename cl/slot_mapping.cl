/*
 * The step kernel's slot mapping: each token of a batch gets the KV-cache
 * slot it writes, block_id * kernel_block_size + offset, as vLLM's
 * _compute_slot_mapping_kernel does, and CLBT_PAD_SLOT_ID goes to every
 * other element of the fixed-size output; request r reads row
 * idx_mapping[r] (or row r), as Model Runner V2's kernel does. It differs
 * from vLLM's kernel in two ways that make it safe on any input: it never
 * reads a block outside the row's committed length (such a token gets the
 * pad id and is counted), nor a row outside the table, and it checks
 * query_start_loc before trusting it (cl/common.cl).
 *
 * On a GPU (CLBT_GPU, cl/common.cl) neighbouring work-items take
 * neighbouring tokens and pad entries; on a CPU each takes a run of them.
 */
#pragma once
#include "common.cl"

/*
 * The slot of one token of a row, vLLM's arithmetic: positions are split
 * into virtual blocks of cp_world_size KV blocks, dealt to ranks
 * cp_interleave_size tokens at a time. Another rank's token gets the pad
 * id; so does a token outside the committed row, which is also counted.
 * The block id is read before the row's length is known (clamped to the
 * row, so that the read stays in it), so that the two reads overlap; the
 * length decides whether it is used. The row is read as the launch sees
 * it (committed_row_of, cl/commit.cl). The constants fold where the loops
 * over groups are unrolled.
 */
static long slot_of(long position, const committed_group *rows,
                    const committed_row *row, uint *rejected,
                    group_constants group) {
  ulong kv_block_size = group.kv_block_size;
  ulong blocks_per_kv_block = group.blocks_per_kv_block;
  ulong cp_world_size = group.cp_world_size;
  ulong cp_interleave_size = group.cp_interleave_size;
  if (position < 0) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  ulong kernel_block_size = kv_block_size / blocks_per_kv_block;
  ulong virtual_block_size = kv_block_size * cp_world_size;
  ulong virtual_index = (ulong)position / virtual_block_size;
  ulong virtual_offset = (ulong)position - virtual_index * virtual_block_size;
  if ((virtual_offset / cp_interleave_size) % cp_world_size != group.cp_rank)
    return CLBT_PAD_SLOT_ID;
  ulong local_offset =
      virtual_offset / (cp_world_size * cp_interleave_size) *
          cp_interleave_size +
      virtual_offset % cp_interleave_size;
  /* Bounded by the row's width first, so that the product cannot wrap. */
  ulong row_stride = rows->row_stride;
  ulong block_index = min(virtual_index, row_stride) * blocks_per_kv_block +
                      local_offset / kernel_block_size;
  int block = committed_id(rows, row, (uint)min(block_index, row_stride - 1));
  if (virtual_index >= row->length || block_index >= row->length) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  return (long)block * (long)kernel_block_size +
         (long)(local_offset % kernel_block_size);
}

/* What the slot mapping reads of a launch. */
typedef struct map_batch {
  uint num_reqs, num_tokens, max_num_reqs, max_num_tokens;
  QSL_SPACE const int *qsl;
  __global const long *positions;
  __global const int *idx_mapping;
  bool has_idx_mapping, well_formed;
} map_batch;

/* One token in every token-mapping group that takes part: a token of a
   request whose row is outside the table is counted. */
static void map_token(uint token, int request, const map_batch *batch,
                      clbt__record_head head, clbt__kernel_layout layout,
                      const packet_view *packet, __global int *storage,
                      uint *rejected) {
  /* Read first: the reads it waits on below overlap it. */
  long position = batch->positions[token];
  bool owned = request >= 0 && request < (int)batch->num_reqs;
  int row = owned ? row_of((uint)request, batch->num_reqs,
                           batch->idx_mapping, batch->has_idx_mapping)
                  : -1;
  bool row_in_table = row >= 0 && row < (int)batch->max_num_reqs;
  bool row_outside = row >= (int)batch->max_num_reqs;
  FOR_EACH_GROUP(g) {
    if (!maps_tokens(g) || !takes_part(head, g)) continue;
    clbt__group_layout at = layout.groups[g];
    __global long *slots =
        (__global long *)region(storage, at, CLBT_REGION_SLOTS);
    long slot = CLBT_PAD_SLOT_ID;
    if (row_in_table) {
      committed_group rows = committed_group_of(packet, g, storage, at);
      committed_row committed;
      committed_row_of(&rows, row, &committed);
      slot = slot_of(position, &rows, &committed, &rejected[g],
                     group_table[g]);
    }
    slots[token] = slot;
    if (row_outside) ++rejected[g];
  }
}

/* Pads entries [begin, end) of every token-mapping group that takes part,
   every `step`-th. */
static void pad_slots(uint begin, uint end, uint step, clbt__record_head head,
                      clbt__kernel_layout layout, __global int *storage) {
  FOR_EACH_GROUP(g) {
    if (!maps_tokens(g) || !takes_part(head, g)) continue;
    __global long *slots =
        (__global long *)region(storage, layout.groups[g], CLBT_REGION_SLOTS);
    for (uint i = begin; i < end; i += step) slots[i] = CLBT_PAD_SLOT_ID;
  }
}

/* This work-item's items of count items from `from`, split among the
   part's work-items, as [*begin, *end) every *step-th. */
static void split_items(part_range part, uint from, uint count, uint *begin,
                        uint *end, uint *step) {
#if CLBT_GPU
  *begin = from + part_item(part);
  *end = from + count;
  *step = part_items(part);
#else
  split_range(count, part_item(part), part_items(part), begin, end);
  *begin += from;
  *end += from;
  *step = 1;
#endif
}

/*
 * Maps this work-item's share of the batch's tokens in every token-mapping
 * group that takes part, and pads its share of the rest: every element of
 * every such group's slot mapping is written. A batch that is not well
 * formed maps no token and counts them all.
 */
static void map_slots(const map_batch *batch, part_range part,
                      clbt__record_head head, clbt__kernel_layout layout,
                      const packet_view *packet, __global int *storage,
                      uint *rejected) {
  uint begin, end, step;
  split_items(part, 0, batch->num_tokens, &begin, &end, &step);
  if (!batch->well_formed) {
    for (uint token = begin; token < end; token += step)
      FOR_EACH_GROUP(g) {
        if (maps_tokens(g) && takes_part(head, g)) ++rejected[g];
      }
    pad_slots(begin, end, step, head, layout, storage);
  } else {
    /* A run searches once, then its request advances with the tokens. */
    int request = -1;
    for (uint token = begin; token < end; token += step) {
      if (token == begin || step > 1)
        request = find_request(batch->qsl, batch->num_reqs, (int)token);
      while (request < (int)batch->num_reqs &&
             batch->qsl[request + 1] <= (int)token)
        ++request;
      map_token(token, request, batch, head, layout, packet, storage,
                rejected);
    }
  }
  split_items(part, batch->num_tokens,
              batch->max_num_tokens - batch->num_tokens, &begin, &end, &step);
  pad_slots(begin, end, step, head, layout, storage);
}
