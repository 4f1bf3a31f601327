/*
 * The worked examples. Each slot is derived by hand from block_table.py:
 *   virtual block size V = block_size * cp_world_size
 *   vbi = pos / V, vbo = pos % V
 *   local  <=> (vbo / interleave) % cp_world_size == cp_rank
 *   lo  = vbo / (cp_world_size * interleave) * interleave + vbo % interleave
 *   block index = vbi * (block_size / kernel_block_size) + lo / kernel_block_size
 *   slot = row[block index] * kernel_block_size + lo % kernel_block_size
 * Without CP (world 1) this is row[pos / k] * k + pos % k, k the kernel
 * block size.
 */
#include "worked_examples.h"

#include "clbt_test.h"

#define ROW(...) (const int32_t[]){__VA_ARGS__}
#define QSL(...) (const int32_t[]){__VA_ARGS__}
#define POSITIONS(...) (const int64_t[]){__VA_ARGS__}
#define SLOTS(...) (const int64_t[]){__VA_ARGS__}, \
    (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* block 16, 4 rows of 4 blocks, 8 slots: the common shape. */
#define PLAIN_16 {.block_size = 16, .max_num_reqs = 4, \
                  .max_num_blocks_per_req = 4, .max_num_batched_tokens = 8}

/* One request of 1500 tokens over 94 blocks 1000, 1003, 1006, ... */
#define LONG_TOKENS 1500
#define LONG_BLOCKS 94
static int32_t long_row[LONG_BLOCKS];
static int64_t long_positions[LONG_TOKENS];
static int64_t long_expected[LONG_TOKENS];

static void fill_long_example(void) {
  for (int i = 0; i < LONG_BLOCKS; ++i) long_row[i] = 1000 + 3 * i;
  for (int t = 0; t < LONG_TOKENS; ++t) {
    long_positions[t] = t;
    /* token t is in block t/16 at offset t%16 */
    long_expected[t] = (int64_t)(1000 + 3 * (t / 16)) * 16 + t % 16;
  }
}

static const clbt_worked_example examples[] = {
    /* pos 0, 15 -> block 5: 80, 95; pos 16 -> block 9: 144;
       request 1 pos 3, 4 -> block 2: 35, 36 */
    {"plain", PLAIN_16, {ROW(5, 9), ROW(2)}, {2, 1}, 2,
     2, QSL(0, 3, 5), POSITIONS(0, 15, 16, 3, 4), 5,
     SLOTS(80, 95, 144, 35, 36), 0},
    /* 20 cached tokens: pos 20..23 are in block index 1 (id 3) at 4..7 */
    {"prefix offset", PLAIN_16, {ROW(7, 3)}, {2}, 1,
     1, QSL(0, 4), POSITIONS(20, 21, 22, 23), 4,
     SLOTS(52, 53, 54, 55), 0},
    /* query_start_loc starts at 2: tokens 0 and 1 belong to no request */
    {"batch offset", PLAIN_16, {ROW(4)}, {1}, 1,
     1, QSL(2, 4), POSITIONS(99, 98, 0, 1), 4,
     SLOTS(-1, -1, 64, 65), 0},
    /* block 4: request 0 pos 3 -> 1*4+3 = 7; request 1 pos 2..6 -> 42, 43
       (id 10), 44, 45, 46 (id 11); request 2 is empty; request 3 pos 0, 1
       -> id 12: 48, 49 */
    {"ragged batch",
     {.block_size = 4, .max_num_reqs = 4, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 10},
     {ROW(1), ROW(10, 11), ROW(6), ROW(12)}, {1, 2, 1, 1}, 4,
     4, QSL(0, 1, 6, 6, 8), POSITIONS(3, 2, 3, 4, 5, 6, 0, 1), 8,
     SLOTS(7, 42, 43, 44, 45, 46, 48, 49), 0},
    /* filled in by fill_long_example: more tokens than Triton's 1024 */
    {"request over 1024 tokens",
     {.block_size = 16, .max_num_reqs = 2, .max_num_blocks_per_req = 100,
      .max_num_batched_tokens = 2048},
     {long_row}, {LONG_BLOCKS}, 1,
     1, QSL(0, LONG_TOKENS), long_positions, LONG_TOKENS,
     long_expected, LONG_TOKENS, 0},
    /* KV ids 3, 7 become kernel blocks 6, 7, 14, 15 (k = 16):
       pos 0, 15 -> 96, 111; 16, 31 -> 112, 127; 32, 47 -> 224, 239;
       63 -> 15*16+15 = 255 */
    {"hybrid 32 over 16",
     {.block_size = 32, .kernel_block_size = 16, .max_num_reqs = 2,
      .max_num_blocks_per_req = 4, .max_num_batched_tokens = 8},
     {ROW(3, 7)}, {2}, 1,
     1, QSL(0, 7), POSITIONS(0, 15, 16, 31, 32, 47, 63), 7,
     SLOTS(96, 111, 112, 127, 224, 239, 255), 0},
    /* V = 8; rank 0 owns even vbo, lo = vbo/2: pos 0,2,4,6 -> 20..23
       (id 5), pos 8 -> vbi 1 -> id 8: 32 */
    {"cp world 2 interleave 1 rank 0",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 10, .cp_world_size = 2, .cp_rank = 0},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 10), POSITIONS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 10,
     SLOTS(20, -1, 21, -1, 22, -1, 23, -1, 32, -1), 0},
    /* rank 1 owns odd vbo */
    {"cp world 2 interleave 1 rank 1",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 10, .cp_world_size = 2, .cp_rank = 1},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 10), POSITIONS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 10,
     SLOTS(-1, 20, -1, 21, -1, 22, -1, 23, -1, 32), 0},
    /* interleave 4: rank 0 owns vbo 0..3, lo = vbo % 4; pos 8, 9 -> id 8 */
    {"cp world 2 interleave 4 rank 0",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 10, .cp_world_size = 2, .cp_rank = 0,
      .cp_interleave_size = 4},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 10), POSITIONS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 10,
     SLOTS(20, 21, 22, 23, -1, -1, -1, -1, 32, 33), 0},
    /* rank 1 owns vbo 4..7 */
    {"cp world 2 interleave 4 rank 1",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 10, .cp_world_size = 2, .cp_rank = 1,
      .cp_interleave_size = 4},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 10), POSITIONS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 10,
     SLOTS(-1, -1, -1, -1, 20, 21, 22, 23, -1, -1), 0},
    /* V = 16; rank 2 owns vbo % 4 == 2, lo = vbo/4: pos 2, 6, 10, 14 ->
       20..23; pos 18 -> vbi 1, lo 0 -> id 8: 32 */
    {"cp world 4 interleave 1 rank 2",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 20, .cp_world_size = 4, .cp_rank = 2},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 20),
     POSITIONS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
               18, 19), 20,
     SLOTS(-1, -1, 20, -1, -1, -1, 21, -1, -1, -1, 22, -1, -1, -1, 23, -1, -1,
           -1, 32, -1), 0},
    /* block 8, V = 32; rank 3 owns (vbo/4) % 4 == 3, lo = vbo/16*4 + vbo%4:
       pos 12, 15 -> lo 0, 3: 40, 43; pos 28, 31 -> lo 4, 7: 44, 47;
       pos 44 -> vbi 1, vbo 12, lo 0 -> id 8: 64; pos 0 and 16 elsewhere */
    {"cp world 4 interleave 4 rank 3",
     {.block_size = 8, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 8, .cp_world_size = 4, .cp_rank = 3,
      .cp_interleave_size = 4},
     {ROW(5, 8)}, {2}, 1,
     1, QSL(0, 7), POSITIONS(0, 12, 15, 16, 28, 31, 44), 7,
     SLOTS(-1, 40, 43, -1, 44, 47, 64), 0},
    /* a padded batch: token 2 is past query_start_loc[1]; 16 slots */
    {"padding tail",
     {.block_size = 16, .max_num_reqs = 2, .max_num_blocks_per_req = 2,
      .max_num_batched_tokens = 16},
     {ROW(2)}, {1}, 1,
     1, QSL(0, 2), POSITIONS(0, 1, 7), 3,
     SLOTS(32, 33, -1), 0},
    /* slot ids are 64-bit: (2^31 - 1) * 256 + 255 = 549755813887 */
    {"largest block id",
     {.block_size = 256, .max_num_reqs = 1, .max_num_blocks_per_req = 1,
      .max_num_batched_tokens = 2},
     {ROW(INT32_MAX)}, {1}, 1,
     1, QSL(0, 2), POSITIONS(0, 255), 2,
     SLOTS(549755813632, 549755813887), 0},
    /* the row holds one block of 4 tokens: pos 4 and 100 have none */
    {"position past the row",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 4},
     {ROW(5)}, {1}, 1,
     1, QSL(0, 3), POSITIONS(3, 4, 100), 3,
     SLOTS(23, -1, -1), 2},
    {"negative position",
     {.block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 4,
      .max_num_batched_tokens = 4},
     {ROW(5)}, {1}, 1,
     1, QSL(0, 2), POSITIONS(-1, 0), 2,
     SLOTS(-1, 20), 1},
    /* malformed batches map nothing and reject every token */
    {"decreasing query_start_loc", PLAIN_16, {ROW(5), ROW(6)}, {1, 1}, 2,
     2, QSL(0, 2, 1), POSITIONS(0, 1), 2,
     SLOTS(-1, -1), 2},
    {"query_start_loc past num_tokens", PLAIN_16, {ROW(5)}, {1}, 1,
     1, QSL(0, 3), POSITIONS(0, 1), 2,
     SLOTS(-1, -1), 2},
    {"negative query_start_loc", PLAIN_16, {ROW(5)}, {1}, 1,
     1, QSL(-1, 1), POSITIONS(0), 1,
     SLOTS(-1), 1},
    {"no requests", PLAIN_16, {ROW(5)}, {1}, 1,
     0, QSL(0), NULL, 0,
     NULL, 0, 0},
};

int64_t clbt_worked_example_slot(const clbt_worked_example *example,
                                 uint32_t t) {
  return t < example->expected_count ? example->expected[t] : CLBT_PAD_SLOT_ID;
}

const clbt_worked_example *clbt_worked_examples(size_t *count) {
  fill_long_example();
  *count = sizeof examples / sizeof examples[0];
  return examples;
}

clbt_table *clbt_worked_example_table(const clbt_worked_example *example,
                                      bool commit) {
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &example->config, &table));
  for (uint32_t r = 0; r < CLBT_EXAMPLE_MAX_ROWS; ++r)
    if (example->row_counts[r])
      clbt_assert_ok(clbt_table_append_row(table, r, example->rows[r],
                                           example->row_counts[r]));
  if (commit) clbt_assert_ok(clbt_table_commit(table, example->committed));
  return table;
}
