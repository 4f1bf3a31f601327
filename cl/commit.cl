/*
 * The step kernel's commit: a packet of changed rows (cl/contract.h has
 * its words) applied to the committed rows, their lengths and versions,
 * and the committed rows as the parts of the launch that carries it read
 * them.
 *
 * A launch applies its packet once, spread over its whole grid (each word
 * by one work-item); with CLBT_WORK_SCATTER that is all it does. Any
 * other launch that carries one (a folded commit) runs its parts in the
 * same launch, and OpenCL orders nothing between work-groups: a part that
 * read a word of storage the packet writes would race with the work-item
 * writing it. So no part does. Each reads a row through committed_row_of,
 * which takes what the packet changes (the row's length, its version and
 * its run of changed ids) from the packet itself and only the rest from
 * storage, which nothing in the launch writes. Every interleaving of the
 * work-groups then reads the same values, and the launch has no data race
 * (docs/design.md, "The folded commit").
 *
 * A packet is in the record (inline) or in a buffer (__global). Every
 * work-group copies an inline packet into local memory first, reading the
 * record's array by index: a pointer into a by-value argument makes
 * NVIDIA's compiler copy the whole record into each work-item's private
 * memory (a steady 4-group step's 5 KiB packet took 12 us of device time
 * to apply that way). OpenCL C 1.2 has no pointer that reaches both local
 * and global memory, so a packet's words are read through packet_word,
 * and the writer is defined once per address space.
 */
#pragma once
#include "common.cl"

/*
 * A CPU's work-item reads its rows one after another, where a GPU's
 * work-items read theirs side by side: on a CPU each work-item keeps a
 * filter of the rows the packet may change, bit row % (32 * words), so
 * that most reads skip the search of the packet (without it, PoCL's
 * export took about 1.5 times the cycles).
 */
#define CHANGED_FILTER_WORDS 64

/* The launch's packet, where each group's section of it starts and how
   many rows and ids it holds (none for a launch without one). */
typedef struct packet_view {
  __local const uint *inline_words;  /* the record's, copied */
  __global const uint *buffer_words; /* an uploaded one's */
  bool in_record;
  ulong version; /* the version the packet's rows get */
  uint num_rows[CLBT_NUM_GROUPS], num_ids[CLBT_NUM_GROUPS];
  ulong section_at[CLBT_NUM_GROUPS]; /* in words from the packet's start */
#if !CLBT_GPU
  uint changed[CHANGED_FILTER_WORDS]; /* the filter, over every group */
#endif
} packet_view;

static uint packet_word(const packet_view *packet, ulong i) {
  return packet->in_record ? packet->inline_words[i]
                           : packet->buffer_words[i];
}

/* Group g's section starts after the header and the sections before it. */
static ulong section_words(uint num_rows, uint num_ids) {
  return CLBT_PACKET_ROW_WORDS * (ulong)num_rows + num_ids;
}

/*
 * The launch's packet, from the record's local copy or its buffer, into
 * *out (not returned: Oclgrind 21.10 cannot run the scope declaration
 * LLVM's inliner leaves for a returned struct this large).
 */
static void view_packet(clbt__record_head head,
                        __local const uint *inline_words,
                        __global const uint *buffer, packet_view *out) {
  bool in_buffer = (head.work & CLBT_WORK_PACKET_IN_BUFFER) != 0;
  packet_view packet;
  packet.in_record = (head.work & CLBT_WORK_PACKET_INLINE) != 0;
  packet.inline_words = inline_words;
  packet.buffer_words =
      in_buffer ? buffer + ((ulong)head.packet_at_high << 32 |
                            head.packet_at_low)
                : buffer;
  packet.version = (ulong)head.version_high << 32 | head.version_low;
  bool present = packet.in_record || in_buffer;
  ulong at = CLBT_PACKET_HEADER_WORDS_PER_GROUP * (ulong)CLBT_NUM_GROUPS;
  FOR_EACH_GROUP(g) {
    ulong count_at = CLBT_PACKET_HEADER_WORDS_PER_GROUP * g;
    packet.num_rows[g] = present ? packet_word(&packet, count_at) : 0;
    packet.num_ids[g] = present ? packet_word(&packet, count_at + 1) : 0;
    packet.section_at[g] = at;
    at += section_words(packet.num_rows[g], packet.num_ids[g]);
  }
#if !CLBT_GPU
  for (uint w = 0; w < CHANGED_FILTER_WORDS; ++w) packet.changed[w] = 0;
  FOR_EACH_GROUP(g) {
    for (uint i = 0; i < packet.num_rows[g]; ++i) {
      uint row = packet_word(&packet, packet.section_at[g] +
                                          CLBT_PACKET_ROW_WORDS * (ulong)i +
                                          CLBT_PACKET_ROW);
      packet.changed[row / 32 % CHANGED_FILTER_WORDS] |= 1u << row % 32;
    }
  }
#endif
  *out = packet;
}

/* Whether the packet may change `row` in some group: always on a GPU. */
static bool may_change(const packet_view *packet, uint row) {
#if CLBT_GPU
  return true;
#else
  return (packet->changed[row / 32 % CHANGED_FILTER_WORDS] >> row % 32 & 1) !=
         0;
#endif
}

/*
 * Defines `name`, which applies one group's section in `space`: the
 * work-items from `first` on take every `stride`-th of its items, each
 * row's length first, then each id. An id finds its row by a search of
 * the rows' first ids, which ascend. Items are counted in 64 bits so that
 * nothing wraps.
 */
#define DEFINE_APPLY_SECTION(space, name)                                   \
  static void name(space const uint *section, uint num_rows, uint num_ids,  \
                   __global int *storage, clbt__group_layout at,            \
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

/* Applies the launch's packet over the whole grid: each work-item every
   global-size-th item of each group's section. */
static void apply_packet(const packet_view *packet, clbt__kernel_layout layout,
                         __global int *storage) {
  ulong first = get_global_id(0), stride = get_global_size(0);
  FOR_EACH_GROUP(g) {
    uint num_rows = packet->num_rows[g], num_ids = packet->num_ids[g];
    ulong at = packet->section_at[g];
    if (num_rows > 0 && packet->in_record)
      apply_section_inline(packet->inline_words + at, num_rows, num_ids,
                           storage, layout.groups[g], packet->version, first,
                           stride);
    else if (num_rows > 0)
      apply_section_in_buffer(packet->buffer_words + at, num_rows, num_ids,
                              storage, layout.groups[g], packet->version,
                              first, stride);
  }
}

/* ---- the committed rows, as the launch reads them ---------------------- */

/* One group's committed rows in storage, and its section of the packet. */
typedef struct committed_group {
  const packet_view *packet;
  uint g;
  __global const int *rows, *lengths;
  __global const ulong *versions;
  uint row_stride;
} committed_group;

static committed_group committed_group_of(const packet_view *packet, uint g,
                                          __global int *storage,
                                          clbt__group_layout at) {
  committed_group group = {
      packet,
      g,
      region(storage, at, CLBT_REGION_ROWS),
      region(storage, at, CLBT_REGION_ROW_LENGTHS),
      (__global const ulong *)region(storage, at, CLBT_REGION_ROW_VERSIONS),
      at.row_stride};
  return group;
}

/*
 * A committed row as the launch reads it: its length (never past the
 * width), whether the packet changes it, and the run of columns
 * [run_begin, run_begin + run_count) whose ids come from the packet, from
 * word run_at on.
 */
typedef struct committed_row {
  int row; /* -1: none, of length 0 */
  uint length;
  bool changed;
  uint run_begin, run_count;
  ulong run_at;
} committed_row;

/* Where `row` is among group g's entries (a search of them: their rows
   ascend), or the group's num_rows when the packet leaves it alone. */
static uint entry_of(const packet_view *packet, uint g, uint row) {
  uint num_rows = packet->num_rows[g], low = 0, high = num_rows;
  ulong section = packet->section_at[g];
  while (low < high) {
    uint middle = low + (high - low) / 2;
    if (packet_word(packet, section + CLBT_PACKET_ROW_WORDS * middle +
                                CLBT_PACKET_ROW) < row)
      low = middle + 1;
    else
      high = middle;
  }
  bool found = low < num_rows &&
               packet_word(packet, section + CLBT_PACKET_ROW_WORDS * low +
                                       CLBT_PACKET_ROW) == row;
  return found ? low : num_rows;
}

/* Row `row` as the packet's entry e of the group writes it, into *out. */
static void changed_row(const committed_group *group, int row, uint e,
                        committed_row *out) {
  const packet_view *packet = group->packet;
  uint num_rows = packet->num_rows[group->g];
  ulong section = packet->section_at[group->g];
  ulong entry = section + CLBT_PACKET_ROW_WORDS * (ulong)e;
  uint first_id = packet_word(packet, entry + CLBT_PACKET_ROW_FIRST_ID);
  uint end_id = e + 1 < num_rows
                    ? packet_word(packet, entry + CLBT_PACKET_ROW_WORDS +
                                              CLBT_PACKET_ROW_FIRST_ID)
                    : packet->num_ids[group->g];
  out->row = row;
  out->length = min(packet_word(packet, entry + CLBT_PACKET_ROW_LENGTH),
                    group->row_stride);
  out->changed = true;
  out->run_begin = packet_word(packet, entry + CLBT_PACKET_ROW_COLUMN);
  out->run_count = end_id - first_id;
  out->run_at = section + CLBT_PACKET_ROW_WORDS * (ulong)num_rows + first_id;
}

/*
 * Row `row` of a group (-1, or below max_num_reqs), into *out: the
 * packet's entry for it when there is one, else its length in storage.
 * The device's lengths are written by commits, and by whoever else writes
 * the buffer clbt hands out (clbt_table_device_row_lengths), so none is
 * trusted past the width. Always inlined, as copy_committed is: a call for
 * every row read made a CPU's gather take 1.7 times as long on PoCL, even
 * with no packet. Written through a pointer, as view_packet's.
 */
__attribute__((always_inline)) static inline void committed_row_of(
    const committed_group *group, int row, committed_row *out) {
  const packet_view *packet = group->packet;
  uint num_rows = packet->num_rows[group->g];
  uint e = row >= 0 && may_change(packet, (uint)row)
               ? entry_of(packet, group->g, (uint)row)
               : num_rows;
  if (e < num_rows) {
    changed_row(group, row, e, out);
    return;
  }
  out->row = row;
  out->length = row >= 0 ? min((uint)group->lengths[row], group->row_stride)
                         : 0;
  out->changed = false;
  out->run_begin = out->run_count = 0;
  out->run_at = 0;
}

/* The commit that last wrote a row: the packet's, when it changes it. */
static ulong committed_version(const committed_group *group,
                               const committed_row *r) {
  return r->changed ? group->packet->version : group->versions[r->row];
}

/* Column `column` (below the width) of a row; 0 for none, which reads
   nothing. */
static int committed_id(const committed_group *group, const committed_row *r,
                        uint column) {
  if (r->row < 0) return 0;
  uint k = column - r->run_begin;
  if (k < r->run_count) return (int)packet_word(group->packet, r->run_at + k);
  return group->rows[(ulong)r->row * group->row_stride + column];
}

/*
 * Columns [first, count) of a row to out, every `step`-th (count at most
 * the row's length): those before and after the packet's run from storage,
 * the run's from the packet, each range a loop of its own. Always inlined,
 * where the caller's step is known (PoCL builds a kernel for its
 * work-group size, 1 on a CPU), so that a CPU's compiler vectorises the
 * loops: left a call, it made PoCL's export and gather take 1.6 to 1.7
 * times their cycles.
 */
__attribute__((always_inline)) static inline void copy_committed(
    __global int *out, const committed_group *group, const committed_row *r,
    uint first, uint count, uint step) {
  if (r->row < 0) return;
  __global const int *ids = group->rows + (ulong)r->row * group->row_stride;
  uint run_end = min(r->run_begin + r->run_count, count);
  copy_ids(out, ids, first, min(r->run_begin, count), step);
  for (uint p = first_from(first, step, r->run_begin); p < run_end; p += step)
    out[p] = (int)packet_word(group->packet, r->run_at + (p - r->run_begin));
  copy_ids(out, ids, first_from(first, step, max(r->run_begin, run_end)),
           count, step);
}
