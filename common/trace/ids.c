/* Trace and span id generation: per-thread xoshiro256**, reseeded after
 * fork(), plus the hex helpers shared by the header codecs. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/trace/ids.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Bumped in the child after every fork(); a thread whose seen generation
 * differs reseeds, so we need no getpid() syscall per id. */
static atomic_uint      ids_fork_gen;
static pthread_once_t   ids_once = PTHREAD_ONCE_INIT;

/* One TLS variable: in a dlopen()ed module each distinct TLS variable
 * costs a call to resolve its address (a slow one when the module's TLS
 * is not in static TLS), so the generator's state is one. */
typedef struct {
    uint64_t  state[4];
    unsigned  seen_gen;
    int       seeded;
} ids_tls_t;

static __thread ids_tls_t  ids_tls;

/* Mixes in the fallback seed so two threads seeded in the same nanosecond
 * still diverge. */
static __thread uint64_t  ids_fallback_counter;


static void
ids_atfork_child(void)
{
    atomic_fetch_add_explicit(&ids_fork_gen, 1, memory_order_relaxed);
}


static void
ids_register_atfork(void)
{
    /* glibc drops the handler when a dlopen()ed module is unloaded, and a
     * reloaded copy has a fresh ids_once, so this stays correct across
     * nginx reloads. */
    (void) pthread_atfork(NULL, NULL, ids_atfork_child);
}


static inline uint64_t
rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}


static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t  z;

    z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


static int
seed_getrandom(uint8_t *p, size_t n)
{
    ssize_t  r;

    while (n > 0) {
        /* GRND_NONBLOCK: never stall a worker on an unready pool at early
         * boot; /dev/urandom below does not block either. */
        r = getrandom(p, n, GRND_NONBLOCK);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += r;
        n -= (size_t) r;
    }

    return 0;
}


static int
seed_urandom(uint8_t *p, size_t n)
{
    int      fd;
    ssize_t  r;

    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        return -1;
    }

    while (n > 0) {
        r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            close(fd);
            return -1;
        }
        p += r;
        n -= (size_t) r;
    }

    close(fd);
    return 0;
}


static void
seed_fallback(uint64_t s[4])
{
    struct timespec  rt, mt;
    uint64_t         x;
    int              i;

    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);

    x = (uint64_t) rt.tv_sec * 1000000000ULL + (uint64_t) rt.tv_nsec;
    x ^= rotl64((uint64_t) mt.tv_sec * 1000000000ULL + (uint64_t) mt.tv_nsec,
                17);
    x ^= rotl64((uint64_t) getpid(), 32);
    /* The address of a thread-local differs per thread (and per process
     * with ASLR). */
    x ^= (uint64_t) (uintptr_t) &ids_fallback_counter;
    x ^= rotl64(++ids_fallback_counter, 48);

    for (i = 0; i < 4; i++) {
        s[i] = splitmix64(&x);
    }
}


static void
ids_seed(ids_tls_t *g)
{
    uint64_t  s[4];

    pthread_once(&ids_once, ids_register_atfork);

    g->seen_gen = atomic_load_explicit(&ids_fork_gen, memory_order_relaxed);

    if (seed_getrandom((uint8_t *) s, sizeof(s)) != 0
        && seed_urandom((uint8_t *) s, sizeof(s)) != 0)
    {
        seed_fallback(s);
    }

    /* xoshiro's only bad state is all zero. */
    if ((s[0] | s[1] | s[2] | s[3]) == 0) {
        s[0] = 0x9e3779b97f4a7c15ULL;
    }

    memcpy(g->state, s, sizeof(s));
    g->seeded = 1;
}


/* The thread's generator, seeded (again, after a fork) if need be. */
static inline ids_tls_t *
ids_ready(void)
{
    ids_tls_t  *g = &ids_tls;

    if (!g->seeded
        || g->seen_gen
           != atomic_load_explicit(&ids_fork_gen, memory_order_relaxed))
    {
        ids_seed(g);
    }
    return g;
}


/* One xoshiro256** step of a ready generator. */
static inline uint64_t
ids_step(uint64_t *s)
{
    uint64_t  result, t;

    result = rotl64(s[1] * 5, 7) * 9;
    t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);

    return result;
}


void
sp_ids_thread_init(void)
{
    ids_seed(&ids_tls);
}


void
sp_trace_id_generate(uint8_t id[SP_TRACE_ID_LEN])
{
    uint64_t  *s = ids_ready()->state;
    uint64_t   v[2];

    do {
        v[0] = ids_step(s);
        v[1] = ids_step(s);
    } while ((v[0] | v[1]) == 0);

    memcpy(id, v, SP_TRACE_ID_LEN);
}


void
sp_span_id_generate(uint8_t id[SP_SPAN_ID_LEN])
{
    uint64_t  *s = ids_ready()->state;
    uint64_t   v;

    do {
        v = ids_step(s);
    } while (v == 0);

    memcpy(id, &v, SP_SPAN_ID_LEN);
}


void
sp_ids_generate(uint8_t *trace_id, uint8_t span_id[SP_SPAN_ID_LEN])
{
    ids_tls_t  *g = ids_ready();
    uint64_t    s[4], v[2], w;

    /* The state in registers for the three steps, stored back once. */
    memcpy(s, g->state, sizeof(s));
    if (trace_id != NULL) {
        do {
            v[0] = ids_step(s);
            v[1] = ids_step(s);
        } while ((v[0] | v[1]) == 0);
        memcpy(trace_id, v, SP_TRACE_ID_LEN);
    }
    do {
        w = ids_step(s);
    } while (w == 0);
    memcpy(span_id, &w, SP_SPAN_ID_LEN);
    memcpy(g->state, s, sizeof(s));
}


#if defined(__SSE2__)

/* 16 nibbles (one per byte, 0..15) to their lowercase hex digits. */
static inline __m128i
hex_digits(__m128i x)
{
    __m128i  letter = _mm_cmpgt_epi8(x, _mm_set1_epi8(9));

    x = _mm_add_epi8(x, _mm_set1_epi8('0'));
    return _mm_add_epi8(x, _mm_and_si128(letter, _mm_set1_epi8('a' - '0' - 10)));
}

#endif


void
sp_hex_encode(char *dst, const uint8_t *src, size_t n)
{
    /* Two digits per byte from one table: ids are hex-encoded several
     * times per request (variables, environment, traceparent). */
    static const char  pairs[513] =
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
        "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
        "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
        "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
        "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
        "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
    size_t             i = 0;

#if defined(__SSE2__)
    /* Whole ids at once (Apache formats a traceparent and the span ids
     * for every request): split each byte into its two nibbles,
     * interleave them high first, and add '0' or 'a' - 10. About 10
     * instructions for 8 bytes, where the table takes 6 per byte. */
    const __m128i  low4 = _mm_set1_epi8(0x0f);
    __m128i        v, hi, lo;

    for ( ; i + 8 <= n; i += 8) {
        v = _mm_loadl_epi64((const __m128i *) (const void *) (src + i));
        hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
        lo = _mm_and_si128(v, low4);
        _mm_storeu_si128((__m128i *) (void *) (dst + 2 * i),
                         hex_digits(_mm_unpacklo_epi8(hi, lo)));
    }
#endif

    for ( ; i < n; i++) {
        memcpy(dst + 2 * i, pairs + 2 * src[i], 2);
    }
}


/* Lowercase only: W3C Trace Context treats uppercase hex as invalid. */
static int
hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}


int
sp_hex_decode(uint8_t *dst, const char *src, size_t n)
{
    size_t  i;

    /* Validate first so dst is untouched on error. */
    for (i = 0; i < 2 * n; i++) {
        if (hex_value(src[i]) < 0) {
            return -1;
        }
    }

    for (i = 0; i < n; i++) {
        dst[i] = (uint8_t) ((hex_value(src[2 * i]) << 4)
                            | hex_value(src[2 * i + 1]));
    }

    return 0;
}


int
sp_id_is_zero(const uint8_t *id, size_t n)
{
    uint8_t  acc;
    size_t   i;

    acc = 0;
    for (i = 0; i < n; i++) {
        acc |= id[i];
    }

    return acc == 0;
}
