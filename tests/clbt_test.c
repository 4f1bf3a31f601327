#include "clbt_test.h"
#include "xorshift.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static clbt_device *device;

static void release_device(void) {
  clbt_device_release(device);
  device = NULL;
}

clbt_device *clbt_test_device(void) {
  if (!device) {
    clbt_status status = clbt_device_open(NULL, &device);
    ck_assert_msg(status == CLBT_SUCCESS, "opening CLBT_DEVICE failed: %s: %s",
                  clbt_status_name(status), clbt_last_error());
    clbt_test_at_end(release_device);
  }
  return device;
}

static cl_mem buffer_of(cl_mem_flags flags, size_t bytes, const void *data) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(clbt_device_context(clbt_test_device()),
                                 flags, bytes ? bytes : 1, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  if (data && bytes) clbt_test_write(buffer, bytes, data);
  return buffer;
}

cl_mem clbt_test_buffer(size_t bytes, const void *data) {
  return buffer_of(CL_MEM_READ_WRITE, bytes, data);
}

cl_mem clbt_test_read_only_buffer(size_t bytes, const void *data) {
  return buffer_of(CL_MEM_READ_ONLY, bytes, data);
}

void clbt_test_read(cl_mem buffer, size_t bytes, void *out) {
  cl_int error = clEnqueueReadBuffer(clbt_device_queue(clbt_test_device()),
                                     buffer, CL_TRUE, 0, bytes, out, 0, NULL,
                                     NULL);
  ck_assert_int_eq(error, CL_SUCCESS);
}

void clbt_test_write(cl_mem buffer, size_t bytes, const void *data) {
  cl_int error = clEnqueueWriteBuffer(clbt_device_queue(clbt_test_device()),
                                      buffer, CL_TRUE, 0, bytes, data, 0, NULL,
                                      NULL);
  ck_assert_int_eq(error, CL_SUCCESS);
}

void clbt_test_poison(cl_mem buffer, size_t count) {
  const int64_t poison = CLBT_TEST_POISON;
  cl_command_queue queue = clbt_device_queue(clbt_test_device());
  ck_assert_int_eq(clEnqueueFillBuffer(queue, buffer, &poison, sizeof poison, 0,
                                       count * sizeof poison, 0, NULL, NULL),
                   CL_SUCCESS);
  ck_assert_int_eq(clFinish(queue), CL_SUCCESS);
}

clbt_test_snapshot clbt_test_snapshot_take(const clbt_table *table,
                                           uint32_t max_num_reqs) {
  clbt_test_snapshot snapshot = {max_num_reqs, clbt_table_width(table), NULL,
                                 NULL, NULL};
  size_t cells = (size_t)snapshot.rows * snapshot.width;
  snapshot.host = malloc(cells * sizeof(int32_t));
  snapshot.device = malloc(cells * sizeof(int32_t));
  snapshot.lengths = malloc(snapshot.rows * sizeof(uint32_t));
  ck_assert(snapshot.host && snapshot.device && snapshot.lengths);
  memcpy(snapshot.host, clbt_table_host_data(table), cells * sizeof(int32_t));
  clbt_test_read(clbt_table_device_data(table), cells * sizeof(int32_t),
                 snapshot.device);
  for (uint32_t r = 0; r < snapshot.rows; ++r)
    snapshot.lengths[r] = clbt_table_row_length(table, r);
  return snapshot;
}

void clbt_test_snapshot_check(clbt_test_snapshot *snapshot,
                              const clbt_table *table) {
  clbt_test_snapshot now = clbt_test_snapshot_take(table, snapshot->rows);
  size_t bytes = (size_t)snapshot->rows * snapshot->width * sizeof(int32_t);
  ck_assert_msg(memcmp(now.host, snapshot->host, bytes) == 0,
                "host rows changed");
  ck_assert_msg(memcmp(now.device, snapshot->device, bytes) == 0,
                "device rows changed");
  ck_assert_msg(memcmp(now.lengths, snapshot->lengths,
                       snapshot->rows * sizeof(uint32_t)) == 0,
                "row lengths changed");
  free(now.host);
  free(now.device);
  free(now.lengths);
  free(snapshot->host);
  free(snapshot->device);
  free(snapshot->lengths);
}

void clbt_test_assert_in_sync(cl_command_queue queue, const clbt_table *table,
                              uint32_t max_num_reqs) {
  size_t cells = (size_t)max_num_reqs * clbt_table_width(table);
  int32_t *rows = malloc(cells * sizeof *rows);
  int32_t *lengths = malloc(max_num_reqs * sizeof *lengths);
  ck_assert(rows && lengths);
  ck_assert_int_eq(clEnqueueReadBuffer(queue, clbt_table_device_data(table),
                                       CL_TRUE, 0, cells * sizeof *rows, rows,
                                       0, NULL, NULL),
                   CL_SUCCESS);
  ck_assert_int_eq(clEnqueueReadBuffer(queue,
                                       clbt_table_device_row_lengths(table),
                                       CL_TRUE, 0,
                                       max_num_reqs * sizeof *lengths, lengths,
                                       0, NULL, NULL),
                   CL_SUCCESS);
  const int32_t *host = clbt_table_host_data(table);
  for (uint32_t r = 0; r < max_num_reqs; ++r) {
    ck_assert_msg(lengths[r] == (int32_t)clbt_table_row_length(table, r),
                  "row %u: device length %d, host %u", (unsigned)r,
                  (int)lengths[r], (unsigned)clbt_table_row_length(table, r));
    for (uint32_t c = 0; c < clbt_table_width(table); ++c) {
      size_t i = (size_t)r * clbt_table_width(table) + c;
      ck_assert_msg(rows[i] == host[i], "row %u column %u: device %d, host %d",
                    (unsigned)r, (unsigned)c, (int)rows[i], (int)host[i]);
    }
  }
  free(rows);
  free(lengths);
}

int clbt_test_count_files(const char *path, char *first_path, size_t size) {
  int count = 0;
  DIR *dir = opendir(path);
  ck_assert_ptr_nonnull(dir);
  for (struct dirent *e = readdir(dir); e; e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    if (count++ == 0 && first_path)
      snprintf(first_path, size, "%s/%s", path, e->d_name);
  }
  closedir(dir);
  return count;
}

void clbt_test_remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (!dir) {
    remove(path);
    return;
  }
  for (struct dirent *e = readdir(dir); e; e = readdir(dir)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char child[1024];
    snprintf(child, sizeof child, "%s/%s", path, e->d_name);
    clbt_test_remove_tree(child);
  }
  closedir(dir);
  rmdir(path);
}

static uint64_t random_state = 1;

uint64_t clbt_test_seed(const char *suite) {
  const char *fixed = getenv("CLBT_TEST_SEED");
  uint64_t seed = fixed ? strtoull(fixed, NULL, 10) : (uint64_t)time(NULL);
  printf("%s: seed %" PRIu64 " (replay with CLBT_TEST_SEED=%" PRIu64 ")\n",
         suite, seed, seed);
  random_state = seed * 0x9E3779B97F4A7C15ull + 1;
  if (random_state == 0) random_state = 1;
  return seed;
}

uint64_t clbt_test_random(void) { return xorshift64_next(&random_state); }

uint32_t clbt_test_below(uint32_t n) {
  return n ? (uint32_t)(clbt_test_random() % n) : 0;
}

bool clbt_test_chance(uint32_t percent) {
  return clbt_test_below(100) < percent;
}

clbt_multi_table_config clbt_test_shape(uint32_t max_num_reqs,
                                        uint32_t max_num_batched_tokens,
                                        uint32_t cp_world_size,
                                        uint32_t cp_rank,
                                        uint32_t cp_interleave_size) {
  clbt_multi_table_config shape = CLBT_MULTI_TABLE_CONFIG_INIT;
  shape.max_num_reqs = max_num_reqs;
  shape.max_num_batched_tokens = max_num_batched_tokens;
  shape.cp_world_size = cp_world_size;
  shape.cp_rank = cp_rank;
  shape.cp_interleave_size = cp_interleave_size;
  return shape;
}

uint32_t clbt_test_create_tables(const clbt_multi_table_config *shape,
                                 const clbt_group_config *group_configs,
                                 uint32_t num_groups, clbt_multi_table **multi,
                                 clbt_table **single, clbt_table **groups) {
  if (num_groups) {
    clbt_multi_table_config config = *shape;
    config.num_groups = num_groups;
    config.groups = group_configs;
    clbt_assert_ok(
        clbt_multi_table_create(clbt_test_device(), &config, multi));
    for (uint32_t g = 0; g < num_groups; ++g)
      groups[g] = clbt_multi_table_group(*multi, g);
    return num_groups;
  }
  const clbt_group_config *group = &group_configs[0];
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = group->block_size;
  config.kernel_block_size = group->kernel_block_size;
  config.max_num_reqs = shape->max_num_reqs;
  config.max_num_blocks_per_req = group->max_num_blocks;
  config.max_num_batched_tokens = shape->max_num_batched_tokens;
  config.cp_world_size = shape->cp_world_size;
  config.cp_rank = shape->cp_rank;
  config.cp_interleave_size = shape->cp_interleave_size;
  config.slot_mode = group->slot_mode;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, single));
  groups[0] = *single;
  return 1;
}

void clbt_test_poison32(cl_mem buffer) {
  size_t size = 0;
  const int32_t poison = CLBT_TEST_POISON32;
  ck_assert_int_eq(
      clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size, NULL),
      CL_SUCCESS);
  ck_assert_int_eq(
      clEnqueueFillBuffer(clbt_device_queue(clbt_test_device()), buffer,
                          &poison, sizeof poison, 0, size, 0, NULL, NULL),
      CL_SUCCESS);
}
