/*
 * The OpenCL calls of `clbt bench`'s steps (see calls.h): the library's
 * calls in each counted step, read from the call counter (call_counter.h)
 * before its row updates, before clbt_multi_table_enqueue_step and after
 * it; summarised per series and set against a budget for one step: issue
 * 42's for a steady step, issue 18's for the others.
 */
#include "bench/calls.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/call_counter.h"

/* Issue 18's budget for one step's calls besides clSetKernelArg: the launch
   and at most one status query; 2 more when the step uploads its changes
   (the write and its event); 1 more for the export only while it stays a
   launch of its own. And at most 2 clSetKernelArg. Issue 42's for a steady
   step: the launch and one more call, clSetKernelArg counted. */
enum {
  BUDGET_BASE = 2,
  BUDGET_UPLOAD = 2,
  BUDGET_EXPORT_LAUNCH = 1,
  BUDGET_SET_KERNEL_ARG = 2,
  BUDGET_STEADY = 2
};

static const char set_kernel_arg[] = "clSetKernelArg";
static const char status_query[] = "clGetEventInfo";
static const char event_release[] = "clReleaseEvent";
static const char *const launch_functions[] = {"clEnqueueNDRangeKernel",
                                               "clEnqueueTask"};
/* What moves host data to the device. */
static const char *const upload_functions[] = {
    "clEnqueueWriteBuffer", "clEnqueueWriteBufferRect", "clEnqueueWriteImage",
    "clEnqueueMapBuffer",   "clEnqueueMapImage",        "clEnqueueUnmapMemObject"};

struct bench_calls {
  uint64_t capacity, steps;
  uint32_t (*in_step)[CALL_COUNTER_MAX_FUNCTIONS]; /* per step and function */
  uint32_t *updates;      /* the library's calls in the step's row updates */
  uint32_t *created;      /* objects the library was handed in the step */
  int32_t *kept;          /* references it took and kept */
  uint32_t *batch_writes; /* the bench's own writes of the batch */
  uint32_t *changed_ids;  /* block ids the step's row updates wrote */
  call_counts snapshots[2];
  int current; /* the snapshot read last */
};

bench_calls *bench_calls_create(uint64_t capacity) {
  bench_calls *c = calloc(1, sizeof *c);
  if (!c) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  c->capacity = capacity;
  c->in_step = calloc(capacity, sizeof *c->in_step);
  c->updates = calloc(capacity, sizeof *c->updates);
  c->created = calloc(capacity, sizeof *c->created);
  c->kept = calloc(capacity, sizeof *c->kept);
  c->batch_writes = calloc(capacity, sizeof *c->batch_writes);
  c->changed_ids = calloc(capacity, sizeof *c->changed_ids);
  if (!c->in_step || !c->updates || !c->created || !c->kept ||
      !c->batch_writes || !c->changed_ids)
    bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  return c;
}

void bench_calls_free(bench_calls *c) {
  if (!c) return;
  free(c->in_step);
  free(c->updates);
  free(c->created);
  free(c->kept);
  free(c->batch_writes);
  free(c->changed_ids);
  free(c);
}

/* Reads the counter; the calls of each function since the last read go
   into calls (when not NULL), the objects into created and kept (the
   same). Returns the calls of every function since then. */
static uint32_t read_since(bench_calls *c, uint32_t *calls, uint32_t *created,
                           int32_t *kept) {
  const call_counts *then = &c->snapshots[c->current];
  call_counts *now = &c->snapshots[!c->current];
  call_counter_read(now);
  uint32_t total = 0;
  for (size_t f = 0; f < now->num_functions; ++f) {
    uint64_t before = f < then->num_functions ? then->calls[f] : 0;
    uint32_t delta = (uint32_t)(now->calls[f] - before);
    if (calls) calls[f] = delta;
    total += delta;
  }
  if (created) *created = (uint32_t)(now->created - then->created);
  if (kept)
    *kept = (int32_t)((now->created - then->created) +
                      (now->retained - then->retained) -
                      (now->released - then->released));
  c->current = !c->current;
  return total;
}

void bench_calls_updates(bench_calls *c) { read_since(c, NULL, NULL, NULL); }

void bench_calls_step(bench_calls *c) {
  if (c->steps == c->capacity) return;
  c->updates[c->steps] = read_since(c, NULL, NULL, NULL);
}

void bench_calls_done(bench_calls *c, uint32_t batch_writes,
                      uint32_t changed_ids) {
  if (c->steps == c->capacity) return;
  uint64_t s = c->steps++;
  read_since(c, c->in_step[s], &c->created[s], &c->kept[s]);
  c->batch_writes[s] = batch_writes;
  c->changed_ids[s] = changed_ids;
}

/* ---- text ---------------------------------------------------------------- */

/* Appends formatted text to text, a buffer of size bytes, as far as it
   fits. */
static void append(char *text, size_t size, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void append(char *text, size_t size, const char *format, ...) {
  size_t used = strlen(text);
  if (used + 1 >= size) return;
  va_list args;
  va_start(args, format);
  vsnprintf(text + used, size - used, format, args);
  va_end(args);
}

static bool named_in(const char *name, const char *const *names,
                     size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (strcmp(name, names[i]) == 0) return true;
  return false;
}

#define NAMED_IN(name, names) \
  named_in(name, names, sizeof names / sizeof names[0])

static int compare_counts(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The middle step's count of values (steps > 0), which it sorts. */
static uint32_t middle(uint32_t *values, uint64_t steps) {
  qsort(values, steps, sizeof *values, compare_counts);
  return values[steps / 2];
}

/* ---- a series, summarised ------------------------------------------------ */

/* One step's calls, as the budget sees them. */
typedef struct step_tally {
  uint32_t calls, set_kernel_arg; /* calls: besides clSetKernelArg */
  uint32_t launches, uploads;
  bool export_launch; /* the export, a launch of its own */
  uint32_t budget;
} step_tally;

/* A steady step's calls in all against issue 42's budget: how many past
   it. */
static int64_t steady_over(const step_tally *t) {
  return (int64_t)t->calls + t->set_kernel_arg - BUDGET_STEADY;
}

static step_tally tally(const bench_calls *c, uint64_t s, size_t functions,
                        bool exports) {
  step_tally t = {0};
  for (size_t f = 0; f < functions; ++f) {
    const char *name = call_counter_function(f);
    uint32_t n = c->in_step[s][f];
    if (strcmp(name, set_kernel_arg) == 0) {
      t.set_kernel_arg += n;
      continue;
    }
    t.calls += n;
    if (NAMED_IN(name, launch_functions)) t.launches += n;
    if (NAMED_IN(name, upload_functions)) t.uploads += n;
  }
  t.export_launch = exports && t.launches >= 2;
  t.budget = BUDGET_BASE + (t.uploads ? BUDGET_UPLOAD : 0) +
             (t.export_launch ? BUDGET_EXPORT_LAUNCH : 0);
  return t;
}

/* What the budget allows step s and which of its calls go past it, by
   name: the launch (and the export's), one status query, and with an
   upload its write and its event's release. */
static void explain(const bench_calls *c, uint64_t s, size_t functions,
                    const step_tally *t, char *why, size_t size) {
  uint32_t launches = 1 + (t->export_launch ? 1u : 0u);
  uint32_t queries = 1, writes = t->uploads ? 1u : 0u;
  uint32_t releases = t->uploads ? 1u : 0u;
  snprintf(why, size,
           "%u calls besides %s against %u (the launch%s, a status "
           "query%s); past them:",
           (unsigned)t->calls, set_kernel_arg, (unsigned)t->budget,
           t->export_launch ? ", the export's launch" : "",
           t->uploads ? ", the upload and its event" : "");
  bool any = false;
  for (size_t f = 0; f < functions; ++f) {
    const char *name = call_counter_function(f);
    uint32_t n = c->in_step[s][f], *allowance = NULL;
    if (strcmp(name, set_kernel_arg) == 0 || n == 0) continue;
    if (NAMED_IN(name, launch_functions)) allowance = &launches;
    if (NAMED_IN(name, upload_functions)) allowance = &writes;
    if (strcmp(name, status_query) == 0) allowance = &queries;
    if (strcmp(name, event_release) == 0) allowance = &releases;
    uint32_t allowed = allowance ? (n < *allowance ? n : *allowance) : 0;
    if (allowance) *allowance -= allowed;
    if (n > allowed) {
      append(why, size, "%s %u %s", any ? "," : "", (unsigned)(n - allowed),
             name);
      any = true;
    }
  }
  if (!any) append(why, size, " none");
  append(why, size, "; %u %s against %d", (unsigned)t->set_kernel_arg,
         set_kernel_arg, BUDGET_SET_KERNEL_ARG);
}

/* A series as the table shows it. */
typedef struct calls_row {
  char name[80];
  uint64_t steps;
  size_t functions; /* counted when it was summarised */
  /* per function, in the middle step, the fewest and the most */
  uint32_t median[CALL_COUNTER_MAX_FUNCTIONS];
  uint32_t low[CALL_COUNTER_MAX_FUNCTIONS], high[CALL_COUNTER_MAX_FUNCTIONS];
  /* the middle step's */
  uint32_t besides, created, row_updates, changed_ids, batch_writes;
  int64_t kept; /* over all the steps */
  /* the worst step against the budget; a steady series' calls count
     clSetKernelArg */
  bool steady;
  uint32_t calls, budget, set_kernel_arg;
  int64_t over;
  char verdict[128], why[1024];
} calls_row;

struct bench_calls_table {
  calls_row *rows;
  size_t count, capacity;
};

bench_calls_table *bench_calls_table_create(void) {
  bench_calls_table *t = calloc(1, sizeof *t);
  if (!t) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  return t;
}

void bench_calls_table_free(bench_calls_table *t) {
  if (!t) return;
  free(t->rows);
  free(t);
}

static calls_row *new_row(bench_calls_table *t) {
  if (t->count == t->capacity) {
    size_t capacity = t->capacity ? 2 * t->capacity : 8;
    calls_row *rows = realloc(t->rows, capacity * sizeof *rows);
    if (!rows) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
    t->rows = rows;
    t->capacity = capacity;
  }
  calls_row *row = &t->rows[t->count++];
  memset(row, 0, sizeof *row);
  return row;
}

/* The middle step's value of a per-step array, through scratch. */
static uint32_t middle_of(const uint32_t *values, uint64_t steps,
                          uint32_t *scratch) {
  memcpy(scratch, values, steps * sizeof *scratch);
  return middle(scratch, steps);
}

/* Each function's counts; the step's other figures. */
static void summarise_counts(const bench_calls *c, calls_row *row,
                             uint32_t *scratch) {
  for (size_t f = 0; f < row->functions; ++f) {
    row->low[f] = UINT32_MAX;
    for (uint64_t s = 0; s < c->steps; ++s) {
      scratch[s] = c->in_step[s][f];
      if (scratch[s] < row->low[f]) row->low[f] = scratch[s];
      if (scratch[s] > row->high[f]) row->high[f] = scratch[s];
    }
    row->median[f] = middle(scratch, c->steps);
  }
  for (uint64_t s = 0; s < c->steps; ++s) {
    scratch[s] = tally(c, s, row->functions, false).calls;
    row->kept += c->kept[s];
  }
  row->besides = middle(scratch, c->steps);
  row->created = middle_of(c->created, c->steps, scratch);
  row->row_updates = middle_of(c->updates, c->steps, scratch);
  row->changed_ids = middle_of(c->changed_ids, c->steps, scratch);
  row->batch_writes = middle_of(c->batch_writes, c->steps, scratch);
}

/* The verdict of a steady series: every step within issue 42's budget,
   or in how many it was missed and by how much at worst. */
static void judge_steady(const bench_calls *c, calls_row *row, bool exports) {
  uint64_t missed = 0, worst = 0;
  int64_t worst_over = INT64_MIN;
  for (uint64_t s = 0; s < c->steps; ++s) {
    step_tally t = tally(c, s, row->functions, exports);
    int64_t over = steady_over(&t);
    missed += over > 0;
    if (over > worst_over) {
      worst_over = over;
      worst = s;
    }
    if (t.set_kernel_arg > row->set_kernel_arg)
      row->set_kernel_arg = t.set_kernel_arg;
  }
  step_tally t = tally(c, worst, row->functions, exports);
  row->calls = t.calls + t.set_kernel_arg;
  row->budget = BUDGET_STEADY;
  row->over = worst_over > 0 ? worst_over : 0;
  snprintf(row->verdict, sizeof row->verdict, "met");
  if (missed) {
    snprintf(row->verdict, sizeof row->verdict, "missed");
    if (missed < c->steps)
      append(row->verdict, sizeof row->verdict, " in %llu of %llu steps",
             (unsigned long long)missed, (unsigned long long)c->steps);
    append(row->verdict, sizeof row->verdict, ": +%lld calls",
           (long long)worst_over);
  }
  snprintf(row->why, sizeof row->why,
           "%u calls, %s counted, against %d (the launch and one more): ",
           (unsigned)row->calls, set_kernel_arg, BUDGET_STEADY);
  const char *separator = "";
  for (size_t f = 0; f < row->functions; ++f) {
    if (c->in_step[worst][f] == 0) continue;
    append(row->why, sizeof row->why, "%s%u %s", separator,
           (unsigned)c->in_step[worst][f], call_counter_function(f));
    separator = ", ";
  }
}

/* The verdict: every step within the budget, or in how many it was
   missed, by how much at worst, and which calls of the worst step went
   past it. */
static void judge(const bench_calls *c, calls_row *row, bool exports) {
  if (row->steady) {
    judge_steady(c, row, exports);
    return;
  }
  uint64_t missed = 0, worst = 0;
  int64_t worst_over = INT64_MIN;
  uint32_t worst_set_kernel_arg = 0;
  for (uint64_t s = 0; s < c->steps; ++s) {
    step_tally t = tally(c, s, row->functions, exports);
    int64_t over = (int64_t)t.calls - (int64_t)t.budget;
    missed += over > 0 || t.set_kernel_arg > BUDGET_SET_KERNEL_ARG;
    /* the worst: the most calls past the budget, then clSetKernelArg */
    if (over > worst_over ||
        (over == worst_over && t.set_kernel_arg > worst_set_kernel_arg)) {
      worst_over = over;
      worst_set_kernel_arg = t.set_kernel_arg;
      worst = s;
    }
    if (t.set_kernel_arg > row->set_kernel_arg)
      row->set_kernel_arg = t.set_kernel_arg;
  }
  step_tally t = tally(c, worst, row->functions, exports);
  row->calls = t.calls;
  row->budget = t.budget;
  row->over = worst_over > 0 ? worst_over : 0;
  snprintf(row->verdict, sizeof row->verdict, "met");
  if (missed) {
    snprintf(row->verdict, sizeof row->verdict, "missed");
    if (missed < c->steps)
      append(row->verdict, sizeof row->verdict, " in %llu of %llu steps",
             (unsigned long long)missed, (unsigned long long)c->steps);
    append(row->verdict, sizeof row->verdict, ":");
    if (worst_over > 0)
      append(row->verdict, sizeof row->verdict, " +%lld calls",
             (long long)worst_over);
    if (row->set_kernel_arg > BUDGET_SET_KERNEL_ARG)
      append(row->verdict, sizeof row->verdict, " +%u %s",
             (unsigned)(row->set_kernel_arg - BUDGET_SET_KERNEL_ARG),
             set_kernel_arg);
  }
  explain(c, worst, row->functions, &t, row->why, sizeof row->why);
}

void bench_calls_table_add(bench_calls_table *t, const bench_calls *c,
                           const char *name, bool exports, bool steady) {
  if (!call_counter_available() || c->steps == 0) return;
  calls_row *row = new_row(t);
  snprintf(row->name, sizeof row->name, "%s", name);
  row->steady = steady;
  row->steps = c->steps;
  row->functions = c->snapshots[c->current].num_functions;
  uint32_t *scratch = malloc(c->steps * sizeof *scratch);
  if (!scratch) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  summarise_counts(c, row, scratch);
  free(scratch);
  judge(c, row, exports);
}

bool bench_calls_uploads(const bench_calls *c) {
  if (!call_counter_available() || c->steps == 0) return false;
  size_t functions = c->snapshots[c->current].num_functions;
  uint32_t *uploads = malloc(c->steps * sizeof *uploads);
  if (!uploads) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint64_t s = 0; s < c->steps; ++s)
    uploads[s] = tally(c, s, functions, false).uploads;
  bool uploaded = middle(uploads, c->steps) > 0;
  free(uploads);
  return uploaded;
}

void bench_calls_describe(const bench_calls *c, char *text, size_t size) {
  if (!call_counter_available() || c->steps == 0) {
    snprintf(text, size, "this build does not count its OpenCL calls");
    return;
  }
  calls_row *row = calloc(1, sizeof *row);
  uint32_t *scratch = malloc(c->steps * sizeof *scratch);
  if (!row || !scratch) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  row->functions = c->snapshots[c->current].num_functions;
  summarise_counts(c, row, scratch);
  snprintf(text, size, "a counted step's OpenCL calls (medians):");
  const char *separator = " ";
  for (size_t f = 0; f < row->functions; ++f) {
    if (row->median[f] == 0) continue;
    append(text, size, "%s%u %s", separator, (unsigned)row->median[f],
           call_counter_function(f));
    separator = ", ";
  }
  free(scratch);
  free(row);
}

/* ---- the table ----------------------------------------------------------- */

static int compare_names(const void *a, const void *b) {
  return strcmp(call_counter_function(*(const size_t *)a),
                call_counter_function(*(const size_t *)b));
}

/* The functions some row's steps called, by name; returns how many. */
static size_t columns(const bench_calls_table *t,
                      size_t order[CALL_COUNTER_MAX_FUNCTIONS]) {
  size_t count = 0;
  for (size_t f = 0; f < CALL_COUNTER_MAX_FUNCTIONS; ++f) {
    bool called = false;
    for (size_t r = 0; r < t->count && !called; ++r)
      called = f < t->rows[r].functions && t->rows[r].high[f] > 0;
    if (called) order[count++] = f;
  }
  qsort(order, count, sizeof *order, compare_names);
  return count;
}

void bench_calls_table_write(bench *b, const bench_calls_table *t,
                             report *section, report *targets) {
  size_t order[CALL_COUNTER_MAX_FUNCTIONS];
  size_t count = columns(t, order);
  for (size_t r = 0; r < t->count; ++r) {
    const calls_row *row = &t->rows[r];
    report *record = bench_record(section, row->name);
    report_uint(record, "steps", row->steps);
    char varies[512] = "";
    for (size_t i = 0; i < count; ++i) {
      size_t f = order[i];
      bool known = f < row->functions;
      report_uint(record, call_counter_function(f),
                  known ? row->median[f] : 0);
      if (known && row->low[f] != row->high[f])
        append(varies, sizeof varies, "%s%s %u-%u", varies[0] ? ", " : "",
               call_counter_function(f), (unsigned)row->low[f],
               (unsigned)row->high[f]);
    }
    report_uint(record, "besides_set_kernel_arg", row->besides);
    report_uint(record, "objects_created", row->created);
    report_int(record, "references_kept", row->kept);
    report_uint(record, "row_updates", row->row_updates);
    report_uint(record, "changed_ids", row->changed_ids);
    report_uint(record, "batch_writes", row->batch_writes);
    report_uint(record, "completion", 1);
    report_string(record, "varies", varies[0] ? varies : "no");

    report *target = bench_record(targets, row->name);
    report_uint(target, "calls", row->calls);
    report_uint(target, "budget", row->budget);
    report_uint(target, "set_kernel_arg", row->set_kernel_arg);
    report_uint(target, "set_kernel_arg_limit", BUDGET_SET_KERNEL_ARG);
    report_string(target, "verdict", row->verdict);
    report_string(target, "why", row->why);
    if (row->steady) {
      bench_target(b, "a steady step's OpenCL calls besides the launch, worst",
                   row->calls - 1.0, BUDGET_STEADY - 1);
      continue;
    }
    bench_target(b, "a churning step's calls past issue 18's budget, worst",
                 (double)row->over, 0);
    bench_target(b, "a churning step's clSetKernelArg calls, worst",
                 row->set_kernel_arg, BUDGET_SET_KERNEL_ARG);
  }
}
