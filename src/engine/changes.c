/*
 * The record of what the row operations changed since the last commit
 * (changes.h).
 */
#include "engine/changes.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs) {
  *changes = (clbt__changes){0};
  changes->listed_rows = calloc(max_num_reqs, sizeof *changes->listed_rows);
  changes->listed = calloc(max_num_reqs, sizeof *changes->listed);
  changes->low = calloc(max_num_reqs, sizeof *changes->low);
  changes->high = calloc(max_num_reqs, sizeof *changes->high);
  changes->extent = calloc(max_num_reqs, sizeof *changes->extent);
  if (changes->listed_rows && changes->listed && changes->low &&
      changes->high && changes->extent)
    return CLBT_SUCCESS;
  clbt__changes_free(changes);
  return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                    "no memory to track changes of %u rows",
                    (unsigned)max_num_reqs);
}

void clbt__changes_free(clbt__changes *changes) {
  free(changes->listed_rows);
  free(changes->listed);
  free(changes->low);
  free(changes->high);
  free(changes->extent);
  memset(changes, 0, sizeof *changes);
}

void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs) {
  clbt__changes_unlist(changes, UINT32_MAX);
  memset(changes->extent, 0, max_num_reqs * sizeof *changes->extent);
}

void clbt__changes_mark(clbt__changes *changes, uint32_t row, uint32_t low,
                        uint32_t high) {
  uint32_t *first = &changes->low[row], *end = &changes->high[row];
  if (!changes->listed[row]) {
    changes->listed[row] = true;
    changes->listed_rows[changes->num_listed++] = row;
    *first = *end = 0;
    if (row >= changes->bound) changes->bound = row + 1;
  }
  if (low >= high) return; /* only the length changed */
  changes->cells -= *end - *first;
  if (*first == *end) {
    *first = low;
    *end = high;
  } else {
    if (low < *first) *first = low;
    if (high > *end) *end = high;
  }
  changes->cells += *end - *first;
}

static int compare_rows(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

void clbt__changes_sort(clbt__changes *changes) {
  for (uint32_t i = 1; i < changes->num_listed; ++i)
    if (changes->listed_rows[i] < changes->listed_rows[i - 1]) {
      qsort(changes->listed_rows, changes->num_listed,
            sizeof *changes->listed_rows, compare_rows);
      return;
    }
}

void clbt__changes_unlist(clbt__changes *changes, uint32_t rows) {
  /* A step commits every row: all of them go, and the totals with them. */
  if (changes->bound <= rows) {
    for (uint32_t i = 0; i < changes->num_listed; ++i)
      changes->listed[changes->listed_rows[i]] = false;
    changes->num_listed = changes->bound = 0;
    changes->cells = 0;
    return;
  }
  uint32_t kept = 0, bound = 0;
  for (uint32_t i = 0; i < changes->num_listed; ++i) {
    uint32_t row = changes->listed_rows[i];
    if (row < rows) {
      changes->listed[row] = false;
      changes->cells -= changes->high[row] - changes->low[row];
      continue;
    }
    changes->listed_rows[kept++] = row;
    if (row >= bound) bound = row + 1;
  }
  changes->num_listed = kept;
  changes->bound = bound;
}
