/*
 * The commit scatter: applies a packet of changed row cells and row
 * lengths to a table's committed copy, so that a commit moves only what the
 * row operations changed (src/commit.c builds the packet).
 *
 * Packet, 32-bit words:
 *   num_lengths pairs   (row, length)
 *   num_cells triples   (row, column, block id)
 * The host checked every row and column against the table's bounds. The
 * rows and lengths are regions of the table's one allocation (storage).
 */
#define FIRST_PARAMETER(NAME, type, name) type name
#define PARAMETER(NAME, type, name) , type name

/* Arguments: CLBT_COMMIT_SCATTER_ARGUMENTS in cl/contract.h. */
__kernel void clbt_commit_scatter(
    CLBT_COMMIT_SCATTER_FIRST_ARGUMENT(FIRST_PARAMETER)
    CLBT_COMMIT_SCATTER_ARGUMENTS(PARAMETER)) {
  __global int *rows = storage + rows_at;
  __global int *row_lengths = storage + row_lengths_at;
  /* Up to 2^33 - 2 items: counted in 64 bits so that nothing wraps. */
  ulong items = (ulong)num_lengths + num_cells;
  __global const uint *cells = packet + 2 * (ulong)num_lengths;
  for (ulong i = get_global_id(0); i < items; i += get_global_size(0)) {
    if (i < num_lengths) {
      row_lengths[packet[2 * i]] = (int)packet[2 * i + 1];
    } else {
      __global const uint *cell = cells + 3 * (ulong)(i - num_lengths);
      rows[(ulong)cell[0] * row_stride + cell[1]] = (int)cell[2];
    }
  }
}
