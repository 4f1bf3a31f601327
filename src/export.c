/*
 * The attention export: a group's committed rows as FlashInfer's CSR page
 * table and OpenVINO PagedAttention's arrays, built on the device by the
 * step kernel (cl/export.cl) into regions of the group's allocation. The
 * export is work of the step kernel's, in the same launch as a step's slot
 * mapping and gather (step.c runs it); what is here are its checks.
 */
#include "engine.h"

#include <stdint.h>

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

clbt_status clbt__check_export_groups(const clbt__scope *scope) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < scope->num_launches; ++l)
    for (uint32_t g = 0; !status && g < scope->launches[l].num_groups; ++g)
      if (clbt__maps_tokens(scope->launches[l].groups[g]))
        status = check_pages(scope->launches[l].groups[g]);
  return status;
}

clbt_status clbt__check_export_target(const clbt__scope *scope) {
  if (scope->alone && !clbt__maps_tokens(scope->first))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "the table's slot_mode is CLBT_SLOT_MODE_NONE: its rows "
                      "hold states, not pages, and it has no export");
  return CLBT_SUCCESS;
}

clbt_status clbt__check_export(const clbt__scope *scope,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list) {
  clbt_status status = clbt__check_export_target(scope);
  if (!status)
    status = clbt__check_batch_arguments(scope->first, batch, num_events,
                                         wait_list);
  return status ? status : clbt__check_export_groups(scope);
}
