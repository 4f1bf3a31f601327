/*
 * The attention export's call and checks (export.c), which a step with
 * CLBT_STEP_EXPORT shares.
 */
#ifndef CLBT_EXPORT_H
#define CLBT_EXPORT_H

#include "calls/batch.h"
#include "engine/engine.h"

/* The batch of an export request. */
clbt__batch clbt__export_batch(const clbt_export_request *request);

/* The step kernel's work of an export of a batch: CLBT_WORK_EXPORT and
   the parts its export flags ask for (CLBT_WORK_EXPORT_CONTEXT, _DENSE). */
uint32_t clbt__export_work(const clbt__batch *batch);

/* The batch's export flags, which the messages call flags_name, are
   CLBT_EXPORT_* flags, and dense_row_pitch comes with CLBT_EXPORT_DENSE. */
clbt_status clbt__check_export_flags(const clbt__batch *batch,
                                     const char *flags_name);

/* Every exported group's worst-case page count fits the int32 indptr, and
   its dense page table's rows of the batch its region. */
clbt_status clbt__check_export_groups(const clbt__scope *scope,
                                      const clbt__batch *batch);

/*
 * Checks an export of a scope, in this order: a group named alone maps
 * tokens, the batch's arguments, the wait list, the export flags
 * (request->flags), every exported group's pages; then runs it.
 */
clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

#endif /* CLBT_EXPORT_H */
