/*
 * The step kernel's export: one group's page table for a batch, in kernel
 * blocks (pages of kernel_block_size tokens), in FlashInfer's CSR layout
 * (indptr, indices, last_page_len) and OpenVINO PagedAttention's extra
 * arrays (past_lens, subsequence_begins; its block_indices and
 * block_indices_begins are the CSR indices and indptr). docs/semantics.md
 * has the rules; cl/step.cl runs it.
 *
 * Batch request r reads row idx_mapping[r] (row r without idx_mapping; a
 * negative entry is padding). Its length is the last scheduled position +
 * 1, or seq_lens[r] when the caller gives them. With context parallelism
 * its pages are the rank's: the rank's tokens fill its kernel blocks
 * densely in position order (slot_of), so the local length alone says how
 * many pages it reads and how full the last one is.
 *
 * Every work-group walks all the requests' page counts, a work-group's
 * worth at a time, summing them in local memory: cheap, and it spares a
 * second launch. Work-group 0 writes the per-request arrays; each
 * work-group copies the page ids of its own requests (r = group id, +
 * number of groups, ...), all its work-items on one request at a time, so
 * that neighbouring work-items copy neighbouring ids.
 */

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
  int row; /* the row its pages come from, when it has pages */
  uint pages;
  int last_page_len;
  int past_len;
  bool rejected;
} request_export;

/* The batch an export reads. */
typedef struct export_batch {
  uint num_reqs, num_tokens, max_num_reqs;
  __global const int *query_start_loc;
  __global const long *positions;
  __global const int *seq_lens; /* NULL: from positions */
  __global const int *idx_mapping;
  bool has_idx_mapping;
} export_batch;

/* query_start_loc[i]; a batch of no requests and no tokens (a dummy run)
   has no array, and begins at 0. */
static int query_start(const export_batch *batch, uint i) {
  bool dummy = batch->num_reqs == 0 && batch->num_tokens == 0;
  return dummy ? 0 : batch->query_start_loc[i];
}

/*
 * Request r's length and pages from its row. A padding request (a negative
 * row) or one with no length has no pages; one whose row is not below
 * max_num_reqs, whose query_start_loc entries are out of order or range,
 * whose length is negative, above INT32_MAX or below its scheduled tokens,
 * or whose pages run past its committed row is rejected: no pages,
 * counted.
 */
static request_export export_of(uint r, const export_batch *batch,
                                __global const int *row_lengths,
                                group_constants g) {
  request_export e = {-1, 0, 1, 0, false};
  int row = row_of(r, batch->num_reqs, batch->idx_mapping,
                   batch->has_idx_mapping);
  if (row < 0) return e;
  int begin = batch->query_start_loc[r], end = batch->query_start_loc[r + 1];
  e.rejected = (uint)row >= batch->max_num_reqs || begin < 0 || end < begin ||
               (uint)end > batch->num_tokens;
  if (e.rejected) return e;
  long length = batch->seq_lens ? (long)batch->seq_lens[r]
                : end > begin   ? batch->positions[end - 1] + 1
                                : 0;
  e.rejected = length < (long)(end - begin) || length > INT_MAX;
  if (e.rejected) return e;
  ulong kernel_block_size = g.kv_block_size / g.blocks_per_kv_block;
  ulong local_length = local_count((ulong)length, g);
  ulong pages = (local_length + kernel_block_size - 1) / kernel_block_size;
  e.rejected = pages > (uint)row_lengths[row];
  if (e.rejected || pages == 0) return e;
  e.row = row;
  e.pages = (uint)pages;
  e.last_page_len = (int)(local_length - (pages - 1) * kernel_block_size);
  e.past_len = (int)local_count((ulong)(length - (end - begin)), g);
  return e;
}

/* The work-group's exclusive prefix sum of each work-item's value; *total
   receives the sum of them all. */
static uint exclusive_scan(uint value, __local uint *sums, uint *total) {
  uint id = get_local_id(0), size = get_local_size(0);
  sums[id] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = 1; step < size; step *= 2) {
    uint add = id >= step ? sums[id - step] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    sums[id] += add;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *total = sums[size - 1];
  uint before = sums[id] - value;
  barrier(CLK_LOCAL_MEM_FENCE);
  return before;
}

/* Where a group's export goes, in its storage. */
typedef struct export_regions {
  __global const int *rows, *row_lengths;
  __global int *indptr, *indices, *last_page_len, *past_lens,
      *subsequence_begins;
  __global uint *rejected_tokens;
  uint row_stride;
  bool exported; /* false: a NONE group, with no export regions */
} export_regions;

/* A group's export regions, from its storage and layout. */
static export_regions regions_of(__global int *storage, clbt_group_layout at,
                                 bool exported) {
#define REGION(NAME) (storage + CLBT_REGION_WORDS(at, CLBT_REGION_##NAME))
  export_regions out = {REGION(ROWS),
                        REGION(ROW_LENGTHS),
                        REGION(EXPORT_INDPTR),
                        REGION(EXPORT_INDICES),
                        REGION(EXPORT_LAST_PAGE_LEN),
                        REGION(EXPORT_PAST_LENS),
                        REGION(EXPORT_SUBSEQUENCE_BEGINS),
                        (__global uint *)REGION(REJECTED_TOKENS),
                        at.row_stride,
                        exported};
#undef REGION
  return out;
}

/* What one work-group of the export knows of a chunk of requests. */
typedef struct export_scratch {
  __local uint *sums, *offsets, *pages;
  __local int *rows;
} export_scratch;

/*
 * Exports one group for requests [0, padded), a chunk of a work-group's
 * size at a time; returns the requests this work-group counted as
 * rejected (work-group 0 counts them all).
 */
static uint export_group(const export_batch *batch, uint padded,
                         export_regions out, export_scratch scratch,
                         group_constants g) {
  uint id = get_local_id(0), size = get_local_size(0);
  uint me = get_group_id(0), groups = get_num_groups(0);
  bool writer = me == 0;
  uint rejected = 0, before = 0;
  /* A NONE group exports nothing: no branch around the barriers below. */
  if (!out.exported) padded = 0;
  if (writer && id == 0 && out.exported) {
    out.indptr[0] = 0;
    out.subsequence_begins[0] = query_start(batch, 0);
  }
  for (uint start = 0; start < padded; start += size) {
    uint r = start + id, chunk_pages = 0;
    request_export e = {-1, 0, 1, 0, false};
    if (r < padded) e = export_of(r, batch, out.row_lengths, g);
    uint offset = before + exclusive_scan(e.pages, scratch.sums, &chunk_pages);
    if (writer && r < padded) {
      out.indptr[r + 1] = (int)(offset + e.pages);
      out.last_page_len[r] = e.last_page_len;
      out.past_lens[r] = e.past_len;
      out.subsequence_begins[r + 1] =
          query_start(batch, min(r + 1, batch->num_reqs));
      rejected += e.rejected;
    }
    scratch.offsets[id] = offset;
    scratch.pages[id] = e.pages;
    scratch.rows[id] = e.row;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint count = min(size, padded - start);
    for (uint k = (me + groups - start % groups) % groups; k < count;
         k += groups) {
      __global const int *row =
          out.rows + (ulong)max(scratch.rows[k], 0) * out.row_stride;
      __global int *indices = out.indices + scratch.offsets[k];
      for (uint p = id; p < scratch.pages[k]; p += size) indices[p] = row[p];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    before += chunk_pages;
  }
  return rejected;
}
