/*
 * What the row operations changed since the last commit (changes.c), per
 * row: the columns [low, high) that changed and whether the row is listed
 * at all (a listed row's length is moved even when no column changed),
 * plus its extent: every column from extent on is zero on the host, which
 * keeps swaps and their commits proportional to what rows hold. The
 * totals over the listed rows are kept as they change, so that a commit
 * plans in constant time. Row operations (table_rows.c) mark it; a commit
 * (commit.c) moves it.
 */
#ifndef CLBT_CHANGES_H
#define CLBT_CHANGES_H

#include "clbt/clbt.h"

#include <stdbool.h>

typedef struct clbt__changes {
  uint32_t *listed_rows;  /* rows with changes, each once */
  uint32_t num_listed;
  bool *listed;           /* [max_num_reqs] */
  uint32_t *low, *high;   /* [max_num_reqs]: a listed row's changed
                             columns; low == high when only its length
                             changed, so that high - low is its cells */
  uint32_t *extent;       /* [max_num_reqs] */
  uint64_t cells;         /* high - low over the listed rows */
  uint32_t bound;         /* every listed row is below it */
} clbt__changes;

clbt_status clbt__changes_init(clbt__changes *changes, uint32_t max_num_reqs);
void clbt__changes_free(clbt__changes *changes);
/* Records that a row's columns [low, high) and its length changed. */
void clbt__changes_mark(clbt__changes *changes, uint32_t row, uint32_t low,
                        uint32_t high);
/* Puts the listed rows in ascending order, in which a packet lists them
   for the kernel's search (cl/commit.cl); a set's order, so it changes
   nothing else. Rows are usually marked in order: then it only looks. */
void clbt__changes_sort(clbt__changes *changes);
/* Forgets every change (after clear, which resets both sides). */
void clbt__changes_reset(clbt__changes *changes, uint32_t max_num_reqs);
/* Forgets the changes of the rows below `rows`, which a commit brought in
   sync. */
void clbt__changes_unlist(clbt__changes *changes, uint32_t rows);

#endif /* CLBT_CHANGES_H */
