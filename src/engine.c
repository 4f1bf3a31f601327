/*
 * The table engine: KV-cache groups made, launched and freed together.
 * Every public table is one. A clbt_multi_table is an engine of its
 * groups; a clbt_table made by clbt_table_create is the only group of an
 * engine of its own. Either way the groups' slot mappings come from the
 * same launches, eight token-mapping groups to a launch, built here.
 */
#include "engine.h"

#include <stdlib.h>

static bool maps_tokens(const clbt__table_layout *layout) {
  return layout->slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
}

static uint32_t launches_for(uint32_t token_groups) {
  return (token_groups + CLBT__MAX_LAUNCH_GROUPS - 1) / CLBT__MAX_LAUNCH_GROUPS;
}

static uint32_t launch_size(uint32_t token_groups, uint32_t launch) {
  uint32_t rest = token_groups - launch * CLBT__MAX_LAUNCH_GROUPS;
  return rest < CLBT__MAX_LAUNCH_GROUPS ? rest : CLBT__MAX_LAUNCH_GROUPS;
}

/* The token-mapping groups, in order. */
static uint32_t token_groups(const clbt_multi_table *engine,
                             clbt_table **out) {
  uint32_t count = 0;
  for (uint32_t g = 0; g < engine->num_groups; ++g)
    if (maps_tokens(&engine->groups[g]->layout))
      out[count++] = engine->groups[g];
  return count;
}

static clbt_status create_launches(clbt_multi_table *engine) {
  clbt_table **mapped = malloc(engine->num_groups * sizeof *mapped);
  if (!mapped)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  uint32_t count = token_groups(engine, mapped);
  clbt_status status = CLBT_SUCCESS;
  engine->launches = calloc(launches_for(count) + 1, sizeof *engine->launches);
  if (!engine->launches)
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  for (uint32_t l = 0; !status && l < launches_for(count); ++l) {
    status = clbt__launch_init(&engine->launches[l],
                               mapped + l * CLBT__MAX_LAUNCH_GROUPS,
                               launch_size(count, l));
    if (!status) engine->num_launches = l + 1;
  }
  free(mapped);
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
  clbt_status status = CLBT_SUCCESS;
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
  for (uint32_t l = 0; l < engine->num_launches; ++l)
    clbt__launch_release(&engine->launches[l]);
  free(engine->launches);
  for (uint32_t g = 0; g < engine->num_groups; ++g)
    clbt__group_destroy(engine->groups[g]);
  free(engine->groups);
  free(engine);
}

clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups) {
  const clbt__group_spec **specs = malloc(num_groups * sizeof *specs);
  if (!specs)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)num_groups);
  uint32_t count = 0;
  for (uint32_t g = 0; g < num_groups; ++g)
    if (maps_tokens(&layouts[g])) specs[count++] = &layouts[g].spec;
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < launches_for(count); ++l) {
    cl_program program;
    status = clbt__launch_program(device, specs + l * CLBT__MAX_LAUNCH_GROUPS,
                                  launch_size(count, l),
                                  layouts[0].max_num_reqs, &program);
  }
  free(specs);
  return status;
}

/* Every token-mapping group of an engine, eight to a launch. */
static clbt_status map_engine(const clbt_multi_table *engine,
                              const clbt__batch *batch, cl_uint num_events,
                              const cl_event *wait_list, cl_event *event) {
  cl_command_queue queue = engine->groups[0]->device->queue;
  if (engine->num_launches == 0)
    return clbt__enqueue_marker(queue, num_events, wait_list, event);
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < engine->num_launches; ++l) {
    bool first = l == 0, last = l + 1 == engine->num_launches;
    status = clbt__launch_enqueue(&engine->launches[l], queue, batch,
                                  first ? num_events : 0,
                                  first ? wait_list : NULL, last ? event : NULL);
  }
  return status;
}

/*
 * One group mapped on its own: a table's engine maps its one group; a
 * group of a multi-group table builds a launch of its own on first use.
 */
static clbt_status map_group(clbt_table *group, const clbt__batch *batch,
                             cl_uint num_events, const cl_event *wait_list,
                             cl_event *event) {
  if (group->engine->standalone)
    return map_engine(group->engine, batch, num_events, wait_list, event);
  if (!maps_tokens(&group->layout))
    return clbt__enqueue_marker(group->device->queue, num_events, wait_list,
                                event);
  clbt_status status = CLBT_SUCCESS;
  if (!group->launch.kernel) status = clbt__launch_init(&group->launch, &group, 1);
  if (!status)
    status = clbt__launch_enqueue(&group->launch, group->device->queue, batch,
                                  num_events, wait_list, event);
  return status;
}

clbt_status clbt__enqueue_slot_mapping(clbt_table *group,
                                       const clbt_multi_table *engine,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event) {
  clbt_status status =
      clbt__check_batch_arguments(group, batch, num_events, wait_list);
  if (status) return status;
  return engine ? map_engine(engine, batch, num_events, wait_list, event)
                : map_group(group, batch, num_events, wait_list, event);
}
