/* An enqueue pass that decides: it plans, packs and calls what no header
   of the enqueue declares. A comment naming clbt__plan_place() is no call. */
static void plan(void) { clbt__plan_commands(); }

/* ---- enqueueing the commands ---- */

static int enqueue(void) {
  clbt__plan_commands();
  clbt__commit_pack();
  clbt__staging_submit();
  clbt__mystery();
  return clbt__sequence_write();
}

/* ---- settling ---- */

static void settle(void) { clbt__commit_pack(); }
