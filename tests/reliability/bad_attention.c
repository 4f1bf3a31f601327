/*
 * The attention's bad-input fixture (bad_attention.h): descriptors,
 * caches and tables, foreign ones of another context, the batch's
 * buffers, and each case's call.
 */
#include "bad_attention.h"

#include "clbt_test.h"

#include <stdlib.h>

static const clbt_attention_config bf16_config = {
    .struct_size = sizeof(clbt_attention_config), .num_heads = 4,
    .num_kv_heads = 2, .head_size = 8, .block_size = 4,
    .cache_dtype = CLBT_KV_BFLOAT16};
static const clbt_attention_config fp8_config = {
    .struct_size = sizeof(clbt_attention_config), .num_heads = 4,
    .num_kv_heads = 2, .head_size = 8, .block_size = 4,
    .cache_dtype = CLBT_KV_FP8_E4M3, .query_dtype = CLBT_KV_FP8_E4M3,
    .output_dtype = CLBT_KV_FP8_E4M3};

static cl_mem poisoned(size_t bytes) {
  unsigned char *bits = malloc(bytes);
  memset(bits, POISON, bytes);
  cl_mem buffer = clbt_test_buffer(bytes, bits);
  free(bits);
  return buffer;
}

/* A cache of 4 blocks, K and V in one buffer, on a device. */
static clbt_kv_cache *make_cache(clbt_device *device, cl_mem buffer,
                                 clbt_kv_dtype dtype, uint32_t head_size) {
  clbt_kv_cache_config c = CLBT_KV_CACHE_CONFIG_INIT;
  c.cache_dtype = dtype;
  c.input_dtype = CLBT_KV_BFLOAT16;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = 4;
  c.num_blocks = 4;
  c.key_cache = buffer;
  clbt_kv_cache *cache = NULL;
  clbt_assert_ok(clbt_kv_cache_create(device, &c, &cache));
  return cache;
}

static clbt_table *make_table(clbt_device *device, uint32_t kernel_block_size,
                              clbt_slot_mode mode, uint32_t cp_world_size) {
  clbt_table_config c = CLBT_TABLE_CONFIG_INIT;
  c.block_size = 4;
  c.kernel_block_size = kernel_block_size;
  c.cp_world_size = cp_world_size;
  c.max_num_reqs = 2;
  c.max_num_blocks_per_req = 2;
  c.max_num_batched_tokens = 8;
  c.slot_mode = mode;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(device, &c, &table));
  return table;
}

/* Another context on the test device, with a clbt handle, a cache and a
   table of its own, and an event. */
static void make_foreign(attention_fixture *a) {
  cl_device_id id = clbt_device_id(clbt_test_device());
  cl_int error = CL_SUCCESS;
  a->other = clCreateContext(NULL, 1, &id, NULL, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  cl_command_queue queue = clCreateCommandQueue(a->other, id, 0, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  clbt_assert_ok(clbt_device_wrap(a->other, id, queue, &a->foreign_device));
  clReleaseCommandQueue(queue);
  a->foreign_buffer = clCreateBuffer(a->other, CL_MEM_READ_WRITE, 1024, NULL,
                                     &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  a->foreign_cache = make_cache(a->foreign_device, a->foreign_buffer,
                                CLBT_KV_BFLOAT16, 8);
  a->foreign_table =
      make_table(a->foreign_device, 0, CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT, 0);
  const cl_context contexts[] = {clbt_device_context(clbt_test_device()),
                                 a->other};
  for (int i = 0; i < 2; ++i) {
    a->events[i] = clCreateUserEvent(contexts[i], &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    ck_assert_int_eq(clSetUserEventStatus(a->events[i], CL_COMPLETE),
                     CL_SUCCESS);
  }
}

attention_fixture fixture_create(void) {
  attention_fixture a = {0};
  clbt_device *device = clbt_test_device();
  clbt_attention_config bf16 = bf16_config, fp8 = fp8_config;
  clbt_assert_ok(clbt_attention_create(device, &bf16, &a.bf16));
  clbt_assert_ok(clbt_attention_create(device, &fp8, &a.fp8));
  a.cache_buffer = poisoned(1024);
  a.fp8_buffer = poisoned(512);
  a.wide_buffer = poisoned(2048);
  a.cache = make_cache(device, a.cache_buffer, CLBT_KV_BFLOAT16, 8);
  a.fp8_cache = make_cache(device, a.fp8_buffer, CLBT_KV_FP8_E4M3, 8);
  a.wide_cache = make_cache(device, a.wide_buffer, CLBT_KV_BFLOAT16, 16);
  a.table = make_table(device, 0, CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT, 0);
  a.state_table = make_table(device, 0, CLBT_SLOT_MODE_NONE, 0);
  a.split_table = make_table(device, 2, CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT, 0);
  /* 2^30 ranks of 4-token blocks: a virtual block of 2^32 tokens. */
  a.wide_shard_table =
      make_table(device, 0, CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT, 1u << 30);
  const int32_t cu[] = {0, 1, 3}, used[] = {5, 6}, blocks[] = {0, 1, 2, 3};
  const float sinks[] = {0.5f, 0.25f, 0, -1}, descales[] = {1, 1, 1, 1};
  a.query = poisoned(192);
  a.output = poisoned(192);
  a.lse = poisoned(48);
  a.small = poisoned(8);
  a.cu = clbt_test_buffer(sizeof cu, cu);
  a.seqused = clbt_test_buffer(sizeof used, used);
  a.blocks = clbt_test_buffer(sizeof blocks, blocks);
  a.sinks = clbt_test_buffer(sizeof sinks, sinks);
  a.descales = clbt_test_buffer(sizeof descales, descales);
  cl_int error = CL_SUCCESS;
  a.read_only = clCreateBuffer(clbt_device_context(device), CL_MEM_READ_ONLY,
                               192, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  make_foreign(&a);
  return a;
}

void fixture_destroy(attention_fixture *a) {
  clbt_attention_destroy(a->bf16);
  clbt_attention_destroy(a->fp8);
  clbt_kv_cache *caches[] = {a->cache, a->fp8_cache, a->wide_cache,
                             a->foreign_cache};
  for (int i = 0; i < 4; ++i) clbt_kv_cache_destroy(caches[i]);
  clbt_table *tables[] = {a->table, a->state_table, a->split_table,
                          a->wide_shard_table, a->foreign_table};
  for (int i = 0; i < 5; ++i) clbt_table_destroy(tables[i]);
  cl_mem buffers[] = {a->cache_buffer, a->fp8_buffer, a->wide_buffer,
                      a->foreign_buffer, a->small, a->query, a->output,
                      a->lse, a->cu, a->seqused, a->blocks, a->sinks,
                      a->descales, a->read_only};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
  clReleaseEvent(a->events[0]);
  clReleaseEvent(a->events[1]);
  clbt_device_release(a->foreign_device);
  clReleaseContext(a->other);
}

static void set_field(void *s, size_t at, size_t size, uint64_t value) {
  if (size == 4) {
    uint32_t v = (uint32_t)value;
    memcpy((unsigned char *)s + at, &v, sizeof v);
  } else if (size == 8) {
    memcpy((unsigned char *)s + at, &value, sizeof value);
  }
}

static clbt_status create_case(const bad *c, clbt_attention **out) {
  clbt_attention_config config = c->swap == FP8 ? fp8_config : bf16_config;
  set_field(&config, c->at, c->size, c->value);
  unsigned char grown[sizeof config + 8] = {0};
  memcpy(grown, &config, sizeof config);
  grown[sizeof config] = 1;
  uint32_t grown_size = sizeof grown;
  memcpy(grown, &grown_size, sizeof grown_size);
  const clbt_attention_config *given =
      c->swap == NULL_STRUCT   ? NULL
      : c->swap == LATER_FIELD ? (const clbt_attention_config *)grown
                               : &config;
  if (c->swap == UNKNOWN_TUNING) setenv("CLBT_ATTENTION_TUNING", "lanes=4", 1);
  clbt_status status = clbt_attention_create(
      c->swap == NULL_HANDLE ? NULL : clbt_test_device(), given,
      c->swap == NULL_OUT ? NULL : out);
  unsetenv("CLBT_ATTENTION_TUNING");
  return status;
}

/* The valid batch, then the case's edit. */
static clbt_attention_batch batch_of(const bad *c, const attention_fixture *a) {
  clbt_attention_batch b = CLBT_ATTENTION_BATCH_INIT;
  b.num_seqs = 2;
  b.num_tokens = 3;
  b.max_seqlen_q = 2;
  b.max_seqlen_k = 6;
  b.query = c->swap == NULL_QUERY      ? NULL
            : c->swap == FOREIGN_QUERY ? a->foreign_buffer
                                       : a->query;
  b.output = c->swap == NULL_OUTPUT        ? NULL
             : c->swap == READ_ONLY_OUTPUT ? a->read_only
                                           : a->output;
  b.cu_seqlens_q = c->swap == NULL_CU ? NULL : a->cu;
  b.seqused_k = c->swap == NULL_SEQUSED ? NULL : a->seqused;
  bool table = c->swap == TABLE || c->swap == BOTH_SOURCES ||
               c->swap == STATE_TABLE || c->swap == SPLIT_TABLE ||
               c->swap == WIDE_SHARD_TABLE || c->swap == FOREIGN_TABLE;
  b.table = c->swap == STATE_TABLE        ? a->state_table
            : c->swap == SPLIT_TABLE      ? a->split_table
            : c->swap == WIDE_SHARD_TABLE ? a->wide_shard_table
            : c->swap == FOREIGN_TABLE    ? a->foreign_table
            : table                       ? a->table
                                          : NULL;
  b.block_table = (!table || c->swap == BOTH_SOURCES) && c->swap != NO_SOURCE
                      ? a->blocks
                      : NULL;
  b.max_blocks_per_seq = 2;
  b.sinks = c->swap == SMALL_SINKS ? a->small : a->sinks;
  b.k_descales = c->swap == SMALL_DESCALES ? a->small : NULL;
  b.lse = a->lse;
  b.q_descale = b.k_descale = b.v_descale = b.output_scale = 1.0f;
  set_field(&b, c->at, c->size, c->value);
  return b;
}

static clbt_status enqueue_case(const bad *c, attention_fixture *a,
                                cl_event *event) {
  clbt_attention_batch b = batch_of(c, a);
  bool fp8 = c->swap == FP8 || c->swap == SMALL_DESCALES;
  clbt_attention *attention = c->swap == NULL_HANDLE ? NULL
                              : fp8                  ? a->fp8
                                                     : a->bf16;
  const clbt_kv_cache *cache = c->swap == NULL_CACHE      ? NULL
                               : c->swap == WIDE_CACHE    ? a->wide_cache
                               : c->swap == FOREIGN_CACHE ? a->foreign_cache
                               : fp8                      ? a->fp8_cache
                                                          : a->cache;
  const cl_event null_events[2] = {NULL, NULL};
  const cl_event *wait_list = c->swap == FOREIGN_EVENT ? a->events
                              : c->swap == NULL_EVENTS ? null_events
                                                       : NULL;
  return clbt_attention_enqueue(attention, cache,
                                c->swap == NULL_STRUCT ? NULL : &b,
                                c->num_events, wait_list, event);
}

clbt_status run_case(const bad *c, attention_fixture *a, clbt_attention **out,
                     cl_event *event, uint32_t *rejected,
                     clbt_kv_pages *pages) {
  switch (c->function) {
    case CREATE: return create_case(c, out);
    case ENQUEUE: return enqueue_case(c, a, event);
    case READ_REJECTED:
      return clbt_attention_read_rejected_tokens(
          c->swap == NULL_HANDLE ? NULL : a->bf16,
          c->swap == NULL_OUT ? NULL : rejected);
    case RESET_REJECTED: return clbt_attention_reset_rejected_tokens(NULL);
    default:
      return clbt_kv_pages_describe(c->swap == NULL_CACHE ? NULL : a->cache,
                                    c->swap == STATE_TABLE   ? a->state_table
                                    : c->swap == SPLIT_TABLE ? a->split_table
                                    : c->swap == WIDE_SHARD_TABLE
                                        ? a->wide_shard_table
                                        : a->table,
                                    c->swap == NULL_OUT ? NULL : pages);
  }
}

void check_unchanged(const attention_fixture *a, const char *context) {
  unsigned char bytes[192];
  const cl_mem written[] = {a->output, a->lse};
  const size_t sizes[] = {192, 48};
  for (int i = 0; i < 2; ++i) {
    clbt_test_read(written[i], sizes[i], bytes);
    for (size_t b = 0; b < sizes[i]; ++b)
      ck_assert_msg(bytes[b] == POISON, "%s: %s byte %zu was written",
                    context, i ? "lse" : "output", b);
  }
  clbt_attention *const handles[] = {a->bf16, a->fp8};
  for (int i = 0; i < 2; ++i) {
    uint32_t rejected = 1;
    clbt_assert_ok(clbt_attention_read_rejected_tokens(handles[i], &rejected));
    ck_assert_msg(rejected == 0, "%s: descriptor %d counted %u", context, i,
                  (unsigned)rejected);
  }
}
