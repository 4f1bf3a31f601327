/* A step's state slots: their check (state_slots.c). */
#ifndef CLBT_STATE_SLOTS_H
#define CLBT_STATE_SLOTS_H

#include "engine/engine.h"

/*
 * Checks a step's state slots for a scope: a group named alone must map no
 * tokens, and `count` ids a request must fit every NONE group's width.
 */
clbt_status clbt__check_state_slots(const clbt__scope *scope, uint32_t count);

#endif /* CLBT_STATE_SLOTS_H */
