/*
 * The table of src/base/tuning.h: one row for CPUs (PoCL), one for every other
 * device (GPUs: measured on an H200 through NVIDIA's OpenCL), and the
 * environment's choice of a row for tests.
 */
#include "base/tuning.h"

#include <stdlib.h>
#include <string.h>
#include <threads.h>

static const clbt__tuning cpu = {
    .local_size = 1,
    .cpu_items_per_group = 32768,
    .gpu_code = false,
    .pad_per_item = 1,
    .gathered_per_group = 0, /* a CPU keeps its few work-groups */
    .exported_per_group = 0,
    .part_groups_per_unit = 0,
    .folded_items = 8192,
    .folded_budget = UINT32_MAX, /* its one or two work-groups */
    /* One size, as large as the device allows: each size is a compile of
       every entry a table uses. */
    .record_words = {UINT32_MAX},
};

/* The GPU's record sizes and spreads; a build may set others
   (-DCLBT__GPU_RECORD_WORDS=64,512 -DCLBT__GPU_GATHERED=16) to measure
   them. */
#ifndef CLBT__GPU_RECORD_WORDS
#define CLBT__GPU_RECORD_WORDS 64, 512, 2048
#endif
#ifndef CLBT__GPU_GATHERED
#define CLBT__GPU_GATHERED 4
#endif
#ifndef CLBT__GPU_EXPORTED
#define CLBT__GPU_EXPORTED 8
#endif
#ifndef CLBT__GPU_PART_GROUPS_PER_UNIT
#define CLBT__GPU_PART_GROUPS_PER_UNIT 1
#endif
#ifndef CLBT__GPU_FOLDED_BUDGET
#define CLBT__GPU_FOLDED_BUDGET 150000
#endif

static const clbt__tuning gpu = {
    .local_size = 256,
    .cpu_items_per_group = 0,
    .gpu_code = true,
    .pad_per_item = 16,
    .gathered_per_group = CLBT__GPU_GATHERED,
    .exported_per_group = CLBT__GPU_EXPORTED,
    .part_groups_per_unit = CLBT__GPU_PART_GROUPS_PER_UNIT,
    .folded_items = 8192,
    .folded_budget = CLBT__GPU_FOLDED_BUDGET,
    .record_words = {CLBT__GPU_RECORD_WORDS},
};

/* CLBT_TUNING=cpu or gpu picks a row whatever the device (read once):
   PoCL's CPU device then runs, and its tests check, the GPU's code. */
static const clbt__tuning *forced;
static once_flag read_once = ONCE_FLAG_INIT;

static void read_environment(void) {
  const char *row = getenv("CLBT_TUNING");
  if (row && strcmp(row, "gpu") == 0) forced = &gpu;
  if (row && strcmp(row, "cpu") == 0) forced = &cpu;
}

const clbt__tuning *clbt__tuning_for(cl_device_type type) {
  call_once(&read_once, read_environment);
  if (forced) return forced;
  return type & CL_DEVICE_TYPE_CPU ? &cpu : &gpu;
}

size_t clbt__tuning_local_size(const clbt__tuning *tuning,
                               size_t kernel_limit) {
  size_t limit = kernel_limit < tuning->local_size ? kernel_limit
                                                   : tuning->local_size;
  size_t local = 1;
  while (tuning->gpu_code && local * 2 <= limit) local *= 2;
  return local;
}

size_t clbt__tuning_cpu_groups(const clbt__tuning *tuning,
                               size_t compute_units, size_t items) {
  if (tuning->cpu_items_per_group == 0) return 1; /* a row that spreads none */
  size_t groups = items / tuning->cpu_items_per_group;
  return groups < 1 ? 1 : groups > compute_units ? compute_units : groups;
}
