/*
 * The KV-cache write (cl/kv_cache.cl, vLLM's reshape_and_cache_flash): a
 * layer's paged cache described and checked once, at creation, then one
 * launch a write that checks only its own arguments. A surface over the
 * device layer, beside the table engine: it needs no table, only the slot
 * mapping a table's step computed (or any int64 buffer).
 */
#include "base/config.h"
#include "base/status.h"
#include "base/tuning.h"
#include "cl/kv_cache.h"
#include "device/bound_buffer.h"
#include "device/handle.h"
#include "device/known_buffers.h"
#include "device/program.h"
#include "device/queue.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(CLBT_KV_FLOAT32 == CLBT_KV_TYPE_FLOAT32 &&
                   CLBT_KV_FLOAT16 == CLBT_KV_TYPE_FLOAT16 &&
                   CLBT_KV_BFLOAT16 == CLBT_KV_TYPE_BFLOAT16 &&
                   CLBT_KV_FP8_E4M3 == CLBT_KV_TYPE_FP8_E4M3,
               "the header's types are the kernel's");

/* The kernels of a cache: chunks of its alignment, and single elements
   for inputs that are not aligned to it (made on the first such write). */
enum { ALIGNED, SINGLE, NUM_KERNELS };

/* The most work-items a write launches on a GPU (an H200 holds about
   270000 at once). */
#define MAX_GPU_ITEMS ((size_t)1 << 24)

typedef struct kv_kernel {
  cl_kernel kernel;       /* NULL until made */
  uint32_t chunk;         /* elements a work-item moves at a time */
  size_t local_size;
  clbt__bound_buffer bound[3]; /* the key, value and slot mapping */
} kv_kernel;

struct clbt_kv_cache {
  clbt_device *device;
  clbt_kv_cache_config config; /* defaults filled in */
  uint64_t tensor_span;        /* elements K (and V) spans from its offset */
  cl_mem key_cache, value_cache; /* retained; the same one for one buffer */
  cl_mem rejected;               /* uint32, the rejected-token count */
  clbt_kv_arguments arguments;   /* the cache's part, filled at creation */
  kv_kernel kernels[NUM_KERNELS];
  bool fp64;                     /* the device has doubles */
  clbt__known_buffers known;     /* the write inputs checked lately */
};

size_t clbt_kv_dtype_size(clbt_kv_dtype dtype) {
  switch (dtype) {
    case CLBT_KV_FLOAT32: return 4;
    case CLBT_KV_FLOAT16:
    case CLBT_KV_BFLOAT16: return 2;
    case CLBT_KV_FP8_E4M3: return 1;
    default: return 0;
  }
}

/* ---- checked arithmetic -------------------------------------------------- */

static bool add_fits(uint64_t a, uint64_t b, uint64_t *sum) {
  *sum = a + b;
  return *sum >= a;
}

static bool multiply_fits(uint64_t a, uint64_t b, uint64_t *product) {
  *product = a * b;
  return a == 0 || *product / a == b;
}

/* ---- the cache's config -------------------------------------------------- */

static clbt_status check_dtypes(const clbt_kv_cache_config *c) {
  if (!clbt_kv_dtype_size(c->cache_dtype))
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->cache_dtype %d is not a clbt_kv_dtype",
                      (int)c->cache_dtype);
  if (c->input_dtype != CLBT_KV_DTYPE_NONE &&
      !clbt_kv_dtype_size(c->input_dtype))
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->input_dtype %d is not a clbt_kv_dtype",
                      (int)c->input_dtype);
  bool fp8_cache = c->cache_dtype == CLBT_KV_FP8_E4M3;
  if (fp8_cache && c->input_dtype == CLBT_KV_DTYPE_NONE)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->input_dtype is CLBT_KV_DTYPE_NONE with an fp8 "
                      "cache_dtype: name the type of the K/V it takes");
  if (!fp8_cache && c->input_dtype == CLBT_KV_FP8_E4M3)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->input_dtype is CLBT_KV_FP8_E4M3 and "
                      "cache_dtype %d: fp8 K/V go only to an fp8 cache",
                      (int)c->cache_dtype);
  return CLBT_SUCCESS;
}

static clbt_status require_nonzero(uint32_t value, const char *name) {
  if (value == 0)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->%s is 0; it must be >= 1",
                      name);
  return CLBT_SUCCESS;
}

static clbt_status check_fields(const clbt_kv_cache_config *c) {
  if (!c->key_cache)
    return clbt__fail(CLBT_NULL_ARGUMENT, "config->key_cache is NULL");
  if (c->layout != CLBT_KV_LAYOUT_FLASH &&
      c->layout != CLBT_KV_LAYOUT_HEAD_MAJOR)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->layout %d is not a clbt_kv_layout",
                      (int)c->layout);
  clbt_status status = check_dtypes(c);
  if (!status) status = require_nonzero(c->num_kv_heads, "num_kv_heads");
  if (!status) status = require_nonzero(c->head_size, "head_size");
  if (!status) status = require_nonzero(c->block_size, "block_size");
  if (!status) status = require_nonzero(c->num_blocks, "num_blocks");
  /* The kernel counts a token's chunks in 32 bits, and a GPU's lanes step
     past the last one by up to a work-group: a bound of INT32_MAX leaves
     that step room below 2^32, where the count would wrap and never end. */
  if (!status && (uint64_t)c->num_kv_heads * c->head_size > INT32_MAX)
    status = clbt__fail(CLBT_SIZE_OVERFLOW,
                        "config->num_kv_heads %u x head_size %u exceeds "
                        "INT32_MAX elements a token",
                        (unsigned)c->num_kv_heads, (unsigned)c->head_size);
  return status;
}

/* The layout's strides and the one-buffer value_offset, where 0. */
static clbt_status fill_defaults(clbt_kv_cache_config *c) {
  bool one_buffer = !c->value_cache || c->value_cache == c->key_cache;
  uint64_t row = (uint64_t)c->num_kv_heads * c->head_size;
  uint64_t block = row * c->block_size; /* < 2^96 / 2^32: fits */
  if (!c->input_dtype) c->input_dtype = c->cache_dtype;
  if (!c->head_stride)
    c->head_stride = c->layout == CLBT_KV_LAYOUT_FLASH
                         ? c->head_size
                         : (uint64_t)c->block_size * c->head_size;
  if (!c->page_stride)
    c->page_stride = c->layout == CLBT_KV_LAYOUT_FLASH ? row : c->head_size;
  if (!c->block_stride) c->block_stride = one_buffer ? 2 * block : block;
  if (one_buffer && !c->value_offset &&
      !add_fits(c->key_offset, block, &c->value_offset))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "config->key_offset %llu plus a block's %llu elements "
                      "exceeds 64 bits",
                      (unsigned long long)c->key_offset,
                      (unsigned long long)block);
  return CLBT_SUCCESS;
}

/* One dimension of the cache's addresses: its stride and extent. */
typedef struct dimension {
  const char *name;
  uint64_t stride, count;
} dimension;

static int by_stride(const void *a, const void *b) {
  uint64_t x = ((const dimension *)a)->stride;
  uint64_t y = ((const dimension *)b)->stride;
  return (x > y) - (x < y);
}

/*
 * No two elements share an address: taken from the smallest stride up,
 * each dimension's stride clears every element the smaller ones reach.
 * (A layout that interleaves dimensions some other way is refused too.)
 * *span gets the elements one tensor spans, its last one's index + 1.
 */
static clbt_status check_addresses(const clbt_kv_cache_config *c,
                                   bool one_buffer, uint64_t *span) {
  dimension d[5] = {{"head_size", 1, c->head_size},
                    {"head_stride", c->head_stride, c->num_kv_heads},
                    {"page_stride", c->page_stride, c->block_size},
                    {"block_stride", c->block_stride, c->num_blocks}};
  size_t n = 4;
  uint64_t kv_distance = c->value_offset > c->key_offset
                             ? c->value_offset - c->key_offset
                             : c->key_offset - c->value_offset;
  if (one_buffer) d[n++] = (dimension){"value_offset", kv_distance, 2};
  qsort(d, n, sizeof d[0], by_stride);
  uint64_t reach = 0; /* the largest index the smaller dimensions reach */
  for (size_t i = 0; i < n; ++i) {
    if (d[i].count == 1) continue;
    if (d[i].stride <= reach)
      return clbt__fail(CLBT_INVALID_CONFIG,
                        "config->%s %llu is within the %llu elements the "
                        "smaller strides span: two elements would share an "
                        "address",
                        d[i].name, (unsigned long long)d[i].stride,
                        (unsigned long long)reach + 1);
    uint64_t extent;
    if (!multiply_fits(d[i].count - 1, d[i].stride, &extent) ||
        !add_fits(reach, extent, &reach))
      return clbt__fail(CLBT_SIZE_OVERFLOW,
                        "config->%s %llu x %llu exceeds 64 bits", d[i].name,
                        (unsigned long long)d[i].stride,
                        (unsigned long long)d[i].count);
  }
  /* The K/V dimension, if any, spans both tensors: take it back out. */
  if (one_buffer) reach -= kv_distance;
  *span = reach + 1;
  return CLBT_SUCCESS;
}

/* A cache buffer: of the device's context, and holding its tensor. */
static clbt_status check_cache_buffer(const clbt_kv_cache *cache, cl_mem buffer,
                                      const char *name,
                                      const char *offset_name, uint64_t offset,
                                      uint64_t span) {
  clbt_status status = CLBT_SUCCESS;
  cl_context context = NULL;
  size_t size = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof context,
                                  &context, NULL),
               status, done);
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size,
                                  NULL),
               status, done);
  if (context != cache->device->context)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "config->%s belongs to another OpenCL context than the "
                      "device's",
                      name);
  uint64_t end, bytes;
  size_t element = clbt_kv_dtype_size(cache->config.cache_dtype);
  if (!add_fits(offset, span, &end) || !multiply_fits(end, element, &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "config->%s's elements end past 64 bits of bytes",
                      name);
  if (bytes > size)
    return clbt__fail(CLBT_BUFFER_TOO_SMALL,
                      "config->%s holds %zu bytes; %s %llu and a tensor of "
                      "%llu elements (%u blocks of %u slots of %u heads of "
                      "%u) need %llu",
                      name, size, offset_name, (unsigned long long)offset, (unsigned long long)span,
                      (unsigned)cache->config.num_blocks,
                      (unsigned)cache->config.block_size,
                      (unsigned)cache->config.num_kv_heads,
                      (unsigned)cache->config.head_size,
                      (unsigned long long)bytes);
done:
  return status;
}

/* Where a buffer's bytes lie: in its parent from its origin, for a
   sub-buffer (OpenCL makes none of a sub-buffer), else in itself from 0. */
static clbt_status buffer_root(cl_mem buffer, cl_mem *root, size_t *origin) {
  clbt_status status = CLBT_SUCCESS;
  cl_mem parent = NULL;
  size_t offset = 0;
  CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_ASSOCIATED_MEMOBJECT,
                                  sizeof parent, &parent, NULL),
               status, done);
  if (parent)
    CLBT__CL_TRY(clGetMemObjectInfo(buffer, CL_MEM_OFFSET, sizeof offset,
                                    &offset, NULL),
                 status, done);
  *root = parent ? parent : buffer;
  *origin = offset;
done:
  return status;
}

/*
 * Two cache handles that are one buffer (a sub-buffer and its parent, or
 * two sub-buffers of one): K's and V's elements may share no address, as
 * check_addresses makes sure of one handle's. A whole number of elements
 * apart, they are checked as one buffer's K and V (whose blocks may
 * interleave, [blocks][2][...]); else their spans must not overlap. Both
 * buffers hold their tensors (check_cache_buffer), so no sum here passes
 * the parent's size.
 */
static clbt_status check_kv_apart(const clbt_kv_cache *cache, uint64_t span) {
  const clbt_kv_cache_config *c = &cache->config;
  cl_mem key_root = NULL, value_root = NULL;
  size_t key_origin = 0, value_origin = 0;
  clbt_status status = buffer_root(c->key_cache, &key_root, &key_origin);
  if (!status) status = buffer_root(c->value_cache, &value_root, &value_origin);
  if (status || key_root != value_root) return status;
  uint64_t element = clbt_kv_dtype_size(c->cache_dtype);
  uint64_t k = key_origin + c->key_offset * element;
  uint64_t v = value_origin + c->value_offset * element;
  uint64_t distance = k > v ? k - v : v - k;
  bool shared = distance < span * element;
  if (shared && distance % element == 0) {
    clbt_kv_cache_config one = *c;
    uint64_t one_span = 0;
    one.key_offset = 0;
    one.value_offset = distance / element;
    shared = check_addresses(&one, true, &one_span) != CLBT_SUCCESS;
  }
  if (shared)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->key_cache and value_cache are one buffer (a "
                      "sub-buffer and its parent, or two sub-buffers of "
                      "one): V, %llu bytes from K, would share an address "
                      "with it",
                      (unsigned long long)distance);
  return CLBT_SUCCESS;
}

/* The most elements a work-item may move at a time: a chunk of at most 16
   bytes on either side, dividing every address of the cache. */
static uint32_t cache_chunk(const clbt_kv_cache_config *c) {
  size_t in = clbt_kv_dtype_size(c->input_dtype);
  size_t out = clbt_kv_dtype_size(c->cache_dtype);
  size_t widest = in > out ? in : out;
  uint64_t all = c->head_size | c->head_stride | c->page_stride |
                 c->block_stride | c->key_offset | c->value_offset;
  uint32_t chunk = CLBT_KV_MAX_CHUNK;
  while (chunk > 1 && (chunk * widest > CLBT_KV_CHUNK_BYTES ||
                       all % chunk != 0))
    chunk /= 2;
  return chunk;
}

/* ---- kernels ------------------------------------------------------------ */

static clbt_status make_kernel(clbt_kv_cache *cache, kv_kernel *k,
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
  cl_kernel kernel = clCreateKernel(program, "kv_cache_write", &error);
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
  *k = (kv_kernel){kernel, chunk,
                   clbt__tuning_local_size(
                       clbt__tuning_for(cache->device->properties.type),
                       kernel_max_group),
                   {{NULL, 0, false}, {NULL, 0, false}, {NULL, 0, false}}};
  return CLBT_SUCCESS;
fail:
  if (kernel) clReleaseKernel(kernel);
  return status;
}

/* Whether the device has doubles, for an exact fp8 quotient. */
static clbt_status query_fp64(clbt_kv_cache *cache) {
  cl_device_fp_config config = 0;
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clGetDeviceInfo(cache->device->id, CL_DEVICE_DOUBLE_FP_CONFIG,
                               sizeof config, &config, NULL),
               status, done);
  cache->fp64 = config != 0;
done:
  return status;
}

/* The counter, zeroed: enqueued before any write can reach it. */
static clbt_status create_counter(clbt_kv_cache *cache) {
  cl_int error = CL_SUCCESS;
  const cl_uint zero = 0;
  cache->rejected = clCreateBuffer(cache->device->context, CL_MEM_READ_WRITE,
                                   sizeof zero, NULL, &error);
  if (error) return clbt__cl_fail(error, "clCreateBuffer");
  clbt__sequence sequence =
      clbt__sequence_start(cache->device, 0, NULL, false);
  return clbt__sequence_end(
      &sequence,
      clbt__sequence_fill(&sequence, cache->rejected, &zero, sizeof zero, 0,
                          sizeof zero),
      NULL);
}

/* ---- creation ----------------------------------------------------------- */

/* Keeps a reference to a caller's buffer in *kept. */
static clbt_status retain(cl_mem buffer, cl_mem *kept) {
  cl_int error = clRetainMemObject(buffer);
  if (error) return clbt__cl_fail(error, "clRetainMemObject");
  *kept = buffer;
  return CLBT_SUCCESS;
}

/* Everything about a config that needs no OpenCL call; *span gets the
   elements a tensor spans. */
static clbt_status check_config(clbt_kv_cache_config *c, uint64_t *span) {
  clbt_status status = check_fields(c);
  if (!status) status = fill_defaults(c);
  bool one_buffer = !c->value_cache || c->value_cache == c->key_cache;
  if (!status) status = check_addresses(c, one_buffer, span);
  return status;
}

static void fill_arguments(clbt_kv_cache *cache) {
  const clbt_kv_cache_config *c = &cache->config;
  clbt_kv_arguments *a = &cache->arguments;
  memset(a, 0, sizeof *a);
  a->key_cache_at = c->key_offset;
  a->value_cache_at = c->value_offset;
  a->block_stride = c->block_stride;
  a->page_stride = c->page_stride;
  a->head_stride = c->head_stride;
  a->num_slots = (uint64_t)c->num_blocks * c->block_size;
  a->block_size = c->block_size;
  a->head_size = c->head_size;
}

clbt_status clbt_kv_cache_create(clbt_device *device,
                                 const clbt_kv_cache_config *config,
                                 clbt_kv_cache **out) {
  clbt_kv_cache_config read;
  uint64_t span = 0;
  clbt_status status = clbt__kv_cache_config_read(config, &read);
  if (!status && (!device || !out))
    status = clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                        !device ? "device" : "out");
  if (!status) status = check_config(&read, &span);
  if (status) return status;
  clbt_kv_cache *cache = calloc(1, sizeof *cache);
  if (!cache)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a KV cache");
  clbt__device_retain(device);
  cache->device = device;
  cache->config = read;
  status = check_cache_buffer(cache, read.key_cache, "key_cache",
                              "key_offset", read.key_offset, span);
  cl_mem value_cache = read.value_cache ? read.value_cache : read.key_cache;
  if (!status)
    status = check_cache_buffer(cache, value_cache,
                                read.value_cache ? "value_cache" : "key_cache",
                                "value_offset", read.value_offset, span);
  if (!status && read.value_cache && read.value_cache != read.key_cache)
    status = check_kv_apart(cache, span);
  if (!status)
    status = clbt__check_writable(NULL, read.key_cache, "config->key_cache");
  if (!status && read.value_cache)
    status = clbt__check_writable(NULL, read.value_cache,
                                  "config->value_cache");
  if (!status) status = retain(read.key_cache, &cache->key_cache);
  if (!status) status = retain(value_cache, &cache->value_cache);
  if (!status) status = query_fp64(cache);
  if (!status) status = create_counter(cache);
  if (!status)
    status = make_kernel(cache, &cache->kernels[ALIGNED], cache_chunk(&read));
  if (status) {
    clbt_kv_cache_destroy(cache);
    return status;
  }
  fill_arguments(cache);
  cache->tensor_span = span;
  *out = cache;
  return CLBT_SUCCESS;
}

void clbt_kv_cache_destroy(clbt_kv_cache *cache) {
  if (!cache) return;
  for (int k = 0; k < NUM_KERNELS; ++k)
    if (cache->kernels[k].kernel) clReleaseKernel(cache->kernels[k].kernel);
  clbt__known_buffers_release(&cache->known);
  if (cache->rejected) clReleaseMemObject(cache->rejected);
  if (cache->key_cache) clReleaseMemObject(cache->key_cache);
  if (cache->value_cache) clReleaseMemObject(cache->value_cache);
  clbt_device_release(cache->device);
  free(cache);
}

clbt_status clbt_kv_cache_get_addressing(const clbt_kv_cache *cache,
                                         clbt_kv_cache_addressing *out) {
  if (!cache || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !cache ? "cache" : "out");
  const clbt_kv_cache_config *c = &cache->config;
  *out = (clbt_kv_cache_addressing){c->key_offset,   c->value_offset,
                                    c->block_stride, c->page_stride,
                                    c->head_stride,  cache->tensor_span};
  return CLBT_SUCCESS;
}

/* ---- a write ------------------------------------------------------------ */

static clbt_status check_scale(float scale, const char *name) {
  if (!isfinite(scale) || !(scale > 0.0f))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "write->%s %g is not a finite value above 0", name,
                      (double)scale);
  return CLBT_SUCCESS;
}

/* The token stride, 0 meaning a row of heads, at least that row. */
static clbt_status check_stride(uint64_t *stride, uint64_t row,
                                const char *name) {
  if (*stride == 0) *stride = row;
  if (*stride < row)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "write->%s %llu is below num_kv_heads x head_size %llu",
                      name, (unsigned long long)*stride,
                      (unsigned long long)row);
  return CLBT_SUCCESS;
}

/* A write's input buffer: num_tokens rows of `row` elements of `element`
   bytes, `stride` apart from `offset`. */
static clbt_status check_input(clbt_kv_cache *cache, cl_mem buffer,
                               const char *name, uint32_t num_tokens,
                               uint64_t offset, uint64_t stride, uint64_t row,
                               size_t element) {
  uint64_t last, end, bytes;
  if (!multiply_fits(num_tokens - 1, stride, &last) ||
      !add_fits(offset, last, &end) || !add_fits(end, row, &end) ||
      !multiply_fits(end, element, &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "write->%s: num_tokens %u rows %llu apart from %llu "
                      "end past 64 bits of bytes",
                      name, (unsigned)num_tokens, (unsigned long long)stride,
                      (unsigned long long)offset);
  size_t size = 0;
  char qualified[32];
  snprintf(qualified, sizeof qualified, "write->%s", name);
  clbt_status status = clbt__known_buffer_size(cache->device, &cache->known,
                                               buffer, qualified, "KV cache",
                                               &size);
  if (!status && bytes > size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "write->%s holds %zu bytes; num_tokens %u rows %llu "
                        "elements apart from element %llu need %llu",
                        name, size, (unsigned)num_tokens,
                        (unsigned long long)stride,
                        (unsigned long long)offset,
                        (unsigned long long)bytes);
  return status;
}

/* The slot mapping: an int64 entry for each token from its offset. */
static clbt_status check_slot_mapping(clbt_kv_cache *cache,
                                      const clbt_kv_write *w) {
  uint64_t end, bytes;
  if (!add_fits(w->slot_mapping_offset, w->num_tokens, &end) ||
      !multiply_fits(end, sizeof(int64_t), &bytes))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "write->slot_mapping_offset %llu plus num_tokens %u "
                      "entries ends past 64 bits of bytes",
                      (unsigned long long)w->slot_mapping_offset,
                      (unsigned)w->num_tokens);
  size_t size = 0;
  clbt_status status = clbt__known_buffer_size(
      cache->device, &cache->known, w->slot_mapping, "write->slot_mapping",
      "KV cache", &size);
  if (!status && bytes > size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "write->slot_mapping holds %zu bytes; num_tokens %u "
                        "entries from entry %llu need %llu",
                        size, (unsigned)w->num_tokens,
                        (unsigned long long)w->slot_mapping_offset,
                        (unsigned long long)bytes);
  return status;
}

/* Checks a write (read, its strides filled in) against the cache. */
static clbt_status check_write(clbt_kv_cache *cache, clbt_kv_write *w) {
  const clbt_kv_cache_config *c = &cache->config;
  uint64_t row = (uint64_t)c->num_kv_heads * c->head_size;
  if (w->num_tokens > INT32_MAX)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "write->num_tokens %u exceeds INT32_MAX",
                      (unsigned)w->num_tokens);
  clbt_status status = check_stride(&w->key_token_stride, row,
                                    "key_token_stride");
  if (!status)
    status = check_stride(&w->value_token_stride, row, "value_token_stride");
  if (!status && c->cache_dtype == CLBT_KV_FP8_E4M3 &&
      c->input_dtype != CLBT_KV_FP8_E4M3) {
    status = check_scale(w->k_scale, "k_scale");
    if (!status) status = check_scale(w->v_scale, "v_scale");
  }
  if (status || w->num_tokens == 0) return status;
  const char *missing = !w->key ? "key" : !w->value ? "value"
                        : !w->slot_mapping ? "slot_mapping" : NULL;
  if (missing)
    return clbt__fail(CLBT_NULL_ARGUMENT, "write->%s is NULL with num_tokens %u",
                      missing, (unsigned)w->num_tokens);
  size_t element = clbt_kv_dtype_size(c->input_dtype);
  status = check_input(cache, w->key, "key", w->num_tokens, w->key_offset,
                       w->key_token_stride, row, element);
  if (!status)
    status = check_input(cache, w->value, "value", w->num_tokens,
                         w->value_offset, w->value_token_stride, row, element);
  if (!status) status = check_slot_mapping(cache, w);
  return status;
}

/* The kernel for a write's inputs: the aligned one when they are aligned to
   its chunk, else the single-element one, made now if need be. */
static clbt_status kernel_for(clbt_kv_cache *cache, const clbt_kv_write *w,
                              kv_kernel **k) {
  uint32_t chunk = cache->kernels[ALIGNED].chunk;
  uint64_t all = w->key_offset | w->key_token_stride | w->value_offset |
                 w->value_token_stride;
  *k = &cache->kernels[ALIGNED];
  if (all % chunk == 0) return CLBT_SUCCESS;
  *k = &cache->kernels[SINGLE];
  return (*k)->kernel ? CLBT_SUCCESS : make_kernel(cache, *k, 1);
}

/* The launch geometry of n tokens of `chunks` chunks each: on a GPU a
   token's lanes span its chunks (up to a work-group), on a CPU one
   work-item takes whole tokens. */
static void geometry(const clbt_kv_cache *cache, const kv_kernel *k,
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
static clbt_status set_arguments(kv_kernel *k,
                                 const clbt__known_buffers *known,
                                 const clbt_kv_arguments *a,
                                 const clbt_kv_write *w) {
  const cl_mem buffers[3] = {w->key, w->value, w->slot_mapping};
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clSetKernelArg(k->kernel, CLBT_KV_ARGUMENT_ARGUMENTS, sizeof *a,
                              a),
               status, done);
  for (cl_uint i = 0; !status && i < 3; ++i)
    status = clbt__bound_buffer_set(
        k->kernel, CLBT_KV_ARGUMENT_KEY + i, &k->bound[i], buffers[i],
        clbt__known_buffer_serial(known, buffers[i]));
done:
  return status;
}

clbt_status clbt_kv_cache_enqueue_write(clbt_kv_cache *cache,
                                        const clbt_kv_write *given,
                                        cl_uint num_events,
                                        const cl_event *wait_list,
                                        cl_event *event) {
  if (!cache) return clbt__fail(CLBT_NULL_ARGUMENT, "cache is NULL");
  clbt_kv_write w;
  clbt_status status = clbt__kv_write_read(given, &w);
  if (!status) status = check_write(cache, &w);
  if (!status)
    status = clbt__check_wait_list(cache->device, "KV cache", num_events,
                                   wait_list);
  kv_kernel *k = NULL;
  if (!status && w.num_tokens > 0) status = kernel_for(cache, &w, &k);
  if (status) return status;
  clbt__sequence sequence =
      clbt__sequence_start(cache->device, num_events, wait_list, event != NULL);
  if (w.num_tokens > 0) {
    const clbt_kv_cache_config *c = &cache->config;
    clbt_kv_arguments a = cache->arguments;
    size_t global_size = 0;
    a.key_at = w.key_offset;
    a.key_stride = w.key_token_stride;
    a.value_at = w.value_offset;
    a.value_stride = w.value_token_stride;
    a.slots_at = w.slot_mapping_offset;
    a.num_tokens = w.num_tokens;
    a.chunks = c->num_kv_heads * (c->head_size / k->chunk);
    a.k_scale = w.k_scale;
    a.v_scale = w.v_scale;
    geometry(cache, k, w.num_tokens, a.chunks, &a.lanes, &global_size);
    status = set_arguments(k, &cache->known, &a, &w);
    if (!status)
      status = clbt__sequence_kernel(&sequence, k->kernel, global_size,
                                     k->local_size);
  }
  return clbt__sequence_end(&sequence, status, event);
}

clbt_status clbt_kv_cache_read_rejected_tokens(clbt_kv_cache *cache,
                                               uint32_t *count) {
  if (!cache || !count)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !cache ? "cache" : "count");
  return clbt__read_counter(cache->device, cache->rejected, count);
}

clbt_status clbt_kv_cache_reset_rejected_tokens(clbt_kv_cache *cache) {
  if (!cache) return clbt__fail(CLBT_NULL_ARGUMENT, "cache is NULL");
  return clbt__reset_counter(cache->device, cache->rejected);
}

cl_mem clbt_kv_cache_rejected_tokens(const clbt_kv_cache *cache) {
  return cache ? cache->rejected : NULL;
}
