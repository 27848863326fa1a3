/* The deprecated mpp/ include path of OpenSHMEM: the same as <shmemx.h>. */
#include "../shmemx.h"
