/*
 * What the single-process examples (serving_loop.c, persistent_loop.c,
 * attention_inputs.c, paged_attention.c) share: failing loudly, blocking
 * buffer transfers on clbt's queue, and their command line (--help
 * answered, anything unknown refused with status 2). Header-only, so that an example still builds from
 * its own .c file and scheduler.c. Define EXAMPLE_NAME, the program's
 * name that messages start with, before including it.
 */
#ifndef CLBT_EXAMPLE_H
#define CLBT_EXAMPLE_H

#include <clbt/clbt.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ends the program with a message when a call failed. */
static inline void check(clbt_status status, const char *what) {
  if (status == CLBT_SUCCESS) return;
  fprintf(stderr, EXAMPLE_NAME ": %s failed: %s: %s\n", what,
          clbt_status_name(status), clbt_last_error());
  exit(EXIT_FAILURE);
}

static inline void check_cl(cl_int error, const char *what) {
  check(error == CL_SUCCESS ? CLBT_SUCCESS : (clbt_status)error, what);
}

static inline cl_mem create_buffer(clbt_device *device, size_t bytes) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(clbt_device_context(device),
                                 CL_MEM_READ_WRITE, bytes, NULL, &error);
  check_cl(error, "clCreateBuffer");
  return buffer;
}

static inline void write_buffer(clbt_device *device, cl_mem buffer,
                                size_t bytes, const void *data) {
  if (bytes == 0) return;
  check_cl(clEnqueueWriteBuffer(clbt_device_queue(device), buffer, CL_TRUE, 0,
                                bytes, data, 0, NULL, NULL),
           "clEnqueueWriteBuffer");
}

static inline void read_buffer(clbt_device *device, cl_mem buffer,
                               size_t bytes, void *data) {
  if (bytes == 0) return;
  check_cl(clEnqueueReadBuffer(clbt_device_queue(device), buffer, CL_TRUE, 0,
                               bytes, data, 0, NULL, NULL),
           "clEnqueueReadBuffer");
}

/* --help or -h anywhere: prints the usage and the options to stdout and
   ends the program with status 0, as a command-line tool does. */
static inline void answer_help(int argc, char **argv, const char *usage,
                               const char *options) {
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: " EXAMPLE_NAME "%s\n%s", usage, options);
      exit(EXIT_SUCCESS);
    }
}

#define EXAMPLE_DEVICE_LINE "CLBT_DEVICE selects the device.\n"

/* For an example that takes no arguments: answers --help; false (after
   naming the argument and the usage on stderr) for any argument. */
static inline bool parse_no_arguments(int argc, char **argv) {
  answer_help(argc, argv, "", EXAMPLE_DEVICE_LINE);
  if (argc < 2) return true;
  fprintf(stderr,
          EXAMPLE_NAME ": bad argument '%s'\nusage: " EXAMPLE_NAME "\n",
          argv[1]);
  return false;
}

#define EXAMPLE_LOOP_USAGE " [--steps N] [--seed N] [--verbose]"
#define EXAMPLE_LOOP_OPTIONS                                                \
  "  --steps N  how many steps to run (at least 1)\n"                       \
  "  --seed N   the seed of the example's random choices\n"                 \
  "  --verbose  a line per step\n" EXAMPLE_DEVICE_LINE

/* A whole decimal number from min to max, no sign. */
static inline bool parse_count(const char *text, uint64_t min, uint64_t max,
                               uint64_t *value) {
  char *end = NULL;
  if (text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno || *end != '\0' || parsed < min || parsed > max) return false;
  *value = parsed;
  return true;
}

/* [--steps N] [--seed N] [--verbose], answering --help; false (after
   naming the argument and the usage on stderr) for anything else. */
static inline bool parse_arguments(int argc, char **argv, uint32_t *steps,
                                   uint64_t *seed, bool *verbose) {
  answer_help(argc, argv, EXAMPLE_LOOP_USAGE, EXAMPLE_LOOP_OPTIONS);
  for (int i = 1; i < argc; ++i) {
    uint64_t count = 0;
    bool ok = true;
    if (strcmp(argv[i], "--verbose") == 0) {
      *verbose = true;
    } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
      ok = parse_count(argv[++i], 1, UINT32_MAX, &count);
      if (ok) *steps = (uint32_t)count;
    } else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0) {
      ok = parse_count(argv[++i], 0, UINT64_MAX, seed);
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr,
              EXAMPLE_NAME ": bad argument '%s'\nusage: " EXAMPLE_NAME
                           EXAMPLE_LOOP_USAGE "\n",
              argv[i]);
      return false;
    }
  }
  return true;
}

#endif /* CLBT_EXAMPLE_H */
