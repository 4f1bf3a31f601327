/*
 * The attention export: a group's committed rows as FlashInfer's CSR page
 * table and OpenVINO PagedAttention's arrays, built on the device by
 * cl/export.cl into regions of the group's allocation (clbt__region). One
 * launch per token-mapping group; each group's kernel is made on its first
 * export, with the group's buffer, offsets and constants bound once.
 */
#include "engine.h"

#include <stdint.h>

/* The kernel's arguments by name (cl/contract.h lists them), then the
   group's constants. */
enum {
#define ARGUMENT(NAME, type, name) ARG_##NAME,
  CLBT_EXPORT_FIRST_ARGUMENT(ARGUMENT)
  CLBT_EXPORT_ARGUMENTS(ARGUMENT)
#undef ARGUMENT
#define CONSTANT_ARGUMENT(g, name) ARG_CONSTANT_##name,
  CLBT_GROUP_CONSTANTS(CONSTANT_ARGUMENT, 0)
#undef CONSTANT_ARGUMENT
  NUM_ARGS
};

static bool maps_tokens(const clbt_table *group) {
  return group->layout.slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
}

/* What stays the same from call to call: the group's buffer and spec. */
static clbt_status bind_group(cl_kernel kernel, const clbt_table *group) {
  cl_uint row_stride = group->layout.width;
  cl_uint max_num_reqs = group->layout.max_num_reqs;
  const cl_ulong *at = group->region_words;
  const clbt__group_spec *spec = &group->layout.spec;
  const clbt__kernel_arg args[] = {
      {ARG_MAX_NUM_REQS, sizeof max_num_reqs, &max_num_reqs},
      {ARG_STORAGE, sizeof(cl_mem), &group->storage},
      {ARG_ROWS_AT, sizeof(cl_ulong), &at[CLBT__ROWS]},
      {ARG_ROW_STRIDE, sizeof row_stride, &row_stride},
      {ARG_ROW_LENGTHS_AT, sizeof(cl_ulong), &at[CLBT__ROW_LENGTHS]},
      {ARG_REJECTED_TOKENS_AT, sizeof(cl_ulong), &at[CLBT__REJECTED_TOKENS]},
      {ARG_INDPTR_AT, sizeof(cl_ulong), &at[CLBT__EXPORT_INDPTR]},
      {ARG_INDICES_AT, sizeof(cl_ulong), &at[CLBT__EXPORT_INDICES]},
      {ARG_LAST_PAGE_LEN_AT, sizeof(cl_ulong), &at[CLBT__EXPORT_LAST_PAGE_LEN]},
      {ARG_PAST_LENS_AT, sizeof(cl_ulong), &at[CLBT__EXPORT_PAST_LENS]},
      {ARG_SUBSEQUENCE_BEGINS_AT, sizeof(cl_ulong),
       &at[CLBT__EXPORT_SUBSEQUENCE_BEGINS]},
#define CONSTANT_VALUE(g, name) \
  {ARG_CONSTANT_##name, sizeof(cl_uint), &spec->name},
      CLBT_GROUP_CONSTANTS(CONSTANT_VALUE, 0)
#undef CONSTANT_VALUE
  };
  return clbt__set_kernel_args(kernel, args, sizeof args / sizeof args[0]);
}

void clbt__exporter_release(clbt__exporter *exporter) {
  if (exporter->kernel) clReleaseKernel(exporter->kernel);
  exporter->kernel = NULL;
}

/* The group's export kernel, bound, and its work-group size; how many
   work-groups is each batch's (export_groups). */
static clbt_status make_exporter(clbt_table *group) {
  clbt__exporter *exporter = &group->exporter;
  cl_program program;
  cl_int error = CL_SUCCESS;
  size_t kernel_max_group = 0;
  clbt_status status =
      clbt__program_get(group->device, CLBT__SOURCE_EXPORT, "", &program);
  if (status) return status;
  exporter->kernel = clCreateKernel(program, "clbt_export", &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, fail);
  status = bind_group(exporter->kernel, group);
  if (status) goto fail;
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(exporter->kernel, group->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, fail);
  exporter->local_size = clbt__local_size(group->device, kernel_max_group);
  return CLBT_SUCCESS;
fail:
  clbt__exporter_release(exporter);
  return status;
}

clbt__batch clbt__export_batch(const clbt_export_request *request) {
  return (clbt__batch){.num_reqs = request->num_reqs,
                       .query_start_loc = request->query_start_loc,
                       .positions = request->positions,
                       .num_tokens = request->num_tokens,
                       .num_reqs_padded = request->num_reqs_padded,
                       .seq_lens = request->seq_lens,
                       .idx_mapping = request->idx_mapping};
}

/* A group's worst-case page count must fit the int32 indptr. */
static clbt_status check_pages(const clbt_table *group) {
  const clbt__table_layout *layout = &group->layout;
  if ((uint64_t)layout->max_num_reqs * layout->width > INT32_MAX)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "max_num_reqs %u x width %u pages exceed INT32_MAX, "
                      "the int32 indptr's bound",
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  return CLBT_SUCCESS;
}

/*
 * Work-groups for a batch: each copies the ids of a few requests on a GPU,
 * where every work-group also scans all the counts (cheap beside the copy
 * it spreads); on a CPU, whose work-groups pay a large fixed cost, as few as
 * CLBT_EXPORT_MAX_OWN_REQUESTS allows.
 */
static size_t export_groups(const clbt_table *group, cl_uint padded) {
  size_t per_group = group->device->properties.type & CL_DEVICE_TYPE_CPU
                         ? CLBT_EXPORT_MAX_OWN_REQUESTS
                         : 8;
  size_t groups = (padded + per_group - 1) / per_group;
  return groups ? groups : 1;
}

/* A buffer argument that may be NULL: the kernel then reads its flag. */
static const cl_mem *optional(const cl_mem *buffer) {
  return *buffer ? buffer : NULL;
}

static clbt_status launch_export(clbt_table *group, const clbt__batch *batch,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event) {
  const clbt__exporter *exporter = &group->exporter;
  cl_uint padded = batch->num_reqs_padded ? batch->num_reqs_padded
                                          : batch->num_reqs;
  cl_uint has_seq_lens = batch->seq_lens != NULL;
  cl_uint has_idx_mapping = batch->idx_mapping != NULL;
  const clbt__kernel_arg args[] = {
      {ARG_NUM_REQS, sizeof batch->num_reqs, &batch->num_reqs},
      {ARG_NUM_REQS_PADDED, sizeof padded, &padded},
      {ARG_NUM_TOKENS, sizeof batch->num_tokens, &batch->num_tokens},
      {ARG_QUERY_START_LOC, sizeof(cl_mem), &batch->query_start_loc},
      {ARG_POSITIONS, sizeof(cl_mem), optional(&batch->positions)},
      {ARG_SEQ_LENS, sizeof(cl_mem), optional(&batch->seq_lens)},
      {ARG_HAS_SEQ_LENS, sizeof has_seq_lens, &has_seq_lens},
      {ARG_IDX_MAPPING, sizeof(cl_mem), optional(&batch->idx_mapping)},
      {ARG_HAS_IDX_MAPPING, sizeof has_idx_mapping, &has_idx_mapping}};
  clbt_status status = clbt__set_kernel_args(exporter->kernel, args,
                                             sizeof args / sizeof args[0]);
  if (status) return status;
  size_t global = export_groups(group, padded) * exporter->local_size;
  CLBT__CL_TRY(clEnqueueNDRangeKernel(group->device->queue, exporter->kernel,
                                      1, NULL, &global, &exporter->local_size,
                                      num_events, wait_list, event),
               status, done);
done:
  return status;
}

/* Group g of the engine (or the one group) when it is exported, or NULL. */
static clbt_table *exported(clbt_table *group, const clbt_multi_table *engine,
                            uint32_t g) {
  clbt_table *candidate = engine ? engine->groups[g] : group;
  return maps_tokens(candidate) ? candidate : NULL;
}

clbt_status clbt__check_export(clbt_table *group,
                               const clbt_multi_table *engine,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list) {
  if (!engine && !maps_tokens(group))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "the table's slot_mode is CLBT_SLOT_MODE_NONE: its rows "
                      "hold states, not pages, and it has no export");
  clbt_status status =
      clbt__check_batch_arguments(group, batch, num_events, wait_list);
  uint32_t count = engine ? engine->num_groups : 1;
  for (uint32_t g = 0; !status && g < count; ++g)
    if (exported(group, engine, g))
      status = check_pages(exported(group, engine, g));
  return status;
}

clbt_status clbt__enqueue_export(clbt_table *group,
                                 const clbt_multi_table *engine,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status =
      clbt__check_export(group, engine, batch, num_events, wait_list);
  uint32_t count = engine ? engine->num_groups : 1, first = count, last = 0;
  for (uint32_t g = 0; g < count; ++g) {
    if (!exported(group, engine, g)) continue;
    if (first == count) first = g;
    last = g;
  }
  if (status) return status;
  if (first == count)
    return clbt__enqueue_marker(group->device->queue, num_events, wait_list,
                                event);
  /* Every kernel first, so that a failure to make one enqueues nothing. */
  for (uint32_t g = first; !status && g <= last; ++g) {
    clbt_table *t = exported(group, engine, g);
    if (t && !t->exporter.kernel) status = make_exporter(t);
  }
  for (uint32_t g = first; !status && g <= last; ++g)
    if (exported(group, engine, g))
      status = launch_export(exported(group, engine, g), batch,
                             g == first ? num_events : 0,
                             g == first ? wait_list : NULL,
                             g == last ? event : NULL);
  return status;
}
