/*
 * The completion section of `clbt bench`: what the host pays to learn that
 * the device is done, by clFinish, clWaitForEvents and polling the event's
 * status, for a decode-256 call and the empty kernel.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

typedef enum wait_method { WAIT_FINISH, WAIT_EVENT, WAIT_POLL } wait_method;

/* Waits for event the given way; WAIT_FINISH ignores it. */
static void wait_for(const bench *b, wait_method method, cl_event event) {
  if (method == WAIT_FINISH) {
    bench_finish(b);
  } else if (method == WAIT_EVENT) {
    bench_check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
  } else {
    cl_int state = CL_QUEUED;
    bench_check_cl(clFlush(b->queue), "clFlush");
    while (state > CL_COMPLETE)
      bench_check_cl(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                    sizeof state, &state, NULL),
                     "clGetEventInfo");
    bench_check_cl(state, "the command");
  }
}

/*
 * decode-256 and the empty kernel, each waited for by clFinish, by
 * clWaitForEvents, and by polling the event's status: what the host pays
 * to learn that the device is done differs by driver.
 */
static void bench_completion(bench *b) {
  static const char *const methods[] = {"clFinish", "clWaitForEvents",
                                        "poll event status"};
  uint32_t runs = b->options.runs, kv_blocks;
  clbt_table_config config = bench_shape_config(&bench_shapes[2], &kv_blocks);
  clbt_table *table = bench_full_table(b, b->device, &config, kv_blocks, 1);
  bench_batch batch = bench_make_batch(b, 256, 1);
  size_t one = 1;
  char caption[160];
  snprintf(caption, sizeof caption,
           "decode-256, medians of %u runs, microseconds from enqueue to "
           "known completion",
           (unsigned)runs);
  report *section = bench_section(b, "completion", caption);
  for (int m = WAIT_FINISH; m <= WAIT_POLL; ++m) {
    for (uint32_t i = 0; i < runs; ++i) {
      cl_event event = NULL;
      double start = bench_now_us();
      bench_check(
          clbt_table_enqueue_slot_mapping(
              table, batch.num_reqs, batch.query_start_loc_buffer,
              batch.positions_buffer, batch.num_tokens, 0, NULL, &event),
          "slot mapping");
      wait_for(b, (wait_method)m, event);
      b->samples[0][i] = bench_now_us() - start;
      clReleaseEvent(event);
      start = bench_now_us();
      bench_check_cl(clEnqueueNDRangeKernel(b->queue, b->empty, 1, NULL, &one,
                                            &one, 0, NULL, &event),
                     "empty kernel");
      wait_for(b, (wait_method)m, event);
      b->samples[1][i] = bench_now_us() - start;
      clReleaseEvent(event);
    }
    double call = bench_median(b->samples[0], runs),
           empty = bench_median(b->samples[1], runs);
    report *record = bench_record(section, methods[m]);
    report_number(record, "call_us", call, 1);
    report_number(record, "empty_us", empty, 1);
    report_number(record, "call_over_empty", call / empty, 2);
  }
  bench_free_batch(&batch);
  clbt_table_destroy(table);
}

const bench_section_entry bench_completion_section = {"completion",
                                                      bench_completion};
