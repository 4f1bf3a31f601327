/*
 * The multi-group table: one clbt_table per KV-cache group, sized and edited
 * together as vLLM's MultiGroupBlockTable does, on the table engine
 * (engine.c). Each group's config becomes the single-table config vLLM's
 * rules give it, checked by the same rules as clbt_table_create's. Row
 * operations check every group before changing any, so they are all or
 * nothing.
 */
#include "api/reference.h"
#include "base/config.h"
#include "base/status.h"
#include "calls/commit_call.h"
#include "calls/export.h"
#include "calls/slot_mapping.h"
#include "calls/step.h"
#include "calls/token_slots.h"
#include "device/queue.h"
#include "engine/engine.h"
#include "engine/group.h"
#include "engine/table_rows.h"

#include <stdlib.h>

/* vLLM aligns each token-mapping group's row to this many tokens. */
#define CLBT__TOKEN_ALIGNMENT 128

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
  bool aligned = maps_tokens && !config->exact_widths;
  clbt_status status = clbt_block_table_width(
      group->max_num_blocks, group->block_size, 0,
      aligned ? CLBT__TOKEN_ALIGNMENT : 0, &kv_blocks);
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
      .zero_gathered_tails = config->zero_gathered_tails,
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
  if (config->commit_mode < CLBT_COMMIT_AUTO ||
      config->commit_mode > CLBT_COMMIT_SCATTER)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->commit_mode %d is not a clbt_commit_mode",
                      (int)config->commit_mode);
  if (config->reserved)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->reserved is %u; it must be 0",
                      (unsigned)config->reserved);
  /* Checked here, not per group: groups that are not sharded ignore it. */
  uint32_t world = config->cp_world_size ? config->cp_world_size : 1;
  if (config->cp_rank >= world)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_rank %u is not below cp_world_size %u",
                      (unsigned)config->cp_rank, (unsigned)world);
  return CLBT_SUCCESS;
}

/* Every group's layout, or the first group's failure, naming the group.
   *layouts is the caller's to free. */
static clbt_status group_layouts(const clbt_multi_table_config *config,
                                 clbt__table_layout **layouts) {
  *layouts = malloc(config->num_groups * sizeof **layouts);
  if (!*layouts)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u groups",
                      (unsigned)config->num_groups);
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = 0; !status && g < config->num_groups; ++g) {
    clbt_table_config group;
    status = group_config(config, g, &group);
    if (!status) status = clbt__table_layout_init(&group, &(*layouts)[g]);
    if (status) clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
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
  clbt__table_layout *layouts = NULL;
  if (!status) status = group_layouts(config, &layouts);
  if (!status)
    status = clbt__engine_create(device, layouts, config->num_groups, false,
                                 out);
  for (uint32_t g = 0; !status && g < config->num_groups; ++g)
    clbt__engine_group(*out, g)->commit_mode = config->commit_mode;
  free(layouts);
  return status;
}

void clbt_multi_table_destroy(clbt_multi_table *table) {
  clbt__engine_destroy(table);
}

clbt_status clbt_multi_table_prepare(clbt_device *device,
                                     const clbt_multi_table_config *given) {
  clbt_multi_table_config read, *config = &read;
  clbt_status status = clbt__multi_table_config_read(given, &read);
  if (!status) status = check_config(device, config);
  clbt__table_layout *layouts = NULL;
  if (!status) status = group_layouts(config, &layouts);
  if (!status)
    status = clbt__engine_prepare(device, layouts, config->num_groups);
  free(layouts);
  return status;
}

static clbt_status update_row(clbt_multi_table *table, uint32_t row,
                              const int32_t *const *block_ids,
                              const size_t *counts, bool replace) {
  if (!table || !block_ids || !counts)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : !block_ids ? "block_ids" : "counts");
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g) {
    clbt_status status = clbt__check_append(all.groups[g], row, block_ids[g],
                                            counts[g], replace);
    if (status) return clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_append(all.groups[g], row, block_ids[g], counts[g], replace);
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

/* Group g's ids in a flat array: after the counts of the groups before it. */
static const int32_t *group_ids(const int32_t *block_ids, size_t first) {
  return block_ids ? block_ids + first : NULL;
}

clbt_status clbt_multi_table_update_row(clbt_multi_table *table, uint32_t row,
                                        const size_t *counts,
                                        const int32_t *block_ids,
                                        clbt_row_update how) {
  if (!table || !counts)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "counts");
  if (how != CLBT_ROW_APPEND && how != CLBT_ROW_REPLACE)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "how is %d; CLBT_ROW_APPEND (0) or CLBT_ROW_REPLACE "
                      "(1) expected",
                      (int)how);
  bool replace = how == CLBT_ROW_REPLACE;
  const clbt__scope all = clbt__engine_scope(table);
  /* A group's count is added only once it is checked, so first stays
     within the ids the groups before it hold. */
  size_t first = 0;
  for (uint32_t g = all.begin; g < all.end; first += counts[g++]) {
    clbt_status status = clbt__check_append(
        all.groups[g], row, group_ids(block_ids, first), counts[g], replace);
    if (status)
      return clbt__prefix_error(status, "groups[%u] (ids from block_ids[%zu])",
                                (unsigned)g, first);
  }
  first = 0;
  for (uint32_t g = all.begin; g < all.end; first += counts[g++])
    clbt__apply_append(all.groups[g], row, group_ids(block_ids, first),
                       counts[g], replace);
  return CLBT_SUCCESS;
}

/* Every group has the same max_num_reqs, so checking the first checks all. */
static clbt_table *first_group(const clbt_multi_table *table) {
  return table ? clbt__engine_group(table, 0) : NULL;
}

/* The batch row updates: every group's entries are checked before any
   group changes. */
static clbt_status update_rows(clbt_multi_table *table, size_t num_rows,
                               const uint32_t *rows,
                               const uint32_t *const *counts,
                               const int32_t *const *block_ids, bool replace) {
  if (!table || !counts || !block_ids)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : !counts ? "counts" : "block_ids");
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g) {
    clbt_status status = clbt__check_rows(all.groups[g], num_rows, rows,
                                          counts[g], block_ids[g], replace);
    if (status) return clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_rows(all.groups[g], num_rows, rows, counts[g], block_ids[g],
                     replace);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_append_rows(clbt_multi_table *table,
                                         size_t num_rows, const uint32_t *rows,
                                         const uint32_t *const *counts,
                                         const int32_t *const *block_ids) {
  return update_rows(table, num_rows, rows, counts, block_ids, false);
}

clbt_status clbt_multi_table_add_rows(clbt_multi_table *table, size_t num_rows,
                                      const uint32_t *rows,
                                      const uint32_t *const *counts,
                                      const int32_t *const *block_ids) {
  return update_rows(table, num_rows, rows, counts, block_ids, true);
}

clbt_status clbt_multi_table_clear_row(clbt_multi_table *table, uint32_t row) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_row(first_group(table), "row", row);
  if (status) return status;
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_clear_row(all.groups[g], row);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_truncate_row(clbt_multi_table *table,
                                         uint32_t row,
                                         const size_t *num_blocks) {
  if (!table || !num_blocks)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "num_blocks");
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g) {
    clbt_status status =
        clbt__check_truncate(all.groups[g], row, num_blocks[g]);
    if (status) return clbt__prefix_error(status, "groups[%u]", (unsigned)g);
  }
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_truncate(all.groups[g], row, num_blocks[g]);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_move_row(clbt_multi_table *table, uint32_t src,
                                      uint32_t dst) {
  clbt_status status =
      clbt__check_pair(first_group(table), "src", src, "dst", dst);
  if (status) return status;
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_move_row(all.groups[g], src, dst);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_swap_row(clbt_multi_table *table, uint32_t a,
                                      uint32_t b) {
  clbt_status status = clbt__check_pair(first_group(table), "a", a, "b", b);
  if (status) return status;
  const clbt__scope all = clbt__engine_scope(table);
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__apply_swap_row(all.groups[g], a, b);
  return CLBT_SUCCESS;
}

clbt_status clbt_multi_table_enqueue_commit(clbt_multi_table *table,
                                            uint32_t num_reqs,
                                            cl_uint num_events,
                                            const cl_event *wait_list,
                                            cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  const clbt__scope scope = clbt__engine_scope(table);
  return clbt__enqueue_commit(&scope, num_reqs, num_events, wait_list,
                              event);
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
  const clbt__batch batch = {.num_reqs = num_reqs,
                             .query_start_loc = query_start_loc,
                             .positions = positions,
                             .num_tokens = num_tokens};
  const clbt__scope scope = clbt__engine_scope(table);
  return clbt__enqueue_slot_mapping(&scope, &batch, num_events, wait_list,
                                    event);
}

clbt_status clbt_multi_table_enqueue_step(clbt_multi_table *table,
                                          const clbt_step *step,
                                          cl_uint num_events,
                                          const cl_event *wait_list,
                                          cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  const clbt__scope scope = clbt__engine_scope(table);
  return clbt__enqueue_step(&scope, step, num_events, wait_list, event);
}

clbt_status clbt_multi_table_enqueue_export(clbt_multi_table *table,
                                            const clbt_export_request *given,
                                            cl_uint num_events,
                                            const cl_event *wait_list,
                                            cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_export_request request;
  clbt_status status = clbt__export_request_read(given, &request);
  if (status) return status;
  const clbt__batch batch = clbt__export_batch(&request);
  const clbt__scope scope = clbt__engine_scope(table);
  return clbt__enqueue_export(&scope, &batch, num_events, wait_list, event);
}

clbt_status clbt_multi_table_enqueue_token_slots(
    clbt_multi_table *table, const clbt_token_slots_request *given,
    cl_uint num_events, const cl_event *wait_list, cl_event *event) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_token_slots_request request;
  clbt_status status = clbt__token_slots_request_read(given, &request);
  if (status) return status;
  const clbt__scope scope = clbt__engine_scope(table);
  return clbt__enqueue_token_slots(&scope, &request, num_events, wait_list,
                                   event);
}

clbt_status clbt_multi_table_compute_slot_mapping(clbt_multi_table *table,
                                                  uint32_t num_reqs,
                                                  cl_mem query_start_loc,
                                                  cl_mem positions,
                                                  uint32_t num_tokens) {
  return clbt_multi_table_enqueue_slot_mapping(
      table, num_reqs, query_start_loc, positions, num_tokens, 0, NULL, NULL);
}

clbt_status clbt_multi_table_compute_step_host(
    const clbt_multi_table *table, const clbt_multi_host_step *given) {
  clbt_multi_host_step step;
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__multi_host_step_read(given, &step);
  clbt_host_step group_step = {.flags = step.flags,
                               .num_reqs = step.num_reqs,
                               .num_reqs_padded = step.num_reqs_padded,
                               .num_tokens = step.num_tokens,
                               .query_start_loc = step.query_start_loc,
                               .positions = step.positions,
                               .idx_mapping = step.idx_mapping};
  if (!status) status = clbt__check_host_step(first_group(table), &group_step);
  for (uint32_t g = 0; !status && g < clbt__engine_num_groups(table); ++g) {
    group_step.slot_mapping = step.slot_mappings ? step.slot_mappings[g] : NULL;
    group_step.gathered_rows =
        step.gathered_rows ? step.gathered_rows[g] : NULL;
    clbt__compute_step_host(clbt__engine_group(table, g), &group_step);
  }
  return status;
}

clbt_status clbt_multi_table_clear(clbt_multi_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  /* Device first: a failure there leaves every host group as it was, and
     the groups already zeroed on the device for the next commit to repair. */
  const clbt__scope all = clbt__engine_scope(table);
  uint32_t zeroed = all.begin;
  clbt_status status = CLBT_SUCCESS;
  clbt__sequence sequence =
      clbt__sequence_start(all.first->device, 0, NULL, false);
  for (; !status && zeroed < all.end; ++zeroed)
    status = clbt__group_zero_device(
        all.groups[zeroed], clbt__engine_next_version(table), &sequence);
  status = clbt__sequence_end(&sequence, status, NULL);
  if (status) {
    for (uint32_t g = all.begin; g < zeroed; ++g)
      all.groups[g]->device_stale = true;
    return status;
  }
  for (uint32_t g = all.begin; g < all.end; ++g)
    clbt__group_zero_host(all.groups[g]);
  return CLBT_SUCCESS;
}

uint32_t clbt_multi_table_num_groups(const clbt_multi_table *table) {
  return table ? clbt__engine_num_groups(table) : 0;
}

clbt_table *clbt_multi_table_group(clbt_multi_table *table, uint32_t group) {
  if (!table || group >= clbt__engine_num_groups(table)) return NULL;
  return clbt__engine_group(table, group);
}
