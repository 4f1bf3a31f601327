/*
 * The public calls of one block table, which is the only group of a table
 * engine of its own (engine.c) or one group of a multi-group table
 * (clbt_multi_table_group): each call's scope is that group alone. The
 * group itself is in group.c, its row operations in table_rows.c, commits
 * in commit.c, the host reference in reference.c.
 */
#include "base/config.h"
#include "base/log.h"
#include "base/status.h"
#include "calls/commit_call.h"
#include "calls/export.h"
#include "calls/slot_mapping.h"
#include "calls/step.h"
#include "calls/token_slots.h"
#include "device/queue.h"
#include "engine/engine.h"
#include "engine/group.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The scope of a call on a table: the table alone. */
static clbt_status scope_of(clbt_table *table, clbt__scope *scope) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  *scope = clbt__table_scope(table);
  return CLBT_SUCCESS;
}

clbt_status clbt_table_create(clbt_device *device,
                              const clbt_table_config *config,
                              clbt_table **out) {
  clbt_table_config read;
  clbt__table_layout layout;
  clbt__engine *engine = NULL;
  clbt_status status = clbt__table_config_read(config, &read);
  if (!status && (!device || !out))
    status = clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                        !device ? "device" : "out");
  if (!status) status = clbt__table_layout_init(&read, &layout);
  if (!status) status = clbt__engine_create(device, &layout, 1, true, &engine);
  if (!status) *out = clbt__engine_group(engine, 0);
  return status;
}

void clbt_table_destroy(clbt_table *table) {
  if (!table) return;
  if (clbt__engine_standalone(table->engine))
    clbt__engine_destroy(table->engine);
  else
    clbt__log(CLBT_LOG_ERROR, "clbt_table_destroy: a group of a multi-group "
              "table goes with clbt_multi_table_destroy; left as it is");
}

clbt_status clbt_table_prepare(clbt_device *device,
                               const clbt_table_config *config) {
  if (!device || !config)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !device ? "device" : "config");
  clbt_table_config read;
  clbt__table_layout layout;
  clbt_status status = clbt__table_config_read(config, &read);
  if (!status) status = clbt__table_layout_init(&read, &layout);
  if (!status) status = clbt__engine_prepare(device, &layout, 1);
  return status;
}

clbt_status clbt_table_enqueue_commit(clbt_table *table, uint32_t num_reqs,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event) {
  clbt__scope scope;
  clbt_status status = scope_of(table, &scope);
  return status ? status
                : clbt__enqueue_commit(&scope, num_reqs, num_events,
                                       wait_list, event);
}

clbt_status clbt_table_commit(clbt_table *table, uint32_t num_reqs) {
  return clbt_table_enqueue_commit(table, num_reqs, 0, NULL, NULL);
}

clbt_status clbt_table_set_commit_mode(clbt_table *table,
                                       clbt_commit_mode mode) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  if (mode < CLBT_COMMIT_AUTO || mode > CLBT_COMMIT_SCATTER)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "mode %d is not a clbt_commit_mode", (int)mode);
  table->commit_mode = mode;
  return CLBT_SUCCESS;
}

clbt_status clbt_table_last_commit(const clbt_table *table,
                                   clbt_commit_info *info) {
  if (!table || !info)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "info");
  *info = table->last_commit;
  return CLBT_SUCCESS;
}

clbt_status clbt_table_enqueue_slot_mapping(
    clbt_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens, cl_uint num_events,
    const cl_event *wait_list, cl_event *event) {
  const clbt__batch batch = {.num_reqs = num_reqs,
                             .query_start_loc = query_start_loc,
                             .positions = positions,
                             .num_tokens = num_tokens};
  clbt__scope scope;
  clbt_status status = scope_of(table, &scope);
  return status ? status
                : clbt__enqueue_slot_mapping(&scope, &batch, num_events,
                                             wait_list, event);
}

clbt_status clbt_table_enqueue_step(clbt_table *table, const clbt_step *step,
                                    cl_uint num_events,
                                    const cl_event *wait_list,
                                    cl_event *event) {
  clbt__scope scope;
  clbt_status status = scope_of(table, &scope);
  return status ? status
                : clbt__enqueue_step(&scope, step, num_events, wait_list,
                                     event);
}

clbt_status clbt_table_enqueue_export(clbt_table *table,
                                      const clbt_export_request *given,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event) {
  clbt_export_request request;
  clbt__scope scope;
  clbt_status status = scope_of(table, &scope);
  if (!status) status = clbt__export_request_read(given, &request);
  if (status) return status;
  const clbt__batch batch = clbt__export_batch(&request);
  return clbt__enqueue_export(&scope, &batch, num_events, wait_list, event);
}

clbt_status clbt_table_enqueue_token_slots(
    clbt_table *table, const clbt_token_slots_request *given,
    cl_uint num_events, const cl_event *wait_list, cl_event *event) {
  clbt_token_slots_request request;
  clbt__scope scope;
  clbt_status status = scope_of(table, &scope);
  if (!status) status = clbt__token_slots_request_read(given, &request);
  return status ? status
                : clbt__enqueue_token_slots(&scope, &request, num_events,
                                            wait_list, event);
}

clbt_status clbt_table_export_buffers(const clbt_table *table,
                                      clbt_export_buffers *out) {
  if (!table || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      table ? "out" : "table");
  if (!clbt__maps_tokens(table))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "the table's slot_mode is CLBT_SLOT_MODE_NONE: it has "
                      "no export buffers");
  const cl_mem *regions = table->regions;
  const clbt_export_buffers all = {
      .paged_kv_indptr = regions[CLBT_REGION_EXPORT_INDPTR],
      .paged_kv_indices = regions[CLBT_REGION_EXPORT_INDICES],
      .paged_kv_last_page_len = regions[CLBT_REGION_EXPORT_LAST_PAGE_LEN],
      .past_lens = regions[CLBT_REGION_EXPORT_PAST_LENS],
      .subsequence_begins = regions[CLBT_REGION_EXPORT_SUBSEQUENCE_BEGINS],
      .page_size = table->layout.kernel_block_size,
      .struct_size = sizeof(clbt_export_buffers),
      .seq_lens = regions[CLBT_REGION_EXPORT_SEQ_LENS],
      .dcp_local_seq_lens = regions[CLBT_REGION_EXPORT_LOCAL_SEQ_LENS],
      .max_seq_len = regions[CLBT_REGION_EXPORT_MAX_SEQ_LEN],
      .context_kv_indptr = regions[CLBT_REGION_EXPORT_CONTEXT_INDPTR],
      .context_kv_indices = regions[CLBT_REGION_EXPORT_CONTEXT_INDICES],
      .context_kv_last_page_len =
          regions[CLBT_REGION_EXPORT_CONTEXT_LAST_PAGE_LEN],
      .page_table = regions[CLBT_REGION_EXPORT_PAGE_TABLE]};
  /* Frozen within the major version: every caller's struct is this one,
     whatever its struct_size holds (which a caller may not have set). */
  *out = all;
  return CLBT_SUCCESS;
}

clbt_status clbt_table_compute_slot_mapping(clbt_table *table,
                                            uint32_t num_reqs,
                                            cl_mem query_start_loc,
                                            cl_mem positions,
                                            uint32_t num_tokens) {
  return clbt_table_enqueue_slot_mapping(table, num_reqs, query_start_loc,
                                         positions, num_tokens, 0, NULL, NULL);
}

clbt_status clbt_table_clear(clbt_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt__sequence sequence =
      clbt__sequence_start(table->device, 0, NULL, false);
  uint64_t version = clbt__engine_next_version(table->engine);
  clbt_status status = clbt__sequence_end(
      &sequence, clbt__group_zero_device(table, version, &sequence), NULL);
  if (!status) clbt__group_zero_host(table);
  return status;
}

clbt_status clbt_table_read_rejected_tokens(clbt_table *table,
                                            uint32_t *count) {
  if (!table || !count)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table ? "table" : "count");
  return clbt__read_counter(table->device,
                            table->regions[CLBT_REGION_REJECTED_TOKENS], count);
}

clbt_status clbt_table_reset_rejected_tokens(clbt_table *table) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  return clbt__reset_counter(table->device,
                             table->regions[CLBT_REGION_REJECTED_TOKENS]);
}

uint32_t clbt_table_width(const clbt_table *table) {
  return table ? table->layout.width : 0;
}

const int32_t *clbt_table_host_data(const clbt_table *table) {
  return table ? table->rows : NULL;
}

cl_mem clbt_table_device_data(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_ROWS] : NULL;
}

cl_mem clbt_table_device_row_lengths(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_ROW_LENGTHS] : NULL;
}

cl_mem clbt_table_gathered_rows(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_GATHERED] : NULL;
}

cl_mem clbt_table_state_slots(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_STATE_SLOTS] : NULL;
}

cl_mem clbt_table_slot_mapping(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_SLOTS] : NULL;
}

cl_mem clbt_table_rejected_tokens(const clbt_table *table) {
  return table ? table->regions[CLBT_REGION_REJECTED_TOKENS] : NULL;
}
