/*
 * The serving step's call: a commit of every row, then one launch per
 * eight groups that maps, gathers, exports and writes state slots as the
 * step's flags ask. It reads the step, checks it (checks.c: every check
 * once, in semantics.md's order), and runs its one call (run.c).
 */
#include "calls/step.h"

#include "base/config.h"
#include "calls/checks.h"
#include "calls/export.h"
#include "calls/run.h"
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
  status = clbt__check_step(scope, &step, &batch, num_events, wait_list);
  if (status) return status;
  bool dummy = step.flags & CLBT_STEP_DUMMY;
  const clbt__call call = {
      .commits = !dummy,
      .commit_rows = scope->first->layout.max_num_reqs,
      .work = step_work(&step, &batch),
      .batch = batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
