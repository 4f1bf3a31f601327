/*
 * The serving step: one call that commits every group's changes, computes
 * the slot mappings through idx_mapping and gathers the batch's rows
 * (cl/slot_mapping.cl), and exports the page tables, as one sequence of
 * commands on the queue: at most one upload, one scatter and one kernel
 * per eight groups, plus the export when asked. Everything is checked
 * before anything is enqueued.
 */
#include "engine.h"

/* The positions a step gathers: num_reqs_padded, or num_reqs for 0. */
static uint32_t padded_reqs(const clbt_step *step) {
  return step->num_reqs_padded ? step->num_reqs_padded : step->num_reqs;
}

/*
 * The step's batch: its slot mapping's and gather's, and its export's
 * (seq_lens only then), all checked on one path.
 */
static clbt__batch batch_of(const clbt_step *step) {
  return (clbt__batch){
      .num_reqs = step->num_reqs,
      .query_start_loc = step->query_start_loc,
      .positions = step->positions,
      .num_tokens = step->num_tokens,
      .num_reqs_padded = step->num_reqs_padded,
      .seq_lens = step->flags & CLBT_STEP_EXPORT ? step->seq_lens : NULL,
      .idx_mapping = step->idx_mapping};
}

/*
 * The step kernels, after a commit whose small packets they apply
 * themselves (folded): the last kernel reads the packet last, so its event
 * joins the packet's readers. If they cannot be enqueued the packets never
 * arrive, and the groups are stale.
 */
static clbt_status run_kernels(clbt__launch *launches, uint32_t count,
                               const clbt__step_batch *kernels,
                               clbt__sequence *sequence, clbt__staging *folded,
                               bool want_event) {
  clbt_status status = clbt__run_launches(launches, count, kernels, sequence,
                                          want_event || folded);
  if (!status && folded)
    CLBT__CL_TRY(clRetainEvent(sequence->last), status, done);
  if (!status && folded) clbt__staging_add_reader(folded, sequence->last);
done:
  if (status && folded)
    clbt__commit_lost(launches, count);
  else
    clbt__unfold(launches, count);
  return status;
}

clbt_status clbt__enqueue_step(clbt_table *group, clbt_multi_table *engine,
                               const clbt_step *given, cl_uint num_events,
                               const cl_event *wait_list, cl_event *event) {
  clbt_step step;
  clbt_status status = clbt__step_read(given, &step);
  if (status) return status;
  const clbt__batch batch = batch_of(&step);
  bool exports = step.flags & CLBT_STEP_EXPORT;
  status = clbt__check_step_flags(step.flags);
  if (!status)
    status = exports ? clbt__check_export(group, engine, &batch, num_events,
                                          wait_list)
                     : clbt__check_batch_arguments(group, &batch, num_events,
                                                   wait_list);
  clbt__launch *launches = NULL;
  uint32_t count = 0;
  if (!status) status = clbt__launches_of(group, engine, &launches, &count);
  /* Every kernel first, so that a failure to make one enqueues nothing. */
  for (uint32_t l = 0; !status && l < count; ++l)
    if (step.flags & CLBT_STEP_GATHER) status = clbt__launch_build(&launches[l]);
  if (status) return status;

  const clbt__step_batch kernels = {
      batch, step.flags & CLBT_STEP_GATHER ? padded_reqs(&step) : 0};
  clbt__sequence sequence = {group->device->queue, num_events, wait_list, NULL};
  clbt__staging *folded = NULL;
  status = clbt__commit(launches, count, group->layout.max_num_reqs, true,
                        &sequence, &folded);
  if (!status) status = run_kernels(launches, count, &kernels, &sequence,
                                    folded, event && !exports);
  if (!status && exports) {
    cl_event exported = NULL;
    clbt__sequence_next(&sequence, &num_events, &wait_list);
    status = clbt__enqueue_export(group, engine, &batch, num_events,
                                  wait_list, event ? &exported : NULL);
    if (!status && exported)
      status = clbt__sequence_done(&sequence, exported, false);
  }
  return clbt__sequence_end(&sequence, status, event);
}
