#ifndef SERVE_ATTR_KEYS_H
#define SERVE_ATTR_KEYS_H

/* The dictionary of attribute keys spanprof serve stores spans with: each
 * distinct key once, numbered 1, 2, ... in the order added, so a span's
 * attributes hold a small number instead of the key's text (store.c keeps
 * the table in the database, attrs_json.c reads the numbers back). At most
 * SERVE_KEYS_MAX keys of at most SERVE_KEY_MAX_LEN bytes: a client sending
 * endless distinct keys cannot grow it; such keys are stored inline. */

#include <stddef.h>
#include <stdint.h>

#define SERVE_KEYS_MAX     1024
#define SERVE_KEY_MAX_LEN  128

typedef struct serve_keys serve_keys_t;

serve_keys_t *serve_keys_new(void);
void serve_keys_free(serve_keys_t *k);
/* The number of key p[0..len), 0 when it is not in the dictionary. */
uint32_t serve_keys_find(const serve_keys_t *k, const char *p, size_t len);
/* Adds a key that serve_keys_find did not find: its number, or 0 when the
 * dictionary is full, the key too long, or memory short. */
uint32_t serve_keys_add(serve_keys_t *k, const char *p, size_t len);
/* Key number id (its bytes, *len), NULL when there is none. */
const char *serve_keys_get(const serve_keys_t *k, uint32_t id, size_t *len);
size_t serve_keys_count(const serve_keys_t *k);
/* Forgets the keys numbered above n (those of a rolled-back batch). */
void serve_keys_truncate(serve_keys_t *k, size_t n);

#endif
