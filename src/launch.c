/*
 * Launches: the kernels of cl/slot_mapping.cl specialised for 1..8 groups
 * (one table, or eight groups of a multi-group table), the step kernel and
 * the commit scatter, bound to their buffers, with a geometry chosen for
 * the device.
 */
#include "engine.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Kernel arguments before the per-group ones, and per group, by name
   (cl/contract.h lists them). */
enum {
#define ARGUMENT(NAME, type, name) ARG_##NAME,
  CLBT_SLOT_MAPPING_FIRST_ARGUMENT(ARGUMENT)
  CLBT_SLOT_MAPPING_ARGUMENTS(ARGUMENT)
#undef ARGUMENT
  ARGS_BEFORE_GROUPS
};
enum {
#define GROUP_ARGUMENT(g, NAME, type, name) GROUP_ARG_##NAME,
  CLBT_SLOT_MAPPING_GROUP_ARGUMENTS(GROUP_ARGUMENT, 0)
#undef GROUP_ARGUMENT
  ARGS_PER_GROUP
};

/* The group constants in the contract's order, for the -D options. */
static const size_t spec_field_offsets[] = {
#define SPEC_FIELD(g, name) offsetof(clbt__group_spec, name),
    CLBT_GROUP_CONSTANTS(SPEC_FIELD, 0)
#undef SPEC_FIELD
};
#define NUM_SPEC_FIELDS (sizeof spec_field_offsets / sizeof(size_t))

/* " -DCLBT_GROUP_<g>=" and its constants for eight groups, and the rest
   (devices.h says how long they can get). */
#define CLBT__SPEC_OPTIONS_SIZE CLBT__SPECIFIC_OPTIONS_SIZE

/*
 * query_start_loc is searched in local memory when a copy of it takes at
 * most a quarter of the device's local memory (12 KiB, 3071 requests, on a
 * 48 KiB GPU), leaving room for other work-groups on the same unit.
 */
static size_t qsl_cache_bytes(const clbt_device *device,
                              uint32_t max_num_reqs) {
  size_t bytes = ((size_t)max_num_reqs + 1) * sizeof(cl_int);
  return bytes <= device->properties.local_mem_size / 4 ? bytes : 0;
}

/*
 * "-DCLBT_QSL_IN_LOCAL=1 -DCLBT_NUM_GROUPS=2 -DCLBT_INLINE_WORDS=512
 *  -DCLBT_GROUP_0=16,1,1,0,1,1,0 ...":
 * each group's constants in CLBT_GROUP_CONSTANTS's order, which is also
 * the order of the kernel's group_constants fields.
 */
static void format_options(const clbt__group_spec *const *specs,
                           uint32_t num_groups, bool qsl_in_local,
                           uint32_t inline_words, char *options) {
  int used = snprintf(options, CLBT__SPEC_OPTIONS_SIZE,
                      "-DCLBT_PAD_SLOT_ID=%d -DCLBT_QSL_IN_LOCAL=%d "
                      "-DCLBT_NUM_GROUPS=%u -DCLBT_INLINE_WORDS=%u",
                      CLBT_PAD_SLOT_ID, qsl_in_local ? 1 : 0,
                      (unsigned)num_groups, (unsigned)inline_words);
  for (uint32_t g = 0; g < num_groups; ++g) {
    used += snprintf(options + used, CLBT__SPEC_OPTIONS_SIZE - (size_t)used,
                     " -DCLBT_GROUP_%u=", (unsigned)g);
    for (size_t f = 0; f < NUM_SPEC_FIELDS; ++f) {
      uint32_t value;
      memcpy(&value, (const char *)specs[g] + spec_field_offsets[f],
             sizeof value);
      used += snprintf(options + used, CLBT__SPEC_OPTIONS_SIZE - (size_t)used,
                       "%s%u", f ? "," : "", (unsigned)value);
    }
  }
}

/* One buffer and the offsets of its regions: see clbt__region. */
static clbt_status bind_group(cl_kernel kernel, uint32_t g,
                              const clbt_table *table) {
  cl_uint first = ARGS_BEFORE_GROUPS + g * ARGS_PER_GROUP;
  cl_uint row_stride = table->layout.width;
  const cl_ulong *at = table->region_words;
  const clbt__kernel_arg args[] = {
      {first + GROUP_ARG_STORAGE, sizeof(cl_mem), &table->storage},
      {first + GROUP_ARG_ROWS_AT, sizeof(cl_ulong), &at[CLBT__ROWS]},
      {first + GROUP_ARG_ROW_STRIDE, sizeof row_stride, &row_stride},
      {first + GROUP_ARG_ROW_LENGTHS_AT, sizeof(cl_ulong),
       &at[CLBT__ROW_LENGTHS]},
      {first + GROUP_ARG_SLOTS_AT, sizeof(cl_ulong), &at[CLBT__SLOTS]},
      {first + GROUP_ARG_REJECTED_TOKENS_AT, sizeof(cl_ulong),
       &at[CLBT__REJECTED_TOKENS]},
      {first + GROUP_ARG_ROW_VERSIONS_AT, sizeof(cl_ulong),
       &at[CLBT__ROW_VERSIONS]},
      {first + GROUP_ARG_GATHERED_AT, sizeof(cl_ulong), &at[CLBT__GATHERED]},
      {first + GROUP_ARG_GATHER_RECORDS_AT, sizeof(cl_ulong),
       &at[CLBT__GATHER_RECORDS]}};
  return clbt__set_kernel_args(kernel, args, sizeof args / sizeof args[0]);
}

/*
 * The words of a packet a launch of num_groups carries in its arguments:
 * what the device's argument space (CL_DEVICE_MAX_PARAMETER_SIZE) leaves
 * beside the other arguments, at most CLBT_INLINE_PACKET_WORDS, a power of
 * two; or 1, a placeholder, when that is under 16. The H200 has room for
 * all 512; PoCL, with the minimum of 1024 bytes, for 64 or 32.
 */
static uint32_t inline_words(const clbt_device *device, uint32_t num_groups) {
  size_t others = (ARGS_BEFORE_GROUPS + (size_t)ARGS_PER_GROUP * num_groups) *
                  sizeof(cl_ulong);
  size_t room = device->properties.max_parameter_size > others
                    ? (device->properties.max_parameter_size - others) /
                          sizeof(cl_uint)
                    : 0;
  uint32_t words = CLBT_INLINE_PACKET_WORDS;
  while (words > room) words /= 2;
  return words >= 16 ? words : 1;
}

clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program) {
  char options[CLBT__SPEC_OPTIONS_SIZE];
  format_options(specs, num_groups, qsl_cache_bytes(device, max_num_reqs) > 0,
                 inline_words(device, num_groups), options);
  return clbt__program_get(device, CLBT__SOURCE_SLOT_MAPPING, options, program);
}

bool clbt__launch_maps_tokens(const clbt__launch *launch) {
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    if (launch->groups[g]->layout.spec.maps_tokens) return true;
  return false;
}

clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *tables,
                              uint32_t num_tables) {
  launch->groups = tables;
  launch->num_groups = num_tables;
  launch->inline_words = inline_words(tables[0]->device, num_tables);
  return clbt__launch_maps_tokens(launch) ? clbt__launch_build(launch)
                                          : CLBT_SUCCESS;
}

/* A step's batch arguments. */
static clbt_status set_batch(cl_kernel kernel, const clbt__step_batch *step) {
  const clbt__batch *batch = &step->batch;
  cl_uint has_idx_mapping = batch->idx_mapping != NULL;
  const clbt__kernel_arg args[] = {
      {ARG_NUM_REQS, sizeof batch->num_reqs, &batch->num_reqs},
      {ARG_NUM_TOKENS, sizeof batch->num_tokens, &batch->num_tokens},
      {ARG_QUERY_START_LOC, sizeof(cl_mem),
       batch->query_start_loc ? &batch->query_start_loc : NULL},
      {ARG_POSITIONS, sizeof(cl_mem),
       batch->positions ? &batch->positions : NULL},
      {ARG_IDX_MAPPING, sizeof(cl_mem),
       batch->idx_mapping ? &batch->idx_mapping : NULL},
      {ARG_HAS_IDX_MAPPING, sizeof has_idx_mapping, &has_idx_mapping},
      {ARG_GATHERED_REQS, sizeof step->gathered_reqs, &step->gathered_reqs}};
  return clbt__set_kernel_args(kernel, args, sizeof args / sizeof args[0]);
}

static const clbt__step_batch empty_batch = {{0}, 0};

/* The launch's inline packet as the step kernel's last argument, by value
   (CLBT_STEP_LAST_ARGUMENT). */
static clbt_status set_inline_words(cl_kernel kernel,
                                    const clbt__launch *launch) {
  clbt_status status = CLBT_SUCCESS;
  cl_uint index = ARGS_BEFORE_GROUPS + ARGS_PER_GROUP * launch->num_groups;
  CLBT__CL_TRY(clSetKernelArg(kernel, index,
                              launch->inline_words * sizeof(cl_uint),
                              launch->inline_packet),
               status, done);
done:
  return status;
}

/*
 * One of the launch's kernels, with every argument that stays from call to
 * call bound: the bounds, the local cache and each group's buffer.
 */
static clbt_status make_kernel(const clbt__launch *launch, const char *name,
                               cl_kernel *out) {
  const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
  cl_program program;
  cl_int error = CL_SUCCESS;
  clbt_table *const *tables = launch->groups;
  clbt_device *device = tables[0]->device;
  cl_uint max_tokens = tables[0]->layout.max_num_batched_tokens;
  cl_uint max_num_reqs = tables[0]->layout.max_num_reqs;
  /* A zero-sized local argument is invalid; the global variant ignores it. */
  size_t cache_bytes = qsl_cache_bytes(device, max_num_reqs);
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    specs[g] = &tables[g]->layout.spec;
  clbt_status status = clbt__launch_program(device, specs, launch->num_groups,
                                            max_num_reqs, &program);
  if (status) return status;
  cl_kernel kernel = clCreateKernel(program, name, &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_MAX_NUM_TOKENS, sizeof max_tokens,
                              &max_tokens),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_MAX_NUM_REQS, sizeof max_num_reqs,
                              &max_num_reqs),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_QSL_CACHE,
                              cache_bytes ? cache_bytes : sizeof(cl_int), NULL),
               status, fail);
  for (uint32_t g = 0; g < launch->num_groups && !status; ++g)
    status = bind_group(kernel, g, tables[g]);
  /* An empty batch until a call says otherwise: the scatter reads none. */
  if (!status) status = set_batch(kernel, &empty_batch);
  if (!status) status = clbt__launch_set_packet(kernel, NULL, 0, 0);
  if (status) goto fail;
  *out = kernel;
  return CLBT_SUCCESS;
fail:
  clReleaseKernel(kernel);
done:
  return status;
}

clbt_status clbt__launch_build(clbt__launch *launch) {
  if (launch->kernel) return CLBT_SUCCESS;
  clbt_device *device = launch->groups[0]->device;
  size_t max_tokens = launch->groups[0]->layout.max_num_batched_tokens;
  size_t kernel_max_group = 0;
  clbt_status status = make_kernel(launch, "clbt_slot_mapping", &launch->kernel);
  if (status) return status;
  status = set_inline_words(launch->kernel, launch);
  if (status) goto fail;
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(launch->kernel, device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, fail);
  /* Every slot of every group is written by every call; the gather takes
     the work-groups this makes. */
  clbt__geometry(device, kernel_max_group, max_tokens * launch->num_groups,
                 &launch->global_size, &launch->local_size);
  return CLBT_SUCCESS;
fail:
  clReleaseKernel(launch->kernel);
  launch->kernel = NULL;
  return status;
}

void clbt__launch_release(clbt__launch *launch) {
  if (launch->kernel) clReleaseKernel(launch->kernel);
  if (launch->scatter) clReleaseKernel(launch->scatter);
  launch->kernel = NULL;
  launch->scatter = NULL;
}

clbt_status clbt__launch_scatter(clbt__launch *launch) {
  if (launch->scatter) return CLBT_SUCCESS;
  return make_kernel(launch, "clbt_commit_scatter", &launch->scatter);
}

clbt_status clbt__launch_set_packet(cl_kernel kernel, const cl_mem *packet,
                                    cl_ulong packet_at, cl_uint version) {
  cl_uint has_packet = packet ? CLBT_PACKET_IN_BUFFER : CLBT_PACKET_NONE;
  const clbt__kernel_arg args[] = {
      {ARG_PACKET, sizeof(cl_mem), packet},
      {ARG_PACKET_AT, sizeof packet_at, &packet_at},
      {ARG_HAS_PACKET, sizeof has_packet, &has_packet},
      {ARG_VERSION, sizeof version, &version}};
  return clbt__set_kernel_args(kernel, args, sizeof args / sizeof args[0]);
}

/* The step kernel applies the launch's inline packet. */
static clbt_status set_inline_packet(const clbt__launch *launch) {
  cl_uint has_packet = CLBT_PACKET_INLINE;
  const clbt__kernel_arg args[] = {
      {ARG_HAS_PACKET, sizeof has_packet, &has_packet},
      {ARG_VERSION, sizeof launch->packet_version, &launch->packet_version}};
  clbt_status status = clbt__set_kernel_args(launch->kernel, args,
                                             sizeof args / sizeof args[0]);
  return status ? status : set_inline_words(launch->kernel, launch);
}

/*
 * A gather on a GPU spreads over at least one work-group per few
 * positions, more than the slot mapping alone needs when the batch is
 * large: a full gather of 1024 rows on the 64 work-groups of a
 * 16384-token table left half an H200 idle. A CPU keeps its few groups.
 */
#define CLBT__GATHERED_PER_GROUP 4

static size_t gather_size(const clbt__launch *launch, uint32_t gathered_reqs) {
  const clbt_device *device = launch->groups[0]->device;
  size_t groups = (gathered_reqs + CLBT__GATHERED_PER_GROUP - 1) /
                  CLBT__GATHERED_PER_GROUP;
  size_t wanted = groups * launch->local_size;
  if (device->properties.type & CL_DEVICE_TYPE_CPU) return launch->global_size;
  return wanted > launch->global_size ? wanted : launch->global_size;
}

clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 cl_command_queue queue,
                                 const clbt__step_batch *step,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event) {
  clbt_status status = set_batch(launch->kernel, step);
  if (!status && launch->packet_kind == CLBT_PACKET_INLINE)
    status = set_inline_packet(launch);
  else if (!status)
    status = clbt__launch_set_packet(
        launch->kernel,
        launch->packet_kind == CLBT_PACKET_IN_BUFFER ? &launch->packet : NULL,
        launch->packet_at, launch->packet_version);
  if (status) return status;
  size_t global = gather_size(launch, step->gathered_reqs);
  CLBT__CL_TRY(clEnqueueNDRangeKernel(queue, launch->kernel, 1, NULL, &global,
                                      &launch->local_size, num_events,
                                      wait_list, event),
               status, done);
done:
  return status;
}
