/*
 * What every part of the step kernel uses: the groups' constants and
 * storage, a batch request's row, a work-item's run of items, and the
 * check of a batch's query_start_loc with the search of a token's request
 * in it. Every part includes it; cl/step.cl, the entries, includes the
 * parts, and the build embeds it with them as one program
 * (cmake/embed_source.cmake).
 *
 * Specialised at build time (the host passes every one):
 *   CLBT_PAD_SLOT_ID        the slot id of tokens that write nothing
 *   CLBT_QSL_WORDS          the words of a local copy of query_start_loc
 *                           each work-group makes and searches (0: the
 *                           array is too large and is searched in global
 *                           memory)
 *   CLBT_NUM_GROUPS         groups served by this launch, 1..8
 *   CLBT_GPU                1: code shaped for a GPU: neighbouring
 *                           work-items take neighbouring items (coalesced),
 *                           and the loops over groups are unrolled, so that
 *                           each group's constants fold into its code;
 *                           0: for a CPU, each work-item takes a run of
 *                           items, whose loops vectorise, and one copy of
 *                           the code serves every group (PoCL's compiler
 *                           takes seconds over eight copies at a first
 *                           launch)
 *   CLBT_RECORD_WORDS_<c>   the packet words of the record's sizes: class
 *                           0, and 1 and 2 when defined
 *   CLBT_GROUP_<g>          group g's constants, in the order of
 *                           CLBT_GROUP_CONSTANTS
 */
#pragma once
#include "contract.h"

CLBT_DECLARE_LAUNCH_LAYOUT(clbt__kernel_layout, CLBT_NUM_GROUPS)

/* A group's constants, in CLBT_GROUP_CONSTANTS's order. */
typedef struct group_constants {
#define DECLARE_CONSTANT(g, name) ulong name;
  CLBT_GROUP_CONSTANTS(DECLARE_CONSTANT, 0)
#undef DECLARE_CONSTANT
} group_constants;

/* Every group's constants: read at a literal index once the loops over
   groups are unrolled, they fold into the code. */
#define GROUP_TABLE_ENTRY(g) {CLBT_GROUP_##g},
__constant group_constants group_table[CLBT_NUM_GROUPS] = {
    CLBT_FOR_EACH_GROUP(GROUP_TABLE_ENTRY)};
#undef GROUP_TABLE_ENTRY

/* The loops over a launch's groups: `FOR_EACH_GROUP(g) { ... }`. */
#if CLBT_GPU
#define FOR_EACH_GROUP(g) \
  _Pragma("unroll") for (uint g = 0; g < CLBT_NUM_GROUPS; ++g)
#else
#define FOR_EACH_GROUP(g) \
  _Pragma("unroll 1") for (uint g = 0; g < CLBT_NUM_GROUPS; ++g)
#endif

/*
 * A work-group barrier. A CPU's work-groups are one work-item
 * (src/base/tuning.c), for which a barrier orders nothing; PoCL's compiler
 * spends most of a first launch on barriers in loops (2 to 5 s for the
 * step kernel's, against 0.3 to 0.8 s without them), so a CPU's code has
 * none.
 */
#if CLBT_GPU
#define SYNC(flags) barrier(flags)
#else
#define SYNC(flags)
#endif

static bool maps_tokens(uint g) { return group_table[g].maps_tokens != 0; }

/* Whether group g takes part in this launch (a call may name one group of
   its table alone). */
static bool takes_part(clbt__record_head head, uint g) {
  return (head.group_mask >> g & 1u) != 0;
}

/* Region r of a group, in the storage of every group. */
static __global int *region(__global int *storage, clbt__group_layout at,
                            uint r) {
  return storage + CLBT_REGION_WORDS(at, r);
}

/* A group's rejected-token count gets this work-item's additions. */
static void add_rejected(__global int *storage, clbt__group_layout at,
                         uint count) {
  if (count)
    atomic_add((__global uint *)region(storage, at,
                                       CLBT_REGION_REJECTED_TOKENS),
               count);
}

/*
 * The work-groups one part of a launch runs on, [first, first + count) of
 * the grid: on a GPU each part has its own (the record's *_groups), so that
 * the parts' chains of reads run side by side; on a CPU, with its few
 * work-groups, every part runs on all of them.
 */
typedef struct part_range {
  uint first, count;
} part_range;

/* The parts' ranges, in the record's order: map, gather, export, state
   slots; a record of zeros puts every part on the whole grid. */
static void part_ranges(clbt__record_head head, part_range *map,
                        part_range *gather, part_range *exports,
                        part_range *states) {
  uint counts[4] = {head.map_groups, head.gather_groups, head.export_groups,
                    head.state_groups};
  part_range *ranges[4] = {map, gather, exports, states};
  bool shared = counts[0] + counts[1] + counts[2] + counts[3] == 0;
  uint first = 0;
  for (uint p = 0; p < 4; ++p) {
    *ranges[p] = shared ? (part_range){0, (uint)get_num_groups(0)}
                        : (part_range){first, counts[p]};
    first += counts[p];
  }
}

static bool in_part(part_range part) {
  uint w = (uint)get_group_id(0);
  return w >= part.first && w - part.first < part.count;
}
/* This work-group's index among the part's, and this work-item's. */
static uint part_group(part_range part) {
  return (uint)get_group_id(0) - part.first;
}
static uint part_item(part_range part) {
  return part_group(part) * (uint)get_local_size(0) + (uint)get_local_id(0);
}
static uint part_items(part_range part) {
  return part.count * (uint)get_local_size(0);
}

/*
 * The row of batch request r: its idx_mapping entry, or r itself; -1 (none)
 * for a request past num_reqs.
 */
static int row_of(uint r, uint num_reqs, __global const int *idx_mapping,
                  bool has_idx_mapping) {
  if (r >= num_reqs) return -1;
  return has_idx_mapping ? idx_mapping[r] : (int)r;
}

/*
 * Run `part` [*begin, *end) of count items split into `parts` contiguous
 * runs, one a work-item.
 */
static void split_range(uint count, uint part, uint parts, uint *begin,
                        uint *end) {
  uint per_part = (count + parts - 1) / parts;
  *begin = min(part * per_part, count);
  *end = min(*begin + per_part, count);
}

/*
 * ids[first, count) to out, every `step`-th: a batch of loads, then their
 * stores, so that the loads are in flight together (out and ids are both
 * regions of one buffer, and a compiler may not move a load past a store
 * that may alias it).
 */
static void copy_ids(__global int *out, __global const int *ids, uint first,
                     uint count, uint step) {
  uint p = first;
  for (; p + 7 * step < count; p += 8 * step) {
    int batch[8];
    for (uint k = 0; k < 8; ++k) batch[k] = ids[p + k * step];
    for (uint k = 0; k < 8; ++k) out[p + k * step] = batch[k];
  }
  for (; p < count; p += step) out[p] = ids[p];
}

/* The first of first, first + step, ... that is at least `at`. */
static uint first_from(uint first, uint step, uint at) {
  return at <= first ? first : first + (at - first + step - 1) / step * step;
}

/* ---- the batch -------------------------------------------------------- */

#if CLBT_QSL_WORDS
#define QSL_SPACE __local
#else
#define QSL_SPACE __global
#endif

/*
 * Whether query_start_loc[0..num_reqs] is a non-decreasing run from >= 0 to
 * <= num_tokens. Each work-group reads the whole array, so every group
 * reaches the same verdict without a second launch; on the way it copies
 * the array to local memory (qsl_cache, when the kernel has one), where the
 * request searches below are cheap. A batch of no requests and no tokens
 * (a dummy run) reads nothing.
 */
static bool batch_is_well_formed(__global const int *query_start_loc,
                                 uint num_reqs, uint num_tokens,
                                 __local int *qsl_cache,
                                 __local int *well_formed) {
  if (num_reqs == 0 && num_tokens == 0) return true;
  if (get_local_id(0) == 0) *well_formed = 1;
  SYNC(CLK_LOCAL_MEM_FENCE);
  for (uint i = get_local_id(0); i <= num_reqs; i += get_local_size(0)) {
    int start = query_start_loc[i];
    bool bad = i == 0 ? start < 0 : start < query_start_loc[i - 1];
    if (i == num_reqs && (long)start > (long)num_tokens) bad = true;
    if (bad) atomic_and(well_formed, 0);
#if CLBT_QSL_WORDS
    qsl_cache[i] = start;
#endif
  }
  SYNC(CLK_LOCAL_MEM_FENCE);
  return *well_formed != 0;
}

/*
 * The last request r with query_start_loc[r] <= token in a well-formed
 * batch, or -1 when token comes before them all. A token belongs to r when
 * 0 <= r < num_reqs: empty requests are skipped because the last of equal
 * starts wins.
 */
static int find_request(QSL_SPACE const int *query_start_loc, uint num_reqs,
                        int token) {
  int low = -1, high = (int)num_reqs;
  while (low < high) {
    int middle = low + (high - low + 1) / 2;
    if (query_start_loc[middle] <= token)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}
