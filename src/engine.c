/*
 * The table engine: KV-cache groups made, launched and freed together.
 * Every public table is one. A clbt_multi_table is an engine of its
 * groups; a clbt_table made by clbt_table_create is the only group of an
 * engine of its own. Either way the groups' slot mappings come from the
 * same launches, eight token-mapping groups to a launch, built here.
 */
#include "engine.h"

#include <stdlib.h>

static uint32_t launches_for(uint32_t groups) {
  return (groups + CLBT__MAX_LAUNCH_GROUPS - 1) / CLBT__MAX_LAUNCH_GROUPS;
}

static uint32_t launch_size(uint32_t groups, uint32_t launch) {
  uint32_t rest = groups - launch * CLBT__MAX_LAUNCH_GROUPS;
  return rest < CLBT__MAX_LAUNCH_GROUPS ? rest : CLBT__MAX_LAUNCH_GROUPS;
}

static clbt_status create_launches(clbt_multi_table *engine) {
  uint32_t count = launches_for(engine->num_groups);
  engine->launches = calloc(count, sizeof *engine->launches);
  if (!engine->launches)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < count; ++l) {
    status = clbt__launch_init(&engine->launches[l],
                               engine->groups + l * CLBT__MAX_LAUNCH_GROUPS,
                               launch_size(engine->num_groups, l));
    if (!status) engine->num_launches = l + 1;
  }
  return status;
}

/* A failure in a group of a multi-group table names the group. */
static clbt_status name_group(const clbt_multi_table *engine, uint32_t g,
                              clbt_status status) {
  if (status && !engine->standalone)
    clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  return status;
}

clbt_status clbt__engine_create(clbt_device *device,
                                const clbt__table_layout *layouts,
                                uint32_t num_groups, bool standalone,
                                clbt_multi_table **out) {
  clbt_multi_table *engine = calloc(1, sizeof *engine);
  if (engine) engine->groups = calloc(num_groups, sizeof *engine->groups);
  if (!engine || !engine->groups) {
    free(engine);
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)num_groups);
  }
  engine->num_groups = num_groups;
  engine->standalone = standalone;
  engine->commit_plans = calloc(num_groups, sizeof *engine->commit_plans);
  clbt_status status = CLBT_SUCCESS;
  if (!engine->commit_plans)
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                        (unsigned)num_groups);
  for (uint32_t g = 0; g < num_groups && !status; ++g)
    status = name_group(engine, g,
                        clbt__group_create(device, &layouts[g], engine,
                                           &engine->groups[g]));
  if (!status) status = create_launches(engine);
  if (status) {
    clbt__engine_destroy(engine);
    return status;
  }
  *out = engine;
  return CLBT_SUCCESS;
}

void clbt__engine_destroy(clbt_multi_table *engine) {
  if (!engine) return;
  /* Commits in flight read the staging packets and the groups' storage. */
  clbt__staging_pool_free(&engine->staging);
  for (uint32_t l = 0; l < engine->num_launches; ++l)
    clbt__launch_release(&engine->launches[l]);
  free(engine->launches);
  for (uint32_t g = 0; g < engine->num_groups; ++g)
    clbt__group_destroy(engine->groups[g]);
  free(engine->groups);
  free(engine->commit_plans);
  free(engine);
}

clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups) {
  const clbt__group_spec **specs = malloc(num_groups * sizeof *specs);
  if (!specs)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)num_groups);
  for (uint32_t g = 0; g < num_groups; ++g) specs[g] = &layouts[g].spec;
  clbt_status status = CLBT_SUCCESS;
  /* What create builds: the launches with a group that maps tokens. */
  for (uint32_t l = 0; !status && l < launches_for(num_groups); ++l) {
    const clbt__group_spec **chunk = specs + l * CLBT__MAX_LAUNCH_GROUPS;
    bool maps = false;
    for (uint32_t g = 0; g < launch_size(num_groups, l); ++g)
      maps = maps || chunk[g]->maps_tokens;
    cl_program program;
    if (maps)
      status = clbt__launch_program(device, chunk, launch_size(num_groups, l),
                                    layouts[0].max_num_reqs, &program);
  }
  free(specs);
  return status;
}

/* The engine's entry for a group: a launch of it alone binds that. */
static clbt_table *const *entry_of(const clbt_table *group) {
  clbt_table *const *entry = group->engine->groups;
  while (*entry != group) ++entry;
  return entry;
}

clbt_status clbt__launches_of(clbt_table *group, clbt_multi_table *engine,
                              clbt__launch **launches, uint32_t *count) {
  if (!engine && group->engine->standalone) engine = group->engine;
  if (engine) {
    *launches = engine->launches;
    *count = engine->num_launches;
    return CLBT_SUCCESS;
  }
  clbt_status status = CLBT_SUCCESS;
  if (!group->launch.kernel)
    status = clbt__launch_init(&group->launch, entry_of(group), 1);
  *launches = &group->launch;
  *count = 1;
  return status;
}

clbt_status clbt__run_launches(clbt__launch *launches,
                              uint32_t num_launches,
                              const clbt__step_batch *step,
                              clbt__sequence *sequence, bool want_event) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < num_launches; ++l) {
    if (!step->gathered_reqs && launches[l].packet_kind == CLBT_PACKET_NONE &&
        !clbt__launch_maps_tokens(&launches[l]))
      continue;
    cl_uint num_events;
    const cl_event *wait_list;
    cl_event done = NULL;
    clbt__sequence_next(sequence, &num_events, &wait_list);
    /* Events only when the caller wants one: a launch is never staged. */
    status = clbt__launch_enqueue(&launches[l], sequence->queue, step,
                                  num_events, wait_list,
                                  want_event ? &done : NULL);
    if (!status && done) status = clbt__sequence_done(sequence, done, false);
  }
  return status;
}

clbt_status clbt__enqueue_slot_mapping(clbt_table *group,
                                       clbt_multi_table *engine,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event) {
  clbt__launch *launches = NULL;
  uint32_t count = 0;
  clbt_status status =
      clbt__check_batch_arguments(group, batch, num_events, wait_list);
  if (!status) status = clbt__launches_of(group, engine, &launches, &count);
  if (status) return status;
  const clbt__step_batch step = {*batch, 0};
  clbt__sequence sequence = {group->device->queue, num_events, wait_list, NULL};
  status = clbt__run_launches(launches, count, &step, &sequence, event != NULL);
  return clbt__sequence_end(&sequence, status, event);
}

clbt_status clbt__enqueue_commit(clbt_table *group, clbt_multi_table *engine,
                                 uint32_t num_reqs, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt__launch *launches = NULL;
  uint32_t count = 0;
  clbt_status status = clbt__check_batch(group, num_reqs, 0);
  if (!status)
    status = clbt__check_wait_list(group->device, num_events, wait_list);
  if (!status) status = clbt__launches_of(group, engine, &launches, &count);
  if (status) return status;
  clbt__sequence sequence = {group->device->queue, num_events, wait_list, NULL};
  clbt__staging *folded = NULL;
  status = clbt__commit(launches, count, num_reqs, false, &sequence, &folded);
  return clbt__sequence_end(&sequence, status, event);
}
