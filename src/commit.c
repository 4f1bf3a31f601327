/*
 * Commits: the row operations record what they change (clbt__changes), and
 * a commit moves only that, per group:
 *
 *   SCATTER  the group's section of one packet of changed cells and
 *            lengths: one upload for every group of the commit, then one
 *            kernel per eight groups that scatters it.
 *   WHOLE    rows [0, num_reqs) and their lengths in two writes, when the
 *            packet would be half their size or more.
 *
 * Both send a copy taken at commit time from a staging slot (staging.c), so
 * the host rows may change as soon as commit returns and nothing waits for
 * the device. Every row a commit writes gets the commit's version, which
 * tells the gather (cl/slot_mapping.cl) which rows changed. Mapping the committed copy and writing cells in place was
 * measured too, on PoCL where it costs no copy: its blocking map made it
 * slower than SCATTER (docs/benchmarks.md).
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs) {
  changes->listed_rows = calloc(max_num_reqs, sizeof *changes->listed_rows);
  changes->listed = calloc(max_num_reqs, sizeof *changes->listed);
  changes->low = calloc(max_num_reqs, sizeof *changes->low);
  changes->high = calloc(max_num_reqs, sizeof *changes->high);
  changes->extent = calloc(max_num_reqs, sizeof *changes->extent);
  changes->num_listed = 0;
  if (changes->listed_rows && changes->listed && changes->low &&
      changes->high && changes->extent)
    return CLBT_SUCCESS;
  clbt__changes_free(changes);
  return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                    "no memory to track changes of %u rows",
                    (unsigned)max_num_reqs);
}

void clbt__changes_free(clbt__changes *changes) {
  free(changes->listed_rows);
  free(changes->listed);
  free(changes->low);
  free(changes->high);
  free(changes->extent);
  memset(changes, 0, sizeof *changes);
}

void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs) {
  for (uint32_t i = 0; i < changes->num_listed; ++i)
    changes->listed[changes->listed_rows[i]] = false;
  changes->num_listed = 0;
  memset(changes->extent, 0, max_num_reqs * sizeof *changes->extent);
}

void clbt__changes_mark(clbt_table *table, uint32_t row, uint32_t low,
                        uint32_t high) {
  clbt__changes *changes = &table->changes;
  if (!changes->listed[row]) {
    changes->listed[row] = true;
    changes->listed_rows[changes->num_listed++] = row;
    changes->low[row] = UINT32_MAX;
    changes->high[row] = 0;
  }
  if (low >= high) return; /* only the length changed */
  if (low < changes->low[row]) changes->low[row] = low;
  if (high > changes->high[row]) changes->high[row] = high;
}

static uint32_t changed_cells(const clbt__changes *changes, uint32_t row) {
  return changes->high[row] > changes->low[row]
             ? changes->high[row] - changes->low[row]
             : 0;
}

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
    p.cells += changed_cells(changes, row);
  }
  return p;
}

/* A scatter packet: (row, length) per row, (row, column, id) per cell. */
static uint64_t packet_words(uint64_t rows, uint64_t cells) {
  return 2 * rows + 3 * cells;
}

clbt_status clbt__commit_choose(clbt_commit_mode mode, uint32_t num_reqs,
                                uint32_t width, uint64_t rows, uint64_t cells,
                                clbt_commit_mode *chosen) {
  uint64_t whole_words = (uint64_t)num_reqs * (width + 1);
  uint64_t scatter_words = packet_words(rows, cells);
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
static clbt_status plan_group(const clbt_table *group, uint32_t num_reqs,
                              clbt__commit_plan *plan) {
  plan->rows = group->device_stale ? group->layout.max_num_reqs : num_reqs;
  plan->pending = count_pending(&group->changes, plan->rows);
  plan->mode = CLBT_COMMIT_WHOLE;
  if (group->device_stale) return CLBT_SUCCESS;
  if (plan->pending.rows == 0) {
    plan->mode = CLBT_COMMIT_AUTO;
    return CLBT_SUCCESS;
  }
  return clbt__commit_choose(group->commit_mode, plan->rows,
                             group->layout.width, plan->pending.rows,
                             plan->pending.cells, &plan->mode);
}

uint32_t clbt__next_version(clbt_table *group) {
  return ++group->engine->version;
}

/*
 * Rows [0, rows) and their lengths, from a snapshot in a staging packet:
 * two non-blocking writes, so the host rows may change at once, and every
 * row's version (the fill reads no host memory).
 */
static clbt_status commit_whole(clbt_table *group, uint32_t rows,
                                uint32_t version, clbt__sequence *sequence) {
  cl_command_queue queue = group->device->queue;
  size_t cells = (size_t)rows * group->layout.width;
  size_t words = cells + rows;
  clbt__staging *slot = NULL;
  cl_uint num_events;
  const cl_event *wait_list;
  cl_event written = NULL;
  clbt_status status =
      clbt__staging_acquire(&group->engine->staging, group->device->context,
                            words, false, &slot);
  if (status) return status;
  memcpy(slot->packet, group->rows, cells * sizeof(int32_t));
  memcpy(slot->packet + cells, group->row_lengths, rows * sizeof(uint32_t));
  clbt__sequence_next(sequence, &num_events, &wait_list);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, group->regions[CLBT__ROWS], CL_FALSE,
                                    0, cells * sizeof(int32_t), slot->packet,
                                    num_events, wait_list, &written),
               status, done);
  clbt__staging_add_reader(slot, written);
  CLBT__CL_TRY(clEnqueueWriteBuffer(queue, group->regions[CLBT__ROW_LENGTHS],
                                    CL_FALSE, 0, rows * sizeof(uint32_t),
                                    slot->packet + cells, 0, NULL, &written),
               status, done);
  clbt__staging_add_reader(slot, written);
  CLBT__CL_TRY(clEnqueueFillBuffer(queue, group->regions[CLBT__ROW_VERSIONS],
                                   &version, sizeof version, 0,
                                   group->layout.max_num_reqs * sizeof version,
                                   0, NULL, &written),
               status, done);
  clbt__staging_add_reader(slot, written);
  status = clbt__sequence_done(sequence, written, true);
  group->last_commit = (clbt_commit_info){CLBT_COMMIT_WHOLE, rows,
                                          words * sizeof(uint32_t)};
done:
  return status;
}

/* Lengths first, then cells, as cl/slot_mapping.cl reads a section. */
static void pack_section(const clbt_table *group,
                         const clbt__commit_plan *plan, uint32_t *section) {
  const clbt__changes *changes = &group->changes;
  uint32_t *cell = section + 2 * (size_t)plan->pending.rows;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row >= plan->rows) continue;
    *section++ = row;
    *section++ = group->row_lengths[row];
    const int32_t *data = group->rows + (size_t)row * group->layout.width;
    for (uint32_t column = changes->low[row]; column < changes->high[row];
         ++column) {
      *cell++ = row;
      *cell++ = column;
      *cell++ = (uint32_t)data[column];
    }
  }
}

/* A launch's part of the packet: each group's counts, then its sections
   (cl/contract.h); a group that does not scatter has none. */
static void pack_launch(const clbt__launch *launch,
                        const clbt__commit_plan *plans, uint32_t *part) {
  for (uint32_t g = 0; g < launch->num_groups; ++g) {
    bool scatters = plans[g].mode == CLBT_COMMIT_SCATTER;
    part[2 * g] = scatters ? plans[g].pending.rows : 0;
    part[2 * g + 1] = scatters ? (uint32_t)plans[g].pending.cells : 0;
    if (scatters) pack_section(launch->groups[g], &plans[g],
                               part + plans[g].packet_at);
  }
}

/* Whether any of a launch's groups scatters. */
static bool launch_scatters(const clbt__launch *launch,
                            const clbt__commit_plan *plans) {
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    if (plans[g].mode == CLBT_COMMIT_SCATTER) return true;
  return false;
}

/* The items of a launch's scatter: its largest group's lengths and cells. */
static size_t launch_items(const clbt__launch *launch,
                           const clbt__commit_plan *plans) {
  size_t items = 0;
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    if (plans[g].mode == CLBT_COMMIT_SCATTER &&
        plans[g].pending.rows + plans[g].pending.cells > items)
      items = plans[g].pending.rows + plans[g].pending.cells;
  return items;
}

/*
 * A packet that every work-group of a step kernel applies on its own
 * (cl/slot_mapping.cl) when it has at most this many items a group: a few
 * passes of a work-group, cheaper than a scatter launch of its own.
 */
#define CLBT__FOLDED_ITEMS 512

/* Whether a scattering launch's part goes to its step kernel (folded). */
static bool folds(const clbt__launch *launch, const clbt__commit_plan *plans,
                  bool fold) {
  return fold && launch->kernel &&
         launch_items(launch, plans) <= CLBT__FOLDED_ITEMS;
}

/* One launch's scatter kernel over its part of the uploaded packet. */
static clbt_status scatter_launch(clbt__launch *launch, size_t items,
                                  cl_mem packet, cl_ulong packet_at,
                                  uint32_t version, clbt__sequence *sequence) {
  clbt_device *device = launch->groups[0]->device;
  size_t global, local, kernel_max_group = 0;
  cl_event scattered = NULL;
  clbt_status status =
      clbt__launch_set_packet(launch->scatter, &packet, packet_at, version);
  if (status) return status;
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(launch->scatter, device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, done);
  clbt__geometry(device, kernel_max_group, items, &global, &local);
  CLBT__CL_TRY(clEnqueueNDRangeKernel(device->queue, launch->scatter, 1, NULL,
                                      &global, &local, 0, NULL, &scattered),
               status, done);
  status = clbt__sequence_done(sequence, scattered, false);
done:
  return status;
}

/*
 * Every scattering launch's part of one packet, in one upload; then per
 * launch a scatter kernel, or, when folding is asked and the part is small,
 * nothing: the launch's next step kernel applies it (launch->packet). The
 * slot's readers are the upload and the last scatter; a folded packet's
 * last reader is the step kernel, which the caller adds (*folded).
 */
static clbt_status commit_scatters(clbt__launch *launches,
                                   uint32_t num_launches,
                                   clbt__commit_plan *plans, size_t words,
                                   uint32_t version, bool fold,
                                   clbt__sequence *sequence,
                                   clbt__staging **folded) {
  clbt_table *first = launches[0].groups[0];
  clbt__staging *slot = NULL;
  cl_uint num_events;
  const cl_event *wait_list;
  cl_event uploaded = NULL;
  bool scattered = false;
  clbt_status status =
      clbt__staging_acquire(&first->engine->staging, first->device->context,
                            words, true, &slot);
  if (status) return status;
  for (uint32_t l = 0, p = 0; l < num_launches; p += launches[l++].num_groups)
    if (launch_scatters(&launches[l], &plans[p]))
      pack_launch(&launches[l], &plans[p],
                  slot->packet + launches[l].packet_at);
  clbt__sequence_next(sequence, &num_events, &wait_list);
  CLBT__CL_TRY(clEnqueueWriteBuffer(first->device->queue, slot->buffer,
                                    CL_FALSE, 0, words * sizeof(uint32_t),
                                    slot->packet, num_events, wait_list,
                                    &uploaded),
               status, done);
  clbt__staging_add_reader(slot, uploaded);
  for (uint32_t l = 0, p = 0; !status && l < num_launches;
       p += launches[l++].num_groups) {
    clbt__launch *launch = &launches[l];
    if (!launch_scatters(launch, &plans[p])) continue;
    size_t items = launch_items(launch, &plans[p]);
    if (folds(launch, &plans[p], fold)) {
      launch->packet_kind = CLBT_PACKET_IN_BUFFER;
      launch->packet = slot->buffer;
      launch->packet_version = version;
      *folded = slot;
      continue;
    }
    status = scatter_launch(launch, items, slot->buffer, launch->packet_at,
                            version, sequence);
    scattered = !status;
  }
  /* The queue is in order: the last scatter ends after the others. */
  if (!status && scattered && !*folded) {
    CLBT__CL_TRY(clRetainEvent(sequence->last), status, done);
    clbt__staging_add_reader(slot, sequence->last);
  }
done:
  return status;
}

/*
 * Whether every scattering launch's part fits in its step kernel's
 * arguments, where it travels with no upload at all.
 */
static bool all_inline(const clbt__launch *launches, uint32_t num_launches,
                       const clbt__commit_plan *plans, size_t words,
                       bool fold) {
  for (uint32_t l = 0, p = 0; l < num_launches; p += launches[l++].num_groups) {
    if (!launch_scatters(&launches[l], &plans[p])) continue;
    size_t part = (l + 1 < num_launches ? launches[l + 1].packet_at : words) -
                  launches[l].packet_at;
    if (!folds(&launches[l], &plans[p], fold) ||
        part > launches[l].inline_words || launches[l].inline_words < 2)
      return false;
  }
  return true;
}

/*
 * Each scattering launch's part packed into its inline packet, for its
 * step kernel to apply: no upload. A slot with no packet stands for the
 * commit in the staging pool, where the step kernel's event tells when it
 * ran and whether it failed (*folded).
 */
static clbt_status commit_inline(clbt__launch *launches, uint32_t num_launches,
                                 const clbt__commit_plan *plans,
                                 uint32_t version, clbt__staging **folded) {
  clbt_table *first = launches[0].groups[0];
  clbt_status status =
      clbt__staging_acquire(&first->engine->staging, first->device->context,
                            0, false, folded);
  if (status) return status;
  for (uint32_t l = 0, p = 0; l < num_launches; p += launches[l++].num_groups) {
    if (!launch_scatters(&launches[l], &plans[p])) continue;
    pack_launch(&launches[l], &plans[p], launches[l].inline_packet);
    launches[l].packet_kind = CLBT_PACKET_INLINE;
    launches[l].packet_version = version;
  }
  return CLBT_SUCCESS;
}

/*
 * Plans every group's commit, and where each launch's part of the packet
 * starts (packet_at); nothing is enqueued when one cannot go.
 */
static clbt_status plan_commit(clbt__launch *launches, uint32_t num_launches,
                               uint32_t num_reqs, clbt__commit_plan *plans,
                               size_t *words) {
  *words = 0;
  for (uint32_t l = 0, p = 0; l < num_launches; p += launches[l++].num_groups) {
    size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * launches[l].num_groups;
    for (uint32_t g = 0; g < launches[l].num_groups; ++g) {
      clbt__commit_plan *plan = &plans[p + g];
      clbt_status status = plan_group(launches[l].groups[g], num_reqs, plan);
      if (status) return status;
      plan->packet_at = part;
      if (plan->mode == CLBT_COMMIT_SCATTER)
        part += (size_t)packet_words(plan->pending.rows, plan->pending.cells);
    }
    launches[l].packet_at = *words;
    if (launch_scatters(&launches[l], &plans[p])) *words += part;
  }
  return CLBT_SUCCESS;
}

/* What a commit that enqueued everything leaves: synced rows unlisted. */
static void settle(clbt_table *group, const clbt__commit_plan *plan) {
  group->device_stale = false;
  if (plan->mode == CLBT_COMMIT_AUTO) {
    group->last_commit = (clbt_commit_info){CLBT_COMMIT_AUTO, 0, 0};
    return;
  }
  if (plan->mode == CLBT_COMMIT_SCATTER)
    group->last_commit = (clbt_commit_info){
        CLBT_COMMIT_SCATTER, plan->pending.rows,
        packet_words(plan->pending.rows, plan->pending.cells) *
            sizeof(uint32_t)};
  unlist_committed(&group->changes, plan->rows);
}

/* Marks every group stale: after a failure, or a packet that never
   arrived, the changes no longer say what differs. */
static void mark_stale(clbt__launch *launches, uint32_t num_launches) {
  for (uint32_t l = 0; l < num_launches; ++l)
    for (uint32_t g = 0; g < launches[l].num_groups; ++g)
      launches[l].groups[g]->device_stale = true;
}

clbt_status clbt__commit(clbt__launch *launches, uint32_t num_launches,
                         uint32_t num_reqs, bool fold,
                         clbt__sequence *sequence, clbt__staging **folded) {
  clbt_multi_table *engine = launches[0].groups[0]->engine;
  clbt__commit_plan *plans = engine->commit_plans;
  bool upload_failed = false;
  size_t words = 0;
  *folded = NULL;
  clbt_status status = clbt__staging_reap(&engine->staging, &upload_failed);
  if (status) return status;
  /* The pool is the engine's: any of its groups may have lost a packet. */
  if (upload_failed) mark_stale(engine->launches, engine->num_launches);
  status = plan_commit(launches, num_launches, num_reqs, plans, &words);
  /* Every kernel first, so that a failure to make one enqueues nothing. */
  for (uint32_t l = 0, p = 0; !status && l < num_launches;
       p += launches[l++].num_groups)
    if (launch_scatters(&launches[l], &plans[p]) &&
        !folds(&launches[l], &plans[p], fold))
      status = clbt__launch_scatter(&launches[l]);
  if (status) return status;
  uint32_t version = clbt__next_version(launches[0].groups[0]);
  for (uint32_t l = 0, p = 0; !status && l < num_launches; ++l)
    for (uint32_t g = 0; !status && g < launches[l].num_groups; ++g, ++p)
      if (plans[p].mode == CLBT_COMMIT_WHOLE)
        status = commit_whole(launches[l].groups[g], plans[p].rows, version,
                              sequence);
  if (!status && words > 0 &&
      all_inline(launches, num_launches, plans, words, fold))
    status = commit_inline(launches, num_launches, plans, version, folded);
  else if (!status && words > 0)
    status = commit_scatters(launches, num_launches, plans, words, version,
                             fold, sequence, folded);
  if (status) {
    clbt__unfold(launches, num_launches);
    mark_stale(launches, num_launches);
    return status;
  }
  for (uint32_t l = 0, p = 0; l < num_launches; ++l)
    for (uint32_t g = 0; g < launches[l].num_groups; ++g, ++p)
      settle(launches[l].groups[g], &plans[p]);
  return CLBT_SUCCESS;
}

void clbt__unfold(clbt__launch *launches, uint32_t num_launches) {
  for (uint32_t l = 0; l < num_launches; ++l) {
    launches[l].packet_kind = CLBT_PACKET_NONE;
    launches[l].packet = NULL;
  }
}

void clbt__commit_lost(clbt__launch *launches, uint32_t num_launches) {
  clbt__unfold(launches, num_launches);
  mark_stale(launches, num_launches);
}
