/*
 * The contract between the host (src/) and the kernels (cl/): the constants
 * that specialise the slot-mapping kernel for one group, and every kernel's
 * arguments in order. The library includes this file, and the build puts
 * it in front of each kernel's source (cmake/embed_source.cmake), so both
 * sides expand the same lists: the host's argument indices, its -D options
 * and its group spec struct, and the kernels' parameter lists and their
 * constants. It holds nothing but preprocessor lists, valid in C11 and in
 * OpenCL C 1.2; the types in the argument lists are the kernels' and never
 * expanded on the host.
 *
 * To add a per-group constant: one entry in CLBT_GROUP_CONSTANTS, then its
 * meaning where the host fills and checks the spec (src/table.c) and where
 * the kernel and the host reference compute with it (cl/slot_mapping.cl,
 * src/reference.c). docs/design.md walks through it.
 */
#ifndef CLBT_CONTRACT_H
#define CLBT_CONTRACT_H

/*
 * A group's kernel constants, X(g, name): the host passes them as
 * -DCLBT_GROUP_<g>=<value>,<value>,... in this order, which is also the
 * order of the kernel's fields, so that its divisions by them fold. All
 * are unsigned 32-bit values on the host.
 */
#define CLBT_GROUP_CONSTANTS(X, g)                                   \
  X(g, kv_block_size)       /* tokens per KV-manager block */        \
  X(g, blocks_per_kv_block) /* kernel blocks per KV-manager block */ \
  X(g, cp_world_size)       /* context-parallel ranks, 1: none */    \
  X(g, cp_rank)             /* this rank, below cp_world_size */     \
  X(g, cp_interleave_size)  /* tokens dealt to a rank at a time */ \
  X(g, maps_tokens)         /* 1: a slot mapping; 0: a NONE group */ \
  X(g, zero_gathered_tails) /* 1: the gather zeroes entries past a row */

/*
 * Each kernel's arguments come as its first one, then the rest, so that a
 * parameter list is plain text with no variadic macro to drop a leading
 * comma: NVIDIA's OpenCL compiler (driver 580) lost the last parameter of
 * a list built that way, where PoCL's did not.
 */

/*
 * The arguments of the launch kernels before the groups', X(NAME, type,
 * name): clbt_slot_mapping, which computes a step (the slot mappings and
 * the gather), and clbt_commit_scatter, which takes the same arguments and
 * reads only the packet and the groups' buffers.
 */
#define CLBT_SLOT_MAPPING_FIRST_ARGUMENT(X) X(NUM_REQS, uint, num_reqs)
#define CLBT_SLOT_MAPPING_ARGUMENTS(X)              \
  X(NUM_TOKENS, uint, num_tokens)                   \
  X(MAX_NUM_TOKENS, uint, max_num_tokens)           \
  X(QUERY_START_LOC, __global const int *, query_start_loc) \
  X(POSITIONS, __global const long *, positions)    \
  X(QSL_CACHE, __local int *, qsl_cache)            \
  X(IDX_MAPPING, __global const int *, idx_mapping) \
  X(HAS_IDX_MAPPING, uint, has_idx_mapping)         \
  X(MAX_NUM_REQS, uint, max_num_reqs)               \
  X(GATHERED_REQS, uint, gathered_reqs)             \
  X(PACKET, __global const uint *, packet)          \
  X(PACKET_AT, ulong, packet_at)                    \
  X(HAS_PACKET, uint, has_packet)                   \
  X(VERSION, uint, version)

/*
 * The step kernel's last argument, after the groups': a commit packet by
 * value. The scatter kernel has none, so that its launches do not copy it.
 */
#define CLBT_STEP_LAST_ARGUMENT(X) \
  X(INLINE_PACKET, clbt_inline_packet, inline_packet)

/*
 * Where a launch's commit packet is (HAS_PACKET): none, in the packet
 * buffer from packet_at on, or in the launch's arguments (INLINE_PACKET),
 * which spares the upload. A packet goes inline when it fits
 * CLBT_INLINE_PACKET_WORDS and the device's CL_DEVICE_MAX_PARAMETER_SIZE
 * leaves room for it beside the other arguments.
 */
#define CLBT_PACKET_NONE 0
#define CLBT_PACKET_IN_BUFFER 1
#define CLBT_PACKET_INLINE 2
#define CLBT_INLINE_PACKET_WORDS 512

/*
 * A commit packet of a launch's groups, in 32-bit words: per group g, the
 * count of its length pairs and of its cell triples (2 words each), then
 * each group's section in order: its (row, length) pairs, then its (row,
 * column, block id) triples. The host checked every row and column.
 */
#define CLBT_PACKET_HEADER_WORDS_PER_GROUP 2

/*
 * Then, per group g, X(g, NAME, type, name): the group's one buffer and the
 * offsets of its regions in it, in 32-bit words (src/clbt_internal.h,
 * clbt__region).
 */
#define CLBT_SLOT_MAPPING_GROUP_ARGUMENTS(X, g) \
  X(g, STORAGE, __global int *, storage)        \
  X(g, ROWS_AT, ulong, rows_at)                 \
  X(g, ROW_STRIDE, uint, row_stride)            \
  X(g, ROW_LENGTHS_AT, ulong, row_lengths_at)   \
  X(g, SLOTS_AT, ulong, slots_at)               \
  X(g, REJECTED_TOKENS_AT, ulong, rejected_tokens_at) \
  X(g, ROW_VERSIONS_AT, ulong, row_versions_at) \
  X(g, GATHERED_AT, ulong, gathered_at)         \
  X(g, GATHER_RECORDS_AT, ulong, gather_records_at)

/*
 * A gather record, per position of the gathered table: the row it holds
 * (-1: none), that row's version when it was copied, and how many leading
 * entries may be nonzero. The gather copies a position again only when
 * its row or the row's version changed; every commit gives the rows it
 * writes a new version (src/commit.c).
 */
#define CLBT_GATHER_RECORD_WORDS 3
#define CLBT_GATHER_RECORD_ROW 0
#define CLBT_GATHER_RECORD_VERSION 1
#define CLBT_GATHER_RECORD_EXTENT 2

/*
 * clbt_export's arguments, X(NAME, type, name); the group's constants
 * follow them as uint arguments, in CLBT_GROUP_CONSTANTS's order (the
 * export works per request, so they need not fold).
 */
/*
 * The export's work-groups each copy the page ids of at most this many
 * requests (the host launches enough of them): r, r + groups, ...
 */
#define CLBT_EXPORT_MAX_OWN_REQUESTS 1024

#define CLBT_EXPORT_FIRST_ARGUMENT(X) X(NUM_REQS, uint, num_reqs)
#define CLBT_EXPORT_ARGUMENTS(X)                         \
  X(NUM_REQS_PADDED, uint, num_reqs_padded)              \
  X(NUM_TOKENS, uint, num_tokens)                        \
  X(QUERY_START_LOC, __global const int *, query_start_loc) \
  X(POSITIONS, __global const long *, positions)         \
  X(SEQ_LENS, __global const int *, seq_lens)            \
  X(HAS_SEQ_LENS, uint, has_seq_lens)                    \
  X(IDX_MAPPING, __global const int *, idx_mapping)      \
  X(HAS_IDX_MAPPING, uint, has_idx_mapping)              \
  X(MAX_NUM_REQS, uint, max_num_reqs)                    \
  X(STORAGE, __global int *, storage)                    \
  X(ROWS_AT, ulong, rows_at)                             \
  X(ROW_STRIDE, uint, row_stride)                        \
  X(ROW_LENGTHS_AT, ulong, row_lengths_at)               \
  X(REJECTED_TOKENS_AT, ulong, rejected_tokens_at)       \
  X(INDPTR_AT, ulong, indptr_at)                         \
  X(INDICES_AT, ulong, indices_at)                       \
  X(LAST_PAGE_LEN_AT, ulong, last_page_len_at)           \
  X(PAST_LENS_AT, ulong, past_lens_at)                   \
  X(SUBSEQUENCE_BEGINS_AT, ulong, subsequence_begins_at)

/* The largest work-group the host launches (src/queue.c, clbt__geometry). */
#define CLBT_MAX_WORK_GROUP_SIZE 256

/*
 * In a kernel built for CLBT_NUM_GROUPS groups (1..8): X(g) for each g,
 * to expand a per-group list or statement.
 */
#ifdef CLBT_NUM_GROUPS
#if CLBT_NUM_GROUPS == 1
#define CLBT_FOR_EACH_GROUP(X) X(0)
#elif CLBT_NUM_GROUPS == 2
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1)
#elif CLBT_NUM_GROUPS == 3
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2)
#elif CLBT_NUM_GROUPS == 4
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2) X(3)
#elif CLBT_NUM_GROUPS == 5
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2) X(3) X(4)
#elif CLBT_NUM_GROUPS == 6
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2) X(3) X(4) X(5)
#elif CLBT_NUM_GROUPS == 7
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6)
#elif CLBT_NUM_GROUPS == 8
#define CLBT_FOR_EACH_GROUP(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#else
#error "CLBT_NUM_GROUPS must be 1..8"
#endif
#endif

#endif /* CLBT_CONTRACT_H */
