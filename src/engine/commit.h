/*
 * Commits (commit.c): how each group's commit travels, a launch's part of
 * the packet packed and the WHOLE commits' rows copied into their slots,
 * what a commit leaves behind, and the reaping before it. Where each
 * launch's part goes, and the commands that send them, are the call's
 * plan (plan.c, calls/run.c).
 */
#ifndef CLBT_COMMIT_H
#define CLBT_COMMIT_H

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
 * Plans the commit of rows [0, num_reqs) (every row of a stale group) of
 * an engine's groups [begin, end) into plans[g] (the others move
 * nothing): their modes, what they move and, WHOLE, where they write
 * (their slots are the plan's to take).
 * First it reaps the device's watch and the engine's staging pool, and
 * marks every group stale when a command that never arrived is found, so
 * that the commit rewrites them whole. Nothing else changes.
 */
clbt_status clbt__commit_plan_groups(clbt__engine *engine, uint32_t begin,
                                     uint32_t end, uint32_t num_reqs,
                                     clbt__commit_plan *plans);

/*
 * Packs a launch's part of the packet where its plan puts it (the record
 * of its step kernel or of its scatter launch, or the upload from
 * part_at): each group's counts, then the sections of the groups that
 * scatter (cl/contract.h); and copies each WHOLE commit's rows and lengths
 * into its slot, so that the host rows may change as soon as the call
 * returns.
 */
void clbt__commit_pack(const clbt__launch *launch,
                       const clbt__launch_part *part, uint32_t *upload);

/* What a commit whose commands were all enqueued leaves: the group in
   sync, its committed rows unlisted, its last commit's info. */
void clbt__commit_settle(clbt_table *group, const clbt__commit_plan *plan);

#endif /* CLBT_COMMIT_H */
