/* The token-slots call (token_slots.c). */
#ifndef CLBT_TOKEN_SLOTS_H
#define CLBT_TOKEN_SLOTS_H

#include "engine/engine.h"

/*
 * Checks a token-slots request (already read; clbt__check_token_slots) and
 * enqueues its one call: the index matrix's slots in every token-mapping
 * group of the scope.
 */
clbt_status clbt__enqueue_token_slots(const clbt__scope *scope,
                                      const clbt_token_slots_request *request,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event);

#endif /* CLBT_TOKEN_SLOTS_H */
