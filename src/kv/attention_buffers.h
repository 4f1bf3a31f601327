/*
 * The buffer checks of one attention launch (attention_buffers.c), the
 * last of attention_checks.c's before the grid.
 */
#ifndef CLBT_KV_ATTENTION_BUFFERS_H
#define CLBT_KV_ATTENTION_BUFFERS_H

#include "kv/attention.h"

#include <stdbool.h>

/*
 * Checks each buffer of a batch (its strides resolved in `arguments`)
 * against what it must hold: the query, output, cu_seqlens_q, seqused_k,
 * idx_mapping (when the flags use it), block table, sinks, the
 * per-sequence descales (when `descales`) and lse, each from its offset,
 * asking the driver about each buffer once (the descriptor's known
 * buffers); then that the output and lse are writable. Fails with
 * CLBT_SIZE_OVERFLOW, CLBT_BUFFER_TOO_SMALL, CLBT_READ_ONLY_BUFFER (an
 * output or lse made CL_MEM_READ_ONLY) or the driver's error, naming the field.
 */
clbt_status clbt__attention_check_buffers(
    clbt_attention *attention, const clbt_attention_batch *batch,
    const clbt_attention_arguments *arguments, bool descales);

#endif /* CLBT_KV_ATTENTION_BUFFERS_H */
