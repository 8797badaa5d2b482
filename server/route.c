#include "server/route.h"

#include <limits.h>
#include <string.h>

#include "api/api.h"
#include "server/util.h"

#define MAX_SEGMENTS 6

typedef struct segment {
    const char *p;
    size_t n;
} segment;

/* Split "/a/b/c" into segments; -1 when the path does not start with '/' or
 * has too many segments. */
static int split(const char *path, segment *segs)
{
    if (path == NULL || path[0] != '/')
        return -1;
    size_t end = strcspn(path, "?#");
    int count = 0;
    size_t i = 1;
    for (;;) {
        size_t j = i;
        while (j < end && path[j] != '/')
            j++;
        if (count == MAX_SEGMENTS)
            return -1;
        segs[count].p = path + i;
        segs[count].n = j - i;
        count++;
        if (j >= end)
            break;
        i = j + 1;
    }
    return count;
}

static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= GP_ROUTE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static void take_name(const segment *s, gp_route_match *m)
{
    char buf[4 * GP_ROUTE_NAME_MAX];
    long n = gp_percent_decode(s->p, s->n, buf, sizeof buf);
    if (n < 0 || !gp_api_valid_name(buf)) {
        m->param_error = GP_PARAM_BAD_NAME;
        return;
    }
    memcpy(m->name, buf, (size_t)n + 1);
}

static void take_version(const segment *s, gp_route_match *m)
{
    char buf[32];
    long n = gp_percent_decode(s->p, s->n, buf, sizeof buf);
    if (n <= 0 || n > 10) {
        m->param_error = GP_PARAM_BAD_VERSION;
        return;
    }
    long long v = 0;
    for (long i = 0; i < n; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            m->param_error = GP_PARAM_BAD_VERSION;
            return;
        }
        v = v * 10 + (buf[i] - '0');
    }
    if (v < 1 || v > INT_MAX) {
        m->param_error = GP_PARAM_BAD_VERSION;
        return;
    }
    m->version = (int)v;
}

static void take_id(const segment *s, gp_route_match *m)
{
    char buf[4 * GP_ROUTE_ID_MAX];
    long n = gp_percent_decode(s->p, s->n, buf, sizeof buf);
    if (n < 0 || !valid_id(buf)) {
        m->param_error = GP_PARAM_BAD_ID;
        return;
    }
    memcpy(m->id, buf, (size_t)n + 1);
}

typedef struct route_info {
    const char *pattern;
    int verbs;
    int auth;
    int batch;
    int shape;
    int post_types; /* body media types of POST */
} route_info;

static const route_info routes[GP_ROUTE_COUNT] = {
#define ROUTE(id, pattern, verbs, auth, batch, shape, body, handler) \
    [GP_ROUTE_##id] = {pattern, verbs, auth, batch, shape, body},
#include "server/routes.def"
#undef ROUTE
};

/* The length of a pattern's segment at p (up to '/' or the end). */
static size_t pattern_segment(const char *p)
{
    return strcspn(p, "/");
}

static int is_param(const char *p, size_t n, const char *param)
{
    size_t k = strlen(param);
    return n == k && memcmp(p, param, k) == 0;
}

/* Whether the n segments s have the shape of pattern: as many segments, the
 * literal ones equal (as sent, not decoded); {file} takes one or more. */
static int shape_matches(const char *pattern, const segment *s, int n)
{
    const char *p = pattern + 1;
    for (int i = 0;; i++) {
        size_t len = pattern_segment(p);
        if (is_param(p, len, "{file}"))
            return i < n;
        if (i >= n)
            return 0;
        if (p[0] != '{' && !(s[i].n == len && memcmp(s[i].p, p, len) == 0))
            return 0;
        if (p[len] == '\0')
            return i + 1 == n;
        p += len + 1;
    }
}

/* The rest of a path from a segment on (rest), up to its query. */
static void take_asset(const char *rest, gp_route_match *m)
{
    size_t n = strcspn(rest, "?#");
    if (gp_percent_decode(rest, n, m->asset, sizeof m->asset) < 0)
        m->asset[0] = '\0';
}

/* The parameters of a matched pattern, in order; the first bad one stops. */
static void take_params(const char *pattern, const segment *s, gp_route_match *m)
{
    const char *p = pattern + 1;
    for (int i = 0; m->param_error == GP_PARAM_OK; i++) {
        size_t len = pattern_segment(p);
        if (is_param(p, len, "{name}"))
            take_name(&s[i], m);
        else if (is_param(p, len, "{v}"))
            take_version(&s[i], m);
        else if (is_param(p, len, "{id}"))
            take_id(&s[i], m);
        else if (is_param(p, len, "{file}"))
            take_asset(s[i].p, m);
        if (p[len] == '\0')
            return;
        p += len + 1;
    }
}

/* A path no route matches answers 404 in the error shape of the routes under
 * its first segment (anything under /v2 in the Open Inference Protocol's). */
static int shape_of_unmatched(const char *path)
{
    if (path == NULL || path[0] != '/')
        return GP_SHAPE_V1;
    size_t n = strcspn(path + 1, "/?#");
    for (int r = 0; r < GP_ROUTE_COUNT; r++) {
        const char *p = routes[r].pattern + 1;
        if (routes[r].shape != GP_SHAPE_V1 && pattern_segment(p) == n && p[0] != '{' &&
            memcmp(p, path + 1, n) == 0)
            return routes[r].shape;
    }
    return GP_SHAPE_V1;
}

gp_route_id gp_route_match_path(const char *path, gp_route_match *m)
{
    memset(m, 0, sizeof *m);
    m->route = GP_ROUTE_NONE;
    segment s[MAX_SEGMENTS];
    int n = split(path, s);
    for (int r = 0; n > 0 && r < GP_ROUTE_COUNT; r++) {
        if (shape_matches(routes[r].pattern, s, n)) {
            m->route = (gp_route_id)r;
            take_params(routes[r].pattern, s, m);
            break;
        }
    }
    int shape = m->route == GP_ROUTE_NONE ? shape_of_unmatched(path) : routes[m->route].shape;
    m->v2 = shape == GP_SHAPE_OIP;
    return m->route;
}

int gp_verb_of(const char *method)
{
    if (method == NULL)
        return GP_VERB_OTHER;
    /* HEAD is GET without the body (RFC 9110 §9.3.2): the same handler answers
     * it, and libmicrohttpd leaves the body out. */
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return GP_VERB_GET;
    if (strcmp(method, "POST") == 0)
        return GP_VERB_POST;
    if (strcmp(method, "DELETE") == 0)
        return GP_VERB_DELETE;
    return GP_VERB_OTHER;
}

static const route_info *info(gp_route_id r)
{
    return r >= 0 && r < GP_ROUTE_COUNT ? &routes[r] : NULL;
}

int gp_route_verbs(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->verbs : 0;
}

/* The Allow header of each set of verbs (GET brings HEAD). */
static const char *const allow_of[8] = {
    "",          "GET, HEAD",         "POST",         "GET, HEAD, POST",
    "DELETE",    "GET, HEAD, DELETE", "POST, DELETE", "GET, HEAD, POST, DELETE",
};

const char *gp_route_allow(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? allow_of[i->verbs & 7] : "";
}

const char *gp_route_pattern(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->pattern : "unmatched";
}

int gp_route_needs_auth(gp_route_id r)
{
    return gp_route_auth(r) != GP_AUTH_OPEN;
}

int gp_route_auth(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->auth : GP_AUTH_BEARER;
}

int gp_route_batched(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->batch : GP_UNBATCHED;
}

int gp_route_shape(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->shape : GP_SHAPE_V1;
}

int gp_route_body_types(gp_route_id r, int verb)
{
    const route_info *i = info(r);
    if (i == NULL || verb != GP_VERB_POST)
        return 0;
    return i->post_types;
}
