/*
 * The arguments section of `clbt bench`: what a launch's argument list
 * costs the host, on kernels that do nothing, so that only the driver's
 * handling of their arguments differs from the empty kernel's. The step
 * kernel's list (cl/contract.h, one group) is the model, beside 0.5's
 * longer one: what each change the design could make to it (issue 18's
 * "next to try") would save, and whether a NULL buffer costs what a real
 * one does. Then issue 25's
 * questions: what a record by value costs from 64 words to the whole of
 * the device's argument space, set before every launch as a record that
 * carries a step's packet is, and whether a churning step's packet (about
 * 19 KiB at 1024 requests) is cheaper written to a buffer before the
 * launch or carried inside the launch by value.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

/* Sizes like the step's: a record head of 19 words and the packet the
   device's argument space leaves room for (512 words on the H200), a
   layout of one group, and for 0.5's list a local cache of 257
   query_start_loc entries. */
#define RECORD_HEAD_BYTES 76
#define MAX_PACKET_WORDS 512
#define SMALL_RECORD_BYTES 512
#define LAYOUT_BYTES 64
#define LOCAL_BYTES 1028
/* A churning step's packet at 1024 requests, 1 request in 64 replaced:
   16 new rows of 64 to 511 blocks, about 4,900 ids. */
#define PACKET_BYTES (19 * 1024)
#define WORDS(n) ((n) * 4)

/* One argument: the step's record (alone or with the layout in it), a
   by-value struct of bytes or of the whole argument space, a buffer (set
   or NULL) or a local array. */
typedef enum argument_kind {
  STEP_RECORD,
  STEP_RECORD_AND_LAYOUT,
  BY_VALUE,
  WHOLE_SPACE,
  BUFFER,
  NULL_BUFFER,
  LOCAL
} argument_kind;

static bool by_value(argument_kind kind) { return kind <= WHOLE_SPACE; }
typedef struct argument {
  argument_kind kind;
  size_t bytes; /* BY_VALUE, LOCAL */
} argument;

#define MAX_ARGUMENTS 12

/* A kernel's argument list, and what happens before each of its launches:
   its by-value arguments set again (each_launch), and a non-blocking write
   of written bytes from host memory into its buffer. */
typedef struct variant {
  const char *name;
  bool each_launch;
  size_t written;
  uint32_t count;
  argument arguments[MAX_ARGUMENTS];
} variant;

/* clang-format off */
/* A variant named name with the arguments listed, counted. */
#define VARIANT_WITH(name, each_launch, written, ...) \
  {name, each_launch, written, \
   sizeof((argument[]){__VA_ARGS__}) / sizeof(argument), {__VA_ARGS__}}
#define VARIANT(name, ...) VARIANT_WITH(name, false, 0, __VA_ARGS__)
#define RECORD_AND_LAYOUT {STEP_RECORD_AND_LAYOUT, 0}
#define RECORD {STEP_RECORD, 0}
#define VALUE(n) {BY_VALUE, n}
#define SET {BUFFER, 0}
#define UNSET {NULL_BUFFER, 0}
#define CACHE {LOCAL, LOCAL_BYTES}
#define WHOLE {WHOLE_SPACE, 0}

/* The step's list for a steady v1 step (query_start_loc and positions
   set, idx_mapping, seq_lens and the packet NULL, the storage set), then
   one change at a time; and 0.5's list, with the token slots' two buffers
   (NULL) and a local cache of its own. */
static const variant variants[] = {
    VARIANT("one buffer", SET),
    VARIANT("the step's, one group", RECORD, VALUE(LAYOUT_BYTES), SET, SET,
            UNSET, UNSET, UNSET, SET),
    VARIANT("0.5's step list, one group", RECORD, VALUE(LAYOUT_BYTES), SET,
            SET, UNSET, UNSET, UNSET, UNSET, UNSET, CACHE, SET),
    VARIANT("the layout in the record", RECORD_AND_LAYOUT, SET, SET, UNSET,
            UNSET, UNSET, SET),
    VARIANT("a 512-byte record", VALUE(SMALL_RECORD_BYTES),
            VALUE(LAYOUT_BYTES), SET, SET, UNSET, UNSET, UNSET, SET),
    VARIANT("ten buffers, all set", SET, SET, SET, SET, SET, SET, SET, SET,
            SET, SET),
    VARIANT("ten buffers, all NULL", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET,
            UNSET, UNSET, UNSET, UNSET),
    /* A record by value alone, set before every launch. */
    VARIANT_WITH("a record of 64 words", true, 0, VALUE(WORDS(64))),
    VARIANT_WITH("a record of 512 words", true, 0, VALUE(WORDS(512))),
    VARIANT_WITH("a record of 2048 words", true, 0, VALUE(WORDS(2048))),
    VARIANT_WITH("a record of the whole argument space", true, 0, WHOLE),
    /* A churning step's packet: uploaded, or inside the launch. */
    VARIANT_WITH("a 19 KiB packet written, then a launch", false,
                 PACKET_BYTES, SET),
    VARIANT_WITH("the 19 KiB packet by value", true, 0, VALUE(PACKET_BYTES)),
};
/* clang-format on */
enum { NUM_VARIANTS = sizeof variants / sizeof variants[0] };

/* Each argument's bytes: the step's record takes the largest packet of
   at most MAX_PACKET_WORDS, a power of two, that room, the device's
   argument space, leaves beside the rest (pointers counted at 8 bytes), as
   the step's does. */
static void argument_bytes(const variant *v, size_t room, size_t *bytes) {
  size_t others = 0;
  for (uint32_t a = 0; a < v->count; ++a) {
    argument_kind kind = v->arguments[a].kind;
    bytes[a] = kind == BY_VALUE || kind == LOCAL ? v->arguments[a].bytes
               : kind == STEP_RECORD_AND_LAYOUT  ? LAYOUT_BYTES
               : kind == WHOLE_SPACE             ? room / 4 * 4
                                                 : 0;
    others += kind == LOCAL                           ? 0
              : kind == BUFFER || kind == NULL_BUFFER ? 8
                                                      : bytes[a];
  }
  size_t words = MAX_PACKET_WORDS;
  while (words > 1 && others + RECORD_HEAD_BYTES + 4 * words > room) words /= 2;
  for (uint32_t a = 0; a < v->count; ++a)
    if (v->arguments[a].kind <= STEP_RECORD_AND_LAYOUT)
      bytes[a] += RECORD_HEAD_BYTES + 4 * words;
}

/* Appends to source at *used, never past size (a full source fails to
   build, loudly). */
static void append(char *source, size_t size, size_t *used, const char *format,
                   ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void append(char *source, size_t size, size_t *used, const char *format,
                   ...) {
  if (*used >= size) return;
  va_list values;
  va_start(values, format);
  int added = vsnprintf(source + *used, size - *used, format, values);
  va_end(values);
  if (added > 0) *used += (size_t)added;
}

/* "__kernel void bench_arguments(r0 a0, __global int *a1, ...) {}", each
   by-value struct a type of its own size. */
static void write_source(const variant *v, const size_t *bytes, char *source,
                         size_t size) {
  size_t used = 0;
  for (uint32_t a = 0; a < v->count; ++a)
    if (by_value(v->arguments[a].kind))
      append(source, size, &used, "typedef struct { uint w[%zu]; } r%u;\n",
             bytes[a] / 4, (unsigned)a);
  append(source, size, &used, "__kernel void bench_arguments(");
  for (uint32_t a = 0; a < v->count; ++a) {
    const char *separator = a ? ", " : "";
    argument_kind kind = v->arguments[a].kind;
    if (by_value(kind))
      append(source, size, &used, "%sr%u a%u", separator, (unsigned)a,
             (unsigned)a);
    else
      append(source, size, &used, "%s%s int *a%u", separator,
             kind == LOCAL ? "__local" : "__global", (unsigned)a);
  }
  append(source, size, &used, ") {}\n");
}

/* A variant ready to launch: its kernel, its arguments' bytes, zeros for
   its by-value arguments and the buffer its set buffers name, with the
   host data written into it. */
typedef struct launch {
  const variant *v;
  cl_kernel kernel;
  const size_t *bytes;
  const void *zeros;
  cl_mem buffer;
  const void *host;
} launch;

/* Sets the variant's arguments: by-value ones to zeros, buffers to the
   launch's buffer or NULL; returns the first error. */
static cl_int set_arguments(const launch *l, bool by_value_only) {
  cl_int error = CL_SUCCESS;
  for (uint32_t a = 0; a < l->v->count && error == CL_SUCCESS; ++a) {
    argument_kind kind = l->v->arguments[a].kind;
    if (by_value(kind))
      error = clSetKernelArg(l->kernel, a, l->bytes[a], l->zeros);
    else if (by_value_only)
      continue;
    else if (kind == LOCAL)
      error = clSetKernelArg(l->kernel, a, l->bytes[a], NULL);
    else
      error = clSetKernelArg(l->kernel, a, sizeof(cl_mem),
                             kind == BUFFER ? &l->buffer : NULL);
  }
  return error;
}

/* What goes before each launch (the write, the by-value arguments set
   again) and the launch; returns the first error. */
static cl_int launch_once(bench *b, const launch *l) {
  size_t one = 1;
  cl_int error = CL_SUCCESS;
  if (l->v->written)
    error = clEnqueueWriteBuffer(b->queue, l->buffer, CL_FALSE, 0,
                                 l->v->written, l->host, 0, NULL, NULL);
  if (error == CL_SUCCESS && l->v->each_launch)
    error = set_arguments(l, true);
  if (error == CL_SUCCESS)
    error = clEnqueueNDRangeKernel(b->queue, l->kernel, 1, NULL, &one, &one, 0,
                                   NULL, NULL);
  return error;
}

static void run_launch(bench *b, void *context, cl_event *event) {
  (void)event;
  bench_check_cl(launch_once(b, context), "the arguments kernel");
}

/* The bytes all of a variant's arguments take of the device's argument
   space (a buffer as a 64-bit pointer, a local array as nothing). */
static size_t argument_space(const variant *v, const size_t *bytes) {
  size_t used = 0;
  for (uint32_t a = 0; a < v->count; ++a) {
    argument_kind kind = v->arguments[a].kind;
    used += by_value(kind) ? bytes[a] : kind == LOCAL ? 0 : 8;
  }
  return used;
}

/* Times one variant beside the empty kernel, interleaved, into record;
   a variant past the device's argument space, or one its driver refuses,
   says so in fits and has no figures. */
static void time_variant(bench *b, report *record, launch *l, size_t room) {
  char fits[96] = "yes";
  cl_program program = NULL;
  if (argument_space(l->v, l->bytes) > room) {
    snprintf(fits, sizeof fits, "no: %zu bytes of %zu",
             argument_space(l->v, l->bytes), room);
  } else {
    char source[2048];
    write_source(l->v, l->bytes, source, sizeof source);
    l->kernel = bench_kernel(b, source, "bench_arguments", &program);
    cl_int error = set_arguments(l, false);
    if (error == CL_SUCCESS) error = launch_once(b, l);
    if (error == CL_SUCCESS) error = clFinish(b->queue);
    if (error != CL_SUCCESS)
      snprintf(fits, sizeof fits, "refused: %s",
               clbt_status_name((clbt_status)error));
  }
  report_string(record, "fits", fits);
  if (strcmp(fits, "yes") == 0) {
    const bench_call calls[] = {{bench_run_empty, NULL, BENCH_ENQUEUE_ONLY},
                                {run_launch, l, BENCH_ENQUEUE_ONLY},
                                {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                                {run_launch, l, BENCH_TO_COMPLETION}};
    double us[4];
    bench_time(b, 4, calls, us);
    report_number(record, "enqueue_us", us[1], 2);
    report_number(record, "enqueue_over", us[1] / us[0], 2);
    report_number(record, "call_us", us[3], 2);
    report_number(record, "call_over", us[3] / us[2], 2);
  }
  if (l->kernel) clReleaseKernel(l->kernel);
  if (program) clReleaseProgram(program);
}

static void bench_arguments(bench *b) {
  size_t room = 0;
  bench_check_cl(
      clGetDeviceInfo(clbt_device_id(b->device), CL_DEVICE_MAX_PARAMETER_SIZE,
                      sizeof room, &room, NULL),
      "CL_DEVICE_MAX_PARAMETER_SIZE");
  char caption[480];
  snprintf(caption, sizeof caption,
           "kernels that do nothing, medians of %u interleaved runs, "
           "microseconds; enqueue = the enqueue alone, call = enqueue and "
           "clFinish; over = against the empty kernel; set_each_launch: "
           "the by-value arguments set again before every launch; "
           "written_bytes: a non-blocking write from host memory into the "
           "kernel's buffer before every launch; fits: within the "
           "device's argument space, %zu bytes",
           (unsigned)b->options.runs, room);
  report *section = bench_section(b, "arguments", caption);
  size_t largest = room > PACKET_BYTES ? room : PACKET_BYTES;
  unsigned char *zeros = calloc(1, largest), *host = calloc(1, largest);
  if (!zeros || !host) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  cl_int error = CL_SUCCESS;
  cl_mem buffer =
      clCreateBuffer(b->context, CL_MEM_READ_WRITE, largest, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  for (size_t i = 0; i < NUM_VARIANTS; ++i) {
    const variant *v = &variants[i];
    size_t bytes[MAX_ARGUMENTS], by_value_bytes = 0;
    argument_bytes(v, room, bytes);
    for (uint32_t a = 0; a < v->count; ++a)
      if (by_value(v->arguments[a].kind)) by_value_bytes += bytes[a];
    report *record = bench_record(section, v->name);
    report_uint(record, "arguments", v->count);
    report_uint(record, "by_value_bytes", by_value_bytes);
    report_uint(record, "written_bytes", v->written);
    report_bool(record, "set_each_launch", v->each_launch);
    launch l = {v, NULL, bytes, zeros, buffer, host};
    time_variant(b, record, &l, room);
  }
  clReleaseMemObject(buffer);
  free(zeros);
  free(host);
}

const bench_section_entry bench_arguments_section = {"arguments",
                                                     bench_arguments};
