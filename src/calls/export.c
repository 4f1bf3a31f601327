/*
 * The attention export: a group's committed rows as FlashInfer's CSR page
 * table, OpenVINO PagedAttention's arrays, the lengths the dense paths
 * read and, when asked, the context-only CSR and a dense page table, built
 * on the device by the step kernel (cl/export.cl) into regions of the
 * group's allocation. The export is work of the step kernel's, in the same
 * launch as a step's slot mapping and gather; what is here are its checks
 * and its call.
 */
#include "calls/export.h"

#include "base/status.h"
#include "calls/run.h"
#include "device/queue.h"
#include "engine/group.h"

#include <stdint.h>

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

/*
 * A group's worst-case page count must fit the int32 indptr, and the dense
 * page table's rows of the batch its region (max_num_reqs x width).
 */
static clbt_status check_pages(const clbt_table *group,
                               const clbt__batch *batch) {
  const clbt__table_layout *layout = &group->layout;
  uint64_t capacity = (uint64_t)layout->max_num_reqs * layout->width;
  if (capacity > INT32_MAX)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "max_num_reqs %u x width %u pages exceed INT32_MAX, "
                      "the int32 indptr's bound",
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  if (!(batch->export_flags & CLBT_EXPORT_DENSE)) return CLBT_SUCCESS;
  uint32_t pitch =
      batch->dense_row_pitch ? batch->dense_row_pitch : layout->width;
  uint32_t rows =
      batch->num_reqs_padded ? batch->num_reqs_padded : batch->num_reqs;
  if ((uint64_t)pitch * rows > capacity)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "dense_row_pitch %u x num_reqs_padded %u entries exceed "
                      "the page table's max_num_reqs %u x width %u",
                      (unsigned)pitch, (unsigned)rows,
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  return CLBT_SUCCESS;
}

clbt_status clbt__check_export_groups(const clbt__scope *scope,
                                      const clbt__batch *batch) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = scope->begin; !status && g < scope->end; ++g)
    if (clbt__maps_tokens(scope->engine->groups[g])) {
      status = check_pages(scope->engine->groups[g], batch);
      if (status && !scope->alone)
        clbt__prefix_error(status, "groups[%u]", (unsigned)g);
    }
  return status;
}

clbt_status clbt__check_export_flags(const clbt__batch *batch,
                                     const char *flags_name) {
  const uint32_t known = CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE;
  if (batch->export_flags & ~known)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s 0x%x has bits other than CLBT_EXPORT_CONTEXT and "
                      "CLBT_EXPORT_DENSE",
                      flags_name, (unsigned)batch->export_flags);
  if (batch->dense_row_pitch && !(batch->export_flags & CLBT_EXPORT_DENSE))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "dense_row_pitch %u is set without CLBT_EXPORT_DENSE "
                      "in %s",
                      (unsigned)batch->dense_row_pitch, flags_name);
  return CLBT_SUCCESS;
}

clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = clbt__check_alone(scope, true, "export");
  if (!status) status = clbt__check_batch_arguments(scope->first, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, num_events,
                                   wait_list);
  if (!status) status = clbt__check_export_flags(batch, "request->flags");
  if (!status) status = clbt__check_export_groups(scope, batch);
  if (status) return status;
  const clbt__call call = {.work = clbt__export_work(batch), .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
