/*
 * The table engine: KV-cache groups made, launched and freed together.
 * Every public table is one. A clbt_multi_table is an engine of its
 * groups; a clbt_table made by clbt_table_create is the only group of an
 * engine of its own. Either way the groups' storage (one allocation) and
 * launches, eight groups to a launch, are made here, and a call reaches
 * them through a scope: every group of the engine, or one table (a
 * clbt_table call), in the launch that holds it (calls/run.c runs the
 * calls). Above the engine it is opaque (engine.h); its struct is in
 * engine_internal.h.
 */
#include "engine/engine.h"
#include "engine/engine_internal.h"

#include "base/status.h"
#include "device/handle.h"
#include "device/queue.h"

#include <stdlib.h>

static uint32_t launches_for(uint32_t groups) {
  return (groups + CLBT__MAX_LAUNCH_GROUPS - 1) / CLBT__MAX_LAUNCH_GROUPS;
}

static uint32_t launch_size(uint32_t groups, uint32_t launch) {
  uint32_t rest = groups - launch * CLBT__MAX_LAUNCH_GROUPS;
  return rest < CLBT__MAX_LAUNCH_GROUPS ? rest : CLBT__MAX_LAUNCH_GROUPS;
}

static clbt_status create_launches(clbt__engine *engine) {
  uint32_t count = launches_for(engine->num_groups);
  engine->launches = calloc(count, sizeof *engine->launches);
  engine->launch_parts = calloc(count, sizeof *engine->launch_parts);
  engine->slots = calloc(engine->num_groups + 1, sizeof *engine->slots);
  engine->slot_words =
      calloc(engine->num_groups + 1, sizeof *engine->slot_words);
  engine->commands =
      calloc(clbt__plan_max_commands(engine->num_groups, count),
             sizeof *engine->commands);
  if (!engine->launches || !engine->launch_parts || !engine->slots ||
      !engine->slot_words || !engine->commands)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < count; ++l) {
    status = clbt__launch_init(&engine->launches[l],
                               engine->groups + l * CLBT__MAX_LAUNCH_GROUPS,
                               launch_size(engine->num_groups, l),
                               engine->storage);
    if (!status) engine->num_launches = l + 1;
  }
  return status;
}

/* A failure in a group of a multi-group table names the group. */
static clbt_status name_group(const clbt__engine *engine, uint32_t g,
                              clbt_status status) {
  if (status && !engine->standalone)
    clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  return status;
}

/*
 * The storage of every group: one allocation, its regions placed group by
 * group, zeroed, every slot mapping pad-filled.
 */
static clbt_status create_storage(clbt__engine *engine) {
  size_t size = 0;
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = 0; !status && g < engine->num_groups; ++g)
    status = name_group(engine, g, clbt__group_plan(engine->groups[g], &size));
  if (status) return status;
  cl_int error = CL_SUCCESS;
  engine->storage = clCreateBuffer(engine->device->context, CL_MEM_READ_WRITE,
                                   size, NULL, &error);
  /* A table too large for the device fails here: say what was asked. */
  if (error) {
    size_t rows = 0, slots = 0;
    for (uint32_t g = 0; g < engine->num_groups; ++g) {
      const clbt__table_layout *layout = &engine->groups[g]->layout;
      rows += (size_t)layout->max_num_reqs * layout->width * sizeof(int32_t);
      slots += layout->max_num_batched_tokens * sizeof(cl_long);
    }
    return clbt__prefix_error(clbt__cl_fail(error, "clCreateBuffer"),
                              "device data of %zu bytes (rows %zu, slot "
                              "mapping %zu)",
                              size, rows, slots);
  }
  for (uint32_t g = 0; !status && g < engine->num_groups; ++g)
    status = clbt__group_place(engine->groups[g], engine->storage);
  if (status) return status;
  const cl_int zero = 0;
  const cl_long pad = CLBT_PAD_SLOT_ID;
  clbt__sequence sequence =
      clbt__sequence_start(engine->device, 0, NULL, false);
  status = clbt__sequence_fill(&sequence, engine->storage, &zero, sizeof zero,
                               0, size);
  for (uint32_t g = 0; !status && g < engine->num_groups; ++g) {
    const clbt_table *group = engine->groups[g];
    status = clbt__sequence_fill(
        &sequence, group->regions[CLBT_REGION_SLOTS], &pad, sizeof pad, 0,
        group->layout.max_num_batched_tokens * sizeof pad);
  }
  return clbt__sequence_end(&sequence, status, NULL);
}

clbt_status clbt__engine_create(clbt_device *device,
                                const clbt__table_layout *layouts,
                                uint32_t num_groups, bool standalone,
                                clbt__engine **out) {
  clbt__engine *engine = calloc(1, sizeof *engine);
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
  if (!status) status = create_storage(engine);
  if (!status) status = create_launches(engine);
  if (status) {
    clbt__engine_destroy(engine);
    return status;
  }
  *out = engine;
  return CLBT_SUCCESS;
}

void clbt__engine_destroy(clbt__engine *engine) {
  if (!engine) return;
  /* Commits in flight read the staging packets and the groups' storage. */
  clbt__staging_pool_free(&engine->staging);
  clbt__known_buffers_release(&engine->known);
  for (uint32_t l = 0; l < engine->num_launches; ++l)
    clbt__launch_release(&engine->launches[l]);
  free(engine->launches);
  for (uint32_t g = 0; g < engine->num_groups; ++g)
    clbt__group_destroy(engine->groups[g]);
  if (engine->storage) clReleaseMemObject(engine->storage);
  free(engine->groups);
  free(engine->commit_plans);
  free(engine->launch_parts);
  free(engine->slots);
  free(engine->slot_words);
  free(engine->commands);
  free(engine);
}

clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups) {
  clbt_status status = CLBT_SUCCESS;
  /* Every launch's program: what create builds (a launch with a group that
     maps tokens), and what a launch of NONE groups builds at its first
     commit or gather. */
  for (uint32_t l = 0; !status && l < launches_for(num_groups); ++l) {
    const clbt__table_layout *chunk = layouts + l * CLBT__MAX_LAUNCH_GROUPS;
    const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
    for (uint32_t g = 0; g < launch_size(num_groups, l); ++g)
      specs[g] = &chunk[g].spec;
    cl_program program;
    status = clbt__launch_program(device, specs, launch_size(num_groups, l),
                                  layouts[0].max_num_reqs, &program);
  }
  return status;
}

clbt__scope clbt__engine_scope(clbt__engine *engine) {
  return (clbt__scope){.engine = engine,
                       .groups = engine->groups,
                       .begin = 0,
                       .end = engine->num_groups,
                       .first = engine->groups[0],
                       .known = &engine->known,
                       .one_table = false};
}

clbt__scope clbt__table_scope(clbt_table *table) {
  clbt__engine *engine = table->engine;
  uint32_t g = 0;
  while (engine->groups[g] != table) ++g;
  return (clbt__scope){.engine = engine,
                       .groups = engine->groups,
                       .begin = g,
                       .end = g + 1,
                       .first = table,
                       .known = &engine->known,
                       .one_table = true};
}

uint32_t clbt__scope_first_launch(const clbt__scope *scope) {
  return scope->begin / CLBT__MAX_LAUNCH_GROUPS;
}

uint32_t clbt__scope_end_launch(const clbt__scope *scope) {
  return launches_for(scope->end);
}

uint32_t clbt__scope_group_mask(const clbt__scope *scope, uint32_t l) {
  uint32_t first = l * CLBT__MAX_LAUNCH_GROUPS;
  uint32_t mask = 0;
  for (uint32_t g = 0; g < scope->engine->launches[l].shape.num_groups; ++g)
    if (first + g >= scope->begin && first + g < scope->end) mask |= 1u << g;
  return mask;
}

uint32_t clbt__token_sections_before(const clbt__scope *scope, uint32_t l) {
  uint32_t sections = 0;
  for (uint32_t g = scope->begin;
       g < scope->end && g / CLBT__MAX_LAUNCH_GROUPS < l; ++g)
    sections += clbt__maps_tokens(scope->groups[g]);
  return sections;
}

uint32_t clbt__scope_token_sections(const clbt__scope *scope) {
  return clbt__token_sections_before(scope, clbt__scope_end_launch(scope));
}

uint32_t clbt__engine_num_groups(const clbt__engine *engine) {
  return engine->num_groups;
}

clbt_table *clbt__engine_group(const clbt__engine *engine, uint32_t g) {
  return engine->groups[g];
}

bool clbt__engine_standalone(const clbt__engine *engine) {
  return engine->standalone;
}

cl_mem clbt__engine_storage(const clbt__engine *engine) {
  return engine->storage;
}

uint64_t clbt__engine_next_version(clbt__engine *engine) {
  return ++engine->version;
}
