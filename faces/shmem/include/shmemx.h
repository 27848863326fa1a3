/* shmemx.h: memwire's OpenSHMEM extensions. None yet; the specification
 * requires the header to exist. */
#ifndef MWSHMEM_SHMEMX_H
#define MWSHMEM_SHMEMX_H
#include "shmem.h"
#endif
