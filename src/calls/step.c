/*
 * Every device call of the engine, planned once and enqueued once: a
 * commit, a slot mapping, an export and the serving step are all a call
 * (clbt__call) on a scope. A call is planned first (every group's commit,
 * where each launch's part of the packet goes, which kernels run, every
 * kernel built and the upload's slot taken), so that a failure before the
 * first enqueue enqueues nothing; then its plan is enqueued as one
 * sequence: the WHOLE commits' writes, at most one upload, and per launch
 * at most a scatter and one step kernel. A steady step, whose packet fits
 * the step kernel's record, is one launch. Nothing of a call stays on the
 * tables, groups or launches but what it committed.
 */
#include "engine.h"

#include <string.h>

/* One call's plan; its arrays are the engine's scratch. */
typedef struct call_plan {
  const clbt__scope *scope;
  const clbt__call *call;
  clbt__commit_plan *groups;   /* the engine's groups, launch by launch */
  clbt__launch_plan *launches; /* the engine's launches */
  size_t upload_words;
  bool moves;                  /* a group has rows to move */
  clbt__staging upload;        /* taken when upload_words > 0 */
} call_plan;

/* The scope's launches l, with p the engine's index of each one's first
   group. */
#define FOR_EACH_LAUNCH(plan, l, p)                                        \
  for (uint32_t l = clbt__scope_first_launch((plan)->scope),               \
                p = l * CLBT__MAX_LAUNCH_GROUPS;                           \
       l < clbt__scope_end_launch((plan)->scope);                          \
       ++l, p += CLBT__MAX_LAUNCH_GROUPS)

static bool takes_part(const clbt__launch_plan *share, uint32_t g) {
  return (share->groups >> g & 1u) != 0;
}

/* What a launch's step kernel does of the call's work: maps, exports and
   translates token indices only with a group of the scope that maps
   tokens, writes state slots only with one that maps none. */
static uint32_t launch_work(const clbt__launch *launch,
                            const clbt__launch_plan *share, uint32_t work) {
  bool maps = false, holds_states = false;
  for (uint32_t g = 0; g < launch->num_groups; ++g) {
    if (!takes_part(share, g)) continue;
    maps = maps || clbt__maps_tokens(launch->groups[g]);
    holds_states = holds_states || !clbt__maps_tokens(launch->groups[g]);
  }
  if (!maps)
    work &= ~(CLBT_WORK_MAP | CLBT_WORK_EXPORT | CLBT_WORK_TOKEN_SLOTS);
  if (!holds_states) work &= ~CLBT_WORK_STATE_SLOTS;
  return work;
}

/* Plans the scope's groups of one launch: their modes and sections of its
   part; the others move nothing. */
static clbt_status plan_commits(const clbt__launch *launch, uint32_t rows,
                                clbt__commit_plan *groups,
                                clbt__launch_plan *share, bool *moves) {
  size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * launch->num_groups;
  bool scatters = false;
  for (uint32_t g = 0; g < launch->num_groups; ++g) {
    if (!takes_part(share, g)) continue;
    clbt_status status =
        clbt__commit_plan_group(launch->groups[g], rows, &groups[g]);
    if (status) return status;
    groups[g].packet_at = part;
    part += clbt__commit_section_words(&groups[g]);
    size_t items = groups[g].pending.rows + groups[g].pending.cells;
    if (groups[g].mode == CLBT_COMMIT_SCATTER) {
      scatters = true;
      if (items > share->scatter_items) share->scatter_items = items;
    }
    *moves = *moves || groups[g].mode != CLBT_COMMIT_AUTO;
  }
  share->part_words = scatters ? part : 0;
  return CLBT_SUCCESS;
}

/*
 * Where a launch's part goes: in the record when it fits; applied by the
 * launch's step kernel when the launch runs one and the part is small;
 * else uploaded and scattered by a launch of its own.
 */
static clbt__packet_place place_part(const clbt__launch *launch,
                                     const clbt__launch_plan *share) {
  if (share->part_words == 0) return CLBT__PACKET_NONE;
  bool small = share->scatter_items <= launch->tuning->folded_items;
  bool fits = launch->has_inline &&
              clbt__record_class(launch, share->part_words) <
                  launch->num_classes;
  if (fits && (small || share->work == 0)) return CLBT__PACKET_INLINE;
  return share->work && small ? CLBT__PACKET_FOLDED : CLBT__PACKET_SCATTERED;
}

static bool uploads(clbt__packet_place place) {
  return place == CLBT__PACKET_FOLDED || place == CLBT__PACKET_SCATTERED;
}

/* Whether a launch's part is applied by a scatter launch of its own: too
   large to fold, or a commit with no step kernel after it. */
static bool scatters_alone(const clbt__launch_plan *share) {
  return share->place == CLBT__PACKET_SCATTERED ||
         (share->place == CLBT__PACKET_INLINE && !share->work);
}

/* The words of the record a kernel of the launch carries: its inline part,
   or none. */
static size_t inline_words(const clbt__launch_plan *share, bool step) {
  bool carries = share->place == CLBT__PACKET_INLINE &&
                 (step ? share->work != 0 : !share->work);
  return carries ? share->part_words : 0;
}

/* Makes what each launch runs: its scatter kernel, its step kernel, each
   the entry of its work in the record size of its packet. */
static clbt_status build_kernels(call_plan *plan) {
  clbt_status status = CLBT_SUCCESS;
  FOR_EACH_LAUNCH(plan, l, p) {
    clbt__launch *launch = &plan->scope->engine->launches[l];
    clbt__launch_plan *share = &plan->launches[l];
    share->step = share->scatter = NULL;
    share->scatter_class = clbt__record_class(launch, inline_words(share, false));
    share->step_class = clbt__record_class(launch, inline_words(share, true));
    if (!status && scatters_alone(share))
      status = clbt__launch_kernel(
          launch, clbt__entry_for(launch, CLBT_WORK_SCATTER),
          share->scatter_class, &share->scatter);
    if (!status && share->work)
      status = clbt__launch_kernel(launch,
                                   clbt__entry_for(launch, share->work),
                                   share->step_class, &share->step);
  }
  return status;
}

/* Plans each launch's share of the call: its groups, its commit's groups,
   where its packet part goes. */
static clbt_status plan_launches(call_plan *plan) {
  const clbt__call *call = plan->call;
  clbt_status status = CLBT_SUCCESS;
  plan->upload_words = 0;
  plan->moves = false;
  FOR_EACH_LAUNCH(plan, l, p) {
    clbt__launch *launch = &plan->scope->engine->launches[l];
    clbt__launch_plan *share = &plan->launches[l];
    *share = (clbt__launch_plan){.groups = clbt__scope_groups(plan->scope, l)};
    share->work = launch_work(launch, share, call->work);
    /* A call that does not commit moves nothing. */
    for (uint32_t g = 0; g < launch->num_groups; ++g)
      plan->groups[p + g] = (clbt__commit_plan){CLBT_COMMIT_AUTO, 0, {0, 0}, 0};
    if (!status && call->commits)
      status = plan_commits(launch, call->commit_rows, &plan->groups[p],
                            share, &plan->moves);
    share->place = place_part(launch, share);
    if (uploads(share->place)) {
      share->part_at = plan->upload_words;
      plan->upload_words += share->part_words;
    }
  }
  return status;
}

/* Whether a plan takes staging slots: an upload, or a WHOLE commit. */
static bool stages(const call_plan *plan) {
  bool whole = false;
  FOR_EACH_LAUNCH(plan, l, p) {
    for (uint32_t g = 0; g < plan->scope->engine->launches[l].num_groups; ++g)
      whole = whole || plan->groups[p + g].mode == CLBT_COMMIT_WHOLE;
  }
  return whole || plan->upload_words > 0;
}

/*
 * Plans a call: nothing is enqueued, and a failure changes nothing but
 * what reaping found. Staging slots are reaped only by a call that takes
 * one, so that a step whose packet travels in its launch makes no other
 * driver call; when reaping finds an upload that never arrived, every
 * group is stale and the call is planned again, WHOLE.
 */
static clbt_status plan_call(call_plan *plan) {
  const clbt__scope *scope = plan->scope;
  bool commits = plan->call->commits, lost = false;
  clbt_status status =
      commits ? clbt__commit_reap(scope->engine, false, NULL) : CLBT_SUCCESS;
  if (!status) status = plan_launches(plan);
  if (!status && commits && stages(plan)) {
    status = clbt__commit_reap(scope->engine, true, &lost);
    if (!status && lost) status = plan_launches(plan);
  }
  if (!status) status = build_kernels(plan);
  if (!status && plan->upload_words > 0)
    status = clbt__staging_acquire(&scope->engine->staging,
                                   scope->first->device->context,
                                   plan->upload_words, true, &plan->upload);
  return status;
}

/* ---- enqueueing a plan -------------------------------------------------- */

/* A record's head for a launch: its work, groups and batch, and the
   version its packet's rows get. */
static clbt_record_head record_head(uint32_t work, uint32_t groups,
                                    const clbt__batch *batch,
                                    uint64_t version) {
  clbt_record_head head = {0};
  head.version_low = (cl_uint)version;
  head.version_high = (cl_uint)(version >> 32);
  head.work = work;
  head.groups = groups;
  if (!batch) return head;
  head.num_reqs = batch->num_reqs;
  head.num_tokens = batch->num_tokens;
  head.padded_reqs =
      batch->num_reqs_padded ? batch->num_reqs_padded : batch->num_reqs;
  head.dense_pitch = batch->dense_row_pitch;
  head.state_slots = batch->num_state_slots;
  head.state_null_block = (cl_uint)batch->state_null_block;
  head.indices_per_row = batch->indices_per_row;
  return head;
}

/*
 * The record carries the launch's part of the packet: in itself, packed
 * and the rest of its size zeroed (every byte it sends is set), or where
 * it starts in the upload.
 */
static void add_packet(clbt__launch_record *record, const call_plan *plan,
                       uint32_t l, uint32_t p, size_t record_words) {
  const clbt__launch_plan *share = &plan->launches[l];
  size_t packed = 0;
  if (share->place == CLBT__PACKET_INLINE) {
    record->head.work |= CLBT_WORK_PACKET_INLINE;
    clbt__commit_pack(&plan->scope->engine->launches[l], &plan->groups[p],
                      record->packet);
    packed = share->part_words;
    record->head.packet_words = (cl_uint)packed;
  } else if (uploads(share->place)) {
    record->head.work |= CLBT_WORK_PACKET_IN_BUFFER;
    record->head.packet_at_low = (cl_uint)share->part_at;
    record->head.packet_at_high = (cl_uint)((uint64_t)share->part_at >> 32);
  }
  memset(record->packet + packed, 0,
         (record_words - packed) * sizeof *record->packet);
}

/* The WHOLE commits, then the upload of every part that needs one. */
static clbt_status enqueue_writes(call_plan *plan, uint64_t version,
                                  clbt__sequence *sequence) {
  clbt_status status = CLBT_SUCCESS;
  FOR_EACH_LAUNCH(plan, l, p) {
    const clbt__launch *launch = &plan->scope->engine->launches[l];
    for (uint32_t g = 0; !status && g < launch->num_groups; ++g)
      if (plan->groups[p + g].mode == CLBT_COMMIT_WHOLE)
        status = clbt__commit_whole(launch->groups[g],
                                    plan->groups[p + g].rows, version,
                                    sequence);
    if (uploads(plan->launches[l].place))
      clbt__commit_pack(launch, &plan->groups[p],
                        plan->upload.packet + plan->launches[l].part_at);
  }
  if (plan->upload_words == 0) return status;
  clbt__staging_pool *pool = &plan->scope->engine->staging;
  cl_event read = NULL;
  if (!status)
    status = clbt__sequence_write(sequence, plan->upload.buffer, 0,
                                  plan->upload_words * sizeof(uint32_t),
                                  plan->upload.packet, &read);
  if (read)
    clbt__staging_submit(pool, &plan->upload, read);
  else
    clbt__staging_return(pool, &plan->upload);
  return status;
}

/* The work bits a launch's step kernel adds to its share's: the batch's
   optional inputs and the export's parts. */
static uint32_t step_work(uint32_t work, const clbt__batch *batch) {
  if (batch->idx_mapping) work |= CLBT_WORK_IDX_MAPPING;
  if (batch->seq_lens && (work & (CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS)))
    work |= CLBT_WORK_SEQ_LENS;
  if (work & CLBT_WORK_EXPORT) work |= clbt__export_work(batch);
  return work;
}

/* A launch's scatter of its own: its packet over the whole grid. */
static clbt_status enqueue_scatter(const call_plan *plan, uint32_t l,
                                   uint32_t p, uint64_t version,
                                   cl_mem packet, clbt__sequence *sequence) {
  const clbt__launch *launch = &plan->scope->engine->launches[l];
  const clbt__launch_plan *share = &plan->launches[l];
  clbt__launch_record *record = plan->scope->engine->record;
  record->head =
      record_head(CLBT_WORK_SCATTER, share->groups, NULL, version);
  add_packet(record, plan, l, p, launch->record_words[share->scatter_class]);
  clbt__launch_call scatter = {
      share->scatter,
      share->scatter_class,
      record,
      {[CLBT__BOUND_PACKET] = uploads(share->place) ? packet : NULL},
      clbt__launch_items_grid(launch, share->scatter, share->scatter_items)};
  return clbt__launch_enqueue(launch, &scatter, sequence);
}

/* A launch's step kernel: its share of the call's work. */
static clbt_status enqueue_step(const call_plan *plan, uint32_t l, uint32_t p,
                                uint64_t version, cl_mem packet,
                                clbt__sequence *sequence) {
  const clbt__launch *launch = &plan->scope->engine->launches[l];
  const clbt__launch_plan *share = &plan->launches[l];
  const clbt__batch *batch = &plan->call->batch;
  clbt__launch_record *record = plan->scope->engine->record;
  uint32_t work = step_work(share->work, batch);
  bool tokens = work & CLBT_WORK_TOKEN_SLOTS;
  record->head = record_head(work, share->groups, batch, version);
  if (tokens)
    record->head.token_section = clbt__token_sections_before(plan->scope, l);
  if (share->place != CLBT__PACKET_SCATTERED)
    add_packet(record, plan, l, p, launch->record_words[share->step_class]);
  else
    memset(record->packet, 0,
           launch->record_words[share->step_class] * sizeof *record->packet);
  size_t entries = (size_t)batch->num_tokens * batch->indices_per_row;
  clbt__launch_call step = {
      share->step,
      share->step_class,
      record,
      {[CLBT__BOUND_QUERY_START_LOC] = batch->query_start_loc,
       [CLBT__BOUND_POSITIONS] = batch->positions,
       [CLBT__BOUND_IDX_MAPPING] = batch->idx_mapping,
       [CLBT__BOUND_SEQ_LENS] = work & CLBT_WORK_SEQ_LENS ? batch->seq_lens
                                                           : NULL,
       [CLBT__BOUND_TOKEN_INDICES] = tokens ? batch->token_indices : NULL,
       [CLBT__BOUND_TOKEN_SLOTS] = tokens ? batch->token_slots : NULL,
       [CLBT__BOUND_PACKET] =
           share->place == CLBT__PACKET_FOLDED ? packet : NULL},
      tokens ? clbt__launch_items_grid(launch, share->step, entries)
             : clbt__launch_grid(launch, share->step, work, share->groups,
                                 batch->num_tokens, record->head.padded_reqs)};
  return clbt__launch_enqueue(launch, &step, sequence);
}

/* Marks every group of a scope stale: what it lost is unknown. */
static void mark_stale(const clbt__scope *scope) {
  for (uint32_t g = scope->begin; g < scope->end; ++g)
    scope->engine->groups[g]->device_stale = true;
}

static clbt_status enqueue_plan(call_plan *plan, clbt__sequence *sequence) {
  uint64_t version =
      plan->moves ? clbt__next_version(plan->scope->engine) : 0;
  cl_mem packet = plan->upload.buffer;
  clbt_status status = enqueue_writes(plan, version, sequence);
  FOR_EACH_LAUNCH(plan, l, p) {
    if (!status && plan->launches[l].scatter)
      status = enqueue_scatter(plan, l, p, version, packet, sequence);
    if (!status && plan->launches[l].step)
      status = enqueue_step(plan, l, p, version, packet, sequence);
  }
  if (status) {
    /* A commit whose commands are partly queued leaves rows unknown. */
    if (plan->call->commits && sequence->commands > 0)
      mark_stale(plan->scope);
    return status;
  }
  FOR_EACH_LAUNCH(plan, l, p) {
    const clbt__launch *launch = &plan->scope->engine->launches[l];
    for (uint32_t g = 0; plan->call->commits && g < launch->num_groups; ++g)
      if (takes_part(&plan->launches[l], g))
        clbt__commit_settle(launch->groups[g], &plan->groups[p + g]);
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__run(const clbt__scope *scope, const clbt__call *call,
                      cl_uint num_events, const cl_event *wait_list,
                      cl_event *event) {
  call_plan plan = {scope, call, scope->engine->commit_plans,
                    scope->engine->launch_plans, 0, false, {0}};
  clbt__sequence sequence = clbt__sequence_start(
      scope->first->device, num_events, wait_list, event != NULL);
  clbt_status status = plan_call(&plan);
  if (status) {
    if (plan.upload.packet) clbt__staging_return(&scope->engine->staging,
                                                 &plan.upload);
    return status;
  }
  status = enqueue_plan(&plan, &sequence);
  return clbt__sequence_end(&sequence, status, event);
}

/* ---- the public calls --------------------------------------------------- */

clbt_status clbt__enqueue_commit(const clbt__scope *scope, uint32_t num_reqs,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event) {
  clbt_status status = clbt__check_batch(scope->first, num_reqs, 0);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, num_events,
                                   wait_list);
  if (status) return status;
  const clbt__call call = {.commits = true, .commit_rows = num_reqs};
  return clbt__run(scope, &call, num_events, wait_list, event);
}

clbt_status clbt__enqueue_slot_mapping(const clbt__scope *scope,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event) {
  clbt_status status = clbt__check_batch_arguments(scope->first, batch,
                                                   num_events, wait_list);
  if (status) return status;
  const clbt__call call = {.work = CLBT_WORK_MAP, .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}

clbt_status clbt__enqueue_export(const clbt__scope *scope,
                                 const clbt__batch *batch, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = clbt__check_export(scope, batch, "request->flags",
                                          num_events, wait_list);
  if (status) return status;
  const clbt__call call = {.work = CLBT_WORK_EXPORT, .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}

/*
 * The step's batch: its slot mapping's, gather's, export's and state
 * slots' (seq_lens only for the last two). A dummy run reads no buffer of
 * the caller's.
 */
static clbt__batch batch_of(const clbt_step *step) {
  bool dummy = step->flags & CLBT_STEP_DUMMY;
  bool lengths = step->flags & (CLBT_STEP_EXPORT | CLBT_STEP_STATE_SLOTS);
  return (clbt__batch){
      .num_reqs = step->num_reqs,
      .query_start_loc = dummy ? NULL : step->query_start_loc,
      .positions = dummy ? NULL : step->positions,
      .num_tokens = step->num_tokens,
      .num_reqs_padded = step->num_reqs_padded,
      .seq_lens = lengths && !dummy ? step->seq_lens : NULL,
      .idx_mapping = dummy ? NULL : step->idx_mapping,
      .export_flags = step->export_flags,
      .dense_row_pitch = step->dense_row_pitch,
      .num_state_slots = step->num_state_slots ? step->num_state_slots : 1,
      .state_null_block = step->state_null_block};
}

/* The export's flags and pitch ask for parts of an export. */
static clbt_status check_step_export(const clbt_step *step,
                                     const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_EXPORT)
    return clbt__check_export_flags(batch, "step->export_flags");
  if (step->export_flags || step->dense_row_pitch)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->export_flags 0x%x and dense_row_pitch %u are set "
                      "without CLBT_STEP_EXPORT",
                      (unsigned)step->export_flags,
                      (unsigned)step->dense_row_pitch);
  return CLBT_SUCCESS;
}

/* The state slots' count and null block ask for state slots. */
static clbt_status check_step_state_slots(const clbt__scope *scope,
                                          const clbt_step *step,
                                          const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_STATE_SLOTS)
    return clbt__check_state_slots(scope, batch->num_state_slots);
  if (step->num_state_slots || step->state_null_block)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->num_state_slots %u and state_null_block %d are "
                      "set without CLBT_STEP_STATE_SLOTS",
                      (unsigned)step->num_state_slots,
                      (int)step->state_null_block);
  return CLBT_SUCCESS;
}

/* A dummy run has no requests and no tokens, only padding. */
static clbt_status check_dummy(const clbt__scope *scope,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list) {
  if (batch->num_reqs || batch->num_tokens)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "a CLBT_STEP_DUMMY step has num_reqs %u and num_tokens "
                      "%u; both must be 0",
                      (unsigned)batch->num_reqs, (unsigned)batch->num_tokens);
  clbt_status status = clbt__check_padding(scope->first, "num_reqs_padded", 0,
                                           batch->num_reqs_padded);
  return status ? status
                : clbt__check_wait_list(scope->first->device, num_events,
                                        wait_list);
}

/* The step's checks, each made once. */
static clbt_status check_step(const clbt__scope *scope, const clbt_step *step,
                              const clbt__batch *batch, cl_uint num_events,
                              const cl_event *wait_list) {
  clbt_status status = clbt__check_step_flags(step->flags, true);
  if (!status) status = check_step_export(step, batch);
  if (!status) status = check_step_state_slots(scope, step, batch);
  if (status) return status;
  if (step->flags & CLBT_STEP_DUMMY) {
    bool exports = step->flags & CLBT_STEP_EXPORT;
    if (exports) status = clbt__check_export_target(scope);
    if (!status) status = check_dummy(scope, batch, num_events, wait_list);
    if (!status && exports) status = clbt__check_export_groups(scope, batch);
    return status;
  }
  if (step->flags & CLBT_STEP_EXPORT)
    return clbt__check_export(scope, batch, "step->export_flags", num_events,
                              wait_list);
  return clbt__check_batch_arguments(scope->first, batch, num_events,
                                     wait_list);
}

clbt_status clbt__enqueue_step(const clbt__scope *scope, const clbt_step *given,
                               cl_uint num_events, const cl_event *wait_list,
                               cl_event *event) {
  clbt_step step;
  clbt_status status = clbt__step_read(given, &step);
  if (status) return status;
  const clbt__batch batch = batch_of(&step);
  status = check_step(scope, &step, &batch, num_events, wait_list);
  if (status) return status;
  bool dummy = step.flags & CLBT_STEP_DUMMY;
  const clbt__call call = {
      .commits = !dummy,
      .commit_rows = scope->first->layout.max_num_reqs,
      .work = CLBT_WORK_MAP |
              (step.flags & CLBT_STEP_GATHER ? CLBT_WORK_GATHER : 0) |
              (step.flags & CLBT_STEP_EXPORT ? CLBT_WORK_EXPORT : 0) |
              (step.flags & CLBT_STEP_STATE_SLOTS ? CLBT_WORK_STATE_SLOTS
                                                   : 0),
      .batch = batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
