/*
 * Device selection: the CLBT_DEVICE selector [platform][:[type][:device]],
 * matched against every device of every installed platform.
 */
#include "device/device_select.h"

#include "base/log.h"
#include "base/status.h"
#include "device/driver_lock.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longer names than these make clGet*Info fail, as no real device has. */
#define CLBT__NAME_SIZE 1024
#define CLBT__FIELD_SIZE 128
/* A selector names a platform by at most 32 characters of its first word. */
#define CLBT__PLATFORM_WORD_SIZE 33

/* The longest selector: the word, the longest type and a 32-bit index. */
_Static_assert(CLBT__PLATFORM_WORD_SIZE - 1 + sizeof ":accelerator:" - 1 +
                       sizeof "4294967295" <=
                   CLBT_SELECTOR_SIZE,
               "CLBT_SELECTOR_SIZE holds every selector selector_of writes");

/* One device of the machine, in platform then device order. */
typedef struct clbt__device_entry {
  cl_platform_id platform;
  cl_device_id device;
  cl_uint platform_index;
  cl_device_type type;
  char platform_name[CLBT__NAME_SIZE];
  char device_name[CLBT__NAME_SIZE];
} clbt__device_entry;

typedef struct clbt__device_list {
  clbt__device_entry *entries;
  size_t count;
} clbt__device_list;

/* A parsed selector; an empty field matches everything. */
typedef struct clbt__selector {
  char platform[CLBT__FIELD_SIZE];
  cl_device_type type;
  char device[CLBT__FIELD_SIZE];
} clbt__selector;

static bool all_digits(const char *text) {
  if (*text == '\0') return false;
  for (; *text; ++text)
    if (!isdigit((unsigned char)*text)) return false;
  return true;
}

static bool contains_ignoring_case(const char *text, const char *part) {
  size_t part_length = strlen(part);
  for (; *text; ++text) {
    size_t i = 0;
    while (i < part_length && text[i] &&
           tolower((unsigned char)text[i]) == tolower((unsigned char)part[i]))
      ++i;
    if (i == part_length) return true;
  }
  return part_length == 0;
}

static const char *type_word(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "all";
}

static bool parse_type(const char *word, cl_device_type *type) {
  static const struct {
    const char *word;
    cl_device_type type;
  } types[] = {{"", CL_DEVICE_TYPE_ALL},
               {"all", CL_DEVICE_TYPE_ALL},
               {"cpu", CL_DEVICE_TYPE_CPU},
               {"gpu", CL_DEVICE_TYPE_GPU},
               {"accelerator", CL_DEVICE_TYPE_ACCELERATOR}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    if (strlen(word) == strlen(types[i].word) &&
        contains_ignoring_case(word, types[i].word)) {
      *type = types[i].type;
      return true;
    }
  }
  return false;
}

/* Copies the text up to the next ':' into field; returns what follows. */
static const char *take_field(const char *text, char *field, bool *fits) {
  size_t length = strcspn(text, ":");
  *fits = length < CLBT__FIELD_SIZE;
  if (*fits) {
    memcpy(field, text, length);
    field[length] = '\0';
  }
  return text[length] == ':' ? text + length + 1 : NULL;
}

static clbt_status parse_selector(const char *text, const char *source,
                                  clbt__selector *selector) {
  char type_text[CLBT__FIELD_SIZE] = "";
  bool fits = true;
  memset(selector, 0, sizeof *selector);
  const char *rest = take_field(text, selector->platform, &fits);
  if (fits && rest) rest = take_field(rest, type_text, &fits);
  if (fits && rest) rest = take_field(rest, selector->device, &fits);
  if (!fits)
    return clbt__fail(CLBT_INVALID_SELECTOR,
                      "%s='%s': a field is longer than %d characters", source,
                      text, CLBT__FIELD_SIZE - 1);
  if (rest)
    return clbt__fail(CLBT_INVALID_SELECTOR,
                      "%s='%s': more than three fields; the form is "
                      "[platform][:[type][:device]]",
                      source, text);
  if (!parse_type(type_text, &selector->type))
    return clbt__fail(CLBT_INVALID_SELECTOR,
                      "%s='%s': type '%s' is not cpu, gpu, accelerator or all",
                      source, text, type_text);
  return CLBT_SUCCESS;
}

static clbt_status fill_entry(clbt__device_entry *entry) {
  clbt_status status = CLBT_SUCCESS;
  CLBT__CL_TRY(clGetPlatformInfo(entry->platform, CL_PLATFORM_NAME,
                                 sizeof entry->platform_name,
                                 entry->platform_name, NULL),
               status, done);
  CLBT__CL_TRY(clGetDeviceInfo(entry->device, CL_DEVICE_NAME,
                               sizeof entry->device_name, entry->device_name,
                               NULL),
               status, done);
  CLBT__CL_TRY(clGetDeviceInfo(entry->device, CL_DEVICE_TYPE,
                               sizeof entry->type, &entry->type, NULL),
               status, done);
  entry->platform_name[CLBT__NAME_SIZE - 1] = '\0';
  entry->device_name[CLBT__NAME_SIZE - 1] = '\0';
done:
  return status;
}

/* Appends a platform's devices to the list (which has room for them). */
static clbt_status list_platform(cl_platform_id platform, cl_uint index,
                                 cl_uint num_devices, clbt__device_list *list) {
  clbt_status status = CLBT_SUCCESS;
  cl_device_id *devices = malloc(num_devices * sizeof *devices);
  if (!devices)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for %u devices",
                      (unsigned)num_devices);
  CLBT__CL_TRY(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, num_devices,
                              devices, NULL),
               status, done);
  for (cl_uint d = 0; d < num_devices && status == CLBT_SUCCESS; ++d) {
    clbt__device_entry *entry = &list->entries[list->count++];
    entry->platform = platform;
    entry->platform_index = index;
    entry->device = devices[d];
    status = fill_entry(entry);
  }
done:
  free(devices);
  return status;
}

static cl_uint count_devices(cl_platform_id platform) {
  cl_uint count = 0;
  /* A platform without devices answers CL_DEVICE_NOT_FOUND: count 0. */
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count) !=
      CL_SUCCESS)
    return 0;
  return count;
}

static clbt_status list_devices(clbt__device_list *list) {
  clbt_status status = CLBT_SUCCESS;
  cl_platform_id *platforms = NULL;
  cl_uint num_platforms = 0;
  list->entries = NULL;
  list->count = 0;
  cl_int error = clGetPlatformIDs(0, NULL, &num_platforms);
  if (error == CLBT_CL_PLATFORM_NOT_FOUND_KHR || (!error && num_platforms == 0))
    return clbt__fail(CLBT_CL_PLATFORM_NOT_FOUND_KHR,
                      "no OpenCL platform is installed (no ICD under "
                      "/etc/OpenCL/vendors?)");
  CLBT__CL_CHECK(error, "clGetPlatformIDs", status, done);
  platforms = malloc(num_platforms * sizeof *platforms);
  if (!platforms) {
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for platforms");
    goto done;
  }
  CLBT__CL_TRY(clGetPlatformIDs(num_platforms, platforms, NULL), status, done);
  size_t total = 0;
  for (cl_uint p = 0; p < num_platforms; ++p)
    total += count_devices(platforms[p]);
  list->entries = calloc(total ? total : 1, sizeof *list->entries);
  if (!list->entries) {
    status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for devices");
    goto done;
  }
  for (cl_uint p = 0; p < num_platforms && status == CLBT_SUCCESS; ++p) {
    cl_uint num_devices = count_devices(platforms[p]);
    /* The second count may exceed the first (a failed first count, a
       device that appeared): list no more than the entries made room for. */
    if (num_devices > total - list->count)
      num_devices = (cl_uint)(total - list->count);
    if (num_devices) status = list_platform(platforms[p], p, num_devices, list);
  }
done:
  free(platforms);
  if (status != CLBT_SUCCESS) {
    free(list->entries);
    list->entries = NULL;
    list->count = 0;
  }
  return status;
}

static bool platform_matches(const char *field, const clbt__device_entry *e) {
  if (all_digits(field)) return e->platform_index == strtoul(field, NULL, 10);
  return contains_ignoring_case(e->platform_name, field);
}

/* The entry a selector picks, or NULL. */
static const clbt__device_entry *match(const clbt__device_list *list,
                                       const clbt__selector *selector) {
  bool by_index = all_digits(selector->device);
  unsigned long wanted = by_index ? strtoul(selector->device, NULL, 10) : 0;
  unsigned long seen = 0;
  for (size_t i = 0; i < list->count; ++i) {
    const clbt__device_entry *e = &list->entries[i];
    if (!platform_matches(selector->platform, e) || !(e->type & selector->type))
      continue;
    if (by_index ? seen++ == wanted
                 : contains_ignoring_case(e->device_name, selector->device))
      return e;
  }
  return NULL;
}

static const clbt__device_entry *default_entry(const clbt__device_list *list) {
  for (size_t i = 0; i < list->count; ++i)
    if (list->entries[i].type & CL_DEVICE_TYPE_GPU) return &list->entries[i];
  return list->count ? &list->entries[0] : NULL;
}

/* The first word of the platform name, lowercased: "portable", "nvidia". */
static void platform_word(const char *platform_name, char *word, size_t size) {
  size_t length = 0;
  while (platform_name[length] &&
         isalnum((unsigned char)platform_name[length]) && length + 1 < size) {
    word[length] = (char)tolower((unsigned char)platform_name[length]);
    ++length;
  }
  word[length] = '\0';
}

/*
 * The selector that picks entry: the platform's first word, its type and
 * its index among the devices that word and type match, which picks it even
 * when the word matches several platforms. CLBT_SELECTOR_SIZE bytes hold it.
 */
static void selector_of(const clbt__device_list *list,
                        const clbt__device_entry *entry, char *text,
                        size_t size) {
  clbt__selector selector;
  memset(&selector, 0, sizeof selector);
  parse_type(type_word(entry->type), &selector.type);
  platform_word(entry->platform_name, selector.platform,
                CLBT__PLATFORM_WORD_SIZE);
  if (selector.platform[0] == '\0' || all_digits(selector.platform))
    snprintf(selector.platform, CLBT__PLATFORM_WORD_SIZE, "%u",
             (unsigned)entry->platform_index);
  unsigned index = 0;
  for (size_t i = 0; i < list->count && &list->entries[i] != entry; ++i)
    if (platform_matches(selector.platform, &list->entries[i]) &&
        (list->entries[i].type & selector.type))
      ++index;
  snprintf(text, size, "%.*s:%s:%u", CLBT__PLATFORM_WORD_SIZE - 1,
           selector.platform, type_word(entry->type), index);
}

/* Writes "selector  platform / device" lines for an error message. */
static void describe_devices(const clbt__device_list *list, char *text,
                             size_t size) {
  size_t used = 0;
  text[0] = '\0';
  if (list->count == 0) snprintf(text, size, " (none)");
  for (size_t i = 0; i < list->count && used < size; ++i) {
    char selector[CLBT_SELECTOR_SIZE];
    selector_of(list, &list->entries[i], selector, sizeof selector);
    int written = snprintf(text + used, size - used, "\n  %-20s %s / %s",
                           selector, list->entries[i].platform_name,
                           list->entries[i].device_name);
    if (written < 0) break;
    used += (size_t)written;
  }
}

/* Says at info level which device was chosen and by what rule. */
static void log_choice(const clbt__device_list *list,
                       const clbt__device_entry *entry, const char *source,
                       const char *selector_text) {
  if (!clbt__log_enabled(CLBT_LOG_INFO)) return;
  char selector[CLBT_SELECTOR_SIZE], reason[CLBT__FIELD_SIZE * 4];
  selector_of(list, entry, selector, sizeof selector);
  if (selector_text && selector_text[0])
    snprintf(reason, sizeof reason, "%s='%s'", source, selector_text);
  else
    snprintf(reason, sizeof reason, "the default rule (%s %s): %s", source,
             selector_text ? "empty" : "unset",
             entry->type & CL_DEVICE_TYPE_GPU ? "the first GPU"
                                              : "no GPU, so the first device");
  clbt__log(CLBT_LOG_INFO, "device %s (%s / %s) chosen by %s", selector,
            entry->platform_name, entry->device_name, reason);
}

clbt_status clbt__select_device(const char *selector_text, const char *source,
                                cl_platform_id *platform,
                                cl_device_id *device) {
  clbt__device_list list;
  clbt__selector selector;
  bool use_default = selector_text == NULL || selector_text[0] == '\0';
  clbt_status status = CLBT_SUCCESS;
  if (!use_default) status = parse_selector(selector_text, source, &selector);
  if (status == CLBT_SUCCESS) status = list_devices(&list);
  if (status != CLBT_SUCCESS) return status;

  const clbt__device_entry *entry =
      use_default ? default_entry(&list) : match(&list, &selector);
  if (entry) {
    *platform = entry->platform;
    *device = entry->device;
    log_choice(&list, entry, source, selector_text);
  } else {
    char devices[4096];
    describe_devices(&list, devices, sizeof devices);
    status = clbt__fail(CLBT_NO_MATCHING_DEVICE,
                        "%s='%s' matches no device; the devices are:%s", source,
                        use_default ? "" : selector_text, devices);
  }
  free(list.entries);
  return status;
}

clbt_status clbt_device_selector(cl_device_id device, char *buf, size_t size) {
  if (!device || !buf)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      device ? "buf" : "device");
  clbt__device_list list;
  clbt_status status = clbt__driver_lock();
  if (status != CLBT_SUCCESS) return status;
  status = list_devices(&list);
  clbt__driver_unlock();
  if (status != CLBT_SUCCESS) return status;
  const clbt__device_entry *entry = NULL;
  for (size_t i = 0; i < list.count && !entry; ++i)
    if (list.entries[i].device == device) entry = &list.entries[i];
  if (!entry) {
    status = clbt__fail(CLBT_NO_MATCHING_DEVICE,
                        "device %p is not a device of an installed platform",
                        (void *)device);
  } else {
    char selector[CLBT_SELECTOR_SIZE];
    selector_of(&list, entry, selector, sizeof selector);
    if (strlen(selector) >= size)
      status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                          "size is %zu bytes; selector '%s' needs %zu", size,
                          selector, strlen(selector) + 1);
    else
      memcpy(buf, selector, strlen(selector) + 1);
  }
  free(list.entries);
  return status;
}
