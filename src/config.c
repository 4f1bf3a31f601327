/*
 * Reading a caller's config structs. Each public config struct starts with
 * struct_size, the size of the struct in the caller's header (0: the
 * layout of 0.2, the first with the field, or of the version that brought
 * the struct: 0.3 for the steps', 0.4 for the multi-group host step's). A
 * caller's struct is read into
 * the layout this library declares: the fields the caller's version has
 * are copied and those it lacks get their default, 0; bytes past what this
 * library knows must be 0, since they would set fields of a later version.
 * docs/design.md says how to add a field.
 */
#include "base.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CLBT__END_OF(type, field) \
  (offsetof(type, field) + sizeof(((type *)NULL)->field))

/*
 * Each struct as 0.2 declared it ends with these fields: what struct_size
 * 0 stands for, and the least struct_size clbt reads. Frozen: a field
 * added later changes sizeof, never these.
 */
#define CLBT__TABLE_CONFIG_0_2 CLBT__END_OF(clbt_table_config, slot_mode)
#define CLBT__GROUP_CONFIG_0_2 CLBT__END_OF(clbt_group_config, cp_replicated)
#define CLBT__MULTI_TABLE_CONFIG_0_2 \
  CLBT__END_OF(clbt_multi_table_config, groups)
/* And as 0.3 and 0.4 declared those that came with them. */
#define CLBT__HOST_STEP_0_3 CLBT__END_OF(clbt_host_step, gathered_rows)
#define CLBT__MULTI_HOST_STEP_0_4 \
  CLBT__END_OF(clbt_multi_host_step, gathered_rows)

/* A struct_size above this is not a size (an uninitialised field, say). */
#define CLBT__MAX_STRUCT_SIZE 4096

/*
 * struct_size comes first, and each layout ends with its last field: no
 * trailing padding, so that a later version's first new field can never
 * lie in padding that an older caller's struct_size covers.
 */
#define CLBT__CHECK_LAYOUT(type, last)                                   \
  _Static_assert(offsetof(type, struct_size) == 0 &&                     \
                     sizeof(((type *)NULL)->struct_size) == 4 &&         \
                     CLBT__END_OF(type, last) == sizeof(type),           \
                 #type " starts with struct_size and ends with " #last)
CLBT__CHECK_LAYOUT(clbt_table_config, zero_gathered_tails);
CLBT__CHECK_LAYOUT(clbt_group_config, cp_replicated);
CLBT__CHECK_LAYOUT(clbt_multi_table_config, reserved);
CLBT__CHECK_LAYOUT(clbt_step, state_null_block);
CLBT__CHECK_LAYOUT(clbt_host_step, gathered_rows);
CLBT__CHECK_LAYOUT(clbt_multi_host_step, gathered_rows);
CLBT__CHECK_LAYOUT(clbt_token_slots_request, token_slots);
CLBT__CHECK_LAYOUT(clbt_kv_cache_config, head_stride);
CLBT__CHECK_LAYOUT(clbt_kv_write, v_scale);

/* clbt_step as 0.3, its first version, declared it. Frozen. */
#define CLBT__STEP_0_3 CLBT__END_OF(clbt_step, seq_lens)
/* And the token-slots request as 0.4, its first. Frozen. */
#define CLBT__TOKEN_SLOTS_0_4 \
  CLBT__END_OF(clbt_token_slots_request, token_slots)
/* And the KV cache's config and write as 0.4, their first. Frozen. */
#define CLBT__KV_CACHE_CONFIG_0_4 \
  CLBT__END_OF(clbt_kv_cache_config, head_stride)
#define CLBT__KV_WRITE_0_4 CLBT__END_OF(clbt_kv_write, v_scale)

/*
 * The size a caller's struct has, from its struct_size; name is its path,
 * since the version whose layout struct_size 0 stands for.
 */
static clbt_status size_of(const void *given, size_t base, const char *since,
                           const char *name, size_t *size) {
  uint32_t declared;
  memcpy(&declared, given, sizeof declared);
  *size = declared ? declared : base;
  if (*size < base || *size > CLBT__MAX_STRUCT_SIZE)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "%s: struct_size is %u; clbt reads 0 (the layout of "
                      "%s) or %zu to %d",
                      name, (unsigned)declared, since, base,
                      CLBT__MAX_STRUCT_SIZE);
  return CLBT_SUCCESS;
}

/* Checks that a struct of `size` bytes sets nothing past the first `own`. */
static clbt_status check_unknown_fields(const void *given, size_t size,
                                        size_t own, const char *name) {
  const unsigned char *bytes = given;
  for (size_t i = own; i < size; ++i)
    if (bytes[i])
      return clbt__fail(CLBT_INVALID_CONFIG,
                        "%s sets byte %zu of its %zu, past the %zu bytes "
                        "clbt %s knows: a field of a later version",
                        name, i, size, own, CLBT_VERSION_STRING);
  return CLBT_SUCCESS;
}

/* Copies what a struct of `size` bytes has into `own` bytes, the rest 0. */
static void copy_known(void *out, size_t own, const void *given,
                       size_t size) {
  memset(out, 0, own);
  memcpy(out, given, size < own ? size : own);
  uint32_t normalised = (uint32_t)own;
  memcpy(out, &normalised, sizeof normalised);
}

/* Sizes, checks and copies one struct. */
static clbt_status read_struct(const void *given, size_t base,
                               const char *since, size_t own,
                               const char *name, void *out, size_t *size) {
  clbt_status status = size_of(given, base, since, name, size);
  if (!status) status = check_unknown_fields(given, *size, own, name);
  if (!status) copy_known(out, own, given, *size);
  return status;
}

clbt_status clbt__table_config_read(const clbt_table_config *given,
                                    clbt_table_config *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "config is NULL");
  return read_struct(given, CLBT__TABLE_CONFIG_0_2, "0.2", sizeof *out,
                     "config", out, &size);
}

/* Group g of an array whose elements are `stride` bytes apart. */
static const void *group_at(const clbt_multi_table_config *config,
                            uint32_t g, size_t stride) {
  return (const unsigned char *)config->groups + (size_t)g * stride;
}

/*
 * The array's elements are as large as the first says; every other one
 * must say the same (before anything past its first bytes is read), and
 * none may set a field this library does not know.
 */
static clbt_status check_groups(const clbt_multi_table_config *config) {
  size_t stride = 0;
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    char name[48];
    snprintf(name, sizeof name, "config->groups[%u]", (unsigned)g);
    const void *group = group_at(config, g, stride);
    size_t size;
    clbt_status status =
        size_of(group, CLBT__GROUP_CONFIG_0_2, "0.2", name, &size);
    if (status) return status;
    if (g == 0) stride = size;
    if (size != stride)
      return clbt__fail(CLBT_INVALID_CONFIG,
                        "%s: struct_size says %zu bytes and groups[0]'s "
                        "%zu; the elements of one array have one size",
                        name, size, stride);
    status = check_unknown_fields(group, size, sizeof(clbt_group_config),
                                  name);
    if (status) return status;
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__multi_table_config_read(const clbt_multi_table_config *given,
                                          clbt_multi_table_config *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "config is NULL");
  clbt_status status = read_struct(given, CLBT__MULTI_TABLE_CONFIG_0_2, "0.2",
                                   sizeof *out, "config", out, &size);
  /* A NULL or empty array is the caller's to report. */
  if (!status && out->groups) status = check_groups(out);
  return status;
}

clbt_group_config clbt__group_config_at(const clbt_multi_table_config *config,
                                        uint32_t g) {
  size_t stride;
  clbt_group_config group;
  /* Checked by clbt__multi_table_config_read: cannot fail. */
  size_of(config->groups, CLBT__GROUP_CONFIG_0_2, "0.2", "config->groups[0]",
          &stride);
  copy_known(&group, sizeof group, group_at(config, g, stride), stride);
  return group;
}

clbt_status clbt__step_read(const clbt_step *given, clbt_step *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "step is NULL");
  return read_struct(given, CLBT__STEP_0_3, "0.3", sizeof *out, "step", out,
                     &size);
}

clbt_status clbt__host_step_read(const clbt_host_step *given,
                                 clbt_host_step *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "step is NULL");
  return read_struct(given, CLBT__HOST_STEP_0_3, "0.3", sizeof *out, "step",
                     out, &size);
}

clbt_status clbt__multi_host_step_read(const clbt_multi_host_step *given,
                                       clbt_multi_host_step *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "step is NULL");
  return read_struct(given, CLBT__MULTI_HOST_STEP_0_4, "0.4", sizeof *out,
                     "step", out, &size);
}

clbt_status clbt__token_slots_request_read(
    const clbt_token_slots_request *given, clbt_token_slots_request *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "request is NULL");
  return read_struct(given, CLBT__TOKEN_SLOTS_0_4, "0.4", sizeof *out,
                     "request", out, &size);
}

clbt_status clbt__kv_cache_config_read(const clbt_kv_cache_config *given,
                                       clbt_kv_cache_config *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "config is NULL");
  return read_struct(given, CLBT__KV_CACHE_CONFIG_0_4, "0.4", sizeof *out,
                     "config", out, &size);
}

clbt_status clbt__kv_write_read(const clbt_kv_write *given,
                                clbt_kv_write *out) {
  size_t size;
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "write is NULL");
  return read_struct(given, CLBT__KV_WRITE_0_4, "0.4", sizeof *out, "write",
                     out, &size);
}
