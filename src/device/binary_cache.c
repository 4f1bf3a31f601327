/*
 * The on-disk program cache (a device's cache directory, opt-in; the
 * environment's default is CLBT_CACHE_DIR): program binaries
 * keyed by a hash of everything that shapes them, so that a new process
 * can skip the compiler. An entry is written to a temporary file and
 * renamed, so that a reader sees a whole entry or none. It carries the
 * binary's size and checksum, checked before the binary reaches the driver
 * (PoCL 3.1 crashes on a truncated binary, and a crash can leave a short
 * file behind). An unusable entry is deleted and the program rebuilt.
 */
#define _POSIX_C_SOURCE 200809L

#include "device/binary_cache.h"

#include "base/log.h"
#include "device/handle.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Changes whenever the layout of an entry or the contents of the key do. */
#define CLBT__CACHE_FORMAT 1
/* Far above any binary of ours; a larger size means a damaged header. */
#define CLBT__CACHE_MAX_BINARY ((uint64_t)64 << 20)
#define CLBT__CACHE_TEXT_SIZE 1024
/* Room for a path and what went wrong with it. */
#define CLBT__PROBLEM_SIZE (CLBT__CACHE_PATH_SIZE + 256)

/* An entry's name after its directory. */
#define CLBT__ENTRY_NAME_FORMAT "/%016" PRIx64 ".clbin"
_Static_assert(CLBT_CACHE_DIR_SIZE - 1 + sizeof "/0123456789abcdef.clbin" <=
                   CLBT__CACHE_PATH_SIZE,
               "every entry's path fits in CLBT__CACHE_PATH_SIZE");

static const char cache_magic[8] = {'C', 'L', 'B', 'T', 'B', 'I', 'N', '\0'};

/* What precedes the binary in an entry. */
typedef struct clbt__cache_header {
  char magic[8];
  uint64_t format;
  uint64_t key;
  uint64_t binary_size;
  uint64_t checksum; /* of the binary */
} clbt__cache_header;

_Static_assert(sizeof(clbt__cache_header) == 40, "the header has no padding");

typedef enum clbt__entry_state {
  CLBT__ENTRY_MISSING,
  CLBT__ENTRY_WHOLE,
  CLBT__ENTRY_BAD,     /* ours but unusable: deleted */
  CLBT__ENTRY_FOREIGN  /* not a regular file: left alone */
} clbt__entry_state;

/* 64-bit FNV-1a, for both the key and the checksum. */
#define CLBT__FNV_OFFSET UINT64_C(0xcbf29ce484222325)
static uint64_t fnv1a(uint64_t hash, const void *data, size_t size) {
  const unsigned char *bytes = data;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= UINT64_C(0x100000001b3);
  }
  return hash;
}

/* Hashes a field after its length, so that fields cannot run together. */
static uint64_t hash_field(uint64_t hash, const void *data, size_t size) {
  uint64_t length = size;
  return fnv1a(fnv1a(hash, &length, sizeof length), data, size);
}

static uint64_t hash_text(uint64_t hash, const char *text) {
  return hash_field(hash, text, strlen(text));
}

/* The device's name, driver version and platform version, NUL-terminated. */
static bool read_device_texts(cl_device_id device,
                              char texts[3][CLBT__CACHE_TEXT_SIZE]) {
  cl_platform_id platform;
  for (int i = 0; i < 3; ++i) texts[i][CLBT__CACHE_TEXT_SIZE - 1] = '\0';
  return clGetDeviceInfo(device, CL_DEVICE_NAME, CLBT__CACHE_TEXT_SIZE - 1,
                         texts[0], NULL) == CL_SUCCESS &&
         clGetDeviceInfo(device, CL_DRIVER_VERSION, CLBT__CACHE_TEXT_SIZE - 1,
                         texts[1], NULL) == CL_SUCCESS &&
         clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform,
                         &platform, NULL) == CL_SUCCESS &&
         clGetPlatformInfo(platform, CL_PLATFORM_VERSION,
                           CLBT__CACHE_TEXT_SIZE - 1, texts[2],
                           NULL) == CL_SUCCESS;
}

bool clbt__binary_cache_locate(const clbt_device *device, const char *source,
                               size_t length, const char *options,
                               clbt__cache_entry *entry) {
  const char *directory = device->cache_dir;
  if (!*directory) return false;
  char texts[3][CLBT__CACHE_TEXT_SIZE];
  if (!read_device_texts(device->id, texts)) {
    clbt__log(CLBT_LOG_WARN, "program cache: the device's name or versions "
                             "are unreadable; building without the cache");
    return false;
  }
  uint64_t format = CLBT__CACHE_FORMAT;
  uint64_t key = hash_field(CLBT__FNV_OFFSET, &format, sizeof format);
  key = hash_field(key, source, length);
  key = hash_text(key, options);
  for (int i = 0; i < 3; ++i) key = hash_text(key, texts[i]);
  snprintf(entry->path, sizeof entry->path, "%s" CLBT__ENTRY_NAME_FORMAT,
           directory, key);
  entry->key = key;
  return true;
}

/* Checks a header against the entry it should head. */
static bool check_header(const clbt__cache_header *header,
                         const clbt__cache_entry *entry, char *problem) {
  if (memcmp(header->magic, cache_magic, sizeof cache_magic) != 0)
    snprintf(problem, CLBT__PROBLEM_SIZE, "not a clbt program cache entry");
  else if (header->format != CLBT__CACHE_FORMAT)
    snprintf(problem, CLBT__PROBLEM_SIZE, "format %" PRIu64 ", not %d",
             header->format, CLBT__CACHE_FORMAT);
  else if (header->key != entry->key)
    snprintf(problem, CLBT__PROBLEM_SIZE,
             "it holds key %016" PRIx64 ", not its name's", header->key);
  else if (header->binary_size == 0 ||
           header->binary_size > CLBT__CACHE_MAX_BINARY)
    snprintf(problem, CLBT__PROBLEM_SIZE, "binary size %" PRIu64
             " is outside 1..%" PRIu64, header->binary_size,
             CLBT__CACHE_MAX_BINARY);
  else
    return true;
  return false;
}

/*
 * Opens an entry for reading when it is a regular file. O_NONBLOCK keeps a
 * FIFO or device put in its place from blocking the open; such a thing is
 * not ours, so it is reported as foreign and left where it is.
 */
static FILE *open_entry(const clbt__cache_entry *entry,
                        clbt__entry_state *state, char *problem) {
  int descriptor = open(entry->path, O_RDONLY | O_NONBLOCK);
  struct stat info;
  *state = CLBT__ENTRY_BAD;
  if (descriptor < 0) {
    if (errno == ENOENT) *state = CLBT__ENTRY_MISSING;
    snprintf(problem, CLBT__PROBLEM_SIZE, "cannot open it: %s",
             strerror(errno));
    return NULL;
  }
  FILE *file = NULL;
  if (fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
    *state = CLBT__ENTRY_FOREIGN;
    snprintf(problem, CLBT__PROBLEM_SIZE, "not a regular file");
  } else if (!(file = fdopen(descriptor, "rb"))) {
    snprintf(problem, CLBT__PROBLEM_SIZE, "cannot open it: %s",
             strerror(errno));
  }
  if (!file) close(descriptor);
  return file;
}

/* Reads an entry's binary into *binary (malloc'd) once it checks out. */
static clbt__entry_state read_entry(const clbt__cache_entry *entry,
                                    unsigned char **binary, size_t *size,
                                    char *problem) {
  clbt__entry_state state = CLBT__ENTRY_BAD;
  FILE *file = open_entry(entry, &state, problem);
  if (!file) return state;
  clbt__cache_header header;
  if (fread(&header, sizeof header, 1, file) != 1) {
    snprintf(problem, CLBT__PROBLEM_SIZE, "shorter than its header");
  } else if (check_header(&header, entry, problem)) {
    *size = (size_t)header.binary_size;
    *binary = malloc(*size);
    if (!*binary)
      snprintf(problem, CLBT__PROBLEM_SIZE, "no memory for %zu bytes", *size);
    else if (fread(*binary, 1, *size, file) != *size)
      snprintf(problem, CLBT__PROBLEM_SIZE,
               "truncated: fewer than the %zu binary bytes its header says",
               *size);
    else if (fgetc(file) != EOF)
      snprintf(problem, CLBT__PROBLEM_SIZE,
               "longer than the %zu binary bytes its header says", *size);
    else if (fnv1a(CLBT__FNV_OFFSET, *binary, *size) != header.checksum)
      snprintf(problem, CLBT__PROBLEM_SIZE, "checksum mismatch");
    else
      state = CLBT__ENTRY_WHOLE;
  }
  fclose(file);
  return state;
}

static cl_program program_from_binary(const clbt_device *device,
                                      const unsigned char *binary, size_t size,
                                      const char *options, char *problem) {
  cl_int error = CL_SUCCESS, binary_status = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(
      device->context, 1, &device->id, &size, &binary, &binary_status, &error);
  if (error == CL_SUCCESS && binary_status == CL_SUCCESS)
    error = clBuildProgram(program, 1, &device->id, options, NULL, NULL);
  else if (error == CL_SUCCESS)
    error = binary_status;
  if (error == CL_SUCCESS) return program;
  snprintf(problem, CLBT__PROBLEM_SIZE, "the driver refused it: %s",
           clbt_status_name((clbt_status)error));
  if (program) clReleaseProgram(program);
  return NULL;
}

cl_program clbt__binary_cache_load(const clbt_device *device,
                                   const clbt__cache_entry *entry,
                                   const char *options) {
  char problem[CLBT__PROBLEM_SIZE] = "";
  unsigned char *binary = NULL;
  size_t size = 0;
  cl_program program = NULL;
  clbt__entry_state state = read_entry(entry, &binary, &size, problem);
  if (state == CLBT__ENTRY_WHOLE)
    program = program_from_binary(device, binary, size, options, problem);
  free(binary);
  if (state == CLBT__ENTRY_FOREIGN) {
    clbt__log(CLBT_LOG_WARN,
              "program cache entry %s is %s; ignoring it; building from "
              "source",
              entry->path, problem);
  } else if (state != CLBT__ENTRY_MISSING && !program) {
    bool deleted = remove(entry->path) == 0;
    clbt__log(CLBT_LOG_WARN,
              "program cache entry %s is unusable (%s); %s; building from "
              "source",
              entry->path, problem,
              deleted ? "deleted it" : "cannot delete it");
  }
  return program;
}

/* The binary of a program built for one device, malloc'd. */
static bool read_binary(cl_program program, unsigned char **binary,
                        size_t *size, char *problem) {
  cl_int error = clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES,
                                  sizeof *size, size, NULL);
  if (error == CL_SUCCESS &&
      (*size == 0 || (uint64_t)*size > CLBT__CACHE_MAX_BINARY)) {
    snprintf(problem, CLBT__PROBLEM_SIZE,
             "the driver gives a binary of %zu bytes", *size);
    return false;
  }
  if (error == CL_SUCCESS) {
    *binary = malloc(*size);
    if (!*binary) {
      snprintf(problem, CLBT__PROBLEM_SIZE, "no memory for %zu bytes", *size);
      return false;
    }
    /* One pointer per device of the program, and a program has one. */
    unsigned char *binaries[1] = {*binary};
    error = clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binaries,
                             binaries, NULL);
  }
  if (error == CL_SUCCESS) return true;
  snprintf(problem, CLBT__PROBLEM_SIZE, "clGetProgramInfo failed: %s",
           clbt_status_name((clbt_status)error));
  return false;
}

/* Creates the missing directories above path, as mkdir -p does. */
static bool make_parent_directories(const char *path, char *problem) {
  char partial[CLBT__CACHE_PATH_SIZE];
  for (const char *slash = strchr(path + 1, '/'); slash;
       slash = strchr(slash + 1, '/')) {
    size_t length = (size_t)(slash - path);
    memcpy(partial, path, length);
    partial[length] = '\0';
    /* Private by default: whoever can write here can choose our kernels. */
    if (mkdir(partial, 0700) != 0 && errno != EEXIST) {
      snprintf(problem, CLBT__PROBLEM_SIZE, "cannot create %s: %s", partial,
               strerror(errno));
      return false;
    }
  }
  return true;
}

static bool write_entry(const clbt__cache_entry *entry,
                        const unsigned char *binary, size_t size,
                        char *problem) {
  char temporary[CLBT__CACHE_PATH_SIZE + 8];
  snprintf(temporary, sizeof temporary, "%s.XXXXXX", entry->path);
  int descriptor = mkstemp(temporary);
  FILE *file = descriptor >= 0 ? fdopen(descriptor, "wb") : NULL;
  if (!file) {
    snprintf(problem, CLBT__PROBLEM_SIZE, "cannot create %s: %s", temporary,
             strerror(errno));
    if (descriptor >= 0) {
      close(descriptor);
      remove(temporary);
    }
    return false;
  }
  clbt__cache_header header = {.format = CLBT__CACHE_FORMAT,
                               .key = entry->key,
                               .binary_size = size,
                               .checksum = fnv1a(CLBT__FNV_OFFSET, binary,
                                                 size)};
  memcpy(header.magic, cache_magic, sizeof header.magic);
  bool written = fwrite(&header, sizeof header, 1, file) == 1 &&
                 fwrite(binary, 1, size, file) == size;
  written = fclose(file) == 0 && written;
  if (written && rename(temporary, entry->path) == 0) return true;
  snprintf(problem, CLBT__PROBLEM_SIZE, "cannot write %s: %s", temporary,
           strerror(errno));
  remove(temporary);
  return false;
}

void clbt__binary_cache_store(cl_program program,
                              const clbt__cache_entry *entry) {
  char problem[CLBT__PROBLEM_SIZE] = "";
  unsigned char *binary = NULL;
  size_t size = 0;
  if (read_binary(program, &binary, &size, problem) &&
      make_parent_directories(entry->path, problem) &&
      write_entry(entry, binary, size, problem))
    clbt__log(CLBT_LOG_DEBUG, "stored a %zu-byte program binary in %s", size,
              entry->path);
  else
    clbt__log(CLBT_LOG_WARN,
              "cannot store a program in the cache (%s); later runs will "
              "build it from source",
              problem);
  free(binary);
}
