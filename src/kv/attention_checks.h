/*
 * The checks of one attention launch (attention_checks.c), in the order
 * docs/semantics.md gives, and what they resolve: the kernels' arguments
 * and buffers, and the plan.
 */
#ifndef CLBT_KV_ATTENTION_CHECKS_H
#define CLBT_KV_ATTENTION_CHECKS_H

#include "kv/attention.h"

/* A launch checked and resolved. */
typedef struct clbt__attention_launch {
  clbt_attention_arguments arguments;
  cl_mem buffers[CLBT_ATT_NUM_ARGUMENTS]; /* by argument index */
  clbt__attention_plan plan;
  uint32_t kernels; /* CLBT__ATT_ALIGNED or CLBT__ATT_SINGLE */
} clbt__attention_launch;

/*
 * Checks a batch read from the caller against the descriptor and cache
 * (table: its table's view, or NULL), asking the driver about each buffer
 * once (the descriptor's known buffers), and resolves it. Fails as
 * clbt_attention_enqueue does, naming the field and its bound; checks no
 * wait list.
 */
clbt_status clbt__attention_check(clbt_attention *attention,
                                  const clbt_kv_cache *cache,
                                  const clbt_attention_batch *batch,
                                  const clbt__table_view *table,
                                  clbt__attention_launch *out);

#endif /* CLBT_KV_ATTENTION_CHECKS_H */
