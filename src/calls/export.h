/*
 * The attention export's call (export.c), whose work a step with
 * CLBT_STEP_EXPORT shares.
 */
#ifndef CLBT_EXPORT_H
#define CLBT_EXPORT_H

#include "calls/run.h"
#include "engine/engine.h"

/* The batch of an export request. */
clbt__batch clbt__export_batch(const clbt_export_request *request);

/* The step kernel's work of an export of a batch: CLBT_WORK_EXPORT and
   the parts its export flags ask for (CLBT_WORK_EXPORT_CONTEXT, _DENSE). */
uint32_t clbt__export_work(const clbt__batch *batch);

/* Checks an export of a scope (clbt__check_export), then runs it. */
clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

#endif /* CLBT_EXPORT_H */
