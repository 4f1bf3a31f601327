/*
 * Commits: the row operations record what they change (clbt__changes), and
 * a commit moves only that, per group:
 *
 *   SCATTER  the group's section of one packet of its changed rows (an
 *            entry a row, then each row's run of changed ids), for every
 *            group of the commit: inside the step kernel's record when it
 *            fits, else one upload for all, applied by the step kernel or
 *            a scatter launch of it per eight groups.
 *   WHOLE    rows [0, num_reqs) and their lengths in two writes, when the
 *            packet would be half their size or more.
 *
 * Both send a copy taken at commit time (a staging slot, staging.c, or a
 * launch's record), so the host rows may change as soon as commit returns
 * and nothing waits for the device. Every row a commit writes gets the
 * commit's version, which tells the gather (cl/gather.cl) which rows
 * changed. Where each launch's part of the packet goes is
 * the call's plan (plan.c, calls/run.c). Mapping the committed copy and
 * writing cells in place was measured too, on PoCL where it costs no copy: its blocking map made it
 * slower than SCATTER (docs/benchmarks.md).
 */
#include "engine/commit.h"

#include "base/status.h"
#include "device/handle.h"
#include "engine/changes.h"
#include "engine/engine.h"
#include "engine/group.h"
#include "engine/staging.h"

#include <stdlib.h>
#include <string.h>

/* Unlists the rows below num_reqs, which the commit brought in sync. */
static void unlist_committed(clbt__changes *changes, uint32_t num_reqs) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row < num_reqs)
      changes->listed[row] = false;
    else
      changes->listed_rows[kept++] = row;
  }
  changes->num_listed = kept;
}

static clbt__pending count_pending(const clbt__changes *changes,
                                  uint32_t num_reqs) {
  clbt__pending p = {0, 0};
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= num_reqs) continue;
    ++p.rows;
    p.cells += clbt__changed_cells(changes, row);
  }
  return p;
}

clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen) {
  uint64_t whole_words = (uint64_t)num_reqs * (width + 1);
  uint64_t scatter_words = clbt__scatter_words(rows, cells);
  /* The scatter kernel counts lengths and cells in 32 bits. */
  bool countable = rows <= UINT32_MAX && cells <= UINT32_MAX;
  if (mode == CLBT_COMMIT_SCATTER && !countable)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "a SCATTER commit of %llu changed cells in %llu rows "
                      "exceeds the scatter kernel's count of %lu; commit in "
                      "CLBT_COMMIT_AUTO or CLBT_COMMIT_WHOLE mode",
                      (unsigned long long)cells, (unsigned long long)rows,
                      (unsigned long)UINT32_MAX);
  if (mode == CLBT_COMMIT_AUTO)
    mode = 2 * scatter_words >= whole_words || !countable ? CLBT_COMMIT_WHOLE
                                                          : CLBT_COMMIT_SCATTER;
  *chosen = mode;
  return CLBT_SUCCESS;
}


/* A stale group is rewritten whole, every row, whatever the mode: its
   changes no longer say what differs. */
clbt_status clbt__commit_plan_group(const clbt_table *group,
                                    uint32_t num_reqs,
                                    clbt__commit_plan *plan) {
  plan->rows = group->device_stale ? group->layout.max_num_reqs : num_reqs;
  plan->pending = count_pending(&group->changes, plan->rows);
  plan->mode = CLBT_COMMIT_WHOLE;
  plan->packet_at = 0;
  if (group->device_stale) return CLBT_SUCCESS;
  if (plan->pending.rows == 0) {
    plan->mode = CLBT_COMMIT_AUTO;
    return CLBT_SUCCESS;
  }
  return clbt__commit_choose(group->commit_mode, plan->rows,
                             group->layout.width, plan->pending.rows,
                             plan->pending.cells, &plan->mode);
}

clbt_status clbt__commit_whole(clbt_table *group, uint32_t rows,
                               uint64_t version, clbt__sequence *sequence) {
  clbt__staging_pool *pool = &group->engine->staging;
  size_t cells = (size_t)rows * group->layout.width;
  size_t words = cells + rows;
  clbt__staging slot;
  cl_event rows_read = NULL, lengths_read = NULL;
  clbt_status status = clbt__staging_acquire(pool, group->device->context,
                                             words, false, &slot);
  if (status) return status;
  memcpy(slot.packet, group->rows, cells * sizeof(int32_t));
  memcpy(slot.packet + cells, group->row_lengths, rows * sizeof(uint32_t));
  status = clbt__sequence_write(sequence, group->regions[CLBT_REGION_ROWS], 0,
                                cells * sizeof(int32_t), slot.packet,
                                &rows_read);
  if (!status)
    status = clbt__sequence_write(
        sequence, group->regions[CLBT_REGION_ROW_LENGTHS], 0,
        rows * sizeof(uint32_t), slot.packet + cells, &lengths_read);
  /* The slot lives until the last write that was enqueued ends; the queue
     is in order, so the one before it has ended too. */
  if (!rows_read) {
    clbt__staging_return(pool, &slot);
  } else if (lengths_read) {
    clReleaseEvent(rows_read);
    clbt__staging_submit(pool, &slot, lengths_read);
  } else {
    clbt__staging_submit(pool, &slot, rows_read);
  }
  if (!status)
    status = clbt__sequence_fill(
        sequence, group->regions[CLBT_REGION_ROW_VERSIONS], &version,
        sizeof version, 0, group->layout.max_num_reqs * sizeof version);
  if (!status)
    group->last_commit = (clbt_commit_info){CLBT_COMMIT_WHOLE, rows,
                                            words * sizeof(uint32_t)};
  return status;
}

/* Each row's entry, then the rows' runs of changed ids, as cl/commit.cl
   reads a section: a row costs its entry and a copy of what changed. The
   entries go in ascending row order, in which the kernel's parts search
   them (committed_row_of): the listed flags are walked, not the list. */
static void pack_section(const clbt_table *group,
                         const clbt__commit_plan *plan, uint32_t *section) {
  const clbt__changes *changes = &group->changes;
  uint32_t *ids =
      section + CLBT_PACKET_ROW_WORDS * (size_t)plan->pending.rows;
  uint32_t first_id = 0;
  for (uint32_t row = 0; row < plan->rows; ++row) {
    const bool *next = memchr(changes->listed + row, true, plan->rows - row);
    if (!next) break;
    row = (uint32_t)(next - changes->listed);
    uint32_t cells = clbt__changed_cells(changes, row);
    uint32_t low = cells ? changes->low[row] : 0;
    section[CLBT_PACKET_ROW] = row;
    section[CLBT_PACKET_ROW_LENGTH] = group->row_lengths[row];
    section[CLBT_PACKET_ROW_COLUMN] = low;
    section[CLBT_PACKET_ROW_FIRST_ID] = first_id;
    section += CLBT_PACKET_ROW_WORDS;
    memcpy(ids + first_id,
           group->rows + (size_t)row * group->layout.width + low,
           cells * sizeof *ids);
    first_id += cells;
  }
}

void clbt__commit_pack(const clbt__launch *launch,
                       const clbt__commit_plan *plans, uint32_t *part) {
  for (uint32_t g = 0; g < launch->shape.num_groups; ++g) {
    bool scatters = plans[g].mode == CLBT_COMMIT_SCATTER;
    uint32_t *counts = part + CLBT_PACKET_HEADER_WORDS_PER_GROUP * g;
    counts[0] = scatters ? plans[g].pending.rows : 0;
    counts[1] = scatters ? (uint32_t)plans[g].pending.cells : 0;
    if (scatters)
      pack_section(launch->groups[g], &plans[g], part + plans[g].packet_at);
  }
}

void clbt__commit_settle(clbt_table *group, const clbt__commit_plan *plan) {
  group->device_stale = false;
  if (plan->mode == CLBT_COMMIT_AUTO) {
    group->last_commit = (clbt_commit_info){CLBT_COMMIT_AUTO, 0, 0};
    return;
  }
  if (plan->mode == CLBT_COMMIT_SCATTER)
    group->last_commit = (clbt_commit_info){
        CLBT_COMMIT_SCATTER, plan->pending.rows,
        clbt__commit_section_words(plan) * sizeof(uint32_t)};
  unlist_committed(&group->changes, plan->rows);
}

clbt_status clbt__commit_reap(clbt_multi_table *engine, bool staging,
                              bool *lost) {
  bool failed = false;
  clbt_status status =
      staging ? clbt__staging_reap(&engine->staging, &failed) : CLBT_SUCCESS;
  if (status) return status;
  /* A command behind a failed one on the queue never ran, with no word. */
  uint64_t failures = 0;
  status = clbt__watch_failures(engine->device, &failures);
  if (status) return status;
  failed = failed || failures != engine->seen_failures;
  engine->seen_failures = failures;
  /* The pool is the engine's: any of its groups may have lost a packet. */
  for (uint32_t g = 0; failed && g < engine->num_groups; ++g)
    engine->groups[g]->device_stale = true;
  if (lost) *lost = failed;
  return CLBT_SUCCESS;
}
