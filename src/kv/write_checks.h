/*
 * The checks of one KV-cache write (write_checks.c): its token strides,
 * scales and buffers against the cache, in the order docs/semantics.md
 * gives.
 */
#ifndef CLBT_KV_WRITE_CHECKS_H
#define CLBT_KV_WRITE_CHECKS_H

#include "kv/cache.h"

/*
 * Checks a write read from the caller against the cache, filling in its
 * token strides left 0. Its buffers' sizes come from the cache's known
 * buffers (asked of the driver once). Fails as clbt_kv_cache_enqueue_write
 * does, naming the field and its bound.
 */
clbt_status clbt__kv_write_check(clbt_kv_cache *cache, clbt_kv_write *write);

#endif /* CLBT_KV_WRITE_CHECKS_H */
