/*
 * xorshift64*: a small generator with the same sequence on every platform,
 * so that a printed seed replays a run (the selftest, the bench, the commit
 * tests). The state must not be 0.
 */
#ifndef SUPPORT_XORSHIFT_H
#define SUPPORT_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift64_next(uint64_t *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 2685821657736338717ull;
}

#endif /* SUPPORT_XORSHIFT_H */
