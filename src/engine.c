/*
 * The table engine: KV-cache groups made, launched and freed together.
 * Every public table is one. A clbt_multi_table is an engine of its
 * groups; a clbt_table made by clbt_table_create is the only group of an
 * engine of its own. Either way the groups' launches, eight groups to a
 * launch, are built here, and a call reaches them through a scope: every
 * group of the engine, or one group alone (step.c runs the calls).
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
  engine->launch_plans = calloc(count, sizeof *engine->launch_plans);
  if (!engine->standalone)
    engine->solo = calloc(engine->num_groups, sizeof *engine->solo);
  if (!engine->launches || !engine->launch_plans ||
      (!engine->standalone && !engine->solo))
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
  if (engine)
    engine->commit_plans = calloc(num_groups, sizeof *engine->commit_plans);
  if (!engine || !engine->groups || !engine->commit_plans) {
    if (engine) free(engine->groups), free(engine->commit_plans);
    free(engine);
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)num_groups);
  }
  engine->device = device;
  engine->num_groups = num_groups;
  engine->standalone = standalone;
  /* Failures seen before the engine was made are not its own. */
  clbt_status status = clbt__watch_failures(device, &engine->seen_failures);
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
  clbt__known_buffers_release(&engine->known);
  for (uint32_t l = 0; l < engine->num_launches; ++l)
    clbt__launch_release(&engine->launches[l]);
  for (uint32_t g = 0; engine->solo && g < engine->num_groups; ++g)
    clbt__launch_release(&engine->solo[g]);
  free(engine->launches);
  free(engine->solo);
  for (uint32_t g = 0; g < engine->num_groups; ++g)
    clbt__group_destroy(engine->groups[g]);
  free(engine->groups);
  free(engine->commit_plans);
  free(engine->launch_plans);
  free(engine);
}

clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups) {
  clbt_status status = CLBT_SUCCESS;
  /* What create builds: the launches with a group that maps tokens. */
  for (uint32_t l = 0; !status && l < launches_for(num_groups); ++l) {
    const clbt__table_layout *chunk = layouts + l * CLBT__MAX_LAUNCH_GROUPS;
    const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
    bool maps = false;
    for (uint32_t g = 0; g < launch_size(num_groups, l); ++g) {
      specs[g] = &chunk[g].spec;
      maps = maps || chunk[g].spec.maps_tokens;
    }
    cl_program program;
    if (maps)
      status = clbt__launch_program(device, specs, launch_size(num_groups, l),
                                    layouts[0].max_num_reqs, &program);
  }
  return status;
}

clbt__scope clbt__engine_scope(clbt_multi_table *engine) {
  return (clbt__scope){engine, engine->launches, engine->num_launches,
                       engine->groups[0], engine->standalone};
}

clbt_status clbt__group_scope(clbt_table *group, clbt__scope *scope) {
  clbt_multi_table *engine = group->engine;
  if (engine->standalone) {
    *scope = clbt__engine_scope(engine);
    return CLBT_SUCCESS;
  }
  uint32_t g = 0;
  while (engine->groups[g] != group) ++g;
  clbt__launch *solo = &engine->solo[g];
  /* A launch binds the engine's entry for the group, which outlives it. */
  clbt_status status =
      solo->groups ? CLBT_SUCCESS
                   : clbt__launch_init(solo, &engine->groups[g], 1);
  if (status) {
    clbt__launch_release(solo);
    solo->groups = NULL;
    return status;
  }
  *scope = (clbt__scope){engine, solo, 1, group, true};
  return CLBT_SUCCESS;
}
