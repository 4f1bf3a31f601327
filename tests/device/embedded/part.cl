/* Included twice (root.cl, twice.cl), embedded once. */
#pragma once

static int part_value(void) {
#ifdef BREAK_PART
  return not_declared_in_part; /* BROKEN_PART */
#endif
  return 1;
}
