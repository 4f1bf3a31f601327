/*
 * A device's settings (src/device/device_settings.c): build options and a program
 * cache directory per handle, defaulting to CLBT_BUILD_OPTIONS and
 * CLBT_CACHE_DIR as they were when the handle was made, and bounded by
 * CLBT_BUILD_OPTIONS_SIZE and CLBT_CACHE_DIR_SIZE.
 */
#include "clbt_test.h"

#include <stdlib.h>

static const clbt_table_config config = {.block_size = 16,
                                         .max_num_reqs = 2,
                                         .max_num_blocks_per_req = 2,
                                         .max_num_batched_tokens = 4};

/* Makes every kernel's __kernel an unknown type: a build with it fails. */
/* A macro defined twice is a warning, which -Werror makes an error. */
#define BREAKING_OPTIONS "-Werror -DTEST_TWICE=1 -DTEST_TWICE=2"

static clbt_device *open_device(void) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  return device;
}

static void assert_options(clbt_device *device, const char *expected) {
  char options[CLBT_BUILD_OPTIONS_SIZE];
  clbt_assert_ok(clbt_device_build_options(device, options, sizeof options));
  ck_assert_str_eq(options, expected);
}

static void assert_cache_dir(clbt_device *device, const char *expected) {
  char directory[CLBT_CACHE_DIR_SIZE];
  clbt_assert_ok(clbt_device_cache_dir(device, directory, sizeof directory));
  ck_assert_str_eq(directory, expected);
}

/* The newest program's options, which are its key. */
static void newest_program_options(clbt_device *device, char *options) {
  clbt_assert_ok(clbt_device_program_options(device, 0, options,
                                             CLBT_PROGRAM_OPTIONS_SIZE));
}

/* A string of `length` copies of c. */
static char *repeated(char c, size_t length) {
  char *text = malloc(length + 1);
  ck_assert_ptr_nonnull(text);
  memset(text, c, length);
  text[length] = '\0';
  return text;
}

/* Each handle takes the environment as it is when the handle is made. */
START_TEST(environment_is_read_when_a_handle_is_made) {
  setenv("CLBT_BUILD_OPTIONS", "-DTEST_FIRST=1", 1);
  setenv("CLBT_CACHE_DIR", "/tmp/clbt-settings-first", 1);
  clbt_device *first = open_device();
  setenv("CLBT_BUILD_OPTIONS", "-DTEST_SECOND=2", 1);
  setenv("CLBT_CACHE_DIR", "/tmp/clbt-settings-second", 1);
  clbt_device *second = NULL;
  clbt_device *test_device = clbt_test_device();
  clbt_assert_ok(clbt_device_wrap(clbt_device_context(test_device),
                                  clbt_device_id(test_device),
                                  clbt_device_queue(test_device), &second));
  unsetenv("CLBT_BUILD_OPTIONS");
  unsetenv("CLBT_CACHE_DIR");
  clbt_device *third = open_device();
  assert_options(first, "-DTEST_FIRST=1");
  assert_cache_dir(first, "/tmp/clbt-settings-first");
  assert_options(second, "-DTEST_SECOND=2");
  assert_cache_dir(second, "/tmp/clbt-settings-second");
  assert_options(third, "");
  assert_cache_dir(third, "");
  clbt_device_release(first);
  clbt_device_release(second);
  clbt_device_release(third);
}
END_TEST

/* Options set in the environment after a handle is open reach no build. */
START_TEST(later_environment_changes_no_open_handle) {
  clbt_device *device = open_device();
  setenv("CLBT_BUILD_OPTIONS", BREAKING_OPTIONS, 1);
  clbt_status status = clbt_table_prepare(device, &config);
  unsetenv("CLBT_BUILD_OPTIONS");
  clbt_assert_ok(status);
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  newest_program_options(device, options);
  ck_assert_ptr_null(strstr(options, BREAKING_OPTIONS));
  assert_options(device, "");
  clbt_device_release(device);
}
END_TEST

/*
 * Two handles on one device in one process build the same config with
 * their own options: the options that break the kernel fail only the
 * handle that has them.
 */
START_TEST(handles_build_with_their_own_options) {
  clbt_device *broken = open_device(), *marked = open_device();
  clbt_assert_ok(clbt_device_set_build_options(broken, BREAKING_OPTIONS));
  clbt_assert_ok(clbt_device_set_build_options(marked, "-DTEST_MARK=3"));
  clbt_assert_fails(clbt_table_prepare(broken, &config),
                    CLBT_CL_BUILD_PROGRAM_FAILURE, BREAKING_OPTIONS);
  clbt_assert_ok(clbt_table_prepare(marked, &config));
  ck_assert_uint_eq(clbt_device_program_count(broken), 0);
  ck_assert_uint_eq(clbt_device_program_count(marked), 1);
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  newest_program_options(marked, options);
  ck_assert_msg(strstr(options, " -DTEST_MARK=3"), "%s", options);
  ck_assert_ptr_null(strstr(options, BREAKING_OPTIONS));
  clbt_device_release(broken);
  clbt_device_release(marked);
}
END_TEST

/*
 * Each handle stores its programs in its own cache directory, and one
 * whose cache is off (or turned off) stores nothing.
 */
START_TEST(handles_use_their_own_cache_directories) {
  char first_dir[] = "/tmp/clbt-settings-XXXXXX";
  char second_dir[] = "/tmp/clbt-settings-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(first_dir));
  ck_assert_ptr_nonnull(mkdtemp(second_dir));
  clbt_device *first = open_device(), *second = open_device(),
              *off = open_device();
  clbt_assert_ok(clbt_device_set_cache_dir(first, first_dir));
  clbt_assert_ok(clbt_device_set_cache_dir(second, second_dir));
  clbt_assert_ok(clbt_table_prepare(first, &config));
  ck_assert_int_eq(clbt_test_count_files(first_dir, NULL, 0), 1);
  ck_assert_int_eq(clbt_test_count_files(second_dir, NULL, 0), 0);
  clbt_table_config other = config;
  other.block_size = 32;
  clbt_assert_ok(clbt_table_prepare(second, &other));
  clbt_assert_ok(clbt_table_prepare(off, &config));
  clbt_assert_ok(clbt_table_prepare(off, &other));
  ck_assert_int_eq(clbt_test_count_files(first_dir, NULL, 0), 1);
  ck_assert_int_eq(clbt_test_count_files(second_dir, NULL, 0), 1);
  clbt_assert_ok(clbt_device_set_cache_dir(first, ""));
  assert_cache_dir(first, "");
  clbt_assert_ok(clbt_table_prepare(first, &other));
  ck_assert_int_eq(clbt_test_count_files(first_dir, NULL, 0), 1);
  clbt_device_release(first);
  clbt_device_release(second);
  clbt_device_release(off);
  clbt_test_remove_tree(first_dir);
  clbt_test_remove_tree(second_dir);
}
END_TEST

/* Maps an empty batch with the table's kernel and waits for it. */
static void map_empty_batch(clbt_device *device, clbt_table *table) {
  cl_int query_start_loc[1] = {0};
  cl_int error = CL_SUCCESS;
  cl_mem starts = clCreateBuffer(
      clbt_device_context(device), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
      sizeof query_start_loc, query_start_loc, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 0, starts, NULL, 0));
  ck_assert_int_eq(clFinish(clbt_device_queue(device)), CL_SUCCESS);
  clReleaseMemObject(starts);
}

/*
 * New options reach only later builds: a table made before keeps its
 * kernel (no build), a later prepare builds a new program (the options
 * are part of its key), and going back finds the first program again.
 */
START_TEST(new_options_reach_later_builds_only) {
  clbt_device *device = open_device();
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(device, &config, &table));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_assert_ok(clbt_device_set_build_options(device, BREAKING_OPTIONS));
  map_empty_batch(device, table);
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_LATER=4"));
  clbt_assert_ok(clbt_table_prepare(device, &config));
  ck_assert_uint_eq(clbt_device_program_count(device), 2);
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  newest_program_options(device, options);
  ck_assert_msg(strstr(options, " -DTEST_LATER=4"), "%s", options);
  clbt_assert_ok(clbt_device_program_options(device, 1, options,
                                             sizeof options));
  ck_assert_ptr_null(strstr(options, "-DTEST_"));
  clbt_assert_ok(clbt_device_set_build_options(device, NULL));
  assert_options(device, "");
  clbt_assert_ok(clbt_table_prepare(device, &config));
  ck_assert_uint_eq(clbt_device_program_count(device), 2);
  clbt_table_destroy(table);
  clbt_device_release(device);
}
END_TEST

/*
 * The bounds: CLBT_BUILD_OPTIONS_SIZE - 1 characters are kept, one more is
 * refused and changes nothing; the same for the cache directory.
 */
START_TEST(settings_are_bounded) {
  clbt_device *device = open_device();
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_KEPT=5"));
  clbt_assert_ok(clbt_device_set_cache_dir(device, "/tmp/clbt-kept"));
  char *options = repeated('o', CLBT_BUILD_OPTIONS_SIZE);
  char *directory = repeated('d', CLBT_CACHE_DIR_SIZE);
  char message[128];
  snprintf(message, sizeof message,
           "options is %d characters; at most %d (CLBT_BUILD_OPTIONS_SIZE - 1)",
           CLBT_BUILD_OPTIONS_SIZE, CLBT_BUILD_OPTIONS_SIZE - 1);
  clbt_assert_fails(clbt_device_set_build_options(device, options),
                    CLBT_INVALID_ARGUMENT, message);
  snprintf(message, sizeof message,
           "directory is %d characters; at most %d (CLBT_CACHE_DIR_SIZE - 1)",
           CLBT_CACHE_DIR_SIZE, CLBT_CACHE_DIR_SIZE - 1);
  clbt_assert_fails(clbt_device_set_cache_dir(device, directory),
                    CLBT_INVALID_ARGUMENT, message);
  assert_options(device, "-DTEST_KEPT=5");
  assert_cache_dir(device, "/tmp/clbt-kept");
  /* One character fewer is kept whole, and read back whole. */
  options[CLBT_BUILD_OPTIONS_SIZE - 1] = '\0';
  directory[CLBT_CACHE_DIR_SIZE - 1] = '\0';
  clbt_assert_ok(clbt_device_set_build_options(device, options));
  clbt_assert_ok(clbt_device_set_cache_dir(device, directory));
  assert_options(device, options);
  assert_cache_dir(device, directory);
  /* A buffer one byte short is refused and left as it was. */
  char small[8] = "kept";
  clbt_assert_fails(clbt_device_build_options(device, small, 4),
                    CLBT_BUFFER_TOO_SMALL, "size is 4 bytes");
  ck_assert_str_eq(small, "kept");
  clbt_assert_ok(clbt_device_set_build_options(device, "-DQ=1"));
  clbt_assert_fails(clbt_device_build_options(device, small, 5),
                    CLBT_BUFFER_TOO_SMALL,
                    "size is 5 bytes; the build option string needs 6");
  clbt_assert_ok(clbt_device_build_options(device, small, 6));
  ck_assert_str_eq(small, "-DQ=1");
  free(options);
  free(directory);
  clbt_device_release(device);
}
END_TEST

/* An environment value over the bound fails the open, naming it. */
START_TEST(environment_over_the_bound_fails_the_open) {
  static const char *const variables[] = {"CLBT_BUILD_OPTIONS",
                                          "CLBT_CACHE_DIR"};
  static const int sizes[] = {CLBT_BUILD_OPTIONS_SIZE, CLBT_CACHE_DIR_SIZE};
  clbt_device *test_device = clbt_test_device();
  for (int i = 0; i < 2; ++i) {
    char *value = repeated('x', (size_t)sizes[i]);
    char message[128];
    snprintf(message, sizeof message, "%s is %d characters; at most %d",
             variables[i], sizes[i], sizes[i] - 1);
    setenv(variables[i], value, 1);
    clbt_device *device = NULL;
    clbt_status opened = clbt_device_open(NULL, &device);
    clbt_status wrapped = clbt_device_wrap(
        clbt_device_context(test_device), clbt_device_id(test_device),
        clbt_device_queue(test_device), &device);
    unsetenv(variables[i]);
    free(value);
    ck_assert_int_eq(opened, CLBT_INVALID_ARGUMENT);
    clbt_assert_fails(wrapped, CLBT_INVALID_ARGUMENT, message);
    ck_assert_ptr_null(device);
  }
}
END_TEST

/*
 * Options that define or undefine a CLBT_ macro, in every form a compiler
 * might take, and the macro each names: all are refused, and the options
 * stay as they were.
 */
static const struct {
  const char *options, *message;
} reserved_options[] = {
    {"-DCLBT_PAD_SLOT_ID=0", "options defines CLBT_PAD_SLOT_ID: "},
    {"-cl-mad-enable -DCLBT_GROUP_0=32,1,1,0,1,1,0",
     "options defines CLBT_GROUP_0: "},
    {"-D CLBT_QSL_WORDS=1", "options defines CLBT_QSL_WORDS: "},
    {"-D\t\"CLBT_RECORD_WORDS_0=512\"", "options defines CLBT_RECORD_WORDS_0: "},
    {"\"-DCLBT_NUM_GROUPS=2\"", "options defines CLBT_NUM_GROUPS: "},
    {"'-D' 'CLBT_GROUP_1=16,1,1,0,1,1,0'", "options defines CLBT_GROUP_1: "},
    {"-DCL\"BT_\"PAD_SLOT_ID=0", "options defines CLBT_PAD_SLOT_ID: "},
    {"-UCLBT_PAD_SLOT_ID", "options undefines CLBT_PAD_SLOT_ID: "},
    {"-w -U CLBT_NUM_GROUPS", "options undefines CLBT_NUM_GROUPS: "},
    {"-DCLBT_ANY_NAME", "options defines CLBT_ANY_NAME: "},
};

START_TEST(options_may_not_define_clbt_macros) {
  clbt_device *device = open_device();
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_KEPT=6"));
  size_t count = sizeof reserved_options / sizeof reserved_options[0];
  for (size_t i = 0; i < count; ++i) {
    clbt_assert_fails(
        clbt_device_set_build_options(device, reserved_options[i].options),
        CLBT_INVALID_ARGUMENT, reserved_options[i].message);
    ck_assert_ptr_nonnull(strstr(clbt_last_error(),
                                 "macros named CLBT_* are clbt's own"));
    assert_options(device, "-DTEST_KEPT=6");
  }
  /* A name that only contains CLBT_, or a value, is the caller's. */
  clbt_assert_ok(clbt_device_set_build_options(
      device, "-DMY_CLBT_FLAG=1 -DFLAG=CLBT_VALUE -DQ-DCLBT_Y"));
  clbt_device_release(device);
}
END_TEST

/*
 * Nor may they define or undefine a name clbt's kernels use, or one the
 * OpenCL C compiler reserves: "-Dmin(a,b)=(a)" was taken, and every min a
 * kernel takes of a bound became its first argument. Each spelling is
 * refused, naming the name, and the options stay as they were. A name the
 * kernels' code does not use (one only their comments hold: "torch"), a
 * kernel name as a value, or a longer name are fine.
 */
static const struct {
  const char *options, *message;
} kernel_names[] = {
    {"-Dmin(a,b)=(a)", "options defines min: clbt's kernels use that name"},
    {"-D min=max", "options defines min: "},
    {"-cl-mad-enable -Umin", "options undefines min: "},
    {"'-D' 'uint=int'", "options defines uint: "},
    {"-D\"get_global_id(x)=0\"", "options defines get_global_id: "},
    {"-DCLK_LOCAL_MEM_FENCE=0", "options defines CLK_LOCAL_MEM_FENCE: "},
    {"-D__kernel=not_a_type", "options defines __kernel: "},
    {"-D__OPENCL_VERSION__=100", "options defines __OPENCL_VERSION__: "},
    {"-D__FAST_RELAXED_MATH__",
     "options defines __FAST_RELAXED_MATH__: names that begin with __ or with "
     "_ and a capital letter are the OpenCL C compiler's"},
    {"-U_Reserved", "options undefines _Reserved: names that begin"},
};

START_TEST(options_may_not_redefine_what_the_kernels_use) {
  clbt_device *device = open_device();
  clbt_assert_ok(clbt_device_set_build_options(device, "-DTEST_KEPT=7"));
  size_t count = sizeof kernel_names / sizeof kernel_names[0];
  for (size_t i = 0; i < count; ++i) {
    clbt_assert_fails(
        clbt_device_set_build_options(device, kernel_names[i].options),
        CLBT_INVALID_ARGUMENT, kernel_names[i].message);
    ck_assert_ptr_nonnull(strstr(clbt_last_error(),
                                 "build options may not define or undefine"));
    assert_options(device, "-DTEST_KEPT=7");
  }
  const char *const fine[] = {"-Dtorch=1", "-DTEST_X=min", "-Dminimum=2",
                              "-D_lower=1 -DMY_min"};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; ++i) {
    clbt_assert_ok(clbt_device_set_build_options(device, fine[i]));
    assert_options(device, fine[i]);
  }
  clbt_device_release(device);
}
END_TEST

/* The same options in the environment fail the open, naming it. */
START_TEST(environment_may_not_define_clbt_macros) {
  clbt_device *test_device = clbt_test_device();
  setenv("CLBT_BUILD_OPTIONS", "-cl-mad-enable -D CLBT_PAD_SLOT_ID=0", 1);
  clbt_device *device = NULL;
  clbt_status opened = clbt_device_open(NULL, &device);
  ck_assert_int_eq(opened, CLBT_INVALID_ARGUMENT);
  ck_assert_ptr_null(device);
  clbt_status wrapped = clbt_device_wrap(
      clbt_device_context(test_device), clbt_device_id(test_device),
      clbt_device_queue(test_device), &device);
  unsetenv("CLBT_BUILD_OPTIONS");
  clbt_assert_fails(wrapped, CLBT_INVALID_ARGUMENT,
                    "CLBT_BUILD_OPTIONS defines CLBT_PAD_SLOT_ID: ");
  ck_assert_ptr_null(device);
}
END_TEST

/*
 * The finding of issue 20: with the pad id and block size of a build
 * option, a table of block size 16 gave the pad slot 0 and mapped position
 * 3 of block 5 to 5 * 32 + 3 = 163. Refused, they change nothing: the
 * token gets 5 * 16 + 3 = 83, the rest CLBT_PAD_SLOT_ID.
 */
START_TEST(refused_options_change_no_slot) {
  clbt_device *device = clbt_test_device();
  clbt_assert_fails(clbt_device_set_build_options(
                        device, "-DCLBT_PAD_SLOT_ID=0 "
                                "-DCLBT_GROUP_0=32,1,1,0,1,1,0"),
                    CLBT_INVALID_ARGUMENT, "CLBT_PAD_SLOT_ID");
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(device, &config, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  const cl_int query_start_loc[] = {0, 1};
  const cl_long positions[] = {3};
  cl_mem starts = clbt_test_buffer(sizeof query_start_loc, query_start_loc);
  cl_mem at = clbt_test_buffer(sizeof positions, positions);
  cl_long slots[4];
  cl_mem mapping = clbt_table_slot_mapping(table);
  clbt_test_poison(mapping, 4);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, starts, at, 1));
  clbt_test_read(mapping, sizeof slots, slots);
  ck_assert_int_eq(slots[0], 83);
  for (int t = 1; t < 4; ++t) ck_assert_int_eq(slots[t], CLBT_PAD_SLOT_ID);
  clReleaseMemObject(starts);
  clReleaseMemObject(at);
  clbt_table_destroy(table);
}
END_TEST

/*
 * The longest program options there are fit CLBT_PROGRAM_OPTIONS_SIZE:
 * CLBT_MAX_LAUNCH_GROUPS groups whose five numbers have ten digits each
 * (block size 2^31, kernel blocks per block 2^30, CP world 4000000000,
 * rank 3999999999, interleave 2^30) and whose two flags say it maps tokens
 * and keeps gathered tails, and the longest build options.
 */
START_TEST(longest_options_fit) {
  clbt_device *device = open_device();
  char *padding = repeated('x', CLBT_BUILD_OPTIONS_SIZE - 1);
  memcpy(padding, "-DTEST_PAD=", 11);
  clbt_assert_ok(clbt_device_set_build_options(device, padding));
  clbt_group_config groups[CLBT_MAX_LAUNCH_GROUPS];
  for (int g = 0; g < CLBT_MAX_LAUNCH_GROUPS; ++g)
    groups[g] = (clbt_group_config){.block_size = 1u << 31,
                                    .kernel_block_size = 2,
                                    .max_num_blocks = 1};
  clbt_multi_table_config multi = {
      .max_num_reqs = 1, .max_num_batched_tokens = 1,
      .num_groups = CLBT_MAX_LAUNCH_GROUPS, .groups = groups,
      .cp_world_size = 4000000000u, .cp_rank = 3999999999u,
      .cp_interleave_size = 1u << 30};
  clbt_assert_ok(clbt_multi_table_prepare(device, &multi));
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  newest_program_options(device, options);
  ck_assert_ptr_nonnull(strstr(options, "=2147483648,1073741824,4000000000,"
                                        "3999999999,1073741824,1,0 "));
  ck_assert_ptr_nonnull(strstr(options, padding));
  free(padding);
  clbt_device_release(device);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("device_settings");
  TCase *tc = tcase_create("device_settings");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, environment_is_read_when_a_handle_is_made);
  tcase_add_test(tc, later_environment_changes_no_open_handle);
  tcase_add_test(tc, handles_build_with_their_own_options);
  tcase_add_test(tc, handles_use_their_own_cache_directories);
  tcase_add_test(tc, new_options_reach_later_builds_only);
  tcase_add_test(tc, settings_are_bounded);
  tcase_add_test(tc, environment_over_the_bound_fails_the_open);
  tcase_add_test(tc, longest_options_fit);
  tcase_add_test(tc, options_may_not_define_clbt_macros);
  tcase_add_test(tc, options_may_not_redefine_what_the_kernels_use);
  tcase_add_test(tc, environment_may_not_define_clbt_macros);
  tcase_add_test(tc, refused_options_change_no_slot);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
