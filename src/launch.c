/*
 * Launches: the step kernel (cl/step.cl) specialised for 1..8 groups (one
 * table, or eight groups of a multi-group table), bound to their storage,
 * with a geometry chosen for the device; a second kernel object of it
 * scatters large commit packets. The kernel's arguments persist
 * between launches and NVIDIA's driver copies every one at every enqueue
 * (about a quarter of a microsecond each on the H200), so a launch takes
 * few of them: a record and a layout by value, the batch's buffers and one
 * storage buffer per group, and sets again only those that changed.
 */
#include "engine.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Arguments before the per-group ones, and per group, by name
   (cl/contract.h lists them). */
enum {
#define ARGUMENT(NAME, type, name) ARG_##NAME,
  CLBT_STEP_FIRST_ARGUMENT(ARGUMENT)
  CLBT_STEP_ARGUMENTS(ARGUMENT)
#undef ARGUMENT
  ARGS_BEFORE_GROUPS
};
enum {
#define GROUP_ARGUMENT(g, NAME, type, name) GROUP_ARG_##NAME,
  CLBT_STEP_GROUP_ARGUMENTS(GROUP_ARGUMENT, 0)
#undef GROUP_ARGUMENT
  ARGS_PER_GROUP
};

/* The batch buffers' argument indices, in clbt__launch.bound's order. */
static const cl_uint bound_arguments[CLBT__NUM_BOUND] = {
    [CLBT__BOUND_QUERY_START_LOC] = ARG_QUERY_START_LOC,
    [CLBT__BOUND_POSITIONS] = ARG_POSITIONS,
    [CLBT__BOUND_IDX_MAPPING] = ARG_IDX_MAPPING,
    [CLBT__BOUND_SEQ_LENS] = ARG_SEQ_LENS,
    [CLBT__BOUND_TOKEN_INDICES] = ARG_TOKEN_INDICES,
    [CLBT__BOUND_TOKEN_SLOTS] = ARG_TOKEN_SLOTS,
    [CLBT__BOUND_PACKET] = ARG_PACKET};

/* The group constants in the contract's order, for the -D options. */
static const size_t spec_field_offsets[] = {
#define SPEC_FIELD(g, name) offsetof(clbt__group_spec, name),
    CLBT_GROUP_CONSTANTS(SPEC_FIELD, 0)
#undef SPEC_FIELD
};
#define NUM_SPEC_FIELDS (sizeof spec_field_offsets / sizeof(size_t))

/* The bytes of a layout of num_groups, and of a record with `words`. */
static size_t layout_bytes(uint32_t num_groups) {
  return offsetof(clbt__launch_layout, groups) +
         num_groups * sizeof(clbt_group_layout);
}
static size_t record_bytes(size_t words) {
  return offsetof(clbt__launch_record, packet) + words * sizeof(cl_uint);
}

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
 * The words of a packet a launch of num_groups carries in its record:
 * what the device's argument space (CL_DEVICE_MAX_PARAMETER_SIZE) leaves
 * beside the other arguments, at most CLBT_INLINE_PACKET_WORDS, a power of
 * two; or 1, a placeholder, when that is under 16. The H200 has room for
 * all 512; PoCL, with the minimum of 1024 bytes, for 128 with one group.
 */
static uint32_t inline_words(const clbt_device *device, uint32_t num_groups) {
  size_t pointers = ARGS_BEFORE_GROUPS - 2 + (size_t)ARGS_PER_GROUP * num_groups;
  size_t others = record_bytes(0) + layout_bytes(num_groups) +
                  pointers * sizeof(cl_ulong);
  size_t room = device->properties.max_parameter_size > others
                    ? (device->properties.max_parameter_size - others) /
                          sizeof(cl_uint)
                    : 0;
  uint32_t words = CLBT_INLINE_PACKET_WORDS;
  while (words > room) words /= 2;
  return words >= 16 ? words : 1;
}

/* Appends "<text><value>" to options at *used, never past its size. */
static void append(char *options, size_t *used, const char *text,
                   long value) {
  if (*used >= CLBT__SPECIFIC_OPTIONS_SIZE) return;
  int added = snprintf(options + *used, CLBT__SPECIFIC_OPTIONS_SIZE - *used,
                       "%s%ld", text, value);
  if (added > 0) *used += (size_t)added;
}

/*
 * "-DCLBT_PAD_SLOT_ID=-1 -DCLBT_QSL_IN_LOCAL=1 -DCLBT_NUM_GROUPS=2
 *  -DCLBT_INLINE_WORDS=512 -DCLBT_GROUP_0=16,1,1,0,1,1,0 ...":
 * each group's constants in CLBT_GROUP_CONSTANTS's order, which is also
 * the order of the kernel's group_constants fields. devices.h sizes the
 * buffer for eight groups of every constant at ten digits.
 */
static void format_options(const clbt__group_spec *const *specs,
                           uint32_t num_groups, bool qsl_in_local,
                           uint32_t words, char *options) {
  static const char *const group_names[CLBT__MAX_LAUNCH_GROUPS] = {
      " -DCLBT_GROUP_0=", " -DCLBT_GROUP_1=", " -DCLBT_GROUP_2=",
      " -DCLBT_GROUP_3=", " -DCLBT_GROUP_4=", " -DCLBT_GROUP_5=",
      " -DCLBT_GROUP_6=", " -DCLBT_GROUP_7="};
  size_t used = 0;
  options[0] = '\0';
  append(options, &used, "-DCLBT_PAD_SLOT_ID=", CLBT_PAD_SLOT_ID);
  append(options, &used, " -DCLBT_QSL_IN_LOCAL=", qsl_in_local);
  append(options, &used, " -DCLBT_NUM_GROUPS=", num_groups);
  append(options, &used, " -DCLBT_INLINE_WORDS=", words);
  for (uint32_t g = 0; g < num_groups; ++g)
    for (size_t f = 0; f < NUM_SPEC_FIELDS; ++f) {
      uint32_t value;
      memcpy(&value, (const char *)specs[g] + spec_field_offsets[f],
             sizeof value);
      append(options, &used, f ? "," : group_names[g], value);
    }
}

clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program) {
  char options[CLBT__SPECIFIC_OPTIONS_SIZE];
  format_options(specs, num_groups, qsl_cache_bytes(device, max_num_reqs) > 0,
                 inline_words(device, num_groups), options);
  return clbt__program_get(device, CLBT__SOURCE_STEP, options, program);
}

clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *tables,
                              uint32_t num_tables) {
  memset(launch, 0, sizeof *launch);
  launch->groups = tables;
  launch->num_groups = num_tables;
  for (uint32_t g = 0; g < num_tables; ++g) {
    launch->maps_tokens = launch->maps_tokens || clbt__maps_tokens(tables[g]);
    launch->holds_states =
        launch->holds_states || !clbt__maps_tokens(tables[g]);
  }
  launch->inline_words = inline_words(tables[0]->device, num_tables);
  return launch->maps_tokens ? clbt__launch_build(launch) : CLBT_SUCCESS;
}

/* What stays the same from launch to launch: the layout, the local cache
   and each group's storage; every batch buffer starts NULL. */
static clbt_status make_kernel(const clbt__launch *launch, cl_program program,
                               clbt__kernel *out) {
  clbt_table *const *tables = launch->groups;
  clbt__launch_layout layout = {
      .max_num_reqs = tables[0]->layout.max_num_reqs,
      .max_num_tokens = tables[0]->layout.max_num_batched_tokens};
  /* A zero-sized local argument is invalid; the global variant ignores it. */
  size_t cache_bytes = qsl_cache_bytes(tables[0]->device,
                                       layout.max_num_reqs);
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    layout.groups[g] = tables[g]->at;
  clbt_status status = CLBT_SUCCESS;
  cl_int error = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, "clbt_step", &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_LAYOUT,
                              layout_bytes(launch->num_groups), &layout),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_QSL_CACHE,
                              cache_bytes ? cache_bytes : sizeof(cl_int),
                              NULL),
               status, fail);
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    CLBT__CL_TRY(clSetKernelArg(kernel,
                                ARGS_BEFORE_GROUPS + g * ARGS_PER_GROUP +
                                    GROUP_ARG_STORAGE,
                                sizeof(cl_mem), &tables[g]->storage),
                 status, fail);
  for (int b = 0; b < CLBT__NUM_BOUND; ++b)
    CLBT__CL_TRY(clSetKernelArg(kernel, bound_arguments[b], sizeof(cl_mem),
                                NULL),
                 status, fail);
  *out = (clbt__kernel){kernel, {NULL}};
  return CLBT_SUCCESS;
fail:
  clReleaseKernel(kernel);
done:
  return status;
}

/* The launch's program, built or found. */
static clbt_status program_of(const clbt__launch *launch,
                              cl_program *program) {
  const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
  clbt_table *const *tables = launch->groups;
  for (uint32_t g = 0; g < launch->num_groups; ++g)
    specs[g] = &tables[g]->layout.spec;
  return clbt__launch_program(tables[0]->device, specs, launch->num_groups,
                              tables[0]->layout.max_num_reqs, program);
}

clbt_status clbt__launch_build(clbt__launch *launch) {
  if (launch->step.kernel) return CLBT_SUCCESS;
  clbt_table *const *tables = launch->groups;
  clbt_device *device = tables[0]->device;
  cl_program program;
  clbt_status status = program_of(launch, &program);
  if (!status) status = make_kernel(launch, program, &launch->step);
  if (status) return status;
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(launch->step.kernel, device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof launch->kernel_max_group,
                                        &launch->kernel_max_group, NULL),
               status, fail);
  /* Every slot of every group is written by every slot mapping; a gather
     and an export take the work-groups this makes, or more. */
  clbt__geometry(device, launch->kernel_max_group,
                 (size_t)tables[0]->layout.max_num_batched_tokens *
                     launch->num_groups,
                 &launch->map_global_size, &launch->local_size);
  return CLBT_SUCCESS;
fail:
  clbt__launch_release(launch);
  return status;
}

clbt_status clbt__launch_build_scatter(clbt__launch *launch) {
  if (launch->scatter.kernel) return CLBT_SUCCESS;
  cl_program program;
  clbt_status status = clbt__launch_build(launch);
  if (!status) status = program_of(launch, &program);
  if (!status) status = make_kernel(launch, program, &launch->scatter);
  return status;
}

void clbt__launch_release(clbt__launch *launch) {
  if (launch->step.kernel) clReleaseKernel(launch->step.kernel);
  if (launch->scatter.kernel) clReleaseKernel(launch->scatter.kernel);
  launch->step = launch->scatter = (clbt__kernel){NULL, {NULL}};
}

/*
 * A gather or an export on a GPU spreads over at least one work-group per
 * few positions, more than the slot mapping alone needs when the batch is
 * large: a full gather of 1024 rows on the 64 work-groups of a
 * 16384-token table left half an H200 idle. A CPU keeps its few groups.
 */
#define CLBT__GATHERED_PER_GROUP 4
#define CLBT__EXPORTED_PER_GROUP 8

size_t clbt__launch_grid(const clbt__launch *launch, uint32_t work,
                         uint32_t padded) {
  const clbt_device *device = launch->groups[0]->device;
  if (device->properties.type & CL_DEVICE_TYPE_CPU)
    return launch->map_global_size;
  size_t groups = 0;
  if (work & CLBT_WORK_GATHER)
    groups = (padded + CLBT__GATHERED_PER_GROUP - 1) / CLBT__GATHERED_PER_GROUP;
  if (work & CLBT_WORK_EXPORT) {
    size_t exporting =
        (padded + CLBT__EXPORTED_PER_GROUP - 1) / CLBT__EXPORTED_PER_GROUP;
    if (exporting > groups) groups = exporting;
  }
  /* State slots: a work-item per request. */
  if (work & CLBT_WORK_STATE_SLOTS) {
    size_t states = (padded + launch->local_size - 1) / launch->local_size;
    if (states > groups) groups = states;
  }
  size_t wanted = groups * launch->local_size;
  return wanted > launch->map_global_size ? wanted : launch->map_global_size;
}

size_t clbt__launch_items_grid(const clbt__launch *launch, size_t items) {
  size_t global, local;
  clbt__geometry(launch->groups[0]->device, launch->kernel_max_group, items,
                 &global, &local);
  /* The launch's work-group size, which the grid must be a multiple of. */
  return (global + launch->local_size - 1) / launch->local_size *
         launch->local_size;
}

/* Sets the buffers that differ from what the kernel holds. */
static clbt_status bind_buffers(clbt__kernel *kernel, const cl_mem *buffers) {
  clbt_status status = CLBT_SUCCESS;
  for (int b = 0; b < CLBT__NUM_BOUND; ++b) {
    if (buffers[b] == kernel->bound[b]) continue;
    CLBT__CL_TRY(clSetKernelArg(kernel->kernel, bound_arguments[b],
                                sizeof(cl_mem),
                                buffers[b] ? &buffers[b] : NULL),
                 status, done);
    kernel->bound[b] = buffers[b];
  }
done:
  return status;
}

clbt_status clbt__launch_enqueue(const clbt__launch *launch,
                                 clbt__kernel *kernel,
                                 const clbt__launch_call *call,
                                 clbt__sequence *sequence) {
  clbt_status status = bind_buffers(kernel, call->buffers);
  if (status) return status;
  CLBT__CL_TRY(clSetKernelArg(kernel->kernel, ARG_RECORD,
                              record_bytes(launch->inline_words), call->record),
               status, done);
  status = clbt__sequence_kernel(sequence, kernel->kernel, call->global_size,
                                 launch->local_size);
done:
  return status;
}
