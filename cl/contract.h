/*
 * The contract between the host (src/) and the step kernel (cl/): the
 * constants that specialise it for one group, the regions of a group's
 * storage, the two structs it takes by value, the work a launch asks of
 * it, and its arguments in order. The library includes this file, and so
 * does the kernel (cl/common.cl), so both sides expand the same lists and
 * declare the same structs: the host's argument indices, its -D options,
 * its group spec, its region offsets and its records, and the kernel's
 * parameters, constants and fields. It holds only preprocessor lists and struct declarations in the
 * common subset of C11 and OpenCL C 1.2 (cl_uint and cl_ulong, which the
 * kernel defines as uint and ulong; every field placed on its own size,
 * the structs with no padding, so that both sides lay them out alike).
 *
 * To add a per-group constant: one entry in CLBT_GROUP_CONSTANTS, then its
 * meaning where the host fills and checks the spec (src/engine/group.c) and
 * where the kernel and the host reference compute with it
 * (cl/slot_mapping.cl, src/api/reference.c). docs/design.md walks through it.
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
  X(g, cp_interleave_size)  /* tokens dealt to a rank at a time */   \
  X(g, maps_tokens)         /* 1: a slot mapping; 0: a NONE group */ \
  X(g, zero_gathered_tails) /* 1: the gather zeroes entries past a row */

/*
 * The regions of a group's one device allocation, X(NAME): the host places
 * them (src/engine/group.c) and hands their offsets to the kernel in the launch
 * layout; callers get each as a sub-buffer. The export's regions are empty
 * in a NONE group, the state slots in a token-mapping group.
 */
#define CLBT_REGIONS(X)                                                      \
  X(ROWS)            /* int32 [max_num_reqs][width], committed rows */      \
  X(ROW_LENGTHS)     /* int32 [max_num_reqs], committed lengths */          \
  X(SLOTS)           /* int64 [max_num_batched_tokens], the slot mapping */ \
  X(REJECTED_TOKENS) /* uint32, the rejected-token count */                 \
  X(ROW_VERSIONS)    /* uint64 [max_num_reqs], the commit that last wrote   \
                        each committed row */                               \
  X(GATHERED)        /* int32 [max_num_reqs][width], the gather's output */ \
  X(GATHER_RECORDS)  /* [max_num_reqs] gather records */                    \
  X(EXPORT_INDPTR)   /* int32 [max_num_reqs + 1] */                         \
  X(EXPORT_INDICES)  /* int32 [max_num_reqs * width] */                     \
  X(EXPORT_LAST_PAGE_LEN)      /* int32 [max_num_reqs] */                   \
  X(EXPORT_PAST_LENS)          /* int32 [max_num_reqs] */                   \
  X(EXPORT_SUBSEQUENCE_BEGINS) /* int32 [max_num_reqs + 1] */            \
  X(EXPORT_SEQ_LENS)           /* int32 [max_num_reqs] */                   \
  X(EXPORT_LOCAL_SEQ_LENS)     /* int32 [max_num_reqs] */                   \
  X(EXPORT_MAX_SEQ_LEN)        /* int32 [1] */                              \
  X(EXPORT_CONTEXT_INDPTR)     /* int32 [max_num_reqs + 1] */               \
  X(EXPORT_CONTEXT_INDICES)    /* int32 [max_num_reqs * width] */           \
  X(EXPORT_CONTEXT_LAST_PAGE_LEN) /* int32 [max_num_reqs] */                \
  X(EXPORT_PAGE_TABLE)         /* int32 [max_num_reqs * width] */        \
  X(STATE_SLOTS) /* int32 [max_num_reqs][width], a NONE group's state       \
                    slots: [num_reqs_padded][num_state_slots] used */

enum {
#define CLBT_REGION_INDEX(NAME) CLBT_REGION_##NAME,
  CLBT_REGIONS(CLBT_REGION_INDEX)
#undef CLBT_REGION_INDEX
  CLBT_NUM_REGIONS
};

/*
 * A gather record, per position of the gathered table, in 32-bit words:
 * the row it holds (-1: none), how many leading entries may be nonzero,
 * and that row's 64-bit version when it was copied (low word, then high).
 * The gather copies a position again only when its row or the row's
 * version changed; every commit gives the rows it writes a new version
 * from a 64-bit counter (src/engine/engine.c), which no serving loop wraps.
 */
#define CLBT_GATHER_RECORD_WORDS 4
#define CLBT_GATHER_RECORD_ROW 0
#define CLBT_GATHER_RECORD_EXTENT 1
#define CLBT_GATHER_RECORD_VERSION 2

/* The most groups one launch serves. */
#define CLBT_LAUNCH_GROUPS 8

/* The largest work-group the host launches (src/engine/launch.c). */
#define CLBT_MAX_WORK_GROUP_SIZE 256

/* The export's requests a work-group plans at a time in local memory, and
   the work-items that copy one request's pages together (cl/export.cl). */
#define CLBT_EXPORT_CHUNK 1024
#define CLBT_EXPORT_LANES 32

/* The kernel's names for the host's types. */
#ifdef __OPENCL_VERSION__
typedef uint cl_uint;
typedef ulong cl_ulong;
#endif

/*
 * Regions start on boundaries of this many 32-bit words (64 bytes, or the
 * device's base address alignment when that is larger), and the launch
 * layout gives their offsets in these units: 32 bits an offset reach 256
 * GiB, where 64-bit word offsets made each region cost eight bytes a group
 * of PoCL's 1024 bytes of arguments.
 */
#define CLBT_REGION_UNIT_WORDS 16

/*
 * Where one group's regions are, in CLBT_REGION_UNIT_WORDS from the start
 * of its storage, and its row stride.
 */
typedef struct clbt__group_layout {
  cl_uint at[CLBT_NUM_REGIONS];
  cl_uint row_stride; /* kernel blocks per row: the width */
} clbt__group_layout;

/* Where region r of a group starts, in 32-bit words from its storage. */
#define CLBT_REGION_WORDS(group_layout, r) \
  ((cl_ulong)(group_layout).at[r] * CLBT_REGION_UNIT_WORDS)

/*
 * A launch layout, what stays the same from launch to launch: the sizes
 * the launch's groups share, then each group's layout. The host declares it
 * for CLBT_LAUNCH_GROUPS groups and passes the launch's; the kernel
 * declares it for the CLBT_NUM_GROUPS it was built for.
 */
#define CLBT_DECLARE_LAUNCH_LAYOUT(name, num_groups) \
  typedef struct name {                              \
    cl_uint max_num_reqs;                            \
    cl_uint max_num_tokens; /* each slot mapping */  \
    clbt__group_layout groups[num_groups];           \
  } name;

/*
 * What a launch does (clbt__record_head.work): SCATTER, TOKEN_SLOTS, or
 * any of MAP, GATHER, EXPORT and STATE_SLOTS, with the flags. SCATTER
 * spreads the packet over the whole grid and does nothing else; the others
 * apply it first, each work-group all of it (a folded commit).
 * EXPORT_CONTEXT and EXPORT_DENSE add parts to EXPORT.
 */
#define CLBT_WORK_SCATTER 0x01u     /* apply the packet, nothing else */
#define CLBT_WORK_MAP 0x02u         /* the token-mapping groups' slots */
#define CLBT_WORK_GATHER 0x04u      /* every group's gathered rows */
#define CLBT_WORK_EXPORT 0x08u      /* the token-mapping groups' pages */
#define CLBT_WORK_IDX_MAPPING 0x10u /* idx_mapping names each row */
#define CLBT_WORK_SEQ_LENS 0x20u    /* seq_lens gives each KV length */
#define CLBT_WORK_PACKET_IN_BUFFER 0x40u /* the packet, from packet_at */
#define CLBT_WORK_PACKET_INLINE 0x80u    /* the packet, in the record */
#define CLBT_WORK_EXPORT_CONTEXT 0x100u  /* EXPORT: the context CSR too */
#define CLBT_WORK_EXPORT_DENSE 0x200u    /* EXPORT: the dense page table */
#define CLBT_WORK_STATE_SLOTS 0x400u /* the NONE groups' state slots */
#define CLBT_WORK_TOKEN_SLOTS 0x800u /* token_indices to token_slots */

/* The work bits that are parts of the kernel's code; the others are flags
   every entry reads. */
#define CLBT_WORK_PARTS                                            \
  (CLBT_WORK_SCATTER | CLBT_WORK_MAP | CLBT_WORK_GATHER |          \
   CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS | CLBT_WORK_TOKEN_SLOTS)

/*
 * The step kernel's entries, X(NAME, name, parts): one kernel function per
 * set of parts, compiled with only those parts' code, so that a driver
 * that compiles a kernel at its first launch (PoCL: about 0.15 s for the
 * slot mapping against seconds for every part together) compiles only
 * what a table uses. A CPU's program has the CPU's entries, and a launch
 * takes the first, in this order, whose parts hold its work's; a GPU's has
 * its one entry, WHOLE, since its driver compiles every entry of a program
 * when it builds it. The record's work bits say which parts a launch runs.
 */
#define CLBT_STEP_ENTRIES(X) CLBT_CPU_STEP_ENTRIES(X) CLBT_GPU_STEP_ENTRIES(X)
#define CLBT_CPU_STEP_ENTRIES(X)                                          \
  X(SCATTER, scatter, CLBT_WORK_SCATTER)                                  \
  X(MAP, map, CLBT_WORK_MAP)                                              \
  X(GATHER, gather, CLBT_WORK_MAP | CLBT_WORK_GATHER)                     \
  X(EXPORT, export, CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_EXPORT)  \
  X(STATES, states,                                                       \
    CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_STATE_SLOTS)             \
  X(FULL, full,                                                           \
    CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_EXPORT |                 \
        CLBT_WORK_STATE_SLOTS)                                            \
  X(TOKENS, tokens, CLBT_WORK_TOKEN_SLOTS)
#define CLBT_GPU_STEP_ENTRIES(X) X(WHOLE, whole, CLBT_WORK_PARTS)

/*
 * A commit packet, in 32-bit words: per group g, the count of its rows and
 * of its ids, then each group's section in order: one entry per row (the
 * row, its new length, the first column it writes, and where its ids
 * start among the section's ids, ascending), then the ids, each row's run
 * of changed columns in turn. A replaced row of n ids costs n + 4 words.
 * The host checked every row and column.
 */
#define CLBT_PACKET_HEADER_WORDS_PER_GROUP 2
#define CLBT_PACKET_ROW_WORDS 4 /* row, length, first column, first id */
#define CLBT_PACKET_ROW 0
#define CLBT_PACKET_ROW_LENGTH 1
#define CLBT_PACKET_ROW_COLUMN 2
#define CLBT_PACKET_ROW_FIRST_ID 3

/*
 * A launch's record, its first argument, by value: what it does, its batch
 * (the head), and a commit packet small enough to travel with it (inline).
 * The record comes in up to CLBT_MAX_RECORD_CLASSES sizes, each kernel
 * entry in each: a launch takes the smallest that holds its packet, since
 * drivers copy every byte of it at every enqueue. The host passes the
 * classes' packet words as CLBT_RECORD_WORDS_<c> (what the device's
 * argument space leaves, at most CLBT_MAX_RECORD_WORDS).
 */
#define CLBT_MAX_RECORD_CLASSES 3
#define CLBT_MAX_RECORD_WORDS 8192
#define CLBT_RECORD_HEAD(X)                                           \
  X(cl_uint, version_low)  /* the version the packet's rows get */    \
  X(cl_uint, version_high)                                            \
  X(cl_uint, packet_at_low) /* PACKET_IN_BUFFER: the launch's part */ \
  X(cl_uint, packet_at_high)                                          \
  X(cl_uint, work)          /* CLBT_WORK_* */                         \
  X(cl_uint, group_mask)    /* bit g: group g takes part */           \
  X(cl_uint, packet_words)  /* PACKET_INLINE: the words the packet holds */ \
  X(cl_uint, num_reqs)                                                \
  X(cl_uint, num_tokens)  /* TOKEN_SLOTS: the index matrix's rows */ \
  X(cl_uint, padded_reqs) /* entries gathered and exported */         \
  X(cl_uint, dense_pitch) /* EXPORT_DENSE: a row's entries; 0: width */ \
  X(cl_uint, state_slots) /* STATE_SLOTS: ids per request */          \
  X(cl_uint, state_null_block) /* STATE_SLOTS: the id of none */      \
  X(cl_uint, indices_per_row)  /* TOKEN_SLOTS: the matrix's columns */ \
  X(cl_uint, token_section) /* TOKEN_SLOTS: the output section of the \
                               launch's first token-mapping group */  \
  X(cl_uint, map_groups)    /* the work-groups of each part, in this */ \
  X(cl_uint, gather_groups) /* order from work-group 0 (the map's     */ \
  X(cl_uint, export_groups) /* serve the token slots too); 0 in each:  */ \
  X(cl_uint, state_groups)  /* every part on every work-group        */

#define CLBT_RECORD_FIELD(type, name) type name;
typedef struct clbt__record_head {
  CLBT_RECORD_HEAD(CLBT_RECORD_FIELD)
} clbt__record_head;
#undef CLBT_RECORD_FIELD

/* A launch record whose packet holds `words` words. */
#define CLBT_DECLARE_LAUNCH_RECORD(name, words) \
  typedef struct name {                         \
    clbt__record_head head;                     \
    cl_uint packet[words];                      \
  } name;

/*
 * The step kernel's arguments after its record, X(NAME, type, name):
 * the layout, the batch's buffers, the packet's buffer when it was
 * uploaded, and the storage of every group of the engine, one allocation
 * (drivers copy every argument at every enqueue, and charge every buffer
 * that is set). A token-slots launch reads no positions and no seq_lens:
 * its index matrix (int32) and its output take their places. A list of
 * plain entries, so that a parameter list is plain text with no variadic
 * macro to drop a leading comma: NVIDIA's OpenCL compiler (driver 580)
 * lost the last parameter of a list built that way, where PoCL's did not.
 * Buffers a launch does not read are NULL.
 */
#define CLBT_STEP_ARGUMENTS(X)                                             \
  X(LAYOUT, clbt__kernel_layout, layout)                                   \
  X(QUERY_START_LOC, __global const int *, query_start_loc)                \
  X(POSITIONS, __global const int *, positions) /* int64, or the index   \
                                                   matrix of token slots */ \
  X(IDX_MAPPING, __global const int *, idx_mapping)                        \
  X(SEQ_LENS, __global int *, seq_lens) /* or token slots' output */       \
  X(PACKET, __global const uint *, packet)                                 \
  X(STORAGE, __global int *, storage)

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
