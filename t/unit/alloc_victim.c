/* A shared object the allocation-hook tests load: named functions that
 * allocate, so that a test can find them in sampled stacks (dladdr) and
 * check the bytes. Built with full RELRO (-z relro -z now): its GOT is
 * read-only, as Debian's servers' are. */

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE  __attribute__((noinline, visibility("default")))

/* Allocates and frees total bytes in blocks of size. */
NOINLINE void
victim_churn(size_t total, size_t size)
{
    size_t         done;
    void *volatile p;

    for (done = 0; done < total; done += size) {
        p = malloc(size);
        ((volatile char *) p)[0] = 1;
        free(p);
    }
    __asm__ volatile("" ::: "memory");   /* keep the frame (no tail call) */
}

/* Allocates n blocks of size into out[] and keeps them. */
NOINLINE void
victim_leak(void **out, size_t n, size_t size)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        out[i] = malloc(size);
        ((volatile char *) out[i])[0] = 1;
    }
    __asm__ volatile("" ::: "memory");
}

NOINLINE void
victim_free_all(void **blocks, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
}

/* One block of size from each allocation function, into out[0..7]:
 * calloc, realloc (grown from a malloc), posix_memalign, aligned_alloc,
 * memalign, valloc, reallocarray, malloc. Returns how many succeeded. */
NOINLINE int
victim_each_function(void **out, size_t size)
{
    int    n = 0;
    void  *p;

    out[0] = calloc(1, size);
    p = malloc(16);
    out[1] = realloc(p, size);
    if (posix_memalign(&out[2], 64, size) != 0) {
        out[2] = NULL;
    }
    out[3] = aligned_alloc(64, size);
    out[4] = memalign(64, size);
    out[5] = valloc(size);
    out[6] = reallocarray(NULL, 1, size);
    out[7] = malloc(size);
    for (p = NULL; n < 8 && out[n] != NULL; n++) {
        /* count */
    }
    return n;
}

NOINLINE void
victim_free(void *p)
{
    free(p);
}
