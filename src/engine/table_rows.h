/*
 * Row operations (table_rows.c). Each is a check, which changes nothing,
 * and an apply, which cannot fail: the multi-group table checks every
 * group before it applies any, so that its operations are all or nothing.
 */
#ifndef CLBT_TABLE_ROWS_H
#define CLBT_TABLE_ROWS_H

#include "clbt/clbt.h"

#include <stdbool.h>

clbt_status clbt__check_append(const clbt_table *table, uint32_t row,
                               const int32_t *block_ids, size_t n,
                               bool replace);
void clbt__apply_append(clbt_table *table, uint32_t row,
                        const int32_t *block_ids, size_t n, bool replace);
clbt_status clbt__check_row(const clbt_table *table, const char *name,
                            uint32_t row);
/* Checks the two rows of a move or swap; a NULL table fails too. */
clbt_status clbt__check_pair(const clbt_table *table, const char *first_name,
                             uint32_t first, const char *second_name,
                             uint32_t second);
/*
 * The batch form of check_append and apply_append: entry i appends (or,
 * with replace, writes) counts[i] ids to rows[i], its ids following entry
 * i-1's in block_ids. The check sees the table as consecutive calls would,
 * so that a row named twice is checked against its length after the first.
 */
clbt_status clbt__check_rows(clbt_table *table, size_t num_rows,
                             const uint32_t *rows, const uint32_t *counts,
                             const int32_t *block_ids, bool replace);
void clbt__apply_rows(clbt_table *table, size_t num_rows, const uint32_t *rows,
                      const uint32_t *counts, const int32_t *block_ids,
                      bool replace);
void clbt__apply_clear_row(clbt_table *table, uint32_t row);
/* A truncate keeps a row's first num_blocks KV-manager blocks. */
clbt_status clbt__check_truncate(const clbt_table *table, uint32_t row,
                                 size_t num_blocks);
void clbt__apply_truncate(clbt_table *table, uint32_t row, size_t num_blocks);
void clbt__apply_move_row(clbt_table *table, uint32_t src, uint32_t dst);
void clbt__apply_swap_row(clbt_table *table, uint32_t a, uint32_t b);

#endif /* CLBT_TABLE_ROWS_H */
