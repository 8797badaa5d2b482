/* gpserve server: the connection-slot policy (who may open one more
 * connection), so that a handful of client addresses cannot take every slot.
 *
 * Three rules, checked when a connection is accepted:
 *   1. at most `total` connections (--max-connections);
 *   2. at most `per_address` from one address (--max-connections-per-ip);
 *   3. the last `total / 4` slots are kept for addresses that hold fewer than
 *      GP_SLOTS_LIGHT connections: an address that already holds that many
 *      gets a new one only while fewer than `total - total / 4` are in use.
 * So k addresses holding slow connections take at most
 * total - total/4 + k * GP_SLOTS_LIGHT slots, and the reserve is theirs only
 * once k >= (total / 4) / GP_SLOTS_LIGHT (32 addresses at the defaults).
 *
 * An IPv6 address counts by its /64 prefix (one subscriber's network holds
 * 2^64 of them); an IPv4 one (and an IPv4-mapped IPv6 one) by itself.
 * per_address 0: no per-address limit and no reserve (rule 1 only).
 *
 * Not thread-safe: the caller serialises (server/http.c holds conns_lock). */
#ifndef GP_SERVER_SLOTS_H
#define GP_SERVER_SLOTS_H

#include <stddef.h>
#include <sys/socket.h>

/* An address holding fewer connections than this is "light" (a browser opens
 * six to a host; a client's pool, a few). */
#define GP_SLOTS_LIGHT 8

typedef struct gp_slots gp_slots;

/* The key one client address counts under. */
typedef struct gp_slot_key {
    unsigned char b[16];
} gp_slot_key;

/* Why a connection was refused (gp_slots_take); 0 = admitted. */
enum {
    GP_SLOT_OK = 0,
    GP_SLOT_FULL = 1,     /* rule 1: every slot is taken */
    GP_SLOT_ADDRESS = 2,  /* rule 2: this address holds per_address */
    GP_SLOT_RESERVED = 3  /* rule 3: the slots left are kept for light addresses */
};

/* NULL when out of memory. */
gp_slots *gp_slots_new(size_t total, size_t per_address);
void gp_slots_free(gp_slots *s);

/* The key of sa (AF_INET or AF_INET6; any other family: one shared key). */
void gp_slot_key_of(const struct sockaddr *sa, gp_slot_key *key);

/* Count one more connection of key, or refuse it (GP_SLOT_*, nothing counted). */
int gp_slots_take(gp_slots *s, const gp_slot_key *key);
/* The connection of key taken earlier is closed. */
void gp_slots_give(gp_slots *s, const gp_slot_key *key);

/* Connections counted now, in all and of key. */
size_t gp_slots_in_use(const gp_slots *s);
size_t gp_slots_of(const gp_slots *s, const gp_slot_key *key);

#endif
