/**
 * @file
 * Where a token's K and V live: clbt's page table on the device, for
 * OpenCL C kernels that read a paged KV cache through clbt's rows (in the
 * spirit of FlashInfer's paged_kv_t).
 *
 * A kernel includes this header (build it with -I<prefix>/include) and
 * takes a clbt_kv_pages by value, which the host fills with
 * clbt_kv_pages_describe (clbt.h, which includes this file for the
 * struct). The functions below are OpenCL C only; they are clbt's own
 * definition of the rules, the one its KV-cache write and attention
 * kernels use:
 *
 *   sequence s reads row clbt_kv_pages_row(pages, idx_mapping, s): its
 *     idx_mapping entry (vLLM's persistent rows, Model Runner V2), or s
 *     itself with no idx_mapping (v1's batch-ordered rows, or a caller's
 *     dense [num_seqs][max_blocks] block table);
 *   of that row, clbt_kv_pages_row_blocks(...) entries may be read: its
 *     committed length (clbt_table_device_row_lengths) bounded by the
 *     row's capacity, or the capacity alone for a dense table;
 *   with context parallelism (CP) a rank holds only its own tokens: its
 *     local tokens 0, 1, ... fill its blocks densely, local token j is
 *     global position clbt_kv_pages_position(pages, j), and
 *     clbt_kv_pages_local_tokens(pages, n) of them lie below position n
 *     (without CP both are the identity);
 *   local token j lies in block clbt_kv_pages_block(pages, row, ...) (the
 *     row's entry j / block_size, or -1 when that entry is past the row's
 *     blocks or names no block of the cache), at offset j % block_size;
 *   element e of head h of its key is at key_offset + block x block_stride
 *     + offset x page_stride + h x head_stride + e of the key cache
 *     (clbt_kv_pages_key), its value likewise from value_offset;
 *   the slot the step's slot mapping gives a position is
 *     clbt_kv_pages_slot(...): block x block_size + offset of its local
 *     token, -1 for another rank's position or one outside the row.
 *
 * Every count and position is 32 bits (contexts below 2^32 tokens); block
 * ids are int32 as in clbt's rows. Nothing here reads outside the row it
 * is given, and no function trusts a length or id it reads.
 */
#ifndef CLBT_KV_PAGES_H
#define CLBT_KV_PAGES_H

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
#define CLBT_KV_PAGES_OPENCL 1
#define CLBT_KV_PAGES_U32 uint
#define CLBT_KV_PAGES_U64 ulong
#else
#include <stdint.h>
#define CLBT_KV_PAGES_U32 uint32_t
#define CLBT_KV_PAGES_U64 uint64_t
#endif

/** clbt_kv_pages.flags: each row has a committed length in row_lengths. */
#define CLBT_KV_PAGES_ROW_LENGTHS 1u

/**
 * Where a paged cache's elements are and where the block ids of its
 * sequences are, in one struct a kernel takes by value. The 64-bit fields
 * come first and the struct has no padding, so that C and OpenCL C lay it
 * out alike. clbt fills it (clbt_kv_pages_describe); it never changes
 * within a major version.
 */
typedef struct clbt_kv_pages {
  CLBT_KV_PAGES_U64 key_offset;   /**< K's first element in its buffer */
  CLBT_KV_PAGES_U64 value_offset; /**< V's first element in its buffer */
  CLBT_KV_PAGES_U64 block_stride; /**< elements from a block to the next */
  CLBT_KV_PAGES_U64 page_stride;  /**< from a slot to the next in a block */
  CLBT_KV_PAGES_U64 head_stride;  /**< from a head to the next in a slot */
  CLBT_KV_PAGES_U64 rows_offset;  /**< row 0's first entry in the rows'
                                     int32 buffer */
  CLBT_KV_PAGES_U64 row_lengths_offset; /**< row 0's length in the lengths'
                                           int32 buffer (ROW_LENGTHS) */
  CLBT_KV_PAGES_U32 row_stride;   /**< entries from a row to the next */
  CLBT_KV_PAGES_U32 row_capacity; /**< entries of a row that may be read */
  CLBT_KV_PAGES_U32 num_rows;     /**< rows: an index at or past is none */
  CLBT_KV_PAGES_U32 flags;        /**< CLBT_KV_PAGES_ROW_LENGTHS or 0 */
  CLBT_KV_PAGES_U32 block_size;   /**< tokens a block of the cache holds,
                                     the rows' unit (a table's kernel
                                     block) */
  CLBT_KV_PAGES_U32 num_blocks;   /**< the cache's blocks: an id not below
                                     is none */
  CLBT_KV_PAGES_U32 kv_block_size; /**< tokens a KV-manager block holds, a
                                      multiple of block_size: CP deals
                                      positions in virtual blocks of
                                      kv_block_size x cp_world_size */
  CLBT_KV_PAGES_U32 cp_world_size; /**< context-parallel ranks; 1: none */
  CLBT_KV_PAGES_U32 cp_rank;       /**< this rank, below cp_world_size */
  CLBT_KV_PAGES_U32 cp_interleave_size; /**< tokens dealt to a rank at a
                                           time; divides kv_block_size */
} clbt_kv_pages;

#ifdef CLBT_KV_PAGES_OPENCL

/* The row sequence seq reads: idx_mapping[seq] (NULL: seq itself); -1 for
   none (a negative entry, a padding request, or one not below num_rows). */
static inline int clbt_kv_pages_row(clbt_kv_pages pages,
                                    __global const int *idx_mapping,
                                    uint seq) {
  int row = idx_mapping ? idx_mapping[seq] : (int)seq;
  return row >= 0 && (uint)row < pages.num_rows ? row : -1;
}

/* The entries of row `row` (from clbt_kv_pages_row, -1 for none) that may
   be read: its committed length read as unsigned, never past its
   capacity (as the step bounds it), or the capacity of a table with no
   lengths; 0 for no row. */
static inline uint clbt_kv_pages_row_blocks(clbt_kv_pages pages,
                                            __global const int *row_lengths,
                                            int row) {
  if (row < 0) return 0;
  if (!(pages.flags & CLBT_KV_PAGES_ROW_LENGTHS)) return pages.row_capacity;
  uint length = (uint)row_lengths[pages.row_lengths_offset + (uint)row];
  return min(length, pages.row_capacity);
}

/* The global position of this rank's local token j. */
static inline uint clbt_kv_pages_position(clbt_kv_pages pages, uint j) {
  if (pages.cp_world_size == 1) return j;
  uint interleave = pages.cp_interleave_size;
  uint virtual_index = j / pages.kv_block_size;
  uint local_offset = j % pages.kv_block_size;
  uint virtual_offset =
      local_offset / interleave * (pages.cp_world_size * interleave) +
      pages.cp_rank * interleave + local_offset % interleave;
  return virtual_index * pages.kv_block_size * pages.cp_world_size +
         virtual_offset;
}

/* How many of this rank's tokens lie below global position n. */
static inline uint clbt_kv_pages_local_tokens(clbt_kv_pages pages, uint n) {
  if (pages.cp_world_size == 1) return n;
  uint interleave = pages.cp_interleave_size;
  uint round = pages.cp_world_size * interleave;
  uint virtual_size = pages.kv_block_size * pages.cp_world_size;
  uint rest = n % virtual_size;
  uint mine = rest % round;
  mine = mine > pages.cp_rank * interleave
             ? min(mine - pages.cp_rank * interleave, interleave)
             : 0u;
  return n / virtual_size * pages.kv_block_size + rest / round * interleave +
         mine;
}

/* The local token of global position p on this rank; -1 when another rank
   holds it (a negative position is no one's). */
static inline long clbt_kv_pages_local_token(clbt_kv_pages pages, long p) {
  if (p < 0) return -1;
  ulong virtual_size = (ulong)pages.kv_block_size * pages.cp_world_size;
  ulong virtual_index = (ulong)p / virtual_size;
  ulong virtual_offset = (ulong)p % virtual_size;
  ulong interleave = pages.cp_interleave_size;
  if (virtual_offset / interleave % pages.cp_world_size != pages.cp_rank)
    return -1;
  ulong local_offset = virtual_offset / (pages.cp_world_size * interleave) *
                           interleave +
                       virtual_offset % interleave;
  return (long)(virtual_index * pages.kv_block_size + local_offset);
}

/* The block holding local token j of a row (rows: the rows' buffer; row
   and row_blocks from the two functions above): the row's entry
   j / block_size, or -1 when that entry is not below row_blocks or names
   no block of the cache (negative, or not below num_blocks). */
static inline int clbt_kv_pages_block(clbt_kv_pages pages,
                                      __global const int *rows, int row,
                                      uint row_blocks, ulong j) {
  ulong entry = j / pages.block_size;
  if (row < 0 || entry >= row_blocks) return -1;
  int block = rows[pages.rows_offset + (ulong)(uint)row * pages.row_stride +
                   entry];
  return block >= 0 && (uint)block < pages.num_blocks ? block : -1;
}

/* The slot of global position p in a row, as the step's slot mapping
   computes it: block x block_size + offset of its local token; -1 for
   another rank's position, a negative one, or one whose entry is not
   below row_blocks. (The step does not check the id against the cache,
   which has no size there; the KV-cache write rejects a slot past it.) */
static inline long clbt_kv_pages_slot(clbt_kv_pages pages,
                                      __global const int *rows, int row,
                                      uint row_blocks, long p) {
  long j = clbt_kv_pages_local_token(pages, p);
  ulong entry = (ulong)j / pages.block_size;
  if (j < 0 || row < 0 || entry >= row_blocks) return -1;
  int block = rows[pages.rows_offset + (ulong)(uint)row * pages.row_stride +
                   entry];
  return (long)block * pages.block_size + (long)((ulong)j % pages.block_size);
}

/* Where element 0 of head `head` of the key of the token at `offset` in
   `block` is, in elements of the key cache. */
static inline ulong clbt_kv_pages_key(clbt_kv_pages pages, ulong block,
                                      ulong offset, uint head) {
  return pages.key_offset + block * pages.block_stride +
         offset * pages.page_stride + (ulong)head * pages.head_stride;
}

/* The same for the value cache. */
static inline ulong clbt_kv_pages_value(clbt_kv_pages pages, ulong block,
                                        ulong offset, uint head) {
  return pages.value_offset + block * pages.block_stride +
         offset * pages.page_stride + (ulong)head * pages.head_stride;
}

#endif /* CLBT_KV_PAGES_OPENCL */

#endif /* CLBT_KV_PAGES_H */
