/* A non-symmetric address must be refused loudly: the routine's name and
 * the argument on stderr, and the whole job ends with a nonzero status
 * (tests/run.sh checks both). */
#include <shmem.h>
#include <stdio.h>

int main(void) {
    shmem_init();
    long not_symmetric[4] = {0};
    long value = 1;
    shmem_barrier_all();
    shmem_long_put(not_symmetric, &value, 1, (shmem_my_pe() + 1) % shmem_n_pes());
    printf("error_test: the put into a stack array returned\n");
    shmem_finalize();
    return 0;
}
