/* The deprecated mpp/ include path of OpenSHMEM: the same as <shmem.h>. */
#include "../shmem.h"
