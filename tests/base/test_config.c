/*
 * Config structs that can grow (src/base/config.c): struct_size 0 or this
 * header's size reads the same; a struct from a newer header (simulated by
 * a struct with one more field) is read when its unknown field is 0 and
 * refused otherwise; arrays of groups are walked by their elements' size.
 */
#include "clbt_test.h"

/* A later version's structs: this one's with a field appended. */
typedef struct newer_table_config {
  clbt_table_config known;
  uint32_t later_field;
} newer_table_config;

typedef struct newer_group_config {
  clbt_group_config known;
  uint32_t later_field;
} newer_group_config;

/* block 16, kernel block 8, 5 blocks a row: width 5 * 16 / 8 = 10. */
static clbt_table_config table_config(uint32_t struct_size) {
  return (clbt_table_config){.struct_size = struct_size, .block_size = 16,
                             .kernel_block_size = 8, .max_num_reqs = 2,
                             .max_num_blocks_per_req = 5,
                             .max_num_batched_tokens = 4};
}

static uint32_t created_width(const clbt_table_config *config) {
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), config, &table));
  uint32_t width = clbt_table_width(table);
  clbt_table_destroy(table);
  return width;
}

/* Refused by create (which makes no table) and by prepare alike. */
static void assert_table_refused(const clbt_table_config *config,
                                 const char *words) {
  clbt_table *table = NULL;
  clbt_assert_fails(clbt_table_create(clbt_test_device(), config, &table),
                    CLBT_INVALID_CONFIG, words);
  ck_assert_ptr_null(table);
  clbt_assert_fails(clbt_table_prepare(clbt_test_device(), config),
                    CLBT_INVALID_CONFIG, words);
}

START_TEST(zero_and_this_headers_size_read_alike) {
  clbt_table_config zero = table_config(0);
  clbt_table_config sized = table_config(sizeof(clbt_table_config));
  ck_assert_uint_eq(created_width(&zero), 10);
  ck_assert_uint_eq(created_width(&sized), 10);
  clbt_table_config initialised = CLBT_TABLE_CONFIG_INIT;
  ck_assert_uint_eq(initialised.struct_size, sizeof(clbt_table_config));
  ck_assert_uint_eq(initialised.block_size, 0);
  ck_assert_int_eq(initialised.slot_mode, 0);
  initialised.block_size = 16;
  initialised.kernel_block_size = 8;
  initialised.max_num_reqs = 2;
  initialised.max_num_blocks_per_req = 5;
  initialised.max_num_batched_tokens = 4;
  ck_assert_uint_eq(created_width(&initialised), 10);
}
END_TEST

/*
 * Sizes that are no layout: below 0.2's (ten 4-byte fields, 40 bytes),
 * between 0.2's and 0.3's (44), a later one off the 4-byte alignment, or
 * beyond a page (tests/base/test_abi.c sweeps every size of every struct).
 */
START_TEST(struct_sizes_of_no_layout_are_refused) {
  static const uint32_t sizes[] = {4, 39, 42, 46, 4097, UINT32_MAX};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    clbt_table_config config = table_config(sizes[i]);
    char words[192];
    snprintf(words, sizeof words,
             "config: struct_size is %u; clbt %s reads 0 (0.2's layout), 40 "
             "(0.2), 44 (0.3) or a later version's size (a multiple of 4 "
             "above 44, at most 4096)",
             (unsigned)sizes[i], clbt_version_string());
    assert_table_refused(&config, words);
  }
}
END_TEST

/* A newer header's struct: read when its later field is 0, else refused. */
START_TEST(newer_struct_is_read_when_its_later_fields_are_zero) {
  newer_table_config newer = {.known = table_config(sizeof newer)};
  ck_assert_uint_eq(sizeof newer, 48);
  ck_assert_uint_eq(created_width(&newer.known), 10);
  newer.later_field = 7;
  char words[128];
  snprintf(words, sizeof words,
           "config sets byte 44 of its 48, past the 44 bytes clbt %s knows",
           clbt_version_string());
  assert_table_refused(&newer.known, words);
}
END_TEST

/*
 * Groups one field larger than this library's are walked at their own
 * size: widths 8, 12 and 16 (rows aligned to 128 tokens: 8 x 16 = 128
 * tokens; 9 x 32 = 288 -> 384 = 12 blocks; 3 x 64 = 192 -> 256 = 4 blocks
 * of 4 kernel blocks). Read 24 bytes apart, group 1 would be garbage.
 */
static newer_group_config newer_groups[3];
static clbt_multi_table_config multi_config;

static void make_newer_groups(void) {
  static const clbt_group_config known[3] = {
      {.block_size = 16, .max_num_blocks = 8},
      {.block_size = 32, .max_num_blocks = 9},
      {.block_size = 64, .kernel_block_size = 16, .max_num_blocks = 3}};
  for (int g = 0; g < 3; ++g) {
    newer_groups[g] = (newer_group_config){.known = known[g]};
    newer_groups[g].known.struct_size = sizeof(newer_group_config);
  }
  multi_config = (clbt_multi_table_config){
      .struct_size = sizeof multi_config, .max_num_reqs = 2,
      .max_num_batched_tokens = 4, .num_groups = 3,
      .groups = &newer_groups[0].known};
}

static void assert_multi_refused(const char *words) {
  clbt_multi_table *table = NULL;
  clbt_assert_fails(
      clbt_multi_table_create(clbt_test_device(), &multi_config, &table),
      CLBT_INVALID_CONFIG, words);
  ck_assert_ptr_null(table);
  clbt_assert_fails(clbt_multi_table_prepare(clbt_test_device(), &multi_config),
                    CLBT_INVALID_CONFIG, words);
}

START_TEST(groups_are_walked_at_their_size) {
  make_newer_groups();
  clbt_multi_table *table = NULL;
  clbt_assert_ok(
      clbt_multi_table_create(clbt_test_device(), &multi_config, &table));
  static const uint32_t widths[3] = {8, 12, 16};
  for (uint32_t g = 0; g < 3; ++g)
    ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, g)),
                      widths[g]);
  clbt_multi_table_destroy(table);
  clbt_assert_ok(clbt_multi_table_prepare(clbt_test_device(), &multi_config));
}
END_TEST

START_TEST(groups_of_one_array_have_one_size) {
  make_newer_groups();
  newer_groups[1].known.struct_size = sizeof(clbt_group_config);
  assert_multi_refused("config->groups[1]: struct_size says 24 bytes and "
                       "groups[0]'s 28");
  make_newer_groups();
  newer_groups[2].later_field = 1;
  assert_multi_refused("config->groups[2] sets byte 24 of its 28");
  make_newer_groups();
  newer_groups[0].known.struct_size = 8;
  assert_multi_refused("config->groups[0]: struct_size is 8");
  make_newer_groups();
  multi_config.struct_size = 12;
  assert_multi_refused("config: struct_size is 12");
}
END_TEST

/* The multi-group config as 0.3 declared it, before exact_widths. */
typedef struct multi_table_config_0_3 {
  uint32_t struct_size, max_num_reqs, max_num_batched_tokens, cp_world_size,
      cp_rank, cp_interleave_size, num_groups;
  const clbt_group_config *groups;
  clbt_commit_mode commit_mode;
  uint32_t zero_gathered_tails;
} multi_table_config_0_3;

/* Groups 0 and 1 of a table made from config (a struct of any layout). */
static void assert_widths(const void *config, uint32_t width0,
                          uint32_t width1) {
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), config, &table));
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 0)), width0);
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 1)), width1);
  clbt_multi_table_destroy(table);
  clbt_assert_ok(clbt_multi_table_prepare(clbt_test_device(), config));
}

/*
 * exact_widths (0.4): 9 blocks of 16 stay 9 (aligned: 128 tokens are 8
 * blocks, so 16); 3 blocks of 64 over kernel blocks of 16 stay 3 x 4 = 12
 * (aligned: 4 blocks, 16). A struct of 0.3's size has no such field,
 * whatever lies past it, and gets the aligned default; so does
 * struct_size 0, the 0.2 layout.
 */
START_TEST(exact_widths_are_read_only_when_struct_size_covers_them) {
  static const clbt_group_config groups[2] = {
      {.block_size = 16, .max_num_blocks = 9},
      {.block_size = 64, .kernel_block_size = 16, .max_num_blocks = 3}};
  clbt_multi_table_config config = CLBT_MULTI_TABLE_CONFIG_INIT;
  config.max_num_reqs = 2;
  config.max_num_batched_tokens = 4;
  config.num_groups = 2;
  config.groups = groups;
  assert_widths(&config, 16, 16);
  config.exact_widths = 1;
  assert_widths(&config, 9, 12);

  struct {
    multi_table_config_0_3 config;
    uint32_t beyond[2]; /* where 0.4's exact_widths would lie */
  } older = {{.struct_size = sizeof(multi_table_config_0_3),
              .max_num_reqs = 2, .max_num_batched_tokens = 4,
              .num_groups = 2, .groups = groups},
             {1, 0}};
  ck_assert_uint_eq(sizeof(multi_table_config_0_3), 48);
  assert_widths(&older.config, 16, 16);
  config.struct_size = 0;
  assert_widths(&config, 16, 16);

  config.struct_size = sizeof config;
  config.reserved = 1;
  clbt_multi_table *table = NULL;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "config->reserved is 1; it must be 0");
  ck_assert_ptr_null(table);
}
END_TEST

/* Zero-initialised groups and configs, and the macros, read alike. */
START_TEST(multi_configs_of_every_spelling_read_alike) {
  clbt_group_config zero[2] = {{.block_size = 16, .max_num_blocks = 8},
                               {.block_size = 32, .max_num_blocks = 9}};
  clbt_group_config initialised[2] = {CLBT_GROUP_CONFIG_INIT,
                                      CLBT_GROUP_CONFIG_INIT};
  ck_assert_uint_eq(initialised[1].struct_size, sizeof(clbt_group_config));
  initialised[0].block_size = 16;
  initialised[0].max_num_blocks = 8;
  initialised[1].block_size = 32;
  initialised[1].max_num_blocks = 9;
  clbt_multi_table_config zero_config = {.max_num_reqs = 2,
                                         .max_num_batched_tokens = 4,
                                         .num_groups = 2, .groups = zero};
  clbt_multi_table_config macro_config = CLBT_MULTI_TABLE_CONFIG_INIT;
  ck_assert_uint_eq(macro_config.struct_size,
                    sizeof(clbt_multi_table_config));
  macro_config.max_num_reqs = 2;
  macro_config.max_num_batched_tokens = 4;
  macro_config.num_groups = 2;
  macro_config.groups = initialised;
  const clbt_multi_table_config *configs[2] = {&zero_config, &macro_config};
  for (int c = 0; c < 2; ++c) {
    clbt_multi_table *table = NULL;
    clbt_assert_ok(
        clbt_multi_table_create(clbt_test_device(), configs[c], &table));
    ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 0)), 8);
    ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 1)), 12);
    clbt_multi_table_destroy(table);
  }
}
END_TEST

/*
 * The largest struct_size a later version may give, a page: read like this
 * library's own when every byte past the 44 it knows is 0. One byte more
 * is refused (struct_sizes_of_no_layout_are_refused).
 */
START_TEST(a_page_sized_struct_is_read) {
  static union {
    clbt_table_config config;
    unsigned char bytes[4096];
  } page;
  memset(&page, 0, sizeof page);
  page.config = table_config(4096);
  ck_assert_uint_eq(created_width(&page.config), 10);
}
END_TEST

/*
 * Every byte past the ones this library knows is checked, the struct's
 * last one too: a later version's field may end there.
 */
START_TEST(a_later_struct_is_checked_to_its_last_byte) {
  static union {
    clbt_table_config config;
    unsigned char bytes[64];
  } later;
  for (size_t set = 44; set < 64; set += 19) { /* bytes 44 and 63 */
    memset(&later, 0, sizeof later);
    later.config = table_config(64);
    later.bytes[set] = 1;
    char words[128];
    snprintf(words, sizeof words,
             "config sets byte %zu of its 64, past the 44 bytes clbt %s knows",
             set, clbt_version_string());
    assert_table_refused(&later.config, words);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("config");
  TCase *tc = tcase_create("config");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, zero_and_this_headers_size_read_alike);
  tcase_add_test(tc, struct_sizes_of_no_layout_are_refused);
  tcase_add_test(tc, newer_struct_is_read_when_its_later_fields_are_zero);
  tcase_add_test(tc, groups_are_walked_at_their_size);
  tcase_add_test(tc, groups_of_one_array_have_one_size);
  tcase_add_test(tc, multi_configs_of_every_spelling_read_alike);
  tcase_add_test(tc, exact_widths_are_read_only_when_struct_size_covers_them);
  tcase_add_test(tc, a_page_sized_struct_is_read);
  tcase_add_test(tc, a_later_struct_is_checked_to_its_last_byte);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
