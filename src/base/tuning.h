/*
 * Every number clbt tunes for a kind of device, in one table (as CLBlast's
 * database keeps its kernels' parameters): work-group sizes and how work
 * is spread, where a commit packet travels, how large the record a launch
 * carries may be, and how many staging slots, watched events and known
 * buffers are kept. docs/benchmarks.md has the measurements behind each
 * value. The bounds that size arrays are compile-time constants here too.
 */
#ifndef CLBT_TUNING_H
#define CLBT_TUNING_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most record sizes a launch takes (cl/contract.h's
   CLBT_MAX_RECORD_CLASSES, which launch.c checks). */
#define CLBT__RECORD_CLASSES 3
/* The caller's buffers an engine keeps checked (calls/checks.c). */
#define CLBT__KNOWN_BUFFERS 8
/* Staging slots a pool keeps once their commits have ended (staging.c). */
#define CLBT__IDLE_SLOTS 2
/* A staging ring this large or smaller is kept when it empties. */
#define CLBT__KEPT_RING 16
/* A watch ring this large or smaller is kept when it empties (queue.c). */
#define CLBT__KEPT_WATCH 16

/* How clbt spreads its work on one kind of device. */
typedef struct clbt__tuning {
  /* Work-groups: the largest size (a power of two; launch.c bounds it by
     the kernel's CLBT_MAX_WORK_GROUP_SIZE and the kernel object's limit). A
     CPU's work-groups are one work-item each: PoCL pays a large fixed cost
     per work-group and runs a group's work-items as a loop, so one work-item
     walking a long run with unit-stride loops that vectorise is cheapest. */
  size_t local_size;
  /* A CPU takes one work-group per this many items, at most one per
     compute unit: a second pays only with tens of thousands of items. */
  size_t cpu_items_per_group;
  /* The kernel's code shaped for a GPU (CLBT_GPU, cl/common.cl):
     neighbouring work-items take neighbouring items, and the loops over
     groups are unrolled so that each group's constants fold; for a CPU,
     runs of items a work-item, and one loop over groups, which PoCL's
     compiler takes a fraction of the time over. */
  bool gpu_code;
  /* Pad entries of the slot mapping a GPU work-item writes, so that a
     decode batch does not launch a work-group per 256 idle entries. */
  uint32_t pad_per_item;
  /* A gather and an export on a GPU take a work-group per this many
     positions (a full gather of 1024 rows on 64 work-groups left half an
     H200 idle)... */
  uint32_t gathered_per_group, exported_per_group;
  /* ...but a part takes at most this many work-groups per compute unit
     (a 4-group export of 1024 requests on 512 work-groups took 18 us with
     no packet, 14 us on 128). */
  uint32_t part_groups_per_unit;
  /* A packet of at most folded_items items a group is applied by every
     work-group of the step kernel itself (folded), when its words times
     the launch's work-groups are at most folded_budget: each work-group
     applying all of it costs the device about 33 ns per 1000 such words
     on the H200 (a 1,288-word packet on 776 work-groups added 36 us), and
     past about 150,000 a scatter launch of its own (about 5 us) is
     cheaper. */
  uint32_t folded_items, folded_budget;
  /* The record's sizes, in packet words, smallest first, before the
     device's argument space (CL_DEVICE_MAX_PARAMETER_SIZE) and the
     kernel's CLBT_MAX_RECORD_WORDS cap them:
     drivers copy every byte of a record at every enqueue, and each size is
     an entry to compile. 0 ends the list. */
  uint32_t record_words[CLBT__RECORD_CLASSES];
} clbt__tuning;

/* The row of the table for a device of this type. */
const clbt__tuning *clbt__tuning_for(cl_device_type type);

/* A kernel's work-group size: the largest power of two up to the row's
   local_size and kernel_limit (its CL_KERNEL_WORK_GROUP_SIZE); one
   work-item where the row's code is shaped for a CPU. */
size_t clbt__tuning_local_size(const clbt__tuning *tuning,
                               size_t kernel_limit);

/* A CPU's work-groups for `items` items: one per cpu_items_per_group, at
   least one and at most one per compute unit; one for a row whose
   cpu_items_per_group is 0 (the GPU's). */
size_t clbt__tuning_cpu_groups(const clbt__tuning *tuning,
                               size_t compute_units, size_t items);

/*
 * How the paged attention's kernels are shaped on one kind of device
 * (src/kv/attention_plan.c turns a row into a kernel's geometry). The
 * environment variable CLBT_ATTENTION_TUNING sets fields by name,
 * "local=128,tokens=4,splits=8", read at each descriptor's creation, so
 * that one process can time several shapes (tools/gpu/attention.sh).
 */
typedef struct clbt__attention_tuning {
  /* The decode kernel: its work-group size (1: a CPU's, one work-item
     walking whole rows, no barrier); the bytes of a head row a work-item
     holds (0: the whole row); the keys a work-item takes a pass; the most
     query heads of one KV head a work-group serves (registers). */
  uint32_t local, lane_bytes, tokens, rows;
  /* Contexts are split over work-groups (flash-decoding, then a reduce)
     until a decode launches at least groups_per_unit work-groups per
     compute unit, a split keeping at least min_split keys and there
     being at most max_splits; splits, when not 0, is taken as it is. */
  uint32_t groups_per_unit, min_split, max_splits, splits;
  /* The tile kernel (0: none, a CPU's: every batch takes the decode
     kernel): its work-group size, the query rows (tokens x heads) and
     keys a tile holds. */
  uint32_t tile_local, tile_rows, tile_keys;
  /* The reduce kernel's work-group size; the cu_seqlens_q entries a
     work-group keeps in local memory. */
  uint32_t reduce_local, cu_words;
} clbt__attention_tuning;

/*
 * The attention row for a device of this type (the row clbt__tuning_for
 * picks, CLBT_TUNING included), with CLBT_ATTENTION_TUNING's fields set.
 * Fails with CLBT_INVALID_CONFIG naming a field it does not know or a
 * value that is not a whole number.
 */
clbt_status clbt__attention_tuning_for(cl_device_type type,
                                       clbt__attention_tuning *out);

/* The same for the GPU's row or the CPU's, whatever the device. */
clbt_status clbt__attention_tuning_row(bool gpu_row,
                                       clbt__attention_tuning *out);

#endif /* CLBT_TUNING_H */
