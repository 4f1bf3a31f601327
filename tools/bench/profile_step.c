/*
 * profile_step: the host work of the step section's steps (step.c),
 * for callgrind, which counts instructions where a clock on a shared
 * machine cannot: one case, one model, one kind of step, run STEPS times
 * after a warm-up, as `clbt bench` drives it (bench_step.h: the plan
 * untimed, then the row calls and clbt_multi_table_enqueue_step). It
 * prints what the steps changed; tools/bench/profile_step.sh runs it under
 * callgrind, collecting only inside the library's row calls and
 * enqueue_step, and divides. Not installed: a tool of the bench's,
 * beside it on its floor.
 *
 *   profile_step CASE MODEL KIND STEPS
 *
 * CASE: decode-256-1group, decode-1024-1group, decode-256-4groups or
 * decode-1024-4groups; MODEL: v1 or persistent; KIND: steady, churn (1
 * request in 64 replaced) or churn16 (1 in 16).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/step_model.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS
#define CALLGRIND_ZERO_STATS
#endif

static const step_case cases[] = {
    {"decode-256-1group", 256, 1, {16}, {8192}},
    {"decode-1024-1group", 1024, 1, {16}, {8192}},
    {"decode-256-4groups", 256, 4, {16, 16, 32, 64}, {8192, 8192, 4096, 2048}},
    {"decode-1024-4groups", 1024, 4, {16, 16, 32, 64},
     {8192, 8192, 4096, 2048}},
};

static const step_variant models[] = {
    {"v1", false, 0, 0, "", 0, 0},
    {"persistent", true, CLBT_STEP_GATHER, 0, "", 0, 0},
};

static const step_kind kinds[] = {
    {"steady", 0}, {"churn", 64}, {"churn16", 16}};

int main(int argc, char **argv) {
  const step_case *shape = NULL;
  const step_variant *model = NULL;
  const step_kind *kind = NULL;
  if (argc == 5) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
      if (strcmp(cases[i].name, argv[1]) == 0) shape = &cases[i];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; ++i)
      if (strcmp(models[i].name, argv[2]) == 0) model = &models[i];
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
      if (strcmp(kinds[i].suffix, argv[3]) == 0) kind = &kinds[i];
  }
  long steps = argc == 5 ? strtol(argv[4], NULL, 10) : 0;
  if (!shape || !model || !kind || steps <= 0) {
    fprintf(stderr, "usage: profile_step CASE MODEL KIND STEPS (see the "
                    "comment of tools/bench/profile_step.c)\n");
    return 2;
  }
  bench b = {.options = {.runs = 1}, .rng = 0x9E3779B97F4A7C15ull};
  b.root = report_create();
  bench_open(&b);
  step_model *m =
      step_model_create(&b, b.device, shape, model, 0);
  uint64_t ids = 0, cleared = 0, added = 0, appended = 0;
  /* A warm-up of as many steps, then the profiled ones. */
  for (long s = 0; s < 2 * steps; ++s) {
    step_plan(&b, m, kind);
    step_apply(m, NULL);
    step_enqueue(m, NULL);
    bench_check_cl(clFinish(m->queue), "clFinish");
    if (s + 1 == steps) CALLGRIND_ZERO_STATS; /* the warm-up forgotten */
    if (s < steps) continue;
    ids += m->changed_ids;
    cleared += m->num_cleared;
    added += m->num_added;
    appended += m->num_appended;
  }
  step_check(m);
  printf("steps %ld changed_ids %llu cleared %llu added %llu appended %llu\n",
         steps, (unsigned long long)ids, (unsigned long long)cleared,
         (unsigned long long)added, (unsigned long long)appended);
  step_model_destroy(m);
  bench_close(&b);
  report_free(b.root);
  return 0;
}
