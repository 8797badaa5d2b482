/* The connection-slot policy; the rules in server/slots.h.
 *
 * The per-address counts live in an open-addressing table (linear probing,
 * deletion by backward shift, so no tombstones pile up under churn): an
 * address has an entry only while it holds a connection, so at most `total`
 * entries, in a table of at least twice as many cells. */
#include "server/slots.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

typedef struct cell {
    gp_slot_key key;
    size_t count; /* 0: empty */
} cell;

struct gp_slots {
    size_t total, per_address, reserve;
    size_t in_use;
    cell *cells; /* NULL when per_address is 0 */
    size_t mask; /* cells - 1 (a power of two) */
};

gp_slots *gp_slots_new(size_t total, size_t per_address)
{
    gp_slots *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->total = total;
    s->per_address = per_address;
    s->reserve = per_address > 0 ? total / 4 : 0;
    if (per_address == 0)
        return s;
    size_t n = 16;
    while (n < 2 * total && n < ((size_t)1 << 40))
        n *= 2;
    s->cells = calloc(n, sizeof *s->cells);
    if (s->cells == NULL) {
        free(s);
        return NULL;
    }
    s->mask = n - 1;
    return s;
}

void gp_slots_free(gp_slots *s)
{
    if (s == NULL)
        return;
    free(s->cells);
    free(s);
}

void gp_slot_key_of(const struct sockaddr *sa, gp_slot_key *key)
{
    static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(key, 0, sizeof *key);
    if (sa == NULL)
        return;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        memcpy(key->b + 12, &a->sin_addr, 4);
        key->b[0] = 4; /* apart from any IPv6 prefix */
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        const unsigned char *b = a->sin6_addr.s6_addr;
        if (memcmp(b, v4_mapped, sizeof v4_mapped) == 0) {
            memcpy(key->b + 12, b + 12, 4); /* the IPv4 client it is */
            key->b[0] = 4;
        } else {
            memcpy(key->b, b, 8); /* its /64 */
            key->b[15] = 6;
        }
    }
}

static size_t hash_key(const gp_slot_key *k)
{
    /* An attacker who picks colliding addresses lengthens a probe run to at
     * most the entries in use (<= --max-connections). */
    return (size_t)gp_hash_bytes(k->b, sizeof k->b);
}

/* The cell of key, or the empty cell where it would go. */
static cell *find(const gp_slots *s, const gp_slot_key *key)
{
    size_t i = hash_key(key) & s->mask;
    while (s->cells[i].count != 0 && memcmp(&s->cells[i].key, key, sizeof *key) != 0)
        i = (i + 1) & s->mask;
    return &s->cells[i];
}

int gp_slots_take(gp_slots *s, const gp_slot_key *key)
{
    if (s->in_use >= s->total)
        return GP_SLOT_FULL;
    if (s->cells == NULL) {
        s->in_use++;
        return GP_SLOT_OK;
    }
    cell *c = find(s, key);
    if (c->count >= s->per_address)
        return GP_SLOT_ADDRESS;
    if (c->count >= GP_SLOTS_LIGHT && s->in_use >= s->total - s->reserve)
        return GP_SLOT_RESERVED;
    if (c->count == 0)
        c->key = *key;
    c->count++;
    s->in_use++;
    return GP_SLOT_OK;
}

/* Empty cell i, moving later cells of its probe run back so that every key
 * stays reachable from its home cell without tombstones. */
static void remove_cell(gp_slots *s, size_t i)
{
    size_t j = i;
    for (;;) {
        s->cells[i].count = 0;
        for (;;) {
            j = (j + 1) & s->mask;
            if (s->cells[j].count == 0)
                return;
            size_t home = hash_key(&s->cells[j].key) & s->mask;
            /* j may move to i when its home is not in the cyclic range (i, j]. */
            int in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!in_range)
                break;
        }
        s->cells[i] = s->cells[j];
        i = j;
    }
}

void gp_slots_give(gp_slots *s, const gp_slot_key *key)
{
    if (s->cells == NULL) {
        if (s->in_use > 0)
            s->in_use--;
        return;
    }
    cell *c = find(s, key);
    if (c->count == 0)
        return; /* never taken: nothing to give back */
    s->in_use--;
    if (--c->count == 0)
        remove_cell(s, (size_t)(c - s->cells));
}

size_t gp_slots_in_use(const gp_slots *s)
{
    return s->in_use;
}

size_t gp_slots_of(const gp_slots *s, const gp_slot_key *key)
{
    return s->cells ? find(s, key)->count : 0;
}
