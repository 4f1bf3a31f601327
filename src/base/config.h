/*
 * A caller's structs (config.c): each read, whatever version's layout its
 * struct_size says, into the layout this library declares.
 */
#ifndef CLBT_CONFIG_H
#define CLBT_CONFIG_H

#include "clbt/clbt.h"

/*
 * Reads a caller's config, of whichever version's layout its struct_size
 * says, into the layout this library declares (struct_size then is
 * sizeof): the fields the caller's struct has are copied, the others are
 * 0, their default. Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL
 * config; CLBT_INVALID_CONFIG for a struct_size that is no version's
 * layout (one that ends inside a field, say) or a field of a later version
 * that is not 0. Every public entry point that takes a struct the caller
 * fills reads it through these first.
 */
clbt_status clbt__table_config_read(const clbt_table_config *given,
                                    clbt_table_config *out);

/*
 * The same for a multi-group config, whose groups it checks too (each
 * group's struct_size must be the first's). out->groups still points at
 * the caller's array, whose elements may be larger or smaller than
 * clbt_group_config: read a group only with clbt__group_config_at.
 */
clbt_status clbt__multi_table_config_read(const clbt_multi_table_config *given,
                                          clbt_multi_table_config *out);

/* Reads a caller's clbt_step into this library's layout, as the configs. */
clbt_status clbt__step_read(const clbt_step *given, clbt_step *out);

/* The same for a token-slots request, whose first layout is 0.4's;
   CLBT_NULL_ARGUMENT names it "request". */
clbt_status clbt__token_slots_request_read(
    const clbt_token_slots_request *given, clbt_token_slots_request *out);

/* Group g of a config read by clbt__multi_table_config_read, in our layout. */
clbt_group_config clbt__group_config_at(const clbt_multi_table_config *config,
                                        uint32_t g);

/*
 * The same for a host step (clbt_table_compute_step_host), whose first
 * layout is 0.3's; CLBT_NULL_ARGUMENT names it "step".
 */
clbt_status clbt__host_step_read(const clbt_host_step *given,
                                 clbt_host_step *out);

/* The same for a multi-group host step, whose first layout is 0.4's. */
clbt_status clbt__multi_host_step_read(const clbt_multi_host_step *given,
                                       clbt_multi_host_step *out);

/* The same for an export request, whose first layout is 0.5's;
   CLBT_NULL_ARGUMENT names it "request". */
clbt_status clbt__export_request_read(const clbt_export_request *given,
                                      clbt_export_request *out);

/* The same for a KV cache's config and write (kv_cache.c), whose first
   layouts are 0.5's; CLBT_NULL_ARGUMENT names them "config" and "write". */
clbt_status clbt__kv_cache_config_read(const clbt_kv_cache_config *given,
                                       clbt_kv_cache_config *out);
clbt_status clbt__kv_write_read(const clbt_kv_write *given,
                                clbt_kv_write *out);

/* The same for an attention's config and batch (api/attention.c), whose
   first layouts are 0.6's; CLBT_NULL_ARGUMENT names them "config" and
   "batch". */
clbt_status clbt__attention_config_read(const clbt_attention_config *given,
                                        clbt_attention_config *out);
clbt_status clbt__attention_batch_read(const clbt_attention_batch *given,
                                       clbt_attention_batch *out);

/*
 * A config field that counts something and must be at least 1: returns
 * CLBT_SUCCESS, or CLBT_INVALID_CONFIG with "config->NAME is 0; it must be
 * >= 1". Every create call's checks share it, so the message reads alike.
 */
clbt_status clbt__config_require_nonzero(uint32_t value, const char *name);

#endif /* CLBT_CONFIG_H */
