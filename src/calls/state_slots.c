/*
 * State slots: per batch request, the ids of the state blocks a hybrid
 * model's Mamba layers read and write, from each NONE group's committed
 * row, written by the step kernel (cl/state_slots.cl) into a region of the
 * group's allocation when a step asks (CLBT_STEP_STATE_SLOTS). What is here
 * are their checks.
 */
#include "calls/state_slots.h"

#include "base/status.h"
#include "calls/batch.h"
#include "engine/group.h"

clbt_status clbt__check_state_slots(const clbt__scope *scope,
                                    uint32_t count) {
  clbt_status status = clbt__check_alone(scope, false, "state slots");
  if (status) return status;
  for (uint32_t index = scope->begin; index < scope->end; ++index) {
    const clbt_table *group = scope->engine->groups[index];
    /* The region holds a row's worth a request. */
    if (!clbt__maps_tokens(group) && count > group->layout.width)
      return scope->alone
                 ? clbt__fail(CLBT_INVALID_ARGUMENT,
                              "step->num_state_slots %u exceeds the table's "
                              "width %u, its state slots' room a request",
                              (unsigned)count, (unsigned)group->layout.width)
                 : clbt__fail(CLBT_INVALID_ARGUMENT,
                              "step->num_state_slots %u exceeds groups[%u]'s "
                              "width %u, its state slots' room a request",
                              (unsigned)count, (unsigned)index,
                              (unsigned)group->layout.width);
  }
  return CLBT_SUCCESS;
}
