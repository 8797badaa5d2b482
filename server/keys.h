/* gpserve server: named API keys with scopes (--keys-file; docs/design/api.md,
 * "Authentication and scopes"). A keys file holds one key per line,
 *
 *     NAME SCOPES SECRET        # a line whose first non-blank is '#' is a comment
 *
 * NAME [A-Za-z0-9._-]{1,64}, unique; SCOPES comma-separated: read, write,
 * admin (admin implies write implies read; the highest one listed counts),
 * models=PATTERN (repeatable: the key may only name models matching one of
 * them; PATTERN is a model name, or a name prefix followed by '*', as in
 * models=team-a.*), rps=N and fits_per_minute=N (limits kept for the rate
 * limiter; not enforced here); SECRET the key itself (16 bytes or more) or
 * sha256:<64 hex digits of the key's SHA-256>.
 *
 * Only the SHA-256 of a secret is held in memory. A keys file is not a
 * password database: keys are long random tokens, so nobody can search their
 * space and a fast hash is enough, while a slow KDF (bcrypt, Argon2) would
 * cost its full price on every request. A presented key is hashed and its
 * digest compared with every key's in constant time, without an early exit,
 * so timing tells neither which key nor how much of one matched.
 *
 * gp_keys is one parsed, immutable table; gp_keyring holds the current table
 * of a file and swaps it on reload (SIGHUP, POST /v1/admin/reload) under a
 * read-write lock: a lookup copies the matched key out, so a request keeps
 * its key's facts while a reload replaces the table. */
#ifndef GP_SERVER_KEYS_H
#define GP_SERVER_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* Scopes, ordered: a key holding one holds every lower one. */
enum { GP_SCOPE_NONE = 0, GP_SCOPE_READ = 1, GP_SCOPE_WRITE = 2, GP_SCOPE_ADMIN = 3 };

#define GP_KEY_NAME_MAX 65   /* [A-Za-z0-9._-]{1,64} + NUL */
#define GP_KEY_MAX_MODELS 8  /* models= entries of one key */
#define GP_KEY_DIGEST 32     /* SHA-256 */
#define GP_KEYS_FILE_MAX ((size_t)1 << 20)

typedef struct gp_key {
    char name[GP_KEY_NAME_MAX];
    int scope; /* GP_SCOPE_READ..ADMIN */
    /* models= patterns: a name, or a prefix when prefix[i] (the '*' dropped);
     * none: every model */
    int n_models;
    char models[GP_KEY_MAX_MODELS][GP_KEY_NAME_MAX];
    int prefix[GP_KEY_MAX_MODELS];
    long rps;             /* requests per second; 0 = not limited */
    long fits_per_minute; /* 0 = not limited */
    uint8_t digest[GP_KEY_DIGEST];
} gp_key;

typedef struct gp_keys {
    size_t n;
    gp_key *keys;
} gp_keys;

/* Parse a keys file's text (len bytes, no NUL needed). Returns 0 with *out
 * (the caller frees it with gp_keys_free), or GP_EDATA with *line the 1-based
 * line at fault (0: the file as a whole, e.g. no key) and msg saying why. */
int gp_keys_parse(const char *text, size_t len, gp_keys **out, int *line, char *msg,
                  size_t msg_size);
void gp_keys_free(gp_keys *k);
/* The table of the single key of --api-key-file: one admin key named
 * "default". Returns 0 or GP_ENOMEM. */
int gp_keys_single(const char *secret, size_t len, gp_keys **out);
/* The key whose secret is tok, or NULL; constant time in tok's content. */
const gp_key *gp_keys_match(const gp_keys *k, const char *tok, size_t len);
/* A key by its name, or NULL (the rate limiter reads rps and fits_per_minute). */
const gp_key *gp_keys_find(const gp_keys *k, const char *name);
/* Whether a and b (GP_KEY_DIGEST bytes each) are equal, in constant time. */
int gp_digest_equal(const uint8_t *a, const uint8_t *b);
/* Whether key holds scope (admin > write > read). */
int gp_key_allows_scope(const gp_key *key, int scope);
/* Whether key may name the model called name (its models= patterns). */
int gp_key_allows_model(const gp_key *key, const char *name);
/* "read", "write", "admin" ("none" for GP_SCOPE_NONE). */
const char *gp_scope_name(int scope);

/* ---- the table of a file, swapped on reload ---- */
typedef struct gp_keyring gp_keyring;

/* Read keys_file (a keys file) or, when it is NULL, api_key_file (one
 * admin key "default"). Returns NULL with msg on any error. */
gp_keyring *gp_keyring_open(const char *keys_file, const char *api_key_file, char *msg,
                            size_t msg_size);
void gp_keyring_free(gp_keyring *kr);
/* Read the file again. On success the new table serves the next lookup and
 * names (NUL-separated, n of them) lists its keys; on failure the old table
 * stays, *line and msg say why (GP_EDATA, or GP_EINTERNAL when unreadable). */
int gp_keyring_reload(gp_keyring *kr, size_t *n, char *names, size_t names_size, int *line,
                      char *msg, size_t msg_size);
/* Copy the key whose secret is tok into *out: 1, else 0 (out zeroed). */
int gp_keyring_check(gp_keyring *kr, const char *tok, size_t len, gp_key *out);
/* The number of keys now. */
size_t gp_keyring_count(gp_keyring *kr);

#endif
