/* Device handles: a context, a device and an in-order queue, shared by
   tables. */
#include "base/log.h"
#include "base/status.h"
#include "device/device_select.h"
#include "device/device_settings.h"
#include "device/driver_lock.h"
#include "device/handle.h"
#include "device/known_drivers.h"
#include "device/program.h"
#include "device/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refuses a device whose driver is known to fail on clbt's kernels. */
static clbt_status check_driver(cl_device_id id) {
  clbt_status status = CLBT_SUCCESS;
  cl_platform_id platform;
  char platform_name[256] = "", device_name[256] = "", driver[256] = "";
  CLBT__CL_TRY(clGetDeviceInfo(id, CL_DEVICE_PLATFORM, sizeof platform,
                               &platform, NULL),
               status, done);
  CLBT__CL_TRY(clGetPlatformInfo(platform, CL_PLATFORM_NAME,
                                 sizeof platform_name - 1, platform_name,
                                 NULL),
               status, done);
  CLBT__CL_TRY(clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof device_name - 1,
                               device_name, NULL),
               status, done);
  CLBT__CL_TRY(clGetDeviceInfo(id, CL_DRIVER_VERSION, sizeof driver - 1,
                               driver, NULL),
               status, done);
  const char *fault =
      clbt__known_driver_fault(platform_name, device_name, driver);
  if (fault)
    status = clbt__fail(CLBT_UNSUPPORTED_DEVICE,
                        "%s / %s, driver %s: %s (docs/reliability.md)",
                        platform_name, device_name, driver, fault);
done:
  return status;
}

/* Reads "OpenCL <major>.<minor> ..." from a device's CL_DEVICE_VERSION. */
static clbt_status check_support(cl_device_id id) {
  clbt_status status = CLBT_SUCCESS;
  char version[256] = "", profile[64] = "", extensions[8192] = "";
  CLBT__CL_TRY(clGetDeviceInfo(id, CL_DEVICE_VERSION, sizeof version - 1,
                               version, NULL),
               status, done);
  CLBT__CL_TRY(clGetDeviceInfo(id, CL_DEVICE_PROFILE, sizeof profile - 1,
                               profile, NULL),
               status, done);
  int major = 0, minor = 0;
  if (sscanf(version, "OpenCL %d.%d", &major, &minor) != 2 ||
      major * 10 + minor < 12) {
    status = clbt__fail(CLBT_UNSUPPORTED_DEVICE,
                        "device version '%s': clbt needs OpenCL 1.2 or later",
                        version);
    goto done;
  }
  /* Full-profile devices have 64-bit integers; embedded ones may not. */
  if (strcmp(profile, "EMBEDDED_PROFILE") == 0) {
    cl_int error = clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS,
                                   sizeof extensions - 1, extensions, NULL);
    if (error != CL_SUCCESS || !strstr(extensions, "cles_khr_int64"))
      status = clbt__fail(CLBT_UNSUPPORTED_DEVICE,
                          "embedded-profile device without cles_khr_int64: "
                          "the slot ids are 64-bit");
  }
done:
  return status;
}

static clbt_status read_properties(cl_device_id id,
                                   clbt__device_properties *properties) {
  cl_uint alignment_bits = 0;
  const struct {
    cl_device_info name;
    size_t size;
    void *value;
  } queries[] = {
      {CL_DEVICE_TYPE, sizeof properties->type, &properties->type},
      {CL_DEVICE_MAX_COMPUTE_UNITS, sizeof properties->compute_units,
       &properties->compute_units},
      {CL_DEVICE_LOCAL_MEM_SIZE, sizeof properties->local_mem_size,
       &properties->local_mem_size},
      {CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof alignment_bits, &alignment_bits},
      {CL_DEVICE_MAX_PARAMETER_SIZE, sizeof properties->max_parameter_size,
       &properties->max_parameter_size}};
  clbt_status status = CLBT_SUCCESS;
  for (size_t i = 0; i < sizeof queries / sizeof queries[0]; ++i)
    CLBT__CL_TRY(clGetDeviceInfo(id, queries[i].name, queries[i].size,
                                 queries[i].value, NULL),
                 status, done);
  /* Slots are int64: never less than 8 bytes apart. */
  properties->base_address_alignment =
      alignment_bits / 8 > 8 ? alignment_bits / 8 : 8;
done:
  return status;
}

/* Makes a handle that holds a new reference to each of the three objects. */
static clbt_status assemble(cl_context context, cl_device_id id,
                            cl_command_queue queue, clbt_device **out) {
  clbt__device_properties properties;
  clbt_status status = check_support(id);
  if (status == CLBT_SUCCESS) status = check_driver(id);
  if (status == CLBT_SUCCESS) status = read_properties(id, &properties);
  if (status != CLBT_SUCCESS) return status;

  clbt_device *device = calloc(1, sizeof *device);
  if (!device)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a device");
  if (mtx_init(&device->programs_lock, mtx_plain) != thrd_success) {
    free(device);
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "mtx_init failed");
  }
  status = clbt__device_settings_init(device);
  if (status) goto fail;
  status = clbt__watch_init(&device->watch);
  if (status) goto fail;
  CLBT__CL_TRY(clRetainContext(context), status, fail_watch);
  CLBT__CL_TRY(clRetainCommandQueue(queue), status, fail_context);
  CLBT__CL_TRY(clRetainDevice(id), status, fail_queue);
  atomic_init(&device->references, 1);
  device->context = context;
  device->id = id;
  device->queue = queue;
  device->properties = properties;
  *out = device;
  return CLBT_SUCCESS;

fail_queue:
  clReleaseCommandQueue(queue);
fail_context:
  clReleaseContext(context);
fail_watch:
  clbt__watch_free(&device->watch);
fail:
  mtx_destroy(&device->programs_lock);
  free(device);
  return status;
}

clbt_status clbt_device_open(const char *selector, clbt_device **out) {
  if (!out) return clbt__fail(CLBT_NULL_ARGUMENT, "out is NULL");
  const char *source = selector ? "selector" : "CLBT_DEVICE";
  if (!selector) selector = getenv("CLBT_DEVICE");

  cl_platform_id platform;
  cl_device_id id;
  cl_context context = NULL;
  cl_command_queue queue = NULL;
  clbt_status status = clbt__driver_lock();
  if (status != CLBT_SUCCESS) return status;
  status = clbt__select_device(selector, source, &platform, &id);
  if (status != CLBT_SUCCESS) goto done;

  cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  cl_int error = CL_SUCCESS;
  context = clCreateContext(properties, 1, &id, NULL, NULL, &error);
  CLBT__CL_CHECK(error, "clCreateContext", status, done);
  queue = clCreateCommandQueue(context, id, 0, &error);
  CLBT__CL_CHECK(error, "clCreateCommandQueue", status, done);
  status = assemble(context, id, queue, out);
done:
  /* assemble took references of its own. */
  if (queue) clReleaseCommandQueue(queue);
  if (context) clReleaseContext(context);
  clbt__driver_unlock();
  return status;
}

clbt_status clbt_device_wrap(cl_context context, cl_device_id id,
                             cl_command_queue queue, clbt_device **out) {
  if (!context || !id || !queue || !out)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      !context ? "context"
                      : !id    ? "device"
                      : !queue ? "queue"
                               : "out");
  clbt_status status = CLBT_SUCCESS;
  cl_context queue_context;
  cl_device_id queue_device;
  cl_command_queue_properties queue_properties;
  CLBT__CL_TRY(clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT,
                                     sizeof queue_context, &queue_context,
                                     NULL),
               status, done);
  CLBT__CL_TRY(clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE,
                                     sizeof queue_device, &queue_device, NULL),
               status, done);
  CLBT__CL_TRY(clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES,
                                     sizeof queue_properties,
                                     &queue_properties, NULL),
               status, done);
  if (queue_context != context || queue_device != id)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "queue belongs to another %s than the one given",
                      queue_context != context ? "context" : "device");
  /* clbt orders its commands by queue order alone. */
  if (queue_properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "queue executes out of order; clbt needs an in-order "
                      "queue");
  status = assemble(context, id, queue, out);
done:
  return status;
}

void clbt_device_release(clbt_device *device) {
  if (!device || atomic_fetch_sub(&device->references, 1) != 1) return;
  /* Watched commands may still be queued: they end before the queue goes. */
  clbt__watch_free(&device->watch);
  clbt__programs_release(device);
  /* Should the lock fail (which no platform we know does), the handle is
     freed all the same: a leak would be certain, the race only possible. */
  bool locked = clbt__driver_lock() == CLBT_SUCCESS;
  if (!locked)
    clbt__log(CLBT_LOG_ERROR, "%s; freeing the device's context without it",
              clbt_last_error());
  clReleaseCommandQueue(device->queue);
  clReleaseContext(device->context);
  clReleaseDevice(device->id);
  if (locked) clbt__driver_unlock();
  mtx_destroy(&device->programs_lock);
  free(device);
}

cl_context clbt_device_context(const clbt_device *device) {
  return device ? device->context : NULL;
}

cl_device_id clbt_device_id(const clbt_device *device) {
  return device ? device->id : NULL;
}

cl_command_queue clbt_device_queue(const clbt_device *device) {
  return device ? device->queue : NULL;
}
