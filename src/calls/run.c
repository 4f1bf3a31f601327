/*
 * The call runner (run.h): every device call of the engine, planned once
 * and enqueued once. A commit, a slot mapping, an export, the serving step
 * and token slots are all a call (clbt__call) on a scope, which the call
 * builders make. A call is planned first (every group's commit,
 * where each launch's part of the packet goes, which kernels run, every
 * kernel built and the upload's slot taken), so that a failure before the
 * first enqueue enqueues nothing; then its plan is enqueued as one
 * sequence: the WHOLE commits' writes, at most one upload, and per launch
 * at most a scatter and one step kernel. A steady step, whose packet fits
 * the step kernel's record, is one launch. Nothing of a call stays on the
 * tables, groups or launches but what it committed.
 */
#include "calls/run.h"

#include "device/handle.h"
#include "device/queue.h"
#include "engine/commit.h"
#include "engine/engine.h"
#include "engine/group.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/staging.h"

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

/*
 * Plans each launch's share of the call: its groups' commits (the scope's
 * groups of a call that commits; the others move nothing), then the pure
 * plan of its work, packet part and kernels (plan.c), and where its part
 * starts in the call's one upload.
 */
static clbt_status plan_launches(call_plan *plan) {
  const clbt__call *call = plan->call;
  clbt_status status = CLBT_SUCCESS;
  plan->upload_words = 0;
  plan->moves = false;
  FOR_EACH_LAUNCH(plan, l, p) {
    const clbt__launch *launch = &plan->scope->engine->launches[l];
    clbt__commit_plan *commits = &plan->groups[p];
    clbt__launch_plan *share = &plan->launches[l];
    uint32_t groups = clbt__scope_groups(plan->scope, l);
    for (uint32_t g = 0; g < launch->shape.num_groups; ++g) {
      commits[g] = (clbt__commit_plan){CLBT_COMMIT_AUTO, 0, {0, 0}, 0};
      if (!status && call->commits && (groups >> g & 1u))
        status = clbt__commit_plan_group(launch->groups[g], call->commit_rows,
                                         &commits[g]);
      plan->moves = plan->moves || commits[g].mode != CLBT_COMMIT_AUTO;
    }
    const clbt__batch *batch = &call->batch;
    clbt__plan_launch(&launch->shape, groups, call->work, batch->num_tokens,
                      batch->num_reqs_padded ? batch->num_reqs_padded
                                             : batch->num_reqs,
                      call->commits ? commits : NULL, share);
    if (clbt__plan_uploads(share)) {
      share->part_at = plan->upload_words;
      plan->upload_words += share->part_words;
    }
  }
  return status;
}

/* Makes what each launch runs: its scatter kernel, its step kernel, each
   the entry of its work in the record size of its packet. */
static clbt_status build_kernels(call_plan *plan) {
  clbt_status status = CLBT_SUCCESS;
  FOR_EACH_LAUNCH(plan, l, p) {
    clbt__launch *launch = &plan->scope->engine->launches[l];
    const clbt__launch_plan *share = &plan->launches[l];
    clbt__kernel *made = NULL;
    if (!status && share->scatters)
      status = clbt__launch_kernel(launch, share->scatter_entry,
                                   share->scatter_class, &made);
    if (!status && share->work)
      status = clbt__launch_kernel(launch, share->step_entry,
                                   share->step_class, &made);
  }
  return status;
}

/* Whether a plan takes staging slots: an upload, or a WHOLE commit. */
static bool stages(const call_plan *plan) {
  bool whole = false;
  FOR_EACH_LAUNCH(plan, l, p) {
    uint32_t groups = plan->scope->engine->launches[l].shape.num_groups;
    for (uint32_t g = 0; g < groups; ++g)
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
  if (share->place == CLBT__PACKET_INLINE ||
      share->place == CLBT__PACKET_INLINE_APART) {
    record->head.work |= CLBT_WORK_PACKET_INLINE;
    clbt__commit_pack(&plan->scope->engine->launches[l], &plan->groups[p],
                      record->packet);
    packed = share->part_words;
    record->head.packet_words = (cl_uint)packed;
  } else if (clbt__plan_uploads(share)) {
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
    for (uint32_t g = 0; !status && g < launch->shape.num_groups; ++g)
      if (plan->groups[p + g].mode == CLBT_COMMIT_WHOLE)
        status = clbt__commit_whole(launch->groups[g],
                                    plan->groups[p + g].rows, version,
                                    sequence);
    if (clbt__plan_uploads(&plan->launches[l]))
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
   optional inputs. */
static uint32_t step_work(uint32_t work, const clbt__batch *batch) {
  if (batch->idx_mapping) work |= CLBT_WORK_IDX_MAPPING;
  if (batch->seq_lens && (work & (CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS)))
    work |= CLBT_WORK_SEQ_LENS;
  return work;
}

/* A launch's scatter of its own: its packet over the whole grid. */
static clbt_status enqueue_scatter(const call_plan *plan, uint32_t l,
                                   uint32_t p, uint64_t version,
                                   cl_mem packet, clbt__sequence *sequence) {
  clbt__launch *launch = &plan->scope->engine->launches[l];
  const clbt__launch_plan *share = &plan->launches[l];
  clbt__launch_record *record = plan->scope->engine->record;
  record->head =
      record_head(CLBT_WORK_SCATTER, share->groups, NULL, version);
  add_packet(record, plan, l, p,
             launch->shape.record_words[share->scatter_class]);
  clbt__kernel *kernel =
      &launch->kernels[share->scatter_entry][share->scatter_class];
  bool uploads = clbt__plan_uploads(share);
  clbt__launch_call scatter = {
      kernel,
      share->scatter_class,
      record,
      {[CLBT__BOUND_PACKET] = uploads ? packet : NULL},
      {[CLBT__BOUND_PACKET] = uploads ? plan->upload.buffer_serial : 0},
      clbt__plan_items_grid(&launch->shape, kernel->local_size,
                            share->scatter_items)};
  return clbt__launch_enqueue(launch, &scatter, sequence);
}

/* The serials of the records that hold a step's buffers: the engine's
   known buffers (the checks recorded every batch buffer of the call), the
   upload's slot (device/bound_buffer.h). */
static void add_serials(const call_plan *plan, clbt__launch_call *step) {
  const clbt__known_buffers *known = &plan->scope->engine->known;
  for (int b = 0; b < CLBT__NUM_BOUND; ++b)
    step->serials[b] = clbt__known_buffer_serial(known, step->buffers[b]);
  if (step->buffers[CLBT__BOUND_PACKET])
    step->serials[CLBT__BOUND_PACKET] = plan->upload.buffer_serial;
}

/* A launch's step kernel: its share of the call's work. */
static clbt_status enqueue_step(const call_plan *plan, uint32_t l, uint32_t p,
                                uint64_t version, cl_mem packet,
                                clbt__sequence *sequence) {
  clbt__launch *launch = &plan->scope->engine->launches[l];
  const clbt__launch_plan *share = &plan->launches[l];
  const clbt__batch *batch = &plan->call->batch;
  clbt__kernel *kernel =
      &launch->kernels[share->step_entry][share->step_class];
  clbt__launch_record *record = plan->scope->engine->record;
  uint32_t work = step_work(share->work, batch);
  bool tokens = work & CLBT_WORK_TOKEN_SLOTS;
  record->head = record_head(work, share->groups, batch, version);
  if (tokens)
    record->head.token_section = clbt__token_sections_before(plan->scope, l);
  size_t words = launch->shape.record_words[share->step_class];
  if (clbt__plan_folds(share))
    add_packet(record, plan, l, p, words);
  else
    memset(record->packet, 0, words * sizeof *record->packet);
  size_t entries = (size_t)batch->num_tokens * batch->indices_per_row;
  clbt__grid grid = {0};
  if (tokens)
    grid.global_size = clbt__plan_items_grid(&launch->shape,
                                             kernel->local_size, entries);
  else
    grid = clbt__plan_grid(&launch->shape, kernel->local_size, work,
                           share->groups, batch->num_tokens,
                           record->head.padded_reqs);
  record->head.map_groups = grid.map_groups;
  record->head.gather_groups = grid.gather_groups;
  record->head.export_groups = grid.export_groups;
  record->head.state_groups = grid.state_groups;
  clbt__launch_call step = {
      kernel,
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
      {0},
      grid.global_size};
  add_serials(plan, &step);
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
    if (!status && plan->launches[l].scatters)
      status = enqueue_scatter(plan, l, p, version, packet, sequence);
    if (!status && plan->launches[l].work)
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
    for (uint32_t g = 0; plan->call->commits && g < launch->shape.num_groups;
         ++g)
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
