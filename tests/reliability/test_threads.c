/*
 * Threads (docs/threading.md): several threads, each driving tables of its
 * own on one shared device handle. They race to build the same program
 * (the device's cache must build it once) and programs of their own, share
 * the device's queue, and fail on purpose to check that each thread reads
 * its own clbt_last_error(). CI runs this suite under ThreadSanitizer.
 *
 * Check's assertions may only run on the main thread, so workers write
 * their first failure into their record and the main thread asserts.
 */
#include "clbt_test.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

enum { THREADS = 4, ITERATIONS = 40, REQS = 4, BLOCKS = 4, TOKENS = 16 };

/* Every thread's first table has this config: one program for all. */
static const clbt_table_config shared_config = {
    .block_size = 16, .max_num_reqs = REQS, .max_num_blocks_per_req = BLOCKS,
    .max_num_batched_tokens = TOKENS};

/* Its second table is one CP rank of four: a program of its own. */
static clbt_table_config own_config(uint32_t thread) {
  clbt_table_config config = shared_config;
  config.cp_world_size = THREADS;
  config.cp_rank = thread;
  return config;
}

typedef struct worker {
  pthread_t handle;
  uint32_t index;
  char failure[512]; /* the first failure; empty when none */
} worker;

__attribute__((format(printf, 2, 3)))
static bool record_failure(worker *w, const char *format, ...) {
  if (w->failure[0] == '\0') {
    va_list args;
    va_start(args, format);
    vsnprintf(w->failure, sizeof w->failure, format, args);
    va_end(args);
  }
  return false;
}

static bool succeeded(worker *w, clbt_status status, const char *what) {
  return status == CLBT_SUCCESS ||
         record_failure(w, "%s: %s: %s", what, clbt_status_name(status),
              clbt_last_error());
}

/* A batch over every row: row r's tokens sit at positions r, r+5, ... */
typedef struct batch {
  int32_t query_start_loc[REQS + 1];
  int64_t positions[TOKENS];
  cl_mem device_query_start_loc, device_positions;
} batch;

static bool batch_upload(worker *w, batch *b, uint32_t iteration) {
  cl_command_queue queue = clbt_device_queue(clbt_test_device());
  for (uint32_t r = 0; r <= REQS; ++r)
    b->query_start_loc[r] = (int32_t)(r * (TOKENS / REQS));
  for (uint32_t t = 0; t < TOKENS; ++t)
    b->positions[t] = (int64_t)((t / REQS + 5 * (t % REQS) + iteration) %
                                (BLOCKS * 16));
  cl_int error = clEnqueueWriteBuffer(queue, b->device_query_start_loc,
                                      CL_TRUE, 0, sizeof b->query_start_loc,
                                      b->query_start_loc, 0, NULL, NULL);
  if (error == CL_SUCCESS)
    error =
        clEnqueueWriteBuffer(queue, b->device_positions, CL_TRUE, 0,
                             sizeof b->positions, b->positions, 0, NULL, NULL);
  return error == CL_SUCCESS ||
         record_failure(w, "uploading a batch: %d", error);
}

/* Fills, commits and maps one table, and compares with the reference. */
static bool step(worker *w, clbt_table *table, batch *b, uint32_t iteration) {
  for (uint32_t r = 0; r < REQS; ++r) {
    int32_t ids[BLOCKS];
    for (uint32_t i = 0; i < BLOCKS; ++i)
      ids[i] = (int32_t)(1000 * w->index + 100 * r + 10 * i + iteration % 10);
    if (!succeeded(w, clbt_table_add_row(table, r, ids, BLOCKS), "add_row"))
      return false;
  }
  int64_t expected[TOKENS], actual[TOKENS];
  if (!succeeded(w, clbt_table_commit(table, REQS), "commit") ||
      !succeeded(w, clbt_table_compute_slot_mapping(table, REQS,
                                             b->device_query_start_loc,
                                             b->device_positions, TOKENS),
          "compute_slot_mapping") ||
      !succeeded(w, clbt_table_compute_slot_mapping_host(table, REQS,
                                                  b->query_start_loc,
                                                  b->positions, TOKENS,
                                                  expected),
          "compute_slot_mapping_host"))
    return false;
  cl_int error = clEnqueueReadBuffer(
      clbt_device_queue(clbt_test_device()), clbt_table_slot_mapping(table),
      CL_TRUE, 0, sizeof actual, actual, 0, NULL, NULL);
  if (error != CL_SUCCESS)
    return record_failure(w, "reading slots: %d", error);
  for (uint32_t t = 0; t < TOKENS; ++t)
    if (actual[t] != expected[t])
      return record_failure(
          w, "iteration %u: slot[%u] is %lld, the reference says %lld",
          iteration, t, (long long)actual[t], (long long)expected[t]);
  return true;
}

/* A failure of this thread leaves this thread's message, whatever the
   others do meanwhile. */
static bool own_message(worker *w, clbt_table *table) {
  uint32_t row = 100 + w->index;
  char words[64];
  snprintf(words, sizeof words, "row %u is out of range", row);
  clbt_status status = clbt_table_clear_row(table, row);
  return (status == CLBT_ROW_OUT_OF_RANGE &&
          strstr(clbt_last_error(), words)) ||
         record_failure(w, "clear_row(%u) gave %s, '%s'", row,
                        clbt_status_name(status), clbt_last_error());
}

static void *work(void *argument) {
  worker *w = argument;
  clbt_table_config config = own_config(w->index);
  clbt_table *tables[2] = {NULL, NULL};
  batch b = {0};
  cl_int errors[2] = {CL_SUCCESS, CL_SUCCESS};
  cl_context context = clbt_device_context(clbt_test_device());
  b.device_query_start_loc = clCreateBuffer(
      context, CL_MEM_READ_ONLY, sizeof b.query_start_loc, NULL, &errors[0]);
  b.device_positions = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                      sizeof b.positions, NULL, &errors[1]);
  bool good =
      (errors[0] == CL_SUCCESS && errors[1] == CL_SUCCESS) ||
      record_failure(w, "creating buffers: %d, %d", errors[0], errors[1]);
  good = good && succeeded(w,
                           clbt_table_create(clbt_test_device(), &shared_config,
                                             &tables[0]),
                           "create (shared config)");
  good =
      good &&
      succeeded(w, clbt_table_create(clbt_test_device(), &config, &tables[1]),
                "create (own config)");
  for (uint32_t i = 0; i < ITERATIONS && good; ++i)
    good = batch_upload(w, &b, i) && step(w, tables[0], &b, i) &&
           step(w, tables[1], &b, i) && own_message(w, tables[i % 2]);
  clbt_table_destroy(tables[0]);
  clbt_table_destroy(tables[1]);
  if (b.device_query_start_loc) clReleaseMemObject(b.device_query_start_loc);
  if (b.device_positions) clReleaseMemObject(b.device_positions);
  return NULL;
}

START_TEST(threads_share_one_device) {
  clbt_device *device = clbt_test_device();
  size_t programs_before = clbt_device_program_count(device);
  worker workers[THREADS];
  for (uint32_t i = 0; i < THREADS; ++i) {
    workers[i] = (worker){.index = i};
    ck_assert_int_eq(pthread_create(&workers[i].handle, NULL, work,
                                    &workers[i]),
                     0);
  }
  for (uint32_t i = 0; i < THREADS; ++i) {
    ck_assert_int_eq(pthread_join(workers[i].handle, NULL), 0);
    ck_assert_msg(workers[i].failure[0] == '\0', "thread %u: %s", i,
                  workers[i].failure);
  }
  /* The shared config's program once, and one per thread's own config. */
  ck_assert_uint_eq(clbt_device_program_count(device),
                    programs_before + 1 + THREADS);
}
END_TEST

/*
 * KV caches, one per thread, written at once on the shared device: a
 * float32 cache of 4 blocks of 4 slots of one head of 4 in one buffer of
 * its own (K at block x 32 + page x 4, V 16 on), written ITERATIONS
 * times with one token, K = V = thread x 1000 + i + e, to slot i % 16.
 * Each input is written (blocking, so after the previous write ran on the
 * in-order queue) into the thread's own buffers first. Every slot must
 * end holding the last token the thread wrote there.
 */
enum { KV_SLOTS = 16, KV_HEAD = 4, KV_FLOATS = 2 * KV_SLOTS * KV_HEAD };

typedef struct kv_worker {
  worker w;
  cl_mem cache, input, slot;
  float result[KV_FLOATS];
} kv_worker;

static bool kv_write(kv_worker *k, clbt_kv_cache *cache, uint32_t i) {
  cl_command_queue queue = clbt_device_queue(clbt_test_device());
  float input[KV_HEAD];
  for (int e = 0; e < KV_HEAD; ++e)
    input[e] = (float)(k->w.index * 1000 + i + (uint32_t)e);
  const int64_t slot = i % KV_SLOTS;
  cl_int errors[2] = {
      clEnqueueWriteBuffer(queue, k->input, CL_TRUE, 0, sizeof input, input,
                           0, NULL, NULL),
      clEnqueueWriteBuffer(queue, k->slot, CL_TRUE, 0, sizeof slot, &slot, 0,
                           NULL, NULL)};
  if (errors[0] || errors[1])
    return record_failure(&k->w, "writing input %u: %d, %d", i, errors[0],
                          errors[1]);
  clbt_kv_write write = CLBT_KV_WRITE_INIT;
  write.num_tokens = 1;
  write.key = write.value = k->input;
  write.slot_mapping = k->slot;
  return succeeded(&k->w,
                   clbt_kv_cache_enqueue_write(cache, &write, 0, NULL, NULL),
                   "clbt_kv_cache_enqueue_write");
}

static void *write_kv_cache(void *argument) {
  kv_worker *k = argument;
  cl_context context = clbt_device_context(clbt_test_device());
  cl_int errors[3] = {CL_SUCCESS, CL_SUCCESS, CL_SUCCESS};
  k->cache = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof k->result,
                            NULL, &errors[0]);
  k->input = clCreateBuffer(context, CL_MEM_READ_ONLY, KV_HEAD * sizeof(float),
                            NULL, &errors[1]);
  k->slot = clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof(int64_t), NULL,
                           &errors[2]);
  bool good = (!errors[0] && !errors[1] && !errors[2]) ||
              record_failure(&k->w, "creating buffers: %d, %d, %d", errors[0],
                             errors[1], errors[2]);
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = CLBT_KV_FLOAT32;
  config.num_kv_heads = 1;
  config.head_size = KV_HEAD;
  config.block_size = 4;
  config.num_blocks = KV_SLOTS / 4;
  config.key_cache = k->cache;
  clbt_kv_cache *cache = NULL;
  good = good && succeeded(&k->w,
                           clbt_kv_cache_create(clbt_test_device(), &config,
                                                &cache),
                           "clbt_kv_cache_create");
  for (uint32_t i = 0; i < ITERATIONS && good; ++i) good = kv_write(k, cache, i);
  cl_int read = good ? clEnqueueReadBuffer(
                           clbt_device_queue(clbt_test_device()), k->cache,
                           CL_TRUE, 0, sizeof k->result, k->result, 0, NULL,
                           NULL)
                     : CL_SUCCESS;
  if (read) record_failure(&k->w, "reading the cache: %d", read);
  clbt_kv_cache_destroy(cache);
  cl_mem buffers[] = {k->cache, k->input, k->slot};
  for (int b = 0; b < 3; ++b)
    if (buffers[b]) clReleaseMemObject(buffers[b]);
  return NULL;
}

START_TEST(threads_write_kv_caches_of_their_own) {
  clbt_device *device = clbt_test_device();
  size_t programs_before = clbt_device_program_count(device);
  kv_worker workers[THREADS];
  for (uint32_t t = 0; t < THREADS; ++t) {
    workers[t] = (kv_worker){.w = {.index = t}};
    ck_assert_int_eq(pthread_create(&workers[t].w.handle, NULL,
                                    write_kv_cache, &workers[t]),
                     0);
  }
  for (uint32_t t = 0; t < THREADS; ++t) {
    ck_assert_int_eq(pthread_join(workers[t].w.handle, NULL), 0);
    ck_assert_msg(workers[t].w.failure[0] == '\0', "thread %u: %s", t,
                  workers[t].w.failure);
    for (uint32_t s = 0; s < KV_SLOTS; ++s) {
      uint32_t last = s + (ITERATIONS - 1 - s) / KV_SLOTS * KV_SLOTS;
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t e = 0; e < KV_HEAD; ++e) {
          float got = workers[t].result[s / 4 * 32 + kv * 16 + s % 4 * 4 + e];
          ck_assert_msg(got == (float)(t * 1000 + last + e),
                        "thread %u slot %u %c[%u] is %g, expected %u", t, s,
                        kv ? 'V' : 'K', e, (double)got, t * 1000 + last + e);
        }
    }
  }
  ck_assert_uint_le(clbt_device_program_count(device), programs_before + 1);
}
END_TEST

/*
 * One thread changes a device's build options back and forth, reading them
 * back each time, while another prepares programs of four configs on it
 * until the first is done: each read is one whole value, and each program
 * was built with one whole value (its options end with one or the other),
 * so there are four to eight programs.
 */
#define SETTING_A "-DTEST_SETTING=1"
#define SETTING_B "-DTEST_SETTING=22222"
enum { SETTING_CHANGES = 200 };

typedef struct setter {
  pthread_t handle;
  clbt_device *device;
  atomic_bool done;
  char failure[512];
} setter;

static void *change_settings(void *argument) {
  setter *s = argument;
  for (unsigned i = 0; i < SETTING_CHANGES && s->failure[0] == '\0'; ++i) {
    const char *value = i % 2 ? SETTING_B : SETTING_A;
    char read[CLBT_BUILD_OPTIONS_SIZE];
    clbt_status status = clbt_device_set_build_options(s->device, value);
    if (!status)
      status = clbt_device_build_options(s->device, read, sizeof read);
    if (status)
      snprintf(s->failure, sizeof s->failure, "%s: %s",
               clbt_status_name(status), clbt_last_error());
    else if (strcmp(read, SETTING_A) && strcmp(read, SETTING_B))
      snprintf(s->failure, sizeof s->failure, "read '%s'", read);
  }
  atomic_store(&s->done, true);
  return NULL;
}

static bool ends_with(const char *text, const char *end) {
  size_t length = strlen(text), end_length = strlen(end);
  return length >= end_length &&
         strcmp(text + length - end_length, end) == 0;
}

START_TEST(settings_change_while_another_thread_builds) {
  static setter s;
  ck_assert_int_eq(clbt_device_open(NULL, &s.device), CLBT_SUCCESS);
  clbt_assert_ok(clbt_device_set_build_options(s.device, SETTING_A));
  atomic_init(&s.done, false);
  ck_assert_int_eq(pthread_create(&s.handle, NULL, change_settings, &s), 0);
  static const uint32_t block_sizes[] = {16, 32, 64, 128};
  clbt_status status = CLBT_SUCCESS;
  for (unsigned i = 0; !status && (i < 4 || !atomic_load(&s.done)); ++i) {
    clbt_table_config config = shared_config;
    config.block_size = block_sizes[i % 4];
    status = clbt_table_prepare(s.device, &config);
  }
  ck_assert_int_eq(pthread_join(s.handle, NULL), 0);
  clbt_assert_ok(status);
  ck_assert_msg(s.failure[0] == '\0', "setter: %s", s.failure);
  size_t count = clbt_device_program_count(s.device);
  ck_assert_uint_ge(count, 4);
  ck_assert_uint_le(count, 8);
  for (size_t p = 0; p < count; ++p) {
    char options[CLBT_PROGRAM_OPTIONS_SIZE];
    clbt_assert_ok(
        clbt_device_program_options(s.device, p, options, sizeof options));
    ck_assert_msg(ends_with(options, " " SETTING_A) ||
                      ends_with(options, " " SETTING_B),
                  "program %zu: '%s'", p, options);
  }
  clbt_device_release(s.device);
}
END_TEST

/*
 * Threads that each open a device of their own, make and free a table on
 * it and release it, at once and over and over: PoCL 3.1 is not safe when
 * one thread lists the platforms while another releases a context, so
 * clbt serialises its own listing and release (docs/threading.md). Each
 * round opens the selector the suite runs on (CLBT_DEVICE) and uses the
 * shared config, whose program PoCL's cache already holds.
 */
enum { OPENERS = 4, OPEN_ROUNDS = 20 };

static void *open_and_release(void *argument) {
  worker *w = argument;
  for (uint32_t round = 0; round < OPEN_ROUNDS && !w->failure[0]; ++round) {
    clbt_device *device = NULL;
    clbt_table *table = NULL;
    if (succeeded(w, clbt_device_open(NULL, &device), "device_open") &&
        succeeded(w, clbt_table_create(device, &shared_config, &table),
                  "create"))
      clbt_table_destroy(table);
    clbt_device_release(device);
  }
  return NULL;
}

START_TEST(threads_open_and_release_devices_at_once) {
  worker workers[OPENERS];
  for (uint32_t i = 0; i < OPENERS; ++i) {
    workers[i] = (worker){.index = i};
    ck_assert_int_eq(
        pthread_create(&workers[i].handle, NULL, open_and_release, &workers[i]),
        0);
  }
  for (uint32_t i = 0; i < OPENERS; ++i) {
    ck_assert_int_eq(pthread_join(workers[i].handle, NULL), 0);
    ck_assert_msg(workers[i].failure[0] == '\0', "thread %u: %s", i,
                  workers[i].failure);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 0);
  /* First: before any other case keeps a context of the process open. */
  tcase_add_test(tc, threads_open_and_release_devices_at_once);
  tcase_add_test(tc, threads_share_one_device);
  tcase_add_test(tc, threads_write_kv_caches_of_their_own);
  tcase_add_test(tc, settings_change_while_another_thread_builds);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
