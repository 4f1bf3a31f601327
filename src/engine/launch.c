/*
 * Launches: the step kernel (cl/step.cl) specialised for 1..8 groups of an
 * engine (one table, or eight groups of a multi-group table), its entries
 * made with its program, each in each record size, bound to the launch's
 * layout and the engine's storage, with work-group sizes chosen for the
 * device (src/base/tuning.c). The kernel's arguments persist between launches and
 * NVIDIA's driver copies every one at every enqueue (about a quarter of a
 * microsecond each on the H200), so a launch takes few of them: a record
 * and a layout by value, the batch's buffers and the storage, and sets
 * again only those that changed.
 */
#include "engine/launch.h"

#include "base/status.h"
#include "base/tuning.h"
#include "device/handle.h"
#include "device/program.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(CLBT__RECORD_CLASSES == CLBT_MAX_RECORD_CLASSES,
               "the tuning table's record sizes are the kernel's");

/* Arguments by name (cl/contract.h lists them after the record). */
enum {
  ARG_RECORD,
#define ARGUMENT(NAME, type, name) ARG_##NAME,
  CLBT_STEP_ARGUMENTS(ARGUMENT)
#undef ARGUMENT
  NUM_ARGUMENTS
};

/* The bound buffers' argument indices, in clbt__kernel.bound's order. */
static const cl_uint bound_arguments[CLBT__NUM_BOUND] = {
    [CLBT__BOUND_QUERY_START_LOC] = ARG_QUERY_START_LOC,
    [CLBT__BOUND_POSITIONS] = ARG_POSITIONS,
    [CLBT__BOUND_IDX_MAPPING] = ARG_IDX_MAPPING,
    [CLBT__BOUND_SEQ_LENS] = ARG_SEQ_LENS,
    [CLBT__BOUND_PACKET] = ARG_PACKET};

/* Each entry's name, for its kernel's. */
static const char *const entry_names[CLBT__NUM_ENTRIES] = {
#define ENTRY(NAME, name, parts) [CLBT__ENTRY_##NAME] = #name,
    CLBT_STEP_ENTRIES(ENTRY)
#undef ENTRY
};

/* The group constants in the contract's order, for the -D options. */
static const size_t spec_field_offsets[] = {
#define SPEC_FIELD(g, name) offsetof(clbt__group_spec, name),
    CLBT_GROUP_CONSTANTS(SPEC_FIELD, 0)
#undef SPEC_FIELD
};
#define NUM_SPEC_FIELDS (sizeof spec_field_offsets / sizeof(size_t))

/* The bytes of a layout of num_groups. */
static size_t layout_bytes(uint32_t num_groups) {
  return offsetof(clbt__launch_layout, groups) +
         num_groups * sizeof(clbt__group_layout);
}

/*
 * The words of a local copy of query_start_loc: the smallest power of two
 * from 256 that holds max_num_reqs + 1 entries (so that tables of similar
 * sizes share a program), when that takes at most a quarter of the
 * device's local memory (12 KiB on a 48 KiB GPU), leaving room for other
 * work-groups on the same unit, and at most 65536 words; 0 (searched in
 * global memory) otherwise.
 */
static uint32_t qsl_words(const clbt_device *device, uint32_t max_num_reqs) {
  uint64_t words = 256;
  while (words < (uint64_t)max_num_reqs + 1) words *= 2;
  bool fits = words <= 65536 &&
              words * sizeof(cl_int) <= device->properties.local_mem_size / 4;
  return fits ? (uint32_t)words : 0;
}

/*
 * The record's sizes for a launch of num_groups: the tuning table's,
 * capped by what the device's argument space (CL_DEVICE_MAX_PARAMETER_SIZE)
 * leaves beside the other arguments and by CLBT_MAX_RECORD_WORDS, without
 * repeats. A device with room for fewer than 16 words gets one size of 1,
 * a placeholder: its packets are uploaded. Returns the number of sizes.
 */
static uint32_t record_sizes(const clbt_device *device,
                             const clbt__tuning *tuning, uint32_t num_groups,
                             uint32_t *words) {
  /* Each argument may be aligned to 16 bytes in the argument space. */
  size_t others = clbt__record_bytes(0) + layout_bytes(num_groups) +
                  (NUM_ARGUMENTS - 2) * sizeof(cl_ulong) + NUM_ARGUMENTS * 16;
  size_t space = device->properties.max_parameter_size;
  size_t room = space > others ? (space - others) / sizeof(cl_uint) : 0;
  if (room > CLBT_MAX_RECORD_WORDS) room = CLBT_MAX_RECORD_WORDS;
  if (room < 16) {
    words[0] = 1;
    return 1;
  }
  uint32_t count = 0;
  for (uint32_t c = 0; c < CLBT__RECORD_CLASSES && tuning->record_words[c];
       ++c) {
    uint32_t size = tuning->record_words[c] < room
                        ? tuning->record_words[c]
                        : (uint32_t)room;
    if (count == 0 || size > words[count - 1]) words[count++] = size;
  }
  return count;
}

/*
 * The longest options: the fixed part at its longest values (a query
 * start copy of at most 65536 words, records of at most
 * CLBT_MAX_RECORD_WORDS), then eight groups of five constants of ten
 * digits and two flags (0 or 1), which fit the bound of device/program.h.
 */
#define OPTION_BYTES(name, digits) (sizeof " -D" name "=" - 1 + (digits))
_Static_assert(NUM_SPEC_FIELDS == 7,
               "the bound below counts five numbers and two flags a group");
#define GROUP_OPTION_BYTES (OPTION_BYTES("CLBT_GROUP_0", 0) + 5 * 10 + 2 + 6)
_Static_assert(OPTION_BYTES("CLBT_PAD_SLOT_ID", 2) +
                       OPTION_BYTES("CLBT_QSL_WORDS", 5) +
                       OPTION_BYTES("CLBT_NUM_GROUPS", 1) +
                       OPTION_BYTES("CLBT_GPU", 1) +
                       CLBT_MAX_RECORD_CLASSES *
                           OPTION_BYTES("CLBT_RECORD_WORDS_0", 4) +
                       CLBT__MAX_LAUNCH_GROUPS * GROUP_OPTION_BYTES <
                   CLBT__SPECIFIC_OPTIONS_SIZE,
               "CLBT__SPECIFIC_OPTIONS_SIZE holds the longest options");
_Static_assert(CLBT_MAX_RECORD_WORDS <= 9999, "a record's words: 4 digits");

/* Appends "<text><value>" to options at *used: the bound above leaves
   room for every one. */
static void append(char *options, size_t *used, const char *text,
                   long value) {
  int added = snprintf(options + *used, CLBT__SPECIFIC_OPTIONS_SIZE - *used,
                       "%s%ld", text, value);
  *used += added > 0 ? (size_t)added : 0;
}

/*
 * "-DCLBT_PAD_SLOT_ID=-1 -DCLBT_QSL_WORDS=1024 -DCLBT_NUM_GROUPS=2
 *  -DCLBT_GPU=1 -DCLBT_RECORD_WORDS_0=64 ... -DCLBT_GROUP_0=16,1,1,0,1,1,0":
 * each group's constants in CLBT_GROUP_CONSTANTS's order, which is also
 * the order of the kernel's group_constants fields.
 */
static void format_options(const clbt__group_spec *const *specs,
                           uint32_t num_groups, uint32_t qsl,
                           const clbt__tuning *tuning, const uint32_t *words,
                           uint32_t num_classes, char *options) {
  static const char *const group_names[CLBT__MAX_LAUNCH_GROUPS] = {
      " -DCLBT_GROUP_0=", " -DCLBT_GROUP_1=", " -DCLBT_GROUP_2=",
      " -DCLBT_GROUP_3=", " -DCLBT_GROUP_4=", " -DCLBT_GROUP_5=",
      " -DCLBT_GROUP_6=", " -DCLBT_GROUP_7="};
  static const char *const class_names[CLBT_MAX_RECORD_CLASSES] = {
      " -DCLBT_RECORD_WORDS_0=", " -DCLBT_RECORD_WORDS_1=",
      " -DCLBT_RECORD_WORDS_2="};
  size_t used = 0;
  options[0] = '\0';
  append(options, &used, "-DCLBT_PAD_SLOT_ID=", CLBT_PAD_SLOT_ID);
  append(options, &used, " -DCLBT_QSL_WORDS=", qsl);
  append(options, &used, " -DCLBT_NUM_GROUPS=", num_groups);
  append(options, &used, " -DCLBT_GPU=", tuning->gpu_code);
  for (uint32_t c = 0; c < num_classes; ++c)
    append(options, &used, class_names[c], words[c]);
  for (uint32_t g = 0; g < num_groups; ++g)
    for (size_t f = 0; f < NUM_SPEC_FIELDS; ++f) {
      uint32_t value;
      memcpy(&value, (const char *)specs[g] + spec_field_offsets[f],
             sizeof value);
      append(options, &used, f ? "," : group_names[g], value);
    }
}

/* The step program of these group specs on a device whose tuning row and
   record sizes are known. */
static clbt_status get_program(clbt_device *device,
                               const clbt__group_spec *const *specs,
                               uint32_t num_groups, uint32_t max_num_reqs,
                               const clbt__tuning *tuning,
                               const uint32_t *words, uint32_t classes,
                               cl_program *program) {
  char options[CLBT__SPECIFIC_OPTIONS_SIZE];
  format_options(specs, num_groups, qsl_words(device, max_num_reqs), tuning,
                 words, classes, options);
  return clbt__program_get(device, CLBT__SOURCE_STEP, options, program);
}

clbt_status clbt__launch_program(clbt_device *device,
                                 const clbt__group_spec *const *specs,
                                 uint32_t num_groups, uint32_t max_num_reqs,
                                 cl_program *program) {
  const clbt__tuning *tuning = clbt__tuning_for(device->properties.type);
  uint32_t words[CLBT_MAX_RECORD_CLASSES];
  uint32_t classes = record_sizes(device, tuning, num_groups, words);
  return get_program(device, specs, num_groups, max_num_reqs, tuning, words,
                     classes, program);
}

/* The launch's program: built or found on first need, then kept (the
   device holds it), so that later settings change no kernel of it. */
static clbt_status find_program(clbt__launch *launch) {
  const clbt__group_spec *specs[CLBT__MAX_LAUNCH_GROUPS];
  clbt_table *const *groups = launch->groups;
  const clbt__launch_shape *shape = &launch->shape;
  for (uint32_t g = 0; g < shape->num_groups; ++g)
    specs[g] = &groups[g]->layout.spec;
  return get_program(groups[0]->device, specs, shape->num_groups,
                     groups[0]->layout.max_num_reqs, shape->tuning,
                     shape->record_words, shape->num_classes,
                     &launch->program);
}

/* A kernel object's CL_KERNEL_WORK_GROUP_SIZE. */
static clbt_status size_limit(const clbt__launch *launch, cl_kernel kernel,
                              size_t *limit) {
  cl_int error = clGetKernelWorkGroupInfo(
      kernel, launch->groups[0]->device->id, CL_KERNEL_WORK_GROUP_SIZE,
      sizeof *limit, limit, NULL);
  return error ? clbt__cl_fail(error, "clGetKernelWorkGroupInfo")
               : CLBT_SUCCESS;
}

/* What stays the same from launch to launch: the layout and the storage;
   the batch buffers are set at the first launch. */
static clbt_status make_kernel(const clbt__launch *launch, clbt__entry entry,
                               uint32_t record_class, cl_kernel *out) {
  clbt_table *const *groups = launch->groups;
  clbt__launch_layout layout = {
      .max_num_reqs = groups[0]->layout.max_num_reqs,
      .max_num_tokens = groups[0]->layout.max_num_batched_tokens};
  for (uint32_t g = 0; g < launch->shape.num_groups; ++g)
    layout.groups[g] = groups[g]->at;
  char name[32];
  snprintf(name, sizeof name, "clbt_%s_%u", entry_names[entry],
           (unsigned)record_class);
  clbt_status status = CLBT_SUCCESS;
  cl_int error = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(launch->program, name, &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, done);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_LAYOUT,
                              layout_bytes(launch->shape.num_groups), &layout),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, ARG_STORAGE, sizeof(cl_mem),
                              &launch->storage),
               status, fail);
  *out = kernel;
  return CLBT_SUCCESS;
fail:
  clReleaseKernel(kernel);
done:
  return status;
}

static void release_kernels(clbt__launch *launch) {
  for (int e = 0; e < CLBT__NUM_ENTRIES; ++e)
    for (int c = 0; c < CLBT_MAX_RECORD_CLASSES; ++c) {
      clbt__kernel *kernel = &launch->kernels[e][c];
      if (kernel->kernel) clReleaseKernel(kernel->kernel);
      *kernel = (clbt__kernel){NULL, {{NULL, 0, false}}};
    }
  launch->made = false;
}

/*
 * Every kernel of the launch's program (a GPU's entries or a CPU's:
 * cl/contract.h's two lists), and each record size's work-group
 * size: the tuning table's rule within the smallest limit of its entries
 * (their local arrays), so that every entry of a size runs on the grid
 * the plan computed for it.
 */
static clbt_status make_kernels(clbt__launch *launch) {
  clbt__launch_shape *shape = &launch->shape;
  size_t limits[CLBT_MAX_RECORD_CLASSES];
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t c = 0; !status && c < shape->num_classes; ++c) {
    limits[c] = CLBT_MAX_WORK_GROUP_SIZE;
    for (int e = 0; !status && e < CLBT__NUM_ENTRIES; ++e) {
      if ((e >= CLBT__FIRST_GPU_ENTRY) != shape->tuning->gpu_code) continue;
      cl_kernel *kernel = &launch->kernels[e][c].kernel;
      size_t limit = 0;
      status = make_kernel(launch, (clbt__entry)e, c, kernel);
      if (!status) status = size_limit(launch, *kernel, &limit);
      if (!status && limit < limits[c]) limits[c] = limit;
    }
  }
  if (status) {
    release_kernels(launch);
    return status;
  }
  for (uint32_t c = 0; c < shape->num_classes; ++c)
    shape->local_sizes[c] = clbt__tuning_local_size(shape->tuning, limits[c]);
  launch->made = true;
  return CLBT_SUCCESS;
}

clbt_status clbt__launch_ready(clbt__launch *launch, uint32_t work,
                               const clbt__commit_plan *commits) {
  /* Token groups' work is no work for a launch of NONE groups alone. */
  if (!launch->shape.token_group_mask) work &= ~CLBT__TOKEN_GROUP_WORK;
  bool needed = (work & CLBT_WORK_PARTS) != 0;
  for (uint32_t g = 0; commits && g < launch->shape.num_groups; ++g)
    needed = needed || commits[g].mode == CLBT_COMMIT_SCATTER;
  clbt_status status = CLBT_SUCCESS;
  if (!launch->program && needed) status = find_program(launch);
  if (!status && launch->program && !launch->made)
    status = make_kernels(launch);
  return status;
}

clbt_status clbt__launch_init(clbt__launch *launch, clbt_table *const *groups,
                              uint32_t num_groups, cl_mem storage) {
  const clbt_device *device = groups[0]->device;
  memset(launch, 0, sizeof *launch);
  launch->groups = groups;
  launch->storage = storage;
  launch->step_record = calloc(1, sizeof *launch->step_record);
  launch->scatter_record = calloc(1, sizeof *launch->scatter_record);
  if (!launch->step_record || !launch->scatter_record) {
    clbt__launch_release(launch);
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory for a launch's records");
  }
  clbt__launch_shape *shape = &launch->shape;
  shape->num_groups = num_groups;
  for (uint32_t g = 0; g < num_groups; ++g)
    shape->token_group_mask |= (uint32_t)clbt__maps_tokens(groups[g]) << g;
  shape->tuning = clbt__tuning_for(device->properties.type);
  shape->num_classes =
      record_sizes(device, shape->tuning, num_groups, shape->record_words);
  shape->has_inline = shape->record_words[shape->num_classes - 1] > 1;
  shape->compute_units = device->properties.compute_units;
  shape->max_num_tokens = groups[0]->layout.max_num_batched_tokens;
  /* A CPU's step kernel spreads every group's slot mapping. */
  if (!shape->tuning->gpu_code)
    shape->cpu_step_groups = (uint32_t)clbt__tuning_cpu_groups(
        shape->tuning, shape->compute_units,
        (size_t)shape->max_num_tokens * num_groups);
  clbt_status status = clbt__launch_ready(launch, CLBT_WORK_MAP, NULL);
  if (status) clbt__launch_release(launch);
  return status;
}

void clbt__launch_release(clbt__launch *launch) {
  release_kernels(launch);
  free(launch->step_record);
  free(launch->scatter_record);
  launch->step_record = launch->scatter_record = NULL;
}

/* ---- enqueueing a launch -------------------------------------------------- */

/* Sets the buffers that differ from what the kernel holds. */
static clbt_status bind_buffers(clbt__kernel *kernel,
                                const clbt__launch_call *call) {
  clbt_status status = CLBT_SUCCESS;
  for (int b = 0; !status && b < CLBT__NUM_BOUND; ++b)
    status = clbt__bound_buffer_set(kernel->kernel, bound_arguments[b],
                                    &kernel->bound[b], call->buffers[b],
                                    call->serials[b]);
  return status;
}

clbt_status clbt__launch_enqueue(clbt__launch *launch,
                                 const clbt__launch_call *call,
                                 clbt__sequence *sequence) {
  clbt__kernel *kernel = &launch->kernels[call->entry][call->record_class];
  clbt_status status = bind_buffers(kernel, call);
  if (status) return status;
  CLBT__CL_TRY(clSetKernelArg(kernel->kernel, ARG_RECORD, call->record_bytes,
                              call->record),
               status, done);
  status = clbt__sequence_kernel(sequence, kernel->kernel, call->global_size,
                                 call->local_size);
done:
  return status;
}
