/*
 * One layer's paged attention over a batch (attention_launch.c): checked,
 * planned, then enqueued as one sequence after the wait list.
 */
#ifndef CLBT_KV_ATTENTION_LAUNCH_H
#define CLBT_KV_ATTENTION_LAUNCH_H

#include "kv/attention.h"

/*
 * Enqueues a launch of a batch read from the caller, table its table's
 * view (NULL: none): checks everything (attention_checks.c) and the wait
 * list, makes the kernels the cache's alignment needs and the scratch the
 * plan needs, then the launches after the wait list. Fails as
 * clbt_attention_enqueue does; a refused call enqueues nothing.
 */
clbt_status clbt__attention_enqueue(clbt_attention *attention,
                                    const clbt_kv_cache *cache,
                                    const clbt_attention_batch *batch,
                                    const clbt__table_view *table,
                                    cl_uint num_events,
                                    const cl_event *wait_list,
                                    cl_event *event);

#endif /* CLBT_KV_ATTENTION_LAUNCH_H */
