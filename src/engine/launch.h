/*
 * Launches (launch.c): the step kernel (cl/step.cl) specialised for 1..8
 * groups of an engine, its entries made on first use, each in each record
 * size, bound to the launch's layout and the engine's storage, and its
 * geometry. The kernel's side of the contract is cl/contract.h.
 */
#ifndef CLBT_LAUNCH_H
#define CLBT_LAUNCH_H

#include "clbt/clbt.h"
#include "cl/contract.h"
#include "device/bound_buffer.h"
#include "device/queue.h"
#include "engine/group.h"
#include "engine/plan.h"

/* The host's forms of the step kernel's by-value arguments, for the most
   groups and the largest inline packet (cl/contract.h). */
CLBT_DECLARE_LAUNCH_LAYOUT(clbt__launch_layout, CLBT_LAUNCH_GROUPS)
CLBT_DECLARE_LAUNCH_RECORD(clbt__launch_record, CLBT_MAX_RECORD_WORDS)

/* The most groups one launch serves (cl/contract.h). */
#define CLBT__MAX_LAUNCH_GROUPS CLBT_LAUNCH_GROUPS
_Static_assert(CLBT_LAUNCH_GROUPS == CLBT_MAX_LAUNCH_GROUPS,
               "the header's launch size is the kernel's");

/* The batch buffers a launch binds, in the step kernel's argument order. */
enum {
  CLBT__BOUND_QUERY_START_LOC,
  CLBT__BOUND_POSITIONS,
  CLBT__BOUND_IDX_MAPPING,
  CLBT__BOUND_SEQ_LENS,
  CLBT__BOUND_TOKEN_INDICES,
  CLBT__BOUND_TOKEN_SLOTS,
  CLBT__BOUND_PACKET,
  CLBT__NUM_BOUND
};

/* A kernel object of one entry in one record size, bound to its
   launch's layout and the engine's storage. */
typedef struct clbt__kernel {
  cl_kernel kernel;                          /* NULL until made */
  clbt__bound_buffer bound[CLBT__NUM_BOUND]; /* the buffers it holds */
  size_t local_size;                         /* its work-groups' size */
} clbt__kernel;

/*
 * The launches of 1..8 groups of an engine: the step kernel's entries,
 * each in each record size, made on first use. Arguments persist between
 * launches and drivers copy every one at every enqueue (docs/design.md):
 * the layout and the storage are set once, and a launch sets only its
 * record and the buffers that changed.
 */
typedef struct clbt__launch {
  clbt_table *const *groups; /* shape.num_groups of them, not owned */
  clbt__launch_shape shape;  /* what a plan needs of it */
  cl_mem storage;            /* the engine's, not owned */
  cl_program program;        /* the device's, found on first need; its
                                kernels keep the options it was built with */
  clbt__kernel kernels[CLBT__NUM_ENTRIES][CLBT_MAX_RECORD_CLASSES];
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
 * program is built (or found) now when a group maps tokens, else on first
 * use: a table of NONE groups builds nothing until it gathers or commits.
 * Its kernels are made on first use, from that program.
 */
clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *groups,
                              uint32_t num_groups, cl_mem storage);
/* The kernel of an entry in a record size, made unless it is there. */
clbt_status clbt__launch_kernel(clbt__launch *launch, clbt__entry entry,
                                uint32_t record_class, clbt__kernel **out);
void clbt__launch_release(clbt__launch *launch);

/*
 * One launch as a plan enqueues it: its kernel, its record (work, batch,
 * inline packet) of the kernel's size, the buffers it binds, and its grid.
 */
typedef struct clbt__launch_call {
  clbt__kernel *kernel;
  uint32_t record_class;
  const clbt__launch_record *record;
  cl_mem buffers[CLBT__NUM_BOUND];
  uint64_t serials[CLBT__NUM_BOUND]; /* of the records holding them */
  size_t global_size;
} clbt__launch_call;

/* Sets what changed of the call's kernel's arguments and enqueues it. */
clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 const clbt__launch_call *call,
                                 clbt__sequence *sequence);

#endif /* CLBT_LAUNCH_H */
