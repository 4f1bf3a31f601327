/*
 * The order of each device call's checks (src/calls/checks.c), as
 * docs/semantics.md lists them: the first that fails decides the status.
 * Each call's faults are written here in that order, each one bad
 * argument with the status and the words its message must carry; every
 * fault alone gives its own, and every pair of faults gives the earlier
 * one's, whichever else is wrong; a multi-group step keeps the order and
 * names the group at fault. The expected order is copied from the docs,
 * not from the code.
 */
#include "clbt_test.h"

#define MAX_REQS 4
#define MAX_TOKENS 8
#define UNKNOWN_BIT (1u << 30)

/* Every argument a call below reads; `none_table` names the NONE table. */
typedef struct args {
  bool none_table;
  uint32_t step_flags, export_flags, dense_row_pitch, num_state_slots;
  uint32_t num_reqs, num_reqs_padded, num_tokens, num_rows, indices_per_row;
  cl_mem query_start_loc, positions, seq_lens, idx_mapping;
  cl_mem token_indices, token_slots;
  cl_uint num_events;
  const cl_event *wait_list;
} args;

/* The tables and buffers every case reads: good ones, and one too small
   for any of them. */
static struct {
  clbt_table *pages, *states;
  clbt_multi_table *both; /* a token-mapping group, then a NONE group */
  cl_mem qsl, positions, seq_lens, idx_mapping, indices, slots, small;
} f;

/* Both kinds of group, each a table of its own and together one table. */
static void setup(void) {
  clbt_multi_table_config shape =
      clbt_test_shape(MAX_REQS, MAX_TOKENS, 1, 0, 1);
  const clbt_group_config groups[2] = {
      {.block_size = 4, .max_num_blocks = 2},
      {.block_size = 4, .max_num_blocks = 2, .slot_mode = CLBT_SLOT_MODE_NONE}};
  clbt_table *views[2];
  clbt_test_create_tables(&shape, &groups[0], 0, NULL, &f.pages, views);
  clbt_test_create_tables(&shape, &groups[1], 0, NULL, &f.states, views);
  clbt_test_create_tables(&shape, groups, 2, &f.both, NULL, views);
  f.qsl = clbt_test_buffer(3 * sizeof(int32_t), (const int32_t[]){0, 1, 3});
  f.positions =
      clbt_test_buffer(3 * sizeof(int64_t), (const int64_t[]){0, 0, 1});
  f.seq_lens = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){1, 2});
  f.idx_mapping =
      clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  f.indices = clbt_test_buffer(6 * sizeof(int32_t),
                               (const int32_t[]){0, 0, 0, 1, 1, 0});
  f.slots = clbt_test_buffer(6 * sizeof(int32_t), NULL);
  f.small = clbt_test_buffer(sizeof(int32_t), NULL);
}

static void teardown(void) {
  clbt_table_destroy(f.pages);
  clbt_table_destroy(f.states);
  clbt_multi_table_destroy(f.both);
  cl_mem buffers[] = {f.qsl,     f.positions, f.seq_lens, f.idx_mapping,
                      f.indices, f.slots,     f.small};
  for (size_t i = 0; i < sizeof buffers / sizeof *buffers; ++i)
    clReleaseMemObject(buffers[i]);
}

/* Two requests of one and two tokens, a token-slots matrix of 3 x 2. */
static args good_args(void) {
  return (args){.step_flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT,
                .num_reqs = 2,
                .num_tokens = 3,
                .num_rows = 3,
                .indices_per_row = 2,
                .query_start_loc = f.qsl,
                .positions = f.positions,
                .seq_lens = f.seq_lens,
                .idx_mapping = f.idx_mapping,
                .token_indices = f.indices,
                .token_slots = f.slots};
}

static clbt_table *table_of(const args *a) {
  return a->none_table ? f.states : f.pages;
}

/* ---- the calls ---------------------------------------------------------- */

static clbt_step step_of(const args *a) {
  clbt_step step = CLBT_STEP_INIT;
  step.flags = a->step_flags;
  step.num_reqs = a->num_reqs;
  step.num_reqs_padded = a->num_reqs_padded;
  step.num_tokens = a->num_tokens;
  step.query_start_loc = a->query_start_loc;
  step.positions = a->positions;
  step.idx_mapping = a->idx_mapping;
  step.seq_lens = a->seq_lens;
  step.export_flags = a->export_flags;
  step.dense_row_pitch = a->dense_row_pitch;
  step.num_state_slots = a->num_state_slots;
  return step;
}

static clbt_status call_step(const args *a) {
  clbt_step step = step_of(a);
  return clbt_table_enqueue_step(table_of(a), &step, a->num_events,
                                 a->wait_list, NULL);
}

static clbt_status call_multi_step(const args *a) {
  clbt_step step = step_of(a);
  return clbt_multi_table_enqueue_step(f.both, &step, a->num_events,
                                       a->wait_list, NULL);
}

static clbt_status call_export(const args *a) {
  clbt_export_request request = CLBT_EXPORT_REQUEST_INIT;
  request.num_reqs = a->num_reqs;
  request.num_reqs_padded = a->num_reqs_padded;
  request.num_tokens = a->num_tokens;
  request.flags = a->export_flags;
  request.dense_row_pitch = a->dense_row_pitch;
  request.query_start_loc = a->query_start_loc;
  request.positions = a->positions;
  request.seq_lens = a->seq_lens;
  request.idx_mapping = a->idx_mapping;
  return clbt_table_enqueue_export(table_of(a), &request, a->num_events,
                                   a->wait_list, NULL);
}

static clbt_status call_token_slots(const args *a) {
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = a->num_reqs;
  request.num_rows = a->num_rows;
  request.indices_per_row = a->indices_per_row;
  request.query_start_loc = a->query_start_loc;
  request.idx_mapping = a->idx_mapping;
  request.token_indices = a->token_indices;
  request.token_slots = a->token_slots;
  return clbt_table_enqueue_token_slots(table_of(a), &request, a->num_events,
                                        a->wait_list, NULL);
}

/* ---- the faults --------------------------------------------------------- */

typedef struct fault {
  const char *name;
  void (*apply)(args *a);
  clbt_status status;
  const char *words; /* in the message */
} fault;

static void unknown_step_flag(args *a) { a->step_flags |= UNKNOWN_BIT; }
static void unknown_export_flag(args *a) { a->export_flags |= UNKNOWN_BIT; }
static void stray_state_slots(args *a) { a->num_state_slots = 2; }
static void state_slots_past_width(args *a) {
  a->step_flags |= CLBT_STEP_STATE_SLOTS;
  a->num_state_slots = 3; /* the NONE group's width is 2 */
}
static void none_table(args *a) { a->none_table = true; }
static void no_query_start_loc(args *a) { a->query_start_loc = NULL; }
static void no_positions(args *a) { a->positions = NULL; }
static void too_many_reqs(args *a) { a->num_reqs = MAX_REQS + 1; }
static void too_many_tokens(args *a) { a->num_tokens = MAX_TOKENS + 1; }
static void padding_below(args *a) { a->num_reqs_padded = 1; }
static void small_query_start_loc(args *a) { a->query_start_loc = f.small; }
static void small_positions(args *a) { a->positions = f.small; }
static void small_seq_lens(args *a) { a->seq_lens = f.small; }
static void small_idx_mapping(args *a) { a->idx_mapping = f.small; }
static void broken_wait_list(args *a) { a->num_events = 1; }
static void wide_dense_pitch(args *a) {
  a->export_flags |= CLBT_EXPORT_DENSE;
  a->dense_row_pitch = 100; /* 2 rows of 100 past 4 x width 2 */
}
static void too_many_rows(args *a) { a->num_rows = MAX_TOKENS + 1; }
static void entries_past_32_bits(args *a) { a->indices_per_row = 1u << 31; }
static void no_token_indices(args *a) { a->token_indices = NULL; }
static void no_token_slots(args *a) { a->token_slots = NULL; }
static void small_token_indices(args *a) { a->token_indices = f.small; }
static void small_token_slots(args *a) { a->token_slots = f.small; }
static void token_slots_in_storage(args *a) {
  a->token_slots = clbt_table_device_data(table_of(a)); /* 32 bytes */
}

#define FAULT(apply, status, words)                                            \
  { #apply, apply, status, words }

/* The step's, from semantics.md ("Step"). */
static const fault step_faults[] = {
    FAULT(unknown_step_flag, CLBT_INVALID_ARGUMENT, "step->flags"),
    FAULT(unknown_export_flag, CLBT_INVALID_ARGUMENT, "step->export_flags"),
    FAULT(stray_state_slots, CLBT_INVALID_ARGUMENT,
          "without CLBT_STEP_STATE_SLOTS"),
    FAULT(none_table, CLBT_INVALID_ARGUMENT, "CLBT_SLOT_MODE_NONE"),
    FAULT(no_query_start_loc, CLBT_NULL_ARGUMENT, "query_start_loc is NULL"),
    FAULT(no_positions, CLBT_NULL_ARGUMENT, "positions is NULL"),
    FAULT(too_many_reqs, CLBT_TOO_MANY_REQUESTS, "num_reqs 5"),
    FAULT(too_many_tokens, CLBT_TOO_MANY_TOKENS, "num_tokens 9"),
    FAULT(padding_below, CLBT_INVALID_ARGUMENT, "num_reqs_padded 1"),
    FAULT(small_query_start_loc, CLBT_BUFFER_TOO_SMALL,
          "query_start_loc holds"),
    FAULT(small_positions, CLBT_BUFFER_TOO_SMALL, "positions holds"),
    FAULT(small_seq_lens, CLBT_BUFFER_TOO_SMALL, "seq_lens holds"),
    FAULT(small_idx_mapping, CLBT_BUFFER_TOO_SMALL, "idx_mapping holds"),
    FAULT(broken_wait_list, CLBT_INVALID_ARGUMENT, "wait_list is NULL"),
    FAULT(wide_dense_pitch, CLBT_INVALID_ARGUMENT, "dense_row_pitch 100"),
};

/* A multi-group step's: the same order, where a group's fault names it. */
static const fault multi_step_faults[] = {
    FAULT(unknown_step_flag, CLBT_INVALID_ARGUMENT, "step->flags"),
    FAULT(unknown_export_flag, CLBT_INVALID_ARGUMENT, "step->export_flags"),
    FAULT(state_slots_past_width, CLBT_INVALID_ARGUMENT, "groups[1]'s width"),
    FAULT(no_query_start_loc, CLBT_NULL_ARGUMENT, "query_start_loc is NULL"),
    FAULT(too_many_reqs, CLBT_TOO_MANY_REQUESTS, "num_reqs 5"),
    FAULT(padding_below, CLBT_INVALID_ARGUMENT, "num_reqs_padded 1"),
    FAULT(small_seq_lens, CLBT_BUFFER_TOO_SMALL, "seq_lens holds"),
    FAULT(broken_wait_list, CLBT_INVALID_ARGUMENT, "wait_list is NULL"),
    FAULT(wide_dense_pitch, CLBT_INVALID_ARGUMENT, "groups[0]"),
};

/* The export's, from semantics.md ("Export"). */
static const fault export_faults[] = {
    FAULT(none_table, CLBT_INVALID_ARGUMENT, "CLBT_SLOT_MODE_NONE"),
    FAULT(no_query_start_loc, CLBT_NULL_ARGUMENT, "query_start_loc is NULL"),
    FAULT(too_many_reqs, CLBT_TOO_MANY_REQUESTS, "num_reqs 5"),
    FAULT(padding_below, CLBT_INVALID_ARGUMENT, "num_reqs_padded 1"),
    FAULT(small_seq_lens, CLBT_BUFFER_TOO_SMALL, "seq_lens holds"),
    FAULT(broken_wait_list, CLBT_INVALID_ARGUMENT, "wait_list is NULL"),
    FAULT(unknown_export_flag, CLBT_INVALID_ARGUMENT, "request->flags"),
    FAULT(wide_dense_pitch, CLBT_INVALID_ARGUMENT, "dense_row_pitch 100"),
};

/* Token slots', from semantics.md ("Token slots"). */
static const fault token_slots_faults[] = {
    FAULT(none_table, CLBT_INVALID_ARGUMENT, "CLBT_SLOT_MODE_NONE"),
    FAULT(no_query_start_loc, CLBT_NULL_ARGUMENT, "query_start_loc is NULL"),
    FAULT(too_many_reqs, CLBT_TOO_MANY_REQUESTS, "num_reqs 5"),
    FAULT(too_many_rows, CLBT_TOO_MANY_TOKENS, "num_rows 9"),
    FAULT(entries_past_32_bits, CLBT_SIZE_OVERFLOW, "UINT32_MAX entries"),
    FAULT(no_token_indices, CLBT_NULL_ARGUMENT, "token_indices is NULL"),
    FAULT(no_token_slots, CLBT_NULL_ARGUMENT, "token_slots is NULL"),
    FAULT(small_query_start_loc, CLBT_BUFFER_TOO_SMALL,
          "query_start_loc holds"),
    FAULT(small_idx_mapping, CLBT_BUFFER_TOO_SMALL, "idx_mapping holds"),
    FAULT(small_token_indices, CLBT_BUFFER_TOO_SMALL, "token_indices holds"),
    FAULT(small_token_slots, CLBT_BUFFER_TOO_SMALL, "token_slots holds"),
    FAULT(token_slots_in_storage, CLBT_INVALID_ARGUMENT,
          "token_slots is part of the table's own storage"),
    FAULT(broken_wait_list, CLBT_INVALID_ARGUMENT, "wait_list is NULL"),
};

#define COUNT(faults) (sizeof faults / sizeof *faults)

/* A call under test: its name, its faults in the documented order. */
typedef struct call_case {
  const char *name;
  clbt_status (*call)(const args *a);
  const fault *faults;
  size_t count;
} call_case;

#define CALL_CASE(call, faults)                                                \
  { #call, call, faults, COUNT(faults) }

static const call_case cases[] = {
    CALL_CASE(call_step, step_faults),
    CALL_CASE(call_multi_step, multi_step_faults),
    CALL_CASE(call_export, export_faults),
    CALL_CASE(call_token_slots, token_slots_faults),
};

/* The call with faults `first` and, unless it is `first`, `second`
   (applied first, so that where both set one argument the earlier wins)
   fails as `first` says. */
static void assert_decided_by(const call_case *c, const fault *first,
                              const fault *second) {
  args a = good_args();
  second->apply(&a);
  first->apply(&a);
  clbt_status status = c->call(&a);
  ck_assert_msg(status == first->status &&
                    strstr(clbt_last_error(), first->words) != NULL,
                "%s, %s with %s: %s (%s), expected %s mentioning '%s'", c->name,
                first->name, second->name, clbt_status_name(status),
                clbt_last_error(), clbt_status_name(first->status),
                first->words);
}

/* Each call: a good call succeeds; each fault decides alone and before
   every later one. */
START_TEST(checks_in_order) {
  const call_case *c = &cases[_i];
  args good = good_args();
  clbt_assert_ok(c->call(&good));
  for (size_t i = 0; i < c->count; ++i)
    for (size_t j = i; j < c->count; ++j)
      assert_decided_by(c, &c->faults[i], &c->faults[j]);
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())), CL_SUCCESS);
}
END_TEST

/*
 * Buffers one entry short of what the call reads: query_start_loc takes
 * num_reqs + 1 entries (2 requests: 12 bytes, so 8 is refused), and a
 * multi-table's token_slots one section of num_rows x indices_per_row
 * entries per token-mapping group (two groups of 3 x 2 entries: 48 bytes,
 * so one section's 24 is refused, and 48 taken).
 */
START_TEST(buffers_one_entry_short) {
  cl_mem short_qsl =
      clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  args a = good_args();
  a.query_start_loc = short_qsl;
  clbt_assert_fails(call_step(&a), CLBT_BUFFER_TOO_SMALL,
                    "query_start_loc holds 8 bytes");
  clbt_assert_fails(call_export(&a), CLBT_BUFFER_TOO_SMALL,
                    "query_start_loc holds 8 bytes");
  clbt_assert_fails(call_token_slots(&a), CLBT_BUFFER_TOO_SMALL,
                    "query_start_loc holds 8 bytes");
  clbt_multi_table_config shape =
      clbt_test_shape(MAX_REQS, MAX_TOKENS, 1, 0, 1);
  const clbt_group_config groups[2] = {{.block_size = 4, .max_num_blocks = 2},
                                       {.block_size = 4, .max_num_blocks = 2}};
  clbt_multi_table *two = NULL;
  clbt_table *views[2];
  clbt_test_create_tables(&shape, groups, 2, &two, NULL, views);
  a = good_args();
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = a.num_reqs;
  request.num_rows = a.num_rows;
  request.indices_per_row = a.indices_per_row;
  request.query_start_loc = a.query_start_loc;
  request.token_indices = a.token_indices;
  request.token_slots = f.slots; /* 6 entries: one section */
  clbt_assert_fails(
      clbt_multi_table_enqueue_token_slots(two, &request, 0, NULL, NULL),
      CLBT_BUFFER_TOO_SMALL, "token_slots holds 24 bytes");
  cl_mem both_sections = clbt_test_buffer(12 * sizeof(int32_t), NULL);
  request.token_slots = both_sections;
  clbt_assert_ok(
      clbt_multi_table_enqueue_token_slots(two, &request, 0, NULL, NULL));
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())), CL_SUCCESS);
  clReleaseMemObject(both_sections);
  clReleaseMemObject(short_qsl);
  clbt_multi_table_destroy(two);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("checks");
  TCase *c = tcase_create("checks");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_add_loop_test(c, checks_in_order, 0, (int)COUNT(cases));
  tcase_add_test(c, buffers_one_entry_short);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
