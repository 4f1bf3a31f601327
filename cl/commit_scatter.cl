/*
 * The commit scatter: applies one packet of changed row cells and row
 * lengths to the committed copies of up to eight groups, so that a commit
 * moves only what the row operations changed, in one upload and one launch
 * for all groups (src/commit.c builds the packet).
 *
 * Group g's section of the packet starts at packet_at_g (32-bit words):
 *   num_lengths_g pairs   (row, length)
 *   num_cells_g triples   (row, column, block id)
 * Each listed row also gets the commit's version, which tells the gather
 * that the row changed. The host checked every row and column against the
 * group's bounds. Specialised at build time by CLBT_NUM_GROUPS.
 */
#define FIRST_PARAMETER(NAME, type, name) type name
#define PARAMETER(NAME, type, name) , type name
#define GROUP_PARAMETER(g, NAME, type, name) , type name##_##g
#define GROUP_PARAMETERS(g) \
  CLBT_COMMIT_SCATTER_GROUP_ARGUMENTS(GROUP_PARAMETER, g)

/* Up to 2^33 - 2 items a group: counted in 64 bits so that nothing wraps. */
static void scatter_group(__global const uint *section, uint num_lengths,
                          uint num_cells, __global int *rows, uint row_stride,
                          __global int *row_lengths,
                          __global uint *row_versions, uint version) {
  ulong items = (ulong)num_lengths + num_cells;
  __global const uint *cells = section + 2 * (ulong)num_lengths;
  for (ulong i = get_global_id(0); i < items; i += get_global_size(0)) {
    if (i < num_lengths) {
      uint row = section[2 * i];
      row_lengths[row] = (int)section[2 * i + 1];
      row_versions[row] = version;
    } else {
      __global const uint *cell = cells + 3 * (ulong)(i - num_lengths);
      rows[(ulong)cell[0] * row_stride + cell[1]] = (int)cell[2];
    }
  }
}

#define SCATTER_GROUP(g)                                                   \
  scatter_group(packet + packet_at_##g, num_lengths_##g, num_cells_##g,    \
                storage_##g + rows_at_##g, row_stride_##g,                 \
                storage_##g + row_lengths_at_##g,                          \
                (__global uint *)(storage_##g + row_versions_at_##g), version);

/* Arguments: CLBT_COMMIT_SCATTER_*ARGUMENTS in cl/contract.h. */
__kernel void clbt_commit_scatter(
    CLBT_COMMIT_SCATTER_FIRST_ARGUMENT(FIRST_PARAMETER)
    CLBT_COMMIT_SCATTER_ARGUMENTS(PARAMETER)
    CLBT_FOR_EACH_GROUP(GROUP_PARAMETERS)) {
  CLBT_FOR_EACH_GROUP(SCATTER_GROUP)
}
