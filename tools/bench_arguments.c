/*
 * The arguments section of `clbt bench`: what a launch's argument list
 * costs the host, on kernels that do nothing, so that only the driver's
 * handling of their arguments differs from the empty kernel's. The step
 * kernel's list (cl/contract.h, one group) is the model: what each change
 * the design could make to it (issue 18's "next to try") would save, and
 * whether a NULL buffer costs what a real one does.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* Sizes like the step's: a record of 13 words and the packet the device's
   argument space leaves room for (512 words on the H200), a layout of one
   group, a local cache of 257 query_start_loc entries. */
#define RECORD_HEAD_BYTES 52
#define MAX_PACKET_WORDS 512
#define SMALL_RECORD_BYTES 512
#define LAYOUT_BYTES 64
#define LOCAL_BYTES 1028

/* One argument: the step's record (alone or with the layout in it), a
   by-value struct of bytes, a buffer (set or NULL) or a local array. */
typedef enum argument_kind {
  STEP_RECORD,
  STEP_RECORD_AND_LAYOUT,
  BY_VALUE,
  BUFFER,
  NULL_BUFFER,
  LOCAL
} argument_kind;
typedef struct argument {
  argument_kind kind;
  size_t bytes; /* BY_VALUE, LOCAL */
} argument;

#define MAX_ARGUMENTS 12

typedef struct variant {
  const char *name;
  uint32_t count;
  argument arguments[MAX_ARGUMENTS];
} variant;

/* clang-format off */
/* A variant named name with the arguments listed, counted. */
#define VARIANT(name, ...) \
  {name, sizeof((argument[]){__VA_ARGS__}) / sizeof(argument), {__VA_ARGS__}}
#define RECORD_AND_LAYOUT {STEP_RECORD_AND_LAYOUT, 0}
#define RECORD {STEP_RECORD, 0}
#define VALUE(n) {BY_VALUE, n}
#define SET {BUFFER, 0}
#define UNSET {NULL_BUFFER, 0}
#define CACHE {LOCAL, LOCAL_BYTES}

/* The step's list for a steady v1 step (query_start_loc and positions
   set, idx_mapping, seq_lens, the token slots' two and the packet NULL),
   then one change at a time. */
static const variant variants[] = {
    VARIANT("one buffer", SET),
    VARIANT("the step's, one group", RECORD, VALUE(LAYOUT_BYTES), SET, SET,
            UNSET, UNSET, UNSET, UNSET, UNSET, CACHE, SET),
    VARIANT("without the token slots' buffers", RECORD, VALUE(LAYOUT_BYTES),
            SET, SET, UNSET, UNSET, UNSET, CACHE, SET),
    VARIANT("the layout in the record", RECORD_AND_LAYOUT, SET, SET, UNSET,
            UNSET, UNSET, UNSET, UNSET, CACHE, SET),
    VARIANT("a 512-byte record", VALUE(SMALL_RECORD_BYTES),
            VALUE(LAYOUT_BYTES), SET, SET, UNSET, UNSET, UNSET, UNSET, UNSET,
            CACHE, SET),
    VARIANT("ten buffers, all set", SET, SET, SET, SET, SET, SET, SET, SET,
            SET, SET),
    VARIANT("ten buffers, all NULL", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET,
            UNSET, UNSET, UNSET, UNSET),
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
    if (v->arguments[a].kind <= BY_VALUE)
      append(source, size, &used, "typedef struct { uint w[%zu]; } r%u;\n",
             bytes[a] / 4, (unsigned)a);
  append(source, size, &used, "__kernel void bench_arguments(");
  for (uint32_t a = 0; a < v->count; ++a) {
    const char *separator = a ? ", " : "";
    argument_kind kind = v->arguments[a].kind;
    if (kind <= BY_VALUE)
      append(source, size, &used, "%sr%u a%u", separator, (unsigned)a,
             (unsigned)a);
    else
      append(source, size, &used, "%s%s int *a%u", separator,
             kind == LOCAL ? "__local" : "__global", (unsigned)a);
  }
  append(source, size, &used, ") {}\n");
}

static void run_kernel(bench *b, void *kernel, cl_event *event) {
  (void)event;
  size_t one = 1;
  bench_check_cl(clEnqueueNDRangeKernel(b->queue, kernel, 1, NULL, &one, &one,
                                        0, NULL, NULL),
                 "the arguments kernel");
}

/* The variant's kernel with its arguments set (once: the driver handles
   every argument at every enqueue, set again or not). */
static cl_kernel build_kernel(bench *b, const variant *v, const size_t *bytes,
                              cl_mem buffer, cl_program *program) {
  char source[2048];
  write_source(v, bytes, source, sizeof source);
  cl_kernel kernel = bench_kernel(b, source, "bench_arguments", program);
  cl_int error = CL_SUCCESS;
  static const unsigned char
      zeros[RECORD_HEAD_BYTES + 4 * MAX_PACKET_WORDS + LAYOUT_BYTES];
  for (uint32_t a = 0; a < v->count; ++a) {
    argument_kind kind = v->arguments[a].kind;
    if (kind <= BY_VALUE)
      error = clSetKernelArg(kernel, a, bytes[a], zeros);
    else if (kind == LOCAL)
      error = clSetKernelArg(kernel, a, bytes[a], NULL);
    else
      error = clSetKernelArg(kernel, a, sizeof(cl_mem),
                             kind == BUFFER ? &buffer : NULL);
    bench_check_cl(error, "clSetKernelArg");
  }
  return kernel;
}

void bench_arguments(bench *b) {
  if (!bench_selected(b, "arguments")) return;
  char caption[200];
  snprintf(caption, sizeof caption,
           "kernels that do nothing, medians of %u interleaved runs, "
           "microseconds; enqueue = the enqueue alone, call = enqueue and "
           "clFinish; over = against the empty kernel",
           (unsigned)b->options.runs);
  report *section = bench_section(b, "arguments", caption);
  cl_int error = CL_SUCCESS;
  cl_mem buffer =
      clCreateBuffer(b->context, CL_MEM_READ_WRITE, 4096, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  size_t room = 0;
  bench_check_cl(
      clGetDeviceInfo(clbt_device_id(b->device), CL_DEVICE_MAX_PARAMETER_SIZE,
                      sizeof room, &room, NULL),
      "CL_DEVICE_MAX_PARAMETER_SIZE");
  for (size_t i = 0; i < NUM_VARIANTS; ++i) {
    const variant *v = &variants[i];
    size_t bytes[MAX_ARGUMENTS], by_value = 0;
    argument_bytes(v, room, bytes);
    for (uint32_t a = 0; a < v->count; ++a)
      if (v->arguments[a].kind <= BY_VALUE) by_value += bytes[a];
    cl_program program;
    cl_kernel kernel = build_kernel(b, v, bytes, buffer, &program);
    const bench_call calls[] = {{bench_run_empty, NULL, BENCH_ENQUEUE_ONLY},
                                {run_kernel, kernel, BENCH_ENQUEUE_ONLY},
                                {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                                {run_kernel, kernel, BENCH_TO_COMPLETION}};
    double us[4];
    bench_time(b, 4, calls, us);
    report *record = bench_record(section, v->name);
    report_uint(record, "arguments", v->count);
    report_uint(record, "by_value_bytes", by_value);
    report_number(record, "enqueue_us", us[1], 2);
    report_number(record, "enqueue_over", us[1] / us[0], 2);
    report_number(record, "call_us", us[3], 2);
    report_number(record, "call_over", us[3] / us[2], 2);
    clReleaseKernel(kernel);
    clReleaseProgram(program);
  }
  clReleaseMemObject(buffer);
}
