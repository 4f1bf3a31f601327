/*
 * Bad input, exhaustively: one table of every public function against
 * every class of invalid argument. Each case must return its own status
 * and a message naming the argument and its bound, and must change
 * nothing: host rows, lengths and committed rows of every table (compared
 * with snapshots), the poisoned slot-mapping outputs, the rejected-token
 * counters, and whatever the call would have written through its output
 * pointers. The expected messages are the rules of docs/semantics.md and
 * the header, written out by hand.
 */
#include "clbt_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- the fixture: tables with rows, committed, and batch buffers -------- */

/* Width 3 KV blocks x 128/32 = 12 kernel blocks; block ids up to
   (INT32_MAX - 3) / 4 = 536870911 expand into int32 kernel blocks. */
static const clbt_table_config table_config = {
    .block_size = 128, .kernel_block_size = 32, .max_num_reqs = 4,
    .max_num_blocks_per_req = 3, .max_num_batched_tokens = 8};
/* Group 0 has the table's layout (3 blocks of 128 tokens are already a
   multiple of 128); group 1 maps no tokens: width 3. */
static const clbt_group_config groups[] = {
    {.block_size = 128, .kernel_block_size = 32, .max_num_blocks = 3},
    {.block_size = 16, .max_num_blocks = 3, .slot_mode = CLBT_SLOT_MODE_NONE}};
static const clbt_multi_table_config multi_config = {
    .max_num_reqs = 4, .max_num_batched_tokens = 8, .num_groups = 2,
    .groups = groups};

typedef struct fixture {
  clbt_table *table;
  clbt_multi_table *multi;
  cl_mem query_start_loc;       /* int32[5] */
  cl_mem positions;             /* int64[8] */
  cl_mem small_query_start_loc; /* int32[2] */
  cl_mem small_positions;       /* int64[2] */
  cl_mem sub_positions;         /* int64[1], a sub-buffer of positions */
  cl_context other_context;
  cl_mem foreign;               /* 64 bytes in other_context */
  cl_mem read_only;             /* 64 bytes kernels may only read */
  cl_command_queue foreign_queue, out_of_order_queue;
  cl_device_id sub_device;      /* a partition of the test device */
  cl_context sub_context;
  cl_command_queue sub_queue;
  cl_event events[2];           /* complete: one of the device's context,
                                   then one of other_context */
} fixture;

/* Rows 0-1 committed, row 2 edited after the commit: host and device
   differ, so a stray commit or a stray write shows. */
static void fill_tables(fixture *f) {
  const int32_t *const row0[] = {(const int32_t[]){5}, (const int32_t[]){1}};
  const int32_t *const row1[] = {(const int32_t[]){6, 7},
                                 (const int32_t[]){2, 3}};
  const size_t counts0[] = {1, 1}, counts1[] = {2, 2};
  clbt_assert_ok(clbt_table_append_row(f->table, 0, row0[0], 1));
  clbt_assert_ok(clbt_table_append_row(f->table, 1, row1[0], 2));
  clbt_assert_ok(clbt_multi_table_append_row(f->multi, 0, row0, counts0));
  clbt_assert_ok(clbt_multi_table_append_row(f->multi, 1, row1, counts1));
  clbt_assert_ok(clbt_table_commit(f->table, 2));
  clbt_assert_ok(clbt_multi_table_commit(f->multi, 2));
  clbt_assert_ok(clbt_table_append_row(f->table, 2, (const int32_t[]){9}, 1));
  clbt_assert_ok(clbt_multi_table_add_row(f->multi, 2, row0, counts0));
  clbt_test_poison(clbt_table_slot_mapping(f->table), 8);
  for (uint32_t g = 0; g < 2; ++g)
    clbt_test_poison(
        clbt_table_slot_mapping(clbt_multi_table_group(f->multi, g)), 8);
  /* The NONE group's state slots: [max_num_reqs][width 3] int64-poisoned. */
  clbt_test_poison(clbt_table_state_slots(clbt_multi_table_group(f->multi, 1)),
                   4 * 3 / 2);
}

/* Objects of another context, an out-of-order queue, and a queue of a
   sub-device in a context that also holds the device, for the cases that
   need them. */
static void make_foreign_objects(fixture *f) {
  cl_device_id id = clbt_device_id(clbt_test_device());
  cl_int error = CL_SUCCESS;
  f->other_context = clCreateContext(NULL, 1, &id, NULL, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  f->foreign = clCreateBuffer(f->other_context, CL_MEM_READ_WRITE, 64, NULL,
                              &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  f->foreign_queue = clCreateCommandQueue(f->other_context, id, 0, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  f->out_of_order_queue = clCreateCommandQueue(
      clbt_device_context(clbt_test_device()), id,
      CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  const cl_device_partition_property one_unit[] = {
      CL_DEVICE_PARTITION_BY_COUNTS, 1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END,
      0};
  ck_assert_int_eq(clCreateSubDevices(id, one_unit, 1, &f->sub_device, NULL),
                   CL_SUCCESS);
  cl_device_id both[] = {id, f->sub_device};
  f->sub_context = clCreateContext(NULL, 2, both, NULL, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  f->sub_queue = clCreateCommandQueue(f->sub_context, f->sub_device, 0, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  const cl_context contexts[] = {clbt_device_context(clbt_test_device()),
                                 f->other_context};
  for (int i = 0; i < 2; ++i) {
    f->events[i] = clCreateUserEvent(contexts[i], &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    ck_assert_int_eq(clSetUserEventStatus(f->events[i], CL_COMPLETE),
                     CL_SUCCESS);
  }
}

static fixture fixture_create(void) {
  fixture f = {0};
  clbt_assert_ok(
      clbt_table_create(clbt_test_device(), &table_config, &f.table));
  clbt_assert_ok(
      clbt_multi_table_create(clbt_test_device(), &multi_config, &f.multi));
  f.query_start_loc = clbt_test_buffer(5 * sizeof(int32_t), NULL);
  f.positions = clbt_test_buffer(8 * sizeof(int64_t), NULL);
  f.small_query_start_loc = clbt_test_buffer(2 * sizeof(int32_t), NULL);
  f.small_positions = clbt_test_buffer(2 * sizeof(int64_t), NULL);
  cl_buffer_region first = {0, sizeof(int64_t)};
  cl_int error = CL_SUCCESS;
  f.sub_positions = clCreateSubBuffer(f.positions, CL_MEM_READ_WRITE,
                                      CL_BUFFER_CREATE_TYPE_REGION, &first,
                                      &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  f.read_only = clbt_test_read_only_buffer(64, NULL);
  make_foreign_objects(&f);
  fill_tables(&f);
  return f;
}

static void fixture_destroy(fixture *f) {
  clbt_table_destroy(f->table);
  clbt_multi_table_destroy(f->multi);
  cl_mem buffers[] = {f->sub_positions, f->query_start_loc, f->positions,
                      f->small_query_start_loc, f->small_positions,
                      f->foreign, f->read_only};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
  clReleaseCommandQueue(f->foreign_queue);
  clReleaseCommandQueue(f->out_of_order_queue);
  clReleaseCommandQueue(f->sub_queue);
  clReleaseEvent(f->events[0]);
  clReleaseEvent(f->events[1]);
  clReleaseContext(f->sub_context);
  clReleaseDevice(f->sub_device);
  clReleaseContext(f->other_context);
}

/* ---- the cases ---------------------------------------------------------- */

typedef enum function {
  TABLE_CREATE, TABLE_PREPARE, TABLE_APPEND_ROW, TABLE_ADD_ROW,
  TABLE_CLEAR_ROW, TABLE_MOVE_ROW, TABLE_SWAP_ROW, TABLE_COMMIT,
  TABLE_SLOT_MAPPING, TABLE_SLOT_MAPPING_HOST, TABLE_CLEAR,
  TABLE_READ_REJECTED, TABLE_RESET_REJECTED,
  MULTI_CREATE, MULTI_PREPARE, MULTI_APPEND_ROW, MULTI_ADD_ROW,
  MULTI_CLEAR_ROW, MULTI_MOVE_ROW, MULTI_SWAP_ROW, MULTI_COMMIT,
  MULTI_SLOT_MAPPING, MULTI_CLEAR,
  TABLE_ENQUEUE_COMMIT, TABLE_ENQUEUE_SLOT_MAPPING, TABLE_SET_COMMIT_MODE,
  TABLE_LAST_COMMIT, MULTI_ENQUEUE_COMMIT, MULTI_ENQUEUE_SLOT_MAPPING,
  LOG_SET_LEVEL, DEVICE_PROGRAM_OPTIONS,
  TABLE_APPEND_ROWS, TABLE_ADD_ROWS, MULTI_APPEND_ROWS, MULTI_ADD_ROWS,
  DEVICE_OPEN, DEVICE_WRAP, DEVICE_SELECTOR, DEVICE_SET_BUILD_OPTIONS,
  DEVICE_BUILD_OPTIONS, DEVICE_SET_CACHE_DIR, DEVICE_CACHE_DIR,
  BLOCK_TABLE_WIDTH, TABLE_TRUNCATE_ROW, MULTI_TRUNCATE_ROW,
  TABLE_ENQUEUE_EXPORT, MULTI_ENQUEUE_EXPORT, TABLE_EXPORT_BUFFERS,
  TABLE_STEP_HOST, TABLE_ENQUEUE_STEP, MULTI_ENQUEUE_STEP, MULTI_STEP_HOST,
  TABLE_ENQUEUE_TOKEN_SLOTS, MULTI_ENQUEUE_TOKEN_SLOTS, MULTI_UPDATE_ROW,
  NUM_FUNCTIONS
} function;

static const char *const function_names[] = {
    "clbt_table_create", "clbt_table_prepare", "clbt_table_append_row",
    "clbt_table_add_row", "clbt_table_clear_row", "clbt_table_move_row",
    "clbt_table_swap_row", "clbt_table_commit",
    "clbt_table_compute_slot_mapping", "clbt_table_compute_slot_mapping_host",
    "clbt_table_clear", "clbt_table_read_rejected_tokens",
    "clbt_table_reset_rejected_tokens", "clbt_multi_table_create",
    "clbt_multi_table_prepare", "clbt_multi_table_append_row",
    "clbt_multi_table_add_row", "clbt_multi_table_clear_row",
    "clbt_multi_table_move_row", "clbt_multi_table_swap_row",
    "clbt_multi_table_commit", "clbt_multi_table_compute_slot_mapping",
    "clbt_multi_table_clear", "clbt_table_enqueue_commit",
    "clbt_table_enqueue_slot_mapping", "clbt_table_set_commit_mode",
    "clbt_table_last_commit", "clbt_multi_table_enqueue_commit",
    "clbt_multi_table_enqueue_slot_mapping", "clbt_log_set_level",
    "clbt_device_program_options", "clbt_table_append_rows",
    "clbt_table_add_rows", "clbt_multi_table_append_rows",
    "clbt_multi_table_add_rows", "clbt_device_open", "clbt_device_wrap",
    "clbt_device_selector", "clbt_device_set_build_options",
    "clbt_device_build_options", "clbt_device_set_cache_dir",
    "clbt_device_cache_dir", "clbt_block_table_width",
    "clbt_table_truncate_row", "clbt_multi_table_truncate_row",
    "clbt_table_enqueue_export", "clbt_multi_table_enqueue_export",
    "clbt_table_export_buffers", "clbt_table_compute_step_host",
    "clbt_table_enqueue_step", "clbt_multi_table_enqueue_step",
    "clbt_multi_table_compute_step_host", "clbt_table_enqueue_token_slots",
    "clbt_multi_table_enqueue_token_slots", "clbt_multi_table_update_row"};
_Static_assert(sizeof function_names / sizeof function_names[0] ==
                   NUM_FUNCTIONS,
               "one name per function, in the enum's order");

/* Which pointer argument, if any, is NULL. */
typedef enum null_pointer {
  NO_NULL, NULL_HANDLE, NULL_OUT, NULL_CONFIG, NULL_BLOCK_IDS, NULL_COUNTS,
  NULL_QUERY_START_LOC, NULL_POSITIONS, NULL_CONTEXT, NULL_DEVICE, NULL_QUEUE,
  NULL_ROWS, NULL_REQUEST, NULL_TOKEN_INDICES, NULL_TOKEN_SLOTS
} null_pointer;

/* The buffers of a slot-mapping call; the host call's arrays likewise. */
typedef enum buffer { GOOD, TOO_SMALL, SUB_BUFFER, FOREIGN, READ_ONLY } buffer;

/* The queue handed to clbt_device_wrap. */
typedef enum queue_kind {
  OWN_QUEUE, FOREIGN_QUEUE, OUT_OF_ORDER_QUEUE, SUB_DEVICE_QUEUE
} queue_kind;

typedef struct bad_input {
  function function;
  const char *argument; /* the class of bad argument, for a failure */
  clbt_status status;
  const char *words;    /* the message must contain these */
  null_pointer null;
  uint32_t a, b;        /* row, src or a; dst or b; num_reqs */
  uint32_t num_tokens;
  const int32_t *ids[2]; /* per group; the single table uses [0] */
  size_t counts[2];
  buffer query_start_loc, positions;
  const clbt_table_config *config;
  const clbt_multi_table_config *multi_config;
  const char *selector;
  size_t size;          /* of the selector buffer */
  size_t setting_length; /* a setter's value: this many characters, */
  const char *setting;   /* or this text */
  queue_kind queue;
  uint32_t width_args[4]; /* max_num_blocks, block, kernel block, alignment */
  uint32_t num_events;  /* of an enqueue's wait list */
  bool wait_list;       /* whether that list is given (of NULL events), */
  bool foreign_event;   /* or is the fixture's events, the second foreign */
  size_t num_rows;      /* of a batch row update: its rows, and per group */
  const uint32_t *rows; /* its counts; the ids are ids[g], end to end */
  const uint32_t *row_counts[2];
  bool seq_lens_given;  /* an export's lengths: buffer seq_lens */
  buffer seq_lens;
  bool idx_mapping_given; /* an export's rows: buffer idx_mapping */
  buffer idx_mapping;
  bool none_table;      /* the call is made on a CLBT_SLOT_MODE_NONE table */
  uint32_t flags;       /* a step's flags, besides CLBT_STEP_GATHER */
  uint32_t struct_size; /* a step's or a request's; 0: its sizeof */
  bool later_field;     /* a step or request grown by a field set to 1 */
  buffer step_idx_mapping; /* a device step's (GOOD: the fixture's) */
  uint32_t export_flags; /* an export's flags, or a device step's */
  uint32_t pitch;        /* their dense_row_pitch */
  uint32_t num_state_slots; /* a device step's */
  int32_t state_null_block; /* a device step's */
  bool none_group;      /* the call is made on the multi's NONE group alone */
  uint32_t indices_per_row; /* token slots: .a requests, .num_tokens rows */
  buffer token_indices, token_slots; /* GOOD: 64 bytes */
} bad_input;

#define IDS(...) ((const int32_t[]){__VA_ARGS__})
#define U32S(...) ((const uint32_t[]){__VA_ARGS__})
#define TABLE_CONFIG(...) (&(const clbt_table_config){__VA_ARGS__})
#define GROUPS(...) ((const clbt_group_config[]){__VA_ARGS__})
#define MULTI_CONFIG(...) (&(const clbt_multi_table_config){__VA_ARGS__})
/* One case: the function, the bad argument, the status, then the words
   of the message and the case's arguments. */
#define BAD(fn, what, expected, ...)                                       \
  {.function = fn, .argument = what, .status = expected, .words = __VA_ARGS__}
/* A config refused the same way by create and by prepare. */
#define TABLE_CONFIG_CASE(what, expected, message, value)                  \
  BAD(TABLE_CREATE, what, expected, message, .config = value),             \
  BAD(TABLE_PREPARE, what, expected, message, .config = value)
#define MULTI_CONFIG_CASE(what, expected, message, value)                  \
  BAD(MULTI_CREATE, what, expected, message, .multi_config = value),       \
  BAD(MULTI_PREPARE, what, expected, message, .multi_config = value)

static const bad_input cases[] = {
    /* ---- table configs ---- */
    BAD(TABLE_CREATE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_HANDLE, .config = &table_config),
    BAD(TABLE_CREATE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
        .null = NULL_CONFIG),
    BAD(TABLE_CREATE, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT, .config = &table_config),
    BAD(TABLE_PREPARE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_HANDLE, .config = &table_config),
    BAD(TABLE_PREPARE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
        .null = NULL_CONFIG),
    TABLE_CONFIG_CASE(
        "struct_size below 0.2's", CLBT_INVALID_CONFIG,
        "config: struct_size is 8; clbt " CLBT_VERSION_STRING
        " reads 0 (0.2's layout), 40 (0.2), 44 (0.3) or a later "
        "version's size (a multiple of 4 above 44, at most 4096)",
        TABLE_CONFIG(.struct_size = 8, .block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "zero block_size", CLBT_INVALID_CONFIG,
        "config->block_size is 0; it must be >= 1",
        TABLE_CONFIG(.block_size = 0, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "zero max_num_reqs", CLBT_INVALID_CONFIG, "config->max_num_reqs is 0",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 0,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "zero max_num_blocks_per_req", CLBT_INVALID_CONFIG,
        "config->max_num_blocks_per_req is 0",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 0, .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "zero max_num_batched_tokens", CLBT_INVALID_CONFIG,
        "config->max_num_batched_tokens is 0",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 0)),
    TABLE_CONFIG_CASE(
        "non-dividing kernel_block_size", CLBT_INVALID_CONFIG,
        "kernel_block_size 48 does not divide block_size 128",
        TABLE_CONFIG(.block_size = 128, .kernel_block_size = 48,
                     .max_num_reqs = 1, .max_num_blocks_per_req = 1,
                     .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "kernel_block_size above block_size", CLBT_INVALID_CONFIG,
        "kernel_block_size 256 does not divide block_size 128",
        TABLE_CONFIG(.block_size = 128, .kernel_block_size = 256,
                     .max_num_reqs = 1, .max_num_blocks_per_req = 1,
                     .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE(
        "non-dividing cp_interleave_size", CLBT_INVALID_CONFIG,
        "config->cp_interleave_size 3 does not divide "
        "block_size 128",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1,
                     .cp_world_size = 2, .cp_interleave_size = 3)),
    TABLE_CONFIG_CASE(
        "cp_rank equal to cp_world_size", CLBT_INVALID_CONFIG,
        "config->cp_rank 2 is not below cp_world_size 2",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1,
                     .cp_world_size = 2, .cp_rank = 2)),
    TABLE_CONFIG_CASE("cp_rank without CP", CLBT_INVALID_CONFIG,
                      "config->cp_rank 1 is not below cp_world_size 1",
                      TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                                   .max_num_blocks_per_req = 1,
                                   .max_num_batched_tokens = 1, .cp_rank = 1)),
    TABLE_CONFIG_CASE(
        "unknown slot_mode", CLBT_INVALID_CONFIG,
        "config->slot_mode 2 is unknown",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1,
                     .slot_mode = (clbt_slot_mode)2)),
    TABLE_CONFIG_CASE(
        "max_num_reqs above INT32_MAX", CLBT_INVALID_CONFIG,
        "config->max_num_reqs 2147483648 exceeds INT32_MAX",
        TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1u << 31,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE("max_num_batched_tokens above INT32_MAX",
                      CLBT_INVALID_CONFIG,
                      "config->max_num_batched_tokens 4294967295 exceeds "
                      "INT32_MAX",
                      TABLE_CONFIG(.block_size = 128, .max_num_reqs = 1,
                                   .max_num_blocks_per_req = 1,
                                   .max_num_batched_tokens = UINT32_MAX)),
    TABLE_CONFIG_CASE(
        "width above 32 bits", CLBT_SIZE_OVERFLOW,
        "width of 33554432 KV blocks x 128 kernel blocks each "
        "exceeds UINT32_MAX",
        TABLE_CONFIG(.block_size = 128, .kernel_block_size = 1,
                     .max_num_reqs = 1, .max_num_blocks_per_req = 1u << 25,
                     .max_num_batched_tokens = 1)),
    TABLE_CONFIG_CASE("rows x width x 4 bytes above SIZE_MAX",
                      CLBT_SIZE_OVERFLOW,
                      "max_num_reqs 2147483647 x width 4294967295 int32 "
                      "exceeds SIZE_MAX",
                      TABLE_CONFIG(.block_size = 128, .kernel_block_size = 128,
                                   .max_num_reqs = INT32_MAX,
                                   .max_num_blocks_per_req = UINT32_MAX,
                                   .max_num_batched_tokens = 1)),

    /* ---- multi-group table configs ---- */
    BAD(MULTI_CREATE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_HANDLE, .multi_config = &multi_config),
    BAD(MULTI_CREATE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
        .null = NULL_CONFIG),
    BAD(MULTI_CREATE, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT, .multi_config = &multi_config),
    BAD(MULTI_PREPARE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_HANDLE, .multi_config = &multi_config),
    BAD(MULTI_PREPARE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
        .null = NULL_CONFIG),
    MULTI_CONFIG_CASE(
        "groups of two struct sizes", CLBT_INVALID_CONFIG,
        "config->groups[1]: struct_size says 40 bytes and groups[0]'s 24",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 2,
                     .groups = GROUPS({.block_size = 16, .max_num_blocks = 1},
                                      {.struct_size = 40,
                                       .block_size = 16,
                                       .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "zero num_groups", CLBT_INVALID_CONFIG, "config->num_groups is 0",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 0,
                     .groups =
                         GROUPS({.block_size = 16, .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "unknown commit_mode", CLBT_INVALID_CONFIG,
        "config->commit_mode 3 is not a clbt_commit_mode",
        MULTI_CONFIG(.struct_size = sizeof(clbt_multi_table_config),
                     .max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1, .commit_mode = (clbt_commit_mode)3,
                     .groups =
                         GROUPS({.block_size = 16, .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "NULL groups", CLBT_NULL_ARGUMENT, "config->groups is NULL",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1, .groups = NULL)),
    MULTI_CONFIG_CASE("zero max_num_reqs", CLBT_INVALID_CONFIG,
                      "groups[0]: config->max_num_reqs is 0",
                      MULTI_CONFIG(.max_num_reqs = 0,
                                   .max_num_batched_tokens = 1, .num_groups = 1,
                                   .groups = GROUPS({.block_size = 16,
                                                     .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE("zero max_num_batched_tokens", CLBT_INVALID_CONFIG,
                      "groups[0]: config->max_num_batched_tokens is 0",
                      MULTI_CONFIG(.max_num_reqs = 1,
                                   .max_num_batched_tokens = 0, .num_groups = 1,
                                   .groups = GROUPS({.block_size = 16,
                                                     .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE("max_num_reqs above INT32_MAX", CLBT_INVALID_CONFIG,
                      "groups[0]: config->max_num_reqs 4294967295 exceeds "
                      "INT32_MAX",
                      MULTI_CONFIG(.max_num_reqs = UINT32_MAX,
                                   .max_num_batched_tokens = 1, .num_groups = 1,
                                   .groups = GROUPS({.block_size = 16,
                                                     .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "a group's zero block_size", CLBT_INVALID_CONFIG,
        "groups[1]: block_size is 0",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 2,
                     .groups = GROUPS({.block_size = 16, .max_num_blocks = 1},
                                      {.max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "a group's zero max_num_blocks", CLBT_INVALID_CONFIG,
        "groups[0]: max_num_blocks is 0",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1, .groups = GROUPS({.block_size = 16}))),
    MULTI_CONFIG_CASE("a group's non-dividing kernel_block_size",
                      CLBT_INVALID_CONFIG,
                      "groups[0]: kernel_block_size 48 does not divide "
                      "block_size 128",
                      MULTI_CONFIG(.max_num_reqs = 1,
                                   .max_num_batched_tokens = 1, .num_groups = 1,
                                   .groups = GROUPS({.block_size = 128,
                                                     .kernel_block_size = 48,
                                                     .max_num_blocks = 1}))),
    MULTI_CONFIG_CASE(
        "a group's unknown slot_mode", CLBT_INVALID_CONFIG,
        "groups[0]: config->slot_mode 5 is unknown",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1,
                     .groups = GROUPS({.block_size = 16,
                                       .max_num_blocks = 1,
                                       .slot_mode = (clbt_slot_mode)5}))),
    MULTI_CONFIG_CASE(
        "cp_rank equal to cp_world_size", CLBT_INVALID_CONFIG,
        "config->cp_rank 4 is not below cp_world_size 4",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1,
                     .groups = GROUPS({.block_size = 16, .max_num_blocks = 1}),
                     .cp_world_size = 4, .cp_rank = 4)),
    MULTI_CONFIG_CASE(
        "cp_interleave_size not dividing a sharded group", CLBT_INVALID_CONFIG,
        "groups[0]: config->cp_interleave_size 32 does not "
        "divide block_size 16",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1,
                     .groups = GROUPS({.block_size = 16, .max_num_blocks = 1}),
                     .cp_world_size = 2, .cp_interleave_size = 32)),
    MULTI_CONFIG_CASE(
        "a group's width above 32 bits after alignment", CLBT_SIZE_OVERFLOW,
        "groups[0]: width of 4294967296 KV blocks",
        MULTI_CONFIG(.max_num_reqs = 1, .max_num_batched_tokens = 1,
                     .num_groups = 1,
                     .groups = GROUPS(
                         {.block_size = 16, .max_num_blocks = UINT32_MAX}))),

    /* ---- single-table row operations ---- */
    BAD(TABLE_APPEND_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .ids = {IDS(1)}, .counts = {1}),
    BAD(TABLE_APPEND_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "row 4 is out of range: max_num_reqs is 4", .a = 4, .ids = {IDS(1)},
        .counts = {1}),
    BAD(TABLE_APPEND_ROW, "row = UINT32_MAX", CLBT_ROW_OUT_OF_RANGE,
        "row 4294967295 is out of range", .a = UINT32_MAX, .ids = {IDS(1)},
        .counts = {1}),
    BAD(TABLE_APPEND_ROW, "NULL block_ids with n > 0", CLBT_NULL_ARGUMENT,
        "block_ids is NULL with n = 1", .a = 0, .counts = {1}),
    BAD(TABLE_APPEND_ROW, "row out of range before NULL block_ids",
        CLBT_ROW_OUT_OF_RANGE, "row 4 is out of range", .a = 4, .counts = {1}),
    BAD(TABLE_APPEND_ROW, "n overflowing the row", CLBT_ROW_OVERFLOW,
        "n = 2 blocks of 4 kernel blocks would overflow row 1: it holds 8 of "
        "width 12",
        .a = 1, .ids = {IDS(1, 2)}, .counts = {2}),
    BAD(TABLE_APPEND_ROW, "n = SIZE_MAX", CLBT_ROW_OVERFLOW,
        "n = 18446744073709551615 blocks", .a = 0, .ids = {IDS(1)},
        .counts = {SIZE_MAX}),
    BAD(TABLE_APPEND_ROW, "overflow before a bad id", CLBT_ROW_OVERFLOW,
        "would overflow row 1", .a = 1, .ids = {IDS(-1, 2)}, .counts = {2}),
    BAD(TABLE_APPEND_ROW, "negative block id", CLBT_INVALID_BLOCK_ID,
        "block_ids[1] = -1 is outside [0, 536870911]", .a = 0,
        .ids = {IDS(3, -1)}, .counts = {2}),
    BAD(TABLE_APPEND_ROW, "INT32_MIN block id", CLBT_INVALID_BLOCK_ID,
        "block_ids[0] = -2147483648 is outside", .a = 0,
        .ids = {IDS(INT32_MIN)}, .counts = {1}),
    BAD(TABLE_APPEND_ROW, "id whose kernel blocks overflow int32",
        CLBT_INVALID_BLOCK_ID,
        "block_ids[0] = 536870912 is outside [0, 536870911]", .a = 0,
        .ids = {IDS(536870912)}, .counts = {1}),
    BAD(TABLE_ADD_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .ids = {IDS(1)}, .counts = {1}),
    BAD(TABLE_ADD_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "row 4 is out of range: max_num_reqs is 4", .a = 4, .ids = {IDS(1)},
        .counts = {1}),
    BAD(TABLE_ADD_ROW, "NULL block_ids with n > 0", CLBT_NULL_ARGUMENT,
        "block_ids is NULL with n = 2", .a = 1, .counts = {2}),
    BAD(TABLE_ADD_ROW, "n above the width", CLBT_ROW_OVERFLOW,
        "n = 4 blocks of 4 kernel blocks would overflow row 1: it holds 0 of "
        "width 12",
        .a = 1, .ids = {IDS(1, 2, 3, 4)}, .counts = {4}),
    BAD(TABLE_ADD_ROW, "negative block id", CLBT_INVALID_BLOCK_ID,
        "block_ids[2] = -7 is outside", .a = 1, .ids = {IDS(1, 2, -7)},
        .counts = {3}),
    BAD(TABLE_CLEAR_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_CLEAR_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "row 4 is out of range: max_num_reqs is 4", .a = 4),
    BAD(TABLE_TRUNCATE_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_TRUNCATE_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "row 4 is out of range: max_num_reqs is 4", .a = 4),
    BAD(TABLE_TRUNCATE_ROW, "more blocks than the row holds",
        CLBT_INVALID_ARGUMENT, "num_blocks 3 exceeds the 2 blocks row 1 holds",
        .a = 1, .counts = {3}),
    BAD(TABLE_MOVE_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_MOVE_ROW, "src out of range", CLBT_ROW_OUT_OF_RANGE,
        "src 4 is out of range: max_num_reqs is 4", .a = 4, .b = 0),
    BAD(TABLE_MOVE_ROW, "dst out of range", CLBT_ROW_OUT_OF_RANGE,
        "dst 7 is out of range: max_num_reqs is 4", .a = 1, .b = 7),
    BAD(TABLE_SWAP_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_SWAP_ROW, "a out of range", CLBT_ROW_OUT_OF_RANGE,
        "a 4 is out of range: max_num_reqs is 4", .a = 4, .b = 0),
    BAD(TABLE_SWAP_ROW, "b out of range", CLBT_ROW_OUT_OF_RANGE,
        "b 4294967295 is out of range", .a = 0, .b = UINT32_MAX),

    /* ---- single-table commit and slot mapping ---- */
    BAD(TABLE_COMMIT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1),
    BAD(TABLE_COMMIT, "num_reqs above max_num_reqs", CLBT_TOO_MANY_REQUESTS,
        "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_COMMIT, "num_reqs = UINT32_MAX", CLBT_TOO_MANY_REQUESTS,
        "num_reqs 4294967295 exceeds max_num_reqs 4", .a = UINT32_MAX),
    BAD(TABLE_SLOT_MAPPING, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING, "NULL positions with num_tokens > 0",
        CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens 1",
        .null = NULL_POSITIONS, .a = 1, .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5,
        .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING, "num_reqs = UINT32_MAX (num_reqs + 1 wraps)",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 4294967295 exceeds", .a = UINT32_MAX,
        .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(TABLE_SLOT_MAPPING, "num_tokens = UINT32_MAX", CLBT_TOO_MANY_TOKENS,
        "num_tokens 4294967295 exceeds", .a = 1, .num_tokens = UINT32_MAX),
    BAD(TABLE_SLOT_MAPPING, "query_start_loc too small for num_reqs",
        CLBT_BUFFER_TOO_SMALL,
        "query_start_loc holds 8 bytes; num_reqs 2 needs 12", .a = 2,
        .num_tokens = 1, .query_start_loc = TOO_SMALL),
    BAD(TABLE_SLOT_MAPPING, "positions too small for num_tokens",
        CLBT_BUFFER_TOO_SMALL,
        "positions holds 16 bytes; num_tokens 3 needs 24", .a = 1,
        .num_tokens = 3, .positions = TOO_SMALL),
    BAD(TABLE_SLOT_MAPPING, "positions sub-buffer too small",
        CLBT_BUFFER_TOO_SMALL, "positions holds 8 bytes; num_tokens 2 needs 16",
        .a = 1, .num_tokens = 2, .positions = SUB_BUFFER),
    BAD(TABLE_SLOT_MAPPING, "query_start_loc of another context",
        CLBT_CONTEXT_MISMATCH,
        "query_start_loc belongs to another OpenCL context", .a = 1,
        .num_tokens = 1, .query_start_loc = FOREIGN),
    BAD(TABLE_SLOT_MAPPING, "positions of another context",
        CLBT_CONTEXT_MISMATCH, "positions belongs to another OpenCL context",
        .a = 1, .num_tokens = 1, .positions = FOREIGN),
    BAD(TABLE_SLOT_MAPPING_HOST, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING_HOST, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING_HOST, "NULL positions with num_tokens > 0",
        CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens 2",
        .null = NULL_POSITIONS, .a = 1, .num_tokens = 2),
    BAD(TABLE_SLOT_MAPPING_HOST, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT, .a = 1, .num_tokens = 1),
    BAD(TABLE_SLOT_MAPPING_HOST, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_SLOT_MAPPING_HOST, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(TABLE_CLEAR, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_READ_REJECTED, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_READ_REJECTED, "NULL count", CLBT_NULL_ARGUMENT, "count is NULL",
        .null = NULL_OUT),
    BAD(TABLE_RESET_REJECTED, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),

    /* ---- multi-group row operations: all or nothing ---- */
    BAD(MULTI_APPEND_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .ids = {IDS(1), IDS(1)}, .counts = {1, 1}),
    BAD(MULTI_APPEND_ROW, "NULL block_ids", CLBT_NULL_ARGUMENT,
        "block_ids is NULL", .null = NULL_BLOCK_IDS, .counts = {1, 1}),
    BAD(MULTI_APPEND_ROW, "NULL counts", CLBT_NULL_ARGUMENT, "counts is NULL",
        .null = NULL_COUNTS, .ids = {IDS(1), IDS(1)}),
    BAD(MULTI_APPEND_ROW, "a group's NULL ids with a count", CLBT_NULL_ARGUMENT,
        "groups[1]: block_ids is NULL with n = 1", .ids = {IDS(1)},
        .counts = {1, 1}),
    BAD(MULTI_APPEND_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "groups[0]: row 4 is out of range: max_num_reqs is 4", .a = 4,
        .ids = {IDS(1), IDS(1)}, .counts = {1, 1}),
    BAD(MULTI_APPEND_ROW, "group 1 overflows while group 0 fits",
        CLBT_ROW_OVERFLOW,
        "groups[1]: n = 2 blocks of 1 kernel blocks would overflow row 1: it "
        "holds 2 of width 3",
        .a = 1, .ids = {IDS(8), IDS(8, 9)}, .counts = {1, 2}),
    BAD(MULTI_APPEND_ROW, "group 1's negative id while group 0 is valid",
        CLBT_INVALID_BLOCK_ID, "groups[1]: block_ids[0] = -5 is outside",
        .a = 0, .ids = {IDS(8), IDS(-5)}, .counts = {1, 1}),
    BAD(MULTI_APPEND_ROW, "group 0's id too large for its kernel blocks",
        CLBT_INVALID_BLOCK_ID,
        "groups[0]: block_ids[0] = 2147483647 is outside [0, 536870911]",
        .a = 0, .ids = {IDS(INT32_MAX), IDS(1)}, .counts = {1, 1}),
    BAD(MULTI_ADD_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .ids = {IDS(1), IDS(1)}, .counts = {1, 1}),
    BAD(MULTI_ADD_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "groups[0]: row 4 is out of range", .a = 4, .ids = {IDS(1), IDS(1)},
        .counts = {1, 1}),
    BAD(MULTI_ADD_ROW, "group 1 above its width", CLBT_ROW_OVERFLOW,
        "groups[1]: n = 4 blocks of 1 kernel blocks would overflow row 0: it "
        "holds 0 of width 3",
        .a = 0, .ids = {IDS(1), IDS(1, 2, 3, 4)}, .counts = {1, 4}),
    /* the flat form: every group's ids in ids[0], .flags is how */
    BAD(MULTI_UPDATE_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .ids = {IDS(1, 1)}, .counts = {1, 1}),
    BAD(MULTI_UPDATE_ROW, "NULL counts", CLBT_NULL_ARGUMENT, "counts is NULL",
        .null = NULL_COUNTS, .ids = {IDS(1, 1)}),
    BAD(MULTI_UPDATE_ROW, "NULL block_ids with a count", CLBT_NULL_ARGUMENT,
        "groups[0] (ids from block_ids[0]): block_ids is NULL with n = 1",
        .null = NULL_BLOCK_IDS, .counts = {1, 1}),
    BAD(MULTI_UPDATE_ROW, "how neither append nor replace",
        CLBT_INVALID_ARGUMENT,
        "how is 2; CLBT_ROW_APPEND (0) or CLBT_ROW_REPLACE (1) expected",
        .ids = {IDS(1, 1)}, .counts = {1, 1}, .flags = 2),
    BAD(MULTI_UPDATE_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "groups[0] (ids from block_ids[0]): row 4 is out of range: "
        "max_num_reqs is 4",
        .a = 4, .ids = {IDS(1, 1)}, .counts = {1, 1}),
    BAD(MULTI_UPDATE_ROW, "group 1 overflows while group 0 fits",
        CLBT_ROW_OVERFLOW,
        "groups[1] (ids from block_ids[1]): n = 2 blocks of 1 kernel blocks "
        "would overflow row 1: it holds 2 of width 3",
        .a = 1, .ids = {IDS(8, 8, 9)}, .counts = {1, 2}),
    BAD(MULTI_UPDATE_ROW, "group 1's negative id after group 0's",
        CLBT_INVALID_BLOCK_ID,
        "groups[1] (ids from block_ids[1]): block_ids[0] = -5 is outside",
        .ids = {IDS(8, -5)}, .counts = {1, 1}),
    BAD(MULTI_UPDATE_ROW, "a replacement above group 1's width",
        CLBT_ROW_OVERFLOW,
        "groups[1] (ids from block_ids[1]): n = 4 blocks of 1 kernel blocks "
        "would overflow row 0: it holds 0 of width 3",
        .ids = {IDS(1, 1, 2, 3, 4)}, .counts = {1, 4},
        .flags = CLBT_ROW_REPLACE),
    BAD(MULTI_CLEAR_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(MULTI_CLEAR_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "row 4 is out of range", .a = 4),
    BAD(MULTI_TRUNCATE_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(MULTI_TRUNCATE_ROW, "NULL num_blocks", CLBT_NULL_ARGUMENT,
        "num_blocks is NULL", .null = NULL_COUNTS, .a = 1),
    BAD(MULTI_TRUNCATE_ROW, "row = max_num_reqs", CLBT_ROW_OUT_OF_RANGE,
        "groups[0]: row 4 is out of range", .a = 4),
    BAD(MULTI_TRUNCATE_ROW, "group 1 keeps more than it holds",
        CLBT_INVALID_ARGUMENT,
        "groups[1]: num_blocks 3 exceeds the 2 blocks row 1 holds", .a = 1,
        .counts = {1, 3}),
    /* The attention export: batches of .a requests padded to .b. */
    BAD(TABLE_ENQUEUE_EXPORT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "NULL request", CLBT_NULL_ARGUMENT,
        "request is NULL", .null = NULL_REQUEST, .a = 2),
    /* 0.5's request: six counts of 4 bytes and four buffers, 56 bytes. */
    BAD(TABLE_ENQUEUE_EXPORT, "struct_size below 0.5's", CLBT_INVALID_CONFIG,
        "request: struct_size is 8; clbt " CLBT_VERSION_STRING
        " reads 0 (0.5's layout), 56 (0.5) or a later version's size (a "
        "multiple of 8 above 56, at most 4096)",
        .struct_size = 8, .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "struct_size ending inside a field",
        CLBT_INVALID_CONFIG, "request: struct_size is 55;", .struct_size = 55,
        .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "a field of a later version", CLBT_INVALID_CONFIG,
        "request sets byte 56 of its 64, past the 56 bytes clbt",
        .later_field = true, .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "NULL positions with tokens", CLBT_NULL_ARGUMENT,
        "positions is NULL with num_tokens 3", .null = NULL_POSITIONS, .a = 2,
        .num_tokens = 3),
    BAD(TABLE_ENQUEUE_EXPORT, "a NONE table", CLBT_INVALID_ARGUMENT,
        "CLBT_SLOT_MODE_NONE", .none_table = true, .a = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "num_reqs = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_ENQUEUE_EXPORT, "num_reqs_padded below num_reqs",
        CLBT_INVALID_ARGUMENT, "num_reqs_padded 1 is below num_reqs 2", .a = 2,
        .b = 1),
    BAD(TABLE_ENQUEUE_EXPORT, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS, "num_reqs_padded 5 exceeds max_num_reqs 4",
        .a = 2, .b = 5),
    BAD(TABLE_ENQUEUE_EXPORT, "num_tokens too many", CLBT_TOO_MANY_TOKENS,
        "num_tokens 9 exceeds max_num_batched_tokens 8", .a = 2,
        .num_tokens = 9),
    BAD(TABLE_ENQUEUE_EXPORT, "query_start_loc too small",
        CLBT_BUFFER_TOO_SMALL, "query_start_loc holds 8 bytes", .a = 2,
        .query_start_loc = TOO_SMALL),
    BAD(TABLE_ENQUEUE_EXPORT, "seq_lens too small", CLBT_BUFFER_TOO_SMALL,
        "seq_lens holds 8 bytes; num_reqs 3 needs 12", .a = 3,
        .seq_lens_given = true, .seq_lens = TOO_SMALL),
    BAD(TABLE_ENQUEUE_EXPORT, "seq_lens of another context",
        CLBT_CONTEXT_MISMATCH, "seq_lens belongs to another", .a = 2,
        .seq_lens_given = true, .seq_lens = FOREIGN),
    BAD(TABLE_ENQUEUE_EXPORT, "idx_mapping too small", CLBT_BUFFER_TOO_SMALL,
        "idx_mapping holds 8 bytes; num_reqs 3 needs 12", .a = 3,
        .idx_mapping_given = true, .idx_mapping = TOO_SMALL),
    BAD(TABLE_ENQUEUE_EXPORT, "idx_mapping of another context",
        CLBT_CONTEXT_MISMATCH, "idx_mapping belongs to another", .a = 2,
        .idx_mapping_given = true, .idx_mapping = FOREIGN),
    BAD(TABLE_ENQUEUE_EXPORT, "an unknown export flag", CLBT_INVALID_ARGUMENT,
        "request->flags 0x5 has bits other than CLBT_EXPORT_CONTEXT and "
        "CLBT_EXPORT_DENSE",
        .a = 2, .export_flags = 5),
    BAD(TABLE_ENQUEUE_EXPORT, "dense_row_pitch without CLBT_EXPORT_DENSE",
        CLBT_INVALID_ARGUMENT,
        "dense_row_pitch 3 is set without CLBT_EXPORT_DENSE in request->flags",
        .a = 2, .export_flags = CLBT_EXPORT_CONTEXT, .pitch = 3),
    BAD(TABLE_ENQUEUE_EXPORT, "dense rows past the page table",
        CLBT_INVALID_ARGUMENT,
        "dense_row_pitch 13 x num_reqs_padded 4 entries exceed the page "
        "table's max_num_reqs 4 x width 12",
        .a = 2, .b = 4, .export_flags = CLBT_EXPORT_DENSE, .pitch = 13),
    BAD(TABLE_ENQUEUE_EXPORT, "wait list NULL with events",
        CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 2", .a = 2,
        .num_events = 2),
    BAD(TABLE_ENQUEUE_EXPORT, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context than the table's "
        "device",
        .a = 2, .num_events = 2, .foreign_event = true),
    BAD(MULTI_ENQUEUE_EXPORT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 2),
    BAD(MULTI_ENQUEUE_EXPORT, "NULL request", CLBT_NULL_ARGUMENT,
        "request is NULL", .null = NULL_REQUEST, .a = 2),
    BAD(MULTI_ENQUEUE_EXPORT, "struct_size below 0.5's", CLBT_INVALID_CONFIG,
        "request: struct_size is 8;", .struct_size = 8, .a = 2),
    BAD(MULTI_ENQUEUE_EXPORT, "a field of a later version", CLBT_INVALID_CONFIG,
        "request sets byte 56 of its 64", .later_field = true, .a = 2),
    BAD(MULTI_ENQUEUE_EXPORT, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS, "num_reqs_padded 5 exceeds max_num_reqs 4",
        .a = 2, .b = 5),
    BAD(MULTI_ENQUEUE_EXPORT, "idx_mapping too small", CLBT_BUFFER_TOO_SMALL,
        "idx_mapping holds 8 bytes; num_reqs 4 needs 16", .a = 4,
        .idx_mapping_given = true, .idx_mapping = TOO_SMALL),
    BAD(MULTI_ENQUEUE_EXPORT, "an unknown export flag", CLBT_INVALID_ARGUMENT,
        "request->flags 0x4 has bits other than", .a = 2, .export_flags = 4),
    BAD(MULTI_ENQUEUE_EXPORT, "dense rows past a group's page table",
        CLBT_INVALID_ARGUMENT,
        "groups[0]: dense_row_pitch 25 x num_reqs_padded 2 entries exceed the "
        "page table's max_num_reqs 4 x width 12",
        .a = 2, .export_flags = CLBT_EXPORT_DENSE, .pitch = 25),
    BAD(MULTI_ENQUEUE_EXPORT, "wait list without events", CLBT_INVALID_ARGUMENT,
        "wait_list is not NULL with num_events 0", .a = 2, .wait_list = true),
    BAD(MULTI_ENQUEUE_EXPORT, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 2,
        .num_events = 2, .foreign_event = true),
    BAD(TABLE_EXPORT_BUFFERS, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_EXPORT_BUFFERS, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT),
    BAD(TABLE_EXPORT_BUFFERS, "a NONE table", CLBT_INVALID_ARGUMENT,
        "CLBT_SLOT_MODE_NONE", .none_table = true),

    /* The host step: batches of .a requests padded to .b. */
    BAD(TABLE_STEP_HOST, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "NULL step", CLBT_NULL_ARGUMENT, "step is NULL",
        .null = NULL_REQUEST, .a = 1, .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "struct_size below 0.3's", CLBT_INVALID_CONFIG,
        "step: struct_size is 8; clbt " CLBT_VERSION_STRING
        " reads 0 (0.3's layout), 64 (0.3) or a later version's size (a "
        "multiple of 8 above 64, at most 4096)",
        .struct_size = 8, .a = 1, .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "a field of a later version", CLBT_INVALID_CONFIG,
        "step sets byte 64 of its 72, past the 64 bytes clbt",
        .later_field = true, .a = 1, .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "step->query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "NULL positions with num_tokens > 0",
        CLBT_NULL_ARGUMENT, "step->positions is NULL with num_tokens 2",
        .null = NULL_POSITIONS, .a = 1, .num_tokens = 2),
    BAD(TABLE_STEP_HOST, "an unknown flag", CLBT_INVALID_ARGUMENT,
        "step->flags 0x5 has bits other than CLBT_STEP_GATHER and "
        "CLBT_STEP_EXPORT",
        .flags = 4, .a = 1, .num_tokens = 1),
    BAD(TABLE_STEP_HOST, "num_reqs above max_num_reqs", CLBT_TOO_MANY_REQUESTS,
        "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_STEP_HOST, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(TABLE_STEP_HOST, "num_reqs_padded below num_reqs",
        CLBT_INVALID_ARGUMENT, "step->num_reqs_padded 1 is below num_reqs 2",
        .a = 2, .b = 1, .num_tokens = 2),
    BAD(TABLE_STEP_HOST, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS,
        "step->num_reqs_padded 5 exceeds max_num_reqs 4", .a = 2, .b = 5,
        .num_tokens = 2),
    /* The multi-group host step, likewise (group 0's slots and gathered
       rows go to the outputs, group 1 maps no tokens and gathers nowhere). */
    BAD(MULTI_STEP_HOST, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "NULL step", CLBT_NULL_ARGUMENT, "step is NULL",
        .null = NULL_REQUEST, .a = 1, .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "struct_size below 0.4's", CLBT_INVALID_CONFIG,
        "step: struct_size is 8; clbt " CLBT_VERSION_STRING
        " reads 0 (0.4's layout), 64 (0.4) or a later version's size (a "
        "multiple of 8 above 64, at most 4096)",
        .struct_size = 8, .a = 1, .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "a field of a later version", CLBT_INVALID_CONFIG,
        "step sets byte 64 of its 72, past the 64 bytes clbt",
        .later_field = true, .a = 1, .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "step->query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "NULL positions with num_tokens > 0",
        CLBT_NULL_ARGUMENT, "step->positions is NULL with num_tokens 2",
        .null = NULL_POSITIONS, .a = 1, .num_tokens = 2),
    BAD(MULTI_STEP_HOST, "an unknown flag", CLBT_INVALID_ARGUMENT,
        "step->flags 0x9 has bits other than", .flags = 8, .a = 1,
        .num_tokens = 1),
    BAD(MULTI_STEP_HOST, "num_reqs above max_num_reqs", CLBT_TOO_MANY_REQUESTS,
        "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(MULTI_STEP_HOST, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(MULTI_STEP_HOST, "num_reqs_padded below num_reqs",
        CLBT_INVALID_ARGUMENT, "step->num_reqs_padded 1 is below num_reqs 2",
        .a = 2, .b = 1, .num_tokens = 2),
    BAD(MULTI_STEP_HOST, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS,
        "step->num_reqs_padded 5 exceeds max_num_reqs 4", .a = 2, .b = 5,
        .num_tokens = 2),
    /* The device step, likewise. */
    BAD(TABLE_ENQUEUE_STEP, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "NULL step", CLBT_NULL_ARGUMENT, "step is NULL",
        .null = NULL_REQUEST, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "struct_size below 0.3's", CLBT_INVALID_CONFIG,
        "struct_size is 8", .struct_size = 8, .a = 1, .num_tokens = 1),
    /* 0.3's step ends after seq_lens, 20 bytes of counts, 4 of padding
       and 4 buffers: 56; 0.4's adds 4 fields of 4 bytes: 72. A size one
       byte short of 0.4's ends inside state_null_block. */
    BAD(TABLE_ENQUEUE_STEP, "struct_size ending inside a field",
        CLBT_INVALID_CONFIG,
        "step: struct_size is 71; clbt " CLBT_VERSION_STRING
        " reads 0 (0.3's layout), 56 (0.3), 72 (0.4) or a later version's "
        "size (a multiple of 8 above 72, at most 4096)",
        .struct_size = 71, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "struct_size between two layouts",
        CLBT_INVALID_CONFIG, "step: struct_size is 64;", .struct_size = 64,
        .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "a field of a later version", CLBT_INVALID_CONFIG,
        "step sets byte", .later_field = true, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "NULL positions with num_tokens > 0",
        CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens 3",
        .null = NULL_POSITIONS, .a = 1, .num_tokens = 3),
    BAD(TABLE_ENQUEUE_STEP, "an unknown flag", CLBT_INVALID_ARGUMENT,
        "step->flags 0x5 has bits other than", .flags = 4, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_ENQUEUE_STEP, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(TABLE_ENQUEUE_STEP, "num_reqs_padded below num_reqs",
        CLBT_INVALID_ARGUMENT, "num_reqs_padded 1 is below num_reqs 2", .a = 2,
        .b = 1, .num_tokens = 2),
    BAD(TABLE_ENQUEUE_STEP, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS, "num_reqs_padded 5 exceeds max_num_reqs 4",
        .a = 2, .b = 5, .num_tokens = 2),
    BAD(TABLE_ENQUEUE_STEP, "query_start_loc too small", CLBT_BUFFER_TOO_SMALL,
        "query_start_loc holds 8 bytes; num_reqs 2 needs 12", .a = 2,
        .num_tokens = 2, .query_start_loc = TOO_SMALL),
    BAD(TABLE_ENQUEUE_STEP, "idx_mapping too small for num_reqs",
        CLBT_BUFFER_TOO_SMALL, "idx_mapping holds 8 bytes; num_reqs 3 needs 12",
        .a = 3, .num_tokens = 3, .step_idx_mapping = TOO_SMALL),
    BAD(TABLE_ENQUEUE_STEP, "idx_mapping of another context",
        CLBT_CONTEXT_MISMATCH, "idx_mapping belongs to another OpenCL context",
        .a = 1, .num_tokens = 1, .step_idx_mapping = FOREIGN),
    BAD(TABLE_ENQUEUE_STEP, "export flags without CLBT_STEP_EXPORT",
        CLBT_INVALID_ARGUMENT,
        "step->export_flags 0x1 and dense_row_pitch 0 are set without "
        "CLBT_STEP_EXPORT",
        .a = 1, .num_tokens = 1, .export_flags = CLBT_EXPORT_CONTEXT),
    BAD(TABLE_ENQUEUE_STEP, "dense_row_pitch without CLBT_STEP_EXPORT",
        CLBT_INVALID_ARGUMENT, "dense_row_pitch 2 are set without", .a = 1,
        .num_tokens = 1, .pitch = 2),
    BAD(TABLE_ENQUEUE_STEP, "an unknown export flag", CLBT_INVALID_ARGUMENT,
        "step->export_flags 0x8 has bits other than CLBT_EXPORT_CONTEXT and "
        "CLBT_EXPORT_DENSE",
        .a = 1, .num_tokens = 1, .flags = CLBT_STEP_EXPORT, .export_flags = 8),
    BAD(TABLE_ENQUEUE_STEP, "dense_row_pitch without CLBT_EXPORT_DENSE",
        CLBT_INVALID_ARGUMENT,
        "dense_row_pitch 2 is set without CLBT_EXPORT_DENSE in "
        "step->export_flags",
        .a = 1, .num_tokens = 1, .flags = CLBT_STEP_EXPORT, .pitch = 2),
    BAD(TABLE_ENQUEUE_STEP, "dense rows past the page table",
        CLBT_INVALID_ARGUMENT,
        "dense_row_pitch 17 x num_reqs_padded 3 entries exceed the page "
        "table's max_num_reqs 4 x width 12",
        .a = 1, .b = 3, .num_tokens = 1, .flags = CLBT_STEP_EXPORT,
        .export_flags = CLBT_EXPORT_DENSE, .pitch = 17),
    BAD(TABLE_ENQUEUE_STEP, "a dummy run's dense rows past the page table",
        CLBT_INVALID_ARGUMENT, "dense_row_pitch 17 x num_reqs_padded 3", .b = 3,
        .flags = CLBT_STEP_EXPORT | CLBT_STEP_DUMMY,
        .export_flags = CLBT_EXPORT_DENSE, .pitch = 17),
    BAD(TABLE_ENQUEUE_STEP, "positions of another context",
        CLBT_CONTEXT_MISMATCH, "positions belongs to another OpenCL context",
        .a = 1, .num_tokens = 1, .positions = FOREIGN),
    BAD(TABLE_ENQUEUE_STEP, "wait list NULL with events", CLBT_INVALID_ARGUMENT,
        "wait_list is NULL with num_events 2", .a = 1, .num_tokens = 1,
        .num_events = 2),
    BAD(TABLE_ENQUEUE_STEP, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 1,
        .num_tokens = 1, .num_events = 2, .foreign_event = true),
    BAD(MULTI_ENQUEUE_STEP, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "NULL step", CLBT_NULL_ARGUMENT, "step is NULL",
        .null = NULL_REQUEST, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "an unknown flag", CLBT_INVALID_ARGUMENT,
        "step->flags 0x5 has bits other than", .flags = 4, .a = 1,
        .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "dense rows past a group's page table",
        CLBT_INVALID_ARGUMENT,
        "groups[0]: dense_row_pitch 49 x num_reqs_padded 1 entries exceed",
        .a = 1, .num_tokens = 1, .flags = CLBT_STEP_EXPORT,
        .export_flags = CLBT_EXPORT_DENSE, .pitch = 49),
    BAD(MULTI_ENQUEUE_STEP, "export flags without CLBT_STEP_EXPORT",
        CLBT_INVALID_ARGUMENT, "step->export_flags 0x2 and dense_row_pitch 0",
        .a = 1, .num_tokens = 1, .export_flags = CLBT_EXPORT_DENSE),
    BAD(MULTI_ENQUEUE_STEP, "num_reqs_padded = max_num_reqs + 1",
        CLBT_TOO_MANY_REQUESTS, "num_reqs_padded 5 exceeds max_num_reqs 4",
        .a = 2, .b = 5, .num_tokens = 2),
    BAD(MULTI_ENQUEUE_STEP, "idx_mapping too small for num_reqs",
        CLBT_BUFFER_TOO_SMALL, "idx_mapping holds 8 bytes; num_reqs 3 needs 12",
        .a = 3, .num_tokens = 3, .step_idx_mapping = TOO_SMALL),
    BAD(MULTI_ENQUEUE_STEP, "wait list without events", CLBT_INVALID_ARGUMENT,
        "wait_list is not NULL with num_events 0", .a = 1, .num_tokens = 1,
        .wait_list = true),
    BAD(MULTI_ENQUEUE_STEP, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 1,
        .num_tokens = 1, .num_events = 2, .foreign_event = true),
    /* State slots: a NONE group's width (3) bounds the ids a request. */
    BAD(TABLE_ENQUEUE_STEP, "state slots of a token-mapping table",
        CLBT_INVALID_ARGUMENT,
        "slot_mode is CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT: its rows hold pages, "
        "and it has no state slots",
        .flags = CLBT_STEP_STATE_SLOTS, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "num_state_slots above a NONE table's width",
        CLBT_INVALID_ARGUMENT,
        "step->num_state_slots 4 exceeds the table's width 3",
        .flags = CLBT_STEP_STATE_SLOTS, .num_state_slots = 4,
        .none_group = true, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "num_state_slots above a NONE group's width",
        CLBT_INVALID_ARGUMENT,
        "step->num_state_slots 4 exceeds groups[1]'s width 3",
        .flags = CLBT_STEP_STATE_SLOTS, .num_state_slots = 4, .a = 1,
        .num_tokens = 1),
    BAD(TABLE_ENQUEUE_STEP, "num_state_slots without CLBT_STEP_STATE_SLOTS",
        CLBT_INVALID_ARGUMENT,
        "step->num_state_slots 2 and state_null_block 0 are set without "
        "CLBT_STEP_STATE_SLOTS",
        .num_state_slots = 2, .none_group = true, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "state_null_block without CLBT_STEP_STATE_SLOTS",
        CLBT_INVALID_ARGUMENT,
        "step->num_state_slots 0 and state_null_block -1 are set without "
        "CLBT_STEP_STATE_SLOTS",
        .state_null_block = -1, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_STEP, "state slots with an unknown flag",
        CLBT_INVALID_ARGUMENT, "step->flags 0x35 has bits other than",
        .flags = CLBT_STEP_STATE_SLOTS | 0x24, .a = 1, .num_tokens = 1),

    /* ---- token slots: .a requests, .num_tokens rows of
            .indices_per_row ---- */
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE, .a = 2, .num_tokens = 2,
        .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "NULL request", CLBT_NULL_ARGUMENT,
        "request is NULL", .null = NULL_REQUEST),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "struct_size below 0.4's",
        CLBT_INVALID_CONFIG,
        "request: struct_size is 8; clbt " CLBT_VERSION_STRING
        " reads 0 (0.4's layout), 48 (0.4) or a later version's size (a "
        "multiple of 8 above 48, at most 4096)",
        .struct_size = 8, .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "struct_size ending inside a field",
        CLBT_INVALID_CONFIG, "request: struct_size is 47;", .struct_size = 47,
        .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "a later version's size off its alignment",
        CLBT_INVALID_CONFIG, "request: struct_size is 52;", .struct_size = 52,
        .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "a field of a later version",
        CLBT_INVALID_CONFIG,
        "request sets byte 48 of its 56, past the 48 bytes clbt",
        .later_field = true, .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "a NONE table", CLBT_INVALID_ARGUMENT,
        "slot_mode is CLBT_SLOT_MODE_NONE: its rows hold states, not pages, "
        "and it has no token slots",
        .none_group = true, .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "request->query_start_loc is NULL", .null = NULL_QUERY_START_LOC,
        .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5,
        .num_tokens = 2, .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "num_rows above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS,
        "request->num_rows 9 exceeds max_num_batched_tokens 8", .a = 2,
        .num_tokens = 9, .indices_per_row = 1),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "entries above UINT32_MAX",
        CLBT_SIZE_OVERFLOW,
        "request->num_rows 8 x indices_per_row 1073741824 exceeds UINT32_MAX "
        "entries",
        .a = 2, .num_tokens = 8, .indices_per_row = 1u << 30),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "NULL token_indices with entries",
        CLBT_NULL_ARGUMENT,
        "request->token_indices is NULL with num_rows 2 x indices_per_row 3 "
        "entries",
        .null = NULL_TOKEN_INDICES, .a = 2, .num_tokens = 2,
        .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "NULL token_slots with entries",
        CLBT_NULL_ARGUMENT,
        "request->token_slots is NULL with num_rows 2 x indices_per_row 3 "
        "entries",
        .null = NULL_TOKEN_SLOTS, .a = 2, .num_tokens = 2,
        .indices_per_row = 3),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "query_start_loc too small",
        CLBT_BUFFER_TOO_SMALL,
        "query_start_loc holds 8 bytes; num_reqs 2 needs 12", .a = 2,
        .num_tokens = 2, .indices_per_row = 3, .query_start_loc = TOO_SMALL),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "idx_mapping too small",
        CLBT_BUFFER_TOO_SMALL, "idx_mapping holds 8 bytes; num_reqs 4 needs 16",
        .a = 4, .num_tokens = 2, .indices_per_row = 3,
        .idx_mapping_given = true, .idx_mapping = TOO_SMALL),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "token_indices too small",
        CLBT_BUFFER_TOO_SMALL,
        "token_indices holds 8 bytes; num_rows x indices_per_row 6 needs 24",
        .a = 2, .num_tokens = 2, .indices_per_row = 3,
        .token_indices = TOO_SMALL),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "token_slots a sub-buffer too small",
        CLBT_BUFFER_TOO_SMALL,
        "token_slots holds 8 bytes; 1 section of num_rows x indices_per_row 6 "
        "needs 24",
        .a = 2, .num_tokens = 2, .indices_per_row = 3,
        .token_slots = SUB_BUFFER),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "token_indices of another context",
        CLBT_CONTEXT_MISMATCH,
        "token_indices belongs to another OpenCL context", .a = 2,
        .num_tokens = 2, .indices_per_row = 3, .token_indices = FOREIGN),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "token_slots of another context",
        CLBT_CONTEXT_MISMATCH, "token_slots belongs to another OpenCL context",
        .a = 2, .num_tokens = 2, .indices_per_row = 3, .token_slots = FOREIGN),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "token_slots read-only",
        CLBT_READ_ONLY_BUFFER,
        "token_slots is a CL_MEM_READ_ONLY buffer, which kernels may only "
        "read",
        .a = 2, .num_tokens = 2, .indices_per_row = 3,
        .token_slots = READ_ONLY),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "wait list NULL with events",
        CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 2", .a = 2,
        .num_tokens = 2, .indices_per_row = 3, .num_events = 2),
    BAD(TABLE_ENQUEUE_TOKEN_SLOTS, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 2,
        .num_tokens = 2, .indices_per_row = 3, .num_events = 2,
        .foreign_event = true),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE, .a = 2, .num_tokens = 2,
        .indices_per_row = 3),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "NULL request", CLBT_NULL_ARGUMENT,
        "request is NULL", .null = NULL_REQUEST),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "a field of a later version",
        CLBT_INVALID_CONFIG, "request sets byte 48", .later_field = true,
        .a = 2, .num_tokens = 2, .indices_per_row = 3),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "num_rows above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS,
        "request->num_rows 9 exceeds max_num_batched_tokens 8", .a = 2,
        .num_tokens = 9, .indices_per_row = 1),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "token_slots too small for its section",
        CLBT_BUFFER_TOO_SMALL,
        "token_slots holds 8 bytes; 1 section of num_rows x indices_per_row 6 "
        "needs 24",
        .a = 2, .num_tokens = 2, .indices_per_row = 3,
        .token_slots = TOO_SMALL),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "token_slots read-only",
        CLBT_READ_ONLY_BUFFER, "token_slots is a CL_MEM_READ_ONLY buffer",
        .a = 2, .num_tokens = 2, .indices_per_row = 3,
        .token_slots = READ_ONLY),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "query_start_loc of another context",
        CLBT_CONTEXT_MISMATCH,
        "query_start_loc belongs to another OpenCL context", .a = 2,
        .num_tokens = 2, .indices_per_row = 3, .query_start_loc = FOREIGN),
    BAD(MULTI_ENQUEUE_TOKEN_SLOTS, "wait list without events",
        CLBT_INVALID_ARGUMENT, "wait_list is not NULL with num_events 0",
        .a = 2, .num_tokens = 2, .indices_per_row = 3, .wait_list = true),
    BAD(MULTI_MOVE_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(MULTI_MOVE_ROW, "src out of range", CLBT_ROW_OUT_OF_RANGE,
        "src 9 is out of range", .a = 9, .b = 0),
    BAD(MULTI_MOVE_ROW, "dst out of range", CLBT_ROW_OUT_OF_RANGE,
        "dst 4 is out of range", .a = 0, .b = 4),
    BAD(MULTI_SWAP_ROW, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(MULTI_SWAP_ROW, "a out of range", CLBT_ROW_OUT_OF_RANGE,
        "a 4 is out of range", .a = 4, .b = 1),
    BAD(MULTI_SWAP_ROW, "b out of range", CLBT_ROW_OUT_OF_RANGE,
        "b 5 is out of range", .a = 1, .b = 5),

    /* ---- multi-group commit and slot mapping ---- */
    BAD(MULTI_COMMIT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1),
    BAD(MULTI_COMMIT, "num_reqs above max_num_reqs", CLBT_TOO_MANY_REQUESTS,
        "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(MULTI_SLOT_MAPPING, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(MULTI_SLOT_MAPPING, "NULL query_start_loc", CLBT_NULL_ARGUMENT,
        "query_start_loc is NULL", .null = NULL_QUERY_START_LOC, .a = 1,
        .num_tokens = 1),
    BAD(MULTI_SLOT_MAPPING, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5,
        .num_tokens = 1),
    BAD(MULTI_SLOT_MAPPING, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(MULTI_SLOT_MAPPING, "query_start_loc too small", CLBT_BUFFER_TOO_SMALL,
        "query_start_loc holds 8 bytes; num_reqs 3 needs 16", .a = 3,
        .num_tokens = 1, .query_start_loc = TOO_SMALL),
    BAD(MULTI_SLOT_MAPPING, "positions of another context",
        CLBT_CONTEXT_MISMATCH, "positions belongs to another OpenCL context",
        .a = 1, .num_tokens = 1, .positions = FOREIGN),
    BAD(MULTI_CLEAR, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),

    /* ---- events and commit modes ---- */
    BAD(TABLE_ENQUEUE_COMMIT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1),
    BAD(TABLE_ENQUEUE_COMMIT, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(TABLE_ENQUEUE_COMMIT, "NULL wait_list with events",
        CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 2", .a = 1,
        .num_events = 2),
    BAD(TABLE_ENQUEUE_COMMIT, "a wait_list with no events",
        CLBT_INVALID_ARGUMENT, "wait_list is not NULL with num_events 0",
        .a = 1, .wait_list = true),
    BAD(TABLE_ENQUEUE_COMMIT, "a NULL event", CLBT_CL_INVALID_EVENT_WAIT_LIST,
        "wait_list[0] is NULL", .a = 3, .num_events = 2, .wait_list = true),
    BAD(TABLE_ENQUEUE_COMMIT, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 3,
        .num_events = 2, .foreign_event = true),
    BAD(TABLE_ENQUEUE_SLOT_MAPPING, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(TABLE_ENQUEUE_SLOT_MAPPING, "num_tokens above max_num_batched_tokens",
        CLBT_TOO_MANY_TOKENS, "num_tokens 9 exceeds max_num_batched_tokens 8",
        .a = 1, .num_tokens = 9),
    BAD(TABLE_ENQUEUE_SLOT_MAPPING, "NULL wait_list with events",
        CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 1", .a = 1,
        .num_tokens = 1, .num_events = 1),
    BAD(TABLE_ENQUEUE_SLOT_MAPPING, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 1,
        .num_tokens = 1, .num_events = 2, .foreign_event = true),
    BAD(TABLE_SET_COMMIT_MODE, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE),
    BAD(TABLE_SET_COMMIT_MODE, "a mode past the last", CLBT_INVALID_ARGUMENT,
        "mode 3 is not a clbt_commit_mode", .a = 3),
    BAD(TABLE_LAST_COMMIT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE),
    BAD(TABLE_LAST_COMMIT, "NULL info", CLBT_NULL_ARGUMENT, "info is NULL",
        .null = NULL_OUT),
    BAD(MULTI_ENQUEUE_COMMIT, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .a = 1),
    BAD(MULTI_ENQUEUE_COMMIT, "num_reqs above max_num_reqs",
        CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4", .a = 5),
    BAD(MULTI_ENQUEUE_COMMIT, "a wait_list with no events",
        CLBT_INVALID_ARGUMENT, "wait_list is not NULL with num_events 0",
        .a = 1, .wait_list = true),
    BAD(MULTI_ENQUEUE_COMMIT, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 3,
        .num_events = 2, .foreign_event = true),
    BAD(MULTI_ENQUEUE_SLOT_MAPPING, "NULL table", CLBT_NULL_ARGUMENT,
        "table is NULL", .null = NULL_HANDLE, .a = 1, .num_tokens = 1),
    BAD(MULTI_ENQUEUE_SLOT_MAPPING, "query_start_loc too small",
        CLBT_BUFFER_TOO_SMALL,
        "query_start_loc holds 8 bytes; num_reqs 3 needs 16", .a = 3,
        .num_tokens = 1, .query_start_loc = TOO_SMALL),
    BAD(MULTI_ENQUEUE_SLOT_MAPPING, "NULL wait_list with events",
        CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 3", .a = 1,
        .num_tokens = 1, .num_events = 3),
    BAD(MULTI_ENQUEUE_SLOT_MAPPING, "an event of another context",
        CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .a = 1,
        .num_tokens = 1, .num_events = 2, .foreign_event = true),
    BAD(LOG_SET_LEVEL, "a level past debug", CLBT_INVALID_ARGUMENT, "level 5",
        .a = 5),
    BAD(DEVICE_PROGRAM_OPTIONS, "NULL device", CLBT_NULL_ARGUMENT,
        "device is NULL", .null = NULL_HANDLE, .size = 64),
    BAD(DEVICE_PROGRAM_OPTIONS, "NULL buf", CLBT_NULL_ARGUMENT, "buf is NULL",
        .null = NULL_OUT, .size = 64),
    BAD(DEVICE_PROGRAM_OPTIONS, "an index past the last program",
        CLBT_INVALID_ARGUMENT, "index 1000", .a = 1000, .size = 64),
    BAD(DEVICE_PROGRAM_OPTIONS, "a buffer too small", CLBT_BUFFER_TOO_SMALL,
        "size is 4 bytes", .size = 4),

    /* ---- batch row updates: every entry checked before any row changes;
       a row named twice is checked as two calls would be ---- */
    BAD(TABLE_APPEND_ROWS, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .num_rows = 1, .rows = U32S(0),
        .row_counts = {U32S(1)}, .ids = {IDS(1)}),
    BAD(TABLE_APPEND_ROWS, "NULL rows with entries", CLBT_NULL_ARGUMENT,
        "rows is NULL with num_rows = 1", .null = NULL_ROWS, .num_rows = 1,
        .row_counts = {U32S(1)}, .ids = {IDS(1)}),
    BAD(TABLE_APPEND_ROWS, "NULL counts with entries", CLBT_NULL_ARGUMENT,
        "counts is NULL with num_rows = 2", .null = NULL_COUNTS, .num_rows = 2,
        .rows = U32S(0, 1), .ids = {IDS(1, 2)}),
    BAD(TABLE_APPEND_ROWS, "NULL block_ids with a count", CLBT_NULL_ARGUMENT,
        "entry 0 (row 0, ids from block_ids[0]): block_ids is NULL with n = 1",
        .null = NULL_BLOCK_IDS, .num_rows = 1, .rows = U32S(0),
        .row_counts = {U32S(1)}),
    BAD(TABLE_APPEND_ROWS, "a later entry's row = max_num_reqs",
        CLBT_ROW_OUT_OF_RANGE,
        "entry 1 (row 4, ids from block_ids[1]): row 4 is out of range: "
        "max_num_reqs is 4",
        .num_rows = 2, .rows = U32S(0, 4), .row_counts = {U32S(1, 1)},
        .ids = {IDS(1, 2)}),
    BAD(TABLE_APPEND_ROWS, "a row named twice overflowing on the second",
        CLBT_ROW_OVERFLOW,
        "entry 1 (row 1, ids from block_ids[1]): n = 1 blocks of 4 kernel "
        "blocks would overflow row 1: it holds 12 of width 12",
        .num_rows = 2, .rows = U32S(1, 1), .row_counts = {U32S(1, 1)},
        .ids = {IDS(1, 2)}),
    BAD(TABLE_APPEND_ROWS, "a negative id in a later entry",
        CLBT_INVALID_BLOCK_ID,
        "entry 1 (row 3, ids from block_ids[1]): block_ids[1] = -4 is outside "
        "[0, 536870911]",
        .num_rows = 2, .rows = U32S(0, 3), .row_counts = {U32S(1, 2)},
        .ids = {IDS(1, 2, -4)}),
    BAD(TABLE_ADD_ROWS, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .num_rows = 1, .rows = U32S(0),
        .row_counts = {U32S(1)}, .ids = {IDS(1)}),
    BAD(TABLE_ADD_ROWS, "an entry above the width", CLBT_ROW_OVERFLOW,
        "entry 0 (row 2, ids from block_ids[0]): n = 4 blocks of 4 kernel "
        "blocks would overflow row 2: it holds 0 of width 12",
        .num_rows = 1, .rows = U32S(2), .row_counts = {U32S(4)},
        .ids = {IDS(1, 2, 3, 4)}),
    BAD(TABLE_ADD_ROWS, "row = UINT32_MAX", CLBT_ROW_OUT_OF_RANGE,
        "entry 0 (row 4294967295, ids from block_ids[0]): row 4294967295 is "
        "out of range",
        .num_rows = 1, .rows = U32S(UINT32_MAX), .row_counts = {U32S(1)},
        .ids = {IDS(1)}),
    BAD(MULTI_APPEND_ROWS, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .num_rows = 1, .rows = U32S(0),
        .row_counts = {U32S(1), U32S(1)}, .ids = {IDS(1), IDS(1)}),
    BAD(MULTI_APPEND_ROWS, "NULL counts", CLBT_NULL_ARGUMENT, "counts is NULL",
        .null = NULL_COUNTS, .num_rows = 1, .rows = U32S(0),
        .ids = {IDS(1), IDS(1)}),
    BAD(MULTI_APPEND_ROWS, "NULL block_ids", CLBT_NULL_ARGUMENT,
        "block_ids is NULL", .null = NULL_BLOCK_IDS, .num_rows = 1,
        .rows = U32S(0), .row_counts = {U32S(1), U32S(1)}),
    BAD(MULTI_APPEND_ROWS, "NULL rows with entries", CLBT_NULL_ARGUMENT,
        "groups[0]: rows is NULL with num_rows = 1", .null = NULL_ROWS,
        .num_rows = 1, .row_counts = {U32S(1), U32S(1)},
        .ids = {IDS(1), IDS(1)}),
    BAD(MULTI_APPEND_ROWS, "group 1's row named twice overflowing",
        CLBT_ROW_OVERFLOW,
        "groups[1]: entry 1 (row 1, ids from block_ids[1]): n = 1 blocks of 1 "
        "kernel blocks would overflow row 1: it holds 3 of width 3",
        .num_rows = 2, .rows = U32S(1, 1),
        .row_counts = {U32S(0, 0), U32S(1, 1)}, .ids = {NULL, IDS(7, 8)}),
    BAD(MULTI_ADD_ROWS, "NULL table", CLBT_NULL_ARGUMENT, "table is NULL",
        .null = NULL_HANDLE, .num_rows = 1, .rows = U32S(0),
        .row_counts = {U32S(1), U32S(1)}, .ids = {IDS(1), IDS(1)}),
    BAD(MULTI_ADD_ROWS, "group 0's id too large for its kernel blocks",
        CLBT_INVALID_BLOCK_ID,
        "groups[0]: entry 0 (row 0, ids from block_ids[0]): block_ids[0] = "
        "2147483647 is outside [0, 536870911]",
        .num_rows = 1, .rows = U32S(0), .row_counts = {U32S(1), U32S(1)},
        .ids = {IDS(INT32_MAX), IDS(1)}),

    /* ---- devices and widths ---- */
    BAD(DEVICE_OPEN, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT, .selector = "portable:cpu"),
    BAD(DEVICE_OPEN, "selector with four fields", CLBT_INVALID_SELECTOR,
        "selector='a:cpu:0:1': more than three fields",
        .selector = "a:cpu:0:1"),
    BAD(DEVICE_OPEN, "unknown device type", CLBT_INVALID_SELECTOR,
        "type 'disk' is not cpu, gpu, accelerator or all",
        .selector = "portable:disk"),
    BAD(DEVICE_OPEN, "a field over 127 characters", CLBT_INVALID_SELECTOR,
        "a field is longer than 127 characters",
        .selector =
            "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
            "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
            "pppppppppppppppppppppppppppp:cpu"),
    BAD(DEVICE_OPEN, "a platform that matches nothing", CLBT_NO_MATCHING_DEVICE,
        "selector='no such platform' matches no device",
        .selector = "no such platform"),
    BAD(DEVICE_OPEN, "a device index past the last", CLBT_NO_MATCHING_DEVICE,
        "selector='portable:cpu:4000000000' matches no device",
        .selector = "portable:cpu:4000000000"),
    BAD(DEVICE_WRAP, "NULL context", CLBT_NULL_ARGUMENT, "context is NULL",
        .null = NULL_CONTEXT),
    BAD(DEVICE_WRAP, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_DEVICE),
    BAD(DEVICE_WRAP, "NULL queue", CLBT_NULL_ARGUMENT, "queue is NULL",
        .null = NULL_QUEUE),
    BAD(DEVICE_WRAP, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .null = NULL_OUT),
    BAD(DEVICE_WRAP, "a queue of another context", CLBT_CONTEXT_MISMATCH,
        "queue belongs to another context than the one given",
        .queue = FOREIGN_QUEUE),
    BAD(DEVICE_WRAP, "a queue of another device", CLBT_CONTEXT_MISMATCH,
        "queue belongs to another device than the one given",
        .queue = SUB_DEVICE_QUEUE),
    BAD(DEVICE_WRAP, "an out-of-order queue", CLBT_INVALID_ARGUMENT,
        "queue executes out of order", .queue = OUT_OF_ORDER_QUEUE),
    BAD(DEVICE_SELECTOR, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_DEVICE, .size = 64),
    BAD(DEVICE_SELECTOR, "NULL buf", CLBT_NULL_ARGUMENT, "buf is NULL",
        .null = NULL_OUT, .size = 64),
    BAD(DEVICE_SELECTOR, "size 0", CLBT_BUFFER_TOO_SMALL,
        "size is 0 bytes; selector 'portable:cpu:0' needs 15", .size = 0),
    BAD(DEVICE_SELECTOR, "size one short", CLBT_BUFFER_TOO_SMALL,
        "size is 14 bytes; selector 'portable:cpu:0' needs 15", .size = 14),
    BAD(DEVICE_SELECTOR, "a handle of no installed platform",
        CLBT_NO_MATCHING_DEVICE, "is not a device of an installed platform",
        .null = NULL_HANDLE, .size = 64),
    BAD(DEVICE_SET_BUILD_OPTIONS, "NULL device", CLBT_NULL_ARGUMENT,
        "device is NULL", .null = NULL_HANDLE),
    BAD(DEVICE_SET_BUILD_OPTIONS, "options one character too long",
        CLBT_INVALID_ARGUMENT,
        "options is 256 characters; at most 255 (CLBT_BUILD_OPTIONS_SIZE - 1)",
        .setting_length = CLBT_BUILD_OPTIONS_SIZE),
    BAD(DEVICE_SET_BUILD_OPTIONS, "options that define clbt's pad id",
        CLBT_INVALID_ARGUMENT,
        "options defines CLBT_PAD_SLOT_ID: macros named CLBT_* are clbt's own",
        .setting = "-cl-mad-enable -DCLBT_PAD_SLOT_ID=0"),
    BAD(DEVICE_SET_BUILD_OPTIONS, "options that undefine a group's constants",
        CLBT_INVALID_ARGUMENT,
        "options undefines CLBT_GROUP_0: macros named CLBT_* are clbt's own",
        .setting = "-U \"CLBT_GROUP_0\""),
    BAD(DEVICE_SET_BUILD_OPTIONS,
        "options that redefine a builtin the kernels "
        "use",
        CLBT_INVALID_ARGUMENT,
        "options defines min: clbt's kernels use that name",
        .setting = "-Dmin(a,b)=(a)"),
    BAD(DEVICE_BUILD_OPTIONS, "NULL device", CLBT_NULL_ARGUMENT,
        "device is NULL", .null = NULL_HANDLE, .size = 64),
    BAD(DEVICE_BUILD_OPTIONS, "NULL buf", CLBT_NULL_ARGUMENT, "buf is NULL",
        .null = NULL_OUT, .size = 64),
    BAD(DEVICE_BUILD_OPTIONS, "size 0", CLBT_BUFFER_TOO_SMALL,
        "size is 0 bytes; the build option string needs 1", .size = 0),
    BAD(DEVICE_SET_CACHE_DIR, "NULL device", CLBT_NULL_ARGUMENT,
        "device is NULL", .null = NULL_HANDLE),
    BAD(DEVICE_SET_CACHE_DIR, "directory one character too long",
        CLBT_INVALID_ARGUMENT,
        "directory is 4096 characters; at most 4095 (CLBT_CACHE_DIR_SIZE - 1)",
        .setting_length = CLBT_CACHE_DIR_SIZE),
    BAD(DEVICE_CACHE_DIR, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .null = NULL_HANDLE, .size = 64),
    BAD(DEVICE_CACHE_DIR, "NULL buf", CLBT_NULL_ARGUMENT, "buf is NULL",
        .null = NULL_OUT, .size = 64),
    BAD(DEVICE_CACHE_DIR, "size 0", CLBT_BUFFER_TOO_SMALL,
        "size is 0 bytes; the cache directory needs 1", .size = 0),
    BAD(BLOCK_TABLE_WIDTH, "NULL width", CLBT_NULL_ARGUMENT, "width is NULL",
        .null = NULL_OUT, .width_args = {1, 16, 0, 0}),
    BAD(BLOCK_TABLE_WIDTH, "zero block_size", CLBT_INVALID_CONFIG,
        "block_size is 0; it must be >= 1", .width_args = {1, 0, 0, 0}),
    BAD(BLOCK_TABLE_WIDTH, "non-dividing kernel_block_size",
        CLBT_INVALID_CONFIG,
        "kernel_block_size 5 does not divide block_size 16",
        .width_args = {1, 16, 5, 0}),
    BAD(BLOCK_TABLE_WIDTH, "width above 32 bits", CLBT_SIZE_OVERFLOW,
        "width of 4294967295 KV blocks x 2 kernel blocks each exceeds "
        "UINT32_MAX",
        .width_args = {UINT32_MAX, 2, 1, 0}),
    BAD(BLOCK_TABLE_WIDTH, "alignment rounding above 32 bits",
        CLBT_SIZE_OVERFLOW, "width of 4294967296 KV blocks",
        .width_args = {UINT32_MAX, 16, 0, 128}),
};

/* ---- running a case ----------------------------------------------------- */

/* Everything a call could write through its output pointers. */
typedef struct outputs {
  clbt_table *table;
  clbt_multi_table *multi;
  clbt_device *device;
  uint32_t count, width;
  char selector[CLBT_SELECTOR_SIZE];
  int64_t slots[8];
  int32_t gathered[4 * 12]; /* the table's max_num_reqs x width */
  clbt_commit_info commit;
  clbt_export_buffers export;
} outputs;

static cl_mem pick_buffer(const fixture *f, buffer which, bool positions) {
  switch (which) {
  case TOO_SMALL:
    return positions ? f->small_positions : f->small_query_start_loc;
  case SUB_BUFFER:
    return f->sub_positions;
  case FOREIGN:
    return f->foreign;
  case READ_ONLY:
    return f->read_only;
  default:
    return positions ? f->positions : f->query_start_loc;
  }
}

static cl_command_queue pick_queue(const fixture *f, queue_kind which) {
  switch (which) {
  case FOREIGN_QUEUE:
    return f->foreign_queue;
  case OUT_OF_ORDER_QUEUE:
    return f->out_of_order_queue;
  case SUB_DEVICE_QUEUE:
    return f->sub_queue;
  default:
    return clbt_device_queue(clbt_test_device());
  }
}

static clbt_status call_table(const bad_input *c, const fixture *f,
                              outputs *out) {
  clbt_table *table = c->null == NULL_HANDLE ? NULL : f->table;
  const int32_t *ids = c->null == NULL_BLOCK_IDS ? NULL : c->ids[0];
  static const int32_t qsl[5] = {0, 1, 1, 1, 1};
  static const int64_t positions[8] = {0};
  switch (c->function) {
  case TABLE_APPEND_ROW:
    return clbt_table_append_row(table, c->a, ids, c->counts[0]);
  case TABLE_ADD_ROW:
    return clbt_table_add_row(table, c->a, ids, c->counts[0]);
  case TABLE_CLEAR_ROW:
    return clbt_table_clear_row(table, c->a);
  case TABLE_TRUNCATE_ROW:
    return clbt_table_truncate_row(table, c->a, c->counts[0]);
  case TABLE_MOVE_ROW:
    return clbt_table_move_row(table, c->a, c->b);
  case TABLE_SWAP_ROW:
    return clbt_table_swap_row(table, c->a, c->b);
  case TABLE_COMMIT:
    return clbt_table_commit(table, c->a);
  case TABLE_SLOT_MAPPING_HOST:
    return clbt_table_compute_slot_mapping_host(
        table, c->a, c->null == NULL_QUERY_START_LOC ? NULL : qsl,
        c->null == NULL_POSITIONS ? NULL : positions, c->num_tokens,
        c->null == NULL_OUT ? NULL : out->slots);
  case TABLE_CLEAR:
    return clbt_table_clear(table);
  case TABLE_READ_REJECTED:
    return clbt_table_read_rejected_tokens(
        table, c->null == NULL_OUT ? NULL : &out->count);
  default: /* TABLE_RESET_REJECTED */
    return clbt_table_reset_rejected_tokens(table);
  }
}

static clbt_status call_multi(const bad_input *c, const fixture *f) {
  clbt_multi_table *multi = c->null == NULL_HANDLE ? NULL : f->multi;
  const int32_t *const *ids = c->null == NULL_BLOCK_IDS ? NULL : c->ids;
  const size_t *counts = c->null == NULL_COUNTS ? NULL : c->counts;
  switch (c->function) {
  case MULTI_APPEND_ROW:
    return clbt_multi_table_append_row(multi, c->a, ids, counts);
  case MULTI_ADD_ROW:
    return clbt_multi_table_add_row(multi, c->a, ids, counts);
  case MULTI_UPDATE_ROW:
    return clbt_multi_table_update_row(multi, c->a, counts,
                                       ids ? ids[0] : NULL,
                                       (clbt_row_update)c->flags);
  case MULTI_CLEAR_ROW:
    return clbt_multi_table_clear_row(multi, c->a);
  case MULTI_TRUNCATE_ROW:
    return clbt_multi_table_truncate_row(multi, c->a, counts);
  case MULTI_MOVE_ROW:
    return clbt_multi_table_move_row(multi, c->a, c->b);
  case MULTI_SWAP_ROW:
    return clbt_multi_table_swap_row(multi, c->a, c->b);
  case MULTI_COMMIT:
    return clbt_multi_table_commit(multi, c->a);
  default: /* MULTI_CLEAR */
    return clbt_multi_table_clear(multi);
  }
}

/* Both slot-mapping calls, whose buffers the case picks. */
static clbt_status call_slot_mapping(const bad_input *c, const fixture *f) {
  cl_mem qsl = c->null == NULL_QUERY_START_LOC
                   ? NULL
                   : pick_buffer(f, c->query_start_loc, false);
  cl_mem positions =
      c->null == NULL_POSITIONS ? NULL : pick_buffer(f, c->positions, true);
  if (c->function == MULTI_SLOT_MAPPING)
    return clbt_multi_table_compute_slot_mapping(
        c->null == NULL_HANDLE ? NULL : f->multi, c->a, qsl, positions,
        c->num_tokens);
  return clbt_table_compute_slot_mapping(
      c->null == NULL_HANDLE ? NULL : f->table, c->a, qsl, positions,
      c->num_tokens);
}

static clbt_status call_create(const bad_input *c, outputs *out) {
  clbt_device *device = c->null == NULL_HANDLE ? NULL : clbt_test_device();
  const clbt_table_config *config = c->null == NULL_CONFIG ? NULL : c->config;
  const clbt_multi_table_config *multi =
      c->null == NULL_CONFIG ? NULL : c->multi_config;
  bool no_out = c->null == NULL_OUT;
  switch (c->function) {
  case TABLE_CREATE:
    return clbt_table_create(device, config, no_out ? NULL : &out->table);
  case TABLE_PREPARE:
    return clbt_table_prepare(device, config);
  case MULTI_CREATE:
    return clbt_multi_table_create(device, multi, no_out ? NULL : &out->multi);
  default: /* MULTI_PREPARE */
    return clbt_multi_table_prepare(device, multi);
  }
}

static clbt_status call_device(const bad_input *c, const fixture *f,
                               outputs *out) {
  clbt_device *device = clbt_test_device();
  bool no_out = c->null == NULL_OUT;
  /* Never dereferenced: clbt compares it with the installed devices. */
  static int not_a_device;
  switch (c->function) {
  case DEVICE_OPEN:
    return clbt_device_open(c->selector, no_out ? NULL : &out->device);
  case DEVICE_WRAP:
    return clbt_device_wrap(
        c->null == NULL_CONTEXT       ? NULL
        : c->queue == SUB_DEVICE_QUEUE ? f->sub_context
                                       : clbt_device_context(device),
        c->null == NULL_DEVICE ? NULL : clbt_device_id(device),
        c->null == NULL_QUEUE ? NULL : pick_queue(f, c->queue),
        no_out ? NULL : &out->device);
  case DEVICE_SELECTOR:
    return clbt_device_selector(
        c->null == NULL_DEVICE   ? NULL
        : c->null == NULL_HANDLE ? (cl_device_id)&not_a_device
                                 : clbt_device_id(device),
        no_out ? NULL : out->selector, c->size);
  default: /* BLOCK_TABLE_WIDTH */
    return clbt_block_table_width(c->width_args[0], c->width_args[1],
                                  c->width_args[2], c->width_args[3],
                                  no_out ? NULL : &out->width);
  }
}

/* A device's settings: the test device's, which the cases must not change. */
static clbt_status call_settings(const bad_input *c, outputs *out) {
  clbt_device *device = c->null == NULL_HANDLE ? NULL : clbt_test_device();
  char *buf = c->null == NULL_OUT ? NULL : out->selector;
  static char value[CLBT_CACHE_DIR_SIZE + 1];
  memset(value, 'x', c->setting_length);
  value[c->setting_length] = '\0';
  if (c->setting) snprintf(value, sizeof value, "%s", c->setting);
  switch (c->function) {
  case DEVICE_SET_BUILD_OPTIONS:
    return clbt_device_set_build_options(device, value);
  case DEVICE_BUILD_OPTIONS:
    return clbt_device_build_options(device, buf, c->size);
  case DEVICE_SET_CACHE_DIR:
    return clbt_device_set_cache_dir(device, value);
  default: /* DEVICE_CACHE_DIR */
    return clbt_device_cache_dir(device, buf, c->size);
  }
}

/* A case's wait list: none, NULL events (never waited on: such lists are
   refused before they are read), or the fixture's events. */
static const cl_event *pick_wait_list(const bad_input *c, const fixture *f) {
  static const cl_event no_events[3] = {NULL, NULL, NULL};
  if (c->foreign_event) return f->events;
  return c->wait_list ? no_events : NULL;
}

/* The enqueuing calls, the commit mode and the log level, and the
   device's program list. */
static clbt_status call_new(const bad_input *c, const fixture *f,
                            outputs *out) {
  const cl_event *wait_list = pick_wait_list(c, f);
  clbt_table *table = c->null == NULL_HANDLE ? NULL : f->table;
  clbt_multi_table *multi = c->null == NULL_HANDLE ? NULL : f->multi;
  cl_mem qsl = pick_buffer(f, c->query_start_loc, false);
  cl_mem positions = pick_buffer(f, c->positions, true);
  switch (c->function) {
  case TABLE_ENQUEUE_COMMIT:
    return clbt_table_enqueue_commit(table, c->a, c->num_events, wait_list,
                                     NULL);
  case TABLE_ENQUEUE_SLOT_MAPPING:
    return clbt_table_enqueue_slot_mapping(table, c->a, qsl, positions,
                                           c->num_tokens, c->num_events,
                                           wait_list, NULL);
  case TABLE_SET_COMMIT_MODE:
    return clbt_table_set_commit_mode(table, (clbt_commit_mode)c->a);
  case TABLE_LAST_COMMIT:
    return clbt_table_last_commit(table,
                                  c->null == NULL_OUT ? NULL : &out->commit);
  case MULTI_ENQUEUE_COMMIT:
    return clbt_multi_table_enqueue_commit(multi, c->a, c->num_events,
                                           wait_list, NULL);
  case MULTI_ENQUEUE_SLOT_MAPPING:
    return clbt_multi_table_enqueue_slot_mapping(multi, c->a, qsl, positions,
                                                 c->num_tokens, c->num_events,
                                                 wait_list, NULL);
  case LOG_SET_LEVEL:
    return clbt_log_set_level((clbt_log_level)c->a);
  default: /* DEVICE_PROGRAM_OPTIONS */
    return clbt_device_program_options(
        c->null == NULL_HANDLE ? NULL : clbt_test_device(), c->a,
        c->null == NULL_OUT ? NULL : out->selector, c->size);
  }
}

/* The batch row updates. */
static clbt_status call_batch(const bad_input *c, const fixture *f) {
  const uint32_t *rows = c->null == NULL_ROWS ? NULL : c->rows;
  bool no_ids = c->null == NULL_BLOCK_IDS, no_counts = c->null == NULL_COUNTS;
  clbt_table *table = c->null == NULL_HANDLE ? NULL : f->table;
  clbt_multi_table *multi = c->null == NULL_HANDLE ? NULL : f->multi;
  switch (c->function) {
  case TABLE_APPEND_ROWS:
    return clbt_table_append_rows(table, c->num_rows, rows,
                                  no_counts ? NULL : c->row_counts[0],
                                  no_ids ? NULL : c->ids[0]);
  case TABLE_ADD_ROWS:
    return clbt_table_add_rows(table, c->num_rows, rows,
                               no_counts ? NULL : c->row_counts[0],
                               no_ids ? NULL : c->ids[0]);
  case MULTI_APPEND_ROWS:
    return clbt_multi_table_append_rows(multi, c->num_rows, rows,
                                        no_counts ? NULL : c->row_counts,
                                        no_ids ? NULL : c->ids);
  default: /* MULTI_ADD_ROWS */
    return clbt_multi_table_add_rows(multi, c->num_rows, rows,
                                     no_counts ? NULL : c->row_counts,
                                     no_ids ? NULL : c->ids);
  }
}

/*
 * The attention export: batches of c->a requests padded to c->b, with the
 * fixture's buffers; the NONE cases on a NONE table made for the call.
 */
static clbt_status call_export(const bad_input *c, const fixture *f,
                               outputs *out) {
  static const clbt_table_config none_config = {
      .block_size = 4, .max_num_reqs = 4, .max_num_blocks_per_req = 2,
      .max_num_batched_tokens = 8, .slot_mode = CLBT_SLOT_MODE_NONE};
  clbt_table *none = NULL;
  if (c->none_table)
    clbt_assert_ok(clbt_table_create(clbt_test_device(), &none_config, &none));
  clbt_table *table = c->null == NULL_HANDLE ? NULL : none ? none : f->table;
  struct {
    clbt_export_request request;
    uint64_t later;
  } grown = {
      .request =
          {.struct_size = c->later_field ? sizeof grown : c->struct_size,
           .num_reqs = c->a, .num_reqs_padded = c->b,
           .query_start_loc = c->null == NULL_QUERY_START_LOC
                                  ? NULL
                                  : pick_buffer(f, c->query_start_loc, false),
           .positions = c->null == NULL_POSITIONS
                            ? NULL
                            : pick_buffer(f, c->positions, true),
           .num_tokens = c->num_tokens,
           .seq_lens =
               c->seq_lens_given ? pick_buffer(f, c->seq_lens, false) : NULL,
           .idx_mapping = c->idx_mapping_given
                              ? pick_buffer(f, c->idx_mapping, false)
                              : NULL,
           .flags = c->export_flags, .dense_row_pitch = c->pitch},
      .later = c->later_field};
  const clbt_export_request *req =
      c->null == NULL_REQUEST ? NULL : &grown.request;
  const cl_event *wait_list = pick_wait_list(c, f);
  clbt_status status;
  if (c->function == TABLE_ENQUEUE_EXPORT)
    status = clbt_table_enqueue_export(table, req, c->num_events, wait_list,
                                       NULL);
  else if (c->function == MULTI_ENQUEUE_EXPORT)
    status = clbt_multi_table_enqueue_export(
        c->null == NULL_HANDLE ? NULL : f->multi, req, c->num_events,
        wait_list, NULL);
  else
    status = clbt_table_export_buffers(table,
                                       c->null == NULL_OUT ? NULL : &out->export);
  clbt_table_destroy(none);
  return status;
}

/*
 * A step struct of `type` (clbt_step, clbt_host_step or
 * clbt_multi_host_step, whose first fields are alike) inside a struct one field larger, which the case sets when it
 * asks for a later version's field; its sizes and flags as the case sets
 * them, .a requests padded to .b with a gather.
 */
#define GROWN_STEP(type, grown, c)                                          \
  struct {                                                                  \
    type step;                                                              \
    uint64_t later;                                                         \
  } grown;                                                                  \
  memset(&grown, 0, sizeof grown);                                          \
  grown.step.struct_size = (uint32_t)((c)->later_field   ? sizeof grown     \
                                      : (c)->struct_size ? (c)->struct_size \
                                                         : sizeof(type));   \
  grown.later = (c)->later_field;                                           \
  grown.step.flags = CLBT_STEP_GATHER | (c)->flags;                         \
  grown.step.num_reqs = (c)->a;                                             \
  grown.step.num_reqs_padded = (c)->b;                                      \
  grown.step.num_tokens = (c)->num_tokens

/* The device step, through the fixture's buffers or those the case picks. */
static clbt_status call_step(const bad_input *c, const fixture *f) {
  GROWN_STEP(clbt_step, grown, c);
  grown.step.query_start_loc =
      c->null == NULL_QUERY_START_LOC
          ? NULL
          : pick_buffer(f, c->query_start_loc, false);
  grown.step.positions =
      c->null == NULL_POSITIONS ? NULL : pick_buffer(f, c->positions, true);
  grown.step.idx_mapping = pick_buffer(f, c->step_idx_mapping, false);
  grown.step.export_flags = c->export_flags;
  grown.step.dense_row_pitch = c->pitch;
  grown.step.num_state_slots = c->num_state_slots;
  grown.step.state_null_block = c->state_null_block;
  const clbt_step *given = c->null == NULL_REQUEST ? NULL : &grown.step;
  const cl_event *wait_list = pick_wait_list(c, f);
  clbt_table *table = c->none_group ? clbt_multi_table_group(f->multi, 1)
                                    : f->table;
  if (c->function == MULTI_ENQUEUE_STEP)
    return clbt_multi_table_enqueue_step(
        c->null == NULL_HANDLE ? NULL : f->multi, given, c->num_events,
        wait_list, NULL);
  return clbt_table_enqueue_step(c->null == NULL_HANDLE ? NULL : table,
                                 given, c->num_events, wait_list, NULL);
}

/* A token-slots buffer: GOOD is 64 bytes, the others as pick_buffer's. */
static cl_mem pick_token_buffer(const fixture *f, buffer which) {
  return which == TOO_SMALL ? f->small_query_start_loc
                            : pick_buffer(f, which, true);
}

/*
 * The token slots: .a requests of the fixture's query_start_loc, .num_tokens
 * rows of .indices_per_row, in a request grown by a field when the case asks
 * for a later version's.
 */
static clbt_status call_token_slots(const bad_input *c, const fixture *f) {
  struct {
    clbt_token_slots_request request;
    uint64_t later;
  } grown;
  memset(&grown, 0, sizeof grown);
  grown.request.struct_size =
      (uint32_t)(c->later_field   ? sizeof grown
                 : c->struct_size ? c->struct_size
                                  : sizeof grown.request);
  grown.later = c->later_field;
  grown.request.num_reqs = c->a;
  grown.request.num_rows = c->num_tokens;
  grown.request.indices_per_row = c->indices_per_row;
  grown.request.query_start_loc =
      c->null == NULL_QUERY_START_LOC
          ? NULL
          : pick_buffer(f, c->query_start_loc, false);
  grown.request.idx_mapping =
      c->idx_mapping_given ? pick_buffer(f, c->idx_mapping, false) : NULL;
  grown.request.token_indices = c->null == NULL_TOKEN_INDICES
                                    ? NULL
                                    : pick_token_buffer(f, c->token_indices);
  grown.request.token_slots = c->null == NULL_TOKEN_SLOTS
                                  ? NULL
                                  : pick_token_buffer(f, c->token_slots);
  const clbt_token_slots_request *given =
      c->null == NULL_REQUEST ? NULL : &grown.request;
  const cl_event *wait_list = pick_wait_list(c, f);
  if (c->function == MULTI_ENQUEUE_TOKEN_SLOTS)
    return clbt_multi_table_enqueue_token_slots(
        c->null == NULL_HANDLE ? NULL : f->multi, given, c->num_events,
        wait_list, NULL);
  clbt_table *table = c->none_group ? clbt_multi_table_group(f->multi, 1)
                                    : f->table;
  return clbt_table_enqueue_token_slots(c->null == NULL_HANDLE ? NULL : table,
                                        given, c->num_events, wait_list,
                                        NULL);
}

/* The host step, writing into out. */
static clbt_status call_step_host(const bad_input *c, const fixture *f,
                                  outputs *out) {
  static const int32_t qsl[5] = {0, 1, 1, 1, 1}, idx[4] = {0, 1, 2, 3};
  static const int64_t positions[8] = {0};
  GROWN_STEP(clbt_host_step, grown, c);
  grown.step.query_start_loc = c->null == NULL_QUERY_START_LOC ? NULL : qsl;
  grown.step.positions = c->null == NULL_POSITIONS ? NULL : positions;
  grown.step.idx_mapping = idx;
  grown.step.slot_mapping = out->slots;
  grown.step.gathered_rows = out->gathered;
  return clbt_table_compute_step_host(
      c->null == NULL_HANDLE ? NULL : f->table,
      c->null == NULL_REQUEST ? NULL : &grown.step);
}

/* The multi-group host step, writing group 0's outputs into out. */
static clbt_status call_multi_step_host(const bad_input *c, const fixture *f,
                                        outputs *out) {
  static const int32_t qsl[5] = {0, 1, 1, 1, 1}, idx[4] = {0, 1, 2, 3};
  static const int64_t positions[8] = {0};
  int64_t *const slots[2] = {out->slots, NULL};
  int32_t *const gathered[2] = {out->gathered, NULL};
  GROWN_STEP(clbt_multi_host_step, grown, c);
  grown.step.query_start_loc = c->null == NULL_QUERY_START_LOC ? NULL : qsl;
  grown.step.positions = c->null == NULL_POSITIONS ? NULL : positions;
  grown.step.idx_mapping = idx;
  grown.step.slot_mappings = slots;
  grown.step.gathered_rows = gathered;
  return clbt_multi_table_compute_step_host(
      c->null == NULL_HANDLE ? NULL : f->multi,
      c->null == NULL_REQUEST ? NULL : &grown.step);
}

static clbt_status call(const bad_input *c, const fixture *f, outputs *out) {
  switch (c->function) {
  case TABLE_STEP_HOST:
    return call_step_host(c, f, out);
  case MULTI_STEP_HOST:
    return call_multi_step_host(c, f, out);
  case TABLE_ENQUEUE_STEP: case MULTI_ENQUEUE_STEP:
    return call_step(c, f);
  case TABLE_ENQUEUE_TOKEN_SLOTS: case MULTI_ENQUEUE_TOKEN_SLOTS:
    return call_token_slots(c, f);
  case TABLE_ENQUEUE_EXPORT: case MULTI_ENQUEUE_EXPORT:
  case TABLE_EXPORT_BUFFERS:
    return call_export(c, f, out);
  case TABLE_APPEND_ROWS: case TABLE_ADD_ROWS: case MULTI_APPEND_ROWS:
  case MULTI_ADD_ROWS:
    return call_batch(c, f);
  case TABLE_ENQUEUE_COMMIT: case TABLE_ENQUEUE_SLOT_MAPPING:
  case TABLE_SET_COMMIT_MODE: case TABLE_LAST_COMMIT:
  case MULTI_ENQUEUE_COMMIT: case MULTI_ENQUEUE_SLOT_MAPPING:
  case LOG_SET_LEVEL: case DEVICE_PROGRAM_OPTIONS:
    return call_new(c, f, out);
  case TABLE_CREATE: case TABLE_PREPARE: case MULTI_CREATE: case MULTI_PREPARE:
    return call_create(c, out);
  case TABLE_SLOT_MAPPING: case MULTI_SLOT_MAPPING:
    return call_slot_mapping(c, f);
  case DEVICE_OPEN: case DEVICE_WRAP: case DEVICE_SELECTOR:
  case BLOCK_TABLE_WIDTH:
    return call_device(c, f, out);
  case DEVICE_SET_BUILD_OPTIONS: case DEVICE_BUILD_OPTIONS:
  case DEVICE_SET_CACHE_DIR: case DEVICE_CACHE_DIR:
    return call_settings(c, out);
  case MULTI_APPEND_ROW: case MULTI_ADD_ROW: case MULTI_UPDATE_ROW:
  case MULTI_CLEAR_ROW: case MULTI_TRUNCATE_ROW:
  case MULTI_MOVE_ROW: case MULTI_SWAP_ROW: case MULTI_COMMIT: case MULTI_CLEAR:
    return call_multi(c, f);
  default:
    return call_table(c, f, out);
  }
}

/* ---- what must not change ----------------------------------------------- */

/* The fixture's tables: the table, then each group. */
static const clbt_table *fixture_table(const fixture *f, uint32_t i) {
  return i == 0 ? f->table : clbt_multi_table_group(f->multi, i - 1);
}
enum { FIXTURE_TABLES = 3 };

/* The test device's settings, which no case may change. */
typedef struct settings {
  char options[CLBT_BUILD_OPTIONS_SIZE], directory[CLBT_CACHE_DIR_SIZE];
} settings;

static void read_settings(settings *into) {
  clbt_assert_ok(clbt_device_build_options(
      clbt_test_device(), into->options, sizeof into->options));
  clbt_assert_ok(clbt_device_cache_dir(clbt_test_device(), into->directory,
                                       sizeof into->directory));
}

/* The device side no refused call may touch: outputs still poisoned,
   rejected-token counters and gathered rows still 0. */
static void check_device_outputs(const fixture *f, const char *context) {
  for (uint32_t i = 0; i < FIXTURE_TABLES; ++i) {
    int64_t slots[8];
    int32_t gathered[4 * 12];
    uint32_t rejected = 1;
    size_t cells = 4 * (size_t)clbt_table_width(fixture_table(f, i));
    clbt_test_read(clbt_table_gathered_rows(fixture_table(f, i)),
                   cells * sizeof *gathered, gathered);
    for (size_t e = 0; e < cells; ++e)
      ck_assert_msg(gathered[e] == 0, "%s: table %u gathered[%zu] was written",
                    context, i, e);
    clbt_test_read(clbt_table_slot_mapping(fixture_table(f, i)), sizeof slots,
                   slots);
    clbt_test_read(clbt_table_rejected_tokens(fixture_table(f, i)),
                   sizeof rejected, &rejected);
    for (int t = 0; t < 8; ++t)
      ck_assert_msg(slots[t] == CLBT_TEST_POISON,
                    "%s: table %u slot[%d] was written", context, i, t);
    ck_assert_msg(rejected == 0, "%s: table %u counted %u rejections",
                  context, i, rejected);
  }
  int64_t states[4 * 3 / 2];
  clbt_test_read(clbt_table_state_slots(clbt_multi_table_group(f->multi, 1)),
                 sizeof states, states);
  for (int e = 0; e < 4 * 3 / 2; ++e)
    ck_assert_msg(states[e] == CLBT_TEST_POISON,
                  "%s: the NONE group's state slots were written", context);
}

static void run_case(const bad_input *c, const fixture *f) {
  char context[256];
  snprintf(context, sizeof context, "%s, %s", function_names[c->function],
           c->argument);
  /* Names the case that a failing snapshot check (which cannot) is about. */
  printf("case: %s\n", context);
  fflush(stdout);
  clbt_test_snapshot before[FIXTURE_TABLES];
  for (uint32_t i = 0; i < FIXTURE_TABLES; ++i)
    before[i] = clbt_test_snapshot_take(fixture_table(f, i), 4);
  outputs out, untouched;
  memset(&out, 0xA5, sizeof out);
  untouched = out;
  static settings settings_before, settings_after;
  read_settings(&settings_before);

  clbt_status status = call(c, f, &out);
  clbt_assert_refused(context, status, c->status, c->words);
  ck_assert_msg(memcmp(&out, &untouched, sizeof out) == 0,
                "%s: an output was written", context);
  for (uint32_t i = 0; i < FIXTURE_TABLES; ++i)
    clbt_test_snapshot_check(&before[i], fixture_table(f, i));
  check_device_outputs(f, context);
  read_settings(&settings_after);
  ck_assert_msg(
      strcmp(settings_before.options, settings_after.options) == 0 &&
          strcmp(settings_before.directory, settings_after.directory) == 0,
      "%s: the device's settings changed", context);
}

START_TEST(every_function_refuses_every_bad_argument) {
  fixture f = fixture_create();
  size_t count = sizeof cases / sizeof cases[0];
  bool covered[NUM_FUNCTIONS] = {false};
  for (size_t i = 0; i < count; ++i) {
    run_case(&cases[i], &f);
    covered[cases[i].function] = true;
  }
  for (int fn = 0; fn < NUM_FUNCTIONS; ++fn)
    ck_assert_msg(covered[fn], "no case for %s", function_names[fn]);
  printf("bad input: %zu cases against %d public functions, each refused "
         "with its status and message, nothing changed\n",
         count, (int)NUM_FUNCTIONS);
  fixture_destroy(&f);
}
END_TEST

/*
 * The functions that return no status answer a NULL handle or an index out
 * of range with the neutral value the header documents (0, NULL, a fixed
 * text), and the destroy functions accept NULL; none of them changes a
 * table.
 */
START_TEST(functions_without_status_answer_bad_arguments_neutrally) {
  fixture f = fixture_create();
  clbt_test_snapshot before = clbt_test_snapshot_take(f.table, 4);
  const struct {
    const char *call;
    uintptr_t got, expected;
  } answers[] = {
#define ANSWER(call, expected) {#call, (uintptr_t)(call), (uintptr_t)(expected)}
      ANSWER(clbt_table_width(NULL), 0),
      ANSWER(clbt_table_row_length(NULL, 0), 0),
      ANSWER(clbt_table_row_length(f.table, 4), 0),
      ANSWER(clbt_table_row_length(f.table, UINT32_MAX), 0),
      ANSWER(clbt_table_row_lengths(NULL), NULL),
      ANSWER(clbt_table_host_data(NULL), NULL),
      ANSWER(clbt_table_device_data(NULL), NULL),
      ANSWER(clbt_table_device_row_lengths(NULL), NULL),
      ANSWER(clbt_table_slot_mapping(NULL), NULL),
      ANSWER(clbt_table_rejected_tokens(NULL), NULL),
      ANSWER(clbt_table_state_slots(NULL), NULL),
      ANSWER(clbt_table_state_slots(f.table), NULL),
      ANSWER(clbt_multi_table_num_groups(NULL), 0),
      ANSWER(clbt_multi_table_group(NULL, 0), NULL),
      ANSWER(clbt_multi_table_group(f.multi, 2), NULL),
      ANSWER(clbt_multi_table_group(f.multi, UINT32_MAX), NULL),
      ANSWER(clbt_device_context(NULL), NULL),
      ANSWER(clbt_device_id(NULL), NULL),
      ANSWER(clbt_device_queue(NULL), NULL),
      ANSWER(clbt_device_program_count(NULL), 0),
#undef ANSWER
  };
  size_t count = sizeof answers / sizeof answers[0];
  for (size_t i = 0; i < count; ++i)
    ck_assert_msg(answers[i].got == answers[i].expected,
                  "%s gave %#jx, expected %#jx", answers[i].call,
                  (uintmax_t)answers[i].got, (uintmax_t)answers[i].expected);
  ck_assert_str_eq(clbt_status_string((clbt_status)1), "unknown status");
  ck_assert_str_eq(clbt_status_name((clbt_status)-4100),
                   "CLBT_UNKNOWN_STATUS");
  clbt_table_destroy(NULL);
  clbt_multi_table_destroy(NULL);
  clbt_device_release(NULL);
  clbt_test_snapshot_check(&before, f.table);
  printf("bad input: %zu accessor cases answered with their neutral value; "
         "unknown statuses named, destroy and release of NULL accepted\n",
         count);
  fixture_destroy(&f);
}
END_TEST

/* ---- the KV-cache write -------------------------------------------------
 *
 * Its own table: each case edits one field (or two) of a valid config or
 * write, or swaps a buffer for a foreign or small one, and must return its
 * status with a message naming the argument and its bound, writing
 * nothing: the caches keep their poison, the counter stays 0, *out and
 * *event stay as they were.
 */

/* An fp16 cache of K and V in one buffer (4 blocks of 4 slots of 2 heads
   of 8: 64 elements a block, 1024 bytes), and an fp8 cache of two. */
#define KV_FP16_BYTES 1024
#define KV_FP8_BYTES 256
static const clbt_kv_cache_config kv_fp16_config = {
    .struct_size = sizeof(clbt_kv_cache_config),
    .cache_dtype = CLBT_KV_FLOAT16, .num_kv_heads = 2, .head_size = 8,
    .block_size = 4, .num_blocks = 4};
static const clbt_kv_cache_config kv_fp8_config = {
    .struct_size = sizeof(clbt_kv_cache_config),
    .cache_dtype = CLBT_KV_FP8_E4M3, .input_dtype = CLBT_KV_FLOAT16,
    .num_kv_heads = 2, .head_size = 8, .block_size = 4, .num_blocks = 4};

typedef struct kv_fixture {
  cl_mem fp16_cache, fp8_key_cache, fp8_value_cache, small;
  cl_mem read_only; /* KV_FP8_BYTES kernels may only read */
  cl_mem key, value, slots; /* fp16 [4][2][8] each; int64 [4] */
  clbt_kv_cache *fp16, *fp8;
} kv_fixture;

typedef enum kv_function {
  KV_CREATE, KV_WRITE, KV_READ_REJECTED, KV_RESET_REJECTED,
  KV_GET_ADDRESSING, KV_NUM_FUNCTIONS
} kv_function;

static const char *const kv_function_names[] = {
    "clbt_kv_cache_create", "clbt_kv_cache_enqueue_write",
    "clbt_kv_cache_read_rejected_tokens",
    "clbt_kv_cache_reset_rejected_tokens", "clbt_kv_cache_get_addressing"};

/* Which argument is NULL, or which buffer is swapped. */
typedef enum kv_swap {
  KV_NONE, KV_NULL_HANDLE, KV_NULL_STRUCT, KV_NULL_OUT, KV_NULL_KEY_CACHE,
  KV_NULL_KEY, KV_NULL_VALUE, KV_NULL_SLOTS, KV_FOREIGN_KEY_CACHE,
  KV_SMALL_VALUE_CACHE, KV_READ_ONLY_KEY_CACHE, KV_READ_ONLY_VALUE_CACHE,
  KV_FOREIGN_KEY, KV_LATER_FIELD
} kv_swap;

typedef struct kv_bad {
  kv_function function;
  const char *argument;
  clbt_status status;
  const char *words;
  bool fp8;              /* the fp8 cache's config or cache */
  kv_swap swap;
  size_t at, size;       /* a field of the config or write, set to value */
  uint64_t value;        /* (a float's as its bits) */
  size_t at2, size2;
  uint64_t value2;
  uint32_t num_events;   /* of a write's wait list, */
  bool wait_list;        /* given (of NULL events), */
  bool foreign_event;    /* or the fixture's events, the second foreign */
} kv_bad;

#define KV_FIELD(type, name) \
  .at = offsetof(type, name), .size = sizeof(((type *)NULL)->name)
#define KV_FIELD2(type, name) \
  .at2 = offsetof(type, name), .size2 = sizeof(((type *)NULL)->name)
#define KV_CONFIG(name, v) KV_FIELD(clbt_kv_cache_config, name), .value = (v)
#define KV_WRITE(name, v) KV_FIELD(clbt_kv_write, name), .value = (v)
#define KV_BAD(fn, what, expected, ...) \
  {.function = fn, .argument = what, .status = expected, .words = __VA_ARGS__}

static const kv_bad kv_cases[] = {
    /* ---- the cache's config ---- */
    KV_BAD(KV_CREATE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
           .swap = KV_NULL_HANDLE),
    KV_BAD(KV_CREATE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
           .swap = KV_NULL_STRUCT),
    KV_BAD(KV_CREATE, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
           .swap = KV_NULL_OUT),
    KV_BAD(KV_CREATE, "NULL key_cache", CLBT_NULL_ARGUMENT,
           "config->key_cache is NULL", .swap = KV_NULL_KEY_CACHE),
    KV_BAD(KV_CREATE, "struct_size below 0.5's", CLBT_INVALID_CONFIG,
           "config: struct_size is 8; clbt 0.6.0 reads 0 (0.5's layout), 88 "
           "(0.5) or a later version's size",
           KV_CONFIG(struct_size, 8)),
    KV_BAD(KV_CREATE, "a later version's field", CLBT_INVALID_CONFIG,
           "config sets byte 88 of its 96, past the 88 bytes clbt",
           .swap = KV_LATER_FIELD),
    KV_BAD(KV_CREATE, "unknown layout", CLBT_INVALID_CONFIG,
           "config->layout 2 is not a clbt_kv_layout", KV_CONFIG(layout, 2)),
    KV_BAD(KV_CREATE, "no cache_dtype", CLBT_INVALID_CONFIG,
           "config->cache_dtype 0 is not a clbt_kv_dtype",
           KV_CONFIG(cache_dtype, 0)),
    KV_BAD(KV_CREATE, "unknown input_dtype", CLBT_INVALID_CONFIG,
           "config->input_dtype 5 is not a clbt_kv_dtype",
           KV_CONFIG(input_dtype, 5)),
    KV_BAD(KV_CREATE, "fp8 cache without its input type", CLBT_INVALID_CONFIG,
           "config->input_dtype is CLBT_KV_DTYPE_NONE with an fp8 cache_dtype",
           .fp8 = true, KV_CONFIG(input_dtype, 0)),
    KV_BAD(KV_CREATE, "fp8 input to an fp16 cache", CLBT_INVALID_CONFIG,
           "config->input_dtype is CLBT_KV_FP8_E4M3 and cache_dtype 2: fp8 "
           "K/V go only to an fp8 cache",
           KV_CONFIG(input_dtype, CLBT_KV_FP8_E4M3)),
    KV_BAD(KV_CREATE, "zero num_kv_heads", CLBT_INVALID_CONFIG,
           "config->num_kv_heads is 0; it must be >= 1",
           KV_CONFIG(num_kv_heads, 0)),
    KV_BAD(KV_CREATE, "zero head_size", CLBT_INVALID_CONFIG,
           "config->head_size is 0; it must be >= 1", KV_CONFIG(head_size, 0)),
    KV_BAD(KV_CREATE, "zero block_size", CLBT_INVALID_CONFIG,
           "config->block_size is 0; it must be >= 1",
           KV_CONFIG(block_size, 0)),
    KV_BAD(KV_CREATE, "zero num_blocks", CLBT_INVALID_CONFIG,
           "config->num_blocks is 0; it must be >= 1",
           KV_CONFIG(num_blocks, 0)),
    KV_BAD(KV_CREATE, "a token past 32 bits of elements", CLBT_SIZE_OVERFLOW,
           "config->num_kv_heads 65536 x head_size 65536 exceeds INT32_MAX",
           KV_CONFIG(num_kv_heads, 65536),
           KV_FIELD2(clbt_kv_cache_config, head_size), .value2 = 65536),
    /* 2^31 elements fit 32 bits, but a GPU's lanes would step their count
       past 2^32 - 1 and wrap (cl/kv_cache.cl): refused by the same bound. */
    KV_BAD(KV_CREATE, "a token of 2^31 elements", CLBT_SIZE_OVERFLOW,
           "config->num_kv_heads 32768 x head_size 65536 exceeds INT32_MAX",
           KV_CONFIG(num_kv_heads, 32768),
           KV_FIELD2(clbt_kv_cache_config, head_size), .value2 = 65536),
    /* A stride of exactly what the smaller ones reach: head 1's element 0
       at head 0's element 7. */
    KV_BAD(KV_CREATE, "heads one element short of apart", CLBT_INVALID_CONFIG,
           "config->head_stride 7 is within the 8 elements the smaller "
           "strides span: two elements would share an address",
           KV_CONFIG(head_stride, 7)),
    KV_BAD(KV_CREATE, "pages overlapping heads", CLBT_INVALID_CONFIG,
           "config->page_stride 4 is within the 8 elements the smaller "
           "strides span: two elements would share an address",
           KV_CONFIG(page_stride, 4)),
    KV_BAD(KV_CREATE, "V overlapping K", CLBT_INVALID_CONFIG,
           "config->value_offset 32 is within the 64 elements the smaller "
           "strides span",
           KV_CONFIG(value_offset, 32)),
    KV_BAD(KV_CREATE, "blocks overlapping", CLBT_INVALID_CONFIG,
           "config->block_stride 32 is within the 64 elements",
           .fp8 = true, KV_CONFIG(block_stride, 32)),
    KV_BAD(KV_CREATE, "a cache too small for its blocks",
           CLBT_BUFFER_TOO_SMALL,
           "config->key_cache holds 1024 bytes; key_offset 0 and a tensor of "
           "576 elements (5 blocks of 4 slots of 2 heads of 8) need 1152",
           KV_CONFIG(num_blocks, 5)),
    KV_BAD(KV_CREATE, "an offset past the cache", CLBT_BUFFER_TOO_SMALL,
           "config->key_cache holds 256 bytes; key_offset 8 and a tensor of "
           "256 elements (4 blocks of 4 slots of 2 heads of 8) need 264",
           .fp8 = true, KV_CONFIG(key_offset, 8)),
    KV_BAD(KV_CREATE, "a value cache too small", CLBT_BUFFER_TOO_SMALL,
           "config->value_cache holds 64 bytes; value_offset 0",
           .fp8 = true, .swap = KV_SMALL_VALUE_CACHE),
    KV_BAD(KV_CREATE, "offsets past 64 bits", CLBT_SIZE_OVERFLOW,
           "config->key_offset 18446744073709551605 plus a block's 64 "
           "elements exceeds 64 bits",
           KV_CONFIG(key_offset, UINT64_MAX - 10)),
    KV_BAD(KV_CREATE, "a cache of another context", CLBT_CONTEXT_MISMATCH,
           "config->key_cache belongs to another OpenCL context",
           .swap = KV_FOREIGN_KEY_CACHE),
    KV_BAD(KV_CREATE, "a read-only cache", CLBT_READ_ONLY_BUFFER,
           "config->key_cache is a CL_MEM_READ_ONLY buffer, which kernels "
           "may only read",
           .fp8 = true, .swap = KV_READ_ONLY_KEY_CACHE),
    KV_BAD(KV_CREATE, "a read-only value cache", CLBT_READ_ONLY_BUFFER,
           "config->value_cache is a CL_MEM_READ_ONLY buffer",
           .fp8 = true, .swap = KV_READ_ONLY_VALUE_CACHE),
    /* ---- a write ---- */
    KV_BAD(KV_WRITE, "NULL cache", CLBT_NULL_ARGUMENT, "cache is NULL",
           .swap = KV_NULL_HANDLE),
    KV_BAD(KV_WRITE, "NULL write", CLBT_NULL_ARGUMENT, "write is NULL",
           .swap = KV_NULL_STRUCT),
    KV_BAD(KV_WRITE, "struct_size below 0.5's", CLBT_INVALID_CONFIG,
           "write: struct_size is 4; clbt 0.6.0 reads 0 (0.5's layout), 80",
           KV_WRITE(struct_size, 4)),
    KV_BAD(KV_WRITE, "NULL key", CLBT_NULL_ARGUMENT,
           "write->key is NULL with num_tokens 4", .swap = KV_NULL_KEY),
    KV_BAD(KV_WRITE, "NULL value", CLBT_NULL_ARGUMENT,
           "write->value is NULL with num_tokens 4", .swap = KV_NULL_VALUE),
    KV_BAD(KV_WRITE, "NULL slot_mapping", CLBT_NULL_ARGUMENT,
           "write->slot_mapping is NULL with num_tokens 4",
           .swap = KV_NULL_SLOTS),
    KV_BAD(KV_WRITE, "num_tokens past INT32_MAX", CLBT_INVALID_ARGUMENT,
           "write->num_tokens 2147483648 exceeds INT32_MAX",
           KV_WRITE(num_tokens, 2147483648u)),
    KV_BAD(KV_WRITE, "a token stride below a row", CLBT_INVALID_ARGUMENT,
           "write->key_token_stride 8 is below num_kv_heads x head_size 16",
           KV_WRITE(key_token_stride, 8)),
    KV_BAD(KV_WRITE, "a value stride below a row", CLBT_INVALID_ARGUMENT,
           "write->value_token_stride 15 is below num_kv_heads x head_size 16",
           KV_WRITE(value_token_stride, 15)),
    KV_BAD(KV_WRITE, "a slot mapping shorter than the tokens",
           CLBT_BUFFER_TOO_SMALL,
           "write->slot_mapping holds 32 bytes; num_tokens 4 entries from "
           "entry 1 need 40",
           KV_WRITE(slot_mapping_offset, 1)),
    KV_BAD(KV_WRITE, "more tokens than the key holds", CLBT_BUFFER_TOO_SMALL,
           "write->key holds 128 bytes; num_tokens 5 rows 16 elements apart "
           "from element 0 need 160",
           KV_WRITE(num_tokens, 5)),
    KV_BAD(KV_WRITE, "a value offset past the value", CLBT_BUFFER_TOO_SMALL,
           "write->value holds 128 bytes; num_tokens 4 rows 16 elements apart "
           "from element 2 need 132",
           KV_WRITE(value_offset, 2)),
    KV_BAD(KV_WRITE, "rows past 64 bits", CLBT_SIZE_OVERFLOW,
           "write->key: num_tokens 4 rows 18446744073709551615 apart from 0 "
           "end past 64 bits",
           KV_WRITE(key_token_stride, UINT64_MAX)),
    KV_BAD(KV_WRITE, "a key of another context", CLBT_CONTEXT_MISMATCH,
           "write->key belongs to another OpenCL context than the KV cache's "
           "device",
           .swap = KV_FOREIGN_KEY),
    KV_BAD(KV_WRITE, "zero k_scale", CLBT_INVALID_ARGUMENT,
           "write->k_scale 0 is not a finite value above 0", .fp8 = true,
           KV_WRITE(k_scale, 0)),
    KV_BAD(KV_WRITE, "negative v_scale", CLBT_INVALID_ARGUMENT,
           "write->v_scale -2 is not a finite value above 0", .fp8 = true,
           KV_WRITE(v_scale, 0xc0000000u)),
    KV_BAD(KV_WRITE, "NaN k_scale", CLBT_INVALID_ARGUMENT,
           "write->k_scale nan is not a finite value above 0", .fp8 = true,
           KV_WRITE(k_scale, 0x7fc00000u)),
    KV_BAD(KV_WRITE, "infinite v_scale", CLBT_INVALID_ARGUMENT,
           "write->v_scale inf is not a finite value above 0", .fp8 = true,
           KV_WRITE(v_scale, 0x7f800000u)),
    KV_BAD(KV_WRITE, "wait list NULL with events", CLBT_INVALID_ARGUMENT,
           "wait_list is NULL with num_events 1", .num_events = 1),
    KV_BAD(KV_WRITE, "a NULL event", CLBT_CL_INVALID_EVENT_WAIT_LIST,
           "wait_list[0] is NULL", .num_events = 1, .wait_list = true),
    KV_BAD(KV_WRITE, "an event of another context", CLBT_CONTEXT_MISMATCH,
           "wait_list[1] is an event of another OpenCL context than the KV "
           "cache's device",
           .num_events = 2, .foreign_event = true),
    /* ---- the counter ---- */
    KV_BAD(KV_READ_REJECTED, "NULL cache", CLBT_NULL_ARGUMENT,
           "cache is NULL", .swap = KV_NULL_HANDLE),
    KV_BAD(KV_READ_REJECTED, "NULL count", CLBT_NULL_ARGUMENT,
           "count is NULL", .swap = KV_NULL_OUT),
    KV_BAD(KV_RESET_REJECTED, "NULL cache", CLBT_NULL_ARGUMENT,
           "cache is NULL", .swap = KV_NULL_HANDLE),
    /* ---- the addressing ---- */
    KV_BAD(KV_GET_ADDRESSING, "NULL cache", CLBT_NULL_ARGUMENT,
           "cache is NULL", .swap = KV_NULL_HANDLE),
    KV_BAD(KV_GET_ADDRESSING, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
           .swap = KV_NULL_OUT),
};

static void kv_set(void *s, size_t at, size_t size, uint64_t value) {
  if (size == 4) {
    uint32_t v = (uint32_t)value;
    memcpy((unsigned char *)s + at, &v, sizeof v);
  } else if (size == 8) {
    memcpy((unsigned char *)s + at, &value, sizeof value);
  }
}

static kv_fixture kv_fixture_create(void) {
  kv_fixture k = {0};
  unsigned char poison[KV_FP16_BYTES];
  memset(poison, 0x5a, sizeof poison);
  k.fp16_cache = clbt_test_buffer(KV_FP16_BYTES, poison);
  k.fp8_key_cache = clbt_test_buffer(KV_FP8_BYTES, poison);
  k.fp8_value_cache = clbt_test_buffer(KV_FP8_BYTES, poison);
  k.small = clbt_test_buffer(64, poison);
  k.read_only = clbt_test_read_only_buffer(KV_FP8_BYTES, poison);
  k.key = clbt_test_buffer(128, poison);
  k.value = clbt_test_buffer(128, poison);
  const int64_t slots[] = {0, 5, -1, 17};
  k.slots = clbt_test_buffer(sizeof slots, slots);
  clbt_kv_cache_config fp16 = kv_fp16_config, fp8 = kv_fp8_config;
  fp16.key_cache = k.fp16_cache;
  fp8.key_cache = k.fp8_key_cache;
  fp8.value_cache = k.fp8_value_cache;
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &fp16, &k.fp16));
  clbt_assert_ok(clbt_kv_cache_create(clbt_test_device(), &fp8, &k.fp8));
  return k;
}

static void kv_fixture_destroy(kv_fixture *k) {
  clbt_kv_cache_destroy(k->fp16);
  clbt_kv_cache_destroy(k->fp8);
  cl_mem buffers[] = {k->fp16_cache, k->fp8_key_cache, k->fp8_value_cache,
                      k->small, k->read_only, k->key, k->value, k->slots};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
    clReleaseMemObject(buffers[i]);
}

static clbt_status kv_create_case(const kv_bad *c, const kv_fixture *k,
                                  const fixture *f, clbt_kv_cache **out) {
  clbt_kv_cache_config config = c->fp8 ? kv_fp8_config : kv_fp16_config;
  config.key_cache = c->fp8 ? k->fp8_key_cache : k->fp16_cache;
  config.value_cache = c->fp8 ? k->fp8_value_cache : NULL;
  kv_set(&config, c->at, c->size, c->value);
  kv_set(&config, c->at2, c->size2, c->value2);
  if (c->swap == KV_NULL_KEY_CACHE) config.key_cache = NULL;
  if (c->swap == KV_FOREIGN_KEY_CACHE) config.key_cache = f->foreign;
  if (c->swap == KV_SMALL_VALUE_CACHE) config.value_cache = k->small;
  if (c->swap == KV_READ_ONLY_KEY_CACHE) config.key_cache = k->read_only;
  if (c->swap == KV_READ_ONLY_VALUE_CACHE) config.value_cache = k->read_only;
  unsigned char grown[sizeof config + 8] = {0};
  memcpy(grown, &config, sizeof config);
  grown[sizeof config] = 1;
  uint32_t grown_size = sizeof grown;
  memcpy(grown, &grown_size, sizeof grown_size);
  const clbt_kv_cache_config *given =
      c->swap == KV_NULL_STRUCT   ? NULL
      : c->swap == KV_LATER_FIELD ? (const clbt_kv_cache_config *)grown
                                  : &config;
  return clbt_kv_cache_create(c->swap == KV_NULL_HANDLE ? NULL
                                                        : clbt_test_device(),
                              given, c->swap == KV_NULL_OUT ? NULL : out);
}

static clbt_status kv_write_case(const kv_bad *c, const kv_fixture *k,
                                 const fixture *f, cl_event *event) {
  clbt_kv_write w = CLBT_KV_WRITE_INIT;
  w.num_tokens = 4;
  w.key = c->swap == KV_NULL_KEY ? NULL
          : c->swap == KV_FOREIGN_KEY ? f->foreign : k->key;
  w.value = c->swap == KV_NULL_VALUE ? NULL : k->value;
  w.slot_mapping = c->swap == KV_NULL_SLOTS ? NULL : k->slots;
  w.k_scale = w.v_scale = 1.0f;
  kv_set(&w, c->at, c->size, c->value);
  const cl_event null_events[2] = {NULL, NULL};
  const cl_event *wait_list = c->foreign_event ? f->events
                              : c->wait_list   ? null_events
                                               : NULL;
  clbt_kv_cache *cache = c->swap == KV_NULL_HANDLE ? NULL
                         : c->fp8                  ? k->fp8
                                                   : k->fp16;
  return clbt_kv_cache_enqueue_write(
      cache, c->swap == KV_NULL_STRUCT ? NULL : &w, c->num_events, wait_list,
      event);
}

/* The caches still hold their poison and count nothing. */
static void kv_check_unchanged(const kv_fixture *k, const char *context) {
  unsigned char bytes[KV_FP16_BYTES];
  const cl_mem caches[] = {k->fp16_cache, k->fp8_key_cache, k->fp8_value_cache,
                           k->read_only};
  const size_t sizes[] = {KV_FP16_BYTES, KV_FP8_BYTES, KV_FP8_BYTES,
                          KV_FP8_BYTES};
  for (int i = 0; i < 4; ++i) {
    clbt_test_read(caches[i], sizes[i], bytes);
    for (size_t b = 0; b < sizes[i]; ++b)
      ck_assert_msg(bytes[b] == 0x5a, "%s: cache %d byte %zu was written",
                    context, i, b);
  }
  clbt_kv_cache *const handles[] = {k->fp16, k->fp8};
  for (int i = 0; i < 2; ++i) {
    uint32_t rejected = 1;
    clbt_assert_ok(clbt_kv_cache_read_rejected_tokens(handles[i], &rejected));
    ck_assert_msg(rejected == 0, "%s: cache %d counted %u", context, i,
                  (unsigned)rejected);
  }
}

START_TEST(kv_cache_refuses_every_bad_argument) {
  fixture f = fixture_create();
  kv_fixture k = kv_fixture_create();
  size_t count = sizeof kv_cases / sizeof kv_cases[0];
  bool covered[KV_NUM_FUNCTIONS] = {false};
  for (size_t i = 0; i < count; ++i) {
    const kv_bad *c = &kv_cases[i];
    char context[160];
    snprintf(context, sizeof context, "%s, %s",
             kv_function_names[c->function], c->argument);
    clbt_kv_cache *const sentinel = (clbt_kv_cache *)&k;
    clbt_kv_cache *out = sentinel;
    cl_event event = (cl_event)&k;
    uint32_t rejected = 7;
    clbt_kv_cache_addressing addressing, untouched;
    memset(&addressing, 0x5a, sizeof addressing);
    untouched = addressing;
    clbt_status status = CLBT_SUCCESS;
    switch (c->function) {
      case KV_CREATE: status = kv_create_case(c, &k, &f, &out); break;
      case KV_WRITE: status = kv_write_case(c, &k, &f, &event); break;
      case KV_READ_REJECTED:
        status = clbt_kv_cache_read_rejected_tokens(
            c->swap == KV_NULL_HANDLE ? NULL : k.fp16,
            c->swap == KV_NULL_OUT ? NULL : &rejected);
        break;
      case KV_GET_ADDRESSING:
        status = clbt_kv_cache_get_addressing(
            c->swap == KV_NULL_HANDLE ? NULL : k.fp16,
            c->swap == KV_NULL_OUT ? NULL : &addressing);
        break;
      default: status = clbt_kv_cache_reset_rejected_tokens(NULL); break;
    }
    clbt_assert_refused(context, status, c->status, c->words);
    ck_assert_msg(out == sentinel && event == (cl_event)&k && rejected == 7 &&
                      memcmp(&addressing, &untouched, sizeof addressing) == 0,
                  "%s wrote through an output pointer", context);
    kv_check_unchanged(&k, context);
    covered[c->function] = true;
  }
  for (int fn = 0; fn < KV_NUM_FUNCTIONS; ++fn)
    ck_assert_msg(covered[fn], "no case for %s", kv_function_names[fn]);
  printf("bad input: %zu cases against the KV cache's %d functions, each "
         "refused with its status and message, nothing written\n",
         count, (int)KV_NUM_FUNCTIONS);
  ck_assert_ptr_null(clbt_kv_cache_rejected_tokens(NULL));
  ck_assert_uint_eq(clbt_kv_dtype_size((clbt_kv_dtype)9), 0);
  clbt_kv_cache_destroy(NULL);
  kv_fixture_destroy(&k);
  fixture_destroy(&f);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("bad_input");
  TCase *tc = tcase_create("bad_input");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, every_function_refuses_every_bad_argument);
  tcase_add_test(tc, functions_without_status_answer_bad_arguments_neutrally);
  tcase_add_test(tc, kv_cache_refuses_every_bad_argument);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
