/*
 * The multi-group table: one clbt_table per KV-cache group, sized and edited
 * together as vLLM's MultiGroupBlockTable does. Row operations check every
 * group before changing any, so they are all or nothing.
 */
#include "clbt_internal.h"

#include <stdlib.h>

/* vLLM aligns each token-mapping group's row to this many tokens. */
#define CLBT__TOKEN_ALIGNMENT 128

struct clbt_multi_table {
  uint32_t num_groups;
  clbt_table **groups;
  uint32_t num_launches;   /* one per eight token-mapping groups */
  clbt__launch *launches;
};

/* The single-table config of group g; the caller names the group. */
static clbt_status group_config(const clbt_multi_table_config *config,
                                uint32_t g, clbt_table_config *out) {
  const clbt_group_config read = clbt__group_config_at(config, g),
                          *group = &read;
  bool maps_tokens = group->slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
  uint32_t kv_blocks = 0;
  if (group->max_num_blocks == 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "max_num_blocks is 0; it must be >= 1");
  clbt_status status = clbt_block_table_width(
      group->max_num_blocks, group->block_size, 0,
      maps_tokens ? CLBT__TOKEN_ALIGNMENT : 0, &kv_blocks);
  if (status) return status;
  /* Groups that map no tokens, or hold their whole cache on every rank, are
     not sharded. */
  bool sharded = maps_tokens && !group->cp_replicated;
  *out = (clbt_table_config){
      .block_size = group->block_size,
      .kernel_block_size = group->kernel_block_size,
      .max_num_reqs = config->max_num_reqs,
      .max_num_blocks_per_req = kv_blocks,
      .max_num_batched_tokens = config->max_num_batched_tokens,
      .cp_world_size = sharded ? config->cp_world_size : 1,
      .cp_rank = sharded ? config->cp_rank : 0,
      .cp_interleave_size = sharded ? config->cp_interleave_size : 1,
      .slot_mode = group->slot_mode,
  };
  return CLBT_SUCCESS;
}

static clbt_status check_config(const clbt_device *device,
                                const clbt_multi_table_config *config) {
  if (!device) return clbt__fail(CLBT_NULL_ARGUMENT, "device is NULL");
  if (config->num_groups == 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->num_groups is 0; it must be >= 1");
  if (!config->groups)
    return clbt__fail(CLBT_NULL_ARGUMENT, "config->groups is NULL");
  /* Checked here, not per group: groups that are not sharded ignore it. */
  uint32_t world = config->cp_world_size ? config->cp_world_size : 1;
  if (config->cp_rank >= world)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_rank %u is not below cp_world_size %u",
                      (unsigned)config->cp_rank, (unsigned)world);
  return CLBT_SUCCESS;
}

/* The token-mapping groups, eight to a launch. */
static uint32_t collect_token_groups(clbt_table *const *groups,
                                     uint32_t num_groups, clbt_table **out) {
  uint32_t count = 0;
  for (uint32_t g = 0; g < num_groups; ++g)
    if (groups[g]->layout.slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT)
      out[count++] = groups[g];
  return count;
}

static uint32_t launches_for(uint32_t token_groups) {
  return (token_groups + CLBT__MAX_LAUNCH_GROUPS - 1) / CLBT__MAX_LAUNCH_GROUPS;
}

static uint32_t launch_size(uint32_t token_groups, uint32_t launch) {
  uint32_t rest = token_groups - launch * CLBT__MAX_LAUNCH_GROUPS;
  return rest < CLBT__MAX_LAUNCH_GROUPS ? rest : CLBT__MAX_LAUNCH_GROUPS;
}

static clbt_status create_launches(clbt_multi_table *table) {
  clbt_table **token_groups = malloc(table->num_groups * sizeof *token_groups);
  if (!token_groups)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  uint32_t count =
      collect_token_groups(table->groups, table->num_groups, token_groups);
  clbt_status status = CLBT_SUCCESS;
  table->launches = calloc(launches_for(count) + 1, sizeof *table->launches);
  if (!table->launches)
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for launches");
  for (uint32_t l = 0; !status && l < launches_for(count); ++l) {
    status = clbt__launch_init(&table->launches[l],
                               token_groups + l * CLBT__MAX_LAUNCH_GROUPS,
                               launch_size(count, l));
    if (!status) table->num_launches = l + 1;
  }
  free(token_groups);
  return status;
}

clbt_status clbt_multi_table_create(clbt_device *device,
                                    const clbt_multi_table_config *given,
                                    clbt_multi_table **out) {
  clbt_multi_table_config read, *config = &read;
  clbt_status status = clbt__multi_table_config_read(given, &read);
  if (!status && device && !out)
    status = clbt__fail(CLBT_NULL_ARGUMENT, "out is NULL");
  if (!status) status = check_config(device, config);
  if (status) return status;
  clbt_multi_table *table = calloc(1, sizeof *table);
  if (table) table->groups = calloc(config->num_groups, sizeof *table->groups);
  if (!table || !table->groups) {
    free(table);
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for %u groups", (unsigned)config->num_groups);
  }
  table->num_groups = config->num_groups;
  for (uint32_t g = 0; g < config->num_groups && !status; ++g) {
    clbt_table_config group;
    status = group_config(config, g, &group);
    /* The groups' kernels are the multi-group launches below. */
    if (!status)
      status = clbt__table_create(device, &group, false, &table->groups[g]);
    if (status) clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  if (!status) status = create_launches(table);
  if (status) {
    clbt_multi_table_destroy(table);
    return status;
  }
  *out = table;
  return CLBT_SUCCESS;
}

void clbt_multi_table_destroy(clbt_multi_table *table) {
  if (!table) return;
  for (uint32_t l = 0; l < table->num_launches; ++l)
    clbt__launch_release(&table->launches[l]);
  free(table->launches);
  for (uint32_t g = 0; g < table->num_groups; ++g)
    clbt_table_destroy(table->groups[g]);
  free(table->groups);
  free(table);
}

clbt_status clbt_multi_table_prepare(clbt_device *device,
                                     const clbt_multi_table_config *given) {
  clbt_multi_table_config read, *config = &read;
  clbt_status status = clbt__multi_table_config_read(given, &read);
  if (!status) status = check_config(device, config);
  if (status) return status;
  clbt__group_spec *specs = malloc(config->num_groups * sizeof *specs);
  if (!specs)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)config->num_groups);
  uint32_t count = 0;
  for (uint32_t g = 0; !status && g < config->num_groups; ++g) {
    clbt_table_config group;
    clbt__table_layout layout;
    status = group_config(config, g, &group);
    if (!status) status = clbt__table_layout_init(&group, &layout);
    if (status) clbt__prefix_error(status, "groups[%u]", (unsigned)g);
    else if (layout.slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT)
      specs[count++] = layout.spec;
  }
  for (uint32_t l = 0; !status && l < launches_for(count); ++l) {
    const clbt__group_spec *chunk[CLBT__MAX_LAUNCH_GROUPS];
    cl_program program;
    for (uint32_t i = 0; i < launch_size(count, l); ++i)
      chunk[i] = &specs[l * CLBT__MAX_LAUNCH_GROUPS + i];
    status = clbt__launch_program(device, chunk, launch_size(count, l),
                                  config->max_num_reqs, &program);
  }
  free(specs);
  return status;
}

static clbt_status update_row(clbt_multi_table *table, uint32_t row,
                              const int32_t *const *block_ids,
                              const size_t *counts, bool replace) {
  if (!table || !block_ids || !counts)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : !block_ids ? "block_ids" : "counts");
  for (uint32_t g = 0; g < table->num_groups; ++g) {
    clbt_status status = clbt__check_append(table->groups[g], row, block_ids[g],
                                            counts[g], replace);
    if (status) return clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  for (uint32_t g = 0; g < table->num_groups; ++g)
    clbt__apply_append(table->groups[g], row, block_ids[g], counts[g], replace);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_append_row(clbt_multi_table *table, uint32_t row,
                                        const int32_t *const *block_ids,
                                        const size_t *counts) {
  return update_row(table, row, block_ids, counts, false);
}

clbt_status clbt_multi_table_add_row(clbt_multi_table *table, uint32_t row,
                                     const int32_t *const *block_ids,
                                     const size_t *counts) {
  return update_row(table, row, block_ids, counts, true);
}

/* Every group has the same max_num_reqs, so checking the first checks all. */
static clbt_table *first_group(const clbt_multi_table *table) {
  return table ? table->groups[0] : NULL;
}

clbt_status clbt_multi_table_clear_row(clbt_multi_table *table, uint32_t row) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_row(first_group(table), "row", row);
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    clbt__apply_clear_row(table->groups[g], row);
  return status;
}

clbt_status clbt_multi_table_move_row(clbt_multi_table *table, uint32_t src,
                                      uint32_t dst) {
  clbt_status status =
      clbt__check_pair(first_group(table), "src", src, "dst", dst);
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    clbt__apply_move_row(table->groups[g], src, dst);
  return status;
}

clbt_status clbt_multi_table_swap_row(clbt_multi_table *table, uint32_t a,
                                      uint32_t b) {
  clbt_status status = clbt__check_pair(first_group(table), "a", a, "b", b);
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    clbt__apply_swap_row(table->groups[g], a, b);
  return status;
}

clbt_status clbt_multi_table_enqueue_commit(clbt_multi_table *table,
                                            uint32_t num_reqs,
                                            cl_uint num_events,
                                            const cl_event *wait_list,
                                            cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_batch(first_group(table), num_reqs, 0);
  if (!status) status = clbt__check_wait_list(num_events, wait_list);
  /* The queue is in order: the first group waits, the last one signals. */
  for (uint32_t g = 0; !status && g < table->num_groups; ++g) {
    bool first = g == 0, last = g + 1 == table->num_groups;
    status = clbt__commit(table->groups[g], num_reqs, first ? num_events : 0,
                          first ? wait_list : NULL, last ? event : NULL);
  }
  return status;
}

clbt_status clbt_multi_table_commit(clbt_multi_table *table,
                                   uint32_t num_reqs) {
  return clbt_multi_table_enqueue_commit(table, num_reqs, 0, NULL, NULL);
}

clbt_status clbt_multi_table_enqueue_slot_mapping(
    clbt_multi_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens, cl_uint num_events,
    const cl_event *wait_list, cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  /* Every group has the same bounds and context as the first. */
  clbt_status status = clbt__check_batch_arguments(
      first_group(table), num_reqs, query_start_loc, positions, num_tokens,
      num_events, wait_list);
  if (status) return status;
  cl_command_queue queue = first_group(table)->device->queue;
  if (table->num_launches == 0)
    return clbt__enqueue_marker(queue, num_events, wait_list, event);
  for (uint32_t l = 0; !status && l < table->num_launches; ++l) {
    bool first = l == 0, last = l + 1 == table->num_launches;
    status = clbt__launch_enqueue(&table->launches[l], queue, num_reqs,
                                  query_start_loc, positions, num_tokens,
                                  first ? num_events : 0,
                                  first ? wait_list : NULL, last ? event : NULL);
  }
  return status;
}

clbt_status clbt_multi_table_compute_slot_mapping(clbt_multi_table *table,
                                                  uint32_t num_reqs,
                                                  cl_mem query_start_loc,
                                                  cl_mem positions,
                                                  uint32_t num_tokens) {
  return clbt_multi_table_enqueue_slot_mapping(
      table, num_reqs, query_start_loc, positions, num_tokens, 0, NULL, NULL);
}

clbt_status clbt_multi_table_clear(clbt_multi_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  /* Device first: a failure there leaves every host group as it was, and
     the groups already zeroed on the device for the next commit to repair. */
  uint32_t zeroed = 0;
  clbt_status status = CLBT_SUCCESS;
  for (; !status && zeroed < table->num_groups; ++zeroed)
    status = clbt__table_zero_device(table->groups[zeroed]);
  if (status) {
    for (uint32_t g = 0; g < zeroed; ++g) table->groups[g]->device_stale = true;
    return status;
  }
  for (uint32_t g = 0; g < table->num_groups; ++g)
    clbt__table_zero_host(table->groups[g]);
  return CLBT_SUCCESS;
}

uint32_t clbt_multi_table_num_groups(const clbt_multi_table *table) {
  return table ? table->num_groups : 0;
}

clbt_table *clbt_multi_table_group(clbt_multi_table *table, uint32_t group) {
  if (!table || group >= table->num_groups) return NULL;
  return table->groups[group];
}
