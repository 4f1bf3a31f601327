/*
 * Commits: the row operations record what they change (clbt__changes), and
 * a commit moves only that:
 *
 *   SCATTER  one upload of a packet of changed cells and lengths, then a
 *            kernel that scatters it.
 *   WHOLE    rows [0, num_reqs) and their lengths in two writes, when the
 *            packet would be half their size or more.
 *
 * Both send a copy taken at commit time from a staging slot (staging.c), so
 * the host rows may change as soon as commit returns and nothing waits for
 * the device. Mapping the committed copy and writing cells in place was
 * measured too, on PoCL where it costs no copy: its blocking map made it
 * slower than SCATTER (docs/benchmarks.md).
 */
#include "engine.h"

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

/* A scatter packet: (row, length) per row, (row, column, id) per cell. */
static uint64_t packet_words(uint64_t rows, uint64_t cells) {
  return 2 * rows + 3 * cells;
}

clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen) {
  uint64_t whole_words = (uint64_t)num_reqs * (width + 1);
  uint64_t scatter_words = packet_words(rows, cells);
  /* The scatter kernel counts lengths and cells in 32 bits. */
  bool countable = rows <= UINT32_MAX && cells <= UINT32_MAX;
  if (mode == CLBT_COMMIT_SCATTER && !countable)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "a SCATTER commit of %llu changed cells in %llu rows "
                      "exceeds the scatter kernel's count of %lu; commit in "
                      "CLBT_COMMIT_AUTO or CLBT_COMMIT_WHOLE mode",
                      (unsigned long long)cells, (unsigned long long)rows,
                      (unsigned long)UINT32_MAX);
  if (mode == CLBT_COMMIT_AUTO)
    mode = 2 * scatter_words >= whole_words || !countable ? CLBT_COMMIT_WHOLE
                                                          : CLBT_COMMIT_SCATTER;
  *chosen = mode;
  return CLBT_SUCCESS;
}

/* Hands the caller its own reference to the commit's last command. */
static clbt_status hand_back(cl_event last, cl_event *event) {
  clbt_status status = CLBT_SUCCESS;
  if (!event) return status;
  CLBT__CL_TRY(clRetainEvent(last), status, done);
  *event = last;
done:
  return status;
}

/*
 * Rows [0, num_reqs) and their lengths, from a snapshot in a staging
 * packet: two non-blocking writes, so the host rows may change at once.
 */
static clbt_status commit_whole(clbt_table *table, uint32_t num_reqs,
                                cl_uint num_events, const cl_event *wait_list,
                                cl_event *event) {
  cl_command_queue queue = table->device->queue;
  size_t cells = (size_t)num_reqs * table->layout.width;
  size_t words = cells + num_reqs;
  clbt__staging *slot = NULL;
  cl_event rows_written = NULL, lengths_written = NULL;
  clbt_status status = clbt__staging_acquire(
      &table->staging, table->device->context, words, false, &slot);
  if (status) return status;
  memcpy(slot->packet, table->rows, cells * sizeof(int32_t));
  memcpy(slot->packet + cells, table->row_lengths, num_reqs * sizeof(uint32_t));
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, table->regions[CLBT__ROWS], CL_FALSE,
                                    0, cells * sizeof(int32_t), slot->packet,
                                    num_events, wait_list, &rows_written),
               status, done);
  clbt__staging_add_reader(slot, rows_written);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, table->regions[CLBT__ROW_LENGTHS],
                                    CL_FALSE, 0, num_reqs * sizeof(uint32_t),
                                    slot->packet + cells, 0, NULL,
                                    &lengths_written),
               status, done);
  clbt__staging_add_reader(slot, lengths_written);
  status = hand_back(lengths_written, event);
  table->last_commit = (clbt_commit_info){CLBT_COMMIT_WHOLE, num_reqs,
                                          words * sizeof(uint32_t)};
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

/* The arguments of clbt_commit_scatter by name (cl/contract.h). */
enum {
#define ARGUMENT(NAME, type, name) SCATTER_ARG_##NAME,
  CLBT_COMMIT_SCATTER_FIRST_ARGUMENT(ARGUMENT)
  CLBT_COMMIT_SCATTER_ARGUMENTS(ARGUMENT)
#undef ARGUMENT
};

static clbt_status set_scatter_arguments(const clbt_table *table,
                                         const clbt__staging *slot,
                                         const pending *p) {
  cl_uint num_lengths = (cl_uint)p->rows, num_cells = (cl_uint)p->cells;
  cl_uint row_stride = table->layout.width;
  const cl_ulong *at = table->region_words;
  const clbt__kernel_arg args[] = {
      {SCATTER_ARG_PACKET, sizeof(cl_mem), &slot->buffer},
      {SCATTER_ARG_NUM_LENGTHS, sizeof num_lengths, &num_lengths},
      {SCATTER_ARG_NUM_CELLS, sizeof num_cells, &num_cells},
      {SCATTER_ARG_STORAGE, sizeof(cl_mem), &table->storage},
      {SCATTER_ARG_ROWS_AT, sizeof(cl_ulong), &at[CLBT__ROWS]},
      {SCATTER_ARG_ROW_STRIDE, sizeof row_stride, &row_stride},
      {SCATTER_ARG_ROW_LENGTHS_AT, sizeof(cl_ulong), &at[CLBT__ROW_LENGTHS]}};
  return clbt__set_kernel_args(table->scatter, args,
                               sizeof args / sizeof args[0]);
}

/* Uploads the packet of changes and scatters it: two commands, no wait. */
static clbt_status commit_scatter(clbt_table *table, uint32_t num_reqs,
                                  const pending *p, cl_uint num_events,
                                  const cl_event *wait_list, cl_event *event) {
  cl_command_queue queue = table->device->queue;
  size_t words = (size_t)packet_words(p->rows, p->cells);
  size_t global, local, kernel_max_group = 0;
  clbt__staging *slot = NULL;
  cl_event uploaded = NULL, scattered = NULL;
  clbt_status status = scatter_kernel(table);
  if (!status)
    status = clbt__staging_acquire(&table->staging, table->device->context,
                                   words, true, &slot);
  if (!status) status = set_scatter_arguments(table, slot, p);
  if (status) return status;
  pack(table, num_reqs, p, slot->packet);
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(table->scatter, table->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, done);
  clbt__geometry(table->device, kernel_max_group, p->rows + p->cells, &global,
                 &local);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, slot->buffer, CL_FALSE, 0,
                                    words * sizeof(uint32_t), slot->packet,
                                    num_events, wait_list, &uploaded),
               status, done);
  clbt__staging_add_reader(slot, uploaded);
  CLBT__CL_TRY(clEnqueueNDRangeKernel(queue, table->scatter, 1, NULL, &global,
                                      &local, 0, NULL, &scattered),
               status, done);
  clbt__staging_add_reader(slot, scattered);
  status = hand_back(scattered, event);
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

/*
 * A stale device copy (an earlier upload failed, or a call failed after
 * changing the device) is rewritten whole, every row, whatever the mode:
 * the changes no longer say what differs.
 */
clbt_status clbt__commit(clbt_table *table, uint32_t num_reqs,
                         cl_uint num_events, const cl_event *wait_list,
                         cl_event *event) {
  bool upload_failed = false;
  clbt_status status = clbt__staging_reap(&table->staging, &upload_failed);
  if (status) return status;
  if (upload_failed) table->device_stale = true;
  uint32_t rows = table->device_stale ? table->layout.max_num_reqs : num_reqs;
  pending p = count_pending(&table->changes, rows);
  clbt_commit_mode mode = CLBT_COMMIT_WHOLE;
  if (!table->device_stale) {
    if (p.rows == 0) return commit_nothing(table, num_events, wait_list, event);
    status = clbt__commit_choose(table->commit_mode, rows, table->layout.width,
                                 p.rows, p.cells, &mode);
    if (status) return status;
  }
  if (mode == CLBT_COMMIT_SCATTER)
    status = commit_scatter(table, rows, &p, num_events, wait_list, event);
  else
    status = commit_whole(table, rows, num_events, wait_list, event);
  table->device_stale = status != CLBT_SUCCESS;
  if (!status) unlist_committed(&table->changes, rows);
  return status;
}

void clbt__commit_release(clbt_table *table) {
  clbt__staging_pool_free(&table->staging);
  if (table->scatter) clReleaseKernel(table->scatter);
}
