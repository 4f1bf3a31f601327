/*
 * One KV-cache group (a clbt_table): its layout, checked and derived
 * from a config, its host rows and its regions of the engine's one device
 * allocation. Groups are made by the engine (engine.c); the row operations
 * are in table_rows.c, commits in commit.c.
 */
#include "engine/group.h"

#include "base/config.h"
#include "base/status.h"
#include "device/handle.h"

#include <stdlib.h>
#include <string.h>

static clbt_status check_cp(const clbt_table_config *config,
                            clbt__group_spec *spec) {
  spec->cp_world_size = config->cp_world_size ? config->cp_world_size : 1;
  spec->cp_rank = config->cp_rank;
  spec->cp_interleave_size =
      config->cp_interleave_size ? config->cp_interleave_size : 1;
  if (spec->cp_rank >= spec->cp_world_size)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_rank %u is not below cp_world_size %u",
                      (unsigned)spec->cp_rank, (unsigned)spec->cp_world_size);
  if (config->block_size % spec->cp_interleave_size != 0)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cp_interleave_size %u does not divide "
                      "block_size %u",
                      (unsigned)spec->cp_interleave_size,
                      (unsigned)config->block_size);
  return CLBT_SUCCESS;
}

/* The regions' sizes are products of 32-bit counts and element sizes,
   which only a 64-bit size_t holds whatever the config: clbt is for
   64-bit hosts. */
_Static_assert(SIZE_MAX >= UINT64_MAX, "clbt needs a 64-bit size_t");

/* Both host arrays and every device buffer must be addressable. */
static clbt_status check_sizes(const clbt__table_layout *layout) {
  if ((size_t)layout->max_num_reqs >
      SIZE_MAX / sizeof(int32_t) / layout->width)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "max_num_reqs %u x width %u int32 exceeds SIZE_MAX",
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  return CLBT_SUCCESS;
}

clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout) {
  clbt_status status =
      clbt__config_require_nonzero(config->block_size, "block_size");
  if (!status)
    status = clbt__config_require_nonzero(config->max_num_reqs, "max_num_reqs");
  if (!status)
    status = clbt__config_require_nonzero(config->max_num_blocks_per_req,
                                          "max_num_blocks_per_req");
  if (!status)
    status = clbt__config_require_nonzero(config->max_num_batched_tokens,
                                          "max_num_batched_tokens");
  if (status) return status;
  /* The kernel indexes requests and tokens with int32, as vLLM does. */
  if (config->max_num_reqs > INT32_MAX ||
      config->max_num_batched_tokens > INT32_MAX)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->%s %u exceeds INT32_MAX",
                      config->max_num_reqs > INT32_MAX
                          ? "max_num_reqs"
                          : "max_num_batched_tokens",
                      (unsigned)(config->max_num_reqs > INT32_MAX
                                     ? config->max_num_reqs
                                     : config->max_num_batched_tokens));
  if (config->slot_mode != CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT &&
      config->slot_mode != CLBT_SLOT_MODE_NONE)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->slot_mode %d is unknown",
                      (int)config->slot_mode);

  memset(layout, 0, sizeof *layout);
  status = clbt_block_table_width(config->max_num_blocks_per_req,
                                  config->block_size, config->kernel_block_size,
                                  0, &layout->width);
  if (!status) status = check_cp(config, &layout->spec);
  if (status) return status;
  layout->kernel_block_size = config->kernel_block_size
                                  ? config->kernel_block_size
                                  : config->block_size;
  layout->spec.kv_block_size = config->block_size;
  layout->spec.blocks_per_kv_block =
      config->block_size / layout->kernel_block_size;
  /* Kept, so that a row update checks its ids without a division. */
  int64_t id_room =
      (int64_t)INT32_MAX - (layout->spec.blocks_per_kv_block - 1);
  layout->largest_id =
      id_room < 0 ? -1
                  : (int32_t)(id_room / layout->spec.blocks_per_kv_block);
  layout->spec.maps_tokens =
      config->slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
  layout->spec.zero_gathered_tails = config->zero_gathered_tails != 0;
  layout->max_num_reqs = config->max_num_reqs;
  layout->max_num_batched_tokens = config->max_num_batched_tokens;
  return check_sizes(layout);
}

bool clbt__maps_tokens(const clbt_table *group) {
  return group->layout.spec.maps_tokens != 0;
}

static size_t rows_bytes(const clbt_table *group) {
  return (size_t)group->layout.max_num_reqs * group->layout.width *
         sizeof(int32_t);
}

/*
 * The export's regions, worst case: every row's whole width of pages (the
 * dense page table: max_num_reqs rows of the width, or fewer rows of a
 * wider pitch). A NONE group exports nothing and has none.
 */
static void export_sizes(const clbt_table *group, size_t *sizes) {
  bool maps_tokens = clbt__maps_tokens(group);
  size_t requests = maps_tokens ? group->layout.max_num_reqs : 0;
  size_t per_request = requests * sizeof(cl_int);
  size_t offsets = maps_tokens ? per_request + sizeof(cl_int) : 0;
  size_t pages = maps_tokens ? rows_bytes(group) : 0;
  sizes[CLBT_REGION_EXPORT_INDPTR] = offsets;
  sizes[CLBT_REGION_EXPORT_INDICES] = pages;
  sizes[CLBT_REGION_EXPORT_LAST_PAGE_LEN] = per_request;
  sizes[CLBT_REGION_EXPORT_PAST_LENS] = per_request;
  sizes[CLBT_REGION_EXPORT_SUBSEQUENCE_BEGINS] = offsets;
  sizes[CLBT_REGION_EXPORT_SEQ_LENS] = per_request;
  sizes[CLBT_REGION_EXPORT_LOCAL_SEQ_LENS] = per_request;
  sizes[CLBT_REGION_EXPORT_MAX_SEQ_LEN] = maps_tokens ? sizeof(cl_int) : 0;
  sizes[CLBT_REGION_EXPORT_CONTEXT_INDPTR] = offsets;
  sizes[CLBT_REGION_EXPORT_CONTEXT_INDICES] = pages;
  sizes[CLBT_REGION_EXPORT_CONTEXT_LAST_PAGE_LEN] = per_request;
  sizes[CLBT_REGION_EXPORT_PAGE_TABLE] = pages;
}

/* A NONE group's state slots: at most a row's worth a request. */
static size_t state_slots_bytes(const clbt_table *group) {
  return clbt__maps_tokens(group) ? 0 : rows_bytes(group);
}

/* Each region's size in bytes (0: the group has none). */
static void region_sizes(const clbt_table *group, size_t *sizes) {
  sizes[CLBT_REGION_ROWS] = rows_bytes(group);
  sizes[CLBT_REGION_ROW_LENGTHS] = group->layout.max_num_reqs * sizeof(cl_int);
  sizes[CLBT_REGION_SLOTS] =
      group->layout.max_num_batched_tokens * sizeof(cl_long);
  sizes[CLBT_REGION_REJECTED_TOKENS] = sizeof(cl_uint);
  sizes[CLBT_REGION_ROW_VERSIONS] =
      group->layout.max_num_reqs * sizeof(cl_ulong);
  sizes[CLBT_REGION_GATHERED] = rows_bytes(group);
  sizes[CLBT_REGION_GATHER_RECORDS] = (size_t)group->layout.max_num_reqs *
                                      CLBT_GATHER_RECORD_WORDS *
                                      sizeof(cl_uint);
  export_sizes(group, sizes);
  sizes[CLBT_REGION_STATE_SLOTS] = state_slots_bytes(group);
}

/* Regions start on 64-byte boundaries, or the device's base address
   alignment when that is larger: both powers of two, so the larger is a
   multiple of the other. */
static size_t region_alignment(const clbt_table *group) {
  const size_t unit = CLBT_REGION_UNIT_WORDS * sizeof(cl_uint);
  size_t alignment = group->device->properties.base_address_alignment;
  return alignment < unit ? unit : alignment;
}

clbt_status clbt__group_plan(clbt_table *group, size_t *size) {
  const size_t unit = CLBT_REGION_UNIT_WORDS * sizeof(cl_uint);
  size_t alignment = region_alignment(group), sizes[CLBT_NUM_REGIONS];
  size_t offset = (*size + alignment - 1) / alignment * alignment;
  region_sizes(group, sizes);
  group->at.row_stride = group->layout.width;
  for (int r = 0; r < CLBT_NUM_REGIONS; ++r) {
    if (sizes[r] > SIZE_MAX - offset - alignment)
      return clbt__fail(CLBT_SIZE_OVERFLOW,
                        "the table's device data exceeds SIZE_MAX bytes");
    /* The launch layout counts offsets in 32-bit units (cl/contract.h). */
    if (offset / unit > UINT32_MAX)
      return clbt__fail(CLBT_SIZE_OVERFLOW,
                        "the table's device data of %zu bytes exceeds the "
                        "256 GiB the kernel's region offsets reach",
                        offset);
    group->at.at[r] = (cl_uint)(offset / unit);
    offset = (offset + sizes[r] + alignment - 1) / alignment * alignment;
  }
  *size = offset;
  return CLBT_SUCCESS;
}

clbt_status clbt__group_place(clbt_table *group, cl_mem storage) {
  const size_t unit = CLBT_REGION_UNIT_WORDS * sizeof(cl_uint);
  size_t sizes[CLBT_NUM_REGIONS];
  region_sizes(group, sizes);
  for (int r = 0; r < CLBT_NUM_REGIONS; ++r) {
    if (sizes[r] == 0) continue; /* a NONE group's export */
    cl_buffer_region region = {(size_t)group->at.at[r] * unit, sizes[r]};
    cl_int error = CL_SUCCESS;
    group->regions[r] =
        clCreateSubBuffer(storage, CL_MEM_READ_WRITE,
                          CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
    if (error) return clbt__cl_fail(error, "clCreateSubBuffer");
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__group_create(clbt_device *device,
                               const clbt__table_layout *layout,
                               clbt__engine *engine, clbt_table **out) {
  clbt_status status = CLBT_SUCCESS;
  clbt_table *group = calloc(1, sizeof *group);
  if (!group)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a table");
  clbt__device_retain(device);
  group->device = device;
  group->engine = engine;
  group->layout = *layout;
  group->rows =
      calloc((size_t)layout->max_num_reqs * layout->width, sizeof *group->rows);
  group->row_lengths = calloc(layout->max_num_reqs, sizeof *group->row_lengths);
  if (!group->rows || !group->row_lengths)
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                        "no memory for %u rows of width %u",
                        (unsigned)layout->max_num_reqs,
                        (unsigned)layout->width);
  if (!status)
    status = clbt__changes_init(&group->changes, layout->max_num_reqs);
  if (status) {
    clbt__group_destroy(group);
    return status;
  }
  *out = group;
  return CLBT_SUCCESS;
}

void clbt__group_destroy(clbt_table *group) {
  if (!group) return;
  for (int r = 0; r < CLBT_NUM_REGIONS; ++r)
    if (group->regions[r]) clReleaseMemObject(group->regions[r]);
  clbt__changes_free(&group->changes);
  free(group->rows);
  free(group->row_lengths);
  clbt_device_release(group->device);
  free(group);
}

clbt_status clbt__group_zero_device(clbt_table *group, uint64_t version,
                                    clbt__sequence *sequence) {
  const cl_int zero = 0;
  size_t rows = group->layout.max_num_reqs;
  clbt_status status =
      clbt__sequence_fill(sequence, group->regions[CLBT_REGION_ROWS], &zero,
                          sizeof zero, 0, rows_bytes(group));
  if (!status)
    status =
        clbt__sequence_fill(sequence, group->regions[CLBT_REGION_ROW_LENGTHS],
                            &zero, sizeof zero, 0, rows * sizeof(int32_t));
  /* Every row changed: the gather copies each again. */
  if (!status)
    status =
        clbt__sequence_fill(sequence, group->regions[CLBT_REGION_ROW_VERSIONS],
                            &version, sizeof version, 0, rows * sizeof version);
  /* The first fill may have run: the next commit rewrites every row. */
  if (status) group->device_stale = true;
  return status;
}

void clbt__group_zero_host(clbt_table *group) {
  memset(group->rows, 0, rows_bytes(group));
  memset(group->row_lengths, 0,
         group->layout.max_num_reqs * sizeof *group->row_lengths);
  /* Both sides are zero now: nothing is left to commit. */
  clbt__changes_reset(&group->changes, group->layout.max_num_reqs);
}
