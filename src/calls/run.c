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
#include "engine/engine_internal.h"
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
static clbt__record_head batch_head(const clbt__batch *batch) {
  clbt__record_head head = {0};
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

/*
 * What the plan starts from: the batch, its buffers and the serials of
 * the records holding them (the checks recorded every one among the
 * engine's known buffers); the scope's launches, each with the scope's
 * groups in it, its groups' commit plans, its records and where its token
 * slots' output starts; and, for a call that commits, the version the rows
 * it moves get (the versions are 64-bit: one skipped costs nothing).
 */
static void gather(runner *r) {
  const clbt__scope *scope = r->scope;
  clbt__engine *engine = scope->engine;
  const clbt__batch *batch = &r->call->batch;
  clbt__call_plan *plan = &r->plan;
  plan->work = r->call->work;
  plan->num_tokens = batch->num_tokens;
  plan->head = batch_head(batch);
  plan->padded = plan->head.padded_reqs;
  plan->slots = engine->slots;
  plan->slot_words = engine->slot_words;
  plan->commands = engine->commands;
  uint32_t first = clbt__scope_first_launch(scope);
  plan->launches = engine->launch_parts;
  plan->num_launches = clbt__scope_end_launch(scope) - first;
  for (uint32_t i = 0; i < plan->num_launches; ++i) {
    uint32_t l = first + i;
    clbt__launch *launch = &engine->launches[l];
    clbt__commit_plan *commits =
        &engine->commit_plans[l * CLBT__MAX_LAUNCH_GROUPS];
    plan->launches[i] = (clbt__launch_part){
        .index = l,
        .shape = &launch->shape,
        .group_mask = clbt__scope_group_mask(scope, l),
        .token_section = clbt__token_sections_before(scope, l),
        .commits = r->call->commits ? commits : NULL,
        .step_record = launch->step_record,
        .scatter_record = launch->scatter_record};
  }
  plan->version = r->call->commits ? clbt__engine_next_version(engine) : 0;
  const cl_mem buffers[CLBT__NUM_BATCH_BUFFERS] = {
      [CLBT__BATCH_QUERY_START_LOC] = batch->query_start_loc,
      [CLBT__BATCH_POSITIONS] = batch->positions,
      [CLBT__BATCH_IDX_MAPPING] = batch->idx_mapping,
      [CLBT__BATCH_SEQ_LENS] = batch->seq_lens,
      [CLBT__BATCH_TOKEN_INDICES] = batch->token_indices,
      [CLBT__BATCH_TOKEN_SLOTS] = batch->token_slots};
  for (int b = 0; b < CLBT__NUM_BATCH_BUFFERS; ++b) {
    plan->batch[b] = buffers[b];
    plan->serials[b] = clbt__known_buffer_serial(&engine->known, buffers[b]);
  }
}

/*
 * Plans a call, to its list of commands. Staging slots are reaped only by
 * a call that commits: a call that moves no rows makes no driver call
 * before its commands. Reaping comes first, so that a group whose upload
 * never arrived is planned stale, WHOLE. Slots taken before a failure are
 * given back.
 */
static clbt_status plan_call(runner *r) {
  const clbt__scope *scope = r->scope;
  clbt__engine *engine = scope->engine;
  clbt__call_plan *plan = &r->plan;
  gather(r);
  clbt_status status =
      r->call->commits
          ? clbt__commit_plan_groups(engine, scope->begin, scope->end,
                                     r->call->commit_rows,
                                     engine->commit_plans)
          : CLBT_SUCCESS;
  for (uint32_t l = 0; !status && l < plan->num_launches; ++l)
    status = clbt__launch_ready(&engine->launches[plan->launches[l].index],
                                plan->work, plan->launches[l].commits);
  if (status) return status;
  clbt__plan_place(plan);
  cl_context context = scope->first->device->context;
  for (uint32_t s = 0; !status && s < plan->num_slots; ++s) {
    clbt__staging *slot = &plan->slots[s];
    status = clbt__staging_acquire(&engine->staging, context,
                                   plan->slot_words[s], slot == plan->upload,
                                   slot);
    if (!status) r->num_slots = s + 1;
  }
  for (uint32_t s = 0; status && s < r->num_slots; ++s)
    clbt__staging_return(&engine->staging, &plan->slots[s]);
  if (status) return status;
  for (uint32_t l = 0; l < plan->num_launches; ++l)
    clbt__commit_pack(&engine->launches[plan->launches[l].index],
                      &plan->launches[l],
                      plan->upload ? plan->upload->packet : NULL);
  clbt__plan_commands(plan);
  return CLBT_SUCCESS;
}

/* ---- enqueueing the commands -------------------------------------------- */

/*
 * Enqueues the commands in order as one sequence after the wait list. A
 * write takes its slot's packet from its word on; the slot keeps the event
 * of the last write that reads it, and lives until that write ends (the
 * queue is in order: the writes before it have ended too).
 */
static clbt_status enqueue_commands(runner *r, clbt__sequence *sequence) {
  clbt__engine *engine = r->scope->engine;
  const clbt__call_plan *plan = &r->plan;
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t i = 0; !status && i < plan->num_commands; ++i) {
    const clbt__command *command = &plan->commands[i];
    clbt__staging *slot = command->slot;
    cl_event read = NULL;
    if (command->kind == CLBT__COMMAND_WRITE)
      status = clbt__sequence_write(sequence, command->buffer, 0,
                                    command->bytes,
                                    slot->packet + command->slot_at, &read);
    else if (command->kind == CLBT__COMMAND_FILL)
      status = clbt__sequence_fill(sequence, command->buffer,
                                   &command->pattern, sizeof command->pattern,
                                   0, command->bytes);
    else
      status = clbt__launch_enqueue(&engine->launches[command->launch.launch],
                                    &command->launch, sequence);
    if (!read) continue;
    if (slot->reader) clReleaseEvent(slot->reader);
    slot->reader = read;
  }
  for (uint32_t s = 0; s < r->num_slots; ++s) {
    clbt__staging *slot = &plan->slots[s];
    if (slot->reader)
      clbt__staging_submit(&engine->staging, slot, slot->reader);
    else
      clbt__staging_return(&engine->staging, slot);
  }
  return status;
}

/* ---- settling ------------------------------------------------------------ */

/*
 * What the call's commits leave on the scope's groups: what they moved,
 * once every command was enqueued; after a failure, when a command was
 * enqueued, the groups stale (what they lost is unknown).
 */
static void settle(runner *r, clbt_status status,
                   const clbt__sequence *sequence) {
  const clbt__scope *scope = r->scope;
  if (!r->call->commits) return;
  for (uint32_t g = scope->begin; status && g < scope->end; ++g)
    scope->groups[g]->device_stale |= sequence->commands > 0;
  for (uint32_t l = 0; !status && l < r->plan.num_launches; ++l) {
    const clbt__launch_part *part = &r->plan.launches[l];
    const clbt__launch *launch = &scope->engine->launches[part->index];
    for (uint32_t g = 0; g < part->shape->num_groups; ++g)
      if (part->group_mask >> g & 1u)
        clbt__commit_settle(launch->groups[g], &part->commits[g]);
  }
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
  settle(&r, status, &sequence);
  return clbt__sequence_end(&sequence, status, event);
}
