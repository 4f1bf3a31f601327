/*
 * What a launch sends as its record (src/calls/run.c, the step kernel's
 * first argument, cl/contract.h): the smallest record size whose packet
 * holds the launch's inline packet, every byte of it set, the packet as
 * cl/contract.h lays it out and zeros after it. Drivers copy every byte of
 * a record at every enqueue, so a larger size costs every launch, and an
 * unset byte would be whatever the last launch or the allocator left.
 *
 * And when a launch sets a buffer again (src/device/bound_buffer.c).
 *
 * Both are seen through clSetKernelArg (tests/kernel_arg_spy.c): this
 * suite keeps a copy of argument 0 of every step kernel, the spy counts
 * the sets of one buffer. It runs with CLBT_TUNING=gpu
 * (tests/CMakeLists.txt), whose record sizes are 64 packet words, then 512
 * and 2048 as far as the device's argument space allows: on PoCL's 1024
 * bytes a one-group launch has two.
 */
#include "clbt_test.h"
#include "cl/contract.h"
#include "engine/group.h" /* device_stale */
#include "kernel_arg_spy.h"

CLBT_DECLARE_LAUNCH_RECORD(test_record, CLBT_MAX_RECORD_WORDS)

/* The GPU row's smallest record, in packet words (src/base/tuning.c). */
#define SMALLEST_WORDS 64

static const size_t head_bytes = offsetof(test_record, packet);

/* The last record a step kernel was given. */
static struct {
  unsigned count;
  size_t size;
  test_record record;
} sent;

/* Keeps a copy of argument 0 of every step kernel (named clbt_*). */
static void keep_record(cl_kernel kernel, cl_uint index, size_t size,
                        const void *value) {
  char name[64] = "";
  if (index == 0 &&
      clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name,
                      NULL) == CL_SUCCESS &&
      strncmp(name, "clbt_", 5) == 0 && size <= sizeof sent.record) {
    ++sent.count;
    sent.size = size;
    memset(&sent.record, 0xA5, sizeof sent.record);
    memcpy(&sent.record, value, size);
  }
}

/* The packet words of the last record, from `from` to its end, are 0. */
static void assert_zero_from(size_t from) {
  size_t words = (sent.size - head_bytes) / sizeof(cl_uint);
  for (size_t w = from; w < words; ++w)
    ck_assert_msg(sent.record.packet[w] == 0,
                  "packet word %zu of %zu is 0x%x, not 0", w, words,
                  (unsigned)sent.record.packet[w]);
}

/* One step of one request and one token, after which the record sent is
   the step's. */
static void step(clbt_table *table, cl_mem qsl, cl_mem positions) {
  clbt_step s = CLBT_STEP_INIT;
  s.num_reqs = 1;
  s.query_start_loc = qsl;
  s.positions = positions;
  s.num_tokens = 1;
  unsigned before = sent.count;
  clbt_assert_ok(clbt_table_enqueue_step(table, &s, 0, NULL, NULL));
  ck_assert_uint_eq(sent.count, before + 1);
  ck_assert_uint_eq(sent.record.head.work & CLBT_WORK_MAP, CLBT_WORK_MAP);
}

/* A table of 64 rows of width 64 that commits by scatter. */
static clbt_table *scatter_table(void) {
  const clbt_table_config config = {.block_size = 16,
                                    .max_num_reqs = 64,
                                    .max_num_blocks_per_req = 64,
                                    .max_num_batched_tokens = 16};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_set_commit_mode(table, CLBT_COMMIT_SCATTER));
  return table;
}

/* Rows 0..9 gain first, first + 1, first + 2, first + 3 and first + row
   + 4: ten rows of five ids, a 92-word packet (2 + 10 x 4 + 50). */
static void append_ten_rows(clbt_table *table, int32_t first) {
  for (uint32_t row = 0; row < 10; ++row) {
    const int32_t ids[5] = {first, first + 1, first + 2, first + 3,
                            first + (int32_t)row + 4};
    clbt_assert_ok(clbt_table_append_row(table, row, ids, 5));
  }
}

/*
 * Three steps of a table of 64 rows of width 64, committing by scatter:
 * ten rows of five ids (2 + 10 x 4 + 50 = 92 packet words, past the
 * smallest record), then one id appended to row 3 (2 + 4 + 1 = 7 words),
 * then nothing. Each record is the smallest that holds its packet, the
 * packet is as cl/contract.h lays it out (worked by hand for the second),
 * and every word after it is 0, though the first step's packet filled
 * the words the second's and the third's leave.
 */
START_TEST(a_launch_sends_the_smallest_record_all_set) {
  clbt_table *table = scatter_table();
  const int32_t qsl[] = {0, 1};
  const int64_t position = 0;
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions = clbt_test_buffer(sizeof position, &position);
  const size_t smallest = head_bytes + SMALLEST_WORDS * sizeof(cl_uint);

  append_ten_rows(table, 1);
  step(table, qsl_buffer, positions);
  ck_assert_uint_eq(sent.record.head.packet_words, 92);
  ck_assert_uint_gt(sent.size, smallest);
  ck_assert_uint_le(sent.size, head_bytes + 512 * sizeof(cl_uint));
  ck_assert_uint_eq(sent.record.packet[0], 10);
  ck_assert_uint_eq(sent.record.packet[1], 50);
  assert_zero_from(92);

  clbt_assert_ok(clbt_table_append_row(table, 3, (const int32_t[]){77}, 1));
  step(table, qsl_buffer, positions);
  ck_assert_uint_eq(sent.size, smallest);
  ck_assert_uint_eq(sent.record.head.packet_words, 7);
  ck_assert(sent.record.head.work & CLBT_WORK_PACKET_INLINE);
  /* Counts (1 row, 1 id), then row 3's entry (length 6, from column 5,
     its ids from 0), then the id. */
  const cl_uint packet[7] = {1, 1, 3, 6, 5, 0, 77};
  for (int w = 0; w < 7; ++w)
    ck_assert_uint_eq(sent.record.packet[w], packet[w]);
  assert_zero_from(7);

  step(table, qsl_buffer, positions);
  ck_assert_uint_eq(sent.size, smallest);
  ck_assert_uint_eq(sent.record.head.packet_words, 0);
  ck_assert(!(sent.record.head.work & CLBT_WORK_PACKET_INLINE));
  assert_zero_from(0);
  /* PoCL compiles a kernel at its first launch, on a thread of its own
     that must not outlive the process. */
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);

  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A kernel's buffer argument is set again once the table's record of the
 * buffer has let it go, even if the handle is the same: positions A, given
 * to the kernel of the 512-word record, is not set again by a second step
 * of that kernel; then eight steps of the 64-word kernel from new
 * positions buffers push A out of the table's eight checked buffers (and
 * their references), and the next step of the 512-word kernel with A sets
 * it again. Had A been released and a new buffer made at its handle, the
 * skipped set would have left that kernel with the freed one's address.
 */
START_TEST(a_buffer_let_go_is_set_again) {
  clbt_table *table = scatter_table();
  const int32_t qsl[] = {0, 1};
  const int64_t position = 0;
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions = clbt_test_buffer(sizeof position, &position);
  const size_t smallest = head_bytes + SMALLEST_WORDS * sizeof(cl_uint);
  clbt_test_watched = positions;

  append_ten_rows(table, 1);
  step(table, qsl_buffer, positions);
  ck_assert_uint_gt(sent.size, smallest);
  ck_assert_uint_eq(clbt_test_watched_sets, 1);
  append_ten_rows(table, 10);
  step(table, qsl_buffer, positions);
  ck_assert_uint_gt(sent.size, smallest);
  ck_assert_uint_eq(clbt_test_watched_sets, 1);
  for (int n = 0; n < 8; ++n) {
    cl_mem other = clbt_test_buffer(sizeof position, &position);
    step(table, qsl_buffer, other);
    ck_assert_uint_eq(sent.size, smallest);
    clReleaseMemObject(other);
  }
  append_ten_rows(table, 20);
  step(table, qsl_buffer, positions);
  ck_assert_uint_gt(sent.size, smallest);
  ck_assert_uint_eq(clbt_test_watched_sets, 2);
  clbt_test_watched = NULL;

  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A commit of one group of a two-group table settles that group alone:
 * the other's last commit stays what its own commit moved, and its device
 * copy, unknown (device_stale, as reaping a lost upload leaves it; set
 * here directly, its device rows overwritten by junk), stays to be
 * rewritten whole by its own next commit: 2 rows of width 2 (exact
 * widths) and their lengths, (2 x 2 + 2) x 4 bytes.
 */
START_TEST(a_commit_settles_only_its_groups) {
  clbt_multi_table_config shape = clbt_test_shape(2, 4, 1, 0, 1);
  shape.exact_widths = 1; /* rows of 2 blocks */
  const clbt_group_config groups[2] = {{.block_size = 4, .max_num_blocks = 2},
                                       {.block_size = 4, .max_num_blocks = 2}};
  clbt_multi_table *multi = NULL;
  clbt_table *views[2];
  clbt_test_create_tables(&shape, groups, 2, &multi, NULL, views);
  clbt_assert_ok(clbt_table_set_commit_mode(views[1], CLBT_COMMIT_SCATTER));
  clbt_assert_ok(clbt_table_append_row(views[1], 1, (const int32_t[]){9}, 1));
  clbt_assert_ok(clbt_table_commit(views[1], 2));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(views[1], &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_SCATTER);
  ck_assert_uint_eq(info.rows, 1);
  clbt_assert_ok(clbt_table_append_row(views[0], 0, (const int32_t[]){4}, 1));
  clbt_assert_ok(clbt_table_commit(views[0], 2));
  clbt_assert_ok(clbt_table_last_commit(views[1], &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_SCATTER);
  ck_assert_uint_eq(info.rows, 1);
  ck_assert_uint_eq(info.bytes, (4 + 1) * 4);

  const int32_t junk[4] = {-7, -7, -7, -7};
  clbt_test_write(clbt_table_device_data(views[1]), sizeof junk, junk);
  views[1]->device_stale = true;
  clbt_assert_ok(clbt_table_append_row(views[0], 0, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(views[0], 2));
  clbt_assert_ok(clbt_table_commit(views[1], 2));
  clbt_assert_ok(clbt_table_last_commit(views[1], &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_WHOLE);
  ck_assert_uint_eq(info.bytes, (2 * 2 + 2) * 4);
  int32_t rows[4];
  clbt_test_read(clbt_table_device_data(views[1]), sizeof rows, rows);
  const int32_t expected[4] = {0, 0, 9, 0};
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(rows[i], expected[i]);
  clbt_multi_table_destroy(multi);
}
END_TEST

/*
 * A packet's entries ascend by row, whatever order the rows changed in:
 * the kernel's parts find a changed row by a binary search of them
 * (cl/commit.cl, committed_row_of). Rows 7, 2, 9 and 4 gain one id each,
 * in that order: counts (4 rows, 4 ids), then rows 2, 4, 7 and 9 (length
 * 1, from column 0, ids from 0, 1, 2, 3), then their ids, 20, 40, 70, 90.
 */
START_TEST(a_packet_lists_its_rows_in_ascending_order) {
  clbt_table *table = scatter_table();
  const int32_t qsl[] = {0, 1};
  const int64_t position = 0;
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions = clbt_test_buffer(sizeof position, &position);
  const uint32_t rows[4] = {7, 2, 9, 4};
  for (int i = 0; i < 4; ++i) {
    const int32_t id = (int32_t)rows[i] * 10;
    clbt_assert_ok(clbt_table_append_row(table, rows[i], &id, 1));
  }
  step(table, qsl_buffer, positions);
  ck_assert(sent.record.head.work & CLBT_WORK_PACKET_INLINE);
  ck_assert_uint_eq(sent.record.head.packet_words, 22);
  const cl_uint packet[22] = {4, 4, 2, 1, 0, 0, 4,  1,  0,  1,  7,
                              1, 0, 2, 9, 1, 0, 3, 20, 40, 70, 90};
  for (int w = 0; w < 22; ++w)
    ck_assert_msg(sent.record.packet[w] == packet[w],
                  "packet word %d is %u, not %u", w,
                  (unsigned)sent.record.packet[w], (unsigned)packet[w]);
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

int main(void) {
  clbt_test_arg_seen = keep_record;
  Suite *suite = suite_create("run");
  TCase *tc = tcase_create("run");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, a_launch_sends_the_smallest_record_all_set);
  tcase_add_test(tc, a_commit_settles_only_its_groups);
  tcase_add_test(tc, a_buffer_let_go_is_set_again);
  tcase_add_test(tc, a_packet_lists_its_rows_in_ascending_order);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
