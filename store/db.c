/* gpserve store: what kind of --db value a target is, and how it is shown.
 * The drivers use these (db_pg.c names its URL redacted), so they depend on
 * no driver: the choice of one is db_driver.c's. */
#include "store/db.h"

#include <stdio.h>
#include <string.h>

/* 1 if target starts with prefix, ignoring ASCII case (libpq does). */
static int has_prefix(const char *target, const char *prefix)
{
    for (size_t i = 0; prefix[i]; i++) {
        char c = target[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != prefix[i])
            return 0;
    }
    return 1;
}

int gp_db_is_pg_url(const char *target)
{
    return has_prefix(target, "postgresql://") || has_prefix(target, "postgres://");
}

/* Append text[0..n) to out (of size size, *len used), truncating. */
static void put(char *out, size_t size, size_t *len, const char *text, size_t n)
{
    if (*len + 1 >= size)
        return;
    size_t room = size - 1 - *len;
    if (n > room)
        n = room;
    memcpy(out + *len, text, n);
    *len += n;
    out[*len] = '\0';
}

void gp_db_redact(const char *target, char *out, size_t size)
{
    if (size == 0)
        return;
    out[0] = '\0';
    if (target == NULL)
        return;
    size_t len = 0;
    if (!gp_db_is_pg_url(target)) {
        put(out, size, &len, target, strlen(target));
        return;
    }
    /* scheme://[user[:password]@]host.../db?k=v&password=... */
    const char *auth = strstr(target, "://") + 3;
    put(out, size, &len, target, (size_t)(auth - target));
    const size_t auth_len = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + auth_len; p++)
        if (*p == '@')
            at = p;
    const char *rest = auth;
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon) {
            put(out, size, &len, auth, (size_t)(colon - auth) + 1);
            put(out, size, &len, "***", 3);
            rest = at;
        }
    }
    /* The query: every password=VALUE becomes password=***. */
    const char *q = strchr(rest, '?');
    if (q == NULL) {
        put(out, size, &len, rest, strlen(rest));
        return;
    }
    put(out, size, &len, rest, (size_t)(q - rest) + 1);
    const char *p = q + 1;
    while (*p) {
        size_t n = strcspn(p, "&");
        if (n >= 9 && has_prefix(p, "password=")) {
            put(out, size, &len, "password=***", 12);
        } else {
            put(out, size, &len, p, n);
        }
        p += n;
        if (*p == '&') {
            put(out, size, &len, "&", 1);
            p++;
        }
    }
}
