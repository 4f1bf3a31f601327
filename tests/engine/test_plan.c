/*
 * The pure part of a call's plan (src/engine/plan.c), without a device:
 * where each launch's part of the commit packet goes, in docs/design.md's
 * order of preference ("Commit": in the record, else uploaded and folded
 * into the step kernel when each group's part is at most folded_items,
 * else uploaded and scattered by a launch of its own; a commit with no
 * step sends a part that fits in a scatter launch's record), how the part
 * is laid out (cl/contract.h: each group's two counts, then the sections
 * of the groups that scatter, 4 words a row and one an id), what each
 * launch's step kernel does of the call's work, and which entry in which
 * record size runs it; and the call's commands themselves, in order (each
 * WHOLE commit's writes and fill, the upload, each launch's scatter launch
 * and step kernel, with their records, buffers and grids). Every expected
 * value is worked out by hand from those rules.
 */
#include "clbt_test.h"
#include "engine/plan.h"

/* Tuning rows of the test's own: a CPU's, whose one or two work-groups
   always fold a packet, and a GPU's, which folds one only while its words
   times the step's work-groups stay within folded_budget. */
static const clbt__tuning cpu_row = {.local_size = 1,
                                     .cpu_items_per_group = 32768,
                                     .folded_items = 8192,
                                     .folded_budget = UINT32_MAX,
                                     .gpu_code = false};
static const clbt__tuning gpu_row = {.local_size = 256,
                                     .gpu_code = true,
                                     .pad_per_item = 16,
                                     .gathered_per_group = 4,
                                     .exported_per_group = 8,
                                     .part_groups_per_unit = 1,
                                     .folded_items = 8192,
                                     .folded_budget = 150000};

/* One group that maps tokens, one record size of 128 packet words, on a
   CPU of 2 compute units whose step kernel takes 2 work-groups. */
static const clbt__launch_shape one_group = {
    .num_groups = 1,
    .token_group_mask = 0x1,
    .tuning = &cpu_row,
    .num_classes = 1,
    .record_words = {128},
    .local_sizes = {1},
    .has_inline = true,
    .compute_units = 2,
    .cpu_step_groups = 2};

/* Three record sizes, as a GPU's: 64, 512 and 2048 words. */
static const clbt__launch_shape three_sizes = {
    .num_groups = 1,
    .token_group_mask = 0x1,
    .tuning = &gpu_row,
    .num_classes = 3,
    .record_words = {64, 512, 2048},
    .local_sizes = {256, 256, 256},
    .has_inline = true};

/* The same on an H200's 132 compute units, a 16384-slot slot mapping. */
static const clbt__launch_shape h200 = {
    .num_groups = 1,
    .token_group_mask = 0x1,
    .tuning = &gpu_row,
    .num_classes = 3,
    .record_words = {64, 512, 2048},
    .local_sizes = {256, 256, 256},
    .has_inline = true,
    .compute_units = 132,
    .max_num_tokens = 16384};

static clbt__commit_plan scatter(uint32_t rows, uint64_t cells) {
  return (clbt__commit_plan){
      .mode = CLBT_COMMIT_SCATTER, .rows = 16, .pending = {rows, cells}};
}

/* One launch's share of a call, as the call's plan makes it. */
static void plan_launch(const clbt__launch_shape *shape, uint32_t groups,
                        uint32_t work, uint32_t num_tokens, uint32_t padded,
                        clbt__commit_plan *commits, clbt__launch_plan *out) {
  clbt__launch_part part = {.shape = shape, .group_mask = groups,
                            .commits = commits};
  clbt__staging slots[9];
  size_t slot_words[9];
  clbt__call_plan plan = {.work = work, .num_tokens = num_tokens,
                          .padded = padded, .launches = &part,
                          .num_launches = 1, .slots = slots,
                          .slot_words = slot_words};
  clbt__plan_place(&plan);
  *out = part.share;
}

/* A call that commits nothing: no part, the entry of its work, the
   smallest record. */
START_TEST(a_call_without_a_commit_carries_no_packet) {
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, NULL, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_NONE);
  ck_assert_uint_eq(plan.part_words, 0);
  ck_assert_uint_eq(plan.work, CLBT_WORK_MAP);
  ck_assert(!plan.scatters);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_MAP);
  ck_assert_uint_eq(plan.step_class, 0);
  ck_assert(!clbt__plan_uploads(&plan));
}
END_TEST

/* 2 rows and 5 ids: the counts (2 words), then 4 x 2 + 5 = 13: 15 words,
   in the step kernel's record. */
START_TEST(a_small_part_travels_in_the_record) {
  clbt__commit_plan commits[1] = {scatter(2, 5)};
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_uint_eq(commits[0].packet_at, 2);
  ck_assert_uint_eq(plan.part_words, 15);
  ck_assert_uint_eq(plan.scatter_items, 7);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE);
  ck_assert(!plan.scatters);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, true), 15);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, false), 0);
  ck_assert_uint_eq(plan.step_class, 0);
}
END_TEST

/* A commit with no step after it: the part in a scatter launch's record. */
START_TEST(a_commit_alone_scatters_its_record) {
  clbt__commit_plan commits[1] = {scatter(2, 5)};
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, 0, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE_APART);
  ck_assert(plan.scatters);
  ck_assert_int_eq(plan.scatter_entry, CLBT__ENTRY_SCATTER);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, false), 15);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, true), 0);
  ck_assert(!clbt__plan_uploads(&plan));
}
END_TEST

/* 20 rows and 200 ids: 2 + 80 + 200 = 282 words, past the record's 128;
   220 items, under folded_items: uploaded, applied by the step kernel. A
   commit alone of it cannot fold: uploaded and scattered. */
START_TEST(a_part_past_the_record_is_uploaded) {
  clbt__commit_plan commits[1] = {scatter(20, 200)};
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_uint_eq(plan.part_words, 282);
  ck_assert_int_eq(plan.place, CLBT__PACKET_FOLDED);
  ck_assert(clbt__plan_uploads(&plan));
  ck_assert(!plan.scatters);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, true), 0);
  plan_launch(&one_group, 0x1, 0, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_SCATTERED);
  ck_assert(plan.scatters);
  ck_assert_uint_eq(plan.scatter_class, 0);
}
END_TEST

/* 8193 items in one group (1 row and 8192 ids, or 100 rows and 8093 ids):
   too many to fold, scattered before the step kernel, which carries no
   packet. 1 row and 8191 ids folds. */
START_TEST(a_large_part_is_scattered_before_the_step) {
  clbt__commit_plan commits[1] = {scatter(1, 8192)};
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_SCATTERED);
  ck_assert(plan.scatters);
  ck_assert_uint_eq(plan.work, CLBT_WORK_MAP);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, true), 0);
  commits[0] = scatter(100, 8093);
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_SCATTERED);
  commits[0] = scatter(1, 8191);
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_FOLDED);
}
END_TEST

/* A WHOLE or an empty commit has no section: no part to place. */
START_TEST(whole_and_empty_commits_have_no_part) {
  clbt__commit_plan commits[1] = {
      {.mode = CLBT_COMMIT_WHOLE, .rows = 16, .pending = {3, 40}}};
  clbt__launch_plan plan;
  plan_launch(&one_group, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_uint_eq(plan.part_words, 0);
  ck_assert_int_eq(plan.place, CLBT__PACKET_NONE);
  commits[0] = (clbt__commit_plan){.mode = CLBT_COMMIT_AUTO, .rows = 16};
  plan_launch(&one_group, 0x1, 0, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_NONE);
  ck_assert(!plan.scatters);
}
END_TEST

/* Groups 0 and 2 of three take part: counts for all three (6 words), then
   group 0's section (4 + 3 = 7 words) at 6, group 2's (2 x 4 = 8) at 13,
   21 words; group 1, not in the call, is not placed. */
START_TEST(sections_follow_every_groups_counts) {
  const clbt__launch_shape three = {.num_groups = 3,
                                    .token_group_mask = 0x7,
                                    .tuning = &cpu_row,
                                    .num_classes = 1,
                                    .record_words = {128},
                                    .local_sizes = {1},
                                    .has_inline = true};
  clbt__commit_plan commits[3] = {scatter(1, 3), scatter(5, 5),
                                  scatter(2, 0)};
  commits[1].packet_at = 99;
  clbt__launch_plan plan;
  plan_launch(&three, 0x5, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_uint_eq(commits[0].packet_at, 6);
  ck_assert_uint_eq(commits[2].packet_at, 13);
  ck_assert_uint_eq(commits[1].packet_at, 99);
  ck_assert_uint_eq(plan.part_words, 21);
  ck_assert_uint_eq(plan.scatter_items, 4);
  ck_assert_uint_eq(plan.group_mask, 0x5);
}
END_TEST

/* The smallest record that holds the part: 0 words in 64, 64 in 64, 65 in
   512, 600 in 2048; 3000 in none, so the part is uploaded and the step's
   record is the smallest. A GPU's entry is WHOLE whatever the work. */
START_TEST(the_smallest_record_that_holds_the_part) {
  ck_assert_uint_eq(clbt__record_class(&three_sizes, 0), 0);
  ck_assert_uint_eq(clbt__record_class(&three_sizes, 64), 0);
  ck_assert_uint_eq(clbt__record_class(&three_sizes, 65), 1);
  ck_assert_uint_eq(clbt__record_class(&three_sizes, 600), 2);
  ck_assert_uint_eq(clbt__record_class(&three_sizes, 3000), 3);
  /* 2 + 4 x 10 + 58 = 100 words. */
  clbt__commit_plan commits[1] = {scatter(10, 58)};
  clbt__launch_plan plan;
  plan_launch(&three_sizes, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE);
  ck_assert_uint_eq(plan.step_class, 1);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_WHOLE);
  /* 2 + 4 x 100 + 2598 = 3000 words. */
  commits[0] = scatter(100, 2598);
  plan_launch(&three_sizes, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_FOLDED);
  ck_assert_uint_eq(plan.step_class, 0);
  plan_launch(&three_sizes, 0x1, CLBT_WORK_GATHER, 0, 0, NULL, &plan);
  ck_assert_uint_eq(plan.step_class, 0);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_WHOLE);
}
END_TEST

/* A device whose argument space leaves no record room (has_inline false)
   uploads every part, even a commit alone's smallest. */
START_TEST(no_record_room_uploads_every_part) {
  const clbt__launch_shape placeholder = {.num_groups = 1,
                                          .token_group_mask = 0x1,
                                          .tuning = &cpu_row,
                                          .num_classes = 1,
                                          .record_words = {1},
                                          .local_sizes = {1},
                                          .has_inline = false};
  clbt__commit_plan commits[1] = {scatter(1, 0)};
  clbt__launch_plan plan;
  plan_launch(&placeholder, 0x1, CLBT_WORK_MAP, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_FOLDED);
  plan_launch(&placeholder, 0x1, 0, 0, 0, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_SCATTERED);
  ck_assert(plan.scatters);
}
END_TEST

/*
 * A launch's step kernel does what its groups of the call hold: group 0
 * maps tokens, group 1 maps none. The map, the export (with its parts)
 * and token slots need group 0; the state slots group 1; the gather
 * either.
 */
START_TEST(a_launch_does_what_its_groups_hold) {
  const clbt__launch_shape two = {.num_groups = 2,
                                  .token_group_mask = 0x1,
                                  .tuning = &cpu_row,
                                  .num_classes = 1,
                                  .record_words = {128},
                                  .local_sizes = {1},
                                  .has_inline = true};
  const uint32_t work = CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_EXPORT |
                        CLBT_WORK_EXPORT_DENSE | CLBT_WORK_STATE_SLOTS;
  clbt__launch_plan plan;
  plan_launch(&two, 0x2, work, 0, 0, NULL, &plan);
  ck_assert_uint_eq(plan.work, CLBT_WORK_GATHER | CLBT_WORK_STATE_SLOTS);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_STATES);
  plan_launch(&two, 0x1, work, 0, 0, NULL, &plan);
  ck_assert_uint_eq(plan.work, CLBT_WORK_MAP | CLBT_WORK_GATHER |
                                   CLBT_WORK_EXPORT | CLBT_WORK_EXPORT_DENSE);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_EXPORT);
  plan_launch(&two, 0x3, work, 0, 0, NULL, &plan);
  ck_assert_uint_eq(plan.work, work);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_FULL);
  plan_launch(&two, 0x2, CLBT_WORK_TOKEN_SLOTS, 0, 0, NULL, &plan);
  ck_assert_uint_eq(plan.work, 0);
  plan_launch(&two, 0x1, CLBT_WORK_TOKEN_SLOTS, 0, 0, NULL, &plan);
  ck_assert_int_eq(plan.step_entry, CLBT__ENTRY_TOKENS);
}
END_TEST

/* A CPU's entry is the first in cl/contract.h's order whose parts hold
   the work's; the flags (idx_mapping, the export's parts) are no part. */
START_TEST(the_first_entry_that_holds_the_work) {
  static const struct {
    uint32_t work;
    clbt__entry entry;
  } cases[] = {
      {CLBT_WORK_MAP, CLBT__ENTRY_MAP},
      {CLBT_WORK_MAP | CLBT_WORK_IDX_MAPPING, CLBT__ENTRY_MAP},
      {CLBT_WORK_MAP | CLBT_WORK_GATHER, CLBT__ENTRY_GATHER},
      {CLBT_WORK_GATHER, CLBT__ENTRY_GATHER},
      {CLBT_WORK_MAP | CLBT_WORK_EXPORT | CLBT_WORK_EXPORT_CONTEXT,
       CLBT__ENTRY_EXPORT},
      {CLBT_WORK_MAP | CLBT_WORK_STATE_SLOTS, CLBT__ENTRY_STATES},
      {CLBT_WORK_MAP | CLBT_WORK_EXPORT | CLBT_WORK_STATE_SLOTS,
       CLBT__ENTRY_FULL},
      {CLBT_WORK_TOKEN_SLOTS, CLBT__ENTRY_TOKENS}};
  const clbt__launch_shape both = {.num_groups = 2,
                                   .token_group_mask = 0x1,
                                   .tuning = &cpu_row,
                                   .num_classes = 1,
                                   .record_words = {128},
                                   .local_sizes = {1},
                                   .has_inline = true};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    clbt__launch_plan plan;
    plan_launch(&both, 0x3, cases[i].work, 0, 0, NULL, &plan);
    ck_assert_msg(plan.step_entry == cases[i].entry,
                  "work 0x%x: entry %d, not %d", (unsigned)cases[i].work,
                  (int)plan.step_entry, (int)cases[i].entry);
  }
}
END_TEST

/*
 * A decode step of 1024 requests, one token each, that gathers and
 * exports, on the H200: the slot mapping's 1024 tokens and
 * (16384 - 1024) / 16 = 960 pad entries on ceil(1984 / 256) = 8
 * work-groups; the gather's 1024 / 4 = 256 work-groups and the export's
 * 1024 / 8 = 128 capped at one a compute unit: 132 and 128; 268 in all.
 */
START_TEST(each_part_on_its_own_work_groups) {
  const uint32_t work = CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_EXPORT;
  clbt__grid grid = clbt__plan_grid(&h200, 256, work, 0x1, 1024, 1024);
  ck_assert_uint_eq(grid.map_groups, 8);
  ck_assert_uint_eq(grid.gather_groups, 132);
  ck_assert_uint_eq(grid.export_groups, 128);
  ck_assert_uint_eq(grid.state_groups, 0);
  ck_assert_uint_eq(grid.global_size, 268 * 256);
  /* A CPU's grid: its step kernel's work-groups of one work-item, every
     part on each. */
  grid = clbt__plan_grid(&one_group, 1, work, 0x1, 1024, 1024);
  ck_assert_uint_eq(grid.global_size, 2);
  ck_assert_uint_eq(grid.map_groups + grid.gather_groups, 0);
}
END_TEST

/*
 * Each exported group takes work-groups of its own, though there are
 * fewer compute units than groups: four token-mapping groups on a GPU of
 * 2 compute units, one work-group a unit for a part. 8 requests are one
 * work-group's worth (exported_per_group 8) a group: 4 work-groups, not
 * the 2 of the cap; 64 requests, 8 a group, are capped at 4, one each.
 */
static const clbt__launch_shape small_gpu_four_groups = {
    .num_groups = 4,
    .token_group_mask = 0xF,
    .tuning = &gpu_row,
    .num_classes = 3,
    .record_words = {64, 512, 2048},
    .local_sizes = {256, 256, 256},
    .has_inline = true,
    .compute_units = 2,
    .max_num_tokens = 16};

START_TEST(every_exported_group_gets_a_work_group) {
  clbt__grid grid = clbt__plan_grid(&small_gpu_four_groups, 256,
                                    CLBT_WORK_EXPORT, 0xF, 8, 8);
  ck_assert_uint_eq(grid.export_groups, 4);
  ck_assert_uint_eq(grid.global_size, 4 * 256);
  grid = clbt__plan_grid(&small_gpu_four_groups, 256, CLBT_WORK_EXPORT, 0xF,
                         16, 64);
  ck_assert_uint_eq(grid.export_groups, 4);
}
END_TEST

/*
 * Folding costs every work-group the whole packet: 64 rows of one new id
 * are 2 + 64 x 5 = 322 words, on that step's 268 work-groups 86,296 words,
 * within 150,000: folded in the record. 256 rows (2 + 1280 = 1282 words)
 * would be 343,576: in the record of a scatter launch of its own. The
 * slot mapping alone takes 8 work-groups: 10,256, folded.
 */
START_TEST(a_packet_folds_while_its_work_groups_stay_cheap) {
  const uint32_t work = CLBT_WORK_MAP | CLBT_WORK_GATHER | CLBT_WORK_EXPORT;
  clbt__commit_plan commits[1] = {scatter(64, 64)};
  clbt__launch_plan plan;
  plan_launch(&h200, 0x1, work, 1024, 1024, commits, &plan);
  ck_assert_uint_eq(plan.part_words, 322);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE);
  ck_assert(!plan.scatters);
  commits[0] = scatter(256, 256);
  plan_launch(&h200, 0x1, work, 1024, 1024, commits, &plan);
  ck_assert_uint_eq(plan.part_words, 1282);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE_APART);
  ck_assert(plan.scatters);
  ck_assert(clbt__plan_folds(&plan) == false);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, false), 1282);
  ck_assert_uint_eq(clbt__plan_inline_words(&plan, true), 0);
  ck_assert_uint_eq(plan.scatter_class, 2);
  ck_assert_uint_eq(plan.step_class, 0);
  plan_launch(&h200, 0x1, CLBT_WORK_MAP, 1024, 1024, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE);
  /* Past the largest record: uploaded, and scattered apart or folded. */
  commits[0] = scatter(256, 2048);
  plan_launch(&h200, 0x1, work, 1024, 1024, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_SCATTERED);
  plan_launch(&h200, 0x1, CLBT_WORK_MAP, 1024, 1024, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_FOLDED);
}
END_TEST

/*
 * The fold is decided with the work-group size the launch will run, not
 * the tuning row's: a kernel whose CL_KERNEL_WORK_GROUP_SIZE allows only
 * 128 runs the slot mapping of 16384 tokens on 16384 / 128 = 128
 * work-groups, not 64. A part of 2 + 4 x 100 + 1598 = 2000 words costs
 * 128 x 2000 = 256,000 folded, past folded_budget (150,000): it goes in
 * the record of a scatter launch of its own. With 256 it would be 64 x
 * 2000 = 128,000, folded.
 */
START_TEST(the_fold_is_decided_with_the_kernels_work_group_size) {
  clbt__launch_shape narrow = h200;
  for (int c = 0; c < CLBT_MAX_RECORD_CLASSES; ++c) narrow.local_sizes[c] = 128;
  clbt__commit_plan commits[1] = {scatter(100, 1598)};
  clbt__launch_plan plan;
  plan_launch(&narrow, 0x1, CLBT_WORK_MAP, 16384, 1024, commits, &plan);
  ck_assert_uint_eq(plan.part_words, 2000);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE_APART);
  for (int c = 0; c < CLBT_MAX_RECORD_CLASSES; ++c) narrow.local_sizes[c] = 256;
  plan_launch(&narrow, 0x1, CLBT_WORK_MAP, 16384, 1024, commits, &plan);
  ck_assert_int_eq(plan.place, CLBT__PACKET_INLINE);
}
END_TEST

/* ---- the commands -------------------------------------------------------- */

/* Stand-ins for the buffers a plan names: the plan only copies them. */
#define FAKE_BUFFER(n) ((cl_mem)(uintptr_t)(0x1000 + (n)))

/* Two records a launch keeps, and the staging slots of a call. */
static clbt__record step_record, scatter_record;
static clbt__staging slots[9];
static size_t slot_words[9];
static clbt__command commands[32];

/* A call's plan of one launch, its batch's buffers numbered 1 to 6 (the
   serials 11 to 16), version 7. */
static clbt__call_plan call_of(clbt__launch_part *part, uint32_t work,
                               uint32_t num_tokens, uint32_t padded) {
  clbt__call_plan plan = {.work = work,
                          .num_tokens = num_tokens,
                          .padded = padded,
                          .version = 7,
                          .launches = part,
                          .num_launches = 1,
                          .slots = slots,
                          .slot_words = slot_words,
                          .commands = commands};
  plan.head.num_reqs = padded;
  plan.head.num_tokens = num_tokens;
  plan.head.padded_reqs = padded;
  for (int b = 0; b < CLBT__NUM_BATCH_BUFFERS; ++b) {
    plan.batch[b] = FAKE_BUFFER(b + 1);
    plan.serials[b] = 11 + (uint64_t)b;
  }
  return plan;
}

/*
 * A steady step of one group, 2 rows and 5 ids (15 words): one command,
 * the step kernel with its part in its record of 64 words, which the last
 * call had left 40 words into: words 15 to 39 are zeroed (the part is
 * commit.c's to pack), the head says where the packet is and what runs,
 * and the launch binds the batch's query_start_loc and positions (this
 * batch has no idx_mapping), no seq_lens (its work reads none), no packet
 * buffer. On the H200's grid for 4 tokens: 4 + (16384 - 4) / 16 = 1028
 * items, on 256 a work-group 5 work-groups of the map.
 */
START_TEST(a_steady_step_is_one_launch_its_packet_in_its_record) {
  clbt__commit_plan commits[1] = {scatter(2, 5)};
  clbt__launch_part part = {.index = 3, .shape = &h200, .group_mask = 0x1,
                            .commits = commits, .step_record = &step_record,
                            .scatter_record = &scatter_record};
  for (int w = 0; w < 40; ++w) step_record.sent.packet[w] = 0xAB;
  step_record.dirty_words = 40;
  clbt__call_plan plan = call_of(&part, CLBT_WORK_MAP, 4, 4);
  plan.batch[CLBT__BATCH_IDX_MAPPING] = NULL;
  plan.batch[CLBT__BATCH_SEQ_LENS] = NULL;
  clbt__plan_place(&plan);
  ck_assert_uint_eq(plan.num_slots, 0);
  ck_assert_ptr_null(plan.upload);
  clbt__plan_commands(&plan);
  ck_assert_uint_eq(plan.num_commands, 1);
  const clbt__launch_call *call = &commands[0].launch;
  ck_assert_int_eq(commands[0].kind, CLBT__COMMAND_LAUNCH);
  ck_assert_uint_eq(call->launch, 3);
  ck_assert_int_eq(call->entry, CLBT__ENTRY_WHOLE);
  ck_assert_uint_eq(call->record_class, 0);
  ck_assert_ptr_eq(call->record, &step_record.sent);
  ck_assert_uint_eq(call->record_bytes,
                    sizeof(clbt__record_head) + 64 * sizeof(cl_uint));
  ck_assert_uint_eq(call->global_size, 5 * 256);
  ck_assert_uint_eq(call->local_size, 256);
  const clbt__record_head *head = &call->record->head;
  ck_assert_uint_eq(head->work, CLBT_WORK_MAP | CLBT_WORK_PACKET_INLINE);
  ck_assert_uint_eq(head->packet_words, 15);
  ck_assert_uint_eq(head->group_mask, 0x1);
  ck_assert_uint_eq(head->version_low, 7);
  ck_assert_uint_eq(head->map_groups, 5);
  ck_assert_uint_eq(head->num_tokens, 4);
  for (int w = 0; w < 15; ++w) ck_assert_uint_eq(call->record->packet[w], 0xAB);
  for (int w = 15; w < 40; ++w) ck_assert_uint_eq(call->record->packet[w], 0);
  ck_assert_uint_eq(step_record.dirty_words, 15);
  ck_assert_ptr_eq(call->buffers[CLBT__BOUND_QUERY_START_LOC],
                   FAKE_BUFFER(1));
  ck_assert_uint_eq(call->serials[CLBT__BOUND_QUERY_START_LOC], 11);
  ck_assert_ptr_eq(call->buffers[CLBT__BOUND_POSITIONS], FAKE_BUFFER(2));
  ck_assert_ptr_null(call->buffers[CLBT__BOUND_IDX_MAPPING]);
  ck_assert_ptr_null(call->buffers[CLBT__BOUND_SEQ_LENS]);
  ck_assert_ptr_null(call->buffers[CLBT__BOUND_PACKET]);
}
END_TEST

/* Two groups on the H200: group 0 maps tokens, group 1 does not. */
static const clbt__launch_shape h200_two = {
    .num_groups = 2,
    .token_group_mask = 0x1,
    .tuning = &gpu_row,
    .num_classes = 3,
    .record_words = {64, 512, 2048},
    .local_sizes = {256, 256, 256},
    .has_inline = true,
    .compute_units = 132,
    .max_num_tokens = 16384};

/*
 * Group 0 commits 3 rows of width 4 WHOLE, group 1 scatters 1 row of 8192
 * ids: 2 x 2 + 4 + 8192 = 8200 words, past the largest record and past
 * folded_items (8193 items): uploaded and scattered by a launch of its
 * own. The commands, in order: the WHOLE commit's 48 bytes of cells from
 * its slot and its 12 bytes of lengths from word 12 of it, its 8 rows'
 * versions (64 bytes) filled with the call's; the upload (8200 words); the
 * scatter launch (the upload's buffer, its part from word 0); the step
 * kernel, which applies no packet. The slots: the WHOLE commit's 3 x 5
 * words, then the upload's.
 */
START_TEST(whole_writes_then_the_upload_then_each_launch) {
  clbt__commit_plan commits[2] = {
      {.mode = CLBT_COMMIT_WHOLE,
       .rows = 3,
       .pending = {1, 1},
       .whole = {FAKE_BUFFER(21), FAKE_BUFFER(22), FAKE_BUFFER(23), 4, 8,
                 NULL}},
      scatter(1, 8192)};
  clbt__launch_part part = {.index = 0, .shape = &h200_two, .group_mask = 0x3,
                            .commits = commits, .step_record = &step_record,
                            .scatter_record = &scatter_record};
  clbt__call_plan plan = call_of(&part, CLBT_WORK_MAP, 1, 1);
  clbt__plan_place(&plan);
  ck_assert_int_eq(part.share.place, CLBT__PACKET_SCATTERED);
  ck_assert_uint_eq(plan.num_slots, 2);
  ck_assert_ptr_eq(commits[0].whole.slot, &slots[0]);
  ck_assert_uint_eq(slot_words[0], 15);
  ck_assert_ptr_eq(plan.upload, &slots[1]);
  ck_assert_uint_eq(slot_words[1], 8200);
  slots[1].buffer = FAKE_BUFFER(30); /* as the runner takes it */
  slots[1].buffer_serial = 31;
  clbt__plan_commands(&plan);
  ck_assert_uint_eq(plan.num_commands, 6);
  const clbt__command *c = commands;
  ck_assert_int_eq(c[0].kind, CLBT__COMMAND_WRITE);
  ck_assert_ptr_eq(c[0].buffer, FAKE_BUFFER(21));
  ck_assert_uint_eq(c[0].bytes, 48);
  ck_assert_ptr_eq(c[0].slot, &slots[0]);
  ck_assert_uint_eq(c[0].slot_at, 0);
  ck_assert_int_eq(c[1].kind, CLBT__COMMAND_WRITE);
  ck_assert_ptr_eq(c[1].buffer, FAKE_BUFFER(22));
  ck_assert_uint_eq(c[1].bytes, 12);
  ck_assert_uint_eq(c[1].slot_at, 12);
  ck_assert_int_eq(c[2].kind, CLBT__COMMAND_FILL);
  ck_assert_ptr_eq(c[2].buffer, FAKE_BUFFER(23));
  ck_assert_uint_eq(c[2].bytes, 64);
  ck_assert_uint_eq(c[2].pattern, 7);
  ck_assert_int_eq(c[3].kind, CLBT__COMMAND_WRITE);
  ck_assert_ptr_eq(c[3].buffer, FAKE_BUFFER(30));
  ck_assert_uint_eq(c[3].bytes, 8200 * sizeof(uint32_t));
  ck_assert_ptr_eq(c[3].slot, &slots[1]);
  ck_assert_int_eq(c[4].kind, CLBT__COMMAND_LAUNCH);
  ck_assert_ptr_eq(c[4].launch.record, &scatter_record.sent);
  ck_assert_uint_eq(c[4].launch.record->head.work,
                    CLBT_WORK_SCATTER | CLBT_WORK_PACKET_IN_BUFFER);
  ck_assert_uint_eq(c[4].launch.record->head.packet_at_low, 0);
  ck_assert_ptr_eq(c[4].launch.buffers[CLBT__BOUND_PACKET], FAKE_BUFFER(30));
  ck_assert_uint_eq(c[4].launch.serials[CLBT__BOUND_PACKET], 31);
  ck_assert_ptr_null(c[4].launch.buffers[CLBT__BOUND_QUERY_START_LOC]);
  /* 8193 items on work-groups of 256: 33. */
  ck_assert_uint_eq(c[4].launch.global_size, 33 * 256);
  ck_assert_int_eq(c[5].kind, CLBT__COMMAND_LAUNCH);
  ck_assert_ptr_eq(c[5].launch.record, &step_record.sent);
  ck_assert_uint_eq(c[5].launch.record->head.work, CLBT_WORK_MAP);
  ck_assert_ptr_null(c[5].launch.buffers[CLBT__BOUND_PACKET]);
  /* seq_lens was given, but a step that maps only reads none. */
  ck_assert_ptr_null(c[5].launch.buffers[CLBT__BOUND_SEQ_LENS]);
}
END_TEST

/*
 * Token slots: the index matrix and the output take the arguments of the
 * positions and seq_lens (cl/contract.h), and the record says where the
 * launch's output sections start; 10 rows of 4 indices are 40 entries, one
 * work-group of 256.
 */
START_TEST(token_slots_take_the_positions_and_seq_lens_arguments) {
  clbt__launch_part part = {.index = 1, .shape = &h200, .group_mask = 0x1,
                            .token_section = 3, .step_record = &step_record,
                            .scatter_record = &scatter_record};
  clbt__call_plan plan = call_of(&part, CLBT_WORK_TOKEN_SLOTS, 10, 2);
  plan.head.indices_per_row = 4;
  clbt__plan_place(&plan);
  clbt__plan_commands(&plan);
  ck_assert_uint_eq(plan.num_commands, 1);
  const clbt__launch_call *call = &commands[0].launch;
  ck_assert_uint_eq(call->global_size, 256);
  ck_assert_uint_eq(call->record->head.token_section, 3);
  ck_assert_uint_eq(call->record->head.work & CLBT_WORK_TOKEN_SLOTS,
                    CLBT_WORK_TOKEN_SLOTS);
  ck_assert_ptr_eq(call->buffers[CLBT__BOUND_POSITIONS],
                   plan.batch[CLBT__BATCH_TOKEN_INDICES]);
  ck_assert_uint_eq(call->serials[CLBT__BOUND_POSITIONS], 15);
  ck_assert_ptr_eq(call->buffers[CLBT__BOUND_SEQ_LENS],
                   plan.batch[CLBT__BATCH_TOKEN_SLOTS]);
  ck_assert_uint_eq(call->serials[CLBT__BOUND_SEQ_LENS], 16);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_add_test(tc, a_call_without_a_commit_carries_no_packet);
  tcase_add_test(tc, each_part_on_its_own_work_groups);
  tcase_add_test(tc, every_exported_group_gets_a_work_group);
  tcase_add_test(tc, a_packet_folds_while_its_work_groups_stay_cheap);
  tcase_add_test(tc, the_fold_is_decided_with_the_kernels_work_group_size);
  tcase_add_test(tc, a_steady_step_is_one_launch_its_packet_in_its_record);
  tcase_add_test(tc, whole_writes_then_the_upload_then_each_launch);
  tcase_add_test(tc, token_slots_take_the_positions_and_seq_lens_arguments);
  tcase_add_test(tc, a_small_part_travels_in_the_record);
  tcase_add_test(tc, a_commit_alone_scatters_its_record);
  tcase_add_test(tc, a_part_past_the_record_is_uploaded);
  tcase_add_test(tc, a_large_part_is_scattered_before_the_step);
  tcase_add_test(tc, whole_and_empty_commits_have_no_part);
  tcase_add_test(tc, sections_follow_every_groups_counts);
  tcase_add_test(tc, the_smallest_record_that_holds_the_part);
  tcase_add_test(tc, no_record_room_uploads_every_part);
  tcase_add_test(tc, a_launch_does_what_its_groups_hold);
  tcase_add_test(tc, the_first_entry_that_holds_the_work);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
