/*
 * What the single-process examples (serving_loop.c, persistent_loop.c)
 * share: failing loudly, blocking buffer transfers on clbt's queue, and
 * their command line. Header-only, so that an example still builds from
 * its own .c file and scheduler.c. Define EXAMPLE_NAME, the program's
 * name that messages start with, before including it.
 */
#ifndef CLBT_EXAMPLE_H
#define CLBT_EXAMPLE_H

#include <clbt/clbt.h>

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

/* [--steps N] [--seed N] [--verbose]; false (after a usage line on
   stderr) for anything else. */
static inline bool parse_arguments(int argc, char **argv, uint32_t *steps,
                                   uint64_t *seed, bool *verbose) {
  bool ok = true;
  for (int i = 1; ok && i < argc; ++i) {
    char none = '\0', *end = &none;
    if (strcmp(argv[i], "--verbose") == 0)
      *verbose = true;
    else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
      ok = (*steps = (uint32_t)strtoul(argv[++i], &end, 10)) != 0;
    else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0)
      *seed = strtoull(argv[++i], &end, 10);
    else
      ok = false;
    ok = ok && *end == '\0';
  }
  if (!ok)
    fprintf(stderr,
            "usage: " EXAMPLE_NAME " [--steps N] [--seed N] [--verbose]\n");
  return ok;
}

#endif /* CLBT_EXAMPLE_H */
