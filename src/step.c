/*
 * The serving step: one call that commits every group's changes, computes
 * the slot mappings through idx_mapping and gathers the batch's rows
 * (cl/slot_mapping.cl), and exports the page tables, as one sequence of
 * commands on the queue: at most one upload, one scatter and one kernel
 * per eight groups, plus the export when asked. Everything is checked
 * before anything is enqueued.
 */
#include "engine.h"

#define CLBT__STEP_FLAGS (CLBT_STEP_GATHER | CLBT_STEP_EXPORT)

/* The positions a step gathers: num_reqs_padded, or num_reqs for 0. */
static uint32_t padded_reqs(const clbt_step *step) {
  return step->num_reqs_padded ? step->num_reqs_padded : step->num_reqs;
}

/* The export of the step's batch, through the same idx_mapping. */
static clbt_export_request export_request(const clbt_step *step) {
  return (clbt_export_request){
      .num_reqs = step->num_reqs,
      .num_reqs_padded = step->num_reqs_padded,
      .query_start_loc = step->query_start_loc,
      .positions = step->positions,
      .num_tokens = step->num_tokens,
      .seq_lens = step->seq_lens,
      .idx_mapping = step->idx_mapping};
}

static clbt_status check_step(const clbt_table *group, const clbt_step *step,
                              const clbt__batch *batch, cl_uint num_events,
                              const cl_event *wait_list) {
  if (step->flags & ~CLBT__STEP_FLAGS)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->flags 0x%x has bits other than CLBT_STEP_GATHER "
                      "and CLBT_STEP_EXPORT",
                      (unsigned)step->flags);
  clbt_status status =
      clbt__check_batch_arguments(group, batch, num_events, wait_list);
  if (status) return status;
  if (padded_reqs(step) < step->num_reqs)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->num_reqs_padded %u is below num_reqs %u",
                      (unsigned)step->num_reqs_padded,
                      (unsigned)step->num_reqs);
  if (padded_reqs(step) > group->layout.max_num_reqs)
    return clbt__fail(CLBT_TOO_MANY_REQUESTS,
                      "step->num_reqs_padded %u exceeds max_num_reqs %u",
                      (unsigned)step->num_reqs_padded,
                      (unsigned)group->layout.max_num_reqs);
  if (step->idx_mapping)
    status = clbt__check_buffer(group, step->idx_mapping, "step->idx_mapping",
                                (size_t)step->num_reqs * sizeof(int32_t),
                                "num_reqs", step->num_reqs);
  return status;
}

clbt_status clbt__enqueue_step(clbt_table *group, clbt_multi_table *engine,
                               const clbt_step *given, cl_uint num_events,
                               const cl_event *wait_list, cl_event *event) {
  clbt_step step;
  clbt_status status = clbt__step_read(given, &step);
  if (status) return status;
  const clbt__batch batch = {step.num_reqs, step.query_start_loc,
                             step.positions, step.num_tokens};
  const clbt_export_request request = export_request(&step);
  bool exports = step.flags & CLBT_STEP_EXPORT;
  status = check_step(group, &step, &batch, num_events, wait_list);
  if (!status && exports)
    status = clbt__check_export(group, engine, &request, num_events, wait_list);
  clbt__launch *launches = NULL;
  uint32_t count = 0;
  if (!status) status = clbt__launches_of(group, engine, &launches, &count);
  /* Every kernel first, so that a failure to make one enqueues nothing. */
  for (uint32_t l = 0; !status && l < count; ++l)
    if (step.flags & CLBT_STEP_GATHER) status = clbt__launch_build(&launches[l]);
  if (status) return status;

  const clbt__step_batch kernels = {
      batch, step.idx_mapping,
      step.flags & CLBT_STEP_GATHER ? padded_reqs(&step) : 0};
  clbt__sequence sequence = {group->device->queue, num_events, wait_list, NULL};
  status = clbt__commit(launches, count, group->layout.max_num_reqs, &sequence);
  if (!status)
    status = clbt__run_launches(launches, count, &kernels, &sequence,
                                event && !exports);
  if (!status && exports) {
    cl_event exported = NULL;
    clbt__sequence_next(&sequence, &num_events, &wait_list);
    status = clbt__enqueue_export(group, engine, &request, num_events,
                                  wait_list, event ? &exported : NULL);
    if (!status && exported)
      status = clbt__sequence_done(&sequence, exported, false);
  }
  return clbt__sequence_end(&sequence, status, event);
}
