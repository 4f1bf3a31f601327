/*
 * The host reference (reference.c): the slot mapping and the step computed
 * on the host from the host rows, which multi_table.c runs per group.
 */
#ifndef CLBT_REFERENCE_H
#define CLBT_REFERENCE_H

#include "clbt/clbt.h"

/* Checks a host step's batch against a table (all of an engine's groups
   share their bounds). */
clbt_status clbt__check_host_step(const clbt_table *table,
                                  const clbt_host_step *step);
/* Computes a checked host step of one table into the outputs it names. */
void clbt__compute_step_host(const clbt_table *table,
                             const clbt_host_step *step);

#endif /* CLBT_REFERENCE_H */
