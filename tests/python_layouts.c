/*
 * Prints the layout of every public struct the Python package mirrors with
 * ctypes, one "struct field offset" line per field and one "struct sizeof
 * size" line per struct, as this compiler lays them out from clbt.h.
 * python/tests/test_layouts.py compares the mirrors with it, so a field
 * added to clbt.h but not to python/clbt/_library.py (or put in another
 * place) fails a test instead of shifting every later field.
 */
#include <stddef.h>
#include <stdio.h>

#include "clbt/clbt.h"

#define FIELD(type, field) \
  printf("%s %s %zu\n", #type, #field, offsetof(type, field));
#define SIZE(type) printf("%s sizeof %zu\n", #type, sizeof(type));

int main(void) {
  FIELD(clbt_table_config, struct_size)
  FIELD(clbt_table_config, block_size)
  FIELD(clbt_table_config, kernel_block_size)
  FIELD(clbt_table_config, max_num_reqs)
  FIELD(clbt_table_config, max_num_blocks_per_req)
  FIELD(clbt_table_config, max_num_batched_tokens)
  FIELD(clbt_table_config, cp_world_size)
  FIELD(clbt_table_config, cp_rank)
  FIELD(clbt_table_config, cp_interleave_size)
  FIELD(clbt_table_config, slot_mode)
  FIELD(clbt_table_config, zero_gathered_tails)
  SIZE(clbt_table_config)
  FIELD(clbt_group_config, struct_size)
  FIELD(clbt_group_config, block_size)
  FIELD(clbt_group_config, kernel_block_size)
  FIELD(clbt_group_config, max_num_blocks)
  FIELD(clbt_group_config, slot_mode)
  FIELD(clbt_group_config, cp_replicated)
  SIZE(clbt_group_config)
  FIELD(clbt_multi_table_config, struct_size)
  FIELD(clbt_multi_table_config, max_num_reqs)
  FIELD(clbt_multi_table_config, max_num_batched_tokens)
  FIELD(clbt_multi_table_config, cp_world_size)
  FIELD(clbt_multi_table_config, cp_rank)
  FIELD(clbt_multi_table_config, cp_interleave_size)
  FIELD(clbt_multi_table_config, num_groups)
  FIELD(clbt_multi_table_config, groups)
  FIELD(clbt_multi_table_config, commit_mode)
  FIELD(clbt_multi_table_config, zero_gathered_tails)
  FIELD(clbt_multi_table_config, exact_widths)
  FIELD(clbt_multi_table_config, reserved)
  SIZE(clbt_multi_table_config)
  FIELD(clbt_commit_info, mode)
  FIELD(clbt_commit_info, rows)
  FIELD(clbt_commit_info, bytes)
  SIZE(clbt_commit_info)
  FIELD(clbt_export_request, num_reqs)
  FIELD(clbt_export_request, num_reqs_padded)
  FIELD(clbt_export_request, query_start_loc)
  FIELD(clbt_export_request, positions)
  FIELD(clbt_export_request, num_tokens)
  FIELD(clbt_export_request, seq_lens)
  FIELD(clbt_export_request, idx_mapping)
  FIELD(clbt_export_request, flags)
  FIELD(clbt_export_request, dense_row_pitch)
  SIZE(clbt_export_request)
  FIELD(clbt_export_buffers, paged_kv_indptr)
  FIELD(clbt_export_buffers, paged_kv_indices)
  FIELD(clbt_export_buffers, paged_kv_last_page_len)
  FIELD(clbt_export_buffers, past_lens)
  FIELD(clbt_export_buffers, subsequence_begins)
  FIELD(clbt_export_buffers, page_size)
  FIELD(clbt_export_buffers, struct_size)
  FIELD(clbt_export_buffers, seq_lens)
  FIELD(clbt_export_buffers, dcp_local_seq_lens)
  FIELD(clbt_export_buffers, max_seq_len)
  FIELD(clbt_export_buffers, context_kv_indptr)
  FIELD(clbt_export_buffers, context_kv_indices)
  FIELD(clbt_export_buffers, context_kv_last_page_len)
  FIELD(clbt_export_buffers, page_table)
  SIZE(clbt_export_buffers)
  FIELD(clbt_step, struct_size)
  FIELD(clbt_step, flags)
  FIELD(clbt_step, num_reqs)
  FIELD(clbt_step, num_reqs_padded)
  FIELD(clbt_step, num_tokens)
  FIELD(clbt_step, query_start_loc)
  FIELD(clbt_step, positions)
  FIELD(clbt_step, idx_mapping)
  FIELD(clbt_step, seq_lens)
  FIELD(clbt_step, export_flags)
  FIELD(clbt_step, dense_row_pitch)
  SIZE(clbt_step)
  FIELD(clbt_host_step, struct_size)
  FIELD(clbt_host_step, flags)
  FIELD(clbt_host_step, num_reqs)
  FIELD(clbt_host_step, num_reqs_padded)
  FIELD(clbt_host_step, num_tokens)
  FIELD(clbt_host_step, query_start_loc)
  FIELD(clbt_host_step, positions)
  FIELD(clbt_host_step, idx_mapping)
  FIELD(clbt_host_step, slot_mapping)
  FIELD(clbt_host_step, gathered_rows)
  SIZE(clbt_host_step)
  FIELD(clbt_multi_host_step, struct_size)
  FIELD(clbt_multi_host_step, flags)
  FIELD(clbt_multi_host_step, num_reqs)
  FIELD(clbt_multi_host_step, num_reqs_padded)
  FIELD(clbt_multi_host_step, num_tokens)
  FIELD(clbt_multi_host_step, query_start_loc)
  FIELD(clbt_multi_host_step, positions)
  FIELD(clbt_multi_host_step, idx_mapping)
  FIELD(clbt_multi_host_step, slot_mappings)
  FIELD(clbt_multi_host_step, gathered_rows)
  SIZE(clbt_multi_host_step)
  printf("CLBT_STEP_GATHER value %u\nCLBT_STEP_EXPORT value %u\n"
         "CLBT_STEP_DUMMY value %u\n",
         CLBT_STEP_GATHER, CLBT_STEP_EXPORT, CLBT_STEP_DUMMY);
  return 0;
}
