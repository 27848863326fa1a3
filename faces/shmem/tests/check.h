/* Checks for the OpenSHMEM face's tests: a failed check prints the PE,
 * file, line and reason, then ends the whole job (shmem_global_exit). */
#ifndef MWSHMEM_TEST_CHECK_H
#define MWSHMEM_TEST_CHECK_H
#include <shmem.h>
#include <stdio.h>

static unsigned long checks;

#define CHECK(cond, ...)                                                                              \
    do {                                                                                              \
        checks++;                                                                                     \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "PE %d: %s:%d: check failed: %s: ", shmem_my_pe(), __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                             \
            fprintf(stderr, "\n");                                                                    \
            shmem_global_exit(1);                                                                     \
        }                                                                                             \
    } while (0)

#define PASSED(name)                                                                                  \
    do {                                                                                              \
        shmem_barrier_all();                                                                          \
        printf("%s: PE %d of %d: %lu checks passed\n", name, shmem_my_pe(), shmem_n_pes(), checks);    \
    } while (0)
#endif
