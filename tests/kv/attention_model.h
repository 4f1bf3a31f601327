/*
 * An independent model of paged attention for the attention suites
 * (attention_model.c): a layer's query, paged K/V cache and block table
 * drawn at random as stored bits (every value exact in its type), the
 * cache's bytes laid out by the documented address rule, and the expected
 * output and lse computed in double from the stored values, with vLLM's
 * rules (causal from the end of the context, sliding window, soft-cap,
 * sinks) and context parallelism's dealing of positions to ranks. Nothing
 * of clbt computes any of it.
 */
#ifndef CLBT_TEST_ATTENTION_MODEL_H
#define CLBT_TEST_ATTENTION_MODEL_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stdint.h>

/* What a scenario asks for. */
typedef struct model_spec {
  uint32_t num_heads, num_kv_heads, head_size, block_size;
  clbt_kv_dtype query, cache, output; /* output NONE: the query's */
  clbt_kv_layout layout;
  float softcap;           /* 0: none */
  uint32_t sliding_window; /* 0: none */
  bool sinks, lse, per_seq_descales;
  bool strided;            /* query and output rows apart, at offsets; the
                              lse [heads][tokens] */
  uint32_t kernel_blocks;  /* 0 or 1: none; else each KV-manager block of
                              block_size x kernel_blocks tokens is that
                              many cache blocks (a table's kernel blocks) */
  uint32_t num_seqs;
  const uint32_t *q_lens, *seq_lens; /* [num_seqs] */
  uint32_t padding_tokens; /* rows past the last sequence's, untouched */
  /* context parallelism: this rank's cache holds its positions only */
  uint32_t cp_world_size, cp_rank, cp_interleave_size; /* 0: none */
  uint64_t seed;
} model_spec;

/* A scenario drawn: host data, expected results, and its device side. */
typedef struct model {
  model_spec spec;
  uint32_t num_tokens, num_blocks, max_blocks;
  int32_t *cu;              /* [num_seqs + 1] */
  int32_t *table;           /* [num_seqs][max_blocks], -1 past a row's */
  int32_t *kv_table;        /* [num_seqs][max_kv_blocks]: KV-manager ids */
  uint32_t max_kv_blocks, *kv_blocks; /* and each row's count */
  uint32_t *local_lens;     /* [num_seqs]: this rank's keys */
  float q_descale, k_descale, v_descale, output_scale;
  float *k_descales, *v_descales; /* [num_seqs][num_kv_heads] */
  float *sinks;                   /* [num_heads] */
  void *query_bits, *cache_bits;
  double *query_values, *cache_values; /* what the bits hold */
  size_t cache_bytes;
  uint64_t value_offset, block_stride, page_stride, head_stride;
  double *expected, *expected_lse; /* [num_tokens][num_heads](...) */
  /* the device side (model_upload) */
  cl_mem query, output, cache_buffer, cu_buffer, seqused, block_table;
  cl_mem sinks_buffer, k_descales_buffer, v_descales_buffer, lse;
  clbt_kv_cache *cache;
} model;

/* The value a type's bits hold, exactly (NaN for a NaN). */
double model_value(clbt_kv_dtype type, const void *bits, size_t index);
size_t model_size(clbt_kv_dtype type);

/* Draws a scenario and computes what its attention must give. */
void model_make(model *m, const model_spec *spec);
/* Its buffers and cache on the test device; the output and lse poisoned. */
void model_upload(model *m);
void model_free(model *m);

/* The descriptor config and batch of the scenario (dense block table). */
clbt_attention_config model_config(const model *m);
clbt_attention_batch model_batch(const model *m);

/* Query token t attends nothing: its expected output 0, its lse
   -infinity (a rejected or padding request's token). */
void model_expect_zero(model *m, uint32_t token);

/* The token strides model_batch gives (the contiguous ones without
   spec.strided). */
uint64_t model_query_stride(const model *m);
uint64_t model_output_stride(const model *m);

/*
 * Reads the output (and lse) back and compares every element of every
 * query token with the expectation within vLLM's tolerance for the
 * types (atol 1.5e-2 and rtol 1e-2; 1.5e-1 with fp8), and every padding
 * row with the poison. Fails the test, naming the first bad element.
 * *worst gets the largest error.
 */
void model_check(const model *m, double *worst);

/* The output's values as read back, [num_tokens][num_heads][head_size]. */
double *model_read_output(const model *m);

#endif /* CLBT_TEST_ATTENTION_MODEL_H */
