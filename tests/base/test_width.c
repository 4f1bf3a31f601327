/* Row width (src/base/width.c): get_block_table_width, worked by hand. */
#include "clbt_test.h"

static uint32_t width_of(uint32_t blocks, uint32_t block_size,
                         uint32_t kernel_block_size, uint32_t alignment) {
  uint32_t width = 0;
  clbt_assert_ok(clbt_block_table_width(blocks, block_size, kernel_block_size,
                                        alignment, &width));
  return width;
}

START_TEST(worked_examples) {
  /* no alignment: the blocks themselves */
  ck_assert_uint_eq(width_of(10, 16, 0, 0), 10);
  ck_assert_uint_eq(width_of(0, 16, 0, 0), 0);
  /* 128 tokens = 8 blocks of 16: 10 rounds up to 16 */
  ck_assert_uint_eq(width_of(10, 16, 0, 128), 16);
  ck_assert_uint_eq(width_of(16, 16, 16, 128), 16);
  ck_assert_uint_eq(width_of(17, 16, 0, 128), 24);
  /* 128 tokens = 4 blocks of 32; 10 -> 12 blocks, 2 kernel blocks each */
  ck_assert_uint_eq(width_of(10, 32, 16, 128), 24);
  /* gcd(128, 48) = 16: 8 blocks of 48 span 384 = 3 x 128 tokens */
  ck_assert_uint_eq(width_of(10, 48, 0, 128), 16);
  /* a block of 256 already spans 128 tokens */
  ck_assert_uint_eq(width_of(3, 256, 0, 128), 3);
  /* gcd(128, 3) = 1: 128 blocks of 3 tokens */
  ck_assert_uint_eq(width_of(5, 3, 0, 128), 128);
  /* 131072-token context in blocks of 16, the benchmark's row */
  ck_assert_uint_eq(width_of(8192, 16, 0, 128), 8192);
}
END_TEST

START_TEST(errors) {
  uint32_t width = 77;
  clbt_assert_fails(clbt_block_table_width(1, 16, 0, 0, NULL),
                    CLBT_NULL_ARGUMENT, "width is NULL");
  clbt_assert_fails(clbt_block_table_width(1, 0, 0, 0, &width),
                    CLBT_INVALID_CONFIG, "block_size is 0");
  clbt_assert_fails(clbt_block_table_width(1, 32, 24, 0, &width),
                    CLBT_INVALID_CONFIG,
                    "kernel_block_size 24 does not divide block_size 32");
  clbt_assert_fails(clbt_block_table_width(UINT32_MAX, 16, 1, 0, &width),
                    CLBT_SIZE_OVERFLOW, "exceeds UINT32_MAX");
  /* the aligned block count itself passes UINT32_MAX */
  clbt_assert_fails(clbt_block_table_width(UINT32_MAX, 16, 0, 128, &width),
                    CLBT_SIZE_OVERFLOW, "4294967296 KV blocks");
  ck_assert_uint_eq(width, 77);
  ck_assert_uint_eq(width_of(UINT32_MAX, 16, 0, 0), UINT32_MAX);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("width");
  TCase *tc = tcase_create("width");
  tcase_add_test(tc, worked_examples);
  tcase_add_test(tc, errors);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
