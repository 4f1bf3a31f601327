/*
 * The step kernel: every device command of a step but the uploads is a
 * launch of it. Its record (cl/contract.h) says what the launch does, in
 * this order:
 *
 *   1. a commit packet, when the record carries one: with
 *      CLBT_WORK_SCATTER spread over the whole grid, and nothing else;
 *      otherwise applied by every work-group on its own before it reads
 *      (a folded commit): each work-group then reads rows it wrote itself,
 *      and where two work-groups write one word they write the same value;
 *   2. with CLBT_WORK_MAP, each token-mapping group's slot mapping; or,
 *      with CLBT_WORK_TOKEN_SLOTS instead (a call of its own,
 *      cl/token_slots.cl), each token-mapping group's slots of an index
 *      matrix;
 *   3. with CLBT_WORK_GATHER, each group's gather;
 *   4. with CLBT_WORK_EXPORT, each token-mapping group's export (with
 *      CLBT_WORK_EXPORT_CONTEXT its context CSR too, with
 *      CLBT_WORK_EXPORT_DENSE its dense page table);
 *   5. with CLBT_WORK_STATE_SLOTS, each NONE group's state slots.
 *
 * The slot mapping is token-parallel: each work-item takes a contiguous run
 * of tokens, so the host picks the launch geometry per device
 * (docs/design.md). Every element of every slot mapping is written by every
 * launch that maps.
 */

CLBT_DECLARE_LAUNCH_RECORD(clbt_kernel_record, CLBT_INLINE_WORDS)
CLBT_DECLARE_LAUNCH_LAYOUT(clbt_kernel_layout, CLBT_NUM_GROUPS)

/* Parameter lists from the contract's lists. */
#define FIRST_PARAMETER(NAME, type, name) type name
#define PARAMETER(NAME, type, name) , type name
#define GROUP_PARAMETER(g, NAME, type, name) , type name##_##g
#define GROUP_PARAMETERS(g) CLBT_STEP_GROUP_ARGUMENTS(GROUP_PARAMETER, g)

/* Region REGION of group g, in words from its storage (the launch layout). */
#define AT(g, REGION) CLBT_REGION_WORDS(layout.groups[g], CLBT_REGION_##REGION)

#define MAPS_TOKENS(g) (GROUP_CONSTANTS(g).maps_tokens != 0)

#define GROUP_POINTERS(g)                                                  \
  __global const int *rows_##g = storage_##g + AT(g, ROWS);               \
  __global const int *row_lengths_##g = storage_##g + AT(g, ROW_LENGTHS); \
  __global long *slots_##g = (__global long *)(storage_##g + AT(g, SLOTS)); \
  uint row_stride_##g = layout.groups[g].row_stride;                      \
  uint rejected_##g = 0;

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

/* The gather of group g over the positions, a chunk at a time. */
#define GATHER_GROUP(g)                                                     \
  for (uint start = get_group_id(0) * chunk; start < padded;                \
       start += get_num_groups(0) * chunk) {                                \
    uint count = min(chunk, padded - start);                                \
    if (get_local_id(0) < count)                                            \
      rejected_##g += plan_position(                                        \
          start + get_local_id(0), num_reqs, idx_mapping, has_idx_mapping,  \
          layout.max_num_reqs, row_lengths_##g,                             \
          (__global const ulong *)(storage_##g + AT(g, ROW_VERSIONS)),      \
          (__global uint *)(storage_##g + AT(g, GATHER_RECORDS)),           \
          GROUP_CONSTANTS(g).zero_gathered_tails != 0,                      \
          &plans[get_local_id(0)]);                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
    copy_positions(start, count, plans, rows_##g, row_stride_##g,           \
                   storage_##g + AT(g, GATHERED));                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
  }

/* Group g's storage and constants, for the loops over groups that are
   not unrolled (the export: one copy of its code, whose barriers in
   loops PoCL's compiler takes minutes over when it is copied per group). */
#define STORAGE_ENTRY(g) storage_##g,
#define CONSTANTS_ENTRY(g) GROUP_CONSTANTS(g),

/* Exports every token-mapping group: a NONE group has no export regions,
   and exports no requests. */
#define EXPORT_GROUPS                                                        \
  {                                                                          \
    __global int *storages[] = {CLBT_FOR_EACH_GROUP(STORAGE_ENTRY)};         \
    const group_constants constants[] = {                                    \
        CLBT_FOR_EACH_GROUP(CONSTANTS_ENTRY)};                               \
    _Pragma("unroll 1") for (uint g = 0; g < CLBT_NUM_GROUPS; ++g) {         \
      __global int *storage = storages[g];                                   \
      export_regions out =                                                   \
          regions_of(storage, layout.groups[g],                              \
                     constants[g].maps_tokens != 0, work, record.dense_pitch); \
      uint rejected =                                                        \
          export_group(&batch, padded, out, scratch, constants[g]);          \
      if (rejected)                                                          \
        atomic_add(out.rejected_tokens, rejected);                           \
    }                                                                        \
  }

/* Request b's state slots in every NONE group (cl/state_slots.cl). */
#define STATE_SLOTS_OF(g)                                                   \
  if (!MAPS_TOKENS(g))                                                      \
    rejected_##g += write_state_slots(                                      \
        &request, b, record.state_slots, (int)record.state_null_block,      \
        rows_##g, row_stride_##g, row_lengths_##g,                          \
        storage_##g + AT(g, STATE_SLOTS), GROUP_CONSTANTS(g));

/* Each work-item takes a run of the padded batch's requests. */
#define STATE_SLOT_GROUPS                                                   \
  {                                                                         \
    uint begin, end;                                                        \
    share(padded, get_global_id(0), get_global_size(0), &begin, &end);      \
    for (uint b = begin; b < end; ++b) {                                    \
      state_request request = state_request_of(                             \
          b, num_reqs, num_tokens, layout.max_num_reqs, query_start_loc,    \
          positions, (work & CLBT_WORK_SEQ_LENS) ? seq_lens : 0,            \
          idx_mapping, has_idx_mapping);                                    \
      CLBT_FOR_EACH_GROUP(STATE_SLOTS_OF)                                   \
    }                                                                       \
  }

/* Group g's section of the token slots. */
#define TOKEN_SECTION(g)                         \
  ulong section_##g = sections * (ulong)entries; \
  if (MAPS_TOKENS(g)) ++sections;

/* Entries [from, to) of one row in group g's section: one loop a group, so
   that each runs down the row's indices with unit stride. */
#define TOKEN_ROW_SLOTS(g)                                                  \
  if (MAPS_TOKENS(g)) {                                                     \
    uint length = t.row >= 0 ? (uint)row_lengths_##g[t.row] : 0;           \
    __global const int *row =                                               \
        rows_##g + (ulong)max(t.row, 0) * row_stride_##g;                   \
    for (uint e = from; e < to; ++e)                                        \
      token_slots[section_##g + e] = token_slot_of(                         \
          token_indices[e], t, row, length, &rejected_##g,                  \
          GROUP_CONSTANTS(g));                                              \
  }

/*
 * Each work-item takes a run of the matrix's entries (row-major, k to a
 * row): it finds the request of the run's first row by binary search and
 * advances it row by row, and writes each of the row's entries in the run
 * to every token-mapping group's section.
 */
#define TOKEN_SLOT_GROUPS                                                   \
  {                                                                         \
    uint k = record.indices_per_row, entries = num_tokens * k;              \
    uint sections = record.token_section;                                   \
    CLBT_FOR_EACH_GROUP(TOKEN_SECTION)                                      \
    uint begin, end;                                                        \
    share(entries, get_global_id(0), get_global_size(0), &begin, &end);     \
    /* A run of no entries (k may be 0) has no rows. */                     \
    bool runs = begin < end;                                                \
    uint first = runs ? begin / k : 1, last = runs ? (end - 1) / k : 0;     \
    int request =                                                           \
        runs && batch_ok ? find_request(qsl, num_reqs, (int)first) : -1;    \
    for (uint i = first; i <= last; ++i) {                                  \
      uint start = i * k, from = max(begin, start);                         \
      uint to = start + min(k, end - start); /* no wrap past 2^32 */        \
      while (batch_ok && request < (int)num_reqs &&                         \
             qsl[request + 1] <= (int)i)                                    \
        ++request;                                                          \
      token_row t = token_row_of(request, num_reqs, batch_ok,               \
                                 layout.max_num_reqs, idx_mapping,          \
                                 has_idx_mapping);                          \
      CLBT_FOR_EACH_GROUP(TOKEN_ROW_SLOTS)                                  \
    }                                                                       \
  }

#define ADD_COUNT(g)                                                     \
  if (rejected_##g)                                                      \
    atomic_add((__global uint *)(storage_##g + AT(g, REJECTED_TOKENS)),  \
               rejected_##g);

/* Maps this work-item's run of tokens in every token-mapping group, and
   pads its run of the tail. */
#define MAP_GROUPS                                                          \
  {                                                                         \
    uint begin, end;                                                        \
    share(num_tokens, get_global_id(0), get_global_size(0), &begin, &end);  \
    if (!batch_ok) {                                                        \
      CLBT_FOR_EACH_GROUP(REJECT_TOKENS)                                    \
      CLBT_FOR_EACH_GROUP(PAD_TOKENS)                                       \
    } else if (begin < end) {                                               \
      /* One search per run; then the request advances with the tokens. */ \
      int request = find_request(qsl, num_reqs, (int)begin);                \
      for (uint token = begin; token < end; ++token) {                      \
        while (request < (int)num_reqs && qsl[request + 1] <= (int)token)   \
          ++request;                                                        \
        bool owned = request >= 0 && request < (int)num_reqs;               \
        int row = owned ? row_of((uint)request, num_reqs, idx_mapping,      \
                                 has_idx_mapping)                           \
                        : -1;                                               \
        bool row_in_table = row >= 0 && row < (int)layout.max_num_reqs;     \
        bool row_outside = row >= (int)layout.max_num_reqs;                 \
        long position = row_in_table ? positions[token] : 0;                \
        CLBT_FOR_EACH_GROUP(MAP_TOKEN)                                      \
      }                                                                     \
    }                                                                       \
    share(layout.max_num_tokens - num_tokens, get_global_id(0),             \
          get_global_size(0), &begin, &end);                                \
    begin += num_tokens;                                                    \
    end += num_tokens;                                                      \
    CLBT_FOR_EACH_GROUP(PAD_TOKENS)                                         \
  }

__kernel void clbt_step(CLBT_STEP_FIRST_ARGUMENT(FIRST_PARAMETER)
                            CLBT_STEP_ARGUMENTS(PARAMETER)
                                CLBT_FOR_EACH_GROUP(GROUP_PARAMETERS)) {
  __local int well_formed;
  __local gather_plan plans[CLBT_MAX_WORK_GROUP_SIZE];
  __local uint4 export_sums[CLBT_MAX_WORK_GROUP_SIZE];
  __local uint4 export_plans[CLBT_MAX_WORK_GROUP_SIZE];
  __local int export_rows[CLBT_MAX_WORK_GROUP_SIZE];
  uint work = record.work, num_reqs = record.num_reqs;
  uint num_tokens = record.num_tokens, padded = record.padded_reqs;
  bool has_idx_mapping = (work & CLBT_WORK_IDX_MAPPING) != 0;
  ulong version = (ulong)record.version_high << 32 | record.version_low;

  if (work & (CLBT_WORK_PACKET_IN_BUFFER | CLBT_WORK_PACKET_INLINE)) {
    bool scatter = (work & CLBT_WORK_SCATTER) != 0;
    ulong first = scatter ? get_global_id(0) : get_local_id(0);
    ulong stride = scatter ? get_global_size(0) : get_local_size(0);
    if (work & CLBT_WORK_PACKET_INLINE) {
      APPLY_PACKET(__private, record.packet, APPLY_SECTION_INLINE)
    } else {
      ulong packet_at =
          (ulong)record.packet_at_high << 32 | record.packet_at_low;
      APPLY_PACKET(__global, packet + packet_at, APPLY_SECTION_IN_BUFFER)
    }
    if (scatter) return;
    barrier(CLK_GLOBAL_MEM_FENCE);
  }

  CLBT_FOR_EACH_GROUP(GROUP_POINTERS)
  /* One check of the batch for both (a launch does one or the other; in a
     token-slots call the matrix's rows play the batch's tokens): PoCL's
     compiler takes twice as long over a kernel that checks it twice, its
     barriers twice. */
  if (work & (CLBT_WORK_MAP | CLBT_WORK_TOKEN_SLOTS)) {
    bool batch_ok = batch_is_well_formed(query_start_loc, num_reqs,
                                         num_tokens, qsl_cache, &well_formed);
#if CLBT_QSL_IN_LOCAL
    QSL_SPACE const int *qsl = qsl_cache;
#else
    QSL_SPACE const int *qsl = query_start_loc;
#endif
    if (work & CLBT_WORK_MAP) MAP_GROUPS
    if (work & CLBT_WORK_TOKEN_SLOTS) TOKEN_SLOT_GROUPS
  }
  if (work & CLBT_WORK_GATHER) {
    /* Chunks of positions spread over every work-group. */
    uint per_group = (padded + get_num_groups(0) - 1) / get_num_groups(0);
    uint chunk = clamp(per_group, 1u, (uint)get_local_size(0));
    CLBT_FOR_EACH_GROUP(GATHER_GROUP)
  }
  if (work & CLBT_WORK_EXPORT) {
    export_batch batch = {num_reqs,         num_tokens,
                          layout.max_num_reqs, query_start_loc,
                          positions,
                          (work & CLBT_WORK_SEQ_LENS) ? seq_lens : 0,
                          idx_mapping,      has_idx_mapping};
    export_scratch scratch = {export_sums, export_plans, export_rows};
    EXPORT_GROUPS
  }
  if (work & CLBT_WORK_STATE_SLOTS) STATE_SLOT_GROUPS
  CLBT_FOR_EACH_GROUP(ADD_COUNT)
}
