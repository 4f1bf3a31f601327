/*
 * The table of src/base/tuning.h: one row for CPUs (PoCL), one for every other
 * device (GPUs: measured on an H200 through NVIDIA's OpenCL), and the
 * environment's choice of a row for tests.
 */
#include "base/tuning.h"

#include "base/status.h"

#include <errno.h>
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

/* ---- the paged attention ----------------------------------------------- */

static const clbt__attention_tuning cpu_attention = {
    .local = 1, .lane_bytes = 0, .tokens = 1, .rows = 8,
    .groups_per_unit = 1, .min_split = 512, .max_splits = 16, .splits = 0,
    .tile_local = 0, .tile_rows = 0, .tile_keys = 0,
    .reduce_local = 1, .cu_words = 1024};

/* A GPU's decode work-group: 16 runs of 16 lanes (a 128-element bf16
   head row, 16 bytes a lane), two keys each a pass; contexts split until
   about two work-groups a compute unit; tiles of 32 query rows and 16
   keys (about 38 KiB of local memory for head size 128). */
static const clbt__attention_tuning gpu_attention = {
    .local = 256, .lane_bytes = 16, .tokens = 2, .rows = 8,
    .groups_per_unit = 2, .min_split = 512, .max_splits = 16, .splits = 0,
    .tile_local = 256, .tile_rows = 32, .tile_keys = 16,
    .reduce_local = 128, .cu_words = 1024};

/* The fields CLBT_ATTENTION_TUNING may set. */
#define ATTENTION_FIELDS(X)                                              \
  X(local) X(lane_bytes) X(tokens) X(rows) X(groups_per_unit) X(min_split) \
  X(max_splits) X(splits) X(tile_local) X(tile_rows) X(tile_keys)       \
  X(reduce_local) X(cu_words)

/* Sets one "name=value" of the override. */
static clbt_status set_field(clbt__attention_tuning *row, const char *name,
                             size_t length, const char *value) {
  char *end = NULL;
  errno = 0;
  unsigned long number = strtoul(value, &end, 10);
  bool whole = end != value && (*end == ',' || *end == 0) && !errno &&
               number <= UINT32_MAX && value[0] != '-';
#define SET_FIELD(field)                                         \
  if (length == sizeof #field - 1 && !strncmp(name, #field, length)) { \
    if (!whole) goto not_whole;                                  \
    row->field = (uint32_t)number;                               \
    return CLBT_SUCCESS;                                         \
  }
  ATTENTION_FIELDS(SET_FIELD)
#undef SET_FIELD
  return clbt__fail(CLBT_INVALID_CONFIG,
                    "CLBT_ATTENTION_TUNING: no field '%.*s' (local, "
                    "lane_bytes, tokens, rows, groups_per_unit, min_split, "
                    "max_splits, splits, tile_local, tile_rows, tile_keys, "
                    "reduce_local, cu_words)",
                    (int)length, name);
not_whole:
  return clbt__fail(CLBT_INVALID_CONFIG,
                    "CLBT_ATTENTION_TUNING: %.*s's value is not a whole "
                    "number below 2^32",
                    (int)length, name);
}

clbt_status clbt__attention_tuning_for(cl_device_type type,
                                       clbt__attention_tuning *out) {
  return clbt__attention_tuning_row(clbt__tuning_for(type)->gpu_code, out);
}

clbt_status clbt__attention_tuning_row(bool gpu_row,
                                       clbt__attention_tuning *out) {
  *out = gpu_row ? gpu_attention : cpu_attention;
  const char *text = getenv("CLBT_ATTENTION_TUNING");
  while (text && *text) {
    const char *equals = strchr(text, '=');
    const char *comma = strchr(text, ',');
    if (!equals || (comma && comma < equals))
      return clbt__fail(CLBT_INVALID_CONFIG,
                        "CLBT_ATTENTION_TUNING: '%s' is not name=value,...",
                        text);
    clbt_status status = set_field(out, text, (size_t)(equals - text),
                                   equals + 1);
    if (status) return status;
    text = comma ? comma + 1 : NULL;
  }
  return CLBT_SUCCESS;
}
