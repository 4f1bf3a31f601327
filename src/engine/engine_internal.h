/*
 * The engine's insides (engine.c's second header): the struct every table
 * is, with its launches, staging pool and a call's scratch, and the
 * machinery those need (launch.h, plan.h, staging.h). Only engine/ and
 * the runner (calls/run.c) include it; every other file above the engine
 * sees the engine through engine.h alone, and check_layers holds that,
 * through every header a file reaches (docs/design.md, "Layers").
 */
#ifndef CLBT_ENGINE_INTERNAL_H
#define CLBT_ENGINE_INTERNAL_H

#include "engine/engine.h"

#include "device/known_buffers.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/staging.h"

/*
 * Groups made, launched and freed together: a clbt_multi_table, or the one
 * group of a clbt_table, which then owns its engine (standalone).
 */
struct clbt_multi_table {
  clbt_device *device;
  uint32_t num_groups;
  clbt_table **groups;
  uint32_t num_launches;   /* one per eight groups */
  clbt__launch *launches;
  bool standalone;
  cl_mem storage;          /* every group's regions, one allocation: drivers
                              charge every launch for every buffer argument */
  clbt__staging_pool staging; /* every commit's packets */
  uint64_t version;        /* the last version a commit gave rows */
  uint64_t seen_failures;  /* the device watch's count at the last commit */
  clbt__known_buffers known; /* the caller's buffers checked lately */
  /* Scratch for one call's plan, sized at creation so that a call
     allocates nothing; no value in it outlives the call. */
  clbt__commit_plan *commit_plans; /* [num_groups] */
  clbt__launch_part *launch_parts; /* [num_launches] */
  clbt__staging *slots;            /* [num_groups + 1]: WHOLE commits'
                                      and the upload's */
  size_t *slot_words;              /* [num_groups + 1]: their sizes */
  clbt__command *commands;         /* [clbt__plan_max_commands] */
};

/* A scope's launches: engine->launches[first, end); in each, only the
   scope's groups take part. */
uint32_t clbt__scope_first_launch(const clbt__scope *scope);
uint32_t clbt__scope_end_launch(const clbt__scope *scope);
/* Which of launch l's groups the scope holds: bit g for its group g. */
uint32_t clbt__scope_group_mask(const clbt__scope *scope, uint32_t l);

/* The number of token-mapping groups of a scope in the engine's launches
   before l: where launch l's sections of a token-slots output start. */
uint32_t clbt__token_sections_before(const clbt__scope *scope, uint32_t l);

#endif /* CLBT_ENGINE_INTERNAL_H */
