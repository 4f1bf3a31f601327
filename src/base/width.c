/* Row width: vLLM's get_block_table_width. */
#include "base/status.h"

static uint64_t greatest_common_divisor(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t rest = a % b;
    a = b;
    b = rest;
  }
  return a;
}

clbt_status clbt_block_table_width(uint32_t max_num_blocks, uint32_t block_size,
                                   uint32_t kernel_block_size,
                                   uint32_t token_alignment, uint32_t *width) {
  if (!width) return clbt__fail(CLBT_NULL_ARGUMENT, "width is NULL");
  if (block_size == 0)
    return clbt__fail(CLBT_INVALID_CONFIG, "block_size is 0; it must be >= 1");
  if (kernel_block_size == 0) kernel_block_size = block_size;
  if (block_size % kernel_block_size != 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "kernel_block_size %u does not divide block_size %u",
                      (unsigned)kernel_block_size, (unsigned)block_size);
  uint64_t blocks = max_num_blocks;
  if (token_alignment) {
    /* The fewest blocks that span a multiple of token_alignment tokens. */
    uint64_t alignment =
        token_alignment / greatest_common_divisor(token_alignment, block_size);
    blocks = (blocks + alignment - 1) / alignment * alignment;
  }
  uint64_t kernel_blocks = blocks * (block_size / kernel_block_size);
  if (blocks > UINT32_MAX || kernel_blocks > UINT32_MAX)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "width of %llu KV blocks x %u kernel blocks each exceeds "
                      "UINT32_MAX",
                      (unsigned long long)blocks,
                      (unsigned)(block_size / kernel_block_size));
  *width = (uint32_t)kernel_blocks;
  return CLBT_SUCCESS;
}
