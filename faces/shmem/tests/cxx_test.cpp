// shmem.h from C++ (the typed names; the generic ones are C11 macros): a
// ring put and a sum, built by oshc++ and run by tests/run.sh.
#include <shmem.h>

#include <cstdio>

int main() {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *slot = static_cast<long *>(shmem_malloc(sizeof(long)));
    shmem_long_p(slot, me, (me + 1) % n);
    shmem_barrier_all();
    long total = 0;
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &total, slot, 1);
    bool ok = *slot == (me + n - 1) % n && total == static_cast<long>(n) * (n - 1) / 2;
    std::printf("cxx_test: PE %d of %d: %s\n", me, n, ok ? "passed" : "FAILED");
    shmem_free(slot);
    shmem_finalize();
    return ok ? 0 : 1;
}
