/*
 * The call runner (run.h): every device call of the engine in three
 * passes. A commit, a slot mapping, an export, the serving step and token
 * slots are all a call (clbt__call) on a scope, which the call builders
 * make.
 *
 *   plan     decides everything, with host work alone: reaps what ended
 *            (commit.c); plans each group's commit (commit.c) and each
 *            launch's share (plan.c); readies the kernels the launches
 *            that run need (launch.c); places each launch's part of the
 *            packet and sizes every grid on those kernels' work-groups
 *            (plan.c); takes every staging slot (staging.c); packs the
 *            parts and copies the WHOLE commits' rows (commit.c); and ends
 *            with the call's commands (plan.c). A failure here enqueues
 *            nothing and changes nothing but what reaping found.
 *   enqueue  walks the commands through the queue as one sequence after
 *            the wait list: writes and fills (device/queue.c) and launches
 *            (launch.c), then hands each slot its last reader (staging.c).
 *            It decides nothing.
 *   settle   leaves what the commit moved on its groups (commit.c); a call
 *            that failed once a command was enqueued leaves them stale.
 *
 * A steady step, whose packet fits the step kernel's record, is one
 * launch. Nothing of a call stays on the tables, groups or launches but
 * what it committed and the records it sent.
 */
#include "calls/run.h"

#include "device/known_buffers.h"
#include "device/queue.h"
#include "engine/commit.h"
#include "engine/engine.h"
#include "engine/group.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/staging.h"

/* A call on its scope, and its plan; the arrays are the engine's scratch. */
typedef struct runner {
  const clbt__scope *scope;
  const clbt__call *call;
  clbt__call_plan plan;
  uint32_t num_slots; /* taken, from the engine's slots on */
} runner;

/* ---- planning ----------------------------------------------------------- */

/* A step record's batch fields, and in its work the batch's optional
   inputs, which the plan gives the launches that read them. */
static clbt_record_head batch_head(const clbt__batch *batch) {
  clbt_record_head head = {0};
  head.num_reqs = batch->num_reqs;
  head.num_tokens = batch->num_tokens;
  head.padded_reqs =
      batch->num_reqs_padded ? batch->num_reqs_padded : batch->num_reqs;
  head.dense_pitch = batch->dense_row_pitch;
  head.state_slots = batch->num_state_slots;
  head.state_null_block = (cl_uint)batch->state_null_block;
  head.indices_per_row = batch->indices_per_row;
  head.work = (batch->idx_mapping ? CLBT_WORK_IDX_MAPPING : 0) |
              (batch->seq_lens ? CLBT_WORK_SEQ_LENS : 0);
  return head;
}

/* The call's plan before its launches are: the batch, its buffers and
   the serials of the records holding them (the checks recorded every one
   among the engine's known buffers). */
static void plan_batch(runner *r) {
  const clbt__batch *batch = &r->call->batch;
  clbt__call_plan *plan = &r->plan;
  plan->work = r->call->work;
  plan->num_tokens = batch->num_tokens;
  plan->head = batch_head(batch);
  plan->padded = plan->head.padded_reqs;
  const cl_mem buffers[CLBT__NUM_BOUND] = {
      [CLBT__BOUND_QUERY_START_LOC] = batch->query_start_loc,
      [CLBT__BOUND_POSITIONS] = batch->positions,
      [CLBT__BOUND_IDX_MAPPING] = batch->idx_mapping,
      [CLBT__BOUND_SEQ_LENS] = batch->seq_lens,
      [CLBT__BOUND_TOKEN_INDICES] = batch->token_indices,
      [CLBT__BOUND_TOKEN_SLOTS] = batch->token_slots};
  const clbt__known_buffers *known = &r->scope->engine->known;
  for (int b = 0; b < CLBT__NUM_BOUND; ++b) {
    plan->buffers[b] = buffers[b];
    plan->serials[b] = clbt__known_buffer_serial(known, buffers[b]);
  }
}

/* The scope's launches as the plan sees them: each with the scope's
   groups in it, its records, and where its token slots' output starts. */
static void plan_launches(runner *r) {
  const clbt__scope *scope = r->scope;
  clbt_multi_table *engine = scope->engine;
  uint32_t first = clbt__scope_first_launch(scope);
  clbt__call_plan *plan = &r->plan;
  plan->launches = engine->launch_parts;
  plan->num_launches = clbt__scope_end_launch(scope) - first;
  for (uint32_t i = 0; i < plan->num_launches; ++i) {
    uint32_t l = first + i;
    clbt__launch *launch = &engine->launches[l];
    plan->launches[i] = (clbt__launch_part){
        .index = l,
        .shape = &launch->shape,
        .groups = clbt__scope_groups(scope, l),
        .token_section = clbt__token_sections_before(scope, l),
        .commits = r->call->commits
                       ? &engine->commit_plans[l * CLBT__MAX_LAUNCH_GROUPS]
                       : NULL,
        .step_record = launch->step_record,
        .scatter_record = launch->scatter_record};
  }
}

/* Each group's commit: the scope's groups planned, the others moving
   nothing; whether any moves. */
static clbt_status plan_commits(runner *r, bool *moves) {
  const clbt__scope *scope = r->scope;
  clbt_multi_table *engine = scope->engine;
  clbt_status status = CLBT_SUCCESS;
  *moves = false;
  for (uint32_t g = 0; g < engine->num_groups; ++g) {
    clbt__commit_plan *commit = &engine->commit_plans[g];
    *commit = (clbt__commit_plan){.mode = CLBT_COMMIT_AUTO};
    if (!status && g >= scope->begin && g < scope->end)
      status = clbt__commit_plan_group(engine->groups[g],
                                       r->call->commit_rows, commit);
    *moves = *moves || commit->mode != CLBT_COMMIT_AUTO;
  }
  return status;
}

/* Takes the slot of every WHOLE commit and of the upload; on a failure,
   gives back those taken. */
static clbt_status take_slots(runner *r) {
  clbt_multi_table *engine = r->scope->engine;
  cl_context context = r->scope->first->device->context;
  clbt__call_plan *plan = &r->plan;
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t l = 0; l < plan->num_launches; ++l) {
    clbt__launch_part *part = &plan->launches[l];
    for (uint32_t g = 0; part->commits && g < part->shape->num_groups; ++g) {
      clbt__commit_plan *commit = &part->commits[g];
      if (status || commit->mode != CLBT_COMMIT_WHOLE ||
          !(part->share.groups >> g & 1u))
        continue;
      commit->whole.slot = &engine->slots[r->num_slots];
      status = clbt__staging_acquire(
          &engine->staging, context,
          (size_t)commit->rows * (commit->whole.width + 1), false,
          commit->whole.slot);
      r->num_slots += !status;
    }
  }
  plan->upload = NULL;
  if (!status && plan->upload_words > 0) {
    plan->upload = &engine->slots[r->num_slots];
    status = clbt__staging_acquire(&engine->staging, context,
                                   plan->upload_words, true, plan->upload);
    r->num_slots += !status;
  }
  for (uint32_t s = 0; status && s < r->num_slots; ++s)
    clbt__staging_return(&engine->staging, &engine->slots[s]);
  return status;
}

/*
 * Plans a call, to its list of commands. Staging slots are reaped only by
 * a call that commits: a call that moves no rows makes no other driver
 * call. Reaping comes first, so that a group whose upload never arrived is
 * planned stale, WHOLE.
 */
static clbt_status plan_call(runner *r) {
  clbt_multi_table *engine = r->scope->engine;
  clbt__call_plan *plan = &r->plan;
  bool commits = r->call->commits, moves = false;
  clbt_status status = commits ? clbt__commit_reap(engine) : CLBT_SUCCESS;
  if (!status && commits) status = plan_commits(r, &moves);
  if (status) return status;
  plan_batch(r);
  plan_launches(r);
  for (uint32_t l = 0; l < plan->num_launches; ++l) {
    clbt__launch_part *part = &plan->launches[l];
    clbt__plan_share(part->shape, part->groups, plan->work, part->commits,
                     &part->share);
  }
  for (uint32_t l = 0; !status && l < plan->num_launches; ++l) {
    const clbt__launch_plan *share = &plan->launches[l].share;
    status = clbt__launch_ready(&engine->launches[plan->launches[l].index],
                                share->work || share->part_words);
  }
  if (status) return status;
  clbt__plan_place(plan);
  plan->version = moves ? clbt__next_version(engine) : 0;
  status = take_slots(r);
  if (status) return status;
  for (uint32_t l = 0; l < plan->num_launches; ++l)
    clbt__commit_pack(&engine->launches[plan->launches[l].index],
                      &plan->launches[l],
                      plan->upload ? plan->upload->packet : NULL);
  plan->commands = engine->commands;
  clbt__plan_commands(plan);
  return CLBT_SUCCESS;
}

/* ---- enqueueing the commands -------------------------------------------- */

/* A write of a slot's words; the slot keeps the event of the last write
   that reads it. */
static clbt_status enqueue_write(const clbt__command *command,
                                 clbt__sequence *sequence) {
  clbt__staging *slot = command->slot;
  cl_event read = NULL;
  clbt_status status =
      clbt__sequence_write(sequence, command->buffer, 0, command->bytes,
                           slot->packet + command->slot_at, &read);
  if (status) return status;
  if (slot->reader) clReleaseEvent(slot->reader);
  slot->reader = read;
  return CLBT_SUCCESS;
}

static clbt_status enqueue_commands(runner *r, clbt__sequence *sequence) {
  clbt_multi_table *engine = r->scope->engine;
  const clbt__call_plan *plan = &r->plan;
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t i = 0; !status && i < plan->num_commands; ++i) {
    const clbt__command *command = &plan->commands[i];
    if (command->kind == CLBT__COMMAND_WRITE)
      status = enqueue_write(command, sequence);
    else if (command->kind == CLBT__COMMAND_FILL)
      status = clbt__sequence_fill(sequence, command->buffer,
                                   &command->pattern, sizeof command->pattern,
                                   0, command->bytes);
    else
      status = clbt__launch_enqueue(&engine->launches[command->launch.launch],
                                    &command->launch, sequence);
  }
  /* A slot lives until the last write that read it ends; the queue is in
     order, so the one before it has ended too. */
  for (uint32_t s = 0; s < r->num_slots; ++s) {
    clbt__staging *slot = &engine->slots[s];
    if (slot->reader)
      clbt__staging_submit(&engine->staging, slot, slot->reader);
    else
      clbt__staging_return(&engine->staging, slot);
  }
  return status;
}

/* ---- settling ------------------------------------------------------------ */

/* What the call's commits leave on the scope's groups. */
static void settle(runner *r) {
  clbt_multi_table *engine = r->scope->engine;
  for (uint32_t l = 0; r->call->commits && l < r->plan.num_launches; ++l) {
    const clbt__launch_part *part = &r->plan.launches[l];
    const clbt__launch *launch = &engine->launches[part->index];
    for (uint32_t g = 0; g < part->shape->num_groups; ++g)
      if (part->groups >> g & 1u)
        clbt__commit_settle(launch->groups[g], &part->commits[g]);
  }
}

/* Marks every group of a scope stale: what it lost is unknown. */
static void mark_stale(const clbt__scope *scope) {
  for (uint32_t g = scope->begin; g < scope->end; ++g)
    scope->engine->groups[g]->device_stale = true;
}

clbt_status clbt__run(const clbt__scope *scope, const clbt__call *call,
                      cl_uint num_events, const cl_event *wait_list,
                      cl_event *event) {
  runner r = {scope, call, {0}, 0};
  clbt_status status = plan_call(&r);
  if (status) return status;
  clbt__sequence sequence = clbt__sequence_start(
      scope->first->device, num_events, wait_list, event != NULL);
  status = enqueue_commands(&r, &sequence);
  if (!status)
    settle(&r);
  else if (call->commits && sequence.commands > 0)
    mark_stale(scope); /* a commit partly queued leaves rows unknown */
  return clbt__sequence_end(&sequence, status, event);
}
