/*
 * The attention export: a group's committed rows as FlashInfer's CSR page
 * table, OpenVINO PagedAttention's arrays, the lengths the dense paths
 * read and, when asked, the context-only CSR and a dense page table, built
 * on the device by the step kernel (cl/export.cl) into regions of the
 * group's allocation. The export is work of the step kernel's, in the same
 * launch as a step's slot mapping and gather; what is here is its batch,
 * its work and its call (its checks are in checks.c).
 */
#include "calls/export.h"

#include "calls/checks.h"
#include "calls/run.h"

clbt__batch clbt__export_batch(const clbt_export_request *request) {
  return (clbt__batch){.num_reqs = request->num_reqs,
                       .query_start_loc = request->query_start_loc,
                       .positions = request->positions,
                       .num_tokens = request->num_tokens,
                       .num_reqs_padded = request->num_reqs_padded,
                       .seq_lens = request->seq_lens,
                       .idx_mapping = request->idx_mapping,
                       .export_flags = request->flags,
                       .dense_row_pitch = request->dense_row_pitch};
}

uint32_t clbt__export_work(const clbt__batch *batch) {
  return CLBT_WORK_EXPORT |
         (batch->export_flags & CLBT_EXPORT_CONTEXT
              ? CLBT_WORK_EXPORT_CONTEXT
              : 0) |
         (batch->export_flags & CLBT_EXPORT_DENSE ? CLBT_WORK_EXPORT_DENSE
                                                  : 0);
}

clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = clbt__check_export(scope, batch, num_events, wait_list);
  if (status) return status;
  const clbt__call call = {.work = clbt__export_work(batch), .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
