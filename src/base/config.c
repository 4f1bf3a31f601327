/*
 * Reading a caller's structs (docs/design.md, "Config structs and the
 * ABI"). Every struct a caller fills starts with struct_size, the size of
 * the struct in the caller's header, or 0 for the struct's first layout
 * with the field (0.2's for the configs, 0.3's for the steps, 0.4's for
 * the token-slots request and the multi-group host step, 0.5's for the
 * export request and the KV cache's config and write). A struct_size is
 * read only when it is one of the layouts a version of clbt declared,
 * listed here, or a later version's
 * (larger than this library's struct, a multiple of its alignment): one
 * that ends inside a field, or past what any struct could be, is refused.
 * The caller's struct is read into the layout this library declares: the
 * fields the caller's version has are copied and those it lacks get their
 * default, 0; bytes past what this library knows must be 0, since they
 * would set fields of a later version. The structs clbt fills for a
 * caller (clbt_export_buffers, clbt_commit_info,
 * clbt_kv_cache_addressing) are frozen instead.
 */
#include "base/config.h"

#include "base/status.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CLBT__END_OF(type, field) \
  (offsetof(type, field) + sizeof(((type *)NULL)->field))

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
CLBT__CHECK_LAYOUT(clbt_export_request, idx_mapping);
CLBT__CHECK_LAYOUT(clbt_attention_config, sliding_window);
CLBT__CHECK_LAYOUT(clbt_attention_batch, output_scale);

/* The structs clbt fills are frozen: these sizes never change. */
_Static_assert(sizeof(clbt_export_buffers) == 8 + 12 * sizeof(cl_mem) &&
                   offsetof(clbt_export_buffers, page_table) ==
                       sizeof(clbt_export_buffers) - sizeof(cl_mem),
               "clbt_export_buffers is frozen at 0.4's layout");
_Static_assert(sizeof(clbt_commit_info) == 16,
               "clbt_commit_info is frozen at 0.2's layout");
_Static_assert(sizeof(clbt_kv_cache_addressing) == 6 * sizeof(uint64_t),
               "clbt_kv_cache_addressing is frozen at 0.5's layout");

/* One layout a version of clbt declared: its size, and that version. */
typedef struct layout {
  size_t size;
  const char *version;
} layout;

/*
 * A struct a caller fills: its name in messages, this library's size and
 * alignment, and every layout it has had, oldest first (struct_size 0
 * stands for the first). Frozen: a later version appends its layout.
 */
typedef struct struct_kind {
  const char *name;
  size_t own, alignment;
  layout layouts[4];
} struct_kind;

#define CLBT__KIND(type, name) #name, sizeof(type), alignof(type)

static const struct_kind table_config = {
    CLBT__KIND(clbt_table_config, config),
    {{CLBT__END_OF(clbt_table_config, slot_mode), "0.2"},
     {CLBT__END_OF(clbt_table_config, zero_gathered_tails), "0.3"}}};
/* A group has had one layout, 0.2's (docs/design.md says why). */
static const struct_kind group_config = {
    CLBT__KIND(clbt_group_config, group),
    {{CLBT__END_OF(clbt_group_config, cp_replicated), "0.2"}}};
static const struct_kind multi_table_config = {
    CLBT__KIND(clbt_multi_table_config, config),
    {{CLBT__END_OF(clbt_multi_table_config, groups), "0.2"},
     {CLBT__END_OF(clbt_multi_table_config, zero_gathered_tails), "0.3"},
     {CLBT__END_OF(clbt_multi_table_config, reserved), "0.4"}}};
static const struct_kind step = {
    CLBT__KIND(clbt_step, step),
    {{CLBT__END_OF(clbt_step, seq_lens), "0.3"},
     {CLBT__END_OF(clbt_step, state_null_block), "0.4"}}};
static const struct_kind host_step = {
    CLBT__KIND(clbt_host_step, step),
    {{CLBT__END_OF(clbt_host_step, gathered_rows), "0.3"}}};
static const struct_kind multi_host_step = {
    CLBT__KIND(clbt_multi_host_step, step),
    {{CLBT__END_OF(clbt_multi_host_step, gathered_rows), "0.4"}}};
static const struct_kind token_slots_request = {
    CLBT__KIND(clbt_token_slots_request, request),
    {{CLBT__END_OF(clbt_token_slots_request, token_slots), "0.4"}}};
static const struct_kind export_request = {
    CLBT__KIND(clbt_export_request, request),
    {{CLBT__END_OF(clbt_export_request, idx_mapping), "0.5"}}};
static const struct_kind kv_cache_config = {
    CLBT__KIND(clbt_kv_cache_config, config),
    {{CLBT__END_OF(clbt_kv_cache_config, head_stride), "0.5"}}};
static const struct_kind kv_write = {
    CLBT__KIND(clbt_kv_write, write),
    {{CLBT__END_OF(clbt_kv_write, v_scale), "0.5"}}};
static const struct_kind attention_config = {
    CLBT__KIND(clbt_attention_config, config),
    {{CLBT__END_OF(clbt_attention_config, sliding_window), "0.6"}}};
static const struct_kind attention_batch = {
    CLBT__KIND(clbt_attention_batch, batch),
    {{CLBT__END_OF(clbt_attention_batch, output_scale), "0.6"}}};

static size_t layout_count(const struct_kind *kind) {
  size_t count = 0;
  while (count < sizeof kind->layouts / sizeof kind->layouts[0] &&
         kind->layouts[count].size)
    ++count;
  return count;
}

/*
 * Whether a struct_size is one a version of clbt gives its struct: a
 * listed layout, this library's own (listed too, but a struct that grows
 * must never refuse its own size), or a later version's.
 */
static bool is_layout(const struct_kind *kind, size_t size) {
  for (size_t i = 0; i < layout_count(kind); ++i)
    if (kind->layouts[i].size == size) return true;
  return size == kind->own ||
         (size > kind->own && size <= CLBT__MAX_STRUCT_SIZE &&
          size % kind->alignment == 0);
}

/* "0 (0.2's layout), 40 (0.2), 44 (0.3)": the layouts clbt knows. */
static void describe_layouts(const struct_kind *kind, char *text,
                             size_t size) {
  int used = snprintf(text, size, "0 (%s's layout)", kind->layouts[0].version);
  for (size_t i = 0; i < layout_count(kind) && used > 0 && (size_t)used < size;
       ++i)
    used += snprintf(text + used, size - (size_t)used, ", %zu (%s)",
                     kind->layouts[i].size, kind->layouts[i].version);
}

/*
 * The size a caller's struct has, from its struct_size; name is its path
 * in messages ("config->groups[1]").
 */
static clbt_status size_of(const void *given, const struct_kind *kind,
                           const char *name, size_t *size) {
  uint32_t declared;
  memcpy(&declared, given, sizeof declared);
  *size = declared ? declared : kind->layouts[0].size;
  if (is_layout(kind, *size)) return CLBT_SUCCESS;
  char sizes[160];
  describe_layouts(kind, sizes, sizeof sizes);
  return clbt__fail(CLBT_INVALID_CONFIG,
                    "%s: struct_size is %u; clbt %s reads %s or a later "
                    "version's size (a multiple of %zu above %zu, at most %d)",
                    name, (unsigned)declared, CLBT_VERSION_STRING, sizes,
                    kind->alignment, kind->own, CLBT__MAX_STRUCT_SIZE);
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
static clbt_status read_struct(const void *given, const struct_kind *kind,
                               void *out) {
  if (!given) return clbt__fail(CLBT_NULL_ARGUMENT, "%s is NULL", kind->name);
  size_t size;
  clbt_status status = size_of(given, kind, kind->name, &size);
  if (!status)
    status = check_unknown_fields(given, size, kind->own, kind->name);
  if (!status) copy_known(out, kind->own, given, size);
  return status;
}

clbt_status clbt__table_config_read(const clbt_table_config *given,
                                    clbt_table_config *out) {
  return read_struct(given, &table_config, out);
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
    clbt_status status = size_of(group, &group_config, name, &size);
    if (status) return status;
    if (g == 0) stride = size;
    if (size != stride)
      return clbt__fail(CLBT_INVALID_CONFIG,
                        "%s: struct_size says %zu bytes and groups[0]'s "
                        "%zu; the elements of one array have one size",
                        name, size, stride);
    status = check_unknown_fields(group, size, group_config.own, name);
    if (status) return status;
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__multi_table_config_read(const clbt_multi_table_config *given,
                                          clbt_multi_table_config *out) {
  clbt_status status = read_struct(given, &multi_table_config, out);
  /* A NULL or empty array is the caller's to report. */
  if (!status && out->groups) status = check_groups(out);
  return status;
}

clbt_group_config clbt__group_config_at(const clbt_multi_table_config *config,
                                        uint32_t g) {
  size_t stride;
  clbt_group_config group;
  /* Checked by clbt__multi_table_config_read: cannot fail. */
  size_of(config->groups, &group_config, "config->groups[0]", &stride);
  copy_known(&group, sizeof group, group_at(config, g, stride), stride);
  return group;
}

clbt_status clbt__step_read(const clbt_step *given, clbt_step *out) {
  return read_struct(given, &step, out);
}

clbt_status clbt__host_step_read(const clbt_host_step *given,
                                 clbt_host_step *out) {
  return read_struct(given, &host_step, out);
}

clbt_status clbt__multi_host_step_read(const clbt_multi_host_step *given,
                                       clbt_multi_host_step *out) {
  return read_struct(given, &multi_host_step, out);
}

clbt_status clbt__token_slots_request_read(
    const clbt_token_slots_request *given, clbt_token_slots_request *out) {
  return read_struct(given, &token_slots_request, out);
}

clbt_status clbt__export_request_read(const clbt_export_request *given,
                                      clbt_export_request *out) {
  return read_struct(given, &export_request, out);
}

clbt_status clbt__kv_cache_config_read(const clbt_kv_cache_config *given,
                                       clbt_kv_cache_config *out) {
  return read_struct(given, &kv_cache_config, out);
}

clbt_status clbt__kv_write_read(const clbt_kv_write *given,
                                clbt_kv_write *out) {
  return read_struct(given, &kv_write, out);
}

clbt_status clbt__attention_config_read(const clbt_attention_config *given,
                                        clbt_attention_config *out) {
  return read_struct(given, &attention_config, out);
}

clbt_status clbt__attention_batch_read(const clbt_attention_batch *given,
                                       clbt_attention_batch *out) {
  return read_struct(given, &attention_batch, out);
}

clbt_status clbt__config_require_nonzero(uint32_t value, const char *name) {
  if (value == 0)
    return clbt__fail(CLBT_INVALID_CONFIG, "config->%s is 0; it must be >= 1",
                      name);
  return CLBT_SUCCESS;
}
