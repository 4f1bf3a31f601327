/* A root that includes a header of an include directory (as the library's
   kernels include the public headers' "clbt/..."), by the name the host's
   compiler would give it (tests/check_embed_include.cmake). */
#include "kernel/shared.h"
