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
};

/* The single-table config of group g; the caller names the group. */
static clbt_status group_config(const clbt_multi_table_config *config,
                                uint32_t g, clbt_table_config *out) {
  const clbt_group_config *group = &config->groups[g];
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
  if (!device || !config)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !device ? "device" : "config");
  if (config->num_groups == 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->num_groups is 0; it must be >= 1");
  if (!config->groups)
    return clbt__fail(CLBT_NULL_ARGUMENT, "config->groups is NULL");
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_create(clbt_device *device,
                                    const clbt_multi_table_config *config,
                                    clbt_multi_table **out) {
  clbt_status status = check_config(device, config);
  if (status) return status;
  if (!out) return clbt__fail(CLBT_NULL_ARGUMENT, "out is NULL");
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
    if (!status) status = clbt_table_create(device, &group, &table->groups[g]);
    if (status) clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  if (status) {
    clbt_multi_table_destroy(table);
    return status;
  }
  *out = table;
  return CLBT_SUCCESS;
}

void clbt_multi_table_destroy(clbt_multi_table *table) {
  if (!table) return;
  for (uint32_t g = 0; g < table->num_groups; ++g)
    clbt_table_destroy(table->groups[g]);
  free(table->groups);
  free(table);
}

clbt_status clbt_multi_table_prepare(clbt_device *device,
                                     const clbt_multi_table_config *config) {
  clbt_status status = check_config(device, config);
  for (uint32_t g = 0; !status && g < config->num_groups; ++g) {
    clbt_table_config group;
    status = group_config(config, g, &group);
    if (!status) status = clbt_table_prepare(device, &group);
    if (status) clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
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
static const clbt_table *first_group(const clbt_multi_table *table) {
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

clbt_status clbt_multi_table_commit(clbt_multi_table *table,
                                   uint32_t num_reqs) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_batch(first_group(table), num_reqs, 0);
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    status = clbt_table_commit(table->groups[g], num_reqs);
  return status;
}

clbt_status clbt_multi_table_compute_slot_mapping(clbt_multi_table *table,
                                                  uint32_t num_reqs,
                                                  cl_mem query_start_loc,
                                                  cl_mem positions,
                                                  uint32_t num_tokens) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    status = clbt_table_compute_slot_mapping(table->groups[g], num_reqs,
                                             query_start_loc, positions,
                                             num_tokens);
  return status;
}

clbt_status clbt_multi_table_clear(clbt_multi_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = 0; !status && g < table->num_groups; ++g)
    status = clbt_table_clear(table->groups[g]);
  return status;
}

uint32_t clbt_multi_table_num_groups(const clbt_multi_table *table) {
  return table ? table->num_groups : 0;
}

clbt_table *clbt_multi_table_group(clbt_multi_table *table, uint32_t group) {
  if (!table || group >= table->num_groups) return NULL;
  return table->groups[group];
}
