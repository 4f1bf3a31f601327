/*
 * The KV-cache write (write.c, vLLM's reshape_and_cache_flash): a cache's
 * kernels, specialised by its types and alignment, and one launch a write.
 */
#ifndef CLBT_KV_WRITE_H
#define CLBT_KV_WRITE_H

#include "kv/cache.h"

/* Makes a new cache's aligned kernel (building its program, or taking it
   from the device's cache), so that a first write builds nothing. */
clbt_status clbt__kv_write_prepare(clbt_kv_cache *cache);

/*
 * Enqueues a write read from the caller: checks it (write_checks.c) and
 * the wait list, then one launch after the wait list (none with no tokens;
 * the event is then a marker). Fails as clbt_kv_cache_enqueue_write does;
 * a refused write enqueues nothing.
 */
clbt_status clbt__kv_write_enqueue(clbt_kv_cache *cache, clbt_kv_write *write,
                                   cl_uint num_events,
                                   const cl_event *wait_list,
                                   cl_event *event);

#endif /* CLBT_KV_WRITE_H */
