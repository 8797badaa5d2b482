/* The per-principal token buckets; the rules in server/ratelimit.h.
 *
 * Tokens are counted in integer units, GP_RATE_UNIT to a token, so that both
 * rates refill by a whole number of units a microsecond (rps=r: 60 r;
 * fits_per_minute=r: r) and Retry-After is exact, without floating-point
 * rounding at the edges. Each shard chains its entries by hash and keeps
 * them on a least-recently-used list; its own mutex guards both. */
#include "server/ratelimit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

#define SHARDS 16
#define GP_RATE_UNIT 60000000ull /* units of one token: 60 s x 1e6 us */

typedef struct entry {
    char name[GP_RATE_PRINCIPAL_MAX];
    uint64_t hash;
    int seen[GP_RATE_KINDS];        /* 0: the bucket was never taken from (full) */
    uint64_t credit[GP_RATE_KINDS]; /* units in the bucket */
    uint64_t last_us[GP_RATE_KINDS];
    struct entry *chain;            /* next of the same hash cell */
    struct entry *newer, *older;    /* the LRU list */
} entry;

typedef struct shard {
    pthread_mutex_t lock;
    entry **cells;
    size_t mask;
    size_t count, cap;
    entry *newest, *oldest;
} shard;

struct gp_ratelimit {
    shard shards[SHARDS];
};

gp_ratelimit *gp_ratelimit_new(size_t max_entries)
{
    gp_ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return NULL;
    size_t per = max_entries / SHARDS + 1;
    size_t n = 16;
    while (n < 2 * per)
        n *= 2;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &rl->shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->cap = per;
        s->mask = n - 1;
        s->cells = calloc(n, sizeof *s->cells);
        if (s->cells == NULL) {
            gp_ratelimit_free(rl);
            return NULL;
        }
    }
    return rl;
}

void gp_ratelimit_free(gp_ratelimit *rl)
{
    if (rl == NULL)
        return;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &rl->shards[i];
        for (entry *e = s->newest, *next; e; e = next) {
            next = e->older;
            free(e);
        }
        free(s->cells);
        pthread_mutex_destroy(&s->lock);
    }
    free(rl);
}

/* ---- the LRU list and the chains of one shard ---- */

static void lru_unlink(shard *s, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        s->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        s->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(shard *s, entry *e)
{
    e->older = s->newest;
    e->newer = NULL;
    if (s->newest)
        s->newest->newer = e;
    s->newest = e;
    if (s->oldest == NULL)
        s->oldest = e;
}

static void drop(shard *s, entry *e)
{
    entry **p = &s->cells[e->hash & s->mask];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    lru_unlink(s, e);
    s->count--;
    free(e);
}

/* The entry of name, made (the oldest dropped when the shard is full) if
 * there is none; NULL when out of memory. */
static entry *lookup(shard *s, const char *name, uint64_t h)
{
    for (entry *e = s->cells[h & s->mask]; e; e = e->chain)
        if (e->hash == h && strcmp(e->name, name) == 0) {
            if (s->newest != e) {
                lru_unlink(s, e);
                lru_push(s, e);
            }
            return e;
        }
    if (s->count >= s->cap && s->oldest)
        drop(s, s->oldest);
    entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    size_t n = strlen(name);
    if (n >= sizeof e->name)
        n = sizeof e->name - 1;
    memcpy(e->name, name, n);
    e->hash = h;
    e->chain = s->cells[h & s->mask];
    s->cells[h & s->mask] = e;
    lru_push(s, e);
    s->count++;
    return e;
}

/* ---- one bucket ---- */

/* Units a microsecond refills, and the bucket's capacity in units. */
static void bucket_shape(int kind, long rate, uint64_t *per_us, uint64_t *cap)
{
    uint64_t r = (uint64_t)rate;
    if (kind == GP_RATE_RPS) {
        *per_us = 60 * r;
        *cap = r * GP_RATE_UNIT; /* max(1, rate) tokens: rate >= 1 here */
    } else {
        *per_us = r;
        *cap = r * GP_RATE_UNIT;
    }
}

static int bucket_take(entry *e, int kind, long rate, uint64_t now_us, long *retry_after_s)
{
    uint64_t per_us, cap;
    bucket_shape(kind, rate, &per_us, &cap);
    uint64_t credit = e->credit[kind];
    if (!e->seen[kind]) {
        credit = cap;
        e->seen[kind] = 1;
    } else if (now_us > e->last_us[kind] && credit < cap) {
        /* refill; compared before multiplying, as hours of idleness times
         * the rate would overflow */
        uint64_t elapsed = now_us - e->last_us[kind];
        uint64_t to_full = (cap - credit + per_us - 1) / per_us;
        credit = elapsed >= to_full ? cap : credit + elapsed * per_us;
    }
    if (credit > cap)
        credit = cap; /* the limit was lowered */
    e->last_us[kind] = now_us > e->last_us[kind] ? now_us : e->last_us[kind];
    if (credit >= GP_RATE_UNIT) {
        e->credit[kind] = credit - GP_RATE_UNIT;
        return 1;
    }
    e->credit[kind] = credit;
    uint64_t wait_us = (GP_RATE_UNIT - credit + per_us - 1) / per_us;
    uint64_t s = (wait_us + 999999) / 1000000;
    *retry_after_s = s < 1 ? 1 : (long)s;
    return 0;
}

int gp_ratelimit_take(gp_ratelimit *rl, const char *principal, int kind, long rate,
                      uint64_t now_us, long *retry_after_s)
{
    if (rate <= 0 || kind < 0 || kind >= GP_RATE_KINDS)
        return 1;
    uint64_t h = gp_hash_bytes(principal, strlen(principal));
    shard *s = &rl->shards[h >> 60]; /* the top bits pick the shard, the low ones the cell */
    pthread_mutex_lock(&s->lock);
    entry *e = lookup(s, principal, h);
    int ok = e == NULL ? 1 : bucket_take(e, kind, rate, now_us, retry_after_s);
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static int listed(const char *names, size_t n, const char *name)
{
    /* an empty name ends a list cut short (names are never empty) */
    for (size_t i = 0; i < n && names[0] != '\0'; i++, names += strlen(names) + 1)
        if (strcmp(names, name) == 0)
            return 1;
    return 0;
}

void gp_ratelimit_retain(gp_ratelimit *rl, const char *names, size_t n)
{
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &rl->shards[i];
        pthread_mutex_lock(&s->lock);
        for (entry *e = s->newest, *next; e; e = next) {
            next = e->older;
            if (!listed(names, n, e->name))
                drop(s, e);
        }
        pthread_mutex_unlock(&s->lock);
    }
}

size_t gp_ratelimit_count(gp_ratelimit *rl)
{
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&rl->shards[i].lock);
        n += rl->shards[i].count;
        pthread_mutex_unlock(&rl->shards[i].lock);
    }
    return n;
}

const char *gp_rate_kind_name(int kind)
{
    return kind == GP_RATE_FITS ? "fits_per_minute" : "rps";
}
