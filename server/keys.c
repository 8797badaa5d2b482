/* Named API keys with scopes: the keys file's parser, the constant-time
 * lookup, and the keyring swapped on reload (server/keys.h says why SHA-256
 * and why constant time). */
#include "server/keys.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "server/config.h"
#include "server/util.h"

/* ---- small helpers ---- */

static int name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* Whether s[0..n) is [A-Za-z0-9._-]{1,64}. */
static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n >= GP_KEY_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return 0;
    return 1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void hash_secret(const char *s, size_t n, uint8_t out[GP_KEY_DIGEST])
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, n, (const uint8_t *)s);
    sha256_digest(&ctx, GP_KEY_DIGEST, out);
}

int gp_digest_equal(const uint8_t *a, const uint8_t *b)
{
    unsigned diff = 0;
    for (int i = 0; i < GP_KEY_DIGEST; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    /* no branch on the bytes: 1 exactly when every difference was 0 */
    return (int)(1 & ((diff - 1) >> 8));
}

const char *gp_scope_name(int scope)
{
    switch (scope) {
    case GP_SCOPE_READ:
        return "read";
    case GP_SCOPE_WRITE:
        return "write";
    case GP_SCOPE_ADMIN:
        return "admin";
    default:
        return "none";
    }
}

/* ---- the parser ---- */

typedef struct parse_state {
    int line;
    char *msg;
    size_t msg_size;
} parse_state;

static int fail(parse_state *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int o = snprintf(ps->msg, ps->msg_size, "line %d: ", ps->line);
    if (o >= 0 && (size_t)o < ps->msg_size)
        vsnprintf(ps->msg + o, ps->msg_size - (size_t)o, fmt, ap);
    va_end(ap);
    return GP_EDATA;
}

/* A limit's value N of rps=N or fits_per_minute=N: 1..1000000000. */
static int parse_limit(parse_state *ps, const char *what, const char *v, size_t n, long *out)
{
    if (*out != 0)
        return fail(ps, "%s is given twice", what);
    long x = 0;
    if (n == 0 || n > 10)
        return fail(ps, "%s must be an integer from 1 to 1000000000", what);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return fail(ps, "%s must be an integer from 1 to 1000000000", what);
        x = x * 10 + (v[i] - '0');
    }
    if (x < 1 || x > 1000000000L)
        return fail(ps, "%s must be an integer from 1 to 1000000000", what);
    *out = x;
    return 0;
}

/* models=PATTERN: a model name, or a prefix of one followed by '*'. */
static int parse_models(parse_state *ps, gp_key *k, const char *v, size_t n)
{
    if (k->n_models == GP_KEY_MAX_MODELS)
        return fail(ps, "a key has at most %d models= entries", GP_KEY_MAX_MODELS);
    int prefix = n > 0 && v[n - 1] == '*';
    size_t body = prefix ? n - 1 : n;
    if (!valid_name(v, body))
        return fail(ps, "models=%.*s: a pattern is a model name ([A-Za-z0-9._-]{1,64}), or the "
                        "start of one followed by '*' (models=team-a.*)",
                    (int)(n > 80 ? 80 : n), v);
    memcpy(k->models[k->n_models], v, body);
    k->models[k->n_models][body] = '\0';
    k->prefix[k->n_models] = prefix;
    k->n_models++;
    return 0;
}

static int parse_scope_entry(parse_state *ps, gp_key *k, const char *e, size_t n)
{
    static const char *const names[] = {"read", "write", "admin"};
    for (int s = 0; s < 3; s++)
        if (n == strlen(names[s]) && memcmp(e, names[s], n) == 0) {
            if (s + 1 > k->scope)
                k->scope = s + 1;
            return 0;
        }
    if (n > 7 && memcmp(e, "models=", 7) == 0)
        return parse_models(ps, k, e + 7, n - 7);
    if (n > 4 && memcmp(e, "rps=", 4) == 0)
        return parse_limit(ps, "rps", e + 4, n - 4, &k->rps);
    if (n > 16 && memcmp(e, "fits_per_minute=", 16) == 0)
        return parse_limit(ps, "fits_per_minute", e + 16, n - 16, &k->fits_per_minute);
    return fail(ps, "unknown scope '%.*s' (read, write, admin, models=PATTERN, rps=N, "
                    "fits_per_minute=N)",
                (int)(n > 40 ? 40 : n), e);
}

static int parse_scopes(parse_state *ps, gp_key *k, const char *s, size_t n)
{
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != ',')
            j++;
        if (j == i)
            return fail(ps, "an empty entry in SCOPES (a stray comma)");
        int rc = parse_scope_entry(ps, k, s + i, j - i);
        if (rc)
            return rc;
        i = j + 1;
    }
    if (k->scope == GP_SCOPE_NONE)
        return fail(ps, "key '%s' has none of the scopes read, write, admin", k->name);
    return 0;
}

static int parse_secret(parse_state *ps, gp_key *k, const char *s, size_t n)
{
    if (n >= 7 && memcmp(s, "sha256:", 7) == 0) {
        if (n != 7 + 2 * GP_KEY_DIGEST)
            return fail(ps, "a sha256: secret is 64 hex digits (got %zu characters)", n - 7);
        for (int i = 0; i < GP_KEY_DIGEST; i++) {
            int hi = gp_hex_digit(s[7 + 2 * i]), lo = gp_hex_digit(s[8 + 2 * i]);
            if (hi < 0 || lo < 0)
                return fail(ps, "a sha256: secret is 64 hex digits (0-9, a-f)");
            k->digest[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
    }
    if (n < GP_API_KEY_MIN_BYTES)
        return fail(ps, "key '%s' has %zu bytes; at least %d are required (e.g. the output of "
                        "'head -c 32 /dev/urandom | base64')",
                    k->name, n, GP_API_KEY_MIN_BYTES);
    hash_secret(s, n, k->digest);
    return 0;
}

/* The whitespace-separated fields of line[0..n): up to 4 (a fourth is an error). */
static int split_fields(const char *line, size_t n, const char *f[4], size_t fl[4])
{
    int k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && is_blank(line[i]))
            i++;
        if (i == n)
            break;
        size_t j = i;
        while (j < n && !is_blank(line[j]))
            j++;
        if (k < 4) {
            f[k] = line + i;
            fl[k] = j - i;
        }
        k++;
        i = j;
    }
    return k;
}

static int check_unique(parse_state *ps, const gp_keys *t, const gp_key *k)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->keys[i].name, k->name) == 0)
            return fail(ps, "key name '%s' is given twice", k->name);
        if (gp_digest_equal(t->keys[i].digest, k->digest))
            return fail(ps, "key '%s' has the same secret as key '%s'", k->name,
                        t->keys[i].name);
    }
    return 0;
}

static int parse_line(parse_state *ps, gp_keys *t, const char *line, size_t n)
{
    const char *f[4];
    size_t fl[4];
    int nf = split_fields(line, n, f, fl);
    if (nf == 0 || f[0][0] == '#')
        return 0;
    if (memchr(line, '\0', n))
        return fail(ps, "a NUL byte");
    if (nf != 3)
        return fail(ps, "expected NAME SCOPES SECRET, got %d field%s", nf, nf == 1 ? "" : "s");
    gp_key k;
    memset(&k, 0, sizeof k);
    if (!valid_name(f[0], fl[0]))
        return fail(ps, "a key name must match [A-Za-z0-9._-]{1,64}");
    memcpy(k.name, f[0], fl[0]);
    int rc = parse_scopes(ps, &k, f[1], fl[1]);
    if (rc == 0)
        rc = parse_secret(ps, &k, f[2], fl[2]);
    if (rc == 0)
        rc = check_unique(ps, t, &k);
    if (rc)
        return rc;
    gp_key *more = realloc(t->keys, (t->n + 1) * sizeof *more);
    if (more == NULL)
        return fail(ps, "out of memory");
    t->keys = more;
    t->keys[t->n++] = k;
    return 0;
}

int gp_keys_parse(const char *text, size_t len, gp_keys **out, int *line, char *msg,
                  size_t msg_size)
{
    *out = NULL;
    *line = 0;
    parse_state ps = {.line = 0, .msg = msg, .msg_size = msg_size};
    gp_keys *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(msg, msg_size, "out of memory");
        return GP_ENOMEM;
    }
    size_t i = 0;
    int rc = 0;
    while (i < len && rc == 0) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        ps.line++;
        rc = parse_line(&ps, t, text + i, j - i);
        i = j + 1;
    }
    if (rc == 0 && t->n == 0) {
        ps.line = 0;
        snprintf(msg, msg_size, "the keys file holds no key (lines: NAME SCOPES SECRET)");
        rc = GP_EDATA;
    }
    if (rc) {
        *line = ps.line;
        gp_keys_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void gp_keys_free(gp_keys *k)
{
    if (k == NULL)
        return;
    /* the digests are not secrets, but there is no reason to leave them about */
    if (k->keys)
        memset(k->keys, 0, k->n * sizeof *k->keys);
    free(k->keys);
    free(k);
}

int gp_keys_single(const char *secret, size_t len, gp_keys **out)
{
    gp_keys *t = calloc(1, sizeof *t);
    gp_key *k = calloc(1, sizeof *k);
    if (t == NULL || k == NULL) {
        free(t);
        free(k);
        return GP_ENOMEM;
    }
    snprintf(k->name, sizeof k->name, "default");
    k->scope = GP_SCOPE_ADMIN;
    hash_secret(secret, len, k->digest);
    t->n = 1;
    t->keys = k;
    *out = t;
    return 0;
}

const gp_key *gp_keys_match(const gp_keys *k, const char *tok, size_t len)
{
    uint8_t d[GP_KEY_DIGEST];
    hash_secret(tok, len, d);
    /* every digest is compared, whichever matched: the index is selected by a
     * mask, so the loop's length and branches do not depend on the key */
    size_t found = 0, hit = 0;
    for (size_t i = 0; i < k->n; i++) {
        size_t eq = (size_t)gp_digest_equal(k->keys[i].digest, d);
        size_t mask = (size_t)0 - eq;
        found |= (i + 1) & mask;
        hit |= eq;
    }
    return hit ? &k->keys[found - 1] : NULL;
}

const gp_key *gp_keys_find(const gp_keys *k, const char *name)
{
    for (size_t i = 0; k && i < k->n; i++)
        if (strcmp(k->keys[i].name, name) == 0)
            return &k->keys[i];
    return NULL;
}

int gp_key_allows_scope(const gp_key *key, int scope)
{
    return key->scope >= scope;
}

int gp_key_allows_model(const gp_key *key, const char *name)
{
    if (key->n_models == 0)
        return 1;
    for (int i = 0; i < key->n_models; i++) {
        const char *p = key->models[i];
        if (key->prefix[i] ? strncmp(name, p, strlen(p)) == 0 : strcmp(name, p) == 0)
            return 1;
    }
    return 0;
}

/* ---- the keyring ---- */

struct gp_keyring {
    pthread_rwlock_t lock;
    gp_keys *keys;         /* (lock) the current table */
    char *keys_file;       /* --keys-file, or NULL */
    char *api_key_file;    /* --api-key-file when no keys file */
};

/* The file's contents, NUL-terminated; NULL with msg on error. */
static char *read_all(const char *path, size_t *len, char *msg, size_t msg_size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "cannot open keys file '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(GP_KEYS_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, GP_KEYS_FILE_MAX + 1, f) : 0;
    int bad = buf == NULL || ferror(f) || n > GP_KEYS_FILE_MAX;
    fclose(f);
    if (bad) {
        snprintf(msg, msg_size, "keys file '%s': %s", path,
                 buf == NULL ? "out of memory" : n > GP_KEYS_FILE_MAX ? "larger than 1 MiB"
                                                                      : "read error");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* A table from the keyring's file: 0, or an error code with *line and msg. */
static int load(const gp_keyring *kr, gp_keys **out, int *line, char *msg, size_t msg_size)
{
    *line = 0;
    if (kr->keys_file == NULL) {
        char *key = gp_read_api_key(kr->api_key_file, msg, msg_size);
        if (key == NULL)
            return GP_EDATA;
        int rc = gp_keys_single(key, strlen(key), out);
        memset(key, 0, strlen(key));
        free(key);
        if (rc)
            snprintf(msg, msg_size, "out of memory");
        return rc;
    }
    size_t len = 0;
    char *text = read_all(kr->keys_file, &len, msg, msg_size);
    if (text == NULL)
        return GP_EINTERNAL;
    char why[400];
    int rc = gp_keys_parse(text, len, out, line, why, sizeof why);
    memset(text, 0, len);
    free(text);
    if (rc)
        snprintf(msg, msg_size, "keys file '%s' %s", kr->keys_file, why);
    return rc;
}

gp_keyring *gp_keyring_open(const char *keys_file, const char *api_key_file, char *msg,
                            size_t msg_size)
{
    gp_keyring *kr = calloc(1, sizeof *kr);
    if (kr == NULL || pthread_rwlock_init(&kr->lock, NULL) != 0) {
        free(kr);
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    kr->keys_file = keys_file ? strdup(keys_file) : NULL;
    kr->api_key_file = api_key_file ? strdup(api_key_file) : NULL;
    int line = 0;
    if ((keys_file && kr->keys_file == NULL) || (api_key_file && kr->api_key_file == NULL)) {
        snprintf(msg, msg_size, "out of memory");
        gp_keyring_free(kr);
        return NULL;
    }
    if (load(kr, &kr->keys, &line, msg, msg_size) != 0) {
        gp_keyring_free(kr);
        return NULL;
    }
    return kr;
}

void gp_keyring_free(gp_keyring *kr)
{
    if (kr == NULL)
        return;
    pthread_rwlock_destroy(&kr->lock);
    gp_keys_free(kr->keys);
    free(kr->keys_file);
    free(kr->api_key_file);
    free(kr);
}

static void list_names(const gp_keys *t, char *names, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t n = strlen(t->keys[i].name) + 1;
        if (o + n > size)
            break;
        memcpy(names + o, t->keys[i].name, n);
        o += n;
    }
}

int gp_keyring_reload(gp_keyring *kr, size_t *n, char *names, size_t names_size, int *line,
                      char *msg, size_t msg_size)
{
    gp_keys *fresh = NULL;
    /* parsed outside the lock: requests go on with the old table meanwhile */
    int rc = load(kr, &fresh, line, msg, msg_size);
    if (rc)
        return rc;
    *n = fresh->n;
    if (names && names_size)
        list_names(fresh, names, names_size);
    pthread_rwlock_wrlock(&kr->lock);
    gp_keys *old = kr->keys;
    kr->keys = fresh;
    pthread_rwlock_unlock(&kr->lock);
    /* no reader holds old: a lookup copies its key out before it unlocks */
    gp_keys_free(old);
    return 0;
}

int gp_keyring_check(gp_keyring *kr, const char *tok, size_t len, gp_key *out)
{
    pthread_rwlock_rdlock(&kr->lock);
    const gp_key *k = gp_keys_match(kr->keys, tok, len);
    if (k)
        *out = *k;
    else
        memset(out, 0, sizeof *out);
    pthread_rwlock_unlock(&kr->lock);
    return k != NULL;
}

size_t gp_keyring_count(gp_keyring *kr)
{
    pthread_rwlock_rdlock(&kr->lock);
    size_t n = kr->keys->n;
    pthread_rwlock_unlock(&kr->lock);
    return n;
}
