/*
 * The record of what the row operations changed since the last commit
 * (changes.h).
 */
#include "engine/changes.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs) {
  changes->listed_rows = calloc(max_num_reqs, sizeof *changes->listed_rows);
  changes->listed = calloc(max_num_reqs, sizeof *changes->listed);
  changes->low = calloc(max_num_reqs, sizeof *changes->low);
  changes->high = calloc(max_num_reqs, sizeof *changes->high);
  changes->extent = calloc(max_num_reqs, sizeof *changes->extent);
  changes->num_listed = 0;
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
  for (uint32_t i = 0; i < changes->num_listed; ++i)
    changes->listed[changes->listed_rows[i]] = false;
  changes->num_listed = 0;
  memset(changes->extent, 0, max_num_reqs * sizeof *changes->extent);
}

void clbt__changes_mark(clbt__changes *changes, uint32_t row, uint32_t low,
                        uint32_t high) {
  if (!changes->listed[row]) {
    changes->listed[row] = true;
    changes->listed_rows[changes->num_listed++] = row;
    changes->low[row] = UINT32_MAX;
    changes->high[row] = 0;
  }
  if (low >= high) return; /* only the length changed */
  if (low < changes->low[row]) changes->low[row] = low;
  if (high > changes->high[row]) changes->high[row] = high;
}

uint32_t clbt__changed_cells(const clbt__changes *changes, uint32_t row) {
  return changes->high[row] > changes->low[row]
             ? changes->high[row] - changes->low[row]
             : 0;
}
