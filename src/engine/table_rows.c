/*
 * Row operations on the host rows of one table, as vLLM's BlockTable does
 * them, each split into a check that changes nothing and an apply that
 * cannot fail (table_rows.h).
 */
#include "engine/table_rows.h"

#include "base/status.h"
#include "engine/changes.h"
#include "engine/group.h"

#include <string.h>

static int32_t *row_data(clbt_table *table, uint32_t row) {
  return table->rows + (size_t)row * table->layout.width;
}

clbt_status clbt__check_row(const clbt_table *table, const char *name,
                            uint32_t row) {
  if (row >= table->layout.max_num_reqs)
    return clbt__fail(CLBT_ROW_OUT_OF_RANGE,
                      "%s %u is out of range: max_num_reqs is %u", name,
                      (unsigned)row, (unsigned)table->layout.max_num_reqs);
  return CLBT_SUCCESS;
}

/*
 * Whether every id is in [0, largest] (largest >= 0). A replaced row
 * checks hundreds of ids: their OR first, in blocks whose fixed length
 * GCC vectorises at -O2 (its cheap cost model takes no loop whose trip
 * count it does not know; the plain compare of each id cost 7
 * instructions an id). When the OR, as unsigned, is at most largest, so
 * is every id, and none is negative: the common case, ids far below
 * INT32_MAX. Otherwise each id is compared.
 */
static bool ids_within(const int32_t *ids, size_t n, int32_t largest) {
  enum { BLOCK = 64 };
  uint32_t any = 0, outside = 0;
  size_t i = 0;
  for (; i + BLOCK <= n; i += BLOCK)
    for (size_t j = 0; j < BLOCK; ++j) any |= (uint32_t)ids[i + j];
  for (; i < n; ++i) any |= (uint32_t)ids[i];
  if (any <= (uint32_t)largest) return true;
  for (i = 0; i < n; ++i) outside |= (uint32_t)ids[i] > (uint32_t)largest;
  return outside == 0;
}

clbt_status clbt__check_append(const clbt_table *table, uint32_t row,
                               const int32_t *block_ids, size_t n,
                               bool replace) {
  clbt_status status = clbt__check_row(table, "row", row);
  if (status) return status;
  if (!block_ids && n > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT, "block_ids is NULL with n = %zu", n);
  uint32_t per_block = table->layout.spec.blocks_per_kv_block;
  uint32_t length = replace ? 0 : table->row_lengths[row];
  uint32_t room = table->layout.width - length;
  /* n <= room < 2^32 first, so that the product cannot wrap. */
  if (n > room || n * per_block > room)
    return clbt__fail(CLBT_ROW_OVERFLOW,
                      "n = %zu blocks of %u kernel blocks would overflow row "
                      "%u: it holds %u of width %u",
                      n, (unsigned)per_block, (unsigned)row, (unsigned)length,
                      (unsigned)table->layout.width);
  int32_t largest = table->layout.largest_id;
  if (n > 0 && largest < 0)
    return clbt__fail(CLBT_INVALID_BLOCK_ID,
                      "no block id fits: block_size / kernel_block_size = %u "
                      "kernel blocks per id exceed INT32_MAX + 1",
                      (unsigned)per_block);
  if (ids_within(block_ids, n, largest)) return CLBT_SUCCESS;
  size_t i = 0;
  while (block_ids[i] >= 0 && block_ids[i] <= largest) ++i;
  return clbt__fail(CLBT_INVALID_BLOCK_ID,
                    "block_ids[%zu] = %d is outside [0, %d]", i,
                    (int)block_ids[i], (int)largest);
}

/* Columns from the extent on are zero: keep it at or past every write. */
static void raise_extent(clbt_table *table, uint32_t row, uint32_t written) {
  if (written > table->changes.extent[row])
    table->changes.extent[row] = written;
}

void clbt__apply_append(clbt_table *table, uint32_t row,
                        const int32_t *block_ids, size_t n, bool replace) {
  if (n == 0 && !replace) return;
  uint32_t per_block = table->layout.spec.blocks_per_kv_block;
  uint32_t length = replace ? 0 : table->row_lengths[row];
  int32_t *out = row_data(table, row) + length;
  if (per_block == 1) {
    /* A decode step's append is one id: copied without a call. */
    if (n == 1)
      *out = block_ids[0];
    else if (n)
      memcpy(out, block_ids, n * sizeof *block_ids);
  } else {
    /* map_to_kernel_blocks: KV block b is kernel blocks b*k .. b*k+k-1. */
    for (size_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < per_block; ++j)
        *out++ = block_ids[i] * (int32_t)per_block + (int32_t)j;
  }
  uint32_t new_length = length + (uint32_t)n * per_block;
  table->row_lengths[row] = new_length;
  raise_extent(table, row, new_length);
  clbt__changes_mark(&table->changes, row, length, new_length);
}

clbt_status clbt__check_truncate(const clbt_table *table, uint32_t row,
                                 size_t num_blocks) {
  clbt_status status = clbt__check_row(table, "row", row);
  if (status) return status;
  uint32_t held =
      table->row_lengths[row] / table->layout.spec.blocks_per_kv_block;
  if (num_blocks > held)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "num_blocks %zu exceeds the %u blocks row %u holds",
                      num_blocks, (unsigned)held, (unsigned)row);
  return CLBT_SUCCESS;
}

/* Zeroes the kernel blocks past the kept ones, as a clear zeroes a row. */
void clbt__apply_truncate(clbt_table *table, uint32_t row, size_t num_blocks) {
  uint32_t length = table->row_lengths[row];
  uint32_t kept = (uint32_t)num_blocks * table->layout.spec.blocks_per_kv_block;
  if (kept == length) return;
  memset(row_data(table, row) + kept, 0, (length - kept) * sizeof(int32_t));
  table->row_lengths[row] = kept;
  if (table->changes.extent[row] <= length) table->changes.extent[row] = kept;
  clbt__changes_mark(&table->changes, row, kept, length);
}

void clbt__apply_clear_row(clbt_table *table, uint32_t row) {
  clbt__apply_truncate(table, row, 0);
}

void clbt__apply_move_row(clbt_table *table, uint32_t src, uint32_t dst) {
  /* vLLM would copy the row onto itself, then erase it. */
  if (src == dst) return;
  uint32_t length = table->row_lengths[src];
  memcpy(row_data(table, dst), row_data(table, src), length * sizeof(int32_t));
  table->row_lengths[dst] = length;
  raise_extent(table, dst, length);
  clbt__changes_mark(&table->changes, dst, 0, length);
  clbt__apply_clear_row(table, src);
}

/* Swaps the whole rows; past both extents they are zero, so that part is
   left alone. */
void clbt__apply_swap_row(clbt_table *table, uint32_t a, uint32_t b) {
  if (a == b) return;
  uint32_t *extent = table->changes.extent;
  uint32_t used = extent[a] > extent[b] ? extent[a] : extent[b];
  int32_t *row_a = row_data(table, a), *row_b = row_data(table, b);
  for (uint32_t i = 0; i < used; ++i) {
    int32_t kept = row_a[i];
    row_a[i] = row_b[i];
    row_b[i] = kept;
  }
  uint32_t kept_length = table->row_lengths[a], kept_extent = extent[a];
  table->row_lengths[a] = table->row_lengths[b];
  table->row_lengths[b] = kept_length;
  extent[a] = extent[b];
  extent[b] = kept_extent;
  clbt__changes_mark(&table->changes, a, 0, used);
  clbt__changes_mark(&table->changes, b, 0, used);
}

static clbt_status update_row(clbt_table *table, uint32_t row,
                              const int32_t *block_ids, size_t n,
                              bool replace) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_append(table, row, block_ids, n, replace);
  if (!status) clbt__apply_append(table, row, block_ids, n, replace);
  return status;
}

clbt_status clbt_table_append_row(clbt_table *table, uint32_t row,
                                  const int32_t *block_ids, size_t n) {
  return update_row(table, row, block_ids, n, false);
}

clbt_status clbt_table_add_row(clbt_table *table, uint32_t row,
                               const int32_t *block_ids, size_t n) {
  return update_row(table, row, block_ids, n, true);
}

/* Entry i's ids start where entry i-1's end; NULL stays NULL (no ids). */
static const int32_t *entry_ids(const int32_t *block_ids, size_t first) {
  return block_ids ? block_ids + first : NULL;
}

/*
 * Appends hold their blocks in row_lengths while later entries are checked,
 * so that a row named twice is checked as the second of two calls would
 * be; every reservation is given back before the check returns.
 */
clbt_status clbt__check_rows(clbt_table *table, size_t num_rows,
                             const uint32_t *rows, const uint32_t *counts,
                             const int32_t *block_ids, bool replace) {
  if (num_rows > 0 && (!rows || !counts))
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL with num_rows = %zu",
                      !rows ? "rows" : "counts", num_rows);
  uint32_t per_block = table->layout.spec.blocks_per_kv_block;
  clbt_status status = CLBT_SUCCESS;
  size_t i = 0, first = 0;
  for (; i < num_rows; first += counts[i], ++i) {
    status = clbt__check_append(table, rows[i], entry_ids(block_ids, first),
                                counts[i], replace);
    if (status) break;
    if (!replace) table->row_lengths[rows[i]] += counts[i] * per_block;
  }
  if (status)
    clbt__prefix_error(status, "entry %zu (row %u, ids from block_ids[%zu])",
                       i, (unsigned)rows[i], first);
  while (!replace && i-- > 0)
    table->row_lengths[rows[i]] -= counts[i] * per_block;
  return status;
}

void clbt__apply_rows(clbt_table *table, size_t num_rows, const uint32_t *rows,
                      const uint32_t *counts, const int32_t *block_ids,
                      bool replace) {
  for (size_t i = 0, first = 0; i < num_rows; first += counts[i], ++i)
    clbt__apply_append(table, rows[i], entry_ids(block_ids, first), counts[i],
                       replace);
}

static clbt_status update_rows(clbt_table *table, size_t num_rows,
                               const uint32_t *rows, const uint32_t *counts,
                               const int32_t *block_ids, bool replace) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status =
      clbt__check_rows(table, num_rows, rows, counts, block_ids, replace);
  if (!status)
    clbt__apply_rows(table, num_rows, rows, counts, block_ids, replace);
  return status;
}

clbt_status clbt_table_append_rows(clbt_table *table, size_t num_rows,
                                   const uint32_t *rows, const uint32_t *counts,
                                   const int32_t *block_ids) {
  return update_rows(table, num_rows, rows, counts, block_ids, false);
}

clbt_status clbt_table_add_rows(clbt_table *table, size_t num_rows,
                                const uint32_t *rows, const uint32_t *counts,
                                const int32_t *block_ids) {
  return update_rows(table, num_rows, rows, counts, block_ids, true);
}

clbt_status clbt_table_clear_row(clbt_table *table, uint32_t row) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_row(table, "row", row);
  if (!status) clbt__apply_clear_row(table, row);
  return status;
}

clbt_status clbt_table_truncate_row(clbt_table *table, uint32_t row,
                                   size_t num_blocks) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_truncate(table, row, num_blocks);
  if (!status) clbt__apply_truncate(table, row, num_blocks);
  return status;
}

clbt_status clbt__check_pair(const clbt_table *table, const char *first_name,
                              uint32_t first, const char *second_name,
                              uint32_t second) {
  if (!table) return clbt__fail(CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_status status = clbt__check_row(table, first_name, first);
  if (!status) status = clbt__check_row(table, second_name, second);
  return status;
}

clbt_status clbt_table_move_row(clbt_table *table, uint32_t src,
                                uint32_t dst) {
  clbt_status status = clbt__check_pair(table, "src", src, "dst", dst);
  if (!status) clbt__apply_move_row(table, src, dst);
  return status;
}

clbt_status clbt_table_swap_row(clbt_table *table, uint32_t a, uint32_t b) {
  clbt_status status = clbt__check_pair(table, "a", a, "b", b);
  if (!status) clbt__apply_swap_row(table, a, b);
  return status;
}

uint32_t clbt_table_row_length(const clbt_table *table, uint32_t row) {
  if (!table || row >= table->layout.max_num_reqs) return 0;
  return table->row_lengths[row];
}

const uint32_t *clbt_table_row_lengths(const clbt_table *table) {
  return table ? table->row_lengths : NULL;
}
