/*
 * The step kernel's commit: a packet of changed rows (cl/contract.h has
 * its words) applied to the committed rows, their lengths and versions.
 * A launch with CLBT_WORK_SCATTER spreads it over its whole grid and does
 * nothing else; any other launch that carries one has every work-group
 * apply all of it before it reads (a folded commit), so that each reads
 * rows it wrote itself, and where two work-groups write one word they
 * write the same value.
 *
 * A packet is in the record (inline) or in a buffer (__global). Every
 * work-group copies an inline packet into local memory first, reading the
 * record's array by index: a pointer into a by-value argument makes
 * NVIDIA's compiler copy the whole record into each work-item's private
 * memory (a steady 4-group step's 5 KiB packet took 12 us of device time
 * to apply that way). OpenCL C 1.2 has no pointer that reaches both local
 * and global memory, so the reader is defined once per address space.
 */
#pragma once
#include "common.cl"

/*
 * Defines `name`, which applies one group's section in `space`: the
 * work-items from `first` on take every `stride`-th of its items, each
 * row's length first, then each id. An id finds its row by a search of
 * the rows' first ids, which ascend. Items are counted in 64 bits so that
 * nothing wraps.
 */
#define DEFINE_APPLY_SECTION(space, name)                                   \
  static void name(space const uint *section, uint num_rows, uint num_ids,  \
                   __global int *storage, clbt_group_layout at,             \
                   ulong version, ulong first, ulong stride) {              \
    __global int *rows = region(storage, at, CLBT_REGION_ROWS);             \
    __global int *lengths = region(storage, at, CLBT_REGION_ROW_LENGTHS);   \
    __global ulong *versions =                                              \
        (__global ulong *)region(storage, at, CLBT_REGION_ROW_VERSIONS);    \
    space const uint *ids = section + CLBT_PACKET_ROW_WORDS * (ulong)num_rows; \
    ulong items = (ulong)num_rows + num_ids;                                \
    for (ulong i = first; i < items; i += stride) {                         \
      if (i < num_rows) {                                                   \
        space const uint *entry = section + CLBT_PACKET_ROW_WORDS * i;      \
        lengths[entry[CLBT_PACKET_ROW]] = (int)entry[CLBT_PACKET_ROW_LENGTH]; \
        versions[entry[CLBT_PACKET_ROW]] = version;                         \
        continue;                                                           \
      }                                                                     \
      uint id = (uint)(i - num_rows);                                       \
      uint low = 0, high = num_rows - 1;                                    \
      while (low < high) {                                                  \
        uint middle = low + (high - low + 1) / 2;                           \
        if (section[CLBT_PACKET_ROW_WORDS * middle +                        \
                    CLBT_PACKET_ROW_FIRST_ID] <= id)                        \
          low = middle;                                                     \
        else                                                                \
          high = middle - 1;                                                \
      }                                                                     \
      space const uint *entry = section + CLBT_PACKET_ROW_WORDS * low;      \
      ulong column = entry[CLBT_PACKET_ROW_COLUMN] +                        \
                     (id - entry[CLBT_PACKET_ROW_FIRST_ID]);                \
      rows[(ulong)entry[CLBT_PACKET_ROW] * at.row_stride + column] =        \
          (int)ids[id];                                                     \
    }                                                                       \
  }
DEFINE_APPLY_SECTION(__global, apply_section_in_buffer)
DEFINE_APPLY_SECTION(__local, apply_section_inline)

/* The version a packet's rows get, and where a buffer's packet starts. */
static ulong packet_version(clbt_record_head head) {
  return (ulong)head.version_high << 32 | head.version_low;
}
static ulong packet_at(clbt_record_head head) {
  return (ulong)head.packet_at_high << 32 | head.packet_at_low;
}

/* Group g's section starts after the header and the sections before it. */
static ulong section_words(uint num_rows, uint num_ids) {
  return CLBT_PACKET_ROW_WORDS * (ulong)num_rows + num_ids;
}

/*
 * Applies the launch's packet, from the record's local copy or its buffer,
 * with the work-items from `first` on taking every `stride`-th item of
 * each group's section.
 */
static void apply_packet(clbt_record_head head,
                         __local const uint *inline_words,
                         __global const uint *buffer, clbt_kernel_layout layout,
                         __global int *storage, ulong first, ulong stride) {
  bool inline_packet = (head.work & CLBT_WORK_PACKET_INLINE) != 0;
  __global const uint *buffer_words = buffer + packet_at(head);
  ulong version = packet_version(head);
  ulong at = CLBT_PACKET_HEADER_WORDS_PER_GROUP * (ulong)CLBT_NUM_GROUPS;
  FOR_EACH_GROUP(g) {
    ulong count_at = CLBT_PACKET_HEADER_WORDS_PER_GROUP * g;
    uint num_rows = inline_packet ? inline_words[count_at]
                                  : buffer_words[count_at];
    uint num_ids = inline_packet ? inline_words[count_at + 1]
                                 : buffer_words[count_at + 1];
    if (num_rows > 0 && inline_packet)
      apply_section_inline(inline_words + at, num_rows, num_ids, storage,
                           layout.groups[g], version, first, stride);
    else if (num_rows > 0)
      apply_section_in_buffer(buffer_words + at, num_rows, num_ids, storage,
                              layout.groups[g], version, first, stride);
    at += section_words(num_rows, num_ids);
  }
}
