/* A header the host and a kernel share, under an include directory. */
#define SHARED_VALUE 3
