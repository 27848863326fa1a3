/*
 * setup.c: library setup, exit and query (shmem_init ... shmem_finalize,
 * global_exit, pe/addr_accessible, shmem_ptr, info), the executable's
 * writable segments registered as memwire regions so global and static
 * variables are symmetric, address translation, and the error path.
 */
#include <elf.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct mwshmem_state mwshmem;

/* Active-message id of the global-exit notice (one-way, to every other PE). */
#define MWSHMEM_AM_GLOBAL_EXIT 0x5348

static void report(const char *routine, const char *fmt, va_list args) {
    if (mwshmem.ep != NULL)
        fprintf(stderr, "%s: PE %d: ", routine, mwshmem.my_pe);
    else
        fprintf(stderr, "%s: ", routine);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
}

void mwshmem_fail(const char *routine, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    report(routine, fmt, args);
    va_end(args);
    shmem_global_exit(1);
}

void mwshmem_check(const char *routine, mw_status status) {
    if (status == MW_OK) return;
    if (status == MW_ERR_PEER_UNREACHABLE)
        mwshmem_fail(routine, "a peer PE is down or unreachable (memwire: %s)", mw_last_error());
    mwshmem_fail(routine, "memwire failed: %s (%s)", mw_strerror(status), mw_last_error());
}

void mwshmem_require_init(const char *routine) {
    if (!mwshmem.initialized) mwshmem_fail(routine, "called before shmem_init (or after shmem_finalize)");
}

void mwshmem_poll(unsigned *spins) {
    mw_progress(mwshmem.ep);
    if (++*spins > 64) sched_yield();
}

/* ---- the executable's writable segments ---------------------------------- */

struct segment_search {
    char *base[MWSHMEM_MAX_SEGMENTS];
    size_t len[MWSHMEM_MAX_SEGMENTS];
    int count;
};

/* The main program is the first object dl_iterate_phdr reports. Its
 * writable PT_LOAD segments hold .data and .bss; the part of them under
 * PT_GNU_RELRO is made read-only after relocation and is skipped. */
static int find_segments(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct segment_search *found = data;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            relro_start = info->dlpi_addr + ph->p_vaddr;
            relro_end = relro_start + ph->p_memsz;
        }
    }
    for (int i = 0; i < info->dlpi_phnum && found->count < MWSHMEM_MAX_SEGMENTS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || ph->p_memsz == 0) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (relro_end > start && relro_start <= start) start = relro_end;
        if (start >= end) continue;
        found->base[found->count] = (char *)start;
        found->len[found->count] = end - start;
        found->count++;
    }
    return 1; /* the main program only */
}

static void register_segments(void) {
    struct segment_search found = {0};
    dl_iterate_phdr(find_segments, &found);
    for (int i = 0; i < found.count; i++) {
        struct mwshmem_area *area = &mwshmem.segs[i];
        area->base = found.base[i];
        area->len = found.len[i];
        mwshmem_check("shmem_init",
                      mw_region_register(mwshmem.ep, area->base, area->len, MW_ACCESS_ALL, &area->region));
        area->keys = calloc((size_t)mwshmem.n_pes, sizeof *area->keys);
        if (area->keys == NULL) mwshmem_fail("shmem_init", "out of memory");
        mwshmem_check("shmem_init", mw_region_exchange_keys(mwshmem.ep, area->region, area->keys, (size_t)mwshmem.n_pes));
    }
    mwshmem.nsegs = found.count;
}

static void free_area(struct mwshmem_area *area) {
    mwshmem_check("shmem_finalize", mw_region_free(&area->region));
    free(area->keys);
    area->keys = NULL;
}

/* ---- address translation ------------------------------------------------- */

static bool area_holds(const struct mwshmem_area *area, const void *addr, size_t len) {
    const char *p = addr;
    return area->region != NULL && p >= area->base && (size_t)(p - area->base) <= area->len &&
           len <= area->len - (size_t)(p - area->base);
}

const struct mwshmem_area *mwshmem_area_of(const void *addr, size_t len) {
    if (area_holds(&mwshmem.heap, addr, len)) return &mwshmem.heap;
    for (int i = 0; i < mwshmem.nsegs; i++)
        if (area_holds(&mwshmem.segs[i], addr, len)) return &mwshmem.segs[i];
    return NULL;
}

struct mwshmem_remote mwshmem_translate(const char *routine, const char *arg, const void *addr, size_t len, int pe) {
    const struct mwshmem_area *area = mwshmem_area_of(addr, len);
    if (area == NULL)
        mwshmem_fail(routine, "argument %s (%p, %zu bytes) is not symmetric: not in the symmetric heap nor in "
                     "the program's global or static data", arg, addr, len);
    uint64_t start = area->starts != NULL ? area->starts[pe] : 0;
    struct mwshmem_remote remote = {area->keys[pe], start + (uint64_t)((const char *)addr - area->base)};
    return remote;
}

/* ---- setup and exit ---------------------------------------------------- */

static void on_global_exit(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)ctx;
    (void)user;
    fflush(stdout);
    _exit(msg->nargs > 0 ? (int)msg->args[0] : 1);
}

int shmem_init_thread(int requested, int *provided) {
    if (mwshmem.initialized) return 0;
    if (mwshmem.ever_initialized) {
        fprintf(stderr, "shmem_init: the library cannot be initialized again after shmem_finalize\n");
        return 1;
    }
    if (mw_init(&mwshmem.ep) != MW_OK) {
        fprintf(stderr, "shmem_init: joining the job failed: %s\n", mw_last_error());
        return 1;
    }
    uint32_t rank, size;
    mwshmem_check("shmem_init", mw_rank(mwshmem.ep, &rank));
    mwshmem_check("shmem_init", mw_size(mwshmem.ep, &size));
    mwshmem.my_pe = (int)rank;
    mwshmem.n_pes = (int)size;
    /* memwire's endpoint takes calls from any thread, and the face locks
     * what it shares (a context's pending operations): every level holds. */
    mwshmem.thread_level = requested < SHMEM_THREAD_SINGLE     ? SHMEM_THREAD_SINGLE
                           : requested > SHMEM_THREAD_MULTIPLE ? SHMEM_THREAD_MULTIPLE
                                                               : requested;
    if (provided != NULL) *provided = mwshmem.thread_level;
    mwshmem_check("shmem_init", mw_register_handler(mwshmem.ep, MWSHMEM_AM_GLOBAL_EXIT, on_global_exit, NULL));
    mwshmem.initialized = 1;
    mwshmem.ever_initialized = 1;
    register_segments();
    mwshmem_heap_init();
    mwshmem_teams_init();
    if (getenv("SHMEM_VERSION") != NULL || getenv("SMA_VERSION") != NULL)
        if (mwshmem.my_pe == 0) printf("%s, OpenSHMEM %d.%d\n", SHMEM_VENDOR_STRING, SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION);
    if (getenv("SHMEM_INFO") != NULL || getenv("SMA_INFO") != NULL)
        if (mwshmem.my_pe == 0)
            printf("%s: SHMEM_SYMMETRIC_SIZE (heap bytes per PE, suffix k/m/g/t; default 128m), "
                   "SHMEM_VERSION, SHMEM_INFO; memwire's MW_* variables (docs/configuration.md)\n",
                   SHMEM_VENDOR_STRING);
    mwshmem_check("shmem_init", mw_barrier(mwshmem.ep));
    return 0;
}

void shmem_init(void) {
    int provided;
    if (shmem_init_thread(SHMEM_THREAD_SINGLE, &provided) != 0) exit(1);
}

void shmem_query_thread(int *provided) {
    mwshmem_require_init("shmem_query_thread");
    if (provided != NULL) *provided = mwshmem.thread_level;
}

void shmem_query_initialized(int *initialized) {
    if (initialized != NULL) *initialized = mwshmem.initialized;
}

void shmem_finalize(void) {
    if (!mwshmem.initialized) return;
    shmem_quiet();
    mwshmem_check("shmem_finalize", mw_barrier(mwshmem.ep));
    mwshmem_teams_fini();
    mwshmem_heap_fini();
    for (int i = 0; i < mwshmem.nsegs; i++) free_area(&mwshmem.segs[i]);
    mwshmem.nsegs = 0;
    bool removed;
    mw_unregister_handler(mwshmem.ep, MWSHMEM_AM_GLOBAL_EXIT, &removed);
    mwshmem.initialized = 0;
    mwshmem_check("shmem_finalize", mw_finalize(&mwshmem.ep));
}

void shmem_global_exit(int status) {
    fflush(stdout);
    fflush(stderr);
    if (mwshmem.initialized && mwshmem.ep != NULL) {
        uint64_t arg = (uint64_t)(unsigned)status;
        for (int pe = 0; pe < mwshmem.n_pes; pe++)
            if (pe != mwshmem.my_pe) mw_am_post(mwshmem.ep, (uint32_t)pe, MWSHMEM_AM_GLOBAL_EXIT, &arg, 1, NULL, 0);
        /* A one-way message is queued, not yet sent: let it leave. mwrun
         * also stops the other PEs when this one exits with a nonzero status. */
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            mw_progress(mwshmem.ep);
            sched_yield();
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 200000000L);
    }
    _exit(status);
}

/* ---- queries ------------------------------------------------------------ */

int shmem_my_pe(void) {
    mwshmem_require_init("shmem_my_pe");
    return mwshmem.my_pe;
}

int shmem_n_pes(void) {
    mwshmem_require_init("shmem_n_pes");
    return mwshmem.n_pes;
}

int shmem_pe_accessible(int pe) {
    mwshmem_require_init("shmem_pe_accessible");
    if (pe < 0 || pe >= mwshmem.n_pes) return 0;
    bool down = true;
    if (mw_is_peer_down(mwshmem.ep, (uint32_t)pe, &down) != MW_OK) return 0;
    return !down;
}

int shmem_addr_accessible(const void *addr, int pe) {
    mwshmem_require_init("shmem_addr_accessible");
    return shmem_pe_accessible(pe) && mwshmem_area_of(addr, 1) != NULL;
}

void *shmem_ptr(const void *dest, int pe) {
    mwshmem_require_init("shmem_ptr");
    if (pe < 0 || pe >= mwshmem.n_pes) mwshmem_fail("shmem_ptr", "PE %d is not in 0..%d", pe, mwshmem.n_pes - 1);
    if (pe == mwshmem.my_pe) return mwshmem_area_of(dest, 1) != NULL ? (void *)dest : NULL;
    if (!area_holds(&mwshmem.heap, dest, 1)) return NULL; /* globals are reached by kernel copy, not mapped */
    char *peer = mwshmem.peer_heap[pe];
    return peer == NULL ? NULL : peer + ((const char *)dest - mwshmem.heap.base);
}

void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe) {
    struct mwshmem_team *t = mwshmem_team("shmem_team_ptr", team);
    if (pe < 0 || pe >= t->n_pes) mwshmem_fail("shmem_team_ptr", "PE %d is not in the team's 0..%d", pe, t->n_pes - 1);
    return shmem_ptr(dest, t->world[pe]);
}

void shmem_info_get_version(int *major, int *minor) {
    if (major != NULL) *major = SHMEM_MAJOR_VERSION;
    if (minor != NULL) *minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name) {
    if (name != NULL) {
        strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN - 1);
        name[SHMEM_MAX_NAME_LEN - 1] = '\0';
    }
}

void shmem_pcontrol(int level, ...) { (void)level; }
