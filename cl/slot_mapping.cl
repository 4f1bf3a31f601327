/*
 * The slot-mapping kernel: gives each token of a batch the KV-cache slot it
 * writes, block_id * kernel_block_size + offset, as vLLM's
 * _compute_slot_mapping_kernel does, and CLBT_PAD_SLOT_ID to every other
 * element of the fixed-size output.
 *
 * It differs from vLLM's kernel in two ways that make it safe on any input:
 * it never reads a block outside the row's committed length (such a token
 * gets the pad id and is counted), and it checks query_start_loc before
 * trusting it.
 *
 * Work-items are token-parallel and loop with the grid's stride, so the
 * host can pick the launch geometry per device (docs/design.md): many
 * work-groups on a GPU, one per compute unit on a CPU.
 *
 * Specialised at build time (the host passes every one):
 *   CLBT_KV_BLOCK_SIZE        KV-manager block size, tokens
 *   CLBT_BLOCKS_PER_KV_BLOCK  kernel blocks per KV-manager block
 *   CLBT_CP_WORLD_SIZE        context-parallel ranks (1: none)
 *   CLBT_CP_RANK              this rank
 *   CLBT_CP_INTERLEAVE_SIZE   tokens per rank before the next rank's turn
 *   CLBT_PAD_SLOT_ID          the slot id of tokens that write nothing
 */

#define KERNEL_BLOCK_SIZE (CLBT_KV_BLOCK_SIZE / CLBT_BLOCKS_PER_KV_BLOCK)
#define VIRTUAL_BLOCK_SIZE ((ulong)CLBT_KV_BLOCK_SIZE * CLBT_CP_WORLD_SIZE)

/*
 * Whether query_start_loc[0..num_reqs] is a non-decreasing run from >= 0 to
 * <= num_tokens. Each work-group reads the whole array, so every group
 * reaches the same verdict without a second launch.
 */
static bool batch_is_well_formed(__global const int *query_start_loc,
                                 uint num_reqs, uint num_tokens,
                                 __local int *well_formed) {
  if (get_local_id(0) == 0) *well_formed = 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint i = get_local_id(0); i <= num_reqs; i += get_local_size(0)) {
    int start = query_start_loc[i];
    bool bad = i == 0 ? start < 0 : start < query_start_loc[i - 1];
    if (i == num_reqs && (long)start > (long)num_tokens) bad = true;
    if (bad) atomic_and(well_formed, 0);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return *well_formed != 0;
}

/*
 * The request whose [query_start_loc[r], query_start_loc[r+1]) holds token
 * in a well-formed batch, or num_reqs when none does.
 */
static uint find_request(__global const int *query_start_loc, uint num_reqs,
                         int token) {
  if (num_reqs == 0 || query_start_loc[0] > token) return num_reqs;
  /* The last r with query_start_loc[r] <= token: skips empty requests. */
  uint low = 0, high = num_reqs;
  while (low < high) {
    uint middle = low + (high - low + 1) / 2;
    if (query_start_loc[middle] <= token)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

/*
 * The slot of one token of a row, vLLM's arithmetic: positions are split
 * into virtual blocks of CP_WORLD_SIZE KV blocks, dealt to ranks
 * CP_INTERLEAVE_SIZE tokens at a time. Another rank's token gets the pad id;
 * so does a token outside the committed row, which is also counted.
 */
static long slot_of(long position, __global const int *row, uint row_length,
                    uint *rejected) {
  if (position < 0) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  ulong virtual_index = (ulong)position / VIRTUAL_BLOCK_SIZE;
  ulong virtual_offset = (ulong)position - virtual_index * VIRTUAL_BLOCK_SIZE;
  if ((virtual_offset / CLBT_CP_INTERLEAVE_SIZE) % CLBT_CP_WORLD_SIZE !=
      CLBT_CP_RANK)
    return CLBT_PAD_SLOT_ID;
  ulong local_offset =
      virtual_offset / (CLBT_CP_WORLD_SIZE * CLBT_CP_INTERLEAVE_SIZE) *
          CLBT_CP_INTERLEAVE_SIZE +
      virtual_offset % CLBT_CP_INTERLEAVE_SIZE;
  /* Checked first so that the product below cannot wrap. */
  if (virtual_index >= row_length) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  ulong block_index = virtual_index * CLBT_BLOCKS_PER_KV_BLOCK +
                      local_offset / KERNEL_BLOCK_SIZE;
  if (block_index >= row_length) {
    ++*rejected;
    return CLBT_PAD_SLOT_ID;
  }
  return (long)row[block_index] * KERNEL_BLOCK_SIZE +
         (long)(local_offset % KERNEL_BLOCK_SIZE);
}

__kernel void clbt_slot_mapping(uint num_reqs, uint num_tokens,
                                uint max_num_tokens,
                                __global const int *query_start_loc,
                                __global const long *positions,
                                __global const int *block_table,
                                uint row_stride,
                                __global const int *row_lengths,
                                __global long *slot_mapping,
                                __global uint *rejected_tokens) {
  __local int well_formed;
  bool batch_ok = batch_is_well_formed(query_start_loc, num_reqs, num_tokens,
                                       &well_formed);
  uint rejected = 0;
  for (uint token = get_global_id(0); token < max_num_tokens;
       token += get_global_size(0)) {
    long slot = CLBT_PAD_SLOT_ID;
    if (token < num_tokens && !batch_ok) {
      ++rejected;
    } else if (token < num_tokens) {
      uint request = find_request(query_start_loc, num_reqs, (int)token);
      if (request < num_reqs)
        slot = slot_of(positions[token],
                       block_table + (ulong)request * row_stride,
                       (uint)row_lengths[request], &rejected);
    }
    slot_mapping[token] = slot;
  }
  if (rejected) atomic_add(rejected_tokens, rejected);
}
