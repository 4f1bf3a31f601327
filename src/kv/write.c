/*
 * The KV-cache write (cl/kv_cache.cl, vLLM's reshape_and_cache_flash): one
 * launch a write, whose kernel the cache made for its types and alignment;
 * a write checks only its own arguments (write_checks.c).
 */
#include "kv/write.h"

#include "base/status.h"
#include "base/tuning.h"
#include "device/program.h"
#include "device/queue.h"
#include "kv/layout.h"
#include "kv/write_checks.h"

#include <stdio.h>

/* The most work-items a write launches on a GPU (an H200 holds about
   270000 at once). */
#define MAX_GPU_ITEMS ((size_t)1 << 24)

/* The buffers a write sets, in clbt__kv_kernel.bound's order. */
static const cl_uint bound_arguments[3] = {CLBT_KV_ARGUMENT_KEY,
                                           CLBT_KV_ARGUMENT_VALUE,
                                           CLBT_KV_ARGUMENT_SLOT_MAPPING};

static clbt_status make_kernel(clbt_kv_cache *cache, clbt__kv_kernel *k,
                               uint32_t chunk) {
  char defines[CLBT__SPECIFIC_OPTIONS_SIZE];
  snprintf(defines, sizeof defines,
           "-DCLBT_KV_INPUT=%d -DCLBT_KV_CACHE=%d -DCLBT_KV_CHUNK=%u "
           "-DCLBT_KV_FP64=%d",
           (int)cache->config.input_dtype, (int)cache->config.cache_dtype,
           (unsigned)chunk, cache->fp64 ? 1 : 0);
  cl_program program = NULL;
  cl_int error = CL_SUCCESS;
  size_t kernel_max_group = 0;
  clbt_status status =
      clbt__program_get(cache->device, CLBT__SOURCE_KV_CACHE, defines, &program);
  if (status) return status;
  cl_kernel kernel = clCreateKernel(program, "clbt_kv_cache_write", &error);
  CLBT__CL_CHECK(error, "clCreateKernel", status, fail);
  CLBT__CL_TRY(clGetKernelWorkGroupInfo(kernel, cache->device->id,
                                        CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max_group,
                                        &kernel_max_group, NULL),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, CLBT_KV_ARGUMENT_KEY_CACHE,
                              sizeof(cl_mem), &cache->key_cache),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, CLBT_KV_ARGUMENT_VALUE_CACHE,
                              sizeof(cl_mem), &cache->value_cache),
               status, fail);
  CLBT__CL_TRY(clSetKernelArg(kernel, CLBT_KV_ARGUMENT_REJECTED,
                              sizeof(cl_mem), &cache->rejected),
               status, fail);
  *k = (clbt__kv_kernel){kernel, chunk,
                         clbt__tuning_local_size(
                             clbt__tuning_for(cache->device->properties.type),
                             kernel_max_group),
                         {{NULL, 0, false}, {NULL, 0, false}, {NULL, 0, false}}};
  return CLBT_SUCCESS;
fail:
  if (kernel) clReleaseKernel(kernel);
  return status;
}

clbt_status clbt__kv_write_prepare(clbt_kv_cache *cache) {
  return make_kernel(cache, &cache->kernels[CLBT__KV_ALIGNED],
                     clbt__kv_layout_chunk(&cache->config));
}

/* The kernel for a write's inputs: the aligned one when they are aligned to
   its chunk, else the single-element one, made now if need be. */
static clbt_status kernel_for(clbt_kv_cache *cache, const clbt_kv_write *w,
                              clbt__kv_kernel **k) {
  uint32_t chunk = cache->kernels[CLBT__KV_ALIGNED].chunk;
  uint64_t all = w->key_offset | w->key_token_stride | w->value_offset |
                 w->value_token_stride;
  *k = &cache->kernels[CLBT__KV_ALIGNED];
  if (all % chunk == 0) return CLBT_SUCCESS;
  *k = &cache->kernels[CLBT__KV_SINGLE];
  return (*k)->kernel ? CLBT_SUCCESS : make_kernel(cache, *k, 1);
}

/* The launch geometry of n tokens of `chunks` chunks each: on a GPU a
   token's lanes span its chunks (up to a work-group), on a CPU one
   work-item takes whole tokens. */
static void geometry(const clbt_kv_cache *cache, const clbt__kv_kernel *k,
                     uint32_t num_tokens, uint32_t chunks, uint32_t *lanes,
                     size_t *global_size) {
  size_t local = k->local_size;
  const clbt__tuning *tuning = clbt__tuning_for(cache->device->properties.type);
  if (!tuning->gpu_code) {
    *lanes = 1;
    *global_size = local * clbt__tuning_cpu_groups(
                               tuning, cache->device->properties.compute_units,
                               (size_t)num_tokens * chunks);
    return;
  }
  uint32_t width = 1;
  while (width < chunks && width < local) width *= 2;
  *lanes = width;
  size_t per_group = local / width;
  size_t groups = (num_tokens + per_group - 1) / per_group;
  /* The kernel counts work-items in 32 bits and walks the tokens past
     its grid: more groups than a GPU holds at once gain nothing. */
  if (groups > MAX_GPU_ITEMS / local) groups = MAX_GPU_ITEMS / local;
  *global_size = groups * local;
}

/* Sets the arguments of a write that changed since the kernel's last. */
static clbt_status set_arguments(clbt__kv_kernel *k,
                                 const clbt__known_buffers *known,
                                 const clbt__kv_arguments *a,
                                 const clbt_kv_write *w) {
  const cl_mem buffers[3] = {w->key, w->value, w->slot_mapping};
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clSetKernelArg(k->kernel, CLBT_KV_ARGUMENT_ARGUMENTS, sizeof *a,
                              a),
               status, done);
  for (cl_uint i = 0; !status && i < 3; ++i)
    status = clbt__bound_buffer_set(
        k->kernel, bound_arguments[i], &k->bound[i], buffers[i],
        clbt__known_buffer_serial(known, buffers[i]));
done:
  return status;
}

clbt_status clbt__kv_write_enqueue(clbt_kv_cache *cache, clbt_kv_write *w,
                                   cl_uint num_events,
                                   const cl_event *wait_list,
                                   cl_event *event) {
  clbt_status status = clbt__kv_write_check(cache, w);
  if (!status)
    status = clbt__check_wait_list(cache->device, "KV cache", num_events,
                                   wait_list);
  clbt__kv_kernel *k = NULL;
  if (!status && w->num_tokens > 0) status = kernel_for(cache, w, &k);
  if (status) return status;
  clbt__sequence sequence =
      clbt__sequence_start(cache->device, num_events, wait_list, event != NULL);
  if (w->num_tokens > 0) {
    const clbt_kv_cache_config *c = &cache->config;
    clbt__kv_arguments a = cache->arguments;
    size_t global_size = 0;
    a.key_at = w->key_offset;
    a.key_stride = w->key_token_stride;
    a.value_at = w->value_offset;
    a.value_stride = w->value_token_stride;
    a.slots_at = w->slot_mapping_offset;
    a.num_tokens = w->num_tokens;
    a.chunks = c->num_kv_heads * (c->head_size / k->chunk);
    a.k_scale = w->k_scale;
    a.v_scale = w->v_scale;
    geometry(cache, k, w->num_tokens, a.chunks, &a.lanes, &global_size);
    status = set_arguments(k, &cache->known, &a, w);
    if (!status)
      status = clbt__sequence_kernel(&sequence, k->kernel, global_size,
                                     k->local_size);
  }
  return clbt__sequence_end(&sequence, status, event);
}
