/*
 * A program of the tests' own (tests/device/test_program.c), embedded as
 * the library's kernels are (clbt_embed_kernel): it includes part.cl, then
 * twice.cl, which includes part.cl again. Built with -DBREAK_PART or
 * -DBREAK_ROOT it fails at the line so marked, in part.cl or here.
 */
#include "part.cl"
#include "twice.cl"

__kernel void root(__global int *out) {
  out[0] = part_value() + twice_value();
#ifdef BREAK_ROOT
  out[1] = not_declared_in_root; /* BROKEN_ROOT */
#endif
}
