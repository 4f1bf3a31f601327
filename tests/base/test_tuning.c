/*
 * The tuning table (src/base/tuning.c): the work-group size a row gives a
 * kernel, and a CPU's work-groups for a count of items, worked by hand
 * from the rows' numbers (256 items a GPU work-group; 32768 items a CPU
 * work-group, whose work-groups are one work-item each).
 */
#include "clbt_test.h"

#include "base/tuning.h"

#include <stdlib.h>

static const clbt__tuning *cpu_row(void) {
  return clbt__tuning_for(CL_DEVICE_TYPE_CPU);
}

static const clbt__tuning *gpu_row(void) {
  return clbt__tuning_for(CL_DEVICE_TYPE_GPU);
}

START_TEST(a_kernels_work_group_size) {
  /* the GPU row's 256, bounded by the kernel's limit, a power of two */
  ck_assert_uint_eq(clbt__tuning_local_size(gpu_row(), 1024), 256);
  ck_assert_uint_eq(clbt__tuning_local_size(gpu_row(), 256), 256);
  ck_assert_uint_eq(clbt__tuning_local_size(gpu_row(), 200), 128);
  ck_assert_uint_eq(clbt__tuning_local_size(gpu_row(), 1), 1);
  /* a CPU's code: one work-item a work-group, whatever the kernel allows */
  ck_assert_uint_eq(clbt__tuning_local_size(cpu_row(), 1024), 1);
}
END_TEST

START_TEST(a_cpus_work_groups) {
  /* one per 32768 items, at least one, at most one per compute unit */
  ck_assert_uint_eq(clbt__tuning_cpu_groups(cpu_row(), 4, 0), 1);
  ck_assert_uint_eq(clbt__tuning_cpu_groups(cpu_row(), 4, 32767), 1);
  ck_assert_uint_eq(clbt__tuning_cpu_groups(cpu_row(), 4, 65536), 2);
  ck_assert_uint_eq(clbt__tuning_cpu_groups(cpu_row(), 4, 1u << 20), 4);
}
END_TEST

/*
 * The GPU row spreads no work by items a work-group
 * (cpu_items_per_group 0): asked anyway, it answers one work-group, as
 * for too few items, instead of dividing by its 0.
 */
START_TEST(a_row_without_cpu_items_per_group_gives_one) {
  ck_assert_uint_eq(gpu_row()->cpu_items_per_group, 0);
  ck_assert_uint_eq(clbt__tuning_cpu_groups(gpu_row(), 4, 0), 1);
  ck_assert_uint_eq(clbt__tuning_cpu_groups(gpu_row(), 4, 1u << 20), 1);
}
END_TEST

int main(void) {
  /* The rows themselves, not one CLBT_TUNING would force on every type. */
  unsetenv("CLBT_TUNING");
  Suite *suite = suite_create("tuning");
  TCase *tc = tcase_create("tuning");
  tcase_add_test(tc, a_kernels_work_group_size);
  tcase_add_test(tc, a_cpus_work_groups);
  tcase_add_test(tc, a_row_without_cpu_items_per_group_gives_one);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
