/*
 * An attention launch's buffers (attention_buffers.h): each one the
 * kernels read or write holds what the batch's counts and strides reach,
 * and those the kernels write are writable.
 */
#include "kv/attention_buffers.h"

#include "base/status.h"
#include "kv/layout.h"

#include <stdio.h>

/* The elements a [count][heads][width] array spans by its strides: the
   last one's index + 1; false past 64 bits. */
static bool span_of(uint32_t count, uint64_t token_stride, uint32_t heads,
                    uint64_t head_stride, uint32_t width, uint64_t *span) {
  uint64_t tokens, across;
  *span = 0;
  if (!count || !heads) return true;
  return clbt__multiply_fits(count - 1, token_stride, &tokens) &&
         clbt__multiply_fits(heads - 1, head_stride, &across) &&
         clbt__add_fits(tokens, across, span) &&
         clbt__add_fits(*span, width, span);
}

/*
 * A buffer the kernels read or write: `count` rows of `heads` heads of
 * `width` elements of `element` bytes, by their strides, from element
 * `offset`, inside it. Nothing when it holds no element.
 */
static clbt_status check_size(clbt_attention *t, cl_mem buffer,
                              const char *name, uint64_t offset,
                              uint32_t count, uint64_t token_stride,
                              uint32_t heads, uint64_t head_stride,
                              uint32_t width, size_t element) {
  uint64_t span, end, bytes;
  bool fits = span_of(count, token_stride, heads, head_stride, width, &span);
  if (!buffer || (fits && !span)) return CLBT_SUCCESS;
  if (!fits || !clbt__add_fits(offset, span, &end) ||
      !clbt__multiply_fits(end, element, &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "batch->%s: %u rows %llu elements apart from %llu end "
                      "past 64 bits of bytes",
                      name, (unsigned)count, (unsigned long long)token_stride,
                      (unsigned long long)offset);
  char qualified[40];
  size_t size = 0;
  snprintf(qualified, sizeof qualified, "batch->%s", name);
  clbt_status status = clbt__known_buffer_size(t->device, &t->known, buffer,
                                               qualified, "attention", &size);
  if (!status && bytes > size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "batch->%s holds %zu bytes; %llu elements from "
                        "element %llu need %llu",
                        name, size, (unsigned long long)span,
                        (unsigned long long)offset,
                        (unsigned long long)bytes);
  return status;
}

/* A one-dimensional array of `count` entries. */
static clbt_status check_entries(clbt_attention *t, cl_mem buffer,
                                 const char *name, uint64_t offset,
                                 uint64_t count, size_t element) {
  if (count > UINT32_MAX)
    return check_size(t, buffer, name, offset, 2, count - 1, 1, 0, 1,
                      element);
  return check_size(t, buffer, name, offset, 1, 0, 1, 0, (uint32_t)count,
                    element);
}

clbt_status clbt__attention_check_buffers(clbt_attention *t,
                                          const clbt_attention_batch *b,
                                          const clbt_attention_arguments *a,
                                          bool descales) {
  const clbt_attention_config *c = &t->config;
  uint32_t heads = c->num_heads, seqs = b->num_seqs;
  uint64_t descale_span = (uint64_t)seqs * c->num_kv_heads;
  clbt_status status = check_size(
      t, b->query, "query", b->query_offset, b->num_tokens,
      a->query_token_stride, heads, a->query_head_stride, c->head_size,
      clbt__kv_dtype_size(c->query_dtype));
  if (!status)
    status = check_size(t, b->output, "output", b->output_offset,
                        b->num_tokens, a->output_token_stride, heads,
                        a->output_head_stride, c->head_size,
                        clbt__kv_dtype_size(c->output_dtype));
  if (!status)
    status = check_entries(t, b->cu_seqlens_q, "cu_seqlens_q",
                           b->cu_seqlens_q_offset, (uint64_t)seqs + 1, 4);
  if (!status)
    status = check_entries(t, b->seqused_k, "seqused_k", b->seqused_k_offset,
                           seqs, 4);
  if (!status && a->flags & CLBT_ATT_IDX_MAPPING)
    status = check_entries(t, b->idx_mapping, "idx_mapping",
                           b->idx_mapping_offset, seqs, 4);
  if (!status)
    status = check_size(t, b->block_table, "block_table",
                        b->block_table_offset, seqs, a->pages.row_stride, 1,
                        0, a->pages.row_capacity, 4);
  if (!status)
    status = check_entries(t, b->sinks, "sinks", b->sinks_offset, heads, 4);
  if (!status && descales)
    status = check_entries(t, b->k_descales, "k_descales",
                           b->k_descales_offset, descale_span, 4);
  if (!status && descales)
    status = check_entries(t, b->v_descales, "v_descales",
                           b->v_descales_offset, descale_span, 4);
  if (!status)
    status = check_size(t, b->lse, "lse", b->lse_offset, b->num_tokens,
                        a->lse_token_stride, heads, a->lse_head_stride, 1, 4);
  if (!status && b->num_tokens)
    status = clbt__check_writable(&t->known, b->output, "batch->output");
  if (!status && b->num_tokens && b->lse)
    status = clbt__check_writable(&t->known, b->lse, "batch->lse");
  return status;
}
