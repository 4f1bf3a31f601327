/*
 * The table engine (engine.c): KV-cache groups made, launched and freed
 * together, their one storage, their launches eight groups to one, the
 * commits' staging pool, and the scope a call works on.
 */
#ifndef CLBT_ENGINE_H
#define CLBT_ENGINE_H

#include "device/known_buffers.h"
#include "engine/group.h"
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

/* Creates num_groups groups of these checked layouts, and their launches. */
clbt_status clbt__engine_create(clbt_device *device,
                                const clbt__table_layout *layouts,
                                uint32_t num_groups, bool standalone,
                                clbt_multi_table **out);
void clbt__engine_destroy(clbt_multi_table *engine);

/* Builds, without creating anything, the programs such an engine needs. */
clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups);

/* A new version for the rows a commit or clear writes. */
uint64_t clbt__next_version(clbt_multi_table *engine);

/*
 * What a device call works on: every group of an engine, or one group
 * alone (a call through the clbt_table API), groups [begin, end) of its
 * engine. Its launches are the engine's that hold them; in each, only the
 * scope's groups take part (clbt__scope_groups). Every group of a scope
 * shares its bounds and context with `first`.
 */
typedef struct clbt__scope {
  clbt_multi_table *engine;
  uint32_t begin, end;
  clbt_table *first;      /* engine->groups[begin] */
  bool alone;             /* one group named by the caller */
} clbt__scope;

/* The scope of every group of an engine. */
clbt__scope clbt__engine_scope(clbt_multi_table *engine);
/* The scope of one group alone, in its engine's launch. */
clbt__scope clbt__group_scope(clbt_table *group);

/* The scope's launches: engine->launches[first, end). */
uint32_t clbt__scope_first_launch(const clbt__scope *scope);
uint32_t clbt__scope_end_launch(const clbt__scope *scope);
/* Which of launch l's groups the scope holds: bit g for its group g. */
uint32_t clbt__scope_groups(const clbt__scope *scope, uint32_t l);

/* The number of token-mapping groups of a scope in the engine's launches
   before l: where launch l's sections of a token-slots output start. */
uint32_t clbt__token_sections_before(const clbt__scope *scope, uint32_t l);

#endif /* CLBT_ENGINE_H */
