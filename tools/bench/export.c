/*
 * The export section of `clbt bench`: FlashInfer's page table (and
 * OpenVINO's arrays and the lengths, written by the same launch) for a
 * decode batch of 256 and 1024 requests, against an empty kernel's call
 * and against building the same CSR arrays on the host from the host rows,
 * as vLLM does before it copies them to the device; and what asking for
 * the context CSR or the dense page table adds to it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

enum { EXPORT_BLOCK = 16, EXPORT_MIN_BLOCKS = 64, EXPORT_MAX_BLOCKS = 512 };

/* Rows of 64 to 512 blocks of 16 tokens, committed, as the seed's step
   holds them. */
static clbt_table *decode_table(bench *b, clbt_device *device,
                                uint32_t requests, uint32_t *lengths) {
  clbt_table_config config = {
      .block_size = EXPORT_BLOCK, .max_num_reqs = requests,
      .max_num_blocks_per_req = BENCH_MAX_MODEL_LEN / EXPORT_BLOCK,
      .max_num_batched_tokens = 16384};
  clbt_table *table = NULL;
  bench_check(clbt_table_create(device, &config, &table), "table create");
  int32_t ids[EXPORT_MAX_BLOCKS];
  for (uint32_t r = 0; r < requests; ++r) {
    lengths[r] = EXPORT_MIN_BLOCKS +
                 bench_random(b) % (EXPORT_MAX_BLOCKS - EXPORT_MIN_BLOCKS + 1);
    for (uint32_t i = 0; i < lengths[r]; ++i)
      ids[i] = (int32_t)(bench_random(b) % 100000);
    bench_check(clbt_table_add_row(table, r, ids, lengths[r]), "add_row");
  }
  bench_check(clbt_table_commit(table, requests), "commit");
  return table;
}

/* One decode token per request, the last of its row's last block. */
static void decode_batch(const bench *b, uint32_t requests,
                         const uint32_t *lengths, cl_mem *qsl,
                         cl_mem *positions) {
  int32_t *starts = malloc((requests + 1) * sizeof *starts);
  int64_t *last = malloc(requests * sizeof *last);
  if (!starts || !last) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r <= requests; ++r) starts[r] = (int32_t)r;
  for (uint32_t r = 0; r < requests; ++r)
    last[r] = (int64_t)lengths[r] * EXPORT_BLOCK - 1;
  *qsl = bench_upload(b, starts, (requests + 1) * sizeof *starts);
  *positions = bench_upload(b, last, requests * sizeof *last);
  free(starts);
  free(last);
}

/* The CSR arrays built on the host from the host rows: a prefix sum of the
   pages and a copy of each row's pages. Returns the pages in all. */
static int32_t host_export(const clbt_table *table, uint32_t requests,
                           const uint32_t *lengths, int32_t *indptr,
                           int32_t *indices, int32_t *last_page_len) {
  const int32_t *rows = clbt_table_host_data(table);
  uint32_t width = clbt_table_width(table);
  indptr[0] = 0;
  for (uint32_t r = 0; r < requests; ++r) {
    indptr[r + 1] = indptr[r] + (int32_t)lengths[r];
    for (uint32_t p = 0; p < lengths[r]; ++p)
      indices[indptr[r] + (int32_t)p] = rows[(size_t)r * width + p];
    last_page_len[r] = EXPORT_BLOCK;
  }
  return indptr[requests];
}

/* What an export call needs: the table (or its twin on the profiling
   queue) and the request. */
typedef struct export_call {
  clbt_table *table, *profiled;
  const clbt_export_request *request;
} export_call;

static void run_export(bench *b, void *context, cl_event *event) {
  (void)b;
  const export_call *c = context;
  bench_check(clbt_table_enqueue_export(event ? c->profiled : c->table,
                                        c->request, 0, NULL, event),
              "export");
}

/* The host build's arguments and outputs. */
typedef struct host_export_call {
  const clbt_table *table;
  uint32_t requests;
  const uint32_t *lengths;
  int32_t *indptr, *indices, *last_page_len, pages;
} host_export_call;

static void run_host_export(bench *b, void *context, cl_event *event) {
  (void)b, (void)event;
  host_export_call *c = context;
  c->pages = host_export(c->table, c->requests, c->lengths, c->indptr,
                         c->indices, c->last_page_len);
}

/* The host build's time; *pages gets its total, which the device's indptr
   must end with. */
static double time_host_export(bench *b, const clbt_table *table,
                               uint32_t requests, const uint32_t *lengths,
                               int32_t *pages) {
  host_export_call c = {
      table, requests, lengths, malloc((requests + 1) * sizeof(int32_t)),
      malloc((size_t)requests * EXPORT_MAX_BLOCKS * sizeof(int32_t)),
      malloc(requests * sizeof(int32_t)), 0};
  if (!c.indptr || !c.indices || !c.last_page_len)
    bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  const bench_call call = {run_host_export, &c, BENCH_HOST};
  double us;
  bench_time(b, 1, &call, &us);
  *pages = c.pages;
  free(c.indptr);
  free(c.indices);
  free(c.last_page_len);
  return us;
}

/*
 * The parts of the export a caller can ask for, each timed beside the
 * base export: the context CSR, the dense page table at the longest row's
 * pitch and at the table's width, and both.
 */
typedef struct export_variant {
  const char *suffix;
  uint32_t flags, pitch;
} export_variant;

static const export_variant variants[] = {
    {"", 0, 0},
    {"+context", CLBT_EXPORT_CONTEXT, 0},
    {"+dense-512", CLBT_EXPORT_DENSE, EXPORT_MAX_BLOCKS},
    {"+dense-width", CLBT_EXPORT_DENSE, 0},
    {"+context+dense-512", CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE,
     EXPORT_MAX_BLOCKS},
};
#define NUM_VARIANTS (sizeof variants / sizeof variants[0])

/* The device's last indptr entry, which the host's page count must be. */
static void check_pages(bench *b, const clbt_table *table, uint32_t requests,
                        int32_t host_pages) {
  int32_t device_pages = -1;
  clbt_export_buffers buffers;
  bench_check(clbt_table_export_buffers(table, &buffers), "export buffers");
  bench_check_cl(clEnqueueReadBuffer(b->queue, buffers.paged_kv_indptr, CL_TRUE,
                                     requests * sizeof device_pages,
                                     sizeof device_pages, &device_pages, 0,
                                     NULL, NULL),
                 "read indptr");
  if (device_pages != host_pages) {
    fprintf(stderr, "clbt bench: the export counted %d pages, the host %d\n",
            (int)device_pages, (int)host_pages);
    exit(1);
  }
}

/* Times the export of one decode batch, in each variant, and adds their
   records. */
static void export_case(bench *b, report *section, uint32_t requests) {
  uint32_t *lengths = malloc(requests * sizeof *lengths);
  if (!lengths) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  uint64_t seed = b->rng;
  clbt_table *table = decode_table(b, b->device, requests, lengths);
  cl_mem qsl, positions;
  decode_batch(b, requests, lengths, &qsl, &positions);
  clbt_export_request request[NUM_VARIANTS];
  export_call c[NUM_VARIANTS];
  bench_call calls[NUM_VARIANTS + 1], device_calls[NUM_VARIANTS];
  for (size_t v = 0; v < NUM_VARIANTS; ++v) {
    request[v] = (clbt_export_request){.num_reqs = requests,
                                       .query_start_loc = qsl,
                                       .positions = positions,
                                       .num_tokens = requests,
                                       .flags = variants[v].flags,
                                       .dense_row_pitch = variants[v].pitch};
    c[v] = (export_call){table, NULL, &request[v]};
    calls[v] = (bench_call){run_export, &c[v], BENCH_TO_COMPLETION};
    device_calls[v] = (bench_call){run_export, &c[v], BENCH_DEVICE};
  }
  calls[NUM_VARIANTS] = (bench_call){bench_run_empty, NULL, BENCH_TO_COMPLETION};
  double call[NUM_VARIANTS + 1], device[NUM_VARIANTS];
  bench_time(b, NUM_VARIANTS + 1, calls, call);
  double empty_us = call[NUM_VARIANTS];
  int32_t host_pages = 0;
  double host = time_host_export(b, table, requests, lengths, &host_pages);
  check_pages(b, table, requests, host_pages);
  b->rng = seed; /* the same rows on the profiling queue */
  clbt_table *profiled = decode_table(b, b->profiled, requests, lengths);
  for (size_t v = 0; v < NUM_VARIANTS; ++v) c[v].profiled = profiled;
  bench_time(b, NUM_VARIANTS, device_calls, device);
  clbt_table_destroy(profiled);
  clbt_table_destroy(table);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  free(lengths);
  for (size_t v = 0; v < NUM_VARIANTS; ++v) {
    char name[48];
    snprintf(name, sizeof name, "decode-%u%s", (unsigned)requests,
             variants[v].suffix);
    report *record = bench_record(section, name);
    report_number(record, "call_us", call[v], 1);
    report_number(record, "empty_us", empty_us, 1);
    report_number(record, "call_over_empty", call[v] / empty_us, 2);
    report_number(record, "device_us", device[v], 2);
    report_number(record, "host_build_us", host, 1);
    report_number(record, "call_over_export", call[v] / call[0], 2);
    report_number(record, "device_over_export", device[v] / device[0], 2);
  }
}

static void bench_export(bench *b) {
  char caption[320];
  snprintf(caption, sizeof caption,
           "the export for a decode batch, rows of %d-%d blocks of %d, alone "
           "and with the context CSR and the dense page table (pitch %d or "
           "the width); medians of %u runs, microseconds; call = enqueue to "
           "completion; host_build = the CSR arrays built on the host",
           EXPORT_MIN_BLOCKS, EXPORT_MAX_BLOCKS, EXPORT_BLOCK,
           EXPORT_MAX_BLOCKS, (unsigned)b->options.runs);
  report *section = bench_section(b, "export", caption);
  export_case(b, section, 256);
  export_case(b, section, 1024);
}

const bench_section_entry bench_export_section = {"export", bench_export};
