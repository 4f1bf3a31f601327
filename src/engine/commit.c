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
#include "engine/engine_internal.h"
#include "engine/group.h"
#include "engine/staging.h"

#include <stdlib.h>
#include <string.h>

/* The listed rows below num_reqs and their changed cells: the totals when
   every listed row is (a step commits every row). */
static clbt__pending count_pending(const clbt__changes *changes,
                                  uint32_t num_reqs) {
  if (changes->bound <= num_reqs)
    return (clbt__pending){changes->num_listed, changes->cells};
  clbt__pending p = {0, 0};
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= num_reqs) continue;
    ++p.rows;
    p.cells += changes->high[row] - changes->low[row];
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


/* A group's commit of rows [0, num_reqs). A stale group is rewritten
   whole, every row, whatever the mode: its changes no longer say what
   differs. */
static clbt_status plan_group(const clbt_table *group, uint32_t num_reqs,
                              clbt__commit_plan *plan) {
  plan->rows = group->device_stale ? group->layout.max_num_reqs : num_reqs;
  plan->pending = count_pending(&group->changes, plan->rows);
  plan->mode = CLBT_COMMIT_WHOLE;
  plan->packet_at = 0;
  plan->whole = (clbt__whole_target){group->regions[CLBT_REGION_ROWS],
                                     group->regions[CLBT_REGION_ROW_LENGTHS],
                                     group->regions[CLBT_REGION_ROW_VERSIONS],
                                     group->layout.width,
                                     group->layout.max_num_reqs, NULL};
  if (group->device_stale) return CLBT_SUCCESS;
  if (plan->pending.rows == 0) {
    plan->mode = CLBT_COMMIT_AUTO;
    return CLBT_SUCCESS;
  }
  return clbt__commit_choose(group->commit_mode, plan->rows,
                             group->layout.width, plan->pending.rows,
                             plan->pending.cells, &plan->mode);
}

/* Reaps the device's watch and the engine's staging pool; a command that
   never arrived leaves every group stale. */
static clbt_status reap(clbt__engine *engine) {
  bool failed = false;
  clbt_status status = clbt__staging_reap(&engine->staging, &failed);
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
  return CLBT_SUCCESS;
}

clbt_status clbt__commit_plan_groups(clbt__engine *engine, uint32_t begin,
                                     uint32_t end, uint32_t num_reqs,
                                     clbt__commit_plan *plans) {
  clbt_status status = reap(engine);
  for (uint32_t g = 0; g < engine->num_groups; ++g) {
    plans[g] = (clbt__commit_plan){.mode = CLBT_COMMIT_AUTO};
    if (status || g < begin || g >= end) continue;
    clbt__changes_sort(&engine->groups[g]->changes);
    status = plan_group(engine->groups[g], num_reqs, &plans[g]);
  }
  return status;
}

/* Each row's entry, then the rows' runs of changed ids, as cl/commit.cl
   reads a section: a row costs its entry and a copy of what changed. The
   entries go in ascending row order, in which the kernel's parts search
   them (committed_row_of): the plan sorted the list (clbt__changes_sort). */
static void pack_section(const clbt_table *group,
                         const clbt__commit_plan *plan, uint32_t *section) {
  const clbt__changes *changes = &group->changes;
  uint32_t *ids =
      section + CLBT_PACKET_ROW_WORDS * (size_t)plan->pending.rows;
  uint32_t first_id = 0;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= plan->rows) continue;
    uint32_t low = changes->low[row], cells = changes->high[row] - low;
    section[CLBT_PACKET_ROW] = row;
    section[CLBT_PACKET_ROW_LENGTH] = group->row_lengths[row];
    section[CLBT_PACKET_ROW_COLUMN] = low;
    section[CLBT_PACKET_ROW_FIRST_ID] = first_id;
    section += CLBT_PACKET_ROW_WORDS;
    const int32_t *run = group->rows + (size_t)row * group->layout.width + low;
    /* A decode step's row gains one id: copied without a call. */
    if (cells == 1)
      ids[first_id] = (uint32_t)run[0];
    else
      memcpy(ids + first_id, run, cells * sizeof *ids);
    first_id += cells;
  }
}

/* Each group's counts, then the sections of those that scatter. */
static void pack_part(const clbt__launch *launch,
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

/* A WHOLE commit's rows, then their lengths. */
static void snapshot(const clbt_table *group, const clbt__commit_plan *plan) {
  size_t cells = (size_t)plan->rows * group->layout.width;
  uint32_t *packet = plan->whole.slot->packet;
  memcpy(packet, group->rows, cells * sizeof(int32_t));
  memcpy(packet + cells, group->row_lengths, plan->rows * sizeof(uint32_t));
}

/* Where the plan puts a launch's part. */
static uint32_t *part_place(const clbt__launch_part *part, uint32_t *upload) {
  const clbt__launch_plan *share = &part->share;
  switch (share->place) {
  case CLBT__PACKET_INLINE:
    return part->step_record->sent.packet;
  case CLBT__PACKET_INLINE_APART:
    return part->scatter_record->sent.packet;
  case CLBT__PACKET_FOLDED:
  case CLBT__PACKET_SCATTERED:
    return upload + share->part_at;
  default:
    return NULL;
  }
}

void clbt__commit_pack(const clbt__launch *launch,
                       const clbt__launch_part *part, uint32_t *upload) {
  if (!part->commits) return;
  uint32_t *to = part_place(part, upload);
  if (to) pack_part(launch, part->commits, to);
  for (uint32_t g = 0; g < launch->shape.num_groups; ++g)
    if (part->commits[g].mode == CLBT_COMMIT_WHOLE &&
        (part->share.group_mask >> g & 1u))
      snapshot(launch->groups[g], &part->commits[g]);
}

void clbt__commit_settle(clbt_table *group, const clbt__commit_plan *plan) {
  group->device_stale = false;
  uint64_t words =
      plan->mode == CLBT_COMMIT_WHOLE
          ? (uint64_t)plan->rows * (group->layout.width + 1)
          : clbt__scatter_words(plan->pending.rows, plan->pending.cells);
  uint32_t rows =
      plan->mode == CLBT_COMMIT_WHOLE ? plan->rows : plan->pending.rows;
  group->last_commit = (clbt_commit_info){
      plan->mode, plan->mode == CLBT_COMMIT_AUTO ? 0 : rows,
      words * sizeof(uint32_t)};
  if (plan->mode != CLBT_COMMIT_AUTO)
    clbt__changes_unlist(&group->changes, plan->rows);
}

