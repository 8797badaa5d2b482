/* gpserve server: per-principal rate limits (issue 37; docs/design/api.md,
 * "Rate limits"). A principal is a key's name when authentication is on,
 * else the client's address (an IPv4 address, or an IPv6 /64, as
 * server/slots.h counts them). Each principal has two token buckets:
 *
 *   GP_RATE_RPS   requests per second; capacity max(1, rate): a key with
 *                 rps=20 may send 20 at once, then 20 a second;
 *   GP_RATE_FITS  fits per minute; capacity the per-minute figure: a key with
 *                 fits_per_minute=3 may start 3 fits at once, then one every
 *                 20 s.
 *
 * A bucket starts full and refills continuously at its rate. The rate is
 * given on every take, not stored, so a changed limit (a keys-file reload)
 * applies from the next request; a bucket holding more than a new, smaller
 * capacity is cut down to it.
 *
 * A full bucket holds no state (a fresh one would be the same), so dropping
 * one that has refilled changes nothing; dropping any other only forgives a
 * principal its debt. The table therefore holds at most `max_entries`
 * principals and, when full, drops the least recently used one: a scan from
 * many addresses cannot grow memory without bound.
 *
 * Thread-safe: the table is split into shards, each under its own mutex held
 * for a lookup and a little arithmetic. Time comes from the caller (now_us, a
 * monotonic clock in microseconds), so tests drive it. */
#ifndef GP_SERVER_RATELIMIT_H
#define GP_SERVER_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

enum { GP_RATE_RPS = 0, GP_RATE_FITS = 1, GP_RATE_KINDS = 2 };

/* The longest principal: a key name (64) or an address (INET6_ADDRSTRLEN). */
#define GP_RATE_PRINCIPAL_MAX 66 /* >= GP_KEY_NAME_MAX (65) and INET6_ADDRSTRLEN + 3 */

/* Principals the daemon holds buckets for: ~150 bytes each, ~2.5 MB at most. */
#define GP_RATE_PRINCIPALS 16384

typedef struct gp_ratelimit gp_ratelimit;

/* max_entries: principals held at once (>= 1). NULL when out of memory. */
gp_ratelimit *gp_ratelimit_new(size_t max_entries);
void gp_ratelimit_free(gp_ratelimit *rl);

/* Take one token of kind from principal's bucket at rate (per second for
 * GP_RATE_RPS, per minute for GP_RATE_FITS; <= 0: unlimited, nothing taken).
 * Returns 1 when taken; 0 when the bucket is empty, with *retry_after_s the
 * whole seconds (>= 1) until a token is there. Out of memory admits. */
int gp_ratelimit_take(gp_ratelimit *rl, const char *principal, int kind, long rate,
                      uint64_t now_us, long *retry_after_s);

/* Drop every principal not among names (n NUL-separated strings): the
 * buckets of the keys a reload removed. */
void gp_ratelimit_retain(gp_ratelimit *rl, const char *names, size_t n);

/* Principals held now. */
size_t gp_ratelimit_count(gp_ratelimit *rl);

/* "rps" or "fits_per_minute": the keys-file entry (and error field) of kind. */
const char *gp_rate_kind_name(int kind);

#endif
