/*
 * This program's clSetKernelArg (kernel_arg_spy.c), for the suites that
 * watch what clbt gives its kernels: the library is linked in statically,
 * so its calls come here; each is shown to the hook when one is set, and
 * counted when it sets the watched buffer, then passed on to the driver's.
 */
#ifndef CLBT_KERNEL_ARG_SPY_H
#define CLBT_KERNEL_ARG_SPY_H

#include "clbt/clbt.h"

typedef void clbt_test_arg_hook(cl_kernel kernel, cl_uint index, size_t size,
                                const void *value);
extern clbt_test_arg_hook *clbt_test_arg_seen; /* NULL: none */

extern cl_mem clbt_test_watched;        /* NULL: none */
extern unsigned clbt_test_watched_sets; /* how often it was set so far */

#endif /* CLBT_KERNEL_ARG_SPY_H */
