/*
 * The host reference of the slot mapping: vLLM's kernel transcribed request
 * by request, as plainly as it reads in block_table.py, plus clbt's rules
 * for unsafe input. The device kernel finds each token's request instead;
 * the tests hold the two against each other.
 */
#include "engine.h"

/* query_start_loc is a non-decreasing run from >= 0 to <= num_tokens. */
static bool well_formed(const int32_t *query_start_loc, uint32_t num_reqs,
                        uint32_t num_tokens) {
  if (query_start_loc[0] < 0) return false;
  for (uint32_t r = 0; r < num_reqs; ++r)
    if (query_start_loc[r + 1] < query_start_loc[r]) return false;
  return (int64_t)query_start_loc[num_reqs] <= (int64_t)num_tokens;
}

static int64_t slot_of(const clbt__table_layout *layout, int64_t position,
                       const int32_t *row, uint32_t row_length) {
  const clbt__group_spec *spec = &layout->spec;
  if (position < 0) return CLBT_PAD_SLOT_ID;
  uint64_t virtual_block_size =
      (uint64_t)spec->kv_block_size * spec->cp_world_size;
  uint64_t virtual_index = (uint64_t)position / virtual_block_size;
  uint64_t virtual_offset = (uint64_t)position % virtual_block_size;
  bool is_local = (virtual_offset / spec->cp_interleave_size) %
                      spec->cp_world_size ==
                  spec->cp_rank;
  if (!is_local) return CLBT_PAD_SLOT_ID;
  uint64_t local_offset =
      virtual_offset / ((uint64_t)spec->cp_world_size * spec->cp_interleave_size) *
          spec->cp_interleave_size +
      virtual_offset % spec->cp_interleave_size;
  if (virtual_index >= row_length) return CLBT_PAD_SLOT_ID;
  uint64_t block_index = virtual_index * spec->blocks_per_kv_block +
                         local_offset / layout->kernel_block_size;
  if (block_index >= row_length) return CLBT_PAD_SLOT_ID;
  return (int64_t)row[block_index] * layout->kernel_block_size +
         (int64_t)(local_offset % layout->kernel_block_size);
}

clbt_status clbt_table_compute_slot_mapping_host(
    const clbt_table *table, uint32_t num_reqs, const int32_t *query_start_loc,
    const int64_t *positions, uint32_t num_tokens, int64_t *out) {
  if (!table || !query_start_loc || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !table             ? "table"
                      : !query_start_loc ? "query_start_loc"
                                         : "out");
  if (!positions && num_tokens > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens %u",
                      (unsigned)num_tokens);
  clbt_status status = clbt__check_batch(table, num_reqs, num_tokens);
  if (status || table->layout.slot_mode == CLBT_SLOT_MODE_NONE) return status;

  const clbt__table_layout *layout = &table->layout;
  for (uint32_t t = 0; t < layout->max_num_batched_tokens; ++t)
    out[t] = CLBT_PAD_SLOT_ID;
  if (!well_formed(query_start_loc, num_reqs, num_tokens)) return CLBT_SUCCESS;
  for (uint32_t r = 0; r < num_reqs; ++r) {
    const int32_t *row = table->rows + (size_t)r * layout->width;
    for (int32_t t = query_start_loc[r]; t < query_start_loc[r + 1]; ++t)
      out[t] = slot_of(layout, positions[t], row, table->row_lengths[r]);
  }
  return CLBT_SUCCESS;
}
