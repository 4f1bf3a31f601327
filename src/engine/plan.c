/*
 * The pure part of planning a call (plan.h): what each launch's step
 * kernel does of the call's work, where its part of the packet goes,
 * which entry in which record size runs it on which grid, and the call's
 * commands. Nothing here reads a device, a table or the clock.
 */
#include "engine/plan.h"

#include <stddef.h>
#include <string.h>

/* Each entry's parts, in cl/contract.h's order. */
static const uint32_t entry_parts[CLBT__NUM_ENTRIES] = {
#define ENTRY(NAME, name, parts) [CLBT__ENTRY_##NAME] = parts,
    CLBT_STEP_ENTRIES(ENTRY)
#undef ENTRY
};

uint64_t clbt__scatter_words(uint64_t rows, uint64_t cells) {
  return CLBT_PACKET_ROW_WORDS * rows + cells;
}

/* The words a group's section of its launch's part takes: 0 unless the
   group scatters. */
static size_t section_words(const clbt__commit_plan *plan) {
  if (plan->mode != CLBT_COMMIT_SCATTER) return 0;
  return (size_t)clbt__scatter_words(plan->pending.rows, plan->pending.cells);
}

uint32_t clbt__record_class(const clbt__launch_shape *shape, size_t words) {
  uint32_t c = 0;
  while (c < shape->num_classes && shape->record_words[c] < words) ++c;
  return c;
}

/* The entry whose parts hold work's: a CPU's first in cl/contract.h's
   order, or WHOLE on a GPU, whose program has no other. */
static clbt__entry entry_for(const clbt__launch_shape *shape, uint32_t work) {
  if (shape->tuning->gpu_code) return CLBT__ENTRY_WHOLE;
  uint32_t parts = work & CLBT_WORK_PARTS;
  int e = 0;
  while (e < CLBT__FIRST_GPU_ENTRY && (entry_parts[e] & parts) != parts) ++e;
  return (clbt__entry)e;
}

/* What a launch's step kernel does of the call's work: maps, exports and
   translates token indices only with a group of the call that maps
   tokens, writes state slots only with one that maps none. */
static uint32_t launch_work(const clbt__launch_shape *shape,
                            uint32_t group_mask, uint32_t work) {
  if (!(group_mask & shape->token_group_mask)) work &= ~CLBT__TOKEN_GROUP_WORK;
  if (!(group_mask & ~shape->token_group_mask)) work &= ~CLBT_WORK_STATE_SLOTS;
  return work;
}

/* Places the sections of the launch's scattering groups in its part: each
   group's counts first, then the sections in group order. */
static void plan_part(const clbt__launch_shape *shape,
                      clbt__commit_plan *commits, clbt__launch_plan *share) {
  size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * shape->num_groups;
  bool scatters = false;
  for (uint32_t g = 0; g < shape->num_groups; ++g) {
    if (!(share->group_mask >> g & 1u)) continue;
    commits[g].packet_at = part;
    part += section_words(&commits[g]);
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

static uint32_t capped(size_t work_groups, size_t cap) {
  return (uint32_t)(work_groups < cap ? work_groups : cap);
}

static uint32_t count_bits(uint32_t bits) {
  uint32_t count = 0;
  for (; bits; bits &= bits - 1) ++count;
  return count;
}

clbt__grid clbt__plan_grid(const clbt__launch_shape *shape, size_t local_size,
                           uint32_t work, uint32_t group_mask,
                           uint32_t num_tokens, uint32_t padded) {
  const clbt__tuning *tuning = shape->tuning;
  size_t max_tokens = shape->max_num_tokens;
  clbt__grid grid = {0};
  if (!tuning->gpu_code) {
    grid.global_size = shape->cpu_step_groups * local_size;
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
    size_t exported = count_bits(group_mask & shape->token_group_mask);
    size_t per_group = groups_of(padded, tuning->exported_per_group);
    grid.export_groups = capped((per_group ? per_group : 1) * exported,
                                cap > exported ? cap : exported);
  }
  /* State slots: a work-item per request. */
  if (work & CLBT_WORK_STATE_SLOTS)
    grid.state_groups = capped(groups_of(padded, local_size), cap);
  size_t work_groups = (size_t)grid.map_groups + grid.gather_groups +
                       grid.export_groups + grid.state_groups;
  grid.global_size = (work_groups ? work_groups : 1) * local_size;
  return grid;
}

size_t clbt__plan_items_grid(const clbt__launch_shape *shape,
                             size_t local_size, size_t items) {
  if (!shape->tuning->gpu_code)
    return clbt__tuning_cpu_groups(shape->tuning, shape->compute_units,
                                   items) *
           local_size;
  size_t work_groups = groups_of(items, local_size);
  return (work_groups ? work_groups : 1) * local_size;
}

/*
 * Where a launch's part goes: in a record when it fits, else uploaded; and
 * applied by the launch's step kernel itself (folded) when the launch runs
 * one and the part is small enough for every work-group to apply it (the
 * tuning table's folded_items, and folded_budget for its words times the
 * work-groups of the step kernel that would apply it, on that kernel's
 * work-group size), else by a scatter launch of its own before it.
 */
static clbt__packet_place place_part(const clbt__launch_shape *shape,
                                     const clbt__launch_plan *share,
                                     uint32_t num_tokens, uint32_t padded) {
  if (share->part_words == 0) return CLBT__PACKET_NONE;
  const clbt__tuning *tuning = shape->tuning;
  uint32_t record = clbt__record_class(shape, share->part_words);
  bool fits = shape->has_inline && record < shape->num_classes;
  size_t local = shape->local_sizes[fits ? record : 0];
  clbt__grid grid = clbt__plan_grid(shape, local, share->work,
                                    share->group_mask, num_tokens, padded);
  uint64_t work_groups = grid.global_size / local;
  bool foldable = share->work && share->scatter_items <= tuning->folded_items &&
                  work_groups * share->part_words <= tuning->folded_budget;
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

/* The first half of a launch's share: what its step kernel does and with
   which entry, and its part of the packet. */
static void plan_share(const clbt__launch_shape *shape, uint32_t group_mask,
                       uint32_t work, clbt__commit_plan *commits,
                       clbt__launch_plan *share) {
  *share = (clbt__launch_plan){.group_mask = group_mask};
  share->work = launch_work(shape, group_mask, work);
  if (commits) plan_part(shape, commits, share);
  share->scatter_entry = entry_for(shape, CLBT_WORK_SCATTER);
  share->step_entry = entry_for(shape, share->work);
}

/* Its place, record sizes and step kernel's grid (token slots' comes with
   the scatter's: items_grid). */
static void place_launch(const clbt__launch_shape *shape, uint32_t num_tokens,
                         uint32_t padded, clbt__launch_plan *share) {
  share->place = place_part(shape, share, num_tokens, padded);
  /* Too costly to fold, or a commit with no step kernel after it. */
  share->scatters = share->place == CLBT__PACKET_SCATTERED ||
                    share->place == CLBT__PACKET_INLINE_APART;
  share->scatter_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, false));
  share->step_class =
      clbt__record_class(shape, clbt__plan_inline_words(share, true));
  if (!(share->work & CLBT_WORK_TOKEN_SLOTS))
    share->step_grid =
        clbt__plan_grid(shape, shape->local_sizes[share->step_class],
                        share->work, share->group_mask, num_tokens, padded);
}

/* The slots a launch's WHOLE commits copy their rows into. */
static void list_whole_slots(clbt__call_plan *plan, clbt__launch_part *part) {
  for (uint32_t g = 0; part->commits && g < part->shape->num_groups; ++g) {
    clbt__commit_plan *commit = &part->commits[g];
    if (commit->mode != CLBT_COMMIT_WHOLE || !(part->group_mask >> g & 1u))
      continue;
    commit->whole.slot = &plan->slots[plan->num_slots];
    plan->slot_words[plan->num_slots++] =
        (size_t)commit->rows * (commit->whole.width + 1);
  }
}

/* The grid a launch spreads over items: its token slots' index matrix of
   `entries` entries, or its scatter launch's packet (a call with token
   slots commits nothing). */
static void items_grid(clbt__launch_part *part, size_t entries) {
  const clbt__launch_shape *shape = part->shape;
  clbt__launch_plan *share = &part->share;
  bool tokens = (share->work & CLBT_WORK_TOKEN_SLOTS) != 0;
  if (!tokens && !share->scatters) return;
  size_t global = clbt__plan_items_grid(
      shape, shape->local_sizes[tokens ? share->step_class
                                       : share->scatter_class],
      tokens ? entries : share->scatter_items);
  if (tokens)
    share->step_grid = (clbt__grid){global, 0, 0, 0, 0};
  else
    share->scatter_global = global;
}

void clbt__plan_place(clbt__call_plan *plan) {
  plan->upload_words = 0;
  plan->num_slots = 0;
  for (uint32_t l = 0; l < plan->num_launches; ++l) {
    clbt__launch_part *part = &plan->launches[l];
    clbt__launch_plan *share = &part->share;
    plan_share(part->shape, part->group_mask, plan->work, part->commits, share);
    place_launch(part->shape, plan->num_tokens, plan->padded, share);
    list_whole_slots(plan, part);
    if (!clbt__plan_uploads(share)) continue;
    share->part_at = plan->upload_words;
    plan->upload_words += share->part_words;
  }
  plan->upload = NULL;
  if (plan->upload_words > 0) {
    plan->upload = &plan->slots[plan->num_slots];
    plan->slot_words[plan->num_slots++] = plan->upload_words;
  }
  /* Token slots spread the index matrix's entries. */
  size_t entries = (size_t)plan->num_tokens * plan->head.indices_per_row;
  for (uint32_t l = 0; l < plan->num_launches; ++l)
    items_grid(&plan->launches[l], entries);
}

/* ---- the commands -------------------------------------------------------- */

size_t clbt__record_bytes(size_t words) {
  return offsetof(clbt__launch_record, packet) + words * sizeof(cl_uint);
}

size_t clbt__plan_max_commands(uint32_t num_groups, uint32_t num_launches) {
  /* Each WHOLE commit's two writes and fill, the upload, and each launch's
     scatter launch and step kernel. */
  return 3 * (size_t)num_groups + 1 + 2 * (size_t)num_launches;
}

static clbt__command *next_command(clbt__call_plan *plan) {
  return &plan->commands[plan->num_commands++];
}

/* A WHOLE commit: its slot's cells into its rows, the lengths after them
   into its lengths, and every row's version. */
static void add_whole(clbt__call_plan *plan, const clbt__commit_plan *commit) {
  const clbt__whole_target *to = &commit->whole;
  size_t cells = (size_t)commit->rows * to->width;
  *next_command(plan) = (clbt__command){.kind = CLBT__COMMAND_WRITE,
                                        .buffer = to->rows,
                                        .bytes = cells * sizeof(int32_t),
                                        .slot = to->slot,
                                        .slot_at = 0};
  *next_command(plan) = (clbt__command){.kind = CLBT__COMMAND_WRITE,
                                        .buffer = to->lengths,
                                        .bytes = commit->rows * sizeof(int32_t),
                                        .slot = to->slot,
                                        .slot_at = cells};
  *next_command(plan) = (clbt__command){
      .kind = CLBT__COMMAND_FILL,
      .buffer = to->versions,
      .bytes = to->all_rows * sizeof plan->version,
      .pattern = plan->version};
}

/* Where a record's packet is: in it (its inline words), or in the upload
   when the launch applies an uploaded part. */
static void set_packet(const clbt__launch_plan *share, bool step,
                       clbt__record_head *head) {
  size_t words = clbt__plan_inline_words(share, step);
  bool applies = step ? clbt__plan_folds(share) : share->scatters;
  if (words > 0) {
    head->work |= CLBT_WORK_PACKET_INLINE;
    head->packet_words = (cl_uint)words;
  } else if (applies && clbt__plan_uploads(share)) {
    head->work |= CLBT_WORK_PACKET_IN_BUFFER;
    head->packet_at_low = (cl_uint)share->part_at;
    head->packet_at_high = (cl_uint)((uint64_t)share->part_at >> 32);
  }
}

/* A record's head, with the packet words past what the call packs into it
   zeroed: those the last call left nonzero. */
static const clbt__launch_record *fill_record(clbt__record *record,
                                              const clbt__record_head *head) {
  size_t words = head->work & CLBT_WORK_PACKET_INLINE ? head->packet_words : 0;
  if (record->dirty_words > words)
    memset(record->sent.packet + words, 0,
           (record->dirty_words - words) * sizeof(cl_uint));
  record->dirty_words = words;
  record->sent.head = *head;
  return &record->sent;
}

/* The upload's buffer, for a launch that applies an uploaded part. */
static void bind_upload(const clbt__call_plan *plan, bool applies,
                        const clbt__launch_plan *share,
                        clbt__launch_call *call) {
  if (!applies || !clbt__plan_uploads(share)) return;
  call->buffers[CLBT__BOUND_PACKET] = plan->upload->buffer;
  call->serials[CLBT__BOUND_PACKET] = plan->upload->buffer_serial;
}

static void add_scatter(clbt__call_plan *plan, const clbt__launch_part *part) {
  const clbt__launch_plan *share = &part->share;
  clbt__record_head head = {0};
  head.version_low = (cl_uint)plan->version;
  head.version_high = (cl_uint)(plan->version >> 32);
  head.work = CLBT_WORK_SCATTER;
  head.group_mask = share->group_mask;
  set_packet(share, false, &head);
  clbt__launch_call call = {
      .launch = part->index,
      .entry = share->scatter_entry,
      .record_class = share->scatter_class,
      .record = fill_record(part->scatter_record, &head),
      .record_bytes = clbt__record_bytes(
          part->shape->record_words[share->scatter_class]),
      .global_size = share->scatter_global,
      .local_size = part->shape->local_sizes[share->scatter_class]};
  bind_upload(plan, true, share, &call);
  *next_command(plan) =
      (clbt__command){.kind = CLBT__COMMAND_LAUNCH, .launch = call};
}

/* The work a step kernel's record asks: its share's, and the batch's
   flags (the call's head: an idx_mapping, seq_lens given) its parts
   read. */
static uint32_t step_work(const clbt__call_plan *plan,
                          const clbt__launch_plan *share) {
  uint32_t work = share->work | (plan->head.work & CLBT_WORK_IDX_MAPPING);
  if (share->work & (CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS))
    work |= plan->head.work & CLBT_WORK_SEQ_LENS;
  return work;
}

static void add_step(clbt__call_plan *plan, const clbt__launch_part *part) {
  const clbt__launch_plan *share = &part->share;
  clbt__record_head head = plan->head;
  head.version_low = (cl_uint)plan->version;
  head.version_high = (cl_uint)(plan->version >> 32);
  head.work = step_work(plan, share);
  head.group_mask = share->group_mask;
  if (head.work & CLBT_WORK_TOKEN_SLOTS)
    head.token_section = part->token_section;
  head.map_groups = share->step_grid.map_groups;
  head.gather_groups = share->step_grid.gather_groups;
  head.export_groups = share->step_grid.export_groups;
  head.state_groups = share->step_grid.state_groups;
  set_packet(share, true, &head);
  clbt__launch_call call = {
      .launch = part->index,
      .entry = share->step_entry,
      .record_class = share->step_class,
      .record = fill_record(part->step_record, &head),
      .record_bytes =
          clbt__record_bytes(part->shape->record_words[share->step_class]),
      .global_size = share->step_grid.global_size,
      .local_size = part->shape->local_sizes[share->step_class]};
  /* The batch's buffers its parts read, NULL for the others; token slots'
     in the arguments of those they do not read (cl/contract.h). */
  bool tokens = (head.work & CLBT_WORK_TOKEN_SLOTS) != 0;
  const int from[CLBT__BOUND_PACKET] = {
      [CLBT__BOUND_QUERY_START_LOC] = CLBT__BATCH_QUERY_START_LOC,
      [CLBT__BOUND_POSITIONS] =
          tokens ? CLBT__BATCH_TOKEN_INDICES : CLBT__BATCH_POSITIONS,
      [CLBT__BOUND_IDX_MAPPING] = CLBT__BATCH_IDX_MAPPING,
      [CLBT__BOUND_SEQ_LENS] =
          tokens ? CLBT__BATCH_TOKEN_SLOTS
          : head.work & CLBT_WORK_SEQ_LENS ? CLBT__BATCH_SEQ_LENS
                                           : -1};
  for (int b = 0; b < CLBT__BOUND_PACKET; ++b)
    if (from[b] >= 0) {
      call.buffers[b] = plan->batch[from[b]];
      call.serials[b] = plan->serials[from[b]];
    }
  bind_upload(plan, clbt__plan_folds(share), share, &call);
  *next_command(plan) =
      (clbt__command){.kind = CLBT__COMMAND_LAUNCH, .launch = call};
}

void clbt__plan_commands(clbt__call_plan *plan) {
  plan->num_commands = 0;
  for (uint32_t l = 0; l < plan->num_launches; ++l) {
    const clbt__launch_part *part = &plan->launches[l];
    for (uint32_t g = 0; part->commits && g < part->shape->num_groups; ++g)
      if (part->commits[g].mode == CLBT_COMMIT_WHOLE &&
          (part->share.group_mask >> g & 1u))
        add_whole(plan, &part->commits[g]);
  }
  if (plan->upload_words > 0)
    *next_command(plan) = (clbt__command){
        .kind = CLBT__COMMAND_WRITE,
        .buffer = plan->upload->buffer,
        .bytes = plan->upload_words * sizeof(uint32_t),
        .slot = plan->upload,
        .slot_at = 0};
  for (uint32_t l = 0; l < plan->num_launches; ++l) {
    const clbt__launch_part *part = &plan->launches[l];
    if (part->share.scatters) add_scatter(plan, part);
    if (part->share.work) add_step(plan, part);
  }
}
