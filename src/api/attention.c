/*
 * The paged attention's public surface (clbt.h): each call reads the
 * caller's structs (base/config.c), sees a table as its rows and layout
 * (the engine's group), and hands them to the KV module (src/kv/: the
 * descriptor, the launch's checks, plan and kernels).
 */
#include "base/config.h"
#include "base/status.h"
#include "device/queue.h"
#include "engine/engine.h"
#include "engine/group.h"
#include "kv/attention.h"
#include "kv/attention_launch.h"

/* A table as the KV module reads it: its committed rows and lengths in
   the engine's storage (for a launch), or in its own sub-buffers from 0
   (for a kernel of the caller's, clbt_kv_pages_describe). */
static clbt__table_view table_view(const clbt_table *table, bool storage) {
  const clbt__table_layout *layout = &table->layout;
  cl_mem engine_storage = clbt__engine_storage(table->engine);
  clbt__table_view view = {
      .context = table->device->context,
      .rows = storage ? engine_storage : table->regions[CLBT_REGION_ROWS],
      .row_stride = layout->width,
      .num_rows = layout->max_num_reqs,
      .kernel_block_size = layout->kernel_block_size,
      .kv_block_size = layout->spec.kv_block_size,
      .cp_world_size = layout->spec.cp_world_size,
      .cp_rank = layout->spec.cp_rank,
      .cp_interleave_size = layout->spec.cp_interleave_size,
      .maps_tokens = clbt__maps_tokens(table)};
  if (storage) {
    view.rows_offset = CLBT_REGION_WORDS(table->at, CLBT_REGION_ROWS);
    view.row_lengths_offset =
        CLBT_REGION_WORDS(table->at, CLBT_REGION_ROW_LENGTHS);
  }
  return view;
}

clbt_status clbt_kv_pages_describe(const clbt_kv_cache *cache,
                                   const clbt_table *table,
                                   clbt_kv_pages *out) {
  if (!cache || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !cache ? "cache" : "out");
  clbt__table_view view;
  if (table) view = table_view(table, false);
  clbt_kv_pages pages;
  clbt_status status =
      clbt__attention_pages(cache, table ? &view : NULL, "table", &pages);
  if (!status) *out = pages;
  return status;
}

clbt_status clbt_attention_create(clbt_device *device,
                                  const clbt_attention_config *config,
                                  clbt_attention **out) {
  clbt_attention_config read;
  clbt_status status = clbt__attention_config_read(config, &read);
  if (!status && (!device || !out))
    status = clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                        !device ? "device" : "out");
  if (status) return status;
  return clbt__attention_create(device, &read, out);
}

void clbt_attention_destroy(clbt_attention *attention) {
  clbt__attention_destroy(attention);
}

clbt_status clbt_attention_enqueue(clbt_attention *attention,
                                   const clbt_kv_cache *cache,
                                   const clbt_attention_batch *given,
                                   cl_uint num_events,
                                   const cl_event *wait_list,
                                   cl_event *event) {
  if (!attention || !cache)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !attention ? "attention" : "cache");
  clbt_attention_batch batch;
  clbt_status status = clbt__attention_batch_read(given, &batch);
  if (status) return status;
  clbt__table_view view;
  if (batch.table) view = table_view(batch.table, true);
  return clbt__attention_enqueue(attention, cache, &batch,
                                 batch.table ? &view : NULL, num_events,
                                 wait_list, event);
}

clbt_status clbt_attention_read_rejected_tokens(clbt_attention *attention,
                                                uint32_t *count) {
  if (!attention || !count)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !attention ? "attention" : "count");
  return clbt__read_counter(attention->device, attention->rejected, count);
}

clbt_status clbt_attention_reset_rejected_tokens(clbt_attention *attention) {
  if (!attention) return clbt__fail(CLBT_NULL_ARGUMENT, "attention is NULL");
  return clbt__reset_counter(attention->device, attention->rejected);
}

cl_mem clbt_attention_rejected_tokens(const clbt_attention *attention) {
  return attention ? attention->rejected : NULL;
}
