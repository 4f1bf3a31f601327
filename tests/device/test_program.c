/* Programs (src/device/program.c): one build per specialisation, shared, logged. */
#include "clbt_test.h"
#include "device/handle.h"

#include <stdio.h>
#include <stdlib.h>

/* A device of the test's own, so that the counts start at zero. */
static clbt_device *fresh_device(void) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(NULL, &device));
  ck_assert_uint_eq(clbt_device_program_count(device), 0);
  return device;
}

static clbt_table_config config_of(uint32_t block_size, uint32_t cp_world,
                                   uint32_t cp_rank) {
  return (clbt_table_config){.block_size = block_size, .max_num_reqs = 2,
                             .max_num_blocks_per_req = 2,
                             .max_num_batched_tokens = 4,
                             .cp_world_size = cp_world, .cp_rank = cp_rank};
}

START_TEST(tables_share_a_specialisation) {
  clbt_device *device = fresh_device();
  clbt_table_config a = config_of(16, 2, 0);
  clbt_assert_ok(clbt_table_prepare(device, &a));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_table *first = NULL, *second = NULL, *third = NULL;
  clbt_assert_ok(clbt_table_create(device, &a, &first));
  /* sizes are not part of the specialisation */
  clbt_table_config wider = a;
  wider.max_num_reqs = 7;
  wider.max_num_blocks_per_req = 9;
  wider.max_num_batched_tokens = 100;
  clbt_assert_ok(clbt_table_create(device, &wider, &second));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  /* another rank is another program */
  clbt_table_config b = config_of(16, 2, 1);
  clbt_assert_ok(clbt_table_create(device, &b, &third));
  ck_assert_uint_eq(clbt_device_program_count(device), 2);
  clbt_table_destroy(first);
  clbt_table_destroy(second);
  clbt_table_destroy(third);
  ck_assert_uint_eq(clbt_device_program_count(device), 2);
  clbt_device_release(device);
}
END_TEST

/*
 * A NONE table builds its program at its first commit, not at creation;
 * prepare builds it ahead (clbt.h: "every program a table with this config
 * needs"), so that the commit and the step after it build nothing. So does
 * prepare for a multi-group table whose groups are all NONE.
 */
START_TEST(prepare_builds_what_a_none_table_needs) {
  clbt_device *device = fresh_device();
  clbt_table_config none = config_of(64, 0, 0);
  none.slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(device, &none, &table));
  ck_assert_uint_eq(clbt_device_program_count(device), 0);
  clbt_assert_ok(clbt_table_prepare(device, &none));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  const int32_t ids[] = {3, 4};
  clbt_assert_ok(clbt_table_add_row(table, 1, ids, 2));
  clbt_assert_ok(clbt_table_commit(table, 2));
  int32_t no_tokens[3] = {0, 0, 0};
  cl_int error = CL_SUCCESS;
  cl_mem query_start_loc =
      clCreateBuffer(clbt_device_context(device), CL_MEM_COPY_HOST_PTR,
                     sizeof no_tokens, no_tokens, &error);
  clbt_assert_ok(error);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER;
  step.num_reqs = 2;
  step.query_start_loc = query_start_loc;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  clbt_assert_ok(clFinish(clbt_device_queue(device)));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_table_destroy(table);
  clReleaseMemObject(query_start_loc);
  clbt_device_release(device);

  device = fresh_device();
  const clbt_group_config groups[] = {
      {.block_size = 64, .max_num_blocks = 2,
       .slot_mode = CLBT_SLOT_MODE_NONE}};
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = 1, .groups = groups};
  clbt_assert_ok(clbt_multi_table_prepare(device, &config));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_device_release(device);
}
END_TEST

/* A failed build returns the build log through clbt_last_error. */
START_TEST(build_failure_reports_the_log) {
  clbt_device *device = fresh_device();
  /* A macro defined twice: a warning, which -Werror makes an error. */
  clbt_assert_ok(clbt_device_set_build_options(
      device, "-Werror -DTEST_TWICE=1 -DTEST_TWICE=2"));
  clbt_table_config config = config_of(16, 0, 0);
  clbt_table *table = NULL;
  clbt_status status = clbt_table_create(device, &config, &table);
  clbt_assert_ok(clbt_device_set_build_options(device, ""));
  ck_assert_msg(status == CLBT_CL_BUILD_PROGRAM_FAILURE, "%s: %s",
                clbt_status_name(status), clbt_last_error());
  ck_assert_ptr_null(table);
  ck_assert_ptr_nonnull(strstr(clbt_last_error(), "build log:"));
  ck_assert_ptr_nonnull(strstr(clbt_last_error(), "-DTEST_TWICE=2"));
  ck_assert_ptr_nonnull(
      strstr(clbt_last_error(), "'TEST_TWICE' macro redefined"));
  ck_assert_uint_eq(clbt_device_program_count(device), 0);
  /* Without the bad option the same config builds. */
  clbt_assert_ok(clbt_table_create(device, &config, &table));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_table_destroy(table);
  clbt_device_release(device);
}
END_TEST

/* The line of path (from the project's root) where text first appears. */
static int first_line_of(const char *path, const char *text) {
  char full[1024], line[1024];
  snprintf(full, sizeof full, "%s/%s", CLBT_SOURCE_DIR, path);
  FILE *file = fopen(full, "r");
  ck_assert_msg(file != NULL, "cannot read %s", full);
  int number = 0, found = 0;
  while (!found && fgets(line, sizeof line, file)) {
    ++number;
    if (strstr(line, text)) found = number;
  }
  fclose(file);
  ck_assert_msg(found, "%s does not hold '%s'", path, text);
  return found;
}

/*
 * A build error names the part of the kernel it is in and its line there,
 * not a line of the program's joined source: a build option that turns
 * pages_of, a function of cl/export.cl, into '@' fails the build at each
 * line that names it, its definition among them. The setter refuses an
 * option that defines a name the kernels use, so it is written into the
 * device's settings behind the setter's back.
 */
START_TEST(a_build_error_names_its_file_and_line) {
  clbt_device *device = fresh_device();
  snprintf(device->build_options, sizeof device->build_options,
           "-Dpages_of=@");
  clbt_table_config config = config_of(16, 0, 0);
  clbt_table *table = NULL;
  clbt_status status = clbt_table_create(device, &config, &table);
  ck_assert_msg(status == CLBT_CL_BUILD_PROGRAM_FAILURE, "%s: %s",
                clbt_status_name(status), clbt_last_error());
  char where[64];
  snprintf(where, sizeof where, "cl/export.cl:%d:",
           first_line_of("cl/export.cl", "static uint pages_of("));
  ck_assert_msg(strstr(clbt_last_error(), where), "no '%s' in: %s", where,
                clbt_last_error());
  ck_assert_ptr_nonnull(strstr(clbt_last_error(), "building cl/step.cl"));
  clbt_device_release(device);
}
END_TEST

/* tests/device/embedded/root.cl and its parts, embedded by the build. */
extern const char clbt_test_embedded_source[];
extern const size_t clbt_test_embedded_source_length;

/* Builds the embedded test program with options; its build log into log. */
static cl_int build_embedded(const char *options, char *log, size_t size) {
  cl_int error = CL_SUCCESS;
  const char *text = clbt_test_embedded_source;
  cl_context context = clbt_device_context(clbt_test_device());
  cl_device_id id = clbt_device_id(clbt_test_device());
  cl_program program = clCreateProgramWithSource(
      context, 1, &text, &clbt_test_embedded_source_length, &error);
  clbt_assert_ok(error);
  cl_int built = clBuildProgram(program, 1, &id, options, NULL, NULL);
  clbt_assert_ok(clGetProgramBuildInfo(program, id, CL_PROGRAM_BUILD_LOG,
                                       size, log, NULL));
  clReleaseProgram(program);
  return built;
}

/*
 * The embedding (cmake/embed_source.cmake) puts each part where it is
 * first included and marks every stretch with its file and line: an error
 * in an included part names that part's line, one in the root after its
 * includes the root's own line. A part included twice is embedded once,
 * or the program would define its function twice.
 */
START_TEST(embedded_parts_keep_their_files_and_lines) {
  static char log[16384];
  ck_assert_int_eq(build_embedded("", log, sizeof log), CL_SUCCESS);
  static const char *const breaks[][3] = {
      {"-DBREAK_PART", "part.cl", "BROKEN_PART"},
      {"-DBREAK_ROOT", "root.cl", "BROKEN_ROOT"}};
  for (size_t i = 0; i < 2; ++i) {
    char path[64], where[96];
    snprintf(path, sizeof path, "tests/device/embedded/%s", breaks[i][1]);
    snprintf(where, sizeof where, "%s:%d:", path,
             first_line_of(path, breaks[i][2]));
    ck_assert_int_eq(build_embedded(breaks[i][0], log, sizeof log),
                     CL_BUILD_PROGRAM_FAILURE);
    ck_assert_msg(strstr(log, where), "%s: no '%s' in: %s", breaks[i][0],
                  where, log);
  }
}
END_TEST

/*
 * The build checks clbt's own defines itself, for a compiler that takes
 * an option in a form clbt_device_set_build_options does not see: such an
 * option, here written into the device's settings behind the setter's
 * back, fails the build, naming the macro, and builds nothing. Without the
 * check the pad id of the first became slot 0 and the block size of the
 * second 32.
 */
START_TEST(build_refuses_options_that_define_clbt_macros) {
  static const char *const options[][2] = {
      {"-DCLBT_PAD_SLOT_ID=0", "CLBT_PAD_SLOT_ID is clbt's own"},
      {"-DCLBT_GROUP_0=32,1,1,0,1,1,0", "CLBT_GROUP_0 is clbt's own"}};
  clbt_table_config config = config_of(16, 0, 0);
  for (size_t i = 0; i < 2; ++i) {
    clbt_device *device = fresh_device();
    snprintf(device->build_options, sizeof device->build_options, "%s",
             options[i][0]);
    clbt_table *table = NULL;
    clbt_assert_fails(clbt_table_create(device, &config, &table),
                      CLBT_CL_BUILD_PROGRAM_FAILURE, options[i][1]);
    ck_assert_ptr_null(table);
    ck_assert_uint_eq(clbt_device_program_count(device), 0);
    clbt_device_release(device);
  }
}
END_TEST

/* Each program's options can be read back, newest first. */
START_TEST(program_options_are_listed) {
  clbt_device *device = fresh_device();
  clbt_table_config sixteen = config_of(16, 0, 0);
  clbt_table_config thirty_two = config_of(32, 0, 0);
  clbt_assert_ok(clbt_table_prepare(device, &sixteen));
  clbt_assert_ok(clbt_table_prepare(device, &thirty_two));
  char options[1024];
  clbt_assert_ok(clbt_device_program_options(device, 0, options, sizeof options));
  ck_assert_ptr_nonnull(strstr(options, "-DCLBT_GROUP_0=32,"));
  ck_assert_ptr_null(strstr(options, "-DCLBT_GROUP_0=16,"));
  clbt_assert_ok(clbt_device_program_options(device, 1, options, sizeof options));
  ck_assert_ptr_nonnull(strstr(options, "-DCLBT_GROUP_0=16,"));
  ck_assert_ptr_null(strstr(options, "-DCLBT_GROUP_0=32,"));
  clbt_assert_fails(clbt_device_program_options(device, 2, options,
                                                sizeof options),
                    CLBT_INVALID_ARGUMENT,
                    "index 2 is not below the device's 2 programs");
  char small[8] = "kept";
  clbt_assert_fails(clbt_device_program_options(device, 0, small, sizeof small),
                    CLBT_BUFFER_TOO_SMALL, "size is 8 bytes; the options need");
  ck_assert_str_eq(small, "kept");
  clbt_assert_fails(clbt_device_program_options(device, 0, NULL, 8),
                    CLBT_NULL_ARGUMENT, "buf is NULL");
  clbt_assert_fails(clbt_device_program_options(NULL, 0, options, 8),
                    CLBT_NULL_ARGUMENT, "device is NULL");
  clbt_device_release(device);
}
END_TEST

/* Prepares `count` groups of block size 16 on a fresh device; returns it. */
static clbt_device *prepare_groups(uint32_t count) {
  clbt_group_config groups[CLBT_MAX_LAUNCH_GROUPS + 1];
  for (uint32_t g = 0; g < count; ++g)
    groups[g] = (clbt_group_config){.block_size = 16, .max_num_blocks = 2};
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = count, .groups = groups};
  clbt_device *device = fresh_device();
  clbt_assert_ok(clbt_multi_table_prepare(device, &config));
  return device;
}

/*
 * CLBT_MAX_LAUNCH_GROUPS token-mapping groups share one launch and so one
 * program; one group more needs a second launch, with a one-group program.
 */
START_TEST(one_program_per_launch) {
  char options[CLBT_PROGRAM_OPTIONS_SIZE], groups_option[32];
  clbt_device *device = prepare_groups(CLBT_MAX_LAUNCH_GROUPS);
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  clbt_device_release(device);
  device = prepare_groups(CLBT_MAX_LAUNCH_GROUPS + 1);
  ck_assert_uint_eq(clbt_device_program_count(device), 2);
  clbt_assert_ok(clbt_device_program_options(device, 0, options, sizeof options));
  ck_assert_ptr_nonnull(strstr(options, "-DCLBT_NUM_GROUPS=1 "));
  clbt_assert_ok(clbt_device_program_options(device, 1, options, sizeof options));
  snprintf(groups_option, sizeof groups_option, "-DCLBT_NUM_GROUPS=%d ",
           CLBT_MAX_LAUNCH_GROUPS);
  ck_assert_ptr_nonnull(strstr(options, groups_option));
  clbt_device_release(device);
}
END_TEST

/*
 * The longest options a table asks for reach the compiler and the key
 * whole: eight token-mapping groups whose five numbers take ten digits
 * each (blocks of 4294967295 tokens in kernel blocks of 1, so 4294967295
 * kernel blocks a block; 4294967295 CP ranks, this one 4294967294; an
 * interleave of 4294967295 / 3 = 1431655765, which divides the block),
 * the most requests a copy of query_start_loc can take (65535), and the
 * longest build options a device keeps. Such a table could not be
 * allocated, but its programs can be prepared. The static checks in
 * launch.c and program.c keep CLBT__SPECIFIC_OPTIONS_SIZE and
 * CLBT_PROGRAM_OPTIONS_SIZE above these lengths; a bound below them would
 * cut the last group's constants (the key's end) or the device's options.
 * On PoCL clbt's own options take 693 bytes here (one record size; a GPU's
 * three add about 50).
 */
START_TEST(the_longest_options_are_kept_whole) {
  enum { GROUPS = CLBT_MAX_LAUNCH_GROUPS };
  clbt_group_config groups[GROUPS];
  for (int g = 0; g < GROUPS; ++g)
    groups[g] = (clbt_group_config){.block_size = 4294967295u,
                                    .kernel_block_size = 1,
                                    .max_num_blocks = 1};
  const clbt_multi_table_config config = {
      .struct_size = sizeof(clbt_multi_table_config),
      .max_num_reqs = 65535,
      .max_num_batched_tokens = 16,
      .num_groups = GROUPS,
      .groups = groups,
      .cp_world_size = 4294967295u,
      .cp_rank = 4294967294u,
      .cp_interleave_size = 1431655765u,
      .zero_gathered_tails = 1,
      .exact_widths = 1};
  char build_options[CLBT_BUILD_OPTIONS_SIZE];
  int prefix = snprintf(build_options, sizeof build_options, "-DTEST_LONG=");
  memset(build_options + prefix, 'x', sizeof build_options - 1 - prefix);
  build_options[sizeof build_options - 1] = '\0';
  clbt_device *device = fresh_device();
  clbt_assert_ok(clbt_device_set_build_options(device, build_options));
  clbt_assert_ok(clbt_multi_table_prepare(device, &config));
  ck_assert_uint_eq(clbt_device_program_count(device), 1);
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  clbt_assert_ok(clbt_device_program_options(device, 0, options,
                                             sizeof options));
  /* Every group's constants, in order, then the device's options. */
  const char *at = strstr(options, " -DCLBT_NUM_GROUPS=8 ");
  ck_assert_ptr_nonnull(at);
  for (int g = 0; g < GROUPS; ++g) {
    char group[96];
    snprintf(group, sizeof group,
             " -DCLBT_GROUP_%d=4294967295,4294967295,4294967295,4294967294,"
             "1431655765,1,1",
             g);
    at = strstr(at, group);
    ck_assert_msg(at != NULL, "group %d's constants are not whole in '%s'", g,
                  options);
    at += strlen(group);
  }
  char tail[CLBT_BUILD_OPTIONS_SIZE + 1];
  snprintf(tail, sizeof tail, " %s", build_options);
  ck_assert_str_eq(at, tail);
  clbt_device_release(device);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("program");
  TCase *tc = tcase_create("program");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, tables_share_a_specialisation);
  tcase_add_test(tc, prepare_builds_what_a_none_table_needs);
  tcase_add_test(tc, build_failure_reports_the_log);
  tcase_add_test(tc, a_build_error_names_its_file_and_line);
  tcase_add_test(tc, embedded_parts_keep_their_files_and_lines);
  tcase_add_test(tc, build_refuses_options_that_define_clbt_macros);
  tcase_add_test(tc, program_options_are_listed);
  tcase_add_test(tc, one_program_per_launch);
  tcase_add_test(tc, the_longest_options_are_kept_whole);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
