/*
 * The table engine (engine.c) as the layers above see it: KV-cache groups
 * made, launched and freed together, opaque (clbt__engine, group.h), and
 * the scope a call works on. What an engine holds (its storage, its
 * launches eight groups to one, the commits' staging pool, a call's
 * scratch) is in engine_internal.h, which only engine/ and the runner
 * (calls/run.c) include.
 */
#ifndef CLBT_ENGINE_H
#define CLBT_ENGINE_H

#include "device/known_buffers.h"
#include "engine/group.h"

/*
 * Creates num_groups groups of these checked layouts, and their launches.
 * A standalone engine is the one group of a clbt_table, which owns it.
 */
clbt_status clbt__engine_create(clbt_device *device,
                                const clbt__table_layout *layouts,
                                uint32_t num_groups, bool standalone,
                                clbt__engine **out);
void clbt__engine_destroy(clbt__engine *engine);

/* Builds, without creating anything, the programs such an engine needs. */
clbt_status clbt__engine_prepare(clbt_device *device,
                                 const clbt__table_layout *layouts,
                                 uint32_t num_groups);

/* Its groups, in the order they were made; and whether it is a
   clbt_table's own (standalone). */
uint32_t clbt__engine_num_groups(const clbt__engine *engine);
clbt_table *clbt__engine_group(const clbt__engine *engine, uint32_t g);
bool clbt__engine_standalone(const clbt__engine *engine);

/* Its one device allocation, whose regions are its groups'. */
cl_mem clbt__engine_storage(const clbt__engine *engine);

/* A new version for the rows a commit or clear writes. */
uint64_t clbt__engine_next_version(clbt__engine *engine);

/*
 * What a device call works on: every group of an engine, or one table
 * (a call through the clbt_table API), groups [begin, end) of its engine,
 * with what a call's checks read of the engine: its groups and the
 * caller's buffers it checked lately. Every group of a scope shares its
 * bounds and context with `first`.
 */
typedef struct clbt__scope {
  clbt__engine *engine;
  clbt_table *const *groups; /* the engine's: [begin, end) are the scope's */
  uint32_t begin, end;
  clbt_table *first;          /* groups[begin] */
  clbt__known_buffers *known; /* the engine's */
  bool one_table;             /* a clbt_table call: the call's rules and
                                 messages are one table's (a table of its
                                 own, or a group of a multi-group table) */
} clbt__scope;

/* The scope of every group of a multi-group table's engine. */
clbt__scope clbt__engine_scope(clbt__engine *engine);
/* The scope of one table: a standalone engine's group, or one group of a
   multi-group table alone, in its engine's launch. */
clbt__scope clbt__table_scope(clbt_table *table);

/* The token-mapping groups of a scope: the sections of its token-slots
   output. */
uint32_t clbt__scope_token_sections(const clbt__scope *scope);

#endif /* CLBT_ENGINE_H */
