#include "server/route.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
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

/* {alias}: [A-Za-z][A-Za-z0-9_.-]{0,63} (gp_api_valid_alias). */
static int take_alias_text(const segment *s, char *out)
{
    char buf[4 * GP_ROUTE_ALIAS_MAX];
    long n = gp_percent_decode(s->p, s->n, buf, sizeof buf);
    if (n < 0 || n >= GP_ROUTE_ALIAS_MAX || !gp_api_valid_alias(buf))
        return 0;
    memcpy(out, buf, (size_t)n + 1);
    return 1;
}

static void take_alias(const segment *s, gp_route_match *m)
{
    if (!take_alias_text(s, m->alias))
        m->param_error = GP_PARAM_BAD_ALIAS;
}

static void take_version(const segment *s, gp_route_match *m)
{
    /* a letter first: an alias, resolved by the request checks */
    if (s->n > 0 && ((s->p[0] >= 'A' && s->p[0] <= 'Z') || (s->p[0] >= 'a' && s->p[0] <= 'z'))) {
        if (!take_alias_text(s, m->version_alias))
            m->param_error = GP_PARAM_BAD_VERSION;
        return;
    }
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

/* {trial}: digits, 1 .. 2^53 (a JSON number reads it back exactly). */
static void take_trial(const segment *s, gp_route_match *m)
{
    char buf[32];
    long n = gp_percent_decode(s->p, s->n, buf, sizeof buf);
    long long v = 0;
    for (long i = 0; n > 0 && n <= 16 && i < n && v >= 0; i++)
        v = buf[i] >= '0' && buf[i] <= '9' ? v * 10 + (buf[i] - '0') : -1;
    if (n <= 0 || n > 16 || v < 1 || v > 9007199254740992LL)
        m->param_error = GP_PARAM_BAD_TRIAL;
    else
        m->trial = v;
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
    int scopes; /* GP_SCOPES(GET, POST, PUT, DELETE) */
    int batch;
    int shape;
    int post_types; /* body media types of POST */
} route_info;

static const route_info routes[GP_ROUTE_COUNT] = {
#define ROUTE(id, pattern, verbs, auth, scopes, batch, shape, body, handler) \
    [GP_ROUTE_##id] = {pattern, verbs, auth, scopes, batch, shape, body},
#include "server/routes.def"
#undef ROUTE
};

/* The patterns parsed once into segments (pattern_segments), so that a
 * request's match is a few integer and memcmp comparisons per route. */
enum { SEG_LITERAL = 0, SEG_NAME, SEG_VERSION, SEG_ID, SEG_FILE, SEG_ALIAS, SEG_TRIAL };

typedef struct pattern_segment {
    const char *p; /* a literal segment's bytes (in the pattern) */
    size_t n;
    int kind; /* SEG_* */
} pattern_segment;

typedef struct compiled_pattern {
    int n;    /* segments; > MAX_SEGMENTS: never matches (no path has that many) */
    int tail; /* the last one is {file}: it takes one or more path segments */
    pattern_segment seg[MAX_SEGMENTS];
} compiled_pattern;

static compiled_pattern compiled[GP_ROUTE_COUNT];
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

static int segment_kind(const char *p, size_t n)
{
    static const struct {
        const char *text;
        int kind;
    } params[] = {{"{name}", SEG_NAME}, {"{v}", SEG_VERSION}, {"{id}", SEG_ID}, {"{file}", SEG_FILE},
                  {"{alias}", SEG_ALIAS}, {"{trial}", SEG_TRIAL}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if (strlen(params[i].text) == n && memcmp(params[i].text, p, n) == 0)
            return params[i].kind;
    return SEG_LITERAL;
}

static void compile_patterns(void)
{
    for (int r = 0; r < GP_ROUTE_COUNT; r++) {
        compiled_pattern *c = &compiled[r];
        segment s[MAX_SEGMENTS];
        c->n = split(routes[r].pattern, s);
        if (c->n < 0) {
            c->n = MAX_SEGMENTS + 1;
            continue;
        }
        for (int i = 0; i < c->n; i++) {
            c->seg[i].p = s[i].p;
            c->seg[i].n = s[i].n;
            c->seg[i].kind = segment_kind(s[i].p, s[i].n);
        }
        c->tail = c->seg[c->n - 1].kind == SEG_FILE;
    }
}

/* Whether the n segments s have the shape of c: as many segments (or more,
 * for a {file} tail), the literal ones equal as sent (not decoded). */
static int shape_matches(const compiled_pattern *c, const segment *s, int n)
{
    if (c->tail ? n < c->n : n != c->n)
        return 0;
    for (int i = 0; i < c->n; i++) {
        const pattern_segment *p = &c->seg[i];
        if (p->kind == SEG_LITERAL && (p->n != s[i].n || memcmp(p->p, s[i].p, p->n) != 0))
            return 0;
    }
    return 1;
}

/* The rest of a path from a segment on (rest), up to its query. */
static void take_asset(const char *rest, gp_route_match *m)
{
    size_t n = strcspn(rest, "?#");
    if (gp_percent_decode(rest, n, m->asset, sizeof m->asset) < 0)
        m->asset[0] = '\0';
}

/* The parameters of a matched pattern, in order; the first bad one stops. */
static void take_params(const compiled_pattern *c, const segment *s, gp_route_match *m)
{
    for (int i = 0; i < c->n && m->param_error == GP_PARAM_OK; i++) {
        switch (c->seg[i].kind) {
        case SEG_NAME:
            take_name(&s[i], m);
            break;
        case SEG_VERSION:
            take_version(&s[i], m);
            break;
        case SEG_ID:
            take_id(&s[i], m);
            break;
        case SEG_ALIAS:
            take_alias(&s[i], m);
            break;
        case SEG_TRIAL:
            take_trial(&s[i], m);
            break;
        case SEG_FILE:
            take_asset(s[i].p, m);
            break;
        default:
            break;
        }
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
        const pattern_segment *first = &compiled[r].seg[0];
        if (routes[r].shape != GP_SHAPE_V1 && first->kind == SEG_LITERAL && first->n == n &&
            memcmp(first->p, path + 1, n) == 0)
            return routes[r].shape;
    }
    return GP_SHAPE_V1;
}

gp_route_id gp_route_match_path(const char *path, gp_route_match *m)
{
    memset(m, 0, sizeof *m);
    m->route = GP_ROUTE_NONE;
    pthread_once(&compile_once, compile_patterns);
    segment s[MAX_SEGMENTS];
    int n = split(path, s);
    for (int r = 0; n > 0 && r < GP_ROUTE_COUNT; r++) {
        if (shape_matches(&compiled[r], s, n)) {
            m->route = (gp_route_id)r;
            take_params(&compiled[r], s, m);
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
    if (strcmp(method, "PUT") == 0)
        return GP_VERB_PUT;
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

/* The Allow header of each route (GET brings HEAD), made once. */
static char allow_text[GP_ROUTE_COUNT][48];
static pthread_once_t allow_once = PTHREAD_ONCE_INIT;

static void make_allow(void)
{
    static const struct {
        int verb;
        const char *text;
    } verbs[] = {{GP_VERB_GET, "GET, HEAD"},
                 {GP_VERB_POST, "POST"},
                 {GP_VERB_PUT, "PUT"},
                 {GP_VERB_DELETE, "DELETE"}};
    for (int r = 0; r < GP_ROUTE_COUNT; r++) {
        size_t o = 0;
        for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
            if (routes[r].verbs & verbs[v].verb)
                o += (size_t)snprintf(allow_text[r] + o, sizeof allow_text[r] - o, "%s%s",
                                      o ? ", " : "", verbs[v].text);
    }
}

const char *gp_route_allow(gp_route_id r)
{
    if (info(r) == NULL)
        return "";
    pthread_once(&allow_once, make_allow);
    return allow_text[r];
}

const char *gp_route_name(gp_route_id r)
{
    static const char *const names[GP_ROUTE_COUNT] = {
#define ROUTE(id, pattern, verbs, auth, scopes, batch, shape, body, handler) [GP_ROUTE_##id] = #id,
#include "server/routes.def"
#undef ROUTE
    };
    return info(r) ? names[r] : "NONE";
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

int gp_route_scope(gp_route_id r, int verb)
{
    const route_info *i = info(r);
    if (i == NULL || i->auth == GP_AUTH_OPEN || (i->verbs & verb) == 0)
        return GP_SCOPE_BITS_NONE;
    int shift = verb == GP_VERB_GET ? 0 : verb == GP_VERB_POST ? 2 : verb == GP_VERB_PUT ? 4
              : verb == GP_VERB_DELETE                          ? 6
                                                                : -1;
    return shift < 0 ? GP_SCOPE_BITS_NONE : (i->scopes >> shift) & 3;
}

void gp_routes_print(FILE *out)
{
    static const struct {
        int bit;
        const char *name;
    } verbs[] = {{GP_VERB_GET, "GET"}, {GP_VERB_POST, "POST"}, {GP_VERB_PUT, "PUT"},
                 {GP_VERB_DELETE, "DELETE"}};
    static const char *const scopes[] = {"open", "read", "write", "admin"};
    for (int r = 0; r < GP_ROUTE_COUNT; r++)
        for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
            if (routes[r].verbs & verbs[v].bit)
                fprintf(out, "%s %s %s %s %s\n", gp_route_name((gp_route_id)r), verbs[v].name,
                        routes[r].pattern, scopes[gp_route_scope((gp_route_id)r, verbs[v].bit)],
                        routes[r].shape == GP_SHAPE_OIP ? "oip" : "v1");
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
    if (i == NULL || (verb != GP_VERB_POST && verb != GP_VERB_PUT))
        return 0;
    return i->post_types;
}
