/*
 * The pure part of planning a call (plan.h): what each launch's step
 * kernel does of the call's work, where its part of the packet goes, and
 * which entry in which record size runs it. Nothing here reads a device,
 * a table or the clock.
 */
#include "engine/plan.h"

/* Each entry's parts, in cl/contract.h's order. */
static const uint32_t entry_parts[CLBT__NUM_ENTRIES] = {
#define ENTRY(NAME, name, parts) [CLBT__ENTRY_##NAME] = parts,
    CLBT_STEP_ENTRIES(ENTRY)
#undef ENTRY
};

uint64_t clbt__scatter_words(uint64_t rows, uint64_t cells) {
  return CLBT_PACKET_ROW_WORDS * rows + cells;
}

size_t clbt__commit_section_words(const clbt__commit_plan *plan) {
  if (plan->mode != CLBT_COMMIT_SCATTER) return 0;
  return (size_t)clbt__scatter_words(plan->pending.rows, plan->pending.cells);
}

uint32_t clbt__record_class(const clbt__launch_shape *shape, size_t words) {
  uint32_t c = 0;
  while (c < shape->num_classes && shape->record_words[c] < words) ++c;
  return c;
}

/* The entry whose parts hold work's: the first in cl/contract.h's order,
   or WHOLE on a GPU, whose program has no other. */
static clbt__entry entry_for(const clbt__launch_shape *shape, uint32_t work) {
  if (shape->tuning->gpu_code) return CLBT__ENTRY_WHOLE;
  uint32_t parts = work & CLBT_WORK_PARTS;
  int e = 0;
  while (e < CLBT__ENTRY_WHOLE && (entry_parts[e] & parts) != parts) ++e;
  return (clbt__entry)e;
}

/* What a launch's step kernel does of the call's work: maps, exports and
   translates token indices only with a group of the call that maps
   tokens, writes state slots only with one that maps none. */
static uint32_t launch_work(const clbt__launch_shape *shape, uint32_t groups,
                            uint32_t work) {
  const uint32_t export = CLBT_WORK_EXPORT | CLBT_WORK_EXPORT_CONTEXT |
                          CLBT_WORK_EXPORT_DENSE;
  if (!(groups & shape->token_groups))
    work &= ~(CLBT_WORK_MAP | export | CLBT_WORK_TOKEN_SLOTS);
  if (!(groups & ~shape->token_groups)) work &= ~CLBT_WORK_STATE_SLOTS;
  return work;
}

/* Places the sections of the launch's scattering groups in its part: each
   group's counts first, then the sections in group order. */
static void plan_part(const clbt__launch_shape *shape,
                      clbt__commit_plan *commits, clbt__launch_plan *share) {
  size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * shape->num_groups;
  bool scatters = false;
  for (uint32_t g = 0; g < shape->num_groups; ++g) {
    if (!(share->groups >> g & 1u)) continue;
    commits[g].packet_at = part;
    part += clbt__commit_section_words(&commits[g]);
    size_t items = commits[g].pending.rows + commits[g].pending.cells;
    if (commits[g].mode == CLBT_COMMIT_SCATTER) {
      scatters = true;
      if (items > share->scatter_items) share->scatter_items = items;
    }
  }
  share->part_words = scatters ? part : 0;
}

static size_t groups_of(size_t items, size_t per_group) {
  return (items + per_group - 1) / per_group;
}

static uint32_t capped(size_t groups, size_t cap) {
  return (uint32_t)(groups < cap ? groups : cap);
}

static uint32_t count_bits(uint32_t bits) {
  uint32_t count = 0;
  for (; bits; bits &= bits - 1) ++count;
  return count;
}

clbt__grid clbt__plan_grid(const clbt__launch_shape *shape,
                           size_t local_size, uint32_t work,
                           uint32_t groups_mask, uint32_t num_tokens,
                           uint32_t padded) {
  const clbt__tuning *tuning = shape->tuning;
  size_t max_tokens = shape->max_num_tokens;
  clbt__grid grid = {0};
  if (!tuning->gpu_code) {
    grid.global_size = clbt__tuning_cpu_groups(tuning, shape->compute_units,
                                               max_tokens * shape->num_groups) *
                       local_size;
    return grid;
  }
  /* A part takes at most part_groups_per_unit per compute unit. */
  size_t cap = (size_t)shape->compute_units * tuning->part_groups_per_unit;
  /* A token a work-item, the pad entries pad_per_item to one. */
  size_t pad_items = groups_of(max_tokens - num_tokens, tuning->pad_per_item);
  if (work & CLBT_WORK_MAP)
    grid.map_groups =
        capped(groups_of(num_tokens + pad_items, local_size), cap);
  if (work & CLBT_WORK_GATHER)
    grid.gather_groups =
        capped(groups_of(padded, tuning->gathered_per_group), cap);
  /* Each exported group takes its own work-groups (cl/export.cl), at least
     one to write its offsets' first entries. */
  if (work & CLBT_WORK_EXPORT) {
    size_t exported = count_bits(groups_mask & shape->token_groups);
    size_t per_group = groups_of(padded, tuning->exported_per_group);
    grid.export_groups = capped((per_group ? per_group : 1) * exported,
                                cap > exported ? cap : exported);
  }
  /* State slots: a work-item per request. */
  if (work & CLBT_WORK_STATE_SLOTS)
    grid.state_groups = capped(groups_of(padded, local_size), cap);
  size_t groups = (size_t)grid.map_groups + grid.gather_groups +
                  grid.export_groups + grid.state_groups;
  grid.global_size = (groups ? groups : 1) * local_size;
  return grid;
}

size_t clbt__plan_items_grid(const clbt__launch_shape *shape,
                             size_t local_size, size_t items) {
  if (!shape->tuning->gpu_code)
    return clbt__tuning_cpu_groups(shape->tuning, shape->compute_units,
                                   items) *
           local_size;
  size_t groups = groups_of(items, local_size);
  return (groups ? groups : 1) * local_size;
}

/*
 * Where a launch's part goes: in a record when it fits, else uploaded; and
 * applied by the launch's step kernel itself (folded) when the launch runs
 * one and the part is small enough for every work-group to apply it (the
 * tuning table's folded_items, and folded_budget for its words times the
 * step's work-groups), else by a scatter launch of its own before it.
 */
static clbt__packet_place place_part(const clbt__launch_shape *shape,
                                     const clbt__launch_plan *share,
                                     uint32_t num_tokens, uint32_t padded) {
  if (share->part_words == 0) return CLBT__PACKET_NONE;
  const clbt__tuning *tuning = shape->tuning;
  clbt__grid grid = clbt__plan_grid(shape, tuning->local_size, share->work,
                                    share->groups, num_tokens, padded);
  uint64_t groups = grid.global_size / tuning->local_size;
  bool foldable = share->work &&
                  share->scatter_items <= tuning->folded_items &&
                  groups * share->part_words <= tuning->folded_budget;
  uint32_t record = clbt__record_class(shape, share->part_words);
  bool fits = shape->has_inline && record < shape->num_classes;
  if (fits) return foldable ? CLBT__PACKET_INLINE : CLBT__PACKET_INLINE_APART;
  return foldable ? CLBT__PACKET_FOLDED : CLBT__PACKET_SCATTERED;
}

bool clbt__plan_uploads(const clbt__launch_plan *share) {
  return share->place == CLBT__PACKET_FOLDED ||
         share->place == CLBT__PACKET_SCATTERED;
}

bool clbt__plan_folds(const clbt__launch_plan *share) {
  return share->place == CLBT__PACKET_INLINE ||
         share->place == CLBT__PACKET_FOLDED;
}

size_t clbt__plan_inline_words(const clbt__launch_plan *share, bool step) {
  bool carries = share->place == (step ? CLBT__PACKET_INLINE
                                       : CLBT__PACKET_INLINE_APART);
  return carries ? share->part_words : 0;
}

void clbt__plan_launch(const clbt__launch_shape *shape, uint32_t groups,
                       uint32_t work, uint32_t num_tokens, uint32_t padded,
                       clbt__commit_plan *commits, clbt__launch_plan *share) {
  *share = (clbt__launch_plan){.groups = groups};
  share->work = launch_work(shape, groups, work);
  if (commits) plan_part(shape, commits, share);
  share->place = place_part(shape, share, num_tokens, padded);
  /* Too costly to fold, or a commit with no step kernel after it. */
  share->scatters = share->place == CLBT__PACKET_SCATTERED ||
                    share->place == CLBT__PACKET_INLINE_APART;
  share->scatter_entry = entry_for(shape, CLBT_WORK_SCATTER);
  share->scatter_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, false));
  share->step_entry = entry_for(shape, share->work);
  share->step_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, true));
}
