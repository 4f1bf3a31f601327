/*
 * The host references of the slot mapping and of the step: vLLM's kernels
 * transcribed request by request, as plainly as they read in
 * block_table.py, plus clbt's rules for unsafe input. The device kernels
 * find each token's request instead; the tests hold the two against each
 * other.
 */
#include "api/reference.h"

#include "base/config.h"
#include "base/status.h"
#include "calls/checks.h"
#include "engine/group.h"

#include <string.h>

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
      virtual_offset /
          ((uint64_t)spec->cp_world_size * spec->cp_interleave_size) *
          spec->cp_interleave_size +
      virtual_offset % spec->cp_interleave_size;
  if (virtual_index >= row_length) return CLBT_PAD_SLOT_ID;
  uint64_t block_index = virtual_index * spec->blocks_per_kv_block +
                         local_offset / layout->kernel_block_size;
  if (block_index >= row_length) return CLBT_PAD_SLOT_ID;
  return (int64_t)row[block_index] * layout->kernel_block_size +
         (int64_t)(local_offset % layout->kernel_block_size);
}

/*
 * The host row batch request r reads (idx_mapping[r], or r without one),
 * or NULL when it reads none: a negative entry, or one not below
 * max_num_reqs. *length is that row's length, 0 for none.
 */
static const int32_t *row_of(const clbt_table *table,
                             const int32_t *idx_mapping, uint32_t r,
                             uint32_t *length) {
  int64_t row = idx_mapping ? idx_mapping[r] : (int64_t)r;
  *length = 0;
  if (row < 0 || row >= table->layout.max_num_reqs) return NULL;
  *length = table->row_lengths[row];
  return table->rows + (size_t)row * table->layout.width;
}

/*
 * Fills out[0, max_num_batched_tokens): each scheduled token's slot in
 * the row its request reads, the pad slot id for every other element, for
 * every token of a request that reads no row, and for every token of a
 * malformed batch.
 */
static void map_tokens(const clbt_table *table, uint32_t num_reqs,
                       const int32_t *query_start_loc,
                       const int64_t *positions, uint32_t num_tokens,
                       const int32_t *idx_mapping, int64_t *out) {
  const clbt__table_layout *layout = &table->layout;
  for (uint32_t t = 0; t < layout->max_num_batched_tokens; ++t)
    out[t] = CLBT_PAD_SLOT_ID;
  if (!well_formed(query_start_loc, num_reqs, num_tokens)) return;
  for (uint32_t r = 0; r < num_reqs; ++r) {
    uint32_t length;
    const int32_t *row = row_of(table, idx_mapping, r, &length);
    for (int32_t t = query_start_loc[r]; row && t < query_start_loc[r + 1]; ++t)
      out[t] = slot_of(layout, positions[t], row, length);
  }
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
    return clbt__fail(CLBT_NULL_ARGUMENT,
                      "positions is NULL with num_tokens %u",
                      (unsigned)num_tokens);
  clbt_status status = clbt__check_batch(table, num_reqs, num_tokens);
  if (status || !clbt__maps_tokens(table)) return status;
  map_tokens(table, num_reqs, query_start_loc, positions, num_tokens, NULL,
             out);
  return CLBT_SUCCESS;
}

/*
 * Gathered rows [0, padded): row b < num_reqs is the host row its request
 * reads, entries [0, length); past length, 0 when the table zeroes
 * gathered tails and otherwise what the caller's array held. Every other
 * row is 0.
 */
static void gather_rows(const clbt_table *table, const clbt_host_step *step,
                        uint32_t padded) {
  const clbt__table_layout *layout = &table->layout;
  for (uint32_t b = 0; b < padded; ++b) {
    int32_t *out = step->gathered_rows + (size_t)b * layout->width;
    uint32_t length = 0;
    const int32_t *row =
        b < step->num_reqs ? row_of(table, step->idx_mapping, b, &length)
                           : NULL;
    uint32_t zero_until =
        row && !layout->spec.zero_gathered_tails ? length : layout->width;
    if (row) memcpy(out, row, length * sizeof *out);
    memset(out + length, 0, (zero_until - length) * sizeof *out);
  }
}

clbt_status clbt__check_host_step(const clbt_table *table,
                                  const clbt_host_step *step) {
  if (!step->query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "step->query_start_loc is NULL");
  if (!step->positions && step->num_tokens > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT,
                      "step->positions is NULL with num_tokens %u",
                      (unsigned)step->num_tokens);
  clbt_status status = clbt__check_step_flags(step->flags, false);
  if (!status)
    status = clbt__check_batch(table, step->num_reqs, step->num_tokens);
  if (!status)
    status = clbt__check_padding(table, "step->num_reqs_padded",
                                 step->num_reqs, step->num_reqs_padded);
  return status;
}

void clbt__compute_step_host(const clbt_table *table,
                             const clbt_host_step *step) {
  if (step->slot_mapping && clbt__maps_tokens(table))
    map_tokens(table, step->num_reqs, step->query_start_loc, step->positions,
               step->num_tokens, step->idx_mapping, step->slot_mapping);
  if (step->gathered_rows && (step->flags & CLBT_STEP_GATHER))
    gather_rows(table, step,
                step->num_reqs_padded ? step->num_reqs_padded
                                      : step->num_reqs);
}

clbt_status clbt_table_compute_step_host(const clbt_table *table,
                                         const clbt_host_step *given) {
  clbt_host_step step;
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__host_step_read(given, &step);
  if (!status) status = clbt__check_host_step(table, &step);
  if (!status) clbt__compute_step_host(table, &step);
  return status;
}
