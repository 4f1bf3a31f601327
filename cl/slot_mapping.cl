/*
 * The step kernel. Its slot mapping gives each token of a batch the
 * KV-cache slot it writes, block_id * kernel_block_size + offset, as vLLM's
 * _compute_slot_mapping_kernel does, and CLBT_PAD_SLOT_ID to every other
 * element of the fixed-size output; request r reads row idx_mapping[r]
 * (or row r), as Model Runner V2's kernel does. Its gather copies each
 * batch request's committed row into the group's gathered table, in batch
 * order (plan_position). One launch serves up to eight KV-cache groups:
 * each token's request is found once and mapped in every group.
 *
 * It differs from vLLM's kernel in two ways that make it safe on any input:
 * it never reads a block outside the row's committed length (such a token
 * gets the pad id and is counted), nor a row outside the table, and it
 * checks query_start_loc before trusting it.
 *
 * Work-items are token-parallel: each takes a contiguous run of tokens
 * (share), so the host can pick the launch geometry per device
 * (docs/design.md).
 *
 * cl/contract.h comes first in this source: it lists the arguments and the
 * group constants, which the host expands the same way. Specialised at
 * build time (the host passes every one):
 *   CLBT_PAD_SLOT_ID        the slot id of tokens that write nothing
 *   CLBT_QSL_IN_LOCAL       1: each work-group copies query_start_loc into
 *                           local memory (qsl_cache) and searches it there;
 *                           0: the array is too large, searched in global
 *                           memory
 *   CLBT_NUM_GROUPS         groups served by this launch, 1..8
 *   CLBT_INLINE_WORDS       the words of a commit packet the launch can
 *                           carry in its arguments (1: the device has no
 *                           room for one)
 *   CLBT_GROUP_<g>          group g's constants, in the order of
 *                           CLBT_GROUP_CONSTANTS
 */

/* A commit packet passed by value, CLBT_INLINE_WORDS words (1: none). */
typedef struct clbt_inline_packet {
  uint words[CLBT_INLINE_WORDS];
} clbt_inline_packet;

/* Parameter lists from the contract's lists. */
#define FIRST_PARAMETER(NAME, type, name) type name
#define PARAMETER(NAME, type, name) , type name
#define GROUP_PARAMETER(g, NAME, type, name) , type name##_##g
#define GROUP_PARAMETERS(g) CLBT_SLOT_MAPPING_GROUP_ARGUMENTS(GROUP_PARAMETER, g)

/*
 * A group's constants as one value, every field a literal that folds. The
 * host passes CLBT_GROUP_<g> as the values in CLBT_GROUP_CONSTANTS's order,
 * the order these fields are declared in.
 */
typedef struct group_constants {
#define DECLARE_CONSTANT(g, name) ulong name;
  CLBT_GROUP_CONSTANTS(DECLARE_CONSTANT, 0)
} group_constants;
#define GROUP_CONSTANTS(g) ((group_constants){CLBT_GROUP_##g})

#if CLBT_QSL_IN_LOCAL
#define QSL_SPACE __local
#else
#define QSL_SPACE __global
#endif

/*
 * Whether query_start_loc[0..num_reqs] is a non-decreasing run from >= 0 to
 * <= num_tokens. Each work-group reads the whole array, so every group
 * reaches the same verdict without a second launch; on the way it copies
 * the array to local memory, where the request searches below are cheap.
 */
static bool batch_is_well_formed(__global const int *query_start_loc,
                                 uint num_reqs, uint num_tokens,
                                 __local int *qsl_cache,
                                 __local int *well_formed) {
  if (get_local_id(0) == 0) *well_formed = 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint i = get_local_id(0); i <= num_reqs; i += get_local_size(0)) {
    int start = query_start_loc[i];
    bool bad = i == 0 ? start < 0 : start < query_start_loc[i - 1];
    if (i == num_reqs && (long)start > (long)num_tokens) bad = true;
    if (bad) atomic_and(well_formed, 0);
#if CLBT_QSL_IN_LOCAL
    qsl_cache[i] = start;
#endif
  }
  barrier(CLK_LOCAL_MEM_FENCE);
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

/* The row of batch request r: its idx_mapping entry, or r itself. */
static int row_of(__global const int *idx_mapping, uint has_idx_mapping,
                  uint r) {
  return has_idx_mapping ? idx_mapping[r] : (int)r;
}

/*
 * This work-item's share [*begin, *end) of count items: a contiguous run.
 * On a GPU the grid is as large as the buffer, so runs are one token long
 * and neighbouring work-items touch neighbouring slots; on a CPU one
 * work-item takes a long run, whose loops are unit-stride and vectorise.
 */
static void share(uint count, uint *begin, uint *end) {
  uint per_item = (count + get_global_size(0) - 1) / get_global_size(0);
  *begin = min((uint)get_global_id(0) * per_item, count);
  *end = min(*begin + per_item, count);
}

/*
 * The slot of one token of a row, vLLM's arithmetic: positions are split
 * into virtual blocks of cp_world_size KV blocks, dealt to ranks
 * cp_interleave_size tokens at a time. Another rank's token gets the pad
 * id; so does a token outside the committed row, which is also counted.
 * The group constants arrive as literals, so the divisions fold.
 */
static inline long slot_of(long position, __global const int *row,
                           uint row_length, uint *rejected,
                           group_constants group) {
  ulong kv_block_size = group.kv_block_size;
  ulong blocks_per_kv_block = group.blocks_per_kv_block;
  ulong cp_world_size = group.cp_world_size;
  ulong cp_rank = group.cp_rank;
  ulong cp_interleave_size = group.cp_interleave_size;
  if (position < 0) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  ulong kernel_block_size = kv_block_size / blocks_per_kv_block;
  ulong virtual_block_size = kv_block_size * cp_world_size;
  ulong virtual_index = (ulong)position / virtual_block_size;
  ulong virtual_offset = (ulong)position - virtual_index * virtual_block_size;
  if ((virtual_offset / cp_interleave_size) % cp_world_size != cp_rank)
    return CLBT_PAD_SLOT_ID;
  ulong local_offset =
      virtual_offset / (cp_world_size * cp_interleave_size) *
          cp_interleave_size +
      virtual_offset % cp_interleave_size;
  /* Checked first so that the product below cannot wrap. */
  if (virtual_index >= row_length) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  ulong block_index =
      virtual_index * blocks_per_kv_block + local_offset / kernel_block_size;
  if (block_index >= row_length) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  return (long)row[block_index] * (long)kernel_block_size +
         (long)(local_offset % kernel_block_size);
}

/*
 * Each group's table keeps its committed rows, lengths, output and
 * rejected-token counter in one buffer (one argument costs the driver less
 * than four), at offsets in 32-bit words.
 */
#define GROUP_POINTERS(g)                                                    \
  __global const int *rows_##g = storage_##g + rows_at_##g;                 \
  __global const int *row_lengths_##g = storage_##g + row_lengths_at_##g;   \
  __global long *slots_##g = (__global long *)(storage_##g + slots_at_##g); \
  __global uint *rejected_tokens_##g =                                       \
      (__global uint *)(storage_##g + rejected_tokens_at_##g);

#define DECLARE_COUNT(g) uint rejected_##g = 0;

#define MAPS_TOKENS(g) (GROUP_CONSTANTS(g).maps_tokens != 0)

#define REJECT_TOKENS(g) \
  if (MAPS_TOKENS(g)) rejected_##g += end - begin;

#define PAD_TOKENS(g)                              \
  if (MAPS_TOKENS(g))                              \
    for (uint token = begin; token < end; ++token) \
      slots_##g[token] = CLBT_PAD_SLOT_ID;

/* A token of a request whose row is outside the table is counted. */
#define MAP_TOKEN(g)                                                        \
  if (MAPS_TOKENS(g)) {                                                     \
    if (row_in_table)                                                       \
      slots_##g[token] =                                                    \
          slot_of(position, rows_##g + (ulong)row * row_stride_##g,         \
                  (uint)row_lengths_##g[row], &rejected_##g,                \
                  GROUP_CONSTANTS(g));                                      \
    else                                                                    \
      slots_##g[token] = CLBT_PAD_SLOT_ID;                                  \
    if (row_outside) ++rejected_##g;                                        \
  }

/*
 * A commit packet's section of one group (cl/contract.h has the layout):
 * each row's length and version, and each changed cell. The work-items
 * from `first` on take every `stride`-th item; items are counted in 64 bits
 * so that nothing wraps. Defined for the two places a packet can be: a
 * buffer, or the launch's own arguments (clbt_inline_packet).
 */
#define DEFINE_APPLY_SECTION(space, name)                                   \
  static void name(space const uint *section, uint num_lengths,             \
                   uint num_cells, __global int *rows, uint row_stride,     \
                   __global int *row_lengths, __global uint *row_versions,  \
                   uint version, ulong first, ulong stride) {               \
    ulong items = (ulong)num_lengths + num_cells;                           \
    space const uint *cells = section + 2 * (ulong)num_lengths;             \
    for (ulong i = first; i < items; i += stride) {                         \
      if (i < num_lengths) {                                                \
        uint row = section[2 * i];                                          \
        row_lengths[row] = (int)section[2 * i + 1];                         \
        row_versions[row] = version;                                        \
      } else {                                                              \
        space const uint *cell = cells + 3 * (i - num_lengths);             \
        rows[(ulong)cell[0] * row_stride + cell[1]] = (int)cell[2];         \
      }                                                                     \
    }                                                                       \
  }
DEFINE_APPLY_SECTION(__global, apply_section_in_buffer)
DEFINE_APPLY_SECTION(__private, apply_section_inline)

/* Group g's section, after the header and the sections before it. */
#define APPLY_SECTION(apply, g)                                             \
  {                                                                         \
    uint num_lengths = packet_of_launch[2 * g];                             \
    uint num_cells = packet_of_launch[2 * g + 1];                           \
    apply(packet_of_launch + section_at, num_lengths, num_cells,            \
          storage_##g + rows_at_##g, row_stride_##g,                        \
          storage_##g + row_lengths_at_##g,                                 \
          (__global uint *)(storage_##g + row_versions_at_##g), version,    \
          first, stride);                                                   \
    section_at += 2 * (ulong)num_lengths + 3 * (ulong)num_cells;            \
  }
#define APPLY_SECTION_IN_BUFFER(g) APPLY_SECTION(apply_section_in_buffer, g)
#define APPLY_SECTION_INLINE(g) APPLY_SECTION(apply_section_inline, g)

/* Every group's section of a packet at `words` in address space `space`. */
#define APPLY_PACKET(space, words, apply_section_of, first, stride)  \
  {                                                                   \
    space const uint *packet_of_launch = words;                       \
    ulong section_at = CLBT_PACKET_HEADER_WORDS_PER_GROUP *           \
                       (ulong)CLBT_NUM_GROUPS;                        \
    CLBT_FOR_EACH_GROUP(apply_section_of)                             \
  }

/* The gather of group g over the positions, a chunk at a time. */
#define GATHER_GROUP(g)                                                     \
  for (uint start = get_group_id(0) * chunk; start < gathered_reqs;         \
       start += get_num_groups(0) * chunk) {                                \
    uint count = min(chunk, gathered_reqs - start);                         \
    if (get_local_id(0) < count)                                            \
      rejected_##g += plan_position(                                        \
          start + get_local_id(0), num_reqs, idx_mapping, has_idx_mapping,  \
          max_num_reqs, row_lengths_##g,                                    \
          (__global const uint *)(storage_##g + row_versions_at_##g),       \
          (__global uint *)(storage_##g + gather_records_at_##g),           \
          GROUP_CONSTANTS(g).zero_gathered_tails != 0, &plans[get_local_id(0)]); \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
    copy_positions(start, count, plans, rows_##g, row_stride_##g,           \
                   storage_##g + gathered_at_##g);                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
  }

#define ADD_COUNT(g) \
  if (rejected_##g) atomic_add(rejected_tokens_##g, rejected_##g);

/*
 * The gather. Position b of a group's gathered table holds the committed
 * row that batch request b reads, its live entries, or nothing for a
 * padding request or a row outside the table (which is counted). A record
 * per position says which row it holds, at which version, and how far it
 * may be nonzero, so a position whose row and version are unchanged is left
 * alone: a steady step moves only what changed. Entries past the row's
 * length are zeroed up to that extent when the group asks
 * (zero_gathered_tails); a padding row is zeroed whole.
 *
 * A work-group takes a chunk of positions at a time: each of its work-items
 * plans one position (its reads of the record, version and length run side
 * by side), then all of them copy the chunk's changed rows, neighbouring
 * work-items neighbouring entries.
 */
typedef struct gather_plan {
  int row;       /* -1: none */
  uint copied;   /* entries [0, copied) come from the row */
  uint written;  /* entries [copied, written) become 0 */
} gather_plan;

/* Plans position b and updates its record; returns 1 when b's row is
   outside the table. */
static uint plan_position(uint b, uint num_reqs,
                          __global const int *idx_mapping,
                          uint has_idx_mapping, uint max_num_reqs,
                          __global const int *row_lengths,
                          __global const uint *row_versions,
                          __global uint *records, bool zero_tails,
                          __local gather_plan *plan) {
  int row = b < num_reqs ? row_of(idx_mapping, has_idx_mapping, b) : -1;
  bool outside = row >= (int)max_num_reqs;
  row = outside ? -1 : max(row, -1);
  __global uint *record = records + (ulong)b * CLBT_GATHER_RECORD_WORDS;
  uint version = row >= 0 ? row_versions[row] : 0;
  uint length = row >= 0 ? (uint)row_lengths[row] : 0;
  uint extent = record[CLBT_GATHER_RECORD_EXTENT];
  bool changed = (int)record[CLBT_GATHER_RECORD_ROW] != row ||
                 (row >= 0 && record[CLBT_GATHER_RECORD_VERSION] != version);
  bool zeroes = zero_tails || row < 0;
  plan->row = row;
  plan->copied = changed ? length : 0;
  plan->written = !changed ? 0 : zeroes ? max(extent, length) : length;
  if (changed) {
    record[CLBT_GATHER_RECORD_ROW] = (uint)row;
    record[CLBT_GATHER_RECORD_VERSION] = version;
    record[CLBT_GATHER_RECORD_EXTENT] = zeroes ? length : max(extent, length);
  }
  return outside ? 1 : 0;
}

/* Copies the planned rows of positions [start, start + count). */
static void copy_positions(uint start, uint count,
                           __local const gather_plan *plans,
                           __global const int *rows, uint row_stride,
                           __global int *gathered) {
  for (uint p = 0; p < count; ++p) {
    gather_plan plan = plans[p];
    __global int *out = gathered + (ulong)(start + p) * row_stride;
    __global const int *in = rows + (ulong)max(plan.row, 0) * row_stride;
    for (uint j = get_local_id(0); j < plan.written; j += get_local_size(0))
      out[j] = j < plan.copied ? in[j] : 0;
  }
}

/*
 * The commit scatter: applies a packet to the groups' committed rows, the
 * whole grid sharing the items. A commit uses it when its packet is too
 * large for every work-group of the step kernel to apply on its own.
 */
__kernel void clbt_commit_scatter(
    CLBT_SLOT_MAPPING_FIRST_ARGUMENT(FIRST_PARAMETER)
    CLBT_SLOT_MAPPING_ARGUMENTS(PARAMETER)
    CLBT_FOR_EACH_GROUP(GROUP_PARAMETERS)) {
  ulong first = get_global_id(0), stride = get_global_size(0);
  APPLY_PACKET(__global, packet + packet_at, APPLY_SECTION_IN_BUFFER, first,
               stride)
}

__kernel void clbt_slot_mapping(
    CLBT_SLOT_MAPPING_FIRST_ARGUMENT(FIRST_PARAMETER)
    CLBT_SLOT_MAPPING_ARGUMENTS(PARAMETER)
    CLBT_FOR_EACH_GROUP(GROUP_PARAMETERS)
    CLBT_STEP_LAST_ARGUMENT(PARAMETER)) {
  __local int well_formed;
  __local gather_plan plans[CLBT_MAX_WORK_GROUP_SIZE];
  /*
   * A small packet is applied here, by every work-group on its own: each
   * then reads rows it wrote itself, and where two work-groups write one
   * word they write the same value. This spares the step a scatter launch,
   * and, when the packet came inside the launch's arguments, the upload.
   */
  if (has_packet != CLBT_PACKET_NONE) {
    ulong first = get_local_id(0), stride = get_local_size(0);
    if (has_packet == CLBT_PACKET_INLINE)
      APPLY_PACKET(__private, inline_packet.words, APPLY_SECTION_INLINE,
                   first, stride)
    else
      APPLY_PACKET(__global, packet + packet_at, APPLY_SECTION_IN_BUFFER,
                   first, stride)
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
  bool batch_ok = batch_is_well_formed(query_start_loc, num_reqs, num_tokens,
                                       qsl_cache, &well_formed);
#if CLBT_QSL_IN_LOCAL
  QSL_SPACE const int *qsl = qsl_cache;
#else
  QSL_SPACE const int *qsl = query_start_loc;
#endif
  CLBT_FOR_EACH_GROUP(GROUP_POINTERS)
  CLBT_FOR_EACH_GROUP(DECLARE_COUNT)
  uint begin, end;
  share(num_tokens, &begin, &end);
  if (!batch_ok) {
    CLBT_FOR_EACH_GROUP(REJECT_TOKENS)
    CLBT_FOR_EACH_GROUP(PAD_TOKENS)
  } else if (begin < end) {
    /* One search per run; then the request advances with the tokens. */
    int request = find_request(qsl, num_reqs, (int)begin);
    for (uint token = begin; token < end; ++token) {
      while (request < (int)num_reqs && qsl[request + 1] <= (int)token)
        ++request;
      bool owned = request >= 0 && request < (int)num_reqs;
      int row = owned ? row_of(idx_mapping, has_idx_mapping, (uint)request)
                      : -1;
      bool row_in_table = row >= 0 && row < (int)max_num_reqs;
      bool row_outside = row >= (int)max_num_reqs;
      long position = row_in_table ? positions[token] : 0;
      CLBT_FOR_EACH_GROUP(MAP_TOKEN)
    }
  }
  share(max_num_tokens - num_tokens, &begin, &end);
  begin += num_tokens;
  end += num_tokens;
  CLBT_FOR_EACH_GROUP(PAD_TOKENS)

  /* The gather: chunks of positions spread over every work-group. */
  uint per_group = (gathered_reqs + get_num_groups(0) - 1) / get_num_groups(0);
  uint chunk = clamp(per_group, 1u, (uint)get_local_size(0));
  CLBT_FOR_EACH_GROUP(GATHER_GROUP)
  CLBT_FOR_EACH_GROUP(ADD_COUNT)
}
