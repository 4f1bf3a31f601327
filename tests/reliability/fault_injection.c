/* The fault-injection runtime (see fault_injection.h). */
#include "fault_injection.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far more than a scenario holds at once; overflowing one is a test bug. */
#define CLBT_FAULT_CAPACITY 4096

/* A handle or block and how many references the library holds to it. */
typedef struct held {
  const void *pointer;
  long references;
} held;

typedef struct holdings {
  held entries[CLBT_FAULT_CAPACITY];
  size_t count;
} holdings;

typedef struct site {
  clbt_fault_kind kind;
  const void *address;
  const char *function;
} site;

static struct {
  clbt_fault_kind armed_kind;
  unsigned long fail_at; /* 0: disarmed */
  unsigned long calls[CLBT_FAULT_KINDS];
  const char *failed_function;
  holdings objects, allocations;
  size_t imbalances;
} run;

/* Outlives runs: the figures of a whole sweep. */
static struct {
  site entries[CLBT_FAULT_CAPACITY];
  size_t count;
} sites_failed;

static void give_up(const char *what) {
  fprintf(stderr, "fault injection: more than %d %s\n", CLBT_FAULT_CAPACITY,
          what);
  abort();
}

static held *find(holdings *h, const void *pointer) {
  for (size_t i = 0; i < h->count; ++i)
    if (h->entries[i].pointer == pointer) return &h->entries[i];
  return NULL;
}

/* Drops one reference of an entry (NULL: one not held, an imbalance). */
static void drop(holdings *h, held *entry) {
  if (!entry) {
    ++run.imbalances;
    return;
  }
  if (--entry->references == 0) *entry = h->entries[--h->count];
}

static void take(holdings *h, const void *pointer) {
  held *entry = find(h, pointer);
  if (!entry) {
    if (h->count == CLBT_FAULT_CAPACITY) give_up("held objects");
    entry = &h->entries[h->count++];
    *entry = (held){pointer, 0};
  }
  ++entry->references;
}

static void remember_site(clbt_fault_kind kind, const void *address,
                          const char *function) {
  for (size_t i = 0; i < sites_failed.count; ++i)
    if (sites_failed.entries[i].kind == kind &&
        sites_failed.entries[i].address == address)
      return;
  if (sites_failed.count == CLBT_FAULT_CAPACITY) give_up("call sites");
  sites_failed.entries[sites_failed.count++] = (site){kind, address, function};
}

/* Counts a call; true when it is the armed one. */
static bool count_call(clbt_fault_kind kind, const char *function,
                       const void *call_site) {
  unsigned long number = ++run.calls[kind];
  if (run.fail_at == 0 || kind != run.armed_kind || number != run.fail_at)
    return false;
  run.failed_function = function;
  remember_site(kind, call_site, function);
  return true;
}

void clbt_fault_start(clbt_fault_kind kind, unsigned long fail_at) {
  memset(&run, 0, sizeof run);
  run.armed_kind = kind;
  run.fail_at = fail_at;
}

void clbt_fault_disarm(void) { run.fail_at = 0; }

unsigned long clbt_fault_calls(clbt_fault_kind kind) { return run.calls[kind]; }

const char *clbt_fault_failed_function(void) { return run.failed_function; }

size_t clbt_fault_live_objects(void) { return run.objects.count; }

size_t clbt_fault_live_allocations(void) { return run.allocations.count; }

size_t clbt_fault_imbalances(void) { return run.imbalances; }

size_t clbt_fault_sites_failed(clbt_fault_kind kind) {
  size_t count = 0;
  for (size_t i = 0; i < sites_failed.count; ++i)
    count += sites_failed.entries[i].kind == kind;
  return count;
}

bool clbt_fault_function_failed(clbt_fault_kind kind, const char *function) {
  for (size_t i = 0; i < sites_failed.count; ++i)
    if (sites_failed.entries[i].kind == kind &&
        strcmp(sites_failed.entries[i].function, function) == 0)
      return true;
  return false;
}

bool clbt_fault_opencl_call(const char *function, const void *call_site) {
  return count_call(CLBT_FAULT_OPENCL, function, call_site);
}

void clbt_fault_object_created(const void *object) {
  take(&run.objects, object);
}

void clbt_fault_object_retained(const void *object) {
  take(&run.objects, object);
}

void clbt_fault_object_released(const void *object) {
  drop(&run.objects, find(&run.objects, object));
}

/* ---- allocators ---------------------------------------------------------- */

/* Records a block the library now holds; passes it (or NULL) on. */
static void *allocated(void *block) {
  if (block) take(&run.allocations, block);
  return block;
}

#define CLBT_FAULT_ALLOCATION_FAILS(function) \
  count_call(CLBT_FAULT_ALLOCATION, function, __builtin_return_address(0))

void *clbt_fault_wrap_malloc(size_t size) {
  return CLBT_FAULT_ALLOCATION_FAILS("malloc") ? NULL : allocated(malloc(size));
}

void *clbt_fault_wrap_calloc(size_t count, size_t size) {
  return CLBT_FAULT_ALLOCATION_FAILS("calloc") ? NULL
                                               : allocated(calloc(count, size));
}

void *clbt_fault_wrap_aligned_alloc(size_t alignment, size_t size) {
  return CLBT_FAULT_ALLOCATION_FAILS("aligned_alloc")
             ? NULL
             : allocated(aligned_alloc(alignment, size));
}

/* strdup and strndup are POSIX, not C11: built from malloc here. */
char *clbt_fault_wrap_strndup(const char *text, size_t size) {
  if (CLBT_FAULT_ALLOCATION_FAILS("strndup")) return NULL;
  size_t length = strnlen(text, size);
  char *copy = allocated(malloc(length + 1));
  if (copy) {
    memcpy(copy, text, length);
    copy[length] = '\0';
  }
  return copy;
}

char *clbt_fault_wrap_strdup(const char *text) {
  if (CLBT_FAULT_ALLOCATION_FAILS("strdup")) return NULL;
  size_t length = strlen(text);
  char *copy = allocated(malloc(length + 1));
  if (copy) memcpy(copy, text, length + 1);
  return copy;
}

/* A failed realloc leaves the old block in place, held as before. */
void *clbt_fault_wrap_realloc(void *block, size_t size) {
  if (CLBT_FAULT_ALLOCATION_FAILS("realloc")) return NULL;
  /* Looked up first: the old pointer must not be used once realloc ran. */
  bool had_block = block != NULL;
  held *entry = had_block ? find(&run.allocations, block) : NULL;
  void *moved = realloc(block, size);
  if (moved && had_block) drop(&run.allocations, entry);
  return allocated(moved);
}

void clbt_fault_wrap_free(void *block) {
  if (block) drop(&run.allocations, find(&run.allocations, block));
  free(block);
}
