#ifndef SP_TAP_H
#define SP_TAP_H

/* A minimal TAP producer for the C unit tests, so `prove` runs them beside
 * the integration tests. */

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) do {                                                   \
    int ok_ = !!(cond);                                                      \
    tap_n++;                                                                 \
    if (!ok_) tap_failed++;                                                  \
    printf("%sok %d - ", ok_ ? "" : "not ", tap_n);                          \
    printf(__VA_ARGS__);                                                     \
    printf("\n");                                                            \
    if (!ok_) printf("#   failed at %s line %d\n", __FILE__, __LINE__);      \
} while (0)

#define is_int(got, want, ...) do {                                          \
    long long g_ = (long long) (got), w_ = (long long) (want);               \
    ok(g_ == w_, __VA_ARGS__);                                               \
    if (g_ != w_) printf("#   got %lld, want %lld\n", g_, w_);               \
} while (0)

#define is_str(got, want, ...) do {                                          \
    const char *g_ = (got), *w_ = (want);                                    \
    int eq_ = g_ && w_ && strcmp(g_, w_) == 0;                               \
    ok(eq_, __VA_ARGS__);                                                    \
    if (!eq_) printf("#   got '%s', want '%s'\n", g_ ? g_ : "(null)",        \
                     w_ ? w_ : "(null)");                                    \
} while (0)

static inline int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
