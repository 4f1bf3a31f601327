/*
 * `clbt bench`: the benchmark of issue 3. Every figure is a median over many
 * runs, and every ratio is taken from measurements interleaved in one
 * process (a shared, noisy machine moves both sides of a ratio alike).
 */
#ifndef CLBT_BENCH_H
#define CLBT_BENCH_H

#include <stdio.h>

/* Runs `clbt bench` with its arguments (after "bench"); returns the exit status. */
int clbt_bench_main(int argc, char **argv);

#endif /* CLBT_BENCH_H */
