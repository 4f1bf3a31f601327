/*
 * One layer's paged attention over a batch (attention_launch.h): the
 * checks and the plan (attention_checks.c), then whatever the plan needs
 * made (the kernels of a cache's alignment, a larger scratch) before
 * anything is enqueued, then the kernels, one sequence after the wait
 * list.
 */
#include "kv/attention_launch.h"

#include "base/status.h"
#include "device/queue.h"
#include "kv/attention_checks.h"

/* The splits' scratch, at least `floats` large: a new buffer replaces a
   smaller one (OpenCL frees the old one once the commands that use it
   end). */
static clbt_status grow_partials(clbt_attention *attention, uint64_t floats) {
  if (floats <= attention->partial_floats) return CLBT_SUCCESS;
  cl_int error = CL_SUCCESS;
  cl_mem grown = clCreateBuffer(attention->device->context, CL_MEM_READ_WRITE,
                                (size_t)floats * sizeof(float), NULL, &error);
  if (error) return clbt__cl_fail(error, "clCreateBuffer");
  if (attention->partials) clReleaseMemObject(attention->partials);
  attention->partials = grown;
  attention->partial_floats = floats;
  return CLBT_SUCCESS;
}

/* Sets every argument of a kernel: a launch's arguments are few, and set
   again each time, so that no kernel keeps a buffer a caller let go. */
static clbt_status set_arguments(cl_kernel kernel,
                                 const clbt__attention_launch *launch) {
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clSetKernelArg(kernel, CLBT_ATT_ARGUMENT_ARGUMENTS,
                              sizeof launch->arguments, &launch->arguments),
               status, done);
  for (cl_uint i = CLBT_ATT_ARGUMENT_ARGUMENTS + 1;
       i < CLBT_ATT_NUM_ARGUMENTS; ++i)
    CLBT__CL_TRY(clSetKernelArg(kernel, i, sizeof(cl_mem),
                                &launch->buffers[i]),
                 status, done);
done:
  return status;
}

/* The plan's kernels, in order, on the sequence. */
static clbt_status enqueue(clbt__sequence *sequence,
                           const clbt__attention_kernels *k,
                           const clbt__attention_launch *launch) {
  const clbt__attention_plan *plan = &launch->plan;
  cl_kernel first = plan->tiles ? k->tiles : k->decode;
  size_t local = plan->tiles ? k->shape.tile_local : k->shape.local;
  clbt_status status = set_arguments(first, launch);
  if (!status)
    status = clbt__sequence_kernel(sequence, first,
                                   (size_t)plan->groups * local, local);
  if (!status && plan->splits > 1) {
    status = set_arguments(k->reduce, launch);
    if (!status)
      status = clbt__sequence_kernel(
          sequence, k->reduce,
          (size_t)plan->reduce_groups * k->shape.reduce_local,
          k->shape.reduce_local);
  }
  return status;
}

clbt_status clbt__attention_enqueue(clbt_attention *attention,
                                    const clbt_kv_cache *cache,
                                    const clbt_attention_batch *batch,
                                    const clbt__table_view *table,
                                    cl_uint num_events,
                                    const cl_event *wait_list,
                                    cl_event *event) {
  clbt__attention_launch launch;
  clbt_status status =
      clbt__attention_check(attention, cache, batch, table, &launch);
  if (!status)
    status = clbt__check_wait_list(attention->device, "attention", num_events,
                                   wait_list);
  bool work = !status && batch->num_tokens > 0;
  if (work)
    status = clbt__attention_make_kernels(
        attention, launch.kernels,
        launch.kernels == CLBT__ATT_SINGLE ? 1u : UINT32_MAX);
  if (work && !status)
    status = grow_partials(attention, launch.plan.partial_floats);
  if (status) return status;
  launch.buffers[CLBT_ATT_ARGUMENT_PARTIALS] =
      launch.plan.splits > 1 ? attention->partials : NULL;
  clbt__sequence sequence = clbt__sequence_start(
      attention->device, num_events, wait_list, event != NULL);
  if (work)
    status = enqueue(&sequence, &attention->kernels[launch.kernels], &launch);
  return clbt__sequence_end(&sequence, status, event);
}
