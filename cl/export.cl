/*
 * The step kernel's export: one group's page table for a batch, in kernel
 * blocks (pages of kernel_block_size tokens), in FlashInfer's CSR layout
 * (indptr, indices, last_page_len), OpenVINO PagedAttention's extra
 * arrays (past_lens, subsequence_begins, max_context_len; its
 * block_indices and block_indices_begins are the CSR indices and indptr),
 * the lengths the dense paths read (seq_lens, dcp_local_seq_lens,
 * max_seq_len) and, when the launch asks, the CSR of each request's
 * context alone (what vLLM's BatchDCPPrefillWrapper reads) and a dense
 * page table of a pitch the caller chose (FA3's page_table, FlashMLA's
 * block_table, FlashInfer's block_tables). docs/semantics.md has the
 * rules; cl/step.cl runs it (export_groups, at the end).
 *
 * Batch request r reads row idx_mapping[r] (row r without idx_mapping; a
 * negative entry is padding). Its length is the last scheduled position +
 * 1, or seq_lens[r] when the caller gives them. With context parallelism
 * its pages are the rank's: the rank's tokens fill its kernel blocks
 * densely in position order (slot_of), so the local length alone says how
 * many pages it reads and how full the last one is.
 *
 * Every work-group scans all the requests, their page counts, context page
 * counts and tokens (and the longest length), each work-item a run of them
 * and one scan of the runs in local memory: cheap, and it spares a second
 * launch. Work-group 0 writes the per-request arrays; the page ids are
 * copied by lanes of CLBT_EXPORT_LANES work-items, a request to a lane
 * group, the requests dealt over every work-group's lane groups, so that
 * neighbouring work-items copy neighbouring ids and many requests are
 * copied at once.
 */
#pragma once
#include "common.cl"

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

/* The pages `tokens` tokens fill, and how many the last one holds (0 for
   no page, which is what FlashInfer's get_seq_lens reads as no tokens). */
static uint pages_of(ulong tokens, ulong page_size) {
  return (uint)((tokens + page_size - 1) / page_size);
}
static int last_page_len(ulong tokens, ulong page_size) {
  return tokens ? (int)(tokens - (pages_of(tokens, page_size) - 1) * page_size)
                : 0;
}

/*
 * One request's entries. A request with no row (padding), or rejected,
 * has none: no pages, every length 0, no tokens.
 */
typedef struct request_export {
  int row; /* the row its pages come from */
  uint pages, context_pages;
  int last_page_len, context_last_page_len;
  int length, local_length, past_len;
  uint tokens; /* its query's tokens, as subsequence_begins counts them */
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
 * Request r's entries from its row. A padding request (a negative row)
 * has none; one whose row is not below max_num_reqs, whose
 * query_start_loc entries are out of order or range, whose length is
 * negative, above INT32_MAX or below its scheduled tokens, or whose pages
 * run past its committed row or past max_pages (a dense row's pitch) is
 * rejected: none either, and counted.
 */
static request_export export_of(uint r, const export_batch *batch,
                                const committed_group *rows, uint max_pages,
                                group_constants g) {
  request_export e = {-1, 0, 0, 0, 0, 0, 0, 0, 0, false};
  const request_export none = e;
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
  ulong page_size = g.kv_block_size / g.blocks_per_kv_block;
  ulong local_length = local_count((ulong)length, g);
  ulong past = local_count((ulong)(length - (end - begin)), g);
  uint pages = pages_of(local_length, page_size);
  committed_row committed;
  committed_row_of(rows, row, &committed);
  if (pages > committed.length || pages > max_pages) {
    e = none;
    e.rejected = true;
    return e;
  }
  e.row = row;
  e.pages = pages;
  e.context_pages = pages_of(past, page_size);
  e.last_page_len = last_page_len(local_length, page_size);
  e.context_last_page_len = last_page_len(past, page_size);
  e.length = (int)length;
  e.local_length = (int)local_length;
  e.past_len = (int)past;
  e.tokens = (uint)(end - begin);
  return e;
}

/*
 * What the export scans over requests: pages, context pages, tokens (a sum
 * that stops at `cap`, so that subsequence_begins stays within the batch
 * whatever query_start_loc says), and the longest length (a maximum).
 */
static uint4 combine(uint4 a, uint4 b, uint cap) {
  return (uint4)(a.x + b.x, a.y + b.y, min(a.z + b.z, cap), max(a.w, b.w));
}

/* The work-group's exclusive scan of each work-item's value; *total
   receives the combination of them all. */
static uint4 exclusive_scan(uint4 value, uint cap, __local uint4 *sums,
                            uint4 *total) {
  uint id = get_local_id(0), size = get_local_size(0);
  sums[id] = value;
  SYNC(CLK_LOCAL_MEM_FENCE);
  for (uint step = 1; step < size; step *= 2) {
    uint4 before = id >= step ? sums[id - step] : (uint4)(0);
    SYNC(CLK_LOCAL_MEM_FENCE);
    sums[id] = combine(before, sums[id], cap);
    SYNC(CLK_LOCAL_MEM_FENCE);
  }
  *total = sums[size - 1];
  uint4 before = id ? sums[id - 1] : (uint4)(0);
  SYNC(CLK_LOCAL_MEM_FENCE);
  return before;
}

/* Where a group's export goes, in its storage, and which parts it writes. */
typedef struct export_regions {
  committed_group rows; /* as the launch reads them (cl/commit.cl) */
  __global int *indptr, *indices, *last_page_len, *past_lens,
      *subsequence_begins, *seq_lens, *local_seq_lens, *max_seq_len,
      *context_indptr, *context_indices, *context_last_page_len, *page_table;
  __global uint *rejected_tokens;
  uint pitch;    /* entries a row of page_table takes */
  bool context;  /* the context CSR */
  bool dense;    /* page_table */
} export_regions;

/*
 * Group g's export regions, from its storage and layout; `pitch` is the
 * record's dense_pitch, 0 for the group's width.
 */
static export_regions regions_of(const packet_view *packet, uint g,
                                 __global int *storage, clbt__group_layout at,
                                 uint work, uint pitch) {
#define REGION(NAME) (storage + CLBT_REGION_WORDS(at, CLBT_REGION_##NAME))
  export_regions out = {committed_group_of(packet, g, storage, at),
                        REGION(EXPORT_INDPTR),
                        REGION(EXPORT_INDICES),
                        REGION(EXPORT_LAST_PAGE_LEN),
                        REGION(EXPORT_PAST_LENS),
                        REGION(EXPORT_SUBSEQUENCE_BEGINS),
                        REGION(EXPORT_SEQ_LENS),
                        REGION(EXPORT_LOCAL_SEQ_LENS),
                        REGION(EXPORT_MAX_SEQ_LEN),
                        REGION(EXPORT_CONTEXT_INDPTR),
                        REGION(EXPORT_CONTEXT_INDICES),
                        REGION(EXPORT_CONTEXT_LAST_PAGE_LEN),
                        REGION(EXPORT_PAGE_TABLE),
                        (__global uint *)REGION(REJECTED_TOKENS),
                        pitch ? pitch : at.row_stride,
                        (work & CLBT_WORK_EXPORT_CONTEXT) != 0,
                        (work & CLBT_WORK_EXPORT_DENSE) != 0};
#undef REGION
  return out;
}

/*
 * What a work-group of the export knows of a chunk of requests: per
 * request, its page offset and context page offset (and the chunk's end
 * after its last), and its row.
 */
typedef struct export_scratch {
  __local uint4 *sums;    /* [local size], the scan */
  __local uint2 *offsets; /* [CLBT_EXPORT_CHUNK + 1] */
  __local int *rows;      /* [CLBT_EXPORT_CHUNK] */
} export_scratch;

/* Request r's per-request entries; `through` is the scan up to and
   including it, `base` subsequence_begins[0]. */
static void write_request(export_regions out, uint r, request_export e,
                          uint4 through, int base) {
  out.indptr[r + 1] = (int)through.x;
  out.last_page_len[r] = e.last_page_len;
  out.past_lens[r] = e.past_len;
  out.subsequence_begins[r + 1] = base + (int)through.z;
  out.seq_lens[r] = e.length;
  out.local_seq_lens[r] = e.local_length;
  if (out.context) {
    out.context_indptr[r + 1] = (int)through.y;
    out.context_last_page_len[r] = e.context_last_page_len;
  }
}

/* Request r's page ids, by `lanes` work-items from `lane`: its CSR lists
   and its dense row, zero past its pages. */
static void copy_request(export_regions out, uint r, uint2 offset,
                         uint2 next, int row, uint lane, uint lanes) {
  uint pages = next.x - offset.x, context_pages = next.y - offset.y;
  committed_row ids;
  committed_row_of(&out.rows, row, &ids);
  copy_committed(out.indices + offset.x, &out.rows, &ids, lane, pages, lanes);
  if (out.context)
    copy_committed(out.context_indices + offset.y, &out.rows, &ids, lane,
                   context_pages, lanes);
  if (out.dense) {
    __global int *dense = out.page_table + (ulong)r * out.pitch;
    copy_committed(dense, &out.rows, &ids, lane, min(pages, out.pitch), lanes);
    for (uint p = pages + lane; p < out.pitch; p += lanes) dense[p] = 0;
  }
}

/* The value a request adds to the scan: pages, context pages, tokens,
   length. */
static uint4 scanned(request_export e) {
  return (uint4)(e.pages, e.context_pages, e.tokens, (uint)e.length);
}

/*
 * Exports one group for requests [0, padded) on the `ranks` work-groups
 * that serve it, this one `rank` of them, in chunks of up to
 * CLBT_EXPORT_CHUNK requests (one, for most batches): each work-item
 * takes a run of the chunk's requests and sums them, one scan of the runs
 * gives every request its offsets, then lanes of work-items copy the
 * requests' pages, one request to a lane group and the requests spread
 * over the work-groups' lane groups. Returns the requests this work-group
 * counted as rejected (rank 0 counts them all, and writes the
 * per-request arrays).
 */
static uint export_group(const export_batch *batch, uint padded,
                         export_regions out, export_scratch scratch,
                         group_constants g, uint rank, uint ranks) {
  uint id = get_local_id(0), size = get_local_size(0);
  bool writer = rank == 0;
  uint lanes = min(size, (uint)CLBT_EXPORT_LANES), lane = id % lanes;
  uint lane_group = rank * (size / lanes) + id / lanes;
  uint lane_groups = ranks * (size / lanes);
  uint rejected = 0, max_pages = out.dense ? out.pitch : UINT_MAX;
  int base = clamp(query_start(batch, 0), 0, (int)batch->num_tokens);
  uint cap = batch->num_tokens - (uint)base;
  uint4 carry = (uint4)(0);
  if (writer && id == 0) {
    out.indptr[0] = 0;
    out.subsequence_begins[0] = base;
    if (out.context) out.context_indptr[0] = 0;
  }
  for (uint start = 0; start < padded; start += CLBT_EXPORT_CHUNK) {
    uint count = min((uint)CLBT_EXPORT_CHUNK, padded - start);
    uint begin, end;
    split_range(count, id, size, &begin, &end);
    uint4 run = (uint4)(0);
    for (uint k = begin; k < end; ++k)
      run = combine(
          run, scanned(export_of(start + k, batch, &out.rows, max_pages, g)),
          cap);
    uint4 chunk;
    uint4 offset =
        combine(carry, exclusive_scan(run, cap, scratch.sums, &chunk), cap);
    /* The run again: its reads are the ones just made. */
    for (uint k = begin; k < end; ++k) {
      request_export e =
          export_of(start + k, batch, &out.rows, max_pages, g);
      scratch.offsets[k] = (uint2)(offset.x, offset.y);
      scratch.rows[k] = e.row;
      offset = combine(offset, scanned(e), cap);
      if (writer) {
        write_request(out, start + k, e, offset, base);
        rejected += e.rejected;
      }
    }
    if (id == 0) {
      uint4 through = combine(carry, chunk, cap);
      scratch.offsets[count] = (uint2)(through.x, through.y);
    }
    SYNC(CLK_LOCAL_MEM_FENCE);
    for (uint k = lane_group; k < count; k += lane_groups)
      copy_request(out, start + k, scratch.offsets[k], scratch.offsets[k + 1],
                   scratch.rows[k], lane, lanes);
    SYNC(CLK_LOCAL_MEM_FENCE);
    carry = combine(carry, chunk, cap);
  }
  if (writer && id == 0) out.max_seq_len[0] = (int)carry.w;
  return rejected;
}

/*
 * Exports every token-mapping group that takes part (another group has no
 * export regions, and exports no requests), each on its own share of the
 * work-groups, so that the groups' scans and copies run side by side:
 * with `step` the lesser of the part's work-groups and the exported
 * groups, its work-group w serves the exported groups k with
 * k = w mod step, as rank w / step of their work-groups.
 */
static void export_groups(const export_batch *batch, uint padded,
                          part_range part, clbt__record_head head,
                          clbt__kernel_layout layout, const packet_view *packet,
                          __global int *storage, export_scratch scratch) {
  uint exported = 0;
  FOR_EACH_GROUP(g) { exported += maps_tokens(g) && takes_part(head, g); }
  uint w = part_group(part), groups = part.count;
  uint step = min(groups, max(exported, 1u)), k = 0;
  FOR_EACH_GROUP(g) {
    if (!maps_tokens(g) || !takes_part(head, g)) continue;
    uint which = k++ % step;
    /* The same on every work-item of a work-group: no barrier is split. */
    if (w % step != which) continue;
    clbt__group_layout at = layout.groups[g];
    export_regions out =
        regions_of(packet, g, storage, at, head.work, head.dense_pitch);
    uint ranks = (groups - 1 - which) / step + 1;
    add_rejected(storage, at,
                 export_group(batch, padded, out, scratch, group_table[g],
                              w / step, ranks));
  }
}
