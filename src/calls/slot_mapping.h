/* The slot-mapping call (slot_mapping.c). */
#ifndef CLBT_SLOT_MAPPING_H
#define CLBT_SLOT_MAPPING_H

#include "calls/run.h"
#include "engine/engine.h"

/* Checks a slot mapping (clbt__check_slot_mapping), then runs it in every
   token-mapping group of the scope. */
clbt_status clbt__enqueue_slot_mapping(const clbt__scope *scope,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event);

#endif /* CLBT_SLOT_MAPPING_H */
