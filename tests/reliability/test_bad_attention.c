/*
 * Bad input to the paged attention (clbt_attention_*, clbt_kv_pages_*),
 * as tests/reliability/test_bad_input.c does for the tables and the
 * KV-cache write: each case edits one field of a valid config or batch,
 * or swaps a handle or buffer for a NULL, foreign, small or unfit one, and
 * must return its status with a message naming the argument and its
 * bound, writing nothing: the output and lse keep their poison, the
 * counter stays 0, *out and *event stay as they were. The fixture: 4
 * query heads of 2 KV heads of 8 elements, 4-slot blocks, bf16; an fp8
 * descriptor and cache for the scales; a batch of 2 sequences, 3 tokens.
 */
#include "clbt_test.h"

#include "bad_attention.h"

static const char *const function_names[] = {
    "clbt_attention_create", "clbt_attention_enqueue",
    "clbt_attention_read_rejected_tokens",
    "clbt_attention_reset_rejected_tokens", "clbt_kv_pages_describe"};

#define FIELD(type, name, v) \
  .at = offsetof(type, name), .size = sizeof(((type *)NULL)->name), .value = (v)
#define CONFIG(name, v) FIELD(clbt_attention_config, name, v)
#define BATCH(name, v) FIELD(clbt_attention_batch, name, v)
#define BAD(fn, what, expected, ...) \
  {.function = fn, .argument = what, .status = expected, .words = __VA_ARGS__}

static const bad cases[] = {
    /* ---- the descriptor ---- */
    BAD(CREATE, "NULL device", CLBT_NULL_ARGUMENT, "device is NULL",
        .swap = NULL_HANDLE),
    BAD(CREATE, "NULL config", CLBT_NULL_ARGUMENT, "config is NULL",
        .swap = NULL_STRUCT),
    BAD(CREATE, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .swap = NULL_OUT),
    BAD(CREATE, "struct_size below 0.6's", CLBT_INVALID_CONFIG,
        "config: struct_size is 8; clbt", CONFIG(struct_size, 8)),
    BAD(CREATE, "a later version's field", CLBT_INVALID_CONFIG,
        "config sets byte 48 of its 56, past the 48 bytes clbt",
        .swap = LATER_FIELD),
    BAD(CREATE, "zero num_heads", CLBT_INVALID_CONFIG,
        "config->num_heads is 0; it must be >= 1", CONFIG(num_heads, 0)),
    BAD(CREATE, "zero num_kv_heads", CLBT_INVALID_CONFIG,
        "config->num_kv_heads is 0", CONFIG(num_kv_heads, 0)),
    BAD(CREATE, "zero head_size", CLBT_INVALID_CONFIG, "config->head_size is 0",
        CONFIG(head_size, 0)),
    BAD(CREATE, "zero block_size", CLBT_INVALID_CONFIG,
        "config->block_size is 0", CONFIG(block_size, 0)),
    BAD(CREATE, "heads not a multiple of KV heads", CLBT_INVALID_CONFIG,
        "config->num_heads 5 is not a multiple of num_kv_heads 2",
        CONFIG(num_heads, 5)),
    BAD(CREATE, "a head past 1024 elements", CLBT_INVALID_CONFIG,
        "config->head_size 1032 is above 1024", CONFIG(head_size, 1032)),
    BAD(CREATE, "a token past INT32_MAX elements", CLBT_SIZE_OVERFLOW,
        "config->num_heads 268435456 x head_size 8 exceeds INT32_MAX",
        CONFIG(num_heads, 268435456)),
    BAD(CREATE, "unknown layout", CLBT_INVALID_CONFIG,
        "config->layout 2 is not a clbt_kv_layout", CONFIG(layout, 2)),
    BAD(CREATE, "unknown cache_dtype", CLBT_INVALID_CONFIG,
        "config->cache_dtype 0 is not a clbt_kv_dtype", CONFIG(cache_dtype, 0)),
    BAD(CREATE, "fp8 cache without the query's type", CLBT_INVALID_CONFIG,
        "config->query_dtype is CLBT_KV_DTYPE_NONE with an fp8 cache_dtype",
        .swap = FP8, CONFIG(query_dtype, 0)),
    BAD(CREATE, "fp8 query without the output's type", CLBT_INVALID_CONFIG,
        "config->output_dtype is CLBT_KV_DTYPE_NONE with an fp8 query_dtype",
        .swap = FP8, CONFIG(output_dtype, 0)),
    BAD(CREATE, "unknown output_dtype", CLBT_INVALID_CONFIG,
        "config->output_dtype 7 is not a clbt_kv_dtype",
        CONFIG(output_dtype, 7)),
    BAD(CREATE, "negative softmax_scale", CLBT_INVALID_CONFIG,
        "config->softmax_scale -2 is not a finite value >= 0",
        CONFIG(softmax_scale, 0xc0000000u)),
    BAD(CREATE, "NaN softcap", CLBT_INVALID_CONFIG,
        "config->softcap nan is not a finite value >= 0",
        CONFIG(softcap, 0x7fc00000u)),
    BAD(CREATE, "an unknown tuning field", CLBT_INVALID_CONFIG,
        "CLBT_ATTENTION_TUNING: no field 'lanes'", .swap = UNKNOWN_TUNING),
    /* ---- a launch ---- */
    BAD(ENQUEUE, "NULL attention", CLBT_NULL_ARGUMENT, "attention is NULL",
        .swap = NULL_HANDLE),
    BAD(ENQUEUE, "NULL cache", CLBT_NULL_ARGUMENT, "cache is NULL",
        .swap = NULL_CACHE),
    BAD(ENQUEUE, "NULL batch", CLBT_NULL_ARGUMENT, "batch is NULL",
        .swap = NULL_STRUCT),
    BAD(ENQUEUE, "struct_size below 0.6's", CLBT_INVALID_CONFIG,
        "batch: struct_size is 4; clbt", BATCH(struct_size, 4)),
    BAD(ENQUEUE, "a cache of another head size", CLBT_INVALID_ARGUMENT,
        "cache's head_size 16 is not the attention's 8", .swap = WIDE_CACHE),
    BAD(ENQUEUE, "a cache of another context", CLBT_CONTEXT_MISMATCH,
        "cache belongs to another OpenCL context than the attention's",
        .swap = FOREIGN_CACHE),
    BAD(ENQUEUE, "num_seqs past INT32_MAX", CLBT_INVALID_ARGUMENT,
        "batch->num_seqs 2147483648 exceeds INT32_MAX",
        BATCH(num_seqs, 2147483648u)),
    BAD(ENQUEUE, "a table and a block table", CLBT_INVALID_ARGUMENT,
        "batch->table and batch->block_table are both set",
        .swap = BOTH_SOURCES),
    BAD(ENQUEUE, "no block ids", CLBT_INVALID_ARGUMENT,
        "batch->table and batch->block_table are both NULL with num_seqs 2",
        .swap = NO_SOURCE),
    BAD(ENQUEUE, "idx_mapping with a block table", CLBT_INVALID_ARGUMENT,
        "batch->idx_mapping names rows of a table", BATCH(idx_mapping, 1)),
    BAD(ENQUEUE, "no readable blocks", CLBT_INVALID_ARGUMENT,
        "batch->max_blocks_per_seq is 0 with a block_table",
        BATCH(max_blocks_per_seq, 0)),
    BAD(ENQUEUE, "rows closer than a row", CLBT_INVALID_ARGUMENT,
        "batch->block_table_stride 1 is below max_blocks_per_seq 2",
        BATCH(block_table_stride, 1)),
    BAD(ENQUEUE, "a rank past the world", CLBT_INVALID_ARGUMENT,
        "batch->cp_rank 1 is not below cp_world_size 1", BATCH(cp_rank, 1)),
    BAD(ENQUEUE, "an interleave not dividing the block", CLBT_INVALID_ARGUMENT,
        "batch->cp_interleave_size 3 does not divide block_size 4",
        BATCH(cp_interleave_size, 3)),
    BAD(ENQUEUE, "a world whose virtual block wraps 32 bits",
        CLBT_INVALID_ARGUMENT,
        "batch->cp_world_size 1073741824 x block_size 4 exceeds UINT32_MAX "
        "tokens",
        BATCH(cp_world_size, 1073741824u)),
    BAD(ENQUEUE, "a table of state slots", CLBT_INVALID_ARGUMENT,
        "batch->table is a CLBT_SLOT_MODE_NONE table", .swap = STATE_TABLE),
    BAD(ENQUEUE, "a table of smaller kernel blocks", CLBT_INVALID_ARGUMENT,
        "batch->table's kernel block size 2 is not the cache's block_size 4",
        .swap = SPLIT_TABLE),
    BAD(ENQUEUE, "a table whose virtual block wraps 32 bits",
        CLBT_INVALID_ARGUMENT,
        "batch->table's cp_world_size 1073741824 x block size 4 exceeds "
        "UINT32_MAX tokens",
        .swap = WIDE_SHARD_TABLE),
    BAD(ENQUEUE, "a table of another context", CLBT_CONTEXT_MISMATCH,
        "batch->table belongs to another OpenCL context",
        .swap = FOREIGN_TABLE),
    BAD(ENQUEUE, "a shard with a table", CLBT_INVALID_ARGUMENT,
        "batch->cp_* describe a block_table's shard", .swap = TABLE,
        BATCH(cp_world_size, 2)),
    BAD(ENQUEUE, "output heads overlapping", CLBT_INVALID_ARGUMENT,
        "batch->output_head_stride 4 is within the 8 elements",
        BATCH(output_head_stride, 4)),
    BAD(ENQUEUE, "lse tokens overlapping", CLBT_INVALID_ARGUMENT,
        "batch->lse_token_stride 2 is within the 4 elements",
        BATCH(lse_token_stride, 2)),
    BAD(ENQUEUE, "zero q_descale", CLBT_INVALID_ARGUMENT,
        "batch->q_descale 0 is not a finite value above 0", .swap = FP8,
        BATCH(q_descale, 0)),
    BAD(ENQUEUE, "NaN k_descale", CLBT_INVALID_ARGUMENT,
        "batch->k_descale nan is not a finite value above 0", .swap = FP8,
        BATCH(k_descale, 0x7fc00000u)),
    BAD(ENQUEUE, "infinite v_descale", CLBT_INVALID_ARGUMENT,
        "batch->v_descale inf is not a finite value above 0", .swap = FP8,
        BATCH(v_descale, 0x7f800000u)),
    BAD(ENQUEUE, "negative output_scale", CLBT_INVALID_ARGUMENT,
        "batch->output_scale -2 is not a finite value above 0", .swap = FP8,
        BATCH(output_scale, 0xc0000000u)),
    BAD(ENQUEUE, "NULL query", CLBT_NULL_ARGUMENT,
        "batch->query is NULL with num_seqs 2 and num_tokens 3",
        .swap = NULL_QUERY),
    BAD(ENQUEUE, "NULL output", CLBT_NULL_ARGUMENT, "batch->output is NULL",
        .swap = NULL_OUTPUT),
    BAD(ENQUEUE, "NULL cu_seqlens_q", CLBT_NULL_ARGUMENT,
        "batch->cu_seqlens_q is NULL", .swap = NULL_CU),
    BAD(ENQUEUE, "NULL seqused_k", CLBT_NULL_ARGUMENT,
        "batch->seqused_k is NULL", .swap = NULL_SEQUSED),
    BAD(ENQUEUE, "more tokens than the query holds", CLBT_BUFFER_TOO_SMALL,
        "batch->query holds 192 bytes; 128 elements from element 0 need 256",
        BATCH(num_tokens, 4)),
    BAD(ENQUEUE, "an output offset past the output", CLBT_BUFFER_TOO_SMALL,
        "batch->output holds 192 bytes; 96 elements from element 1 need 194",
        BATCH(output_offset, 1)),
    BAD(ENQUEUE, "more sequences than cu_seqlens_q holds",
        CLBT_BUFFER_TOO_SMALL,
        "batch->cu_seqlens_q holds 12 bytes; 3 elements from element 1 need 16",
        BATCH(cu_seqlens_q_offset, 1)),
    BAD(ENQUEUE, "a seqused_k offset past it", CLBT_BUFFER_TOO_SMALL,
        "batch->seqused_k holds 8 bytes; 2 elements from element 1 need 12",
        BATCH(seqused_k_offset, 1)),
    BAD(ENQUEUE, "rows past the block table", CLBT_BUFFER_TOO_SMALL,
        "batch->block_table holds 16 bytes; 6 elements from element 0 need 24",
        BATCH(block_table_stride, 4)),
    BAD(ENQUEUE, "sinks shorter than the heads", CLBT_BUFFER_TOO_SMALL,
        "batch->sinks holds 8 bytes; 4 elements from element 0 need 16",
        .swap = SMALL_SINKS),
    BAD(ENQUEUE, "descales shorter than the sequences' heads",
        CLBT_BUFFER_TOO_SMALL,
        "batch->k_descales holds 8 bytes; 4 elements from element 0 need 16",
        .swap = SMALL_DESCALES),
    BAD(ENQUEUE, "an lse offset past the lse", CLBT_BUFFER_TOO_SMALL,
        "batch->lse holds 48 bytes; 12 elements from element 2 need 56",
        BATCH(lse_offset, 2)),
    BAD(ENQUEUE, "query rows past 64 bits", CLBT_SIZE_OVERFLOW,
        "batch->query: 3 rows 9223372036854775807 elements apart from 0 end "
        "past 64 bits",
        BATCH(query_token_stride, UINT64_MAX / 2)),
    BAD(ENQUEUE, "a read-only output", CLBT_READ_ONLY_BUFFER,
        "batch->output is a CL_MEM_READ_ONLY buffer, which kernels may "
        "only read",
        .swap = READ_ONLY_OUTPUT),
    BAD(ENQUEUE, "a query of another context", CLBT_CONTEXT_MISMATCH,
        "batch->query belongs to another OpenCL context than the "
        "attention's device",
        .swap = FOREIGN_QUERY),
    BAD(ENQUEUE, "wait list NULL with events", CLBT_INVALID_ARGUMENT,
        "wait_list is NULL with num_events 1", .num_events = 1),
    BAD(ENQUEUE, "a NULL event", CLBT_CL_INVALID_EVENT_WAIT_LIST,
        "wait_list[0] is NULL", .num_events = 1, .swap = NULL_EVENTS),
    BAD(ENQUEUE, "an event of another context", CLBT_CONTEXT_MISMATCH,
        "wait_list[1] is an event of another OpenCL context", .num_events = 2,
        .swap = FOREIGN_EVENT),
    /* ---- the counter, the pages ---- */
    BAD(READ_REJECTED, "NULL attention", CLBT_NULL_ARGUMENT,
        "attention is NULL", .swap = NULL_HANDLE),
    BAD(READ_REJECTED, "NULL count", CLBT_NULL_ARGUMENT, "count is NULL",
        .swap = NULL_OUT),
    BAD(RESET_REJECTED, "NULL attention", CLBT_NULL_ARGUMENT,
        "attention is NULL", .swap = NULL_HANDLE),
    BAD(DESCRIBE, "NULL cache", CLBT_NULL_ARGUMENT, "cache is NULL",
        .swap = NULL_CACHE),
    BAD(DESCRIBE, "NULL out", CLBT_NULL_ARGUMENT, "out is NULL",
        .swap = NULL_OUT),
    BAD(DESCRIBE, "a table of state slots", CLBT_INVALID_ARGUMENT,
        "table is a CLBT_SLOT_MODE_NONE table", .swap = STATE_TABLE),
    BAD(DESCRIBE, "a table of smaller kernel blocks", CLBT_INVALID_ARGUMENT,
        "table's kernel block size 2 is not the cache's block_size 4",
        .swap = SPLIT_TABLE),
    BAD(DESCRIBE, "a table whose virtual block wraps 32 bits",
        CLBT_INVALID_ARGUMENT,
        "table's cp_world_size 1073741824 x block size 4 exceeds UINT32_MAX "
        "tokens",
        .swap = WIDE_SHARD_TABLE),
};

START_TEST(attention_refuses_every_bad_argument) {
  attention_fixture a = fixture_create();
  size_t count = sizeof cases / sizeof cases[0];
  bool covered[NUM_FUNCTIONS] = {false};
  for (size_t i = 0; i < count; ++i) {
    const bad *c = &cases[i];
    char context[160];
    snprintf(context, sizeof context, "%s, %s", function_names[c->function],
             c->argument);
    clbt_attention *const sentinel = (clbt_attention *)&a;
    clbt_attention *out = sentinel;
    cl_event event = (cl_event)&a;
    uint32_t rejected = 7;
    clbt_kv_pages pages, untouched;
    memset(&pages, POISON, sizeof pages);
    untouched = pages;
    clbt_status status = run_case(c, &a, &out, &event, &rejected, &pages);
    clbt_assert_refused(context, status, c->status, c->words);
    ck_assert_msg(out == sentinel && event == (cl_event)&a && rejected == 7 &&
                      memcmp(&pages, &untouched, sizeof pages) == 0,
                  "%s wrote through an output pointer", context);
    check_unchanged(&a, context);
    covered[c->function] = true;
  }
  for (int fn = 0; fn < NUM_FUNCTIONS; ++fn)
    ck_assert_msg(covered[fn], "no case for %s", function_names[fn]);
  printf("bad input: %zu cases against the attention's %d functions, each "
         "refused with its status and message, nothing written\n",
         count, (int)NUM_FUNCTIONS);
  ck_assert_ptr_null(clbt_attention_rejected_tokens(NULL));
  clbt_attention_destroy(NULL);
  fixture_destroy(&a);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("bad_attention");
  TCase *tc = tcase_create("bad_attention");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, attention_refuses_every_bad_argument);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
