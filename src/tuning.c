/*
 * The table of src/tuning.h: one row for CPUs (PoCL), one for every other
 * device (GPUs: measured on an H200 through NVIDIA's OpenCL).
 */
#include "tuning.h"

static const clbt__tuning cpu = {
    .local_size = 1,
    .cpu_items_per_group = 32768,
    .gpu_code = false,
    .pad_per_item = 1,
    .gathered_per_group = 0, /* a CPU keeps its few work-groups */
    .exported_per_group = 0,
    .folded_items = 8192,
    /* One size, as large as the device allows: each size is a compile of
       every entry a table uses. */
    .record_words = {UINT32_MAX},
};

static const clbt__tuning gpu = {
    .local_size = 256,
    .cpu_items_per_group = 0,
    .gpu_code = true,
    .pad_per_item = 16,
    .gathered_per_group = 4,
    .exported_per_group = 8,
    .folded_items = 8192,
    .record_words = {64, 512, UINT32_MAX},
};

const clbt__tuning *clbt__tuning_for(cl_device_type type) {
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
  size_t groups = items / tuning->cpu_items_per_group;
  return groups < 1 ? 1 : groups > compute_units ? compute_units : groups;
}
