/*
 * lock.c: distributed locks (set, test, clear) as a fair ticket lock in
 * the lock word on PE 0, built on memwire's 32- and 64-bit atomics: the
 * word's low half (first four bytes) is the ticket being served, its high
 * half the next ticket to hand out. Waiters are served in arrival order.
 */
#include "internal.h"

#define LOCK_OWNER 0

static struct mwshmem_remote lock_word(const char *routine, long *lock) {
    mwshmem_require_init(routine);
    if ((uintptr_t)lock % 8 != 0) mwshmem_fail(routine, "lock %p is not 8-byte aligned", (void *)lock);
    return mwshmem_translate(routine, "lock", lock, sizeof *lock, LOCK_OWNER);
}

static uint64_t atomic(const char *routine, struct mwshmem_remote at, uint64_t offset, mw_atomic_op op,
                       mw_width width, uint64_t operand, uint64_t compare) {
    mw_handle *h;
    uint64_t old;
    mwshmem_check(routine, mw_atomic_nb(mwshmem.ep, LOCK_OWNER, at.key, at.offset + offset, op, width, operand,
                                        compare, true, &h));
    mwshmem_check(routine, mw_wait_value(&h, &old));
    return old;
}

void shmem_set_lock(long *lock) {
    struct mwshmem_remote at = lock_word("shmem_set_lock", lock);
    uint32_t ticket = (uint32_t)atomic("shmem_set_lock", at, 4, MW_ATOMIC_ADD, MW_WIDTH_U32, 1, 0);
    unsigned spins = 0;
    while ((uint32_t)atomic("shmem_set_lock", at, 0, MW_ATOMIC_LOAD, MW_WIDTH_U32, 0, 0) != ticket)
        mwshmem_poll(&spins);
}

int shmem_test_lock(long *lock) {
    struct mwshmem_remote at = lock_word("shmem_test_lock", lock);
    uint64_t word = atomic("shmem_test_lock", at, 0, MW_ATOMIC_LOAD, MW_WIDTH_U64, 0, 0);
    if ((uint32_t)word != (uint32_t)(word >> 32)) return 1; /* held, or others wait */
    /* Free: take the next ticket, which is the one being served. */
    uint64_t taken = word + ((uint64_t)1 << 32);
    return atomic("shmem_test_lock", at, 0, MW_ATOMIC_COMPARE_SWAP, MW_WIDTH_U64, taken, word) == word ? 0 : 1;
}

void shmem_clear_lock(long *lock) {
    struct mwshmem_remote at = lock_word("shmem_clear_lock", lock);
    shmem_quiet();
    atomic("shmem_clear_lock", at, 0, MW_ATOMIC_ADD, MW_WIDTH_U32, 1, 0);
}
