/*
 * heap.c: the symmetric heap. One memwire symmetric region per PE (the
 * same key everywhere) of SHMEM_SYMMETRIC_SIZE bytes, carved by a
 * first-fit allocator whose bookkeeping lives outside the heap. Every PE
 * makes the same calls with the same sizes in the same order (the spec
 * requires it, and the collective check below enforces it), so every PE's
 * allocator takes the same steps and hands out the same offsets.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_HEAP_BYTES ((size_t)128 << 20)
#define MIN_ALIGN ((size_t)64)
/* The heap's first byte is aligned to this on every PE, so an offset aligned
 * to a power of two up to it gives an address aligned alike everywhere. */
#define BASE_ALIGN ((size_t)2 << 20)
#define SCRATCH_WORDS 64

struct block {
    size_t offset, size;
    bool used;
};

static struct block *blocks;
static size_t nblocks, blocks_cap;

/* SHMEM_SYMMETRIC_SIZE (or SMA_SYMMETRIC_SIZE): a number, maybe with a
 * fraction, and an optional k/m/g/t suffix (only its first character counts). */
static size_t heap_bytes(void) {
    const char *name = "SHMEM_SYMMETRIC_SIZE";
    const char *text = getenv(name);
    if (text == NULL) {
        name = "SMA_SYMMETRIC_SIZE";
        text = getenv(name);
    }
    if (text == NULL) return DEFAULT_HEAP_BYTES;
    char *end;
    errno = 0;
    double number = strtod(text, &end);
    double scale = 1;
    switch (*end) {
    case 'k': case 'K': scale = 0x1p10; end++; break;
    case 'm': case 'M': scale = 0x1p20; end++; break;
    case 'g': case 'G': scale = 0x1p30; end++; break;
    case 't': case 'T': scale = 0x1p40; end++; break;
    case '\0': break;
    default: end = NULL;
    }
    if (end == text || end == NULL || errno != 0 || !(number >= 0) || number * scale > 0x1p50)
        mwshmem_fail("shmem_init", "%s=\"%s\" is not a size (a number with an optional k, m, g or t suffix)", name, text);
    size_t bytes = (size_t)ceil(number * scale);
    return bytes < MIN_ALIGN ? MIN_ALIGN : bytes;
}

static void insert_block(size_t at, struct block b) {
    if (nblocks == blocks_cap) {
        blocks_cap = blocks_cap ? 2 * blocks_cap : 64;
        blocks = realloc(blocks, blocks_cap * sizeof *blocks);
        if (blocks == NULL) mwshmem_fail("shmem_malloc", "out of local memory for the heap's bookkeeping");
    }
    memmove(&blocks[at + 1], &blocks[at], (nblocks - at) * sizeof *blocks);
    blocks[at] = b;
    nblocks++;
}

static void remove_block(size_t at) {
    memmove(&blocks[at], &blocks[at + 1], (nblocks - at - 1) * sizeof *blocks);
    nblocks--;
}

/* First fit: the offset of a new used block, or SIZE_MAX. */
static size_t carve(size_t size, size_t align) {
    size = (size + MIN_ALIGN - 1) & ~(MIN_ALIGN - 1);
    for (size_t i = 0; i < nblocks; i++) {
        struct block b = blocks[i];
        if (b.used) continue;
        size_t start = (b.offset + align - 1) & ~(align - 1);
        if (start - b.offset > b.size || b.size - (start - b.offset) < size) continue;
        size_t lead = start - b.offset, tail = b.size - lead - size;
        blocks[i] = (struct block){start, size, true};
        if (tail > 0) insert_block(i + 1, (struct block){start + size, tail, false});
        if (lead > 0) insert_block(i, (struct block){b.offset, lead, false});
        return start;
    }
    return SIZE_MAX;
}

static size_t find_used(size_t offset) {
    for (size_t i = 0; i < nblocks; i++)
        if (blocks[i].used && blocks[i].offset == offset) return i;
    return SIZE_MAX;
}

static void release(size_t i) {
    blocks[i].used = false;
    if (i + 1 < nblocks && !blocks[i + 1].used) {
        blocks[i].size += blocks[i + 1].size;
        remove_block(i + 1);
    }
    if (i > 0 && !blocks[i - 1].used) {
        blocks[i - 1].size += blocks[i].size;
        remove_block(i);
    }
}

static size_t free_bytes(void) {
    size_t total = 0;
    for (size_t i = 0; i < nblocks; i++)
        if (!blocks[i].used) total += blocks[i].size;
    return total;
}

/* shmem_barrier_all semantics that also checks that every PE passed the
 * same arguments (a PE that did not would get a different heap layout). */
static void collective_entry(const char *routine, uint64_t a, uint64_t b) {
    shmem_quiet();
    uint64_t mine[4] = {a, ~a, b, ~b}, most[4];
    mwshmem_check(routine, mw_allreduce(mwshmem.ep, NULL, MW_DTYPE_U64, MW_OP_MAX, mine, most, 4));
    if (most[0] != a || most[1] != ~a || most[2] != b || most[3] != ~b)
        mwshmem_fail(routine, "PEs passed different arguments (%llu, %llu here) to this collective call",
                     (unsigned long long)a, (unsigned long long)b);
}

static void *alloc_collective(const char *routine, size_t size, size_t align, bool zero) {
    mwshmem_require_init(routine);
    if (size == 0) return NULL;
    collective_entry(routine, size, align);
    size_t offset = carve(size, align < MIN_ALIGN ? MIN_ALIGN : align);
    if (offset == SIZE_MAX) {
        if (mwshmem.my_pe == 0)
            fprintf(stderr, "%s: symmetric heap exhausted: %zu bytes asked, %zu of %zu free (in pieces); "
                            "set SHMEM_SYMMETRIC_SIZE for a larger heap\n", routine, size, free_bytes(), mwshmem.heap.len);
        return NULL;
    }
    char *p = mwshmem.heap.base + offset;
    if (zero) memset(p, 0, size);
    mwshmem_check(routine, mw_barrier(mwshmem.ep));
    return p;
}

static size_t block_of(const char *routine, void *ptr) {
    char *p = ptr;
    size_t i = SIZE_MAX;
    if (p >= mwshmem.heap.base && p < mwshmem.heap.base + mwshmem.heap.len) i = find_used((size_t)(p - mwshmem.heap.base));
    if (i == SIZE_MAX) mwshmem_fail(routine, "%p is not a block of the symmetric heap (from shmem_malloc and friends)", ptr);
    return i;
}

void *shmem_malloc(size_t size) { return alloc_collective("shmem_malloc", size, MIN_ALIGN, false); }

void *shmem_calloc(size_t count, size_t size) {
    if (count != 0 && size > SIZE_MAX / count) return NULL;
    return alloc_collective("shmem_calloc", count * size, MIN_ALIGN, true);
}

void *shmem_align(size_t alignment, size_t size) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment % sizeof(void *) != 0) return NULL;
    if (alignment > BASE_ALIGN) {
        if (mwshmem.my_pe == 0)
            fprintf(stderr, "shmem_align: alignments above %zu bytes are not supported by memwire yet\n", BASE_ALIGN);
        return NULL;
    }
    return alloc_collective("shmem_align", size, alignment, false);
}

void *shmem_malloc_with_hints(size_t size, long hints) {
    if (hints & ~(SHMEM_MALLOC_ATOMICS_REMOTE | SHMEM_MALLOC_SIGNAL_REMOTE))
        mwshmem_fail("shmem_malloc_with_hints", "unknown hint bits 0x%lx", hints);
    /* Every heap word already serves remote atomics and signals. */
    return alloc_collective("shmem_malloc_with_hints", size, MIN_ALIGN, false);
}

void shmem_free(void *ptr) {
    mwshmem_require_init("shmem_free");
    if (ptr == NULL) return;
    size_t i = block_of("shmem_free", ptr);
    collective_entry("shmem_free", blocks[i].offset, 0);
    release(i);
}

void *shmem_realloc(void *ptr, size_t size) {
    if (ptr == NULL) return shmem_malloc(size);
    if (size == 0) {
        shmem_free(ptr);
        return NULL;
    }
    mwshmem_require_init("shmem_realloc");
    size_t i = block_of("shmem_realloc", ptr);
    collective_entry("shmem_realloc", blocks[i].offset, size);
    size_t old = blocks[i].size, want = (size + MIN_ALIGN - 1) & ~(MIN_ALIGN - 1);
    char *result = ptr;
    if (want <= old) {
        if (old - want > 0) {
            blocks[i].size = want;
            insert_block(i + 1, (struct block){blocks[i].offset + want, old - want, false});
            if (i + 2 < nblocks && !blocks[i + 2].used) {
                blocks[i + 1].size += blocks[i + 2].size;
                remove_block(i + 2);
            }
        }
    } else if (i + 1 < nblocks && !blocks[i + 1].used && blocks[i + 1].size >= want - old) {
        size_t grow = want - old;
        blocks[i].size = want;
        if (blocks[i + 1].size == grow) remove_block(i + 1);
        else {
            blocks[i + 1].offset += grow;
            blocks[i + 1].size -= grow;
        }
    } else {
        size_t offset = carve(size, MIN_ALIGN);
        if (offset == SIZE_MAX) {
            if (mwshmem.my_pe == 0)
                fprintf(stderr, "shmem_realloc: symmetric heap exhausted: %zu bytes asked, %zu of %zu free; "
                                "set SHMEM_SYMMETRIC_SIZE for a larger heap\n", size, free_bytes(), mwshmem.heap.len);
            return NULL;
        }
        result = mwshmem.heap.base + offset;
        memcpy(result, ptr, old);
        release(find_used((size_t)((char *)ptr - mwshmem.heap.base)));
    }
    mwshmem_check("shmem_realloc", mw_barrier(mwshmem.ep));
    return result;
}

void mwshmem_heap_init(void) {
    size_t bytes = (heap_bytes() + MIN_ALIGN - 1) & ~(MIN_ALIGN - 1);
    struct mwshmem_area *heap = &mwshmem.heap;
    mwshmem_check("shmem_init",
                  mw_region_alloc_symmetric(mwshmem.ep, bytes + BASE_ALIGN, MW_ACCESS_ALL, &heap->region));
    void *region_base;
    mwshmem_check("shmem_init", mw_region_ptr(heap->region, &region_base));
    /* Untouched pages of the memory file cost nothing: skip to an aligned start. */
    uintptr_t start = ((uintptr_t)region_base + BASE_ALIGN - 1) & ~(uintptr_t)(BASE_ALIGN - 1);
    heap->base = (char *)start;
    heap->len = bytes;
    heap->local_start = (uint64_t)(start - (uintptr_t)region_base);
    heap->starts = malloc((size_t)mwshmem.n_pes * sizeof *heap->starts);
    if (heap->starts == NULL) mwshmem_fail("shmem_init", "out of memory");
    mwshmem_check("shmem_init", mw_allgather(mwshmem.ep, NULL, &heap->local_start, sizeof heap->local_start, heap->starts));
    mw_key key;
    mwshmem_check("shmem_init", mw_region_key(heap->region, &key));
    heap->keys = malloc((size_t)mwshmem.n_pes * sizeof *heap->keys);
    mwshmem.peer_heap = calloc((size_t)mwshmem.n_pes, sizeof *mwshmem.peer_heap);
    if (heap->keys == NULL || mwshmem.peer_heap == NULL) mwshmem_fail("shmem_init", "out of memory");
    for (int pe = 0; pe < mwshmem.n_pes; pe++) {
        heap->keys[pe] = key;
        void *peer = NULL;
        mwshmem_check("shmem_init", mw_region_peer_ptr(mwshmem.ep, (uint32_t)pe, key, &peer));
        mwshmem.peer_heap[pe] = peer == NULL ? NULL : (char *)peer + heap->starts[pe];
    }
    nblocks = 0;
    insert_block(0, (struct block){0, bytes, false});
    /* The face's own symmetric words, the same offset on every PE. */
    size_t offset = carve(SCRATCH_WORDS * sizeof(long), MIN_ALIGN);
    if (offset == SIZE_MAX) mwshmem_fail("shmem_init", "SHMEM_SYMMETRIC_SIZE is too small for the library's own words");
    mwshmem.scratch = (long *)(heap->base + offset);
}

void mwshmem_heap_fini(void) {
    mwshmem_check("shmem_finalize", mw_region_free(&mwshmem.heap.region));
    free(mwshmem.heap.keys);
    free(mwshmem.heap.starts);
    free(mwshmem.peer_heap);
    free(blocks);
    blocks = NULL;
    nblocks = blocks_cap = 0;
    mwshmem.heap = (struct mwshmem_area){0};
    mwshmem.peer_heap = NULL;
    mwshmem.scratch = NULL;
}
