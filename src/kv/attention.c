/*
 * The paged attention's descriptor (attention.h): a layer shape's config
 * checked once, its kernels shaped by the device's tuning row and built,
 * its rejected-token counter; and the pages a launch reads through.
 */
#include "kv/attention.h"

#include "base/config.h"
#include "base/status.h"
#include "device/program.h"
#include "device/queue.h"
#include "kv/layout.h"

#include <math.h>
#include <stdlib.h>

/* The largest head a descriptor takes: a CPU's work-item holds each of its
   rows whole. */
#define MAX_HEAD_SIZE 1024

/* ---- the config -------------------------------------------------------- */

/* query_dtype and output_dtype: named, or their defaults (an fp8 type's
   successor must be named). */
static clbt_status fill_dtypes(clbt_attention_config *c) {
  clbt_status status = clbt__kv_check_dtype(c->cache_dtype, "cache_dtype");
  if (!status && !c->query_dtype && c->cache_dtype == CLBT_KV_FP8_E4M3)
    status = clbt__fail(CLBT_INVALID_CONFIG,
                        "config->query_dtype is CLBT_KV_DTYPE_NONE with an "
                        "fp8 cache_dtype: name the query's type");
  if (!status && !c->query_dtype) c->query_dtype = c->cache_dtype;
  if (!status) status = clbt__kv_check_dtype(c->query_dtype, "query_dtype");
  if (!status && !c->output_dtype && c->query_dtype == CLBT_KV_FP8_E4M3)
    status = clbt__fail(CLBT_INVALID_CONFIG,
                        "config->output_dtype is CLBT_KV_DTYPE_NONE with an "
                        "fp8 query_dtype: name the output's type");
  if (!status && !c->output_dtype) c->output_dtype = c->query_dtype;
  if (!status) status = clbt__kv_check_dtype(c->output_dtype, "output_dtype");
  return status;
}

/* The square root of a head size, without libm: Newton's iterations from
   above settle on it, to the last bit or one below. */
static double square_root(uint32_t n) {
  double x = n;
  for (int i = 0; i < 64; ++i) x = 0.5 * (x + n / x);
  return x;
}

static clbt_status check_real(float value, const char *name) {
  if (!isfinite(value) || value < 0.0f)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->%s %g is not a finite value >= 0", name,
                      (double)value);
  return CLBT_SUCCESS;
}

/* Checks a config read from the caller and fills in its defaults. */
static clbt_status check_config(clbt_attention_config *c) {
  clbt_status status = clbt__config_require_nonzero(c->num_heads, "num_heads");
  if (!status)
    status = clbt__config_require_nonzero(c->num_kv_heads, "num_kv_heads");
  if (!status) status = clbt__config_require_nonzero(c->head_size, "head_size");
  if (!status)
    status = clbt__config_require_nonzero(c->block_size, "block_size");
  if (!status && c->num_heads % c->num_kv_heads)
    status = clbt__fail(CLBT_INVALID_CONFIG,
                        "config->num_heads %u is not a multiple of "
                        "num_kv_heads %u",
                        (unsigned)c->num_heads, (unsigned)c->num_kv_heads);
  if (!status && c->head_size > MAX_HEAD_SIZE)
    status = clbt__fail(CLBT_INVALID_CONFIG,
                        "config->head_size %u is above %d",
                        (unsigned)c->head_size, MAX_HEAD_SIZE);
  if (!status && (uint64_t)c->num_heads * c->head_size > INT32_MAX)
    status = clbt__fail(CLBT_SIZE_OVERFLOW,
                        "config->num_heads %u x head_size %u exceeds "
                        "INT32_MAX elements a token",
                        (unsigned)c->num_heads, (unsigned)c->head_size);
  if (!status && c->layout != CLBT_KV_LAYOUT_FLASH &&
      c->layout != CLBT_KV_LAYOUT_HEAD_MAJOR)
    status = clbt__fail(CLBT_INVALID_CONFIG,
                        "config->layout %d is not a clbt_kv_layout",
                        (int)c->layout);
  if (!status) status = fill_dtypes(c);
  if (!status) status = check_real(c->softmax_scale, "softmax_scale");
  if (!status) status = check_real(c->softcap, "softcap");
  if (!status && c->softmax_scale == 0.0f)
    c->softmax_scale = (float)(1.0 / square_root(c->head_size));
  return status;
}

/* ---- kernels ----------------------------------------------------------- */

static clbt_status make_kernel(clbt_attention *attention, cl_program program,
                               const char *name, size_t local,
                               cl_kernel *out) {
  cl_int error = CL_SUCCESS;
  size_t most = 0;
  clbt_status status = CLBT_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, name, &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, fail);
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(kernel, attention->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE, sizeof most,
                                        &most, NULL),
               status, fail);
  if (most < local) {
    status = clbt__fail(CLBT_UNSUPPORTED_DEVICE,
                        "the attention's %s kernel takes work-groups of %zu; "
                        "the device runs it in at most %zu "
                        "(CLBT_ATTENTION_TUNING can ask for fewer)",
                        name, local, most);
    goto fail;
  }
  *out = kernel;
  return CLBT_SUCCESS;
fail:
  if (kernel) clReleaseKernel(kernel);
  return status;
}

static void release_kernels(clbt__attention_kernels *k) {
  cl_kernel kernels[3] = {k->decode, k->reduce, k->tiles};
  for (int i = 0; i < 3; ++i)
    if (kernels[i]) clReleaseKernel(kernels[i]);
  k->decode = k->reduce = k->tiles = NULL;
}

clbt_status clbt__attention_make_kernels(clbt_attention *attention,
                                         uint32_t index, uint32_t vec) {
  clbt__attention_kernels *k = &attention->kernels[index];
  if (k->decode) return CLBT_SUCCESS;
  k->shape = clbt__attention_shape_with_vec(&attention->kernels[0].shape, vec);
  char defines[CLBT__SPECIFIC_OPTIONS_SIZE];
  clbt__attention_defines(&k->shape, defines, sizeof defines);
  cl_program program = NULL;
  clbt_status status = clbt__program_get(attention->device,
                                         CLBT__SOURCE_ATTENTION, defines,
                                         &program);
  if (!status)
    status = make_kernel(attention, program, "clbt_attention_decode",
                         k->shape.local, &k->decode);
  if (!status)
    status = make_kernel(attention, program, "clbt_attention_reduce",
                         k->shape.reduce_local, &k->reduce);
  if (!status && k->shape.tile_local)
    status = make_kernel(attention, program, "clbt_attention_tiles",
                         k->shape.tile_local, &k->tiles);
  if (status) release_kernels(k);
  return status;
}

/* ---- the descriptor ---------------------------------------------------- */

clbt_status clbt__attention_create(clbt_device *device,
                                   const clbt_attention_config *config,
                                   clbt_attention **out) {
  clbt_attention_config read = *config;
  clbt__attention_tuning tuning;
  clbt_status status = check_config(&read);
  if (!status)
    status = clbt__attention_tuning_for(device->properties.type, &tuning);
  if (status) return status;
  clbt_attention *attention = calloc(1, sizeof *attention);
  if (!attention)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for an attention");
  clbt__device_retain(device);
  attention->device = device;
  attention->config = read;
  attention->tuning = tuning;
  attention->facts = (clbt__attention_device){
      device->properties.local_mem_size, device->properties.compute_units};
  status = clbt__attention_shape_of(&read, &tuning, attention->facts,
                                    &attention->kernels[0].shape);
  if (!status)
    status = clbt__attention_make_kernels(attention, CLBT__ATT_ALIGNED,
                                          attention->kernels[0].shape.vec);
  if (!status) status = clbt__create_counter(device, &attention->rejected);
  if (status) {
    clbt__attention_destroy(attention);
    return status;
  }
  *out = attention;
  return CLBT_SUCCESS;
}

void clbt__attention_destroy(clbt_attention *attention) {
  if (!attention) return;
  for (int k = 0; k < CLBT__ATT_NUM_KERNELS; ++k)
    release_kernels(&attention->kernels[k]);
  clbt__known_buffers_release(&attention->known);
  if (attention->rejected) clReleaseMemObject(attention->rejected);
  if (attention->partials) clReleaseMemObject(attention->partials);
  clbt_device_release(attention->device);
  free(attention);
}

/* ---- pages ------------------------------------------------------------- */

clbt_status clbt__attention_pages(const clbt_kv_cache *cache,
                                  const clbt__table_view *table,
                                  const char *name, clbt_kv_pages *out) {
  const clbt_kv_cache_config *c = &cache->config;
  if (table && table->context != cache->device->context)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "%s belongs to another OpenCL context than the "
                      "cache's device",
                      name);
  if (table && !table->maps_tokens)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s is a CLBT_SLOT_MODE_NONE table: its rows hold no "
                      "KV blocks",
                      name);
  if (table && table->kernel_block_size != c->block_size)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s's kernel block size %u is not the cache's "
                      "block_size %u",
                      name, (unsigned)table->kernel_block_size,
                      (unsigned)c->block_size);
  /* clbt_kv_pages_local_tokens counts a virtual block's tokens, world x
     block size, in 32 bits: past them it would divide by the wrap. A table
     takes any world; its pages do not. */
  if (table &&
      (uint64_t)table->cp_world_size * table->kv_block_size > UINT32_MAX)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s's cp_world_size %u x block size %u exceeds "
                      "UINT32_MAX tokens",
                      name, (unsigned)table->cp_world_size,
                      (unsigned)table->kv_block_size);
  clbt__kv_pages_of_config(c, out);
  if (!table) return CLBT_SUCCESS;
  out->rows_offset = table->rows_offset;
  out->row_lengths_offset = table->row_lengths_offset;
  out->row_stride = out->row_capacity = table->row_stride;
  out->num_rows = table->num_rows;
  out->flags = CLBT_KV_PAGES_ROW_LENGTHS;
  out->kv_block_size = table->kv_block_size;
  out->cp_world_size = table->cp_world_size;
  out->cp_rank = table->cp_rank;
  out->cp_interleave_size = table->cp_interleave_size;
  return CLBT_SUCCESS;
}
