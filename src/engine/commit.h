/*
 * Commits (commit.c): how each group's commit travels, its section of a
 * launch's packet packed, a WHOLE commit's writes, and what a commit
 * leaves behind. Where each launch's part goes is the call's plan
 * (plan.c, calls/run.c).
 */
#ifndef CLBT_COMMIT_H
#define CLBT_COMMIT_H

#include "device/queue.h"
#include "engine/launch.h"
#include "engine/plan.h"

/*
 * How a commit of `rows` listed rows and `cells` changed cells, among
 * num_reqs rows of `width`, travels in `mode`: SCATTER or WHOLE, or
 * CLBT_SIZE_OVERFLOW when SCATTER was asked for and the scatter cannot
 * count the cells.
 */
clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen);

/*
 * Plans a group's commit of rows [0, num_reqs) (every row of a stale
 * group): its mode and what it moves; nothing changes.
 */
clbt_status clbt__commit_plan_group(const clbt_table *group,
                                    uint32_t num_reqs,
                                    clbt__commit_plan *plan);

/*
 * Packs a launch's part of the packet: each group's counts, then the
 * sections of the groups that scatter (cl/contract.h).
 */
void clbt__commit_pack(const clbt__launch *launch,
                       const clbt__commit_plan *plans, uint32_t *part);

/* Enqueues a WHOLE commit of a group's rows [0, rows), from a snapshot in a
   staging packet, every row given version. */
clbt_status clbt__commit_whole(clbt_table *group, uint32_t rows,
                               uint64_t version, clbt__sequence *sequence);

/* What a commit that enqueued everything leaves: synced rows unlisted. */
void clbt__commit_settle(clbt_table *group, const clbt__commit_plan *plan);

/*
 * Before a commit: reaps the device's watch and, with staging, the
 * engine's staging pool, and marks every group stale when a command that
 * never arrived is found; *lost (when not NULL) says whether one was.
 */
clbt_status clbt__commit_reap(clbt_multi_table *engine, bool staging,
                              bool *lost);

#endif /* CLBT_COMMIT_H */
