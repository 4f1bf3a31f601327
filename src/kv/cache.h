/*
 * A layer's paged KV cache (cache.c): its config resolved and checked
 * against its buffers once, at creation, the buffers retained, and its
 * rejected-token counter. What the write (write.c) and the attention read
 * of a cache; the public surface is api/kv_cache.c.
 */
#ifndef CLBT_KV_CACHE_H
#define CLBT_KV_CACHE_H

#include "clbt/clbt.h"
#include "cl/kv_cache.h"
#include "device/bound_buffer.h"
#include "device/handle.h"
#include "device/known_buffers.h"

#include <stdbool.h>
#include <stdint.h>

/* The write's kernels of a cache: chunks of its alignment, and single
   elements for inputs that are not aligned to it (made on the first such
   write). */
enum { CLBT__KV_ALIGNED, CLBT__KV_SINGLE, CLBT__KV_NUM_KERNELS };

typedef struct clbt__kv_kernel {
  cl_kernel kernel;       /* NULL until made */
  uint32_t chunk;         /* elements a work-item moves at a time */
  size_t local_size;
  clbt__bound_buffer bound[3]; /* the key, value and slot mapping */
} clbt__kv_kernel;

struct clbt_kv_cache {
  clbt_device *device;
  clbt_kv_cache_config config; /* defaults filled in */
  uint64_t tensor_span;        /* elements K (and V) spans from its offset */
  cl_mem key_cache, value_cache; /* retained; the same one for one buffer */
  cl_mem rejected;               /* uint32, the rejected-token count */
  clbt__kv_arguments arguments;  /* the cache's part, filled at creation */
  clbt__kv_kernel kernels[CLBT__KV_NUM_KERNELS];
  bool fp64;                     /* the device has doubles */
  clbt__known_buffers known;     /* the write inputs checked lately */
};

/*
 * Makes a cache of a config read from the caller (base/config.c): checks
 * it (kv/layout.c), then against its buffers (of the device's context,
 * holding their tensors, K and V apart when they are one buffer), retains
 * them and makes the counter. Its kernels are made by the write
 * (clbt__kv_write_prepare). Fails as clbt_kv_cache_create does; *out is
 * set only on success.
 */
clbt_status clbt__kv_cache_create(clbt_device *device,
                                  const clbt_kv_cache_config *config,
                                  clbt_kv_cache **out);

/* Frees a cache, its kernels and its references; NULL is fine. */
void clbt__kv_cache_destroy(clbt_kv_cache *cache);

#endif /* CLBT_KV_CACHE_H */
