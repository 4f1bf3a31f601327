/*
 * One KV-cache group of an engine (group.c): its layout, checked and
 * derived from a config, its host rows, what changed of them, and its
 * regions of the engine's one device allocation. A clbt_table is a group;
 * the engine (engine.c) makes and frees groups.
 */
#ifndef CLBT_GROUP_H
#define CLBT_GROUP_H

#include "clbt/clbt.h"
#include "cl/contract.h"
#include "device/queue.h"
#include "engine/changes.h"

/*
 * The engine every table is (engine.h): groups made, launched and freed
 * together. Its public name is clbt_multi_table's; its insides are
 * engine_internal.h's.
 */
typedef struct clbt_multi_table clbt__engine;

/*
 * What specialises the step kernel for one group: its -D values, one field
 * per entry of CLBT_GROUP_CONSTANTS (cl/contract.h).
 */
typedef struct clbt__group_spec {
#define CLBT__SPEC_FIELD(g, name) uint32_t name;
  CLBT_GROUP_CONSTANTS(CLBT__SPEC_FIELD, 0)
#undef CLBT__SPEC_FIELD
} clbt__group_spec;

/* A table config with every default filled in and every rule checked. */
typedef struct clbt__table_layout {
  clbt__group_spec spec; /* spec.maps_tokens: the slot mode */
  uint32_t kernel_block_size;
  uint32_t width;        /* kernel blocks per row */
  uint32_t max_num_reqs;
  uint32_t max_num_batched_tokens;
  int32_t largest_id;    /* the largest block id whose last kernel block,
                            id * k + k - 1, fits in int32; -1: none does */
} clbt__table_layout;

/* Checks a config and derives the table's layout from it. */
clbt_status clbt__table_layout_init(const clbt_table_config *config,
                                    clbt__table_layout *layout);

struct clbt_table {
  clbt_device *device;
  clbt__table_layout layout;
  int32_t *rows;           /* [max_num_reqs][width] */
  uint32_t *row_lengths;   /* [max_num_reqs], kernel blocks */
  clbt__changes changes;
  bool device_stale;       /* the device copy may differ from the host
                              beyond what changes lists: the next commit
                              rewrites every row */
  clbt_commit_mode commit_mode;
  clbt_commit_info last_commit;
  cl_mem regions[CLBT_NUM_REGIONS]; /* sub-buffers of the engine's storage,
                                       for callers and commits; NULL when
                                       empty */
  clbt__group_layout at; /* the regions' offsets in the engine's storage,
                            for the kernel */
  clbt__engine *engine;  /* the engine the group belongs to */
};

/*
 * A group of an engine: zeroed host rows; its regions of the engine's
 * storage are planned (clbt__group_plan) before the storage is made, then
 * placed (clbt__group_place); the engine zeroes them and pads the slot
 * mapping.
 */
clbt_status clbt__group_create(clbt_device *device,
                               const clbt__table_layout *layout,
                               clbt__engine *engine, clbt_table **out);
/* Places the group's regions from *size bytes of the engine's storage on,
   and moves *size past them. */
clbt_status clbt__group_plan(clbt_table *group, size_t *size);
/* Makes the group's sub-buffers of the engine's storage. */
clbt_status clbt__group_place(clbt_table *group, cl_mem storage);
void clbt__group_destroy(clbt_table *group);

/* Whether a group maps tokens (CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT). */
bool clbt__maps_tokens(const clbt_table *group);

/*
 * clear, in two halves: zeroing the device, every row given `version`,
 * which on failure leaves the group stale for the next commit to repair,
 * and zeroing the host, which cannot fail. A failed clear thus changes
 * nothing the caller can see once it commits.
 */
clbt_status clbt__group_zero_device(clbt_table *group, uint64_t version,
                                    clbt__sequence *sequence);
void clbt__group_zero_host(clbt_table *group);

#endif /* CLBT_GROUP_H */
