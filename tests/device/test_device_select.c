/* Device selection (src/device/device_select.c): CLBT_DEVICE and selectors. */
#include "clbt_test.h"

#include <stdlib.h>

/* What the tests expect, read with plain OpenCL calls. */
typedef struct machine {
  cl_platform_id pocl_platform;
  cl_device_id pocl_device;
  char pocl_device_name[256];
  cl_device_id first_gpu, first_device;
} machine;

static machine survey(void) {
  machine m = {0};
  cl_platform_id platforms[16];
  cl_uint num_platforms = 0;
  ck_assert_int_eq(clGetPlatformIDs(16, platforms, &num_platforms), CL_SUCCESS);
  for (cl_uint p = 0; p < num_platforms && p < 16; ++p) {
    char name[256] = "";
    clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    cl_device_id devices[16];
    cl_uint count = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &count))
      continue;
    for (cl_uint d = 0; d < count && d < 16; ++d) {
      cl_device_type type = 0;
      clGetDeviceInfo(devices[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
      if (!m.first_device) m.first_device = devices[d];
      if (!m.first_gpu && (type & CL_DEVICE_TYPE_GPU)) m.first_gpu = devices[d];
      if (!m.pocl_device && strstr(name, "Portable Computing Language") &&
          (type & CL_DEVICE_TYPE_CPU)) {
        m.pocl_platform = platforms[p];
        m.pocl_device = devices[d];
        clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof m.pocl_device_name - 1,
                        m.pocl_device_name, NULL);
      }
    }
  }
  ck_assert_msg(m.pocl_device != NULL, "these tests need PoCL's CPU device");
  return m;
}

static cl_device_id open_id(const char *selector) {
  clbt_device *device = NULL;
  clbt_assert_ok(clbt_device_open(selector, &device));
  cl_device_id id = clbt_device_id(device);
  clbt_device_release(device);
  return id;
}

/* The forms the issue gives, matched on this machine's PoCL device. */
START_TEST(selector_forms) {
  machine m = survey();
  ck_assert_ptr_eq(open_id("portable:cpu"), m.pocl_device);
  ck_assert_ptr_eq(open_id("PORTABLE:CPU"), m.pocl_device);
  ck_assert_ptr_eq(open_id("portable"), m.pocl_device);
  ck_assert_ptr_eq(open_id("portable::0"), m.pocl_device);
  ck_assert_ptr_eq(open_id("portable:all:0"), m.pocl_device);
  ck_assert_ptr_eq(open_id("portable:cpu:0"), m.pocl_device);
  /* the device field as a substring of the device's own name */
  char by_name[64];
  snprintf(by_name, sizeof by_name, "portable:cpu:%.6s", m.pocl_device_name);
  ck_assert_ptr_eq(open_id(by_name), m.pocl_device);
}
END_TEST

START_TEST(index_forms_follow_platform_order) {
  machine m = survey();
  cl_platform_id platforms[16];
  cl_uint count = 0;
  ck_assert_int_eq(clGetPlatformIDs(16, platforms, &count), CL_SUCCESS);
  cl_uint pocl_index = 0;
  while (platforms[pocl_index] != m.pocl_platform) ++pocl_index;
  char selector[32];
  snprintf(selector, sizeof selector, "%u:cpu", (unsigned)pocl_index);
  ck_assert_ptr_eq(open_id(selector), m.pocl_device);
  snprintf(selector, sizeof selector, "%u", (unsigned)pocl_index);
  ck_assert_ptr_eq(open_id(selector), m.pocl_device);
}
END_TEST

START_TEST(malformed_selectors) {
  clbt_device *device = NULL;
  clbt_assert_fails(clbt_device_open("a:cpu:0:1", &device), CLBT_INVALID_SELECTOR,
                    "'a:cpu:0:1': more than three fields");
  clbt_assert_fails(clbt_device_open("portable:gpus", &device),
                    CLBT_INVALID_SELECTOR,
                    "type 'gpus' is not cpu, gpu, accelerator or all");
  char long_field[300];
  memset(long_field, 'x', sizeof long_field - 1);
  long_field[sizeof long_field - 1] = '\0';
  clbt_assert_fails(clbt_device_open(long_field, &device), CLBT_INVALID_SELECTOR,
                    "longer than 127 characters");
  ck_assert_ptr_null(device);
}
END_TEST

/* No silent fallback: the message quotes the value and lists the devices. */
START_TEST(selectors_matching_nothing) {
  machine m = survey();
  static const char *const selectors[] = {"nosuchplatform", "portable:gpu",
                                          "portable:cpu:9", "portable:cpu:zzzz",
                                          "99", ":accelerator:nosuch"};
  for (size_t i = 0; i < sizeof selectors / sizeof selectors[0]; ++i) {
    clbt_device *device = NULL;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "selector='%s' matches no device",
             selectors[i]);
    clbt_assert_fails(clbt_device_open(selectors[i], &device),
                      CLBT_NO_MATCHING_DEVICE, quoted);
    clbt_assert_fails(clbt_device_open(selectors[i], &device),
                      CLBT_NO_MATCHING_DEVICE, m.pocl_device_name);
    clbt_assert_fails(clbt_device_open(selectors[i], &device),
                      CLBT_NO_MATCHING_DEVICE, "portable:cpu:0");
    ck_assert_ptr_null(device);
  }
}
END_TEST

/* NULL reads CLBT_DEVICE; unset or empty takes the first GPU, else the
   first device. */
START_TEST(environment_and_default) {
  machine m = survey();
  char *saved = getenv("CLBT_DEVICE") ? strdup(getenv("CLBT_DEVICE")) : NULL;
  setenv("CLBT_DEVICE", "portable:cpu", 1);
  ck_assert_ptr_eq(open_id(NULL), m.pocl_device);
  setenv("CLBT_DEVICE", "nosuch:gpu", 1);
  clbt_device *device = NULL;
  clbt_assert_fails(clbt_device_open(NULL, &device), CLBT_NO_MATCHING_DEVICE,
                    "CLBT_DEVICE='nosuch:gpu' matches no device");
  setenv("CLBT_DEVICE", "cpu:gpu:x:y", 1);
  clbt_assert_fails(clbt_device_open(NULL, &device), CLBT_INVALID_SELECTOR,
                    "CLBT_DEVICE='cpu:gpu:x:y'");
  cl_device_id expected = m.first_gpu ? m.first_gpu : m.first_device;
  unsetenv("CLBT_DEVICE");
  ck_assert_ptr_eq(open_id(NULL), expected);
  setenv("CLBT_DEVICE", "", 1);
  ck_assert_ptr_eq(open_id(NULL), expected);
  ck_assert_ptr_eq(open_id(""), expected);
  if (saved) setenv("CLBT_DEVICE", saved, 1);
  free(saved);
}
END_TEST

/* The selector clbt prints for a device opens that device again. */
START_TEST(selector_round_trip) {
  machine m = survey();
  char selector[CLBT_SELECTOR_SIZE];
  clbt_assert_ok(clbt_device_selector(m.pocl_device, selector, sizeof selector));
  ck_assert_msg(strncmp(selector, "portable:cpu:", 13) == 0, "%s", selector);
  ck_assert_ptr_eq(open_id(selector), m.pocl_device);
  char tiny[4];
  clbt_assert_fails(clbt_device_selector(m.pocl_device, tiny, sizeof tiny),
                    CLBT_BUFFER_TOO_SMALL, "size is 4 bytes");
  clbt_assert_fails(clbt_device_selector(NULL, selector, sizeof selector),
                    CLBT_NULL_ARGUMENT, "device");
  clbt_assert_fails(clbt_device_selector(m.pocl_device, NULL, 1),
                    CLBT_NULL_ARGUMENT, "buf");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("device_select");
  TCase *tc = tcase_create("device_select");
  tcase_add_test(tc, selector_forms);
  tcase_add_test(tc, index_forms_follow_platform_order);
  tcase_add_test(tc, malformed_selectors);
  tcase_add_test(tc, selectors_matching_nothing);
  tcase_add_test(tc, environment_and_default);
  tcase_add_test(tc, selector_round_trip);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
