/*
 * Programs: each kernel source built once per (device, build options) and
 * kept in the device handle, so that tables sharing a specialisation share
 * the program.
 */
#include "device/program.h"

#include "base/log.h"
#include "base/status.h"
#include "device/binary_cache.h"
#include "device/handle.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The kernels in cl/, embedded at build time (cmake/embed_source.cmake):
   each program's text, its length and its root part's path. */
extern const char clbt__step_source[], clbt__step_source_file[];
extern const size_t clbt__step_source_length;
extern const char clbt__kv_cache_source[], clbt__kv_cache_source_file[];
extern const size_t clbt__kv_cache_source_length;
extern const char clbt__attention_source[], clbt__attention_source_file[];
extern const size_t clbt__attention_source_length;

static const struct {
  const char *text;
  const size_t *length;
  const char *file;
} sources[] = {
    [CLBT__SOURCE_STEP] = {clbt__step_source, &clbt__step_source_length,
                           clbt__step_source_file},
    [CLBT__SOURCE_KV_CACHE] = {clbt__kv_cache_source,
                               &clbt__kv_cache_source_length,
                               clbt__kv_cache_source_file},
    [CLBT__SOURCE_ATTENTION] = {clbt__attention_source,
                                &clbt__attention_source_length,
                                clbt__attention_source_file},
};

/* The end of the comment or string literal that starts at text (one left
   open runs to end), or text itself when none starts there. */
static const char *skip_comment_or_string(const char *text, const char *end) {
  if (text + 1 < end && text[0] == '/' && text[1] == '/') {
    const char *line = memchr(text, '\n', (size_t)(end - text));
    return line ? line : end;
  }
  if (text + 1 < end && text[0] == '/' && text[1] == '*') {
    for (const char *c = text + 2; c + 1 < end; ++c)
      if (c[0] == '*' && c[1] == '/') return c + 2;
    return end;
  }
  if (text[0] != '"') return text;
  for (const char *c = text + 1; c < end; ++c) {
    if (*c == '\\') ++c;
    else if (*c == '"') return c + 1;
  }
  return end;
}

static bool is_identifier_char(char c) {
  return isalnum((unsigned char)c) || c == '_';
}

/* Whether one source's code has the identifier; a number ("1e5", "0x1Fu")
   is read whole, so its letters are no identifier. */
static bool source_uses(const char *text, size_t size, const char *name,
                        size_t length) {
  const char *end = text + size;
  for (const char *c = text; c < end;) {
    const char *after = skip_comment_or_string(c, end);
    if (after != c) {
      c = after;
    } else if (isdigit((unsigned char)*c)) {
      while (c < end && (is_identifier_char(*c) || *c == '.')) ++c;
    } else if (is_identifier_char(*c)) {
      const char *start = c;
      while (c < end && is_identifier_char(*c)) ++c;
      if ((size_t)(c - start) == length && memcmp(start, name, length) == 0)
        return true;
    } else {
      ++c;
    }
  }
  return false;
}

bool clbt__kernels_use(const char *name, size_t length) {
  for (size_t s = 0; s < sizeof sources / sizeof sources[0]; ++s)
    if (source_uses(sources[s].text, *sources[s].length, name, length))
      return true;
  return false;
}

struct clbt__program_entry {
  clbt__source source;              /* the cache key: source and options */
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  cl_program program;
  clbt__program_entry *next;
};

/* clbt's options for every build. */
#define CLBT__COMMON_OPTIONS "-cl-std=CL1.2"

/* Each part's NUL stands for the space after it, the last one's for the NUL. */
_Static_assert(sizeof CLBT__COMMON_OPTIONS + CLBT__SPECIFIC_OPTIONS_SIZE +
                       CLBT_BUILD_OPTIONS_SIZE <=
                   CLBT_PROGRAM_OPTIONS_SIZE,
               "CLBT_PROGRAM_OPTIONS_SIZE holds every program's options");

/*
 * A program's key, and how clbt_device_program_options reports it: clbt's
 * common options, the source's defines, then the device's build options.
 */
static void format_options(const char *specific, const char *extra,
                           char *options) {
  snprintf(options, CLBT_PROGRAM_OPTIONS_SIZE, "%s %s%s%s",
           CLBT__COMMON_OPTIONS, specific, *extra ? " " : "", extra);
}

/* What the compiler gets as options: clbt's common ones and the device's. */
static void format_compiler_options(const char *extra, char *options) {
  snprintf(options, CLBT_PROGRAM_OPTIONS_SIZE, "%s%s%s", CLBT__COMMON_OPTIONS,
           *extra ? " " : "", extra);
}

/*
 * clbt's defines for a source, its "-DNAME=VALUE" words, reach the compiler
 * as #define lines in front of the source, not as options: on the command
 * line the device's build options would come later, where a -D wins and a
 * -U undoes. Each line refuses a name that something else defined first,
 * with an #error that names it, so a kernel cannot be built with another
 * pad id or other group constants than the host's, whatever form of option
 * a compiler takes. The source's own #line markers then number the build
 * log's lines by its parts' (cmake/embed_source.cmake). Writes at most
 * size bytes of it, with its NUL, to out (NULL: none) and returns its
 * length, as snprintf does.
 */
static size_t format_prelude(const char *defines, char *out, size_t size) {
  size_t used = 0;
  for (const char *word = defines + strspn(defines, " "); *word;
       word += strcspn(word, " "), word += strspn(word, " ")) {
    const char *name = word + 2; /* after "-D" */
    int name_length = (int)strcspn(name, "= ");
    const char *value = name[name_length] == '=' ? name + name_length + 1
                                                 : "1";
    used += (size_t)snprintf(
        out ? out + used : NULL, out ? size - used : 0,
        "#ifdef %.*s\n#error \"%.*s is clbt's own; a build option defined "
        "it\"\n#endif\n#define %.*s %.*s\n",
        name_length, name, name_length, name, name_length, name,
        (int)strcspn(value, " "), value);
  }
  if (out && size > used) out[used] = '\0'; /* no defines */
  return used;
}

/* Records a build failure with as much of the build log as the message
   holds. */
static clbt_status fail_with_log(cl_program program, cl_device_id device,
                                 const char *file, const char *options) {
  size_t log_size = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                            &log_size) == CL_SUCCESS)
    log = malloc(log_size + 1);
  if (log && clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG,
                                   log_size, log, NULL) != CL_SUCCESS)
    log_size = 0;
  if (log) log[log_size] = '\0';
  clbt__fail(CLBT_CL_BUILD_PROGRAM_FAILURE,
             "building %s with '%s' failed; build log:\n%s", file, options,
             log ? log : "(unavailable)");
  free(log);
  return CLBT_CL_BUILD_PROGRAM_FAILURE;
}

static clbt_status build_from_source(const clbt_device *device,
                                     clbt__source source_id,
                                     const char *defines, const char *options,
                                     const char *key, cl_program *out) {
  clbt_status status = CLBT_SUCCESS;
  cl_int error = CL_SUCCESS;
  cl_program program = NULL;
  size_t prelude_length = format_prelude(defines, NULL, 0);
  char *prelude = malloc(prelude_length + 1);
  if (!prelude)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY, "no memory for a program");
  format_prelude(defines, prelude, prelude_length + 1);
  const char *texts[] = {prelude, sources[source_id].text};
  const size_t lengths[] = {prelude_length, *sources[source_id].length};
  program = clCreateProgramWithSource(device->context, 2, texts, lengths,
                                      &error);
  CLBT__CL_CHECK(error, "clCreateProgramWithSource", status, fail);
  error = clBuildProgram(program, 1, &device->id, options, NULL, NULL);
  if (error == CL_BUILD_PROGRAM_FAILURE) {
    status = fail_with_log(program, device->id, sources[source_id].file, key);
    goto fail;
  }
  CLBT__CL_CHECK(error, "clBuildProgram", status, fail);
  free(prelude);
  *out = program;
  return CLBT_SUCCESS;
fail:
  free(prelude);
  if (program) clReleaseProgram(program);
  return status;
}

static double milliseconds_since(const struct timespec *start) {
  struct timespec now;
  timespec_get(&now, TIME_UTC);
  return (double)(now.tv_sec - start->tv_sec) * 1e3 +
         (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

/*
 * Takes a program from the on-disk cache, else builds it from source (and
 * stores it there), and says at debug level which, and how long it took.
 * key is its options as format_options writes them, with the defines.
 */
static clbt_status build(const clbt_device *device, clbt__source source_id,
                         const char *defines, const char *key,
                         cl_program *out) {
  const char *extra = device->build_options;
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  format_compiler_options(extra, options);
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  clbt__cache_entry entry;
  bool cached = clbt__binary_cache_locate(device, sources[source_id].text,
                                          *sources[source_id].length, key,
                                          &entry);
  cl_program program =
      cached ? clbt__binary_cache_load(device, &entry, options) : NULL;
  bool from_cache = program != NULL;
  clbt_status status = from_cache
                           ? CLBT_SUCCESS
                           : build_from_source(device, source_id, defines,
                                               options, key, &program);
  if (status != CLBT_SUCCESS) return status;
  if (cached && !from_cache) clbt__binary_cache_store(program, &entry);
  clbt__log(CLBT_LOG_DEBUG,
            "built a program from %s%s in %.1f ms; %s, options '%s'%s%s%s",
            from_cache ? "cache entry " : "source",
            from_cache ? entry.path : "", milliseconds_since(&start),
            sources[source_id].file, key,
            *extra ? " (the device's build options '" : "", extra,
            *extra ? "' appended)" : "");
  *out = program;
  return CLBT_SUCCESS;
}

static cl_program find(const clbt_device *device, clbt__source source,
                       const char *options) {
  for (const clbt__program_entry *e = device->programs; e; e = e->next)
    if (e->source == source && strcmp(e->options, options) == 0)
      return e->program;
  return NULL;
}

clbt_status clbt__program_get(clbt_device *device, clbt__source source,
                              const char *specific_options,
                              cl_program *program) {
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  /* Held across the build so that two threads never build the same
     program, and so that the device's settings stay as the build read
     them. */
  clbt_status status = clbt__device_lock(device);
  if (status) return status;
  format_options(specific_options, device->build_options, options);
  *program = find(device, source, options);
  if (!*program) {
    clbt__program_entry *entry = malloc(sizeof *entry);
    if (!entry)
      status = clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                          "no memory for a program");
    else
      status = build(device, source, specific_options, options,
                     &entry->program);
    if (status == CLBT_SUCCESS) {
      entry->source = source;
      memcpy(entry->options, options, sizeof options);
      entry->next = device->programs;
      device->programs = entry;
      *program = entry->program;
    } else {
      free(entry);
    }
  }
  mtx_unlock(&device->programs_lock);
  return status;
}

size_t clbt_device_program_count(clbt_device *device) {
  size_t count = 0;
  /* It cannot fail: a lock that does says 0, with the error logged. */
  if (!device || clbt__device_lock(device)) return 0;
  for (const clbt__program_entry *e = device->programs; e; e = e->next) ++count;
  mtx_unlock(&device->programs_lock);
  return count;
}

clbt_status clbt_device_program_options(clbt_device *device, size_t index,
                                        char *buf, size_t size) {
  if (!device || !buf)
    return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL",
                      device ? "buf" : "device");
  clbt_status status = clbt__device_lock(device);
  if (status) return status;
  size_t count = 0;
  const clbt__program_entry *entry = device->programs;
  for (; entry && count < index; entry = entry->next) ++count;
  if (!entry) {
    /* The walk stopped at the end, so count is the number of programs. */
    status = clbt__fail(CLBT_INVALID_ARGUMENT,
                        "index %zu is not below the device's %zu programs",
                        index, count);
  } else if (strlen(entry->options) >= size) {
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "size is %zu bytes; the options need %zu", size,
                        strlen(entry->options) + 1);
  } else {
    memcpy(buf, entry->options, strlen(entry->options) + 1);
  }
  mtx_unlock(&device->programs_lock);
  return status;
}

void clbt__programs_release(clbt_device *device) {
  clbt__program_entry *entry = device->programs;
  while (entry) {
    clbt__program_entry *next = entry->next;
    clReleaseProgram(entry->program);
    free(entry);
    entry = next;
  }
  device->programs = NULL;
}
