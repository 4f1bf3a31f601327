/*
 * The paged attention's program (clbt_attention_enqueue, src/kv/): its
 * three kernels, built together once per descriptor and cache alignment
 * with the -D options of cl/attention.h. clbt_attention_decode serves
 * decode batches and a CPU's every batch, clbt_attention_tiles batches
 * with several query tokens a sequence on a GPU, clbt_attention_reduce
 * merges split contexts (cl/attention_common.cl).
 */
#include "attention_decode.cl"
#include "attention_tiles.cl"
