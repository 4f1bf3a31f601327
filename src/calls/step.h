/* The serving step's call (step.c). */
#ifndef CLBT_STEP_H
#define CLBT_STEP_H

#include "engine/engine.h"

/*
 * Reads a caller's step, checks it (every check once, in the order
 * clbt__check_step lists them in checks.c) and runs it: a commit of every
 * row, then the step kernel's slot mapping, gather, export and state slots
 * as its flags ask.
 */
clbt_status clbt__enqueue_step(const clbt__scope *scope, const clbt_step *step,
                               cl_uint num_events, const cl_event *wait_list,
                               cl_event *event);

#endif /* CLBT_STEP_H */
