/*
 * Commits: the row operations record what they change (clbt__changes), and
 * a commit moves only that:
 *
 *   SCATTER  one upload of a packet of changed cells and lengths, then a
 *            kernel that scatters it. Nothing waits.
 *   WHOLE    rows [0, num_reqs) in one blocking write, when the packet would
 *            be half their size or more.
 *
 * Mapping the committed copy and writing cells in place was measured too,
 * on PoCL where it costs no copy: its blocking map made it slower than
 * SCATTER (docs/benchmarks.md).
 *
 * A scatter packet is a copy, so the host rows may change as soon as commit
 * returns; the packet itself is reused only once its upload has finished.
 */
#include "clbt_internal.h"

#include <stdlib.h>
#include <string.h>

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs) {
  changes->listed_rows = calloc(max_num_reqs, sizeof *changes->listed_rows);
  changes->listed = calloc(max_num_reqs, sizeof *changes->listed);
  changes->low = calloc(max_num_reqs, sizeof *changes->low);
  changes->high = calloc(max_num_reqs, sizeof *changes->high);
  changes->extent = calloc(max_num_reqs, sizeof *changes->extent);
  changes->num_listed = 0;
  if (changes->listed_rows && changes->listed && changes->low &&
      changes->high && changes->extent)
    return CLBT_SUCCESS;
  clbt__changes_free(changes);
  return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                    "no memory to track changes of %u rows",
                    (unsigned)max_num_reqs);
}

void clbt__changes_free(clbt__changes *changes) {
  free(changes->listed_rows);
  free(changes->listed);
  free(changes->low);
  free(changes->high);
  free(changes->extent);
  memset(changes, 0, sizeof *changes);
}

void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs) {
  for (uint32_t i = 0; i < changes->num_listed; ++i)
    changes->listed[changes->listed_rows[i]] = false;
  changes->num_listed = 0;
  memset(changes->extent, 0, max_num_reqs * sizeof *changes->extent);
}

void clbt__changes_mark(clbt_table *table, uint32_t row, uint32_t low,
                        uint32_t high) {
  clbt__changes *changes = &table->changes;
  if (!changes->listed[row]) {
    changes->listed[row] = true;
    changes->listed_rows[changes->num_listed++] = row;
    changes->low[row] = UINT32_MAX;
    changes->high[row] = 0;
  }
  if (low >= high) return; /* only the length changed */
  if (low < changes->low[row]) changes->low[row] = low;
  if (high > changes->high[row]) changes->high[row] = high;
}

static uint32_t changed_cells(const clbt__changes *changes, uint32_t row) {
  return changes->high[row] > changes->low[row]
             ? changes->high[row] - changes->low[row]
             : 0;
}

/* Unlists the rows below num_reqs, which the commit brought in sync. */
static void unlist_committed(clbt__changes *changes, uint32_t num_reqs) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row < num_reqs)
      changes->listed[row] = false;
    else
      changes->listed_rows[kept++] = row;
  }
  changes->num_listed = kept;
}

/* The listed rows below num_reqs: how many, and their changed cells. */
typedef struct pending {
  uint32_t rows;
  uint64_t cells;
} pending;

static pending count_pending(const clbt__changes *changes, uint32_t num_reqs) {
  pending p = {0, 0};
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= num_reqs) continue;
    ++p.rows;
    p.cells += changed_cells(changes, row);
  }
  return p;
}

static uint64_t packet_words(const pending *p) {
  return 2 * (uint64_t)p->rows + 3 * p->cells;
}

static clbt_commit_mode choose_mode(const clbt_table *table, uint32_t num_reqs,
                                    const pending *p) {
  if (table->commit_mode != CLBT_COMMIT_AUTO) return table->commit_mode;
  uint64_t whole_words = (uint64_t)num_reqs * (table->layout.width + 1);
  /* The scatter kernel counts cells in 32 bits. */
  if (2 * packet_words(p) >= whole_words || packet_words(p) > UINT32_MAX)
    return CLBT_COMMIT_WHOLE;
  return CLBT_COMMIT_SCATTER;
}

static clbt_status commit_whole(clbt_table *table, uint32_t num_reqs,
                                cl_uint num_events, const cl_event *wait_list,
                                cl_event *event) {
  clbt_status status = CLBT_SUCCESS;
  cl_command_queue queue = table->device->queue;
  size_t row_bytes = (size_t)num_reqs * table->layout.width * sizeof(int32_t);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, table->regions[CLBT__ROWS], CL_TRUE, 0,
                                    row_bytes, table->rows, num_events,
                                    wait_list, NULL),
               status, done);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, table->regions[CLBT__ROW_LENGTHS], CL_TRUE,
                                    0, num_reqs * sizeof(uint32_t),
                                    table->row_lengths, 0, NULL, event),
               status, done);
  table->last_commit = (clbt_commit_info){
      CLBT_COMMIT_WHOLE, num_reqs, row_bytes + num_reqs * sizeof(uint32_t)};
done:
  return status;
}

/* Waits until the slot's packet is free, and makes it hold `words`. */
static clbt_status reserve_staging(clbt_table *table, clbt__staging *slot,
                                   size_t words) {
  clbt_status status = CLBT_SUCCESS;
  if (slot->uploaded) {
    CLBT__CL_TRY(clWaitForEvents(1, &slot->uploaded), status, done);
    clReleaseEvent(slot->uploaded);
    slot->uploaded = NULL;
  }
  if (words <= slot->capacity) return CLBT_SUCCESS;
  size_t capacity = slot->capacity ? slot->capacity : 256;
  while (capacity < words) capacity *= 2;
  uint32_t *packet = realloc(slot->packet, capacity * sizeof *packet);
  if (!packet)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for a %zu-word commit packet", capacity);
  slot->packet = packet;
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(table->device->context, CL_MEM_READ_ONLY,
                                 capacity * sizeof *packet, NULL, &error);
  CLBT__CL_CHECK(error, "clCreateBuffer", status, done);
  if (slot->buffer) clReleaseMemObject(slot->buffer);
  slot->buffer = buffer;
  slot->capacity = capacity;
done:
  return status;
}

/* Lengths first, then cells, as cl/commit_scatter.cl reads them. */
static void pack(const clbt_table *table, uint32_t num_reqs, const pending *p,
                 uint32_t *packet) {
  const clbt__changes *changes = &table->changes;
  uint32_t *cell = packet + 2 * (size_t)p->rows;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= num_reqs) continue;
    *packet++ = row;
    *packet++ = table->row_lengths[row];
    const int32_t *data = table->rows + (size_t)row * table->layout.width;
    for (uint32_t column = changes->low[row]; column < changes->high[row];
         ++column) {
      *cell++ = row;
      *cell++ = column;
      *cell++ = (uint32_t)data[column];
    }
  }
}

static clbt_status scatter_kernel(clbt_table *table) {
  if (table->scatter) return CLBT_SUCCESS;
  cl_program program;
  cl_int error = CL_SUCCESS;
  clbt_status status = clbt__program_get(
      table->device, CLBT__SOURCE_COMMIT_SCATTER, "", &program);
  if (status) return status;
  table->scatter = clCreateKernel(program, "clbt_commit_scatter", &error);
  if (error) return clbt__cl_fail(error, "clCreateKernel");
  return CLBT_SUCCESS;
}

static clbt_status commit_scatter(clbt_table *table, uint32_t num_reqs,
                                  const pending *p, cl_uint num_events,
                                  const cl_event *wait_list, cl_event *event) {
  clbt__staging *slot = &table->staging[table->next_staging];
  size_t words = (size_t)packet_words(p);
  cl_uint num_lengths = p->rows, num_cells = (cl_uint)p->cells;
  cl_uint row_stride = table->layout.width;
  cl_ulong rows_at = table->region_words[CLBT__ROWS];
  cl_ulong lengths_at = table->region_words[CLBT__ROW_LENGTHS];
  size_t global, local, kernel_max_group = 0;
  clbt_status status = scatter_kernel(table);
  if (!status) status = reserve_staging(table, slot, words);
  if (status) return status;
  pack(table, num_reqs, p, slot->packet);
  cl_kernel k = table->scatter;
  CLBT__CL_TRY(clSetKernelArg(k, 0, sizeof(cl_mem), &slot->buffer), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 1, sizeof num_lengths, &num_lengths), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 2, sizeof num_cells, &num_cells), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 3, sizeof(cl_mem), &table->storage), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 4, sizeof rows_at, &rows_at), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 5, sizeof row_stride, &row_stride), status, done);
  CLBT__CL_TRY(clSetKernelArg(k, 6, sizeof lengths_at, &lengths_at), status, done);
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(k, table->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, done);
  clbt__geometry(table->device, kernel_max_group, num_lengths + num_cells,
                 &global, &local);
  CLBT__CL_TRY(clEnqueueWriteBuffer(table->device->queue, slot->buffer,
                                    CL_FALSE, 0, words * sizeof(uint32_t),
                                    slot->packet, num_events, wait_list,
                                    &slot->uploaded),
               status, done);
  table->next_staging = (table->next_staging + 1) % CLBT__STAGING_SLOTS;
  CLBT__CL_TRY(clEnqueueNDRangeKernel(table->device->queue, k, 1, NULL,
                                      &global, &local, 0, NULL, event),
               status, done);
  table->last_commit = (clbt_commit_info){CLBT_COMMIT_SCATTER, p->rows,
                                          words * sizeof(uint32_t)};
done:
  return status;
}

/* Nothing to move: still honour the wait list and hand back an event. */
static clbt_status commit_nothing(clbt_table *table, cl_uint num_events,
                                  const cl_event *wait_list, cl_event *event) {
  table->last_commit = (clbt_commit_info){CLBT_COMMIT_AUTO, 0, 0};
  return clbt__enqueue_marker(table->device->queue, num_events, wait_list,
                              event);
}

clbt_status clbt__commit(clbt_table *table, uint32_t num_reqs,
                         cl_uint num_events, const cl_event *wait_list,
                         cl_event *event) {
  pending p = count_pending(&table->changes, num_reqs);
  if (p.rows == 0) return commit_nothing(table, num_events, wait_list, event);
  clbt_status status;
  if (choose_mode(table, num_reqs, &p) == CLBT_COMMIT_SCATTER)
    status = commit_scatter(table, num_reqs, &p, num_events, wait_list, event);
  else
    status = commit_whole(table, num_reqs, num_events, wait_list, event);
  if (!status) unlist_committed(&table->changes, num_reqs);
  return status;
}

void clbt__commit_release(clbt_table *table) {
  for (unsigned i = 0; i < CLBT__STAGING_SLOTS; ++i) {
    clbt__staging *slot = &table->staging[i];
    if (slot->uploaded) {
      clWaitForEvents(1, &slot->uploaded);
      clReleaseEvent(slot->uploaded);
    }
    if (slot->buffer) clReleaseMemObject(slot->buffer);
    free(slot->packet);
  }
  if (table->scatter) clReleaseKernel(table->scatter);
}
