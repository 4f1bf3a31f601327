/*
 * The step kernel's parts that read and write rows: a commit packet
 * applied to the committed rows, the slot mapping, and the gather. The
 * export is in cl/export.cl, the kernel that runs them in cl/step.cl; the
 * build puts cl/contract.h, then these three files, in one source.
 *
 * The slot mapping gives each token of a batch the KV-cache slot it
 * writes, block_id * kernel_block_size + offset, as vLLM's
 * _compute_slot_mapping_kernel does, and CLBT_PAD_SLOT_ID to every other
 * element of the fixed-size output; request r reads row idx_mapping[r] (or
 * row r), as Model Runner V2's kernel does. It differs from vLLM's kernel in
 * two ways that make it safe on any input: it never reads a block outside
 * the row's committed length (such a token gets the pad id and is
 * counted), nor a row outside the table, and it checks query_start_loc
 * before trusting it.
 *
 * Specialised at build time (the host passes every one):
 *   CLBT_PAD_SLOT_ID        the slot id of tokens that write nothing
 *   CLBT_QSL_IN_LOCAL       1: each work-group copies query_start_loc into
 *                           local memory (qsl_cache) and searches it there;
 *                           0: the array is too large, searched in global
 *                           memory
 *   CLBT_NUM_GROUPS         groups served by this launch, 1..8
 *   CLBT_INLINE_WORDS       the words of a commit packet the launch can
 *                           carry in its record (1: the device has no room
 *                           for one)
 *   CLBT_GROUP_<g>          group g's constants, in the order of
 *                           CLBT_GROUP_CONSTANTS
 */

/*
 * A group's constants as one value, every field a literal that folds. The
 * host passes CLBT_GROUP_<g> as the values in CLBT_GROUP_CONSTANTS's order,
 * the order these fields are declared in.
 */
typedef struct group_constants {
#define DECLARE_CONSTANT(g, name) ulong name;
  CLBT_GROUP_CONSTANTS(DECLARE_CONSTANT, 0)
#undef DECLARE_CONSTANT
} group_constants;
#define GROUP_CONSTANTS(g) ((group_constants){CLBT_GROUP_##g})

#if CLBT_QSL_IN_LOCAL
#define QSL_SPACE __local
#else
#define QSL_SPACE __global
#endif

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
 * This work-item's share [*begin, *end) of count items, when `parts`
 * work-items take contiguous runs of them: run `part`.
 */
static void share(uint count, uint part, uint parts, uint *begin, uint *end) {
  uint per_part = (count + parts - 1) / parts;
  *begin = min(part * per_part, count);
  *end = min(*begin + per_part, count);
}

/* ---- a commit packet ------------------------------------------------- */

/*
 * A commit packet's section of one group (cl/contract.h has the layout):
 * each row's length and version, and each changed cell. The work-items
 * from `first` on take every `stride`-th item; items are counted in 64 bits
 * so that nothing wraps. Defined for the two places a packet can be: a
 * buffer, or the launch's own record.
 */
#define DEFINE_APPLY_SECTION(space, name)                                   \
  static void name(space const uint *section, uint num_lengths,             \
                   uint num_cells, __global int *rows, uint row_stride,     \
                   __global int *row_lengths, __global ulong *row_versions, \
                   ulong version, ulong first, ulong stride) {              \
    ulong items = (ulong)num_lengths + num_cells;                           \
    space const uint *cells =                                               \
        section + CLBT_PACKET_LENGTH_WORDS * (ulong)num_lengths;            \
    for (ulong i = first; i < items; i += stride) {                         \
      if (i < num_lengths) {                                                \
        space const uint *length = section + CLBT_PACKET_LENGTH_WORDS * i;  \
        row_lengths[length[0]] = (int)length[1];                            \
        row_versions[length[0]] = version;                                  \
      } else {                                                              \
        space const uint *cell =                                            \
            cells + CLBT_PACKET_CELL_WORDS * (i - num_lengths);             \
        rows[(ulong)cell[0] * row_stride + cell[1]] = (int)cell[2];         \
      }                                                                     \
    }                                                                       \
  }
DEFINE_APPLY_SECTION(__global, apply_section_in_buffer)
DEFINE_APPLY_SECTION(__private, apply_section_inline)

/* Group g's section, after the header and the sections before it. */
#define APPLY_SECTION(apply, g)                                             \
  {                                                                         \
    uint num_lengths = words[CLBT_PACKET_HEADER_WORDS_PER_GROUP * g];       \
    uint num_cells = words[CLBT_PACKET_HEADER_WORDS_PER_GROUP * g + 1];     \
    apply(words + section_at, num_lengths, num_cells,                       \
          storage_##g + AT(g, ROWS), layout.groups[g].row_stride,           \
          storage_##g + AT(g, ROW_LENGTHS),                                 \
          (__global ulong *)(storage_##g + AT(g, ROW_VERSIONS)), version,   \
          first, stride);                                                   \
    section_at += CLBT_PACKET_LENGTH_WORDS * (ulong)num_lengths +           \
                  CLBT_PACKET_CELL_WORDS * (ulong)num_cells;                \
  }
#define APPLY_SECTION_IN_BUFFER(g) APPLY_SECTION(apply_section_in_buffer, g)
#define APPLY_SECTION_INLINE(g) APPLY_SECTION(apply_section_inline, g)

/* Every group's section of a packet at `packet_words` in `space`. */
#define APPLY_PACKET(space, packet_words, apply_section_of)         \
  {                                                                 \
    space const uint *words = packet_words;                         \
    ulong section_at =                                              \
        CLBT_PACKET_HEADER_WORDS_PER_GROUP * (ulong)CLBT_NUM_GROUPS; \
    CLBT_FOR_EACH_GROUP(apply_section_of)                           \
  }

/* ---- the slot mapping ------------------------------------------------ */

/*
 * Whether query_start_loc[0..num_reqs] is a non-decreasing run from >= 0 to
 * <= num_tokens. Each work-group reads the whole array, so every group
 * reaches the same verdict without a second launch; on the way it copies
 * the array to local memory, where the request searches below are cheap.
 * A batch of no requests and no tokens (a dummy run) reads nothing.
 */
static bool batch_is_well_formed(__global const int *query_start_loc,
                                 uint num_reqs, uint num_tokens,
                                 __local int *qsl_cache,
                                 __local int *well_formed) {
  if (num_reqs == 0 && num_tokens == 0) return true;
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

/* ---- the gather ------------------------------------------------------ */

/*
 * Position b of a group's gathered table holds the committed row that
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
 * work-items neighbouring entries.
 */
typedef struct gather_plan {
  int row;      /* -1: none */
  uint copied;  /* entries [0, copied) come from the row */
  uint written; /* entries [copied, written) become 0 */
} gather_plan;

/* Plans position b and updates its record; returns 1 when b's row is
   outside the table. */
static uint plan_position(uint b, uint num_reqs,
                          __global const int *idx_mapping,
                          bool has_idx_mapping, uint max_num_reqs,
                          __global const int *row_lengths,
                          __global const ulong *row_versions,
                          __global uint *records, bool zero_tails,
                          __local gather_plan *plan) {
  int row = row_of(b, num_reqs, idx_mapping, has_idx_mapping);
  bool outside = row >= (int)max_num_reqs;
  row = outside ? -1 : max(row, -1);
  __global uint *record = records + (ulong)b * CLBT_GATHER_RECORD_WORDS;
  __global ulong *recorded_version =
      (__global ulong *)(record + CLBT_GATHER_RECORD_VERSION);
  ulong version = row >= 0 ? row_versions[row] : 0;
  uint length = row >= 0 ? (uint)row_lengths[row] : 0;
  uint extent = record[CLBT_GATHER_RECORD_EXTENT];
  bool changed = (int)record[CLBT_GATHER_RECORD_ROW] != row ||
                 (row >= 0 && *recorded_version != version);
  bool zeroes = zero_tails || row < 0;
  plan->row = row;
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
