/*
 * A layer's paged KV cache (cache.h): described and checked once, at
 * creation, so that each write and each attention launch checks only its
 * own arguments.
 */
#include "kv/cache.h"

#include "base/status.h"
#include "device/queue.h"
#include "kv/layout.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(CLBT_KV_FLOAT32 == CLBT_KV_TYPE_FLOAT32 &&
                   CLBT_KV_FLOAT16 == CLBT_KV_TYPE_FLOAT16 &&
                   CLBT_KV_BFLOAT16 == CLBT_KV_TYPE_BFLOAT16 &&
                   CLBT_KV_FP8_E4M3 == CLBT_KV_TYPE_FP8_E4M3,
               "the header's types are the kernel's");

/* A cache buffer: of the device's context, and holding its tensor. */
static clbt_status check_cache_buffer(const clbt_kv_cache *cache, cl_mem buffer,
                                      const char *name,
                                      const char *offset_name, uint64_t offset,
                                      uint64_t span) {
  clbt_status status = CLBT_SUCCESS;
  cl_context context = NULL;
  size_t size = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof context,
                                  &context, NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size,
                                  NULL),
               status, done);
  if (context != cache->device->context)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "config->%s belongs to another OpenCL context than the "
                      "device's",
                      name);
  uint64_t end, bytes;
  size_t element = clbt__kv_dtype_size(cache->config.cache_dtype);
  if (!clbt__add_fits(offset, span, &end) ||
      !clbt__multiply_fits(end, element, &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "config->%s's elements end past 64 bits of bytes",
                      name);
  if (bytes > size)
    return clbt__fail(CLBT_BUFFER_TOO_SMALL,
                      "config->%s holds %zu bytes; %s %llu and a tensor of "
                      "%llu elements (%u blocks of %u slots of %u heads of "
                      "%u) need %llu",
                      name, size, offset_name, (unsigned long long)offset, (unsigned long long)span,
                      (unsigned)cache->config.num_blocks,
                      (unsigned)cache->config.block_size,
                      (unsigned)cache->config.num_kv_heads,
                      (unsigned)cache->config.head_size,
                      (unsigned long long)bytes);
done:
  return status;
}

/* Where a buffer's bytes lie: in its parent from its origin, for a
   sub-buffer (OpenCL makes none of a sub-buffer), else in itself from 0. */
static clbt_status buffer_root(cl_mem buffer, cl_mem *root, size_t *origin) {
  clbt_status status = CLBT_SUCCESS;
  cl_mem parent = NULL;
  size_t offset = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_ASSOCIATED_MEMOBJECT,
                                  sizeof parent, &parent, NULL),
               status, done);
  if (parent)
    CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_OFFSET, sizeof offset,
                                    &offset, NULL),
                 status, done);
  *root = parent ? parent : buffer;
  *origin = offset;
done:
  return status;
}

/*
 * Two cache handles that are one buffer (a sub-buffer and its parent, or
 * two sub-buffers of one): K's and V's elements may share no address, as
 * clbt__kv_check_addresses makes sure of one handle's. A whole number of
 * elements apart, they are checked as one buffer's K and V (whose blocks
 * may interleave, [blocks][2][...]); else their spans must not overlap.
 * Both buffers hold their tensors (check_cache_buffer), so no sum here
 * passes the parent's size.
 */
static clbt_status check_kv_apart(const clbt_kv_cache *cache, uint64_t span) {
  const clbt_kv_cache_config *c = &cache->config;
  cl_mem key_root = NULL, value_root = NULL;
  size_t key_origin = 0, value_origin = 0;
  clbt_status status = buffer_root(c->key_cache, &key_root, &key_origin);
  if (!status) status = buffer_root(c->value_cache, &value_root, &value_origin);
  if (status || key_root != value_root) return status;
  uint64_t element = clbt__kv_dtype_size(c->cache_dtype);
  uint64_t k = key_origin + c->key_offset * element;
  uint64_t v = value_origin + c->value_offset * element;
  uint64_t distance = k > v ? k - v : v - k;
  bool shared = distance < span * element;
  if (shared && distance % element == 0) {
    clbt_kv_cache_config one = *c;
    uint64_t one_span = 0;
    one.key_offset = 0;
    one.value_offset = distance / element;
    shared = clbt__kv_check_addresses(&one, true, &one_span) != CLBT_SUCCESS;
  }
  if (shared)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->key_cache and value_cache are one buffer (a "
                      "sub-buffer and its parent, or two sub-buffers of "
                      "one): V, %llu bytes from K, would share an address "
                      "with it",
                      (unsigned long long)distance);
  return CLBT_SUCCESS;
}

/* Whether the device has doubles, for an exact fp8 quotient. */
static clbt_status query_fp64(clbt_kv_cache *cache) {
  cl_device_fp_config config = 0;
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clGetDeviceInfo(cache->device->id, CL_DEVICE_DOUBLE_FP_CONFIG,
                               sizeof config, &config, NULL),
               status, done);
  cache->fp64 = config != 0;
done:
  return status;
}

/* Keeps a reference to a caller's buffer in *kept. */
static clbt_status retain(cl_mem buffer, cl_mem *kept) {
  cl_int error = clRetainMemObject(buffer);
  if (error) return clbt__cl_fail(error, "clRetainMemObject");
  *kept = buffer;
  return CLBT_SUCCESS;
}

static void fill_arguments(clbt_kv_cache *cache) {
  const clbt_kv_cache_config *c = &cache->config;
  clbt__kv_arguments *a = &cache->arguments;
  memset(a, 0, sizeof *a);
  clbt__kv_pages_of_config(c, &a->pages);
  a->num_slots = (uint64_t)c->num_blocks * c->block_size;
  a->head_size = c->head_size;
}

clbt_status clbt__kv_cache_create(clbt_device *device,
                                  const clbt_kv_cache_config *config,
                                  clbt_kv_cache **out) {
  clbt_kv_cache_config read = *config;
  uint64_t span = 0;
  clbt_status status = clbt__kv_layout_check(&read, &span);
  if (status) return status;
  clbt_kv_cache *cache = calloc(1, sizeof *cache);
  if (!cache)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a KV cache");
  clbt__device_retain(device);
  cache->device = device;
  cache->config = read;
  status = check_cache_buffer(cache, read.key_cache, "key_cache",
                              "key_offset", read.key_offset, span);
  cl_mem value_cache = read.value_cache ? read.value_cache : read.key_cache;
  if (!status)
    status = check_cache_buffer(cache, value_cache,
                                read.value_cache ? "value_cache" : "key_cache",
                                "value_offset", read.value_offset, span);
  if (!status && read.value_cache && read.value_cache != read.key_cache)
    status = check_kv_apart(cache, span);
  if (!status)
    status = clbt__check_writable(NULL, read.key_cache, "config->key_cache");
  if (!status && read.value_cache)
    status = clbt__check_writable(NULL, read.value_cache,
                                  "config->value_cache");
  if (!status) status = retain(read.key_cache, &cache->key_cache);
  if (!status) status = retain(value_cache, &cache->value_cache);
  if (!status) status = query_fp64(cache);
  if (!status) status = clbt__create_counter(device, &cache->rejected);
  if (status) {
    clbt__kv_cache_destroy(cache);
    return status;
  }
  fill_arguments(cache);
  cache->tensor_span = span;
  *out = cache;
  return CLBT_SUCCESS;
}

void clbt__kv_cache_destroy(clbt_kv_cache *cache) {
  if (!cache) return;
  for (int k = 0; k < CLBT__KV_NUM_KERNELS; ++k)
    if (cache->kernels[k].kernel) clReleaseKernel(cache->kernels[k].kernel);
  clbt__known_buffers_release(&cache->known);
  if (cache->rejected) clReleaseMemObject(cache->rejected);
  if (cache->key_cache) clReleaseMemObject(cache->key_cache);
  if (cache->value_cache) clReleaseMemObject(cache->value_cache);
  clbt_device_release(cache->device);
  free(cache);
}
