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

/*
 * Where a launch's part goes: in the record when it fits; applied by the
 * launch's step kernel when the launch runs one and the part is small;
 * else uploaded and scattered by a launch of its own.
 */
static clbt__packet_place place_part(const clbt__launch_shape *shape,
                                     const clbt__launch_plan *share) {
  if (share->part_words == 0) return CLBT__PACKET_NONE;
  bool small = share->scatter_items <= shape->tuning->folded_items;
  uint32_t record = clbt__record_class(shape, share->part_words);
  bool fits = shape->has_inline && record < shape->num_classes;
  if (fits && (small || share->work == 0)) return CLBT__PACKET_INLINE;
  return share->work && small ? CLBT__PACKET_FOLDED : CLBT__PACKET_SCATTERED;
}

bool clbt__plan_uploads(const clbt__launch_plan *share) {
  return share->place == CLBT__PACKET_FOLDED ||
         share->place == CLBT__PACKET_SCATTERED;
}

size_t clbt__plan_inline_words(const clbt__launch_plan *share, bool step) {
  bool carries = share->place == CLBT__PACKET_INLINE &&
                 (step ? share->work != 0 : !share->work);
  return carries ? share->part_words : 0;
}

void clbt__plan_launch(const clbt__launch_shape *shape, uint32_t groups,
                       uint32_t work, clbt__commit_plan *commits,
                       clbt__launch_plan *share) {
  *share = (clbt__launch_plan){.groups = groups};
  share->work = launch_work(shape, groups, work);
  if (commits) plan_part(shape, commits, share);
  share->place = place_part(shape, share);
  /* Too large to fold, or a commit with no step kernel after it. */
  share->scatters = share->place == CLBT__PACKET_SCATTERED ||
                    (share->place == CLBT__PACKET_INLINE && !share->work);
  share->scatter_entry = entry_for(shape, CLBT_WORK_SCATTER);
  share->scatter_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, false));
  share->step_entry = entry_for(shape, share->work);
  share->step_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, true));
}
