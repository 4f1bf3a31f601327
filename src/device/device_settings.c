/*
 * A device's settings: the build options it appends to clbt's own and the
 * directory of its on-disk program cache. The environment gives each new
 * handle its defaults, read once when the handle is made, so that a later
 * setenv cannot race a build; the host changes them per device through the
 * API. They are guarded by the device's programs_lock, which a build holds
 * from the moment it reads them until the program is in the device's list.
 */
#include "device/device_settings.h"

#include "base/status.h"
#include "device/handle.h"
#include "device/program.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef enum clbt__setting {
  CLBT__BUILD_OPTIONS,
  CLBT__CACHE_DIR,
  CLBT__NUM_SETTINGS
} clbt__setting;

static const struct {
  const char *variable; /* the environment's default */
  const char *argument; /* the setter's parameter, for messages */
  const char *noun;     /* what the getter's message calls it */
  size_t size;          /* bytes, with the NUL */
  const char *bound;    /* the constant that says so */
} settings[] = {
    [CLBT__BUILD_OPTIONS] = {"CLBT_BUILD_OPTIONS", "options",
                             "build option string", CLBT_BUILD_OPTIONS_SIZE,
                             "CLBT_BUILD_OPTIONS_SIZE"},
    [CLBT__CACHE_DIR] = {"CLBT_CACHE_DIR", "directory", "cache directory",
                         CLBT_CACHE_DIR_SIZE, "CLBT_CACHE_DIR_SIZE"},
};

static char *field(clbt_device *device, clbt__setting which) {
  return which == CLBT__BUILD_OPTIONS ? device->build_options
                                      : device->cache_dir;
}

/* The prefix of the macros clbt's kernels and host agree on (cl/contract.h,
   src/engine/launch.c): clbt's alone to define. */
#define RESERVED_PREFIX "CLBT_"

/* Characters a compiler's option parser may drop or treat as word breaks. */
static bool is_quote(char c) { return c == '"' || c == '\'' || c == '\\'; }

static bool starts_word(const char *options, const char *at) {
  return at == options || isspace((unsigned char)at[-1]) || is_quote(at[-1]);
}

/* The longest name an option is read for: no kernel name is near it. */
#define NAME_SIZE 128

/*
 * The name the option at `at` ("-D" or "-U") defines or undefines, into
 * name: its identifier characters after any spaces and quotes, quotes
 * among them skipped rather than parsed ("-D CLBT_X", "'-DCLBT_X=1'",
 * "-D\"CL\"BT_X" all name CLBT_X), so that no quoting a compiler accepts
 * hides a name; "" for none.
 */
static void option_name(const char *at, char name[NAME_SIZE]) {
  const char *n = at + 2;
  size_t length = 0;
  while (isspace((unsigned char)*n) || is_quote(*n)) ++n;
  for (; isalnum((unsigned char)*n) || *n == '_' || is_quote(*n); ++n)
    if (!is_quote(*n) && length + 1 < NAME_SIZE) name[length++] = *n;
  name[length] = '\0';
}

/*
 * Why a build option may not define or undefine a name, or NULL when it
 * may. clbt's own macros would break the contract between its host code
 * and its kernels ("-DCLBT_PAD_SLOT_ID=0" makes every pad a real KV slot);
 * a name the kernels use would change what they compute
 * ("-Dmin(a,b)=(a)" changes every bound a kernel takes the min of); a
 * name the compiler reserves is its own (its predefined macros, its
 * builtins' internals).
 */
static const char *refusal(const char *name) {
  size_t length = strlen(name);
  if (strncmp(name, RESERVED_PREFIX, strlen(RESERVED_PREFIX)) == 0)
    return "macros named " RESERVED_PREFIX "* are clbt's own (the contract "
           "between its host code and its kernels)";
  if (clbt__kernels_use(name, length))
    return "clbt's kernels use that name (defined, a kernel would compute "
           "other than its host code expects)";
  if (name[0] == '_' && (name[1] == '_' || isupper((unsigned char)name[1])))
    return "names that begin with __ or with _ and a capital letter are the "
           "OpenCL C compiler's";
  return NULL;
}

/*
 * Build options may not define or undefine a name refusal() names. The
 * build refuses clbt's own macros too (src/device/program.c), in whatever
 * form a compiler takes them; this says so before any build, naming the
 * option's name.
 */
static clbt_status check_options(const char *options, const char *setting) {
  if (!options) return CLBT_SUCCESS;
  for (const char *at = options; (at = strchr(at, '-')) != NULL; ++at) {
    if ((at[1] != 'D' && at[1] != 'U') || !starts_word(options, at)) continue;
    char name[NAME_SIZE];
    option_name(at, name);
    const char *why = *name ? refusal(name) : NULL;
    if (why)
      return clbt__fail(CLBT_INVALID_ARGUMENT,
                        "%s %s %.64s: %s; build options may not define or "
                        "undefine them",
                        setting, at[1] == 'D' ? "defines" : "undefines", name,
                        why);
  }
  return CLBT_SUCCESS;
}

/* Checks a value (NULL: none) for a setting; name says where it came from. */
static clbt_status check(clbt__setting which, const char *value,
                         const char *name) {
  size_t length = value ? strlen(value) : 0;
  if (length >= settings[which].size)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s is %zu characters; at most %zu (%s - 1)", name,
                      length, settings[which].size - 1, settings[which].bound);
  return which == CLBT__BUILD_OPTIONS ? check_options(value, name)
                                      : CLBT_SUCCESS;
}

/* Stores a checked value; the caller holds the lock or owns the device. */
static void store(clbt_device *device, clbt__setting which,
                  const char *value) {
  size_t length = value ? strlen(value) : 0;
  memcpy(field(device, which), value ? value : "", length);
  field(device, which)[length] = '\0';
}

clbt_status clbt__device_settings_init(clbt_device *device) {
  for (int which = 0; which < CLBT__NUM_SETTINGS; ++which) {
    const char *value = getenv(settings[which].variable);
    clbt_status status =
        check((clbt__setting)which, value, settings[which].variable);
    if (status) return status;
    store(device, (clbt__setting)which, value);
  }
  return CLBT_SUCCESS;
}

static clbt_status set(clbt_device *device, clbt__setting which,
                       const char *value) {
  if (!device) return clbt__fail(CLBT_NULL_ARGUMENT, "device is NULL");
  clbt_status status = check(which, value, settings[which].argument);
  if (!status) status = clbt__device_lock(device);
  if (status) return status;
  store(device, which, value);
  mtx_unlock(&device->programs_lock);
  return CLBT_SUCCESS;
}

static clbt_status get(clbt_device *device, clbt__setting which, char *buf,
                       size_t size) {
  if (!device || !buf)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      device ? "buf" : "device");
  clbt_status status = clbt__device_lock(device);
  if (status) return status;
  const char *value = field(device, which);
  size_t length = strlen(value);
  if (length >= size)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "size is %zu bytes; the %s needs %zu", size,
                        settings[which].noun, length + 1);
  else
    memcpy(buf, value, length + 1);
  mtx_unlock(&device->programs_lock);
  return status;
}

clbt_status clbt_device_set_build_options(clbt_device *device,
                                          const char *options) {
  return set(device, CLBT__BUILD_OPTIONS, options);
}

clbt_status clbt_device_build_options(clbt_device *device, char *buf,
                                      size_t size) {
  return get(device, CLBT__BUILD_OPTIONS, buf, size);
}

clbt_status clbt_device_set_cache_dir(clbt_device *device,
                                      const char *directory) {
  return set(device, CLBT__CACHE_DIR, directory);
}

clbt_status clbt_device_cache_dir(clbt_device *device, char *buf,
                                  size_t size) {
  return get(device, CLBT__CACHE_DIR, buf, size);
}
