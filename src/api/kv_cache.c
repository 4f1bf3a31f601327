/*
 * The KV-cache write's public surface (clbt.h): each call reads the
 * caller's struct (base/config.c) and hands it to the KV module (src/kv/:
 * the cache, its layout and checks, the write's kernels and launch).
 */
#include "base/config.h"
#include "base/status.h"
#include "device/queue.h"
#include "kv/cache.h"
#include "kv/layout.h"
#include "kv/write.h"

size_t clbt_kv_dtype_size(clbt_kv_dtype dtype) {
  return clbt__kv_dtype_size(dtype);
}

clbt_status clbt_kv_cache_create(clbt_device *device,
                                 const clbt_kv_cache_config *config,
                                 clbt_kv_cache **out) {
  clbt_kv_cache_config read;
  clbt_status status = clbt__kv_cache_config_read(config, &read);
  if (!status && (!device || !out))
    status = clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                        !device ? "device" : "out");
  clbt_kv_cache *cache = NULL;
  if (!status) status = clbt__kv_cache_create(device, &read, &cache);
  if (!status) status = clbt__kv_write_prepare(cache);
  if (status) {
    clbt__kv_cache_destroy(cache);
    return status;
  }
  *out = cache;
  return CLBT_SUCCESS;
}

void clbt_kv_cache_destroy(clbt_kv_cache *cache) {
  clbt__kv_cache_destroy(cache);
}

clbt_status clbt_kv_cache_get_addressing(const clbt_kv_cache *cache,
                                         clbt_kv_cache_addressing *out) {
  if (!cache || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !cache ? "cache" : "out");
  const clbt_kv_cache_config *c = &cache->config;
  *out = (clbt_kv_cache_addressing){c->key_offset,   c->value_offset,
                                    c->block_stride, c->page_stride,
                                    c->head_stride,  cache->tensor_span};
  return CLBT_SUCCESS;
}

clbt_status clbt_kv_cache_enqueue_write(clbt_kv_cache *cache,
                                        const clbt_kv_write *given,
                                        cl_uint num_events,
                                        const cl_event *wait_list,
                                        cl_event *event) {
  if (!cache) return clbt__fail(CLBT_NULL_ARGUMENT, "cache is NULL");
  clbt_kv_write w;
  clbt_status status = clbt__kv_write_read(given, &w);
  if (status) return status;
  return clbt__kv_write_enqueue(cache, &w, num_events, wait_list, event);
}

clbt_status clbt_kv_cache_read_rejected_tokens(clbt_kv_cache *cache,
                                               uint32_t *count) {
  if (!cache || !count)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !cache ? "cache" : "count");
  return clbt__read_counter(cache->device, cache->rejected, count);
}

clbt_status clbt_kv_cache_reset_rejected_tokens(clbt_kv_cache *cache) {
  if (!cache) return clbt__fail(CLBT_NULL_ARGUMENT, "cache is NULL");
  return clbt__reset_counter(cache->device, cache->rejected);
}

cl_mem clbt_kv_cache_rejected_tokens(const clbt_kv_cache *cache) {
  return cache ? cache->rejected : NULL;
}
