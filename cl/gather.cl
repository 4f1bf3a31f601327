/*
 * The step kernel's gather: position b of each group's gathered table
 * (Model Runner V2's input block table) holds the committed row that
 * batch request b reads, its live entries, or nothing for a padding
 * request or a row outside the table (which is counted). A record per
 * position says which row it holds, at which version, and how far it may
 * be nonzero, so a position whose row and version are unchanged is left
 * alone: a steady step moves only what changed. Entries past the row's
 * length are zeroed up to that extent when the group asks
 * (zero_gathered_tails); a padding row is zeroed whole.
 *
 * A work-group takes a chunk of positions at a time: each of its work-items
 * plans one position (its reads of the record, version and length run side
 * by side), then all of them copy the chunk's changed rows, neighbouring
 * work-items neighbouring entries. Rows, lengths and versions are read as
 * the launch sees them (committed_row_of, cl/commit.cl).
 */
#pragma once
#include "common.cl"

typedef struct gather_plan {
  committed_row row; /* its row -1: none */
  uint copied;  /* entries [0, copied) come from the row */
  uint written; /* entries [copied, written) become 0 */
} gather_plan;

/* What the gather reads of a launch. */
typedef struct gather_batch {
  uint num_reqs, padded, max_num_reqs;
  __global const int *idx_mapping;
  bool has_idx_mapping;
} gather_batch;

/* Plans position b of group `at` and updates its record; returns 1 when
   b's row is outside the table. */
static uint plan_position(uint b, const gather_batch *batch,
                          const committed_group *rows, __global int *storage,
                          clbt__group_layout at, bool zero_tails,
                          __local gather_plan *plan) {
  int row = row_of(b, batch->num_reqs, batch->idx_mapping,
                   batch->has_idx_mapping);
  bool outside = row >= (int)batch->max_num_reqs;
  row = outside ? -1 : max(row, -1);
  __global uint *record =
      (__global uint *)region(storage, at, CLBT_REGION_GATHER_RECORDS) +
      (ulong)b * CLBT_GATHER_RECORD_WORDS;
  __global ulong *recorded_version =
      (__global ulong *)(record + CLBT_GATHER_RECORD_VERSION);
  committed_row committed;
  committed_row_of(rows, row, &committed);
  ulong version = row >= 0 ? committed_version(rows, &committed) : 0;
  uint length = committed.length;
  uint extent = record[CLBT_GATHER_RECORD_EXTENT];
  bool changed = (int)record[CLBT_GATHER_RECORD_ROW] != row ||
                 (row >= 0 && *recorded_version != version);
  bool zeroes = zero_tails || row < 0;
  plan->row = committed;
  plan->copied = changed ? length : 0;
  plan->written = !changed ? 0 : zeroes ? max(extent, length) : length;
  if (changed) {
    record[CLBT_GATHER_RECORD_ROW] = (uint)row;
    *recorded_version = version;
    record[CLBT_GATHER_RECORD_EXTENT] = zeroes ? length : max(extent, length);
  }
  return outside ? 1 : 0;
}

/* Copies the planned rows of positions [start, start + count). */
static void copy_positions(uint start, uint count,
                           __local const gather_plan *plans,
                           const committed_group *rows,
                           __global int *gathered) {
  uint id = get_local_id(0), size = get_local_size(0);
  for (uint p = 0; p < count; ++p) {
    gather_plan plan = plans[p];
    __global int *out = gathered + (ulong)(start + p) * rows->row_stride;
    copy_committed(out, rows, &plan.row, id, plan.copied, size);
    for (uint j = plan.copied + id; j < plan.written; j += size) out[j] = 0;
  }
}

/* Gathers every group that takes part over the padded batch's positions,
   chunks of them spread over the part's work-groups. */
static void gather_rows(const gather_batch *batch, part_range part,
                        clbt__record_head head, clbt__kernel_layout layout,
                        const packet_view *packet, __global int *storage,
                        __local gather_plan *plans, uint *rejected) {
  uint padded = batch->padded;
  uint per_group = (padded + part.count - 1) / part.count;
  uint chunk = clamp(per_group, 1u, (uint)get_local_size(0));
  FOR_EACH_GROUP(g) {
    if (!takes_part(head, g)) continue;
    clbt__group_layout at = layout.groups[g];
    committed_group rows = committed_group_of(packet, g, storage, at);
    for (uint start = part_group(part) * chunk; start < padded;
         start += part.count * chunk) {
      uint count = min(chunk, padded - start);
      if (get_local_id(0) < count)
        rejected[g] += plan_position(
            start + get_local_id(0), batch, &rows, storage, at,
            group_table[g].zero_gathered_tails != 0, &plans[get_local_id(0)]);
      SYNC(CLK_LOCAL_MEM_FENCE);
      copy_positions(start, count, plans, &rows,
                     region(storage, at, CLBT_REGION_GATHERED));
      SYNC(CLK_LOCAL_MEM_FENCE);
    }
  }
}
