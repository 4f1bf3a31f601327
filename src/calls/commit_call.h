/* The commit call (commit_call.c): a scope's rows [0, num_reqs) committed. */
#ifndef CLBT_COMMIT_CALL_H
#define CLBT_COMMIT_CALL_H

#include "engine/engine.h"

/* Checks a commit (clbt__check_commit), then runs it on the scope. */
clbt_status clbt__enqueue_commit(const clbt__scope *scope, uint32_t num_reqs,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event);

#endif /* CLBT_COMMIT_CALL_H */
