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

/*
 * A packet that every work-group of a step kernel applies on its own
 * (cl/step.cl) when it has at most this many items a group: a few dozen
 * passes of a work-group at most, cheaper than a scatter launch of its own
 * (a step in which 1 request in 64 leaves and a new one takes its row
 * moves about 4,700 ids at 1024 requests).
 */
#define CLBT__FOLDED_ITEMS 8192

/* One call's plan; its arrays are the engine's scratch. */
typedef struct call_plan {
  const clbt__scope *scope;
  const clbt__call *call;
  clbt__commit_plan *groups;   /* the scope's groups, launch by launch */
  clbt__launch_plan *launches; /* [scope->num_launches] */
  size_t upload_words;
  bool moves;                  /* a group has rows to move */
  clbt__staging upload;        /* taken when upload_words > 0 */
} call_plan;

#define FOR_EACH_LAUNCH(plan, l, p)                                       \
  for (uint32_t l = 0, p = 0; l < (plan)->scope->num_launches;            \
       p += (plan)->scope->launches[l++].num_groups)

/* What a launch's step kernel does of the call's work: maps, exports and
   translates token indices only with a group that maps tokens, writes
   state slots only with one that maps none. */
static uint32_t launch_work(const clbt__launch *launch, uint32_t work) {
  if (!launch->maps_tokens)
    work &= ~(CLBT_WORK_MAP | CLBT_WORK_EXPORT | CLBT_WORK_TOKEN_SLOTS);
  if (!launch->holds_states) work &= ~CLBT_WORK_STATE_SLOTS;
  return work;
}

/* Plans the groups of one launch: their modes and sections of its part. */
static clbt_status plan_commits(const clbt__launch *launch, uint32_t rows,
                                clbt__commit_plan *groups,
                                clbt__launch_plan *out, bool *moves) {
  size_t part = CLBT_PACKET_HEADER_WORDS_PER_GROUP * launch->num_groups;
  bool scatters = false;
  for (uint32_t g = 0; g < launch->num_groups; ++g) {
    clbt_status status =
        clbt__commit_plan_group(launch->groups[g], rows, &groups[g]);
    if (status) return status;
    groups[g].packet_at = part;
    part += clbt__commit_section_words(&groups[g]);
    size_t items = groups[g].pending.rows + groups[g].pending.cells;
    if (groups[g].mode == CLBT_COMMIT_SCATTER) {
      scatters = true;
      if (items > out->scatter_items) out->scatter_items = items;
    }
    *moves = *moves || groups[g].mode != CLBT_COMMIT_AUTO;
  }
  out->part_words = scatters ? part : 0;
  return CLBT_SUCCESS;
}

/*
 * Where a launch's part goes: in the record when it fits; applied by the
 * launch's step kernel when the launch runs one and the part is small;
 * else uploaded and scattered by a launch of its own.
 */
static clbt__packet_place place_part(const clbt__launch *launch,
                                     const clbt__launch_plan *part) {
  if (part->part_words == 0) return CLBT__PACKET_NONE;
  bool small = part->scatter_items <= CLBT__FOLDED_ITEMS;
  bool fits = launch->inline_words > 1 &&
              part->part_words <= launch->inline_words;
  if (fits && (small || part->work == 0)) return CLBT__PACKET_INLINE;
  return part->work && small ? CLBT__PACKET_FOLDED : CLBT__PACKET_SCATTERED;
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

/* Builds what each launch runs: its step kernel, its scatter kernel. */
static clbt_status build_kernels(const call_plan *plan) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; l < plan->scope->num_launches; ++l) {
    clbt__launch *launch = &plan->scope->launches[l];
    const clbt__launch_plan *share = &plan->launches[l];
    if (!status && (share->work || share->place != CLBT__PACKET_NONE))
      status = clbt__launch_build(launch);
    if (!status && scatters_alone(share))
      status = clbt__launch_build_scatter(launch);
  }
  return status;
}

/* Plans each launch's share of the call: its commit's groups, where its
   packet part goes. */
static clbt_status plan_launches(call_plan *plan) {
  const clbt__call *call = plan->call;
  clbt_status status = CLBT_SUCCESS;
  plan->upload_words = 0;
  plan->moves = false;
  FOR_EACH_LAUNCH(plan, l, p) {
    clbt__launch *launch = &plan->scope->launches[l];
    clbt__launch_plan *share = &plan->launches[l];
    *share = (clbt__launch_plan){CLBT__PACKET_NONE, 0, 0, 0,
                                 launch_work(launch, call->work)};
    /* A call that does not commit moves nothing. */
    for (uint32_t g = 0; !call->commits && g < launch->num_groups; ++g)
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
    for (uint32_t g = 0; g < plan->scope->launches[l].num_groups; ++g)
      whole = whole || plan->groups[p + g].mode == CLBT_COMMIT_WHOLE;
  }
  return whole || plan->upload_words > 0;
}

/*
 * Plans a call: nothing is enqueued, and a failure changes nothing but
 * what reaping found. Staging slots are reaped only by a call that takes
 * one, so that a step whose packet travels in its launch makes no other
 * driver call; when reaping finds an upload that never arrived, the groups
 * are stale and the call is planned again, WHOLE.
 */
static clbt_status plan_call(call_plan *plan) {
  const clbt__scope *scope = plan->scope;
  bool commits = plan->call->commits;
  clbt_status status =
      commits ? clbt__commit_reap(scope->engine, false) : CLBT_SUCCESS;
  if (!status) status = plan_launches(plan);
  if (!status && commits && stages(plan)) {
    bool stale = scope->first->device_stale;
    status = clbt__commit_reap(scope->engine, true);
    if (!status && !stale && scope->first->device_stale)
      status = plan_launches(plan);
  }
  if (!status) status = build_kernels(plan);
  if (!status && plan->upload_words > 0)
    status = clbt__staging_acquire(&scope->engine->staging,
                                   scope->first->device->context,
                                   plan->upload_words, true, &plan->upload);
  return status;
}

/* ---- enqueueing a plan -------------------------------------------------- */

/* A record for a launch: its work and batch, and the version its packet's
   rows get. */
static void start_record(clbt__launch_record *record, uint32_t work,
                         const clbt__batch *batch, uint64_t version) {
  record->version_low = (cl_uint)version;
  record->version_high = (cl_uint)(version >> 32);
  record->packet_at_low = record->packet_at_high = 0;
  record->work = work;
  record->num_reqs = batch ? batch->num_reqs : 0;
  record->num_tokens = batch ? batch->num_tokens : 0;
  record->padded_reqs = !batch                  ? 0
                        : batch->num_reqs_padded ? batch->num_reqs_padded
                                                 : batch->num_reqs;
  record->dense_pitch = batch ? batch->dense_row_pitch : 0;
  record->state_slots = batch ? batch->num_state_slots : 0;
  record->state_null_block = batch ? (cl_uint)batch->state_null_block : 0;
  record->indices_per_row = batch ? batch->indices_per_row : 0;
  record->token_section = 0;
}

/* The record carries the launch's part of the packet: in itself, or where
   it starts in the upload. */
static void add_packet(clbt__launch_record *record, const call_plan *plan,
                       uint32_t l, uint32_t p) {
  const clbt__launch_plan *share = &plan->launches[l];
  if (share->place == CLBT__PACKET_INLINE) {
    record->work |= CLBT_WORK_PACKET_INLINE;
    clbt__commit_pack(&plan->scope->launches[l], &plan->groups[p],
                      record->packet);
  } else if (uploads(share->place)) {
    record->work |= CLBT_WORK_PACKET_IN_BUFFER;
    record->packet_at_low = (cl_uint)share->part_at;
    record->packet_at_high = (cl_uint)((uint64_t)share->part_at >> 32);
  }
}

/* The WHOLE commits, then the upload of every part that needs one. */
static clbt_status enqueue_writes(call_plan *plan, uint64_t version,
                                  clbt__sequence *sequence) {
  clbt_status status = CLBT_SUCCESS;
  FOR_EACH_LAUNCH(plan, l, p) {
    const clbt__launch *launch = &plan->scope->launches[l];
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

/* One launch's share: a scatter of its own, then its step kernel. */
static clbt_status enqueue_launch(const call_plan *plan, uint32_t l, uint32_t p,
                                  uint64_t version, cl_mem packet,
                                  clbt__sequence *sequence) {
  clbt__launch *launch = &plan->scope->launches[l];
  const clbt__launch_plan *share = &plan->launches[l];
  const clbt__batch *batch = &plan->call->batch;
  clbt__launch_record record;
  clbt_status status = CLBT_SUCCESS;
  if (scatters_alone(share)) {
    start_record(&record, CLBT_WORK_SCATTER, NULL, version);
    add_packet(&record, plan, l, p);
    clbt__launch_call scatter = {
        &record, {[CLBT__BOUND_PACKET] = uploads(share->place) ? packet : NULL},
        clbt__launch_items_grid(launch, share->scatter_items)};
    status = clbt__launch_enqueue(launch, &launch->scatter, &scatter, sequence);
  }
  if (status || !share->work) return status;
  uint32_t work = share->work;
  bool tokens = work & CLBT_WORK_TOKEN_SLOTS;
  if (batch->idx_mapping) work |= CLBT_WORK_IDX_MAPPING;
  if (batch->seq_lens && (work & (CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS)))
    work |= CLBT_WORK_SEQ_LENS;
  if (work & CLBT_WORK_EXPORT) work |= clbt__export_work(batch);
  start_record(&record, work, batch, version);
  if (tokens) record.token_section = clbt__token_sections_before(plan->scope, l);
  if (share->place != CLBT__PACKET_SCATTERED) add_packet(&record, plan, l, p);
  size_t entries = (size_t)batch->num_tokens * batch->indices_per_row;
  clbt__launch_call step = {
      &record,
      {[CLBT__BOUND_QUERY_START_LOC] = batch->query_start_loc,
       [CLBT__BOUND_POSITIONS] = batch->positions,
       [CLBT__BOUND_IDX_MAPPING] = batch->idx_mapping,
       [CLBT__BOUND_SEQ_LENS] = work & CLBT_WORK_SEQ_LENS ? batch->seq_lens
                                                           : NULL,
       [CLBT__BOUND_TOKEN_INDICES] = tokens ? batch->token_indices : NULL,
       [CLBT__BOUND_TOKEN_SLOTS] = tokens ? batch->token_slots : NULL,
       [CLBT__BOUND_PACKET] =
           share->place == CLBT__PACKET_FOLDED ? packet : NULL},
      tokens ? clbt__launch_items_grid(launch, entries)
             : clbt__launch_grid(launch, work, record.padded_reqs)};
  return clbt__launch_enqueue(launch, &launch->step, &step, sequence);
}

/* Marks every group of a scope stale: what it lost is unknown. */
static void mark_stale(const clbt__scope *scope) {
  for (uint32_t l = 0; l < scope->num_launches; ++l)
    for (uint32_t g = 0; g < scope->launches[l].num_groups; ++g)
      scope->launches[l].groups[g]->device_stale = true;
}

static clbt_status enqueue_plan(call_plan *plan, clbt__sequence *sequence) {
  uint64_t version =
      plan->moves ? clbt__next_version(plan->scope->engine) : 0;
  cl_mem packet = plan->upload.buffer;
  clbt_status status = enqueue_writes(plan, version, sequence);
  FOR_EACH_LAUNCH(plan, l, p) {
    if (!status)
      status = enqueue_launch(plan, l, p, version, packet, sequence);
  }
  if (status) {
    /* A commit whose commands are partly queued leaves rows unknown. */
    if (plan->call->commits && sequence->commands > 0)
      mark_stale(plan->scope);
    return status;
  }
  FOR_EACH_LAUNCH(plan, l, p) {
    for (uint32_t g = 0; plan->call->commits &&
                         g < plan->scope->launches[l].num_groups;
         ++g)
      clbt__commit_settle(plan->scope->launches[l].groups[g],
                          &plan->groups[p + g]);
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
