#ifndef SP_WIRE_H
#define SP_WIRE_H

/* Protobuf wire-format primitives for the hand-written encoders (spans are
 * written straight to the wire on the request thread; see span.c). Field
 * numbers stay with the encoders; the tests decode what they write with
 * protoc and protobuf-c. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { SP_WT_VARINT = 0, SP_WT_I64 = 1, SP_WT_LEN = 2, SP_WT_I32 = 5 };

#define SP_TAG(field, wt)  (((field) << 3) | (wt))

static inline size_t
sp_wire_vsize(uint64_t v)
{
    size_t  n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A length-delimited field of content size n, with a one-byte tag. */
static inline size_t
sp_wire_lsize(size_t n)
{
    return 1 + sp_wire_vsize(n) + n;
}

static inline uint8_t *
sp_wire_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t) (v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t) v;
    return p;
}

/* Most strings here are short (ids, keys, methods, ports): copied inline
 * with two overlapping fixed-size moves instead of a call to memcpy. */
static inline void
sp_wire_copy(uint8_t *dst, const void *src, size_t n)
{
    const uint8_t  *s = src;

    if (n > 16 && n <= 32) {
        memcpy(dst, s, 16);
        memcpy(dst + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n <= 16) {
        memcpy(dst, s, 8);
        memcpy(dst + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(dst, s, 4);
        memcpy(dst + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        /* 1 to 3 bytes (many values: "GET", "1.1", "/"): the first, the
         * middle and the last, which overlap; no loop. */
        if (n > 0) {
            dst[0] = s[0];
            dst[n >> 1] = s[n >> 1];
            dst[n - 1] = s[n - 1];
        }
    } else {
        memcpy(dst, s, n);
    }
}

/* A length-delimited field with a one-byte tag. */
static inline uint8_t *
sp_wire_bytes(uint8_t *p, unsigned tag, const void *data, size_t n)
{
    *p++ = (uint8_t) tag;
    p = sp_wire_varint(p, n);
    sp_wire_copy(p, data, n);
    return p + n;
}

static inline uint8_t *
sp_wire_fixed64(uint8_t *p, unsigned tag, uint64_t v)
{
    *p++ = (uint8_t) tag;
    memcpy(p, &v, 8);           /* little-endian hosts only (x86_64, arm64) */
    return p + 8;
}

#endif
