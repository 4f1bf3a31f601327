/* A KV-cache write's checks (write_checks.h). */
#include "kv/write_checks.h"

#include "base/status.h"
#include "kv/layout.h"

#include <stdio.h>

/* The token stride, 0 meaning a row of heads, at least that row. */
static clbt_status check_stride(uint64_t *stride, uint64_t row,
                                const char *name) {
  if (*stride == 0) *stride = row;
  if (*stride < row)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "write->%s %llu is below num_kv_heads x head_size %llu",
                      name, (unsigned long long)*stride,
                      (unsigned long long)row);
  return CLBT_SUCCESS;
}

/* A write's input buffer: num_tokens rows of `row` elements of `element`
   bytes, `stride` apart from `offset`. */
static clbt_status check_input(clbt_kv_cache *cache, cl_mem buffer,
                               const char *name, uint32_t num_tokens,
                               uint64_t offset, uint64_t stride, uint64_t row,
                               size_t element) {
  uint64_t last, end, bytes;
  if (!clbt__multiply_fits(num_tokens - 1, stride, &last) ||
      !clbt__add_fits(offset, last, &end) || !clbt__add_fits(end, row, &end) ||
      !clbt__multiply_fits(end, element, &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "write->%s: num_tokens %u rows %llu apart from %llu "
                      "end past 64 bits of bytes",
                      name, (unsigned)num_tokens, (unsigned long long)stride,
                      (unsigned long long)offset);
  size_t size = 0;
  char qualified[32];
  snprintf(qualified, sizeof qualified, "write->%s", name);
  clbt_status status = clbt__known_buffer_size(cache->device, &cache->known,
                                               buffer, qualified, "KV cache",
                                               &size);
  if (!status && bytes > size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "write->%s holds %zu bytes; num_tokens %u rows %llu "
                        "elements apart from element %llu need %llu",
                        name, size, (unsigned)num_tokens,
                        (unsigned long long)stride,
                        (unsigned long long)offset,
                        (unsigned long long)bytes);
  return status;
}

/* The slot mapping: an int64 entry for each token from its offset. */
static clbt_status check_slot_mapping(clbt_kv_cache *cache,
                                      const clbt_kv_write *w) {
  uint64_t end, bytes;
  if (!clbt__add_fits(w->slot_mapping_offset, w->num_tokens, &end) ||
      !clbt__multiply_fits(end, sizeof(int64_t), &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "write->slot_mapping_offset %llu plus num_tokens %u "
                      "entries ends past 64 bits of bytes",
                      (unsigned long long)w->slot_mapping_offset,
                      (unsigned)w->num_tokens);
  size_t size = 0;
  clbt_status status = clbt__known_buffer_size(
      cache->device, &cache->known, w->slot_mapping, "write->slot_mapping",
      "KV cache", &size);
  if (!status && bytes > size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "write->slot_mapping holds %zu bytes; num_tokens %u "
                        "entries from entry %llu need %llu",
                        size, (unsigned)w->num_tokens,
                        (unsigned long long)w->slot_mapping_offset,
                        (unsigned long long)bytes);
  return status;
}

clbt_status clbt__kv_write_check(clbt_kv_cache *cache, clbt_kv_write *w) {
  const clbt_kv_cache_config *c = &cache->config;
  uint64_t row = (uint64_t)c->num_kv_heads * c->head_size;
  if (w->num_tokens > INT32_MAX)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "write->num_tokens %u exceeds INT32_MAX",
                      (unsigned)w->num_tokens);
  clbt_status status = check_stride(&w->key_token_stride, row,
                                    "key_token_stride");
  if (!status)
    status = check_stride(&w->value_token_stride, row, "value_token_stride");
  if (!status && c->cache_dtype == CLBT_KV_FP8_E4M3 &&
      c->input_dtype != CLBT_KV_FP8_E4M3) {
    status = clbt__kv_check_scale(w->k_scale, "write->", "k_scale");
    if (!status)
      status = clbt__kv_check_scale(w->v_scale, "write->", "v_scale");
  }
  if (status || w->num_tokens == 0) return status;
  const char *missing = !w->key ? "key" : !w->value ? "value"
                        : !w->slot_mapping ? "slot_mapping" : NULL;
  if (missing)
    return clbt__fail(CLBT_NULL_ARGUMENT, "write->%s is NULL with num_tokens %u",
                      missing, (unsigned)w->num_tokens);
  size_t element = clbt__kv_dtype_size(c->input_dtype);
  status = check_input(cache, w->key, "key", w->num_tokens, w->key_offset,
                       w->key_token_stride, row, element);
  if (!status)
    status = check_input(cache, w->value, "value", w->num_tokens,
                         w->value_offset, w->value_token_stride, row, element);
  if (!status) status = check_slot_mapping(cache, w);
  return status;
}
