/*
 * One block table: its layout, its buffers, commit and the slot-mapping
 * launch. The row operations are in table_rows.c, the host reference in
 * reference.c.
 */
#include "clbt_internal.h"

#include <stdlib.h>
#include <string.h>

/* Kernel argument indices, in the order of clbt_slot_mapping's parameters. */
enum {
  ARG_NUM_REQS,
  ARG_NUM_TOKENS,
  ARG_MAX_NUM_TOKENS,
  ARG_QUERY_START_LOC,
  ARG_POSITIONS,
  ARG_BLOCK_TABLE,
  ARG_ROW_STRIDE,
  ARG_ROW_LENGTHS,
  ARG_SLOT_MAPPING,
  ARG_REJECTED_TOKENS
};

static clbt_status require_nonzero(uint32_t value, const char *name) {
  if (value == 0)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->%s is 0; it must be >= 1",
                      name);
  return CLBT_SUCCESS;
}

static clbt_status check_cp(const clbt_table_config *config,
                            clbt__kernel_spec *spec) {
  spec->cp_world_size = config->cp_world_size ? config->cp_world_size : 1;
  spec->cp_rank = config->cp_rank;
  spec->cp_interleave_size =
      config->cp_interleave_size ? config->cp_interleave_size : 1;
  if (spec->cp_rank >= spec->cp_world_size)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_rank %u is not below cp_world_size %u",
                      (unsigned)spec->cp_rank, (unsigned)spec->cp_world_size);
  if (config->block_size % spec->cp_interleave_size != 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_interleave_size %u does not divide "
                      "block_size %u",
                      (unsigned)spec->cp_interleave_size,
                      (unsigned)config->block_size);
  return CLBT_SUCCESS;
}

/* Both host arrays and every device buffer must be addressable. */
static clbt_status check_sizes(const clbt__table_layout *layout) {
  if ((size_t)layout->max_num_reqs >
      SIZE_MAX / sizeof(int32_t) / layout->width)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "max_num_reqs %u x width %u int32 exceeds SIZE_MAX",
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  return CLBT_SUCCESS;
}

clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout) {
  clbt_status status = require_nonzero(config->block_size, "block_size");
  if (!status) status = require_nonzero(config->max_num_reqs, "max_num_reqs");
  if (!status)
    status = require_nonzero(config->max_num_blocks_per_req,
                             "max_num_blocks_per_req");
  if (!status)
    status = require_nonzero(config->max_num_batched_tokens,
                             "max_num_batched_tokens");
  if (status) return status;
  /* The kernel indexes requests and tokens with int32, as vLLM does. */
  if (config->max_num_reqs > INT32_MAX ||
      config->max_num_batched_tokens > INT32_MAX)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->%s %u exceeds INT32_MAX",
                      config->max_num_reqs > INT32_MAX
                          ? "max_num_reqs"
                          : "max_num_batched_tokens",
                      (unsigned)(config->max_num_reqs > INT32_MAX
                                     ? config->max_num_reqs
                                     : config->max_num_batched_tokens));
  if (config->slot_mode != CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT &&
      config->slot_mode != CLBT_SLOT_MODE_NONE)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->slot_mode %d is unknown",
                      (int)config->slot_mode);

  memset(layout, 0, sizeof *layout);
  status = clbt_block_table_width(config->max_num_blocks_per_req,
                                  config->block_size, config->kernel_block_size,
                                  0, &layout->width);
  if (!status) status = check_cp(config, &layout->spec);
  if (status) return status;
  layout->kernel_block_size =
      config->kernel_block_size ? config->kernel_block_size : config->block_size;
  layout->spec.kv_block_size = config->block_size;
  layout->spec.blocks_per_kv_block = config->block_size / layout->kernel_block_size;
  layout->max_num_reqs = config->max_num_reqs;
  layout->max_num_batched_tokens = config->max_num_batched_tokens;
  layout->slot_mode = config->slot_mode;
  return check_sizes(layout);
}

/*
 * A GPU gets one token per work-item. A CPU device pays a high fixed cost
 * per work-group, so it gets one work-group per compute unit, whose
 * work-items loop over the tokens (the kernel strides by the grid size).
 */
static void choose_geometry(clbt_table *table, size_t kernel_max_group) {
  const clbt__device_properties *device = &table->device->properties;
  size_t limit = kernel_max_group < 256 ? kernel_max_group : 256;
  size_t local = 1;
  while (local * 2 <= limit) local *= 2;
  size_t groups = (table->layout.max_num_batched_tokens + local - 1) / local;
  if ((device->type & CL_DEVICE_TYPE_CPU) && groups > device->compute_units)
    groups = device->compute_units ? device->compute_units : 1;
  table->local_size = local;
  table->global_size = groups * local;
}

/* A failure names the buffer and its size: a table too large for the
   device fails here. */
static clbt_status create_buffer(const clbt_table *table, const char *name,
                                 size_t size, cl_mem *buffer) {
  cl_int error = CL_SUCCESS;
  *buffer = clCreateBuffer(table->device->context, CL_MEM_READ_WRITE, size,
                           NULL, &error);
  if (error != CL_SUCCESS)
    return clbt__prefix_error(clbt__cl_fail(error, "clCreateBuffer"),
                              "%s buffer of %zu bytes", name, size);
  return CLBT_SUCCESS;
}

static clbt_status fill(const clbt_table *table, cl_mem buffer,
                        const void *pattern, size_t pattern_size, size_t size) {
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clEnqueueFillBuffer(table->device->queue, buffer, pattern,
                                   pattern_size, 0, size, 0, NULL, NULL),
               status, done);
done:
  return status;
}

static size_t rows_bytes(const clbt_table *table) {
  return (size_t)table->layout.max_num_reqs * table->layout.width *
         sizeof(int32_t);
}

/* Creates the device buffers: zeroed rows, pad-filled slot mapping. */
static clbt_status create_buffers(clbt_table *table) {
  const cl_int zero = 0;
  const cl_long pad = CLBT_PAD_SLOT_ID;
  size_t lengths_bytes = table->layout.max_num_reqs * sizeof(int32_t);
  size_t slots_bytes = table->layout.max_num_batched_tokens * sizeof(cl_long);
  clbt_status status = create_buffer(table, "rows", rows_bytes(table),
                                     &table->device_rows);
  if (!status)
    status = create_buffer(table, "row lengths", lengths_bytes,
                           &table->device_row_lengths);
  if (!status)
    status = create_buffer(table, "slot mapping", slots_bytes,
                           &table->slot_mapping);
  if (!status)
    status = create_buffer(table, "rejected-token counter", sizeof(cl_uint),
                           &table->rejected_tokens);
  if (!status)
    status = fill(table, table->device_rows, &zero, sizeof zero,
                  rows_bytes(table));
  if (!status)
    status = fill(table, table->device_row_lengths, &zero, sizeof zero,
                  lengths_bytes);
  if (!status)
    status = fill(table, table->slot_mapping, &pad, sizeof pad, slots_bytes);
  if (!status)
    status = fill(table, table->rejected_tokens, &zero, sizeof zero,
                  sizeof(cl_uint));
  return status;
}

/* Builds or finds the program, creates the kernel, sets its fixed args. */
static clbt_status create_kernel(clbt_table *table) {
  clbt_status status = CLBT_SUCCESS;
  cl_program program;
  cl_int error = CL_SUCCESS;
  size_t kernel_max_group = 0;
  cl_uint max_tokens = table->layout.max_num_batched_tokens;
  cl_uint row_stride = table->layout.width;
  status = clbt__program_get(table->device, &table->layout.spec, &program);
  if (status) return status;
  table->kernel = clCreateKernel(program, CLBT__SLOT_MAPPING_KERNEL, &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, done);
  cl_kernel k = table->kernel;
  CLBT__CL_TRY(clSetKernelArg(k, ARG_MAX_NUM_TOKENS, sizeof max_tokens,
                              &max_tokens),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_BLOCK_TABLE, sizeof(cl_mem),
                              &table->device_rows),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_ROW_STRIDE, sizeof row_stride,
                              &row_stride),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_ROW_LENGTHS, sizeof(cl_mem),
                              &table->device_row_lengths),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_SLOT_MAPPING, sizeof(cl_mem),
                              &table->slot_mapping),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_REJECTED_TOKENS, sizeof(cl_mem),
                              &table->rejected_tokens),
               status, done);
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(k, table->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, done);
  choose_geometry(table, kernel_max_group);
done:
  return status;
}

clbt_status clbt_table_create(clbt_device *device,
                              const clbt_table_config *config,
                              clbt_table **out) {
  if (!device || !config || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !device ? "device" : !config ? "config" : "out");
  clbt__table_layout layout;
  clbt_status status = clbt__table_layout_init(config, &layout);
  if (status) return status;

  clbt_table *table = calloc(1, sizeof *table);
  if (!table)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a table");
  clbt__device_retain(device);
  table->device = device;
  table->layout = layout;
  table->rows = calloc((size_t)layout.max_num_reqs * layout.width,
                       sizeof *table->rows);
  table->row_lengths = calloc(layout.max_num_reqs, sizeof *table->row_lengths);
  if (!table->rows || !table->row_lengths)
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                        "no memory for %u rows of width %u",
                        (unsigned)layout.max_num_reqs, (unsigned)layout.width);
  if (!status) status = create_buffers(table);
  /* A NONE table maps no tokens, so it needs no kernel. */
  if (!status && layout.slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT)
    status = create_kernel(table);
  if (status) {
    clbt_table_destroy(table);
    return status;
  }
  *out = table;
  return CLBT_SUCCESS;
}

void clbt_table_destroy(clbt_table *table) {
  if (!table) return;
  if (table->kernel) clReleaseKernel(table->kernel);
  cl_mem buffers[] = {table->device_rows, table->device_row_lengths,
                      table->slot_mapping, table->rejected_tokens};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    if (buffers[i]) clReleaseMemObject(buffers[i]);
  free(table->rows);
  free(table->row_lengths);
  clbt_device_release(table->device);
  free(table);
}

clbt_status clbt_table_prepare(clbt_device *device,
                               const clbt_table_config *config) {
  if (!device || !config)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !device ? "device" : "config");
  clbt__table_layout layout;
  cl_program program;
  clbt_status status = clbt__table_layout_init(config, &layout);
  if (!status && layout.slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT)
    status = clbt__program_get(device, &layout.spec, &program);
  return status;
}

clbt_status clbt_table_commit(clbt_table *table, uint32_t num_reqs) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  if (num_reqs > table->layout.max_num_reqs)
    return clbt__fail(CLBT_TOO_MANY_REQUESTS,
                      "num_reqs %u exceeds max_num_reqs %u", (unsigned)num_reqs,
                      (unsigned)table->layout.max_num_reqs);
  if (num_reqs == 0) return CLBT_SUCCESS;
  clbt_status status = CLBT_SUCCESS;
  cl_command_queue queue = table->device->queue;
  /* Blocking, so the host rows are free to change once commit returns. */
  CLBT__CL_TRY(clEnqueueWriteBuffer(
                   queue, table->device_rows, CL_TRUE, 0,
                   (size_t)num_reqs * table->layout.width * sizeof(int32_t),
                   table->rows, 0, NULL, NULL),
               status, done);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, table->device_row_lengths, CL_TRUE,
                                    0, num_reqs * sizeof(uint32_t),
                                    table->row_lengths, 0, NULL, NULL),
               status, done);
done:
  return status;
}

clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens) {
  if (num_reqs > table->layout.max_num_reqs)
    return clbt__fail(CLBT_TOO_MANY_REQUESTS,
                      "num_reqs %u exceeds max_num_reqs %u", (unsigned)num_reqs,
                      (unsigned)table->layout.max_num_reqs);
  if (num_tokens > table->layout.max_num_batched_tokens)
    return clbt__fail(CLBT_TOO_MANY_TOKENS,
                      "num_tokens %u exceeds max_num_batched_tokens %u",
                      (unsigned)num_tokens,
                      (unsigned)table->layout.max_num_batched_tokens);
  return CLBT_SUCCESS;
}

/* A caller's buffer must be in the table's context and hold `needed` bytes. */
static clbt_status check_buffer(const clbt_table *table, cl_mem buffer,
                                const char *name, size_t needed,
                                const char *count_name, uint32_t count) {
  clbt_status status = CLBT_SUCCESS;
  cl_context context;
  size_t size = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof context,
                                  &context, NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size,
                                  NULL),
               status, done);
  if (context != table->device->context)
    status = clbt__fail(CLBT_CONTEXT_MISMATCH,
                        "%s belongs to another OpenCL context than the "
                        "table's device",
                        name);
  else if (size < needed)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "%s holds %zu bytes; %s %u needs %zu", name, size,
                        count_name, (unsigned)count, needed);
done:
  return status;
}

clbt_status clbt_table_compute_slot_mapping(clbt_table *table,
                                            uint32_t num_reqs,
                                            cl_mem query_start_loc,
                                            cl_mem positions,
                                            uint32_t num_tokens) {
  if (!table || !query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "query_start_loc");
  if (!positions && num_tokens > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens %u",
                      (unsigned)num_tokens);
  clbt_status status = clbt__check_batch(table, num_reqs, num_tokens);
  if (!status)
    status = check_buffer(table, query_start_loc, "query_start_loc",
                          ((size_t)num_reqs + 1) * sizeof(int32_t), "num_reqs",
                          num_reqs);
  if (!status && positions)
    status = check_buffer(table, positions, "positions",
                          (size_t)num_tokens * sizeof(int64_t), "num_tokens",
                          num_tokens);
  if (status || table->layout.slot_mode == CLBT_SLOT_MODE_NONE) return status;

  cl_kernel k = table->kernel;
  CLBT__CL_TRY(clSetKernelArg(k, ARG_NUM_REQS, sizeof num_reqs, &num_reqs),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_NUM_TOKENS, sizeof num_tokens,
                              &num_tokens),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_QUERY_START_LOC, sizeof(cl_mem),
                              &query_start_loc),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(k, ARG_POSITIONS, sizeof(cl_mem),
                              positions ? &positions : NULL),
               status, done);
  CLBT__CL_TRY(clEnqueueNDRangeKernel(table->device->queue, k, 1, NULL,
                                      &table->global_size, &table->local_size,
                                      0, NULL, NULL),
               status, done);
done:
  return status;
}

clbt_status clbt_table_clear(clbt_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  const cl_int zero = 0;
  clbt_status status = fill(table, table->device_rows, &zero, sizeof zero,
                            rows_bytes(table));
  if (!status)
    status = fill(table, table->device_row_lengths, &zero, sizeof zero,
                  table->layout.max_num_reqs * sizeof(int32_t));
  if (status) return status;
  memset(table->rows, 0, rows_bytes(table));
  memset(table->row_lengths, 0,
         table->layout.max_num_reqs * sizeof *table->row_lengths);
  return CLBT_SUCCESS;
}

clbt_status clbt_table_read_rejected_tokens(clbt_table *table,
                                            uint32_t *count) {
  if (!table || !count)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "count");
  clbt_status status = CLBT_SUCCESS;
  cl_uint value = 0;
  CLBT__CL_TRY(clEnqueueReadBuffer(table->device->queue, table->rejected_tokens,
                                   CL_TRUE, 0, sizeof value, &value, 0, NULL,
                                   NULL),
               status, done);
  *count = value;
done:
  return status;
}

clbt_status clbt_table_reset_rejected_tokens(clbt_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  const cl_uint zero = 0;
  return fill(table, table->rejected_tokens, &zero, sizeof zero, sizeof zero);
}

uint32_t clbt_table_width(const clbt_table *table) {
  return table ? table->layout.width : 0;
}

const int32_t *clbt_table_host_data(const clbt_table *table) {
  return table ? table->rows : NULL;
}

cl_mem clbt_table_device_data(const clbt_table *table) {
  return table ? table->device_rows : NULL;
}

cl_mem clbt_table_slot_mapping(const clbt_table *table) {
  return table ? table->slot_mapping : NULL;
}

cl_mem clbt_table_rejected_tokens(const clbt_table *table) {
  return table ? table->rejected_tokens : NULL;
}
