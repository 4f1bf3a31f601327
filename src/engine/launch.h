/*
 * Launches (launch.c): the step kernel (cl/step.cl) specialised for 1..8
 * groups of an engine, its entries made with its program, each in each
 * record size, bound to the launch's layout and the engine's storage, and
 * their work-group sizes. The kernel's side of the contract is
 * cl/contract.h.
 */
#ifndef CLBT_LAUNCH_H
#define CLBT_LAUNCH_H

#include "clbt/clbt.h"
#include "cl/contract.h"
#include "device/bound_buffer.h"
#include "device/queue.h"
#include "engine/group.h"
#include "engine/plan.h"

/* The host's form of the step kernel's layout, for the most groups
   (cl/contract.h). */
CLBT_DECLARE_LAUNCH_LAYOUT(clbt__launch_layout, CLBT_LAUNCH_GROUPS)

/* The most groups one launch serves (cl/contract.h). */
#define CLBT__MAX_LAUNCH_GROUPS CLBT_LAUNCH_GROUPS
_Static_assert(CLBT_LAUNCH_GROUPS == CLBT_MAX_LAUNCH_GROUPS,
               "the header's launch size is the kernel's");

/* A kernel object of one entry in one record size, bound to its
   launch's layout and the engine's storage. */
typedef struct clbt__kernel {
  cl_kernel kernel;                          /* NULL: not in its program */
  clbt__bound_buffer bound[CLBT__NUM_BOUND]; /* the buffers it holds */
} clbt__kernel;

/*
 * The launches of 1..8 groups of an engine: the step kernel's entries,
 * each in each record size, made with its program. Arguments persist
 * between launches and drivers copy every one at every enqueue
 * (docs/design.md): the layout and the storage are set once, and a launch
 * sets only its record and the buffers that changed. Its two records (its
 * step kernel's and its scatter launch's) are kept from call to call, so
 * that a call clears only what the last one left in them.
 */
typedef struct clbt__launch {
  clbt_table *const *groups; /* shape.num_groups of them, not owned */
  clbt__launch_shape shape;  /* what a plan needs of it */
  cl_mem storage;            /* the engine's, not owned */
  cl_program program;        /* the device's, found on first need; its
                                kernels keep the options it was built with */
  clbt__kernel kernels[CLBT__NUM_ENTRIES][CLBT_MAX_RECORD_CLASSES];
  bool made;                 /* its kernels, and shape.local_sizes */
  clbt__record *step_record, *scatter_record;
} clbt__launch;

/*
 * Builds (or finds) the step program for 1..8 group specs of tables with
 * max_num_reqs rows.
 */
clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program);

/*
 * A launch of these groups, which share max_num_reqs and
 * max_num_batched_tokens and outlive it, over their engine's storage. Its
 * program and kernels are built (or found) now when a group maps tokens,
 * else when a call first needs them (clbt__launch_ready): a table of NONE
 * groups builds nothing until it gathers or commits.
 */
clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *groups,
                              uint32_t num_groups, cl_mem storage);
/*
 * Readies a launch for a call that asks `work` of it (the call's work;
 * what its groups take no part in is left out) and commits its groups as
 * commits plans (NULL: none): builds its program and makes its kernels,
 * setting its shape's work-group sizes, unless they are there or the call
 * runs nothing on it (no work, no scatter).
 */
clbt_status clbt__launch_ready(clbt__launch *launch, uint32_t work,
                               const clbt__commit_plan *commits);
void clbt__launch_release(clbt__launch *launch);

/* Sets what changed of the call's kernel's arguments and enqueues it. */
clbt_status clbt__launch_enqueue(clbt__launch *launch,
                                 const clbt__launch_call *call,
                                 clbt__sequence *sequence);

#endif /* CLBT_LAUNCH_H */
