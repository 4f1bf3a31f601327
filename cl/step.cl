/*
 * The step kernel: every device command of a step but the uploads is a
 * launch of one of its entries. A launch's record (cl/contract.h) says
 * what it does, in this order:
 *
 *   1. a commit packet, when the record carries one (cl/commit.cl),
 *      spread over the whole grid; with CLBT_WORK_SCATTER nothing else;
 *      otherwise the parts below read the rows it changes from the packet
 *      itself, never from storage, which it is writing meanwhile;
 *   2. with CLBT_WORK_MAP, each token-mapping group's slot mapping
 *      (cl/slot_mapping.cl); or, with CLBT_WORK_TOKEN_SLOTS instead (a
 *      call of its own), each token-mapping group's slots of an index
 *      matrix (cl/token_slots.cl);
 *   3. with CLBT_WORK_GATHER, each group's gather (cl/gather.cl);
 *   4. with CLBT_WORK_EXPORT, each token-mapping group's export
 *      (cl/export.cl);
 *   5. with CLBT_WORK_STATE_SLOTS, each NONE group's state slots
 *      (cl/state_slots.cl).
 *
 * On a GPU each part runs on work-groups of its own (the record's
 * *_groups), so that the parts' chains of reads run side by side rather
 * than one after another.
 * Each entry of CLBT_STEP_ENTRIES is this sequence compiled with only its
 * parts, in each record size (CLBT_RECORD_WORDS_<c>): clbt_<name>_<c>. A
 * GPU's program has one entry, WHOLE, with every part
 * (CLBT_GPU_STEP_ENTRIES); a CPU's the others (CLBT_CPU_STEP_ENTRIES).
 * Only the groups the record's `group_mask` names take part.
 */
#include "common.cl"
#include "commit.cl"
#include "slot_mapping.cl"
#include "gather.cl"
#include "export.cl"
#include "state_slots.cl"
#include "token_slots.cl"

/* The local memory a work-group's parts share. */
typedef struct step_locals {
  __local const uint *packet; /* the record's inline packet, copied */
  __local int *well_formed;
  __local int *qsl_cache; /* CLBT_QSL_WORDS of them, or none */
  __local gather_plan *plans;
  export_scratch export;
} step_locals;

/* The buffers a launch binds (NULL where it reads none), by what they
   hold: a token-slots launch's index matrix and output come in the
   arguments of the positions and seq_lens, which it does not read. */
typedef struct step_buffers {
  __global const int *query_start_loc;
  __global const long *positions;
  __global const int *idx_mapping;
  __global const int *seq_lens;
  __global const int *token_indices;
  __global int *token_slots;
  __global const uint *packet;
  __global int *storage;
} step_buffers;


/*
 * Part 2: the batch checked once for both the slot mapping and token
 * slots (a launch does one or the other; in a token-slots call the
 * matrix's rows play the batch's tokens), then the one asked for.
 */
static void map_tokens(clbt__record_head head, uint work,
                       clbt__kernel_layout layout, const packet_view *packet,
                       step_buffers in, step_locals locals, part_range map,
                       uint *rejected) {
  bool has_idx_mapping = (work & CLBT_WORK_IDX_MAPPING) != 0;
  bool ok = batch_is_well_formed(in.query_start_loc, head.num_reqs,
                                 head.num_tokens, locals.qsl_cache,
                                 locals.well_formed);
#if CLBT_QSL_WORDS
  __local const int *qsl = locals.qsl_cache;
#else
  __global const int *qsl = in.query_start_loc;
#endif
  if (work & CLBT_WORK_MAP) {
    map_batch batch = {head.num_reqs,      head.num_tokens,
                       layout.max_num_reqs, layout.max_num_tokens,
                       qsl,                in.positions,
                       in.idx_mapping,     has_idx_mapping,
                       ok};
    map_slots(&batch, map, head, layout, packet, in.storage, rejected);
  }
  if (work & CLBT_WORK_TOKEN_SLOTS) {
    token_batch batch = {head.num_reqs,      head.num_tokens,
                         head.indices_per_row, layout.max_num_reqs,
                         qsl,                in.idx_mapping,
                         has_idx_mapping,    ok,
                         in.token_indices,   in.token_slots};
    write_token_slot_groups(&batch, map, head, layout, packet, in.storage,
                            rejected);
  }
}

/*
 * What a launch's record asks of `parts`, in the order above: part 1, the
 * record's commit packet when it carries one, spread over the grid.
 */
static void run_step(clbt__record_head head, clbt__kernel_layout layout,
                     step_buffers in, step_locals locals, uint parts) {
  uint work = head.work & (parts | ~CLBT_WORK_PARTS);
  packet_view packet;
  view_packet(head, locals.packet, in.packet, &packet);
  apply_packet(&packet, layout, in.storage);
  if (work & CLBT_WORK_SCATTER) return;
  bool has_idx_mapping = (work & CLBT_WORK_IDX_MAPPING) != 0;
  uint rejected[CLBT_NUM_GROUPS];
  FOR_EACH_GROUP(g) { rejected[g] = 0; }
  part_range map, gather, exports, states;
  part_ranges(head, &map, &gather, &exports, &states);
  if ((work & (CLBT_WORK_MAP | CLBT_WORK_TOKEN_SLOTS)) && in_part(map))
    map_tokens(head, work, layout, &packet, in, locals, map, rejected);
  if ((work & CLBT_WORK_GATHER) && in_part(gather)) {
    gather_batch batch = {head.num_reqs, head.padded_reqs,
                          layout.max_num_reqs, in.idx_mapping,
                          has_idx_mapping};
    gather_rows(&batch, gather, head, layout, &packet, in.storage,
                locals.plans, rejected);
  }
  __global const int *seq_lens =
      (work & CLBT_WORK_SEQ_LENS) ? in.seq_lens : 0;
  if ((work & CLBT_WORK_EXPORT) && in_part(exports)) {
    export_batch batch = {head.num_reqs,      head.num_tokens,
                          layout.max_num_reqs, in.query_start_loc,
                          in.positions,       seq_lens,
                          in.idx_mapping,     has_idx_mapping};
    export_groups(&batch, head.padded_reqs, exports, head, layout, &packet,
                  in.storage, locals.export);
  }
  if ((work & CLBT_WORK_STATE_SLOTS) && in_part(states)) {
    state_batch batch = {head.num_reqs,      head.num_tokens,
                         head.padded_reqs,   layout.max_num_reqs,
                         in.query_start_loc, in.positions,
                         seq_lens,           in.idx_mapping,
                         has_idx_mapping};
    write_state_slot_groups(&batch, states, head, layout, &packet,
                            in.storage, rejected);
  }
  FOR_EACH_GROUP(g) { add_rejected(in.storage, layout.groups[g], rejected[g]); }
}

/* ---- the entries -------------------------------------------------------- */

#if CLBT_QSL_WORDS
#define QSL_CACHE_DECLARATION __local int qsl_cache[CLBT_QSL_WORDS];
#else
#define QSL_CACHE_DECLARATION __local int *qsl_cache = 0;
#endif

#define PARAMETER(NAME, type, name) , type name

/* The largest record's packet words: the local copy's size. */
#if defined(CLBT_RECORD_WORDS_2)
#define INLINE_WORDS CLBT_RECORD_WORDS_2
#elif defined(CLBT_RECORD_WORDS_1)
#define INLINE_WORDS CLBT_RECORD_WORDS_1
#else
#define INLINE_WORDS CLBT_RECORD_WORDS_0
#endif

/*
 * Entry clbt_<name>_<c>: its parts' sequence, its record of class c. The
 * record's inline packet is copied to local memory by index (cl/commit.cl
 * says why), its words side by side across the work-group.
 */
#define STEP_ENTRY(NAME, name, parts, c)                                    \
  __kernel void clbt_##name##_##c(                                          \
      record_##c record CLBT_STEP_ARGUMENTS(PARAMETER)) {                   \
    __local uint packet_words[INLINE_WORDS];                                \
    __local int well_formed;                                                \
    QSL_CACHE_DECLARATION                                                   \
    __local gather_plan plans[CLBT_MAX_WORK_GROUP_SIZE];                    \
    __local uint4 export_sums[CLBT_MAX_WORK_GROUP_SIZE];                    \
    __local uint2 export_offsets[CLBT_EXPORT_CHUNK + 1];                    \
    __local int export_rows[CLBT_EXPORT_CHUNK];                             \
    if (record.head.work & CLBT_WORK_PACKET_INLINE) {                       \
      uint words = min(record.head.packet_words, (uint)CLBT_RECORD_WORDS_##c); \
      for (uint i = get_local_id(0); i < words; i += get_local_size(0))     \
        packet_words[i] = record.packet[i];                                 \
      SYNC(CLK_LOCAL_MEM_FENCE);                                            \
    }                                                                       \
    step_locals locals = {packet_words, &well_formed, qsl_cache, plans,     \
                          {export_sums, export_offsets, export_rows}};      \
    step_buffers in = {query_start_loc, (__global const long *)positions,  \
                       idx_mapping,     seq_lens,                          \
                       positions,       seq_lens,                          \
                       packet,          storage};                          \
    run_step(record.head, layout, in, locals, parts);                       \
  }

/* The program's entries, in record class c: a GPU's or a CPU's list
   (cl/contract.h). */
#if CLBT_GPU
#define PROGRAM_ENTRIES CLBT_GPU_STEP_ENTRIES
#else
#define PROGRAM_ENTRIES CLBT_CPU_STEP_ENTRIES
#endif
#define STEP_ENTRY_0(NAME, name, parts) STEP_ENTRY(NAME, name, parts, 0)
#define STEP_ENTRY_1(NAME, name, parts) STEP_ENTRY(NAME, name, parts, 1)
#define STEP_ENTRY_2(NAME, name, parts) STEP_ENTRY(NAME, name, parts, 2)

CLBT_DECLARE_LAUNCH_RECORD(record_0, CLBT_RECORD_WORDS_0)
PROGRAM_ENTRIES(STEP_ENTRY_0)
#ifdef CLBT_RECORD_WORDS_1
CLBT_DECLARE_LAUNCH_RECORD(record_1, CLBT_RECORD_WORDS_1)
PROGRAM_ENTRIES(STEP_ENTRY_1)
#endif
#ifdef CLBT_RECORD_WORDS_2
CLBT_DECLARE_LAUNCH_RECORD(record_2, CLBT_RECORD_WORDS_2)
PROGRAM_ENTRIES(STEP_ENTRY_2)
#endif
