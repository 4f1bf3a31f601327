/*
 * The serving step's call: a commit of every row, then one launch per
 * eight groups that maps, gathers, exports and writes state slots as the
 * step's flags ask. Its checks are all here, each once, in the order
 * check_step lists them; the export's and the state slots' own are in
 * export.c and state_slots.c.
 */
#include "calls/step.h"

#include "base/config.h"
#include "base/status.h"
#include "calls/batch.h"
#include "calls/export.h"
#include "calls/run.h"
#include "calls/state_slots.h"
#include "device/queue.h"
#include "engine/group.h"

/*
 * The step's batch: its slot mapping's, gather's, export's and state
 * slots' (seq_lens only for the last two). A dummy run reads no buffer of
 * the caller's.
 */
static clbt__batch batch_of(const clbt_step *step) {
  bool dummy = step->flags & CLBT_STEP_DUMMY;
  bool lengths = step->flags & (CLBT_STEP_EXPORT | CLBT_STEP_STATE_SLOTS);
  return (clbt__batch){
      .num_reqs = step->num_reqs,
      .query_start_loc = dummy ? NULL : step->query_start_loc,
      .positions = dummy ? NULL : step->positions,
      .num_tokens = step->num_tokens,
      .num_reqs_padded = step->num_reqs_padded,
      .seq_lens = lengths && !dummy ? step->seq_lens : NULL,
      .idx_mapping = dummy ? NULL : step->idx_mapping,
      .export_flags = step->export_flags,
      .dense_row_pitch = step->dense_row_pitch,
      .num_state_slots = step->num_state_slots ? step->num_state_slots : 1,
      .state_null_block = step->state_null_block};
}

/* The export's flags and pitch ask for parts of an export. */
static clbt_status check_step_export(const clbt_step *step,
                                     const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_EXPORT)
    return clbt__check_export_flags(batch, "step->export_flags");
  if (step->export_flags || step->dense_row_pitch)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->export_flags 0x%x and dense_row_pitch %u are set "
                      "without CLBT_STEP_EXPORT",
                      (unsigned)step->export_flags,
                      (unsigned)step->dense_row_pitch);
  return CLBT_SUCCESS;
}

/* The state slots' count and null block ask for state slots. */
static clbt_status check_step_state_slots(const clbt__scope *scope,
                                          const clbt_step *step,
                                          const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_STATE_SLOTS)
    return clbt__check_state_slots(scope, batch->num_state_slots);
  if (step->num_state_slots || step->state_null_block)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->num_state_slots %u and state_null_block %d are "
                      "set without CLBT_STEP_STATE_SLOTS",
                      (unsigned)step->num_state_slots,
                      (int)step->state_null_block);
  return CLBT_SUCCESS;
}

/* A dummy run has no requests and no tokens, only padding. */
static clbt_status check_dummy(const clbt__scope *scope,
                               const clbt__batch *batch) {
  if (batch->num_reqs || batch->num_tokens)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "a CLBT_STEP_DUMMY step has num_reqs %u and num_tokens "
                      "%u; both must be 0",
                      (unsigned)batch->num_reqs, (unsigned)batch->num_tokens);
  return clbt__check_padding(scope->first, "num_reqs_padded", 0,
                             batch->num_reqs_padded);
}

/*
 * The step's checks, each once, in this order: its flags; the export's
 * flags and pitch (or, without CLBT_STEP_EXPORT, that they are unset); the
 * state slots' count against every NONE group's width (or, without
 * CLBT_STEP_STATE_SLOTS, that count and null block are unset); that a
 * group named alone maps tokens, when the step exports; the batch (a dummy
 * run's counts and padding, or the slot mapping's arguments); the wait
 * list; every exported group's pages.
 */
static clbt_status check_step(const clbt__scope *scope, const clbt_step *step,
                              const clbt__batch *batch, cl_uint num_events,
                              const cl_event *wait_list) {
  bool exports = step->flags & CLBT_STEP_EXPORT;
  clbt_status status = clbt__check_step_flags(step->flags, true);
  if (!status) status = check_step_export(step, batch);
  if (!status) status = check_step_state_slots(scope, step, batch);
  if (!status && exports) status = clbt__check_alone(scope, true, "export");
  if (!status)
    status = step->flags & CLBT_STEP_DUMMY
                 ? check_dummy(scope, batch)
                 : clbt__check_batch_arguments(scope->first, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, num_events,
                                   wait_list);
  if (!status && exports) status = clbt__check_export_groups(scope, batch);
  return status;
}

/* The step kernel's work of a step's flags. */
static uint32_t step_work(const clbt_step *step, const clbt__batch *batch) {
  uint32_t flags = step->flags;
  return CLBT_WORK_MAP | (flags & CLBT_STEP_GATHER ? CLBT_WORK_GATHER : 0) |
         (flags & CLBT_STEP_EXPORT ? clbt__export_work(batch) : 0) |
         (flags & CLBT_STEP_STATE_SLOTS ? CLBT_WORK_STATE_SLOTS : 0);
}

clbt_status clbt__enqueue_step(const clbt__scope *scope, const clbt_step *given,
                               cl_uint num_events, const cl_event *wait_list,
                               cl_event *event) {
  clbt_step step;
  clbt_status status = clbt__step_read(given, &step);
  if (status) return status;
  const clbt__batch batch = batch_of(&step);
  status = check_step(scope, &step, &batch, num_events, wait_list);
  if (status) return status;
  bool dummy = step.flags & CLBT_STEP_DUMMY;
  const clbt__call call = {
      .commits = !dummy,
      .commit_rows = scope->first->layout.max_num_reqs,
      .work = step_work(&step, &batch),
      .batch = batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
