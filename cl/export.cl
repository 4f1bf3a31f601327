/*
 * The attention export: one group's page table for a batch, in kernel
 * blocks (pages of kernel_block_size tokens), in FlashInfer's CSR layout
 * (indptr, indices, last_page_len) and OpenVINO PagedAttention's extra
 * arrays (past_lens, subsequence_begins; its block_indices and
 * block_indices_begins are the CSR indices and indptr). docs/semantics.md
 * has the rules; src/export.c launches it.
 *
 * Batch request r reads row idx_mapping[r] (row r without idx_mapping; a
 * negative entry is padding). Its length is the last scheduled position +
 * 1, or seq_lens[r] when the caller gives them. With context parallelism its pages are the
 * rank's: the rank's tokens fill its kernel blocks densely in position
 * order (cl/slot_mapping.cl's slot_of), so the local length alone says how
 * many pages it reads and how full the last one is.
 *
 * Every work-group scans all the requests' page counts in local memory
 * (each work-item takes a contiguous run of requests): cheap, and it spares
 * a second launch. Work-group 0 writes the per-request arrays; each
 * work-group then copies the page ids of its own requests (r = group id,
 * + number of groups, ...), all its work-items on one request at a time,
 * so that neighbouring work-items copy neighbouring ids.
 */
#define FIRST_PARAMETER(NAME, type, name) type name
#define PARAMETER(NAME, type, name) , type name
#define CONSTANT_PARAMETER(g, name) , uint name

/* The largest work-group the host launches (src/queue.c, clbt__geometry). */
#define MAX_ITEMS 256

/* The group's constants (arguments) a request's export depends on. */
typedef struct group_constants {
  ulong kv_block_size, blocks_per_kv_block, cp_world_size, cp_rank,
      cp_interleave_size;
} group_constants;

/* How many of positions [0, n) this rank owns, by slot_of's rule. */
static ulong local_count(ulong n, group_constants g) {
  ulong virtual_block_size = g.kv_block_size * g.cp_world_size;
  ulong round = g.cp_world_size * g.cp_interleave_size;
  ulong rest = n % virtual_block_size;
  ulong tail = rest % round;
  ulong before = g.cp_rank * g.cp_interleave_size;
  ulong in_tail = tail > before ? min(tail - before, g.cp_interleave_size) : 0;
  return n / virtual_block_size * g.kv_block_size +
         rest / round * g.cp_interleave_size + in_tail;
}

/* One request's entries; pages 0 means an empty list (last_page_len 1). */
typedef struct request_export {
  uint pages;
  int last_page_len;
  int past_len;
  bool rejected;
} request_export;

/*
 * Batch request r's row: idx_mapping[r] (row r without one); -1 for a
 * request past num_reqs, which is padding like a negative entry.
 */
static int row_of(uint r, uint num_reqs, __global const int *idx_mapping,
                  uint has_idx_mapping) {
  if (r >= num_reqs) return -1;
  return has_idx_mapping ? idx_mapping[r] : (int)r;
}

/*
 * Request r's length and pages from its row. A padding request (a negative
 * row) or one with no length has no pages; one whose row is not below
 * max_num_reqs, whose query_start_loc entries are out of order or range,
 * whose length is negative, above INT32_MAX or below its scheduled tokens,
 * or whose pages run past its committed row is rejected: no pages,
 * counted.
 */
static request_export export_of(uint r, int row, uint max_num_reqs,
                                uint num_tokens,
                                __global const int *query_start_loc,
                                __global const long *positions,
                                __global const int *seq_lens,
                                uint has_seq_lens,
                                __global const int *row_lengths,
                                ulong kernel_block_size, group_constants g) {
  request_export e = {0, 1, 0, false};
  if (row < 0) return e;
  int begin = query_start_loc[r], end = query_start_loc[r + 1];
  e.rejected = (uint)row >= max_num_reqs || begin < 0 || end < begin ||
               (uint)end > num_tokens;
  if (e.rejected) return e;
  long length = has_seq_lens ? (long)seq_lens[r]
                : end > begin ? positions[end - 1] + 1
                              : 0;
  e.rejected = length < (long)(end - begin) || length > INT_MAX;
  if (e.rejected) return e;
  ulong local_length = local_count((ulong)length, g);
  ulong pages = (local_length + kernel_block_size - 1) / kernel_block_size;
  e.rejected = pages > (uint)row_lengths[row];
  if (e.rejected || pages == 0) return e;
  e.pages = (uint)pages;
  e.last_page_len = (int)(local_length - (pages - 1) * kernel_block_size);
  e.past_len = (int)local_count((ulong)(length - (end - begin)), g);
  return e;
}

/* This work-item's run [*begin, *end) of count requests. */
static void share(uint count, uint *begin, uint *end) {
  uint per_item = (count + get_local_size(0) - 1) / get_local_size(0);
  *begin = min((uint)get_local_id(0) * per_item, count);
  *end = min(*begin + per_item, count);
}

/* The work-group's exclusive prefix sum of each work-item's value. */
static uint exclusive_scan(uint value, __local uint *sums) {
  uint id = get_local_id(0);
  sums[id] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = 1; step < get_local_size(0); step *= 2) {
    uint add = id >= step ? sums[id - step] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    sums[id] += add;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return sums[id] - value;
}

#define ROW_OF(r) row_of(r, num_reqs, idx_mapping, has_idx_mapping)
#define EXPORT_OF(r)                                                        \
  export_of(r, ROW_OF(r), max_num_reqs, num_tokens, query_start_loc,        \
            positions, seq_lens, has_seq_lens, row_lengths,                 \
            kernel_block_size, g)

/* Arguments: CLBT_EXPORT_ARGUMENTS, then the group's constants. */
__kernel void clbt_export(CLBT_EXPORT_FIRST_ARGUMENT(FIRST_PARAMETER)
                              CLBT_EXPORT_ARGUMENTS(PARAMETER)
                                  CLBT_GROUP_CONSTANTS(CONSTANT_PARAMETER, 0)) {
  __local uint sums[MAX_ITEMS];
  __local uint own_offset[CLBT_EXPORT_MAX_OWN_REQUESTS];
  __local uint own_pages[CLBT_EXPORT_MAX_OWN_REQUESTS];
  group_constants g = {kv_block_size, blocks_per_kv_block, cp_world_size,
                       cp_rank, cp_interleave_size};
  ulong kernel_block_size = g.kv_block_size / g.blocks_per_kv_block;
  __global const int *rows = storage + rows_at;
  __global const int *row_lengths = storage + row_lengths_at;
  __global uint *rejected_tokens = (__global uint *)(storage + rejected_tokens_at);
  __global int *indptr = storage + indptr_at;
  __global int *indices = storage + indices_at;
  __global int *last_page_len = storage + last_page_len_at;
  __global int *past_lens = storage + past_lens_at;
  __global int *subsequence_begins = storage + subsequence_begins_at;

  uint begin, end, pages = 0;
  share(num_reqs_padded, &begin, &end);
  for (uint r = begin; r < end; ++r) pages += EXPORT_OF(r).pages;
  uint offset = exclusive_scan(pages, sums);

  uint groups = get_num_groups(0), me = get_group_id(0);
  bool writer = me == 0;
  if (writer && get_local_id(0) == 0) {
    indptr[0] = 0;
    subsequence_begins[0] = query_start_loc[0];
  }
  uint rejected = 0;
  for (uint r = begin; r < end; ++r) {
    request_export e = EXPORT_OF(r);
    if (r % groups == me) {
      own_offset[r / groups] = offset;
      own_pages[r / groups] = e.pages;
    }
    offset += e.pages;
    if (!writer) continue;
    indptr[r + 1] = (int)offset;
    last_page_len[r] = e.last_page_len;
    past_lens[r] = e.past_len;
    subsequence_begins[r + 1] = query_start_loc[min(r + 1, num_reqs)];
    rejected += e.rejected;
  }
  if (rejected) atomic_add(rejected_tokens, rejected);
  barrier(CLK_LOCAL_MEM_FENCE);
  uint owned = me < num_reqs_padded ? (num_reqs_padded - 1 - me) / groups + 1
                                    : 0;
  for (uint k = 0; k < owned; ++k) {
    if (!own_pages[k]) continue;
    ulong row_at = (ulong)ROW_OF(me + k * groups) * row_stride;
    __global const int *row = rows + row_at;
    for (uint p = get_local_id(0); p < own_pages[k]; p += get_local_size(0))
      indices[own_offset[k] + p] = row[p];
  }
}
