/*
 * The drivers clbt refuses (src/device/known_drivers.c): Mesa 22.3's
 * rusticl on llvmpipe, by the names and driver version it reports
 * (CL_PLATFORM_NAME "rusticl", CL_DEVICE_NAME "llvmpipe (LLVM 15.0.6, 256
 * bits)", CL_DRIVER_VERSION "22.3.6" on Debian 12), and no other device.
 * The refusal itself, on the real driver, is docs/reliability.md's.
 */
#include "clbt_test.h"
#include "device/known_drivers.h"

static const char *llvmpipe = "llvmpipe (LLVM 15.0.6, 256 bits)";

START_TEST(mesa_22_3_rusticl_on_llvmpipe_is_refused) {
  const char *fault = clbt__known_driver_fault("rusticl", llvmpipe, "22.3.6");
  ck_assert_ptr_nonnull(fault);
  ck_assert_ptr_nonnull(strstr(fault, "Mesa 22.3's rusticl on llvmpipe"));
  ck_assert_ptr_nonnull(strstr(fault, "by-value argument"));
  /* Earlier releases are taken as failing too. */
  ck_assert_ptr_nonnull(clbt__known_driver_fault("rusticl", llvmpipe, "22.3.0"));
  ck_assert_ptr_nonnull(clbt__known_driver_fault("rusticl", llvmpipe, "22.2.5"));
  ck_assert_ptr_nonnull(clbt__known_driver_fault("rusticl", llvmpipe, "21.0"));
}
END_TEST

START_TEST(other_drivers_and_versions_pass) {
  /* Later Mesa releases, untested, are let through. */
  ck_assert_ptr_null(clbt__known_driver_fault("rusticl", llvmpipe, "22.4.0"));
  ck_assert_ptr_null(clbt__known_driver_fault("rusticl", llvmpipe, "23.0.4"));
  ck_assert_ptr_null(clbt__known_driver_fault("rusticl", llvmpipe, "24.2"));
  /* rusticl on a GPU, whose compiler is not llvmpipe's. */
  ck_assert_ptr_null(clbt__known_driver_fault(
      "rusticl", "AMD Radeon RX 6800 (radeonsi, navi21, LLVM 15.0.6)",
      "22.3.6"));
  /* Mesa's other OpenCL platform, and other platforms with a 22.x driver. */
  ck_assert_ptr_null(clbt__known_driver_fault("Clover", llvmpipe, "22.3.6"));
  ck_assert_ptr_null(clbt__known_driver_fault(
      "Portable Computing Language", "pthread-skylake-avx512", "3.1+debian"));
  ck_assert_ptr_null(clbt__known_driver_fault("Oclgrind", "Oclgrind Simulator",
                                              "Oclgrind 21.10"));
  ck_assert_ptr_null(clbt__known_driver_fault("NVIDIA CUDA", "NVIDIA H200",
                                              "580.159.04"));
  /* A version that is no number says nothing. */
  ck_assert_ptr_null(clbt__known_driver_fault("rusticl", llvmpipe, ""));
  ck_assert_ptr_null(clbt__known_driver_fault("rusticl", llvmpipe, "git"));
}
END_TEST

/* The test device is none of them: it opens. */
START_TEST(the_test_device_opens) { ck_assert_ptr_nonnull(clbt_test_device()); }
END_TEST

int main(void) {
  Suite *suite = suite_create("known_drivers");
  TCase *tc = tcase_create("known_drivers");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, mesa_22_3_rusticl_on_llvmpipe_is_refused);
  tcase_add_test(tc, other_drivers_and_versions_pass);
  tcase_add_test(tc, the_test_device_opens);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
