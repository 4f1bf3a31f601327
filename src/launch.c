/*
 * Slot-mapping launches: the kernel of cl/slot_mapping.cl specialised for
 * 1..8 tables (one table, or the token-mapping groups of a multi-group
 * table), bound to their buffers, with a geometry chosen for the device.
 */
#include "clbt_internal.h"

#include <stdio.h>

/* Kernel arguments before the per-group ones, and per group. */
enum {
  ARG_NUM_REQS,
  ARG_NUM_TOKENS,
  ARG_MAX_NUM_TOKENS,
  ARG_QUERY_START_LOC,
  ARG_POSITIONS,
  ARG_QSL_CACHE,
  ARGS_BEFORE_GROUPS
};
enum {
  GROUP_ARG_STORAGE,
  GROUP_ARG_ROWS_AT,
  GROUP_ARG_ROW_STRIDE,
  GROUP_ARG_ROW_LENGTHS_AT,
  GROUP_ARG_SLOTS_AT,
  GROUP_ARG_REJECTED_TOKENS_AT,
  ARGS_PER_GROUP
};

/* Work a CPU work-group takes before another compute unit joins. */
#define CLBT__CPU_ITEMS_PER_GROUP 32768

/* Eight groups of five numbers of at most ten digits, and the rest. */
#define CLBT__SPEC_OPTIONS_SIZE CLBT__SPECIFIC_OPTIONS_SIZE

void clbt__geometry(const clbt_device *device, size_t kernel_max_group,
                    size_t items, size_t *global_size, size_t *local_size) {
  size_t limit = kernel_max_group < 256 ? kernel_max_group : 256;
  size_t local = 1;
  while (local * 2 <= limit) local *= 2;
  size_t groups = (items + local - 1) / local;
  /* PoCL pays a large fixed cost per work-group and runs each group's
     work-items as a loop: work-groups of one work-item, walking long runs
     with unit-stride loops that vectorise, are cheapest; a second one pays
     only with tens of thousands of items (docs/benchmarks.md). */
  if (device->properties.type & CL_DEVICE_TYPE_CPU) {
    size_t units = device->properties.compute_units;
    local = 1;
    groups = items / CLBT__CPU_ITEMS_PER_GROUP;
    groups = groups < 1 ? 1 : groups > units ? units : groups;
  }
  *local_size = local;
  *global_size = (groups ? groups : 1) * local;
}

clbt_status clbt__check_wait_list(cl_uint num_events,
                                  const cl_event *wait_list) {
  if ((num_events == 0) != (wait_list == NULL))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "wait_list is %s with num_events %u",
                      wait_list ? "not NULL" : "NULL", (unsigned)num_events);
  return CLBT_SUCCESS;
}

/*
 * query_start_loc is searched in local memory when a copy of it takes at
 * most a quarter of the device's local memory (12 KiB, 3071 requests, on a
 * 48 KiB GPU), leaving room for other work-groups on the same unit.
 */
static size_t qsl_cache_bytes(const clbt_device *device,
                              uint32_t max_num_reqs) {
  size_t bytes = ((size_t)max_num_reqs + 1) * sizeof(cl_int);
  return bytes <= device->properties.local_mem_size / 4 ? bytes : 0;
}

clbt_status clbt__enqueue_marker(cl_command_queue queue, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = CLBT_SUCCESS;
  if (event || num_events)
    CLBT__CL_TRY(clEnqueueMarkerWithWaitList(queue, num_events, wait_list,
                                             event),
                 status, done);
done:
  return status;
}

/* "-DCLBT_QSL_IN_LOCAL=1 -DCLBT_NUM_GROUPS=2 -DCLBT_GROUP_0=16,1,1,0,1 ..." */
static void format_options(const clbt__group_spec *const *specs,
                           uint32_t num_groups, bool qsl_in_local,
                           char *options) {
  int used = snprintf(options, CLBT__SPEC_OPTIONS_SIZE,
                      "-DCLBT_PAD_SLOT_ID=%d -DCLBT_QSL_IN_LOCAL=%d "
                      "-DCLBT_NUM_GROUPS=%u",
                      CLBT_PAD_SLOT_ID, qsl_in_local ? 1 : 0,
                      (unsigned)num_groups);
  for (uint32_t g = 0; g < num_groups; ++g) {
    const clbt__group_spec *spec = specs[g];
    used += snprintf(options + used, CLBT__SPEC_OPTIONS_SIZE - (size_t)used,
                     " -DCLBT_GROUP_%u=%u,%u,%u,%u,%u", (unsigned)g,
                     (unsigned)spec->kv_block_size,
                     (unsigned)spec->blocks_per_kv_block,
                     (unsigned)spec->cp_world_size, (unsigned)spec->cp_rank,
                     (unsigned)spec->cp_interleave_size);
  }
}

/* One buffer and the offsets of its regions: see clbt__region. */
static clbt_status bind_group(cl_kernel kernel, uint32_t g,
                              const clbt_table *table) {
  clbt_status status = CLBT_SUCCESS;
  cl_uint first = ARGS_BEFORE_GROUPS + g * ARGS_PER_GROUP;
  cl_uint row_stride = table->layout.width;
  const cl_ulong *at = table->region_words;
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_STORAGE,
                              sizeof(cl_mem), &table->storage),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_ROWS_AT,
                              sizeof(cl_ulong), &at[CLBT__ROWS]),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_ROW_STRIDE,
                              sizeof row_stride, &row_stride),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_ROW_LENGTHS_AT,
                              sizeof(cl_ulong), &at[CLBT__ROW_LENGTHS]),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_SLOTS_AT,
                              sizeof(cl_ulong), &at[CLBT__SLOTS]),
               status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, first + GROUP_ARG_REJECTED_TOKENS_AT,
                              sizeof(cl_ulong), &at[CLBT__REJECTED_TOKENS]),
               status, done);
done:
  return status;
}

clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program) {
  char options[CLBT__SPEC_OPTIONS_SIZE];
  format_options(specs, num_groups, qsl_cache_bytes(device, max_num_reqs) > 0,
                 options);
  return clbt__program_get(device, CLBT__SOURCE_SLOT_MAPPING, options, program);
}

clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *tables,
                              uint32_t num_tables) {
  const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
  cl_program program;
  cl_int error = CL_SUCCESS;
  size_t kernel_max_group = 0;
  clbt_device *device = tables[0]->device;
  cl_uint max_tokens = tables[0]->layout.max_num_batched_tokens;
  uint32_t max_num_reqs = tables[0]->layout.max_num_reqs;
  /* A zero-sized local argument is invalid; the global variant ignores it. */
  size_t cache_bytes = qsl_cache_bytes(device, max_num_reqs);
  for (uint32_t g = 0; g < num_tables; ++g) specs[g] = &tables[g]->layout.spec;
  clbt_status status = clbt__launch_program(device, specs, num_tables,
                                            max_num_reqs, &program);
  if (status) return status;
  launch->kernel = clCreateKernel(program, "clbt_slot_mapping", &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, fail);
  CLBT__CL_TRY(clSetKernelArg(launch->kernel, ARG_MAX_NUM_TOKENS,
                              sizeof max_tokens, &max_tokens),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(launch->kernel, ARG_QSL_CACHE,
                              cache_bytes ? cache_bytes : sizeof(cl_int), NULL),
               status, fail);
  for (uint32_t g = 0; g < num_tables && !status; ++g)
    status = bind_group(launch->kernel, g, tables[g]);
  if (status) goto fail;
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(launch->kernel, device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, fail);
  /* Every slot of every group is written by every call. */
  clbt__geometry(device, kernel_max_group, (size_t)max_tokens * num_tables,
                 &launch->global_size, &launch->local_size);
  return CLBT_SUCCESS;
fail:
  clbt__launch_release(launch);
  return status;
}

void clbt__launch_release(clbt__launch *launch) {
  if (launch->kernel) clReleaseKernel(launch->kernel);
  launch->kernel = NULL;
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

clbt_status clbt__check_batch_arguments(const clbt_table *table,
                                        uint32_t num_reqs,
                                        cl_mem query_start_loc,
                                        cl_mem positions, uint32_t num_tokens,
                                        cl_uint num_events,
                                        const cl_event *wait_list) {
  if (!query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "query_start_loc is NULL");
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
  if (!status) status = clbt__check_wait_list(num_events, wait_list);
  return status;
}

clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 cl_command_queue queue, uint32_t num_reqs,
                                 cl_mem query_start_loc, cl_mem positions,
                                 uint32_t num_tokens, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = CLBT_SUCCESS;
  cl_kernel k = launch->kernel;
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
  CLBT__CL_TRY(clEnqueueNDRangeKernel(queue, k, 1, NULL, &launch->global_size,
                                      &launch->local_size, num_events,
                                      wait_list, event),
               status, done);
done:
  return status;
}
