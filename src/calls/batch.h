/*
 * A call's batch as the caller gave it, and the checks every device call
 * shares (batch.c): its sizes against the table's bounds, its buffers'
 * sizes and context, its padding, a step's flags, and a group named alone
 * that holds the wrong kind of rows for the call.
 */
#ifndef CLBT_BATCH_H
#define CLBT_BATCH_H

#include "engine/engine.h"

/*
 * A batch as the caller gave it: a slot mapping's, an export's (and a
 * step's, which does both). The fields after num_tokens are 0 or NULL
 * where a call has no such argument.
 */
typedef struct clbt__batch {
  uint32_t num_reqs;
  cl_mem query_start_loc;   /* int32[num_reqs + 1] */
  cl_mem positions;         /* int64[num_tokens]; NULL when num_tokens is 0 */
  uint32_t num_tokens;
  uint32_t num_reqs_padded; /* 0: num_reqs */
  cl_mem seq_lens;          /* int32[num_reqs], or NULL */
  cl_mem idx_mapping;       /* int32[num_reqs], or NULL: the identity */
  uint32_t export_flags;    /* CLBT_EXPORT_* of an export */
  uint32_t dense_row_pitch; /* with CLBT_EXPORT_DENSE; 0: each width */
  uint32_t num_state_slots; /* a step's state slots: ids per request */
  int32_t state_null_block; /* and the id of none */
  uint32_t indices_per_row; /* token slots: num_tokens rows of these */
  cl_mem token_indices;     /* int32[num_tokens][indices_per_row] */
  cl_mem token_slots;       /* int32[sections][num_tokens][indices_per_row] */
} clbt__batch;

/*
 * Checks a batch's arguments against a table's bounds and context (the
 * optional buffers when given), in this order: query_start_loc and
 * positions given, num_reqs and num_tokens, num_reqs_padded, then each
 * buffer's context and size (query_start_loc, positions, seq_lens,
 * idx_mapping). The caller checks the wait list after.
 */
clbt_status clbt__check_batch_arguments(clbt_table *table,
                                        const clbt__batch *batch);


/*
 * Checks that a caller's buffer belongs to the table's context and holds
 * `needed` bytes, which count_name's value count asks for. A buffer the
 * engine has checked before costs no driver call (clbt__known_buffers).
 */
clbt_status clbt__check_buffer(clbt_table *table, cl_mem buffer,
                               const char *name, size_t needed,
                               const char *count_name, uint32_t count);

/* Checks a batch's sizes against a table's bounds. */
clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens);

/*
 * Checks a padded request count, named `name`, against num_reqs (0 means
 * num_reqs) and the table's max_num_reqs.
 */
clbt_status clbt__check_padding(const clbt_table *table, const char *name,
                                uint32_t num_reqs, uint32_t padded);

/* Checks that a step's flags are CLBT_STEP_* flags: a host step's are
   CLBT_STEP_GATHER and CLBT_STEP_EXPORT, a device step may be a dummy run. */
clbt_status clbt__check_step_flags(uint32_t flags, bool on_device);

/*
 * A group named alone (a clbt_table call on a group) must hold the rows
 * the call reads: pages, a token-mapping group's, for an export or token
 * slots (pages true), or states, a NONE group's, for state slots. `what`
 * names what the call writes ("export"); CLBT_INVALID_ARGUMENT otherwise.
 * A scope of every group of an engine takes the groups that hold them.
 */
clbt_status clbt__check_alone(const clbt__scope *scope, bool pages,
                              const char *what);

#endif /* CLBT_BATCH_H */
