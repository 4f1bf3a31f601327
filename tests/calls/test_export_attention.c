/*
 * The export's layouts read the way their consumers read them, by a small
 * paged-attention reference on the host: each step writes every token's
 * K and V (a function of the request, its position and how many times
 * that position was written) into a paged KV cache per CP rank and group
 * through the step's slot mapping, then attends one query per request
 * over the K/V it reads through each layout, and merges the ranks'
 * partial results by their log-sum-exp as DCP does. The result must be
 * the attention computed directly over the positions the consumer means:
 *
 *   - FlashInfer's CSR (paged_kv_indptr/indices/last_page_len, the length
 *     as flashinfer.get_seq_lens computes it), decode: all L positions;
 *   - FA3/FA4's page_table + seqused_k: seq_lens without CP,
 *     dcp_local_seq_lens with it, decode; and causal, token by token of
 *     the query, without CP;
 *   - FlashMLA's block_table + cache_seqlens on the group of 64-token
 *     pages, decode;
 *   - OpenVINO's block_indices/begins + past_lens + subsequence_begins,
 *     causal over the query, without CP (OpenVINO has none);
 *   - the context alone, positions [0, L - q): through the context CSR
 *     (vLLM's BatchDCPPrefillWrapper) and through FA3's page_table with
 *     past_lens as seqused_k (vLLM's DCP context pass).
 *
 * Padding requests, a row past the table and a request asking past its
 * row must read nothing through any layout. The batches read persistent
 * request slots through idx_mapping, with CP on every rank, kernel blocks
 * smaller than the KV blocks, a NONE group, padded batches, a chunked
 * prefill, speculative tokens and a truncated row.
 */
#include "clbt_test.h"

#include <math.h>
#include <stdlib.h>

#define HEAD_DIM 4
#define MAX_RANKS 4
#define NUM_GROUPS 4 /* the last is a NONE group */
#define TOKEN_GROUPS 3
#define MAX_REQS 8
#define MAX_TOKENS 256
#define MAX_LENGTH 320
#define KV_BLOCKS 127 /* a prime: ids dealt as (n * 37) mod 127 differ */
#define NUM_SLOTS 6   /* batch entries */
#define PITCH 20      /* the dense page table's chosen pitch */
#define MAX_QUERY 160 /* tokens a request schedules in a step */

/* Pages of 16 tokens; of 16 over KV blocks of 32; of 64 (FlashMLA's) over
   KV blocks of 128; a Mamba group. Each is 24 kernel blocks wide. */
static const clbt_group_config groups[NUM_GROUPS] = {
    {.block_size = 16, .max_num_blocks = 24},
    {.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 12},
    {.block_size = 128, .kernel_block_size = 64, .max_num_blocks = 12},
    {.block_size = 8, .max_num_blocks = 2, .slot_mode = CLBT_SLOT_MODE_NONE},
};
#define FLASHMLA_GROUP 2

static uint32_t page_size(uint32_t g) {
  return groups[g].kernel_block_size ? groups[g].kernel_block_size
                                     : groups[g].block_size;
}

/* ---- K, V and queries, and attention computed directly ---------------- */

/* A value in [-1, 1) from its coordinates (splitmix64). */
static double value_of(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t x = a * 0x9E3779B97F4A7C15u ^ b * 0xC2B2AE3D27D4EB4Fu ^
               c * 0x165667B19E3779F9u ^ d * 0x27D4EB2F165667C5u;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9u;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBu;
  x ^= x >> 31;
  return (double)(x >> 11) / (double)(1ull << 52) - 1.0;
}

/* Partial attention over some tokens: their largest score, the sum of
   exp(score - max) and the same sum of V; `tokens` counts them. */
typedef struct partial {
  double max, sum, out[HEAD_DIM];
  uint32_t tokens;
} partial;

static partial no_tokens(void) {
  return (partial){.max = -INFINITY};
}

static void attend(partial *a, const double *q, const double *k,
                   const double *v) {
  double score = 0;
  for (int d = 0; d < HEAD_DIM; ++d) score += q[d] * k[d];
  score /= sqrt((double)HEAD_DIM);
  if (score > a->max) {
    double scale = a->tokens ? exp(a->max - score) : 0;
    a->sum *= scale;
    for (int d = 0; d < HEAD_DIM; ++d) a->out[d] *= scale;
    a->max = score;
  }
  double weight = exp(score - a->max);
  a->sum += weight;
  for (int d = 0; d < HEAD_DIM; ++d) a->out[d] += weight * v[d];
  ++a->tokens;
}

/* Two ranks' partial results as one (DCP's merge by log-sum-exp). */
static partial merge(partial a, partial b) {
  if (!b.tokens) return a;
  if (!a.tokens) return b;
  partial m = {.max = fmax(a.max, b.max), .tokens = a.tokens + b.tokens};
  double wa = exp(a.max - m.max), wb = exp(b.max - m.max);
  m.sum = a.sum * wa + b.sum * wb;
  for (int d = 0; d < HEAD_DIM; ++d) m.out[d] = a.out[d] * wa + b.out[d] * wb;
  return m;
}

/* ---- the world: a multi-group table per rank and its caches ---------- */

typedef struct world {
  uint32_t ranks, interleave;
  clbt_multi_table *tables[MAX_RANKS];
  double *k[MAX_RANKS][TOKEN_GROUPS], *v[MAX_RANKS][TOKEN_GROUPS];
  uint32_t length[4];                     /* each request's tokens */
  uint32_t writes[4][MAX_LENGTH];         /* how often each was written */
  size_t blocks[TOKEN_GROUPS][4];         /* KV blocks each row holds */
  uint32_t dealt;
} world;

/* The four requests' request slots (rows); the others stay empty. */
static const uint32_t slot_of[4] = {5, 1, 6, 2};

/* K (which 0) or V (1) of request r's position p, at its last write. */
static void kv_of(const world *w, uint32_t r, uint32_t p, int which,
                  double *out) {
  for (int d = 0; d < HEAD_DIM; ++d)
    out[d] = value_of(r + 1, p + 1, w->writes[r][p], (uint64_t)(which * 8 + d));
}

static size_t cache_slots(uint32_t g) {
  return (size_t)KV_BLOCKS * groups[g].block_size;
}

static void world_create(world *w, uint32_t ranks, uint32_t interleave) {
  memset(w, 0, sizeof *w);
  w->ranks = ranks;
  w->interleave = interleave;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    clbt_multi_table_config config = {
        .max_num_reqs = MAX_REQS, .max_num_batched_tokens = MAX_TOKENS,
        .num_groups = NUM_GROUPS, .groups = groups, .cp_world_size = ranks,
        .cp_rank = rank, .cp_interleave_size = interleave};
    clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config,
                                           &w->tables[rank]));
    for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
      size_t values = cache_slots(g) * HEAD_DIM;
      w->k[rank][g] = malloc(values * sizeof(double));
      w->v[rank][g] = malloc(values * sizeof(double));
      ck_assert_ptr_nonnull(w->k[rank][g]);
      ck_assert_ptr_nonnull(w->v[rank][g]);
      /* Never written: a read of it spoils the result. */
      for (size_t i = 0; i < values; ++i) w->k[rank][g][i] = w->v[rank][g][i] = NAN;
    }
  }
}

static void world_destroy(world *w) {
  for (uint32_t rank = 0; rank < w->ranks; ++rank) {
    clbt_multi_table_destroy(w->tables[rank]);
    for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
      free(w->k[rank][g]);
      free(w->v[rank][g]);
    }
  }
}

/* The KV blocks `length` tokens need in group g: a block of every rank
   holds block_size tokens of a virtual block of block_size x ranks. */
static size_t blocks_for(const world *w, uint32_t g, uint32_t length) {
  size_t span = (size_t)groups[g].block_size * w->ranks;
  return (length + span - 1) / span;
}

/* Request r's rows (every rank's) grow to hold `length` tokens. */
static void grow(world *w, uint32_t r, uint32_t length) {
  int32_t ids[NUM_GROUPS][32];
  const int32_t *lists[NUM_GROUPS] = {ids[0], ids[1], ids[2], ids[3]};
  size_t counts[NUM_GROUPS] = {0};
  for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
    for (; w->blocks[g][r] + counts[g] < blocks_for(w, g, length); ++counts[g])
      ids[g][counts[g]] = (int32_t)((++w->dealt * 37u) % KV_BLOCKS);
    w->blocks[g][r] += counts[g];
  }
  for (uint32_t rank = 0; rank < w->ranks; ++rank)
    clbt_assert_ok(clbt_multi_table_append_row(w->tables[rank], slot_of[r],
                                               lists, counts));
}

/* Speculative rollback: request r keeps its first `length` tokens. */
static void roll_back(world *w, uint32_t r, uint32_t length) {
  size_t keep[NUM_GROUPS] = {0};
  for (uint32_t g = 0; g < TOKEN_GROUPS; ++g)
    keep[g] = w->blocks[g][r] = blocks_for(w, g, length);
  for (uint32_t rank = 0; rank < w->ranks; ++rank)
    clbt_assert_ok(
        clbt_multi_table_truncate_row(w->tables[rank], slot_of[r], keep));
  w->length[r] = length;
}

/* ---- one step --------------------------------------------------------- */

/*
 * What batch entry b holds: a request (0..3), padding with one token, a
 * row past the table with one token (rejected), or a request whose length
 * is claimed longer than its row (rejected).
 */
enum { PADDING = -1, OUT_OF_TABLE = -2 };
typedef struct entry {
  int32_t request;
  uint32_t tokens;
  bool too_long; /* seq_lens claims a length past the row */
} entry;

/* The exported arrays of a group on a rank, read back. */
typedef struct exported {
  int32_t indptr[MAX_REQS + 1], last[MAX_REQS], past[MAX_REQS],
      begins[MAX_REQS + 1], seq_lens[MAX_REQS], local[MAX_REQS], max_seq_len,
      context_indptr[MAX_REQS + 1], context_last[MAX_REQS];
  int32_t indices[MAX_REQS * 24], context_indices[MAX_REQS * 24],
      page_table[MAX_REQS * 24];
} exported;

static clbt_export_buffers buffers_of(const world *w, uint32_t rank,
                                      uint32_t g) {
  clbt_export_buffers b = CLBT_EXPORT_BUFFERS_INIT;
  clbt_assert_ok(clbt_table_export_buffers(
      clbt_multi_table_group(w->tables[rank], g), &b));
  return b;
}

static void poison_all(const world *w) {
  for (uint32_t rank = 0; rank < w->ranks; ++rank)
    for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
      clbt_export_buffers b = buffers_of(w, rank, g);
      const cl_mem all[] = {b.paged_kv_indptr, b.paged_kv_indices,
                            b.paged_kv_last_page_len, b.past_lens,
                            b.subsequence_begins, b.seq_lens,
                            b.dcp_local_seq_lens, b.max_seq_len,
                            b.context_kv_indptr, b.context_kv_indices,
                            b.context_kv_last_page_len, b.page_table};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clbt_test_poison32(all[i]);
    }
}

static void read_exported(const world *w, uint32_t rank, uint32_t g,
                          exported *e) {
  clbt_export_buffers b = buffers_of(w, rank, g);
  size_t n = MAX_REQS * sizeof(int32_t);
  clbt_test_read(b.paged_kv_indptr, n + sizeof(int32_t), e->indptr);
  clbt_test_read(b.paged_kv_indices, sizeof e->indices, e->indices);
  clbt_test_read(b.paged_kv_last_page_len, n, e->last);
  clbt_test_read(b.past_lens, n, e->past);
  clbt_test_read(b.subsequence_begins, n + sizeof(int32_t), e->begins);
  clbt_test_read(b.seq_lens, n, e->seq_lens);
  clbt_test_read(b.dcp_local_seq_lens, n, e->local);
  clbt_test_read(b.max_seq_len, sizeof e->max_seq_len, &e->max_seq_len);
  clbt_test_read(b.context_kv_indptr, n + sizeof(int32_t), e->context_indptr);
  clbt_test_read(b.context_kv_indices, sizeof e->context_indices,
                 e->context_indices);
  clbt_test_read(b.context_kv_last_page_len, n, e->context_last);
  clbt_test_read(b.page_table, sizeof e->page_table, e->page_table);
}

/* Attends q over the first `count` tokens of a page list of group g. */
static partial read_pages(const world *w, uint32_t rank, uint32_t g,
                          const int32_t *pages, uint32_t count,
                          const double *q) {
  partial a = no_tokens();
  uint32_t size = page_size(g);
  for (uint32_t i = 0; i < count; ++i) {
    int32_t page = pages[i / size];
    ck_assert_msg(page >= 0 && (size_t)page * size < cache_slots(g),
                  "rank %u group %u: page %d is outside the cache", rank, g,
                  page);
    size_t slot = (size_t)page * size + i % size;
    attend(&a, q, w->k[rank][g] + slot * HEAD_DIM,
           w->v[rank][g] + slot * HEAD_DIM);
  }
  return a;
}

/* FlashInfer's length of a CSR entry (flashinfer/page.py, get_seq_lens). */
static uint32_t csr_tokens(const int32_t *indptr, const int32_t *last,
                           uint32_t b, uint32_t g) {
  int32_t pages = indptr[b + 1] - indptr[b];
  ck_assert_int_ge(pages, 0);
  int32_t tokens = (pages > 1 ? pages - 1 : 0) * (int32_t)page_size(g) + last[b];
  ck_assert_int_ge(tokens, 0);
  /* The trtllm-gen plan walks ceil(tokens / page) pages a request. */
  ck_assert_int_eq((tokens + (int32_t)page_size(g) - 1) / (int32_t)page_size(g),
                   pages);
  return (uint32_t)tokens;
}

/* The readers' results for one batch entry, summed over the ranks. */
typedef struct readings {
  partial csr, fa3, flashmla, openvino, context_csr, context_fa3;
  partial causal_fa3[MAX_QUERY], causal_openvino[MAX_QUERY];
} readings;

/* One rank's reading of batch entry b of group g through every layout. */
static void read_entry(const world *w, uint32_t rank, uint32_t g,
                       const exported *e, uint32_t b, uint32_t query,
                       const double *q, readings *out) {
  uint32_t pitch = PITCH;
  const int32_t *row = e->page_table + (size_t)b * pitch;
  uint32_t kv = csr_tokens(e->indptr, e->last, b, g);
  out->csr = merge(out->csr, read_pages(w, rank, g, e->indices + e->indptr[b],
                                        kv, q));
  /* FA3 reads seqused_k tokens of its page_table row: the rank's. */
  uint32_t used = (uint32_t)(w->ranks > 1 ? e->local[b] : e->seq_lens[b]);
  ck_assert_uint_le(used, pitch * page_size(g));
  out->fa3 = merge(out->fa3, read_pages(w, rank, g, row, used, q));
  if (g == FLASHMLA_GROUP)
    out->flashmla = merge(out->flashmla,
                          read_pages(w, rank, g, row, (uint32_t)e->local[b], q));
  uint32_t context =
      csr_tokens(e->context_indptr, e->context_last, b, g);
  out->context_csr = merge(
      out->context_csr,
      read_pages(w, rank, g, e->context_indices + e->context_indptr[b],
                 context, q));
  out->context_fa3 = merge(out->context_fa3,
                           read_pages(w, rank, g, row, (uint32_t)e->past[b], q));
  if (w->ranks > 1) return;
  /* Without CP, causally: query token i sees the first L - q + i + 1. */
  uint32_t sequence = (uint32_t)(e->begins[b + 1] - e->begins[b]);
  ck_assert_uint_le(query, MAX_QUERY);
  for (uint32_t i = 0; i < query && e->seq_lens[b]; ++i) {
    uint32_t visible = (uint32_t)e->seq_lens[b] - query + i + 1;
    out->causal_fa3[i] = read_pages(w, rank, g, row, visible, q);
  }
  /* OpenVINO: sequence b's tokens after its past_lens, from its blocks. */
  ck_assert_uint_eq(sequence, query);
  for (uint32_t i = 0; i < sequence; ++i)
    out->causal_openvino[i] =
        read_pages(w, rank, g, e->indices + e->indptr[b],
                   (uint32_t)e->past[b] + i + 1, q);
  out->openvino = sequence ? out->causal_openvino[sequence - 1] : no_tokens();
}

/* Attention computed directly over request r's positions [0, to). */
static partial direct(const world *w, uint32_t r, uint32_t to,
                      const double *q) {
  partial a = no_tokens();
  double k[HEAD_DIM], v[HEAD_DIM];
  for (uint32_t p = 0; p < to; ++p) {
    kv_of(w, r, p, 0, k);
    kv_of(w, r, p, 1, v);
    attend(&a, q, k, v);
  }
  return a;
}

static void assert_same(partial got, partial want, const char *layout,
                        uint32_t g, uint32_t b) {
  ck_assert_msg(got.tokens == want.tokens,
                "group %u entry %u: %s reads %u tokens, want %u", g, b, layout,
                got.tokens, want.tokens);
  for (int d = 0; want.tokens && d < HEAD_DIM; ++d) {
    double x = got.out[d] / got.sum, y = want.out[d] / want.sum;
    ck_assert_msg(fabs(x - y) < 1e-9,
                  "group %u entry %u: %s gives %.12f in dimension %d, "
                  "attention %.12f",
                  g, b, layout, x, d, y);
  }
}

/*
 * One step: the requests' new tokens, committed, mapped and exported in
 * one step per rank; K/V written through the slot mapping; then every
 * entry read through every layout.
 */
static void step(world *w, const entry *entries, uint32_t padded,
                 uint32_t step_number) {
  int32_t qsl[NUM_SLOTS + 1] = {0}, idx[NUM_SLOTS], seq_lens[NUM_SLOTS];
  int64_t positions[MAX_TOKENS];
  uint32_t want_length[NUM_SLOTS] = {0};
  for (uint32_t b = 0; b < NUM_SLOTS; ++b) {
    const entry *e = &entries[b];
    int32_t r = e->request;
    idx[b] = r >= 0 ? (int32_t)slot_of[r] : r == PADDING ? -1 : MAX_REQS + 3;
    qsl[b + 1] = qsl[b] + (int32_t)e->tokens;
    uint32_t first = r >= 0 ? w->length[r] : 0;
    for (uint32_t i = 0; i < e->tokens; ++i) {
      positions[qsl[b] + (int32_t)i] = first + i;
      if (r >= 0) ++w->writes[r][first + i];
    }
    if (r >= 0) {
      w->length[r] += e->tokens;
      ck_assert_uint_le(w->length[r], MAX_LENGTH);
      grow(w, (uint32_t)r, w->length[r]);
      want_length[b] = e->too_long ? 0 : w->length[r];
    }
    seq_lens[b] = r >= 0 && e->too_long ? 40 * 128 * (int32_t)w->ranks
                  : r >= 0              ? (int32_t)w->length[r]
                                        : 1;
  }
  uint32_t num_tokens = (uint32_t)qsl[NUM_SLOTS];
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem idx_buffer = clbt_test_buffer(sizeof idx, idx);
  cl_mem lengths_buffer = clbt_test_buffer(sizeof seq_lens, seq_lens);
  poison_all(w);
  for (uint32_t rank = 0; rank < w->ranks; ++rank) {
    clbt_step s = CLBT_STEP_INIT;
    s.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
    s.export_flags = CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE;
    s.dense_row_pitch = PITCH;
    s.num_reqs = NUM_SLOTS;
    s.num_reqs_padded = padded;
    s.num_tokens = num_tokens;
    s.query_start_loc = qsl_buffer;
    s.positions = positions_buffer;
    s.idx_mapping = idx_buffer;
    s.seq_lens = lengths_buffer;
    clbt_assert_ok(
        clbt_multi_table_enqueue_step(w->tables[rank], &s, 0, NULL, NULL));
    /* K/V through the slot mapping. */
    for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
      int64_t slots[MAX_TOKENS];
      clbt_test_read(
          clbt_table_slot_mapping(clbt_multi_table_group(w->tables[rank], g)),
          sizeof slots, slots);
      for (uint32_t b = 0; b < NUM_SLOTS; ++b)
        for (int32_t t = qsl[b]; t < qsl[b + 1]; ++t) {
          if (slots[t] == CLBT_PAD_SLOT_ID) continue;
          ck_assert_msg(entries[b].request >= 0,
                        "entry %u without a row writes a slot", b);
          ck_assert_int_lt(slots[t], (int64_t)cache_slots(g));
          kv_of(w, (uint32_t)entries[b].request, (uint32_t)positions[t], 0,
                w->k[rank][g] + slots[t] * HEAD_DIM);
          kv_of(w, (uint32_t)entries[b].request, (uint32_t)positions[t], 1,
                w->v[rank][g] + slots[t] * HEAD_DIM);
        }
    }
  }
  static exported e[MAX_RANKS][TOKEN_GROUPS];
  int32_t longest = 0;
  for (uint32_t b = 0; b < NUM_SLOTS; ++b)
    if ((int32_t)want_length[b] > longest) longest = (int32_t)want_length[b];
  for (uint32_t rank = 0; rank < w->ranks; ++rank)
    for (uint32_t g = 0; g < TOKEN_GROUPS; ++g) {
      read_exported(w, rank, g, &e[rank][g]);
      ck_assert_int_eq(e[rank][g].max_seq_len, longest);
      /* Nothing past the padded batch is written. */
      if (padded < MAX_REQS)
        ck_assert_int_eq(e[rank][g].seq_lens[padded], CLBT_TEST_POISON32);
      ck_assert_int_eq(e[rank][g].page_table[padded * PITCH],
                       CLBT_TEST_POISON32);
    }
  for (uint32_t g = 0; g < TOKEN_GROUPS; ++g)
    for (uint32_t b = 0; b < padded; ++b) {
      const entry *en = b < NUM_SLOTS ? &entries[b] : NULL;
      uint32_t length = b < NUM_SLOTS ? want_length[b] : 0;
      uint32_t query = length ? en->tokens : 0;
      int32_t r = en ? en->request : PADDING;
      double q[HEAD_DIM];
      for (int d = 0; d < HEAD_DIM; ++d)
        q[d] = value_of(step_number, b, g, 100 + (uint64_t)d);
      readings got;
      memset(&got, 0, sizeof got);
      got.csr = got.fa3 = got.flashmla = got.openvino = got.context_csr =
          got.context_fa3 = no_tokens();
      for (uint32_t rank = 0; rank < w->ranks; ++rank) {
        ck_assert_int_eq(e[rank][g].seq_lens[b], (int32_t)length);
        read_entry(w, rank, g, &e[rank][g], b, query, q, &got);
      }
      partial all = length ? direct(w, (uint32_t)r, length, q) : no_tokens();
      partial context =
          length ? direct(w, (uint32_t)r, length - query, q) : no_tokens();
      assert_same(got.csr, all, "FlashInfer's CSR", g, b);
      assert_same(got.fa3, all, "FA3's page_table + seqused_k", g, b);
      if (g == FLASHMLA_GROUP)
        assert_same(got.flashmla, all, "FlashMLA's block_table", g, b);
      assert_same(got.context_csr, context, "the context CSR", g, b);
      assert_same(got.context_fa3, context, "FA3's DCP context pass", g, b);
      if (w->ranks > 1) continue;
      assert_same(got.openvino, all, "OpenVINO's arrays", g, b);
      for (uint32_t i = 0; i < query; ++i) {
        partial causal = direct(w, (uint32_t)r, length - query + i + 1, q);
        assert_same(got.causal_fa3[i], causal, "FA3, causal", g, b);
        assert_same(got.causal_openvino[i], causal, "OpenVINO, causal", g, b);
      }
    }
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clReleaseMemObject(idx_buffer);
  clReleaseMemObject(lengths_buffer);
}

/*
 * Prefill (request 1 in two chunks), decodes with a padding entry, a row
 * past the table and padding past the batch, speculative tokens, a
 * request claiming a length past its row, then a rollback and the decode
 * after it.
 */
static void serve(uint32_t ranks, uint32_t interleave) {
  world w;
  world_create(&w, ranks, interleave);
  const entry prefill[NUM_SLOTS] = {{0, 40, false}, {PADDING, 1, false},
                                    {1, 70, false}, {2, 1, false},
                                    {OUT_OF_TABLE, 1, false}, {3, 130, false}};
  step(&w, prefill, 8, 1);
  const entry chunk[NUM_SLOTS] = {{0, 1, false}, {PADDING, 1, false},
                                  {1, 60, false}, {2, 3, false},
                                  {OUT_OF_TABLE, 1, false}, {3, 1, false}};
  step(&w, chunk, 6, 2);
  for (uint32_t s = 3; s < 6; ++s) {
    const entry decode[NUM_SLOTS] = {{0, 1, false}, {PADDING, 1, false},
                                     {1, 1, false}, {2, 1 + s % 3, false},
                                     {OUT_OF_TABLE, 1, false},
                                     {3, 1, s == 4}};
    step(&w, decode, 7, s);
  }
  roll_back(&w, 3, w.length[3] - 5);
  roll_back(&w, 2, w.length[2] - 2);
  const entry after[NUM_SLOTS] = {{0, 1, false}, {PADDING, 1, false},
                                  {1, 1, false}, {2, 2, false},
                                  {OUT_OF_TABLE, 1, false}, {3, 1, false}};
  step(&w, after, 8, 6);
  world_destroy(&w);
}

START_TEST(layouts_without_context_parallelism) { serve(1, 1); }
END_TEST

START_TEST(layouts_on_two_ranks_interleave_1) { serve(2, 1); }
END_TEST

START_TEST(layouts_on_four_ranks_interleave_16) { serve(4, 16); }
END_TEST

int main(void) {
  Suite *suite = suite_create("export_attention");
  TCase *c = tcase_create("export_attention");
  tcase_add_test(c, layouts_without_context_parallelism);
  tcase_add_test(c, layouts_on_two_ranks_interleave_1);
  tcase_add_test(c, layouts_on_four_ranks_interleave_16);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
