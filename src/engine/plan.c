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
                      clbt__commit_plan *commits, clbt__launch_plan *plan) {
  size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * shape->num_groups;
  bool scatters = false;
  for (uint32_t g = 0; g < shape->num_groups; ++g) {
    if (!(plan->groups >> g & 1u)) continue;
    commits[g].packet_at = part;
    part += clbt__commit_section_words(&commits[g]);
    size_t items = commits[g].pending.rows + commits[g].pending.cells;
    if (commits[g].mode == CLBT_COMMIT_SCATTER) {
      scatters = true;
      if (items > plan->scatter_items) plan->scatter_items = items;
    }
  }
  plan->part_words = scatters ? part : 0;
}

/*
 * Where a launch's part goes: in the record when it fits; applied by the
 * launch's step kernel when the launch runs one and the part is small;
 * else uploaded and scattered by a launch of its own.
 */
static clbt__packet_place place_part(const clbt__launch_shape *shape,
                                     const clbt__launch_plan *plan) {
  if (plan->part_words == 0) return CLBT__PACKET_NONE;
  bool small = plan->scatter_items <= shape->tuning->folded_items;
  bool fits = shape->has_inline &&
              clbt__record_class(shape, plan->part_words) < shape->num_classes;
  if (fits && (small || plan->work == 0)) return CLBT__PACKET_INLINE;
  return plan->work && small ? CLBT__PACKET_FOLDED : CLBT__PACKET_SCATTERED;
}

bool clbt__plan_uploads(const clbt__launch_plan *plan) {
  return plan->place == CLBT__PACKET_FOLDED ||
         plan->place == CLBT__PACKET_SCATTERED;
}

size_t clbt__plan_inline_words(const clbt__launch_plan *plan, bool step) {
  bool carries = plan->place == CLBT__PACKET_INLINE &&
                 (step ? plan->work != 0 : !plan->work);
  return carries ? plan->part_words : 0;
}

void clbt__plan_launch(const clbt__launch_shape *shape, uint32_t groups,
                       uint32_t work, clbt__commit_plan *commits,
                       clbt__launch_plan *out) {
  *out = (clbt__launch_plan){.groups = groups};
  out->work = launch_work(shape, groups, work);
  if (commits) plan_part(shape, commits, out);
  out->place = place_part(shape, out);
  /* Too large to fold, or a commit with no step kernel after it. */
  out->scatters = out->place == CLBT__PACKET_SCATTERED ||
                  (out->place == CLBT__PACKET_INLINE && !out->work);
  out->scatter_entry = entry_for(shape, CLBT_WORK_SCATTER);
  out->scatter_class =
      clbt__record_class(shape, clbt__plan_inline_words(out, false));
  out->step_entry = entry_for(shape, out->work);
  out->step_class =
      clbt__record_class(shape, clbt__plan_inline_words(out, true));
}
