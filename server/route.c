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

static int seg_is(const segment *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->n == n && memcmp(s->p, lit, n) == 0;
}

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

/* Whether path is /v2 or below it (query and fragment aside). */
static int under_v2(const char *path)
{
    return path != NULL && strncmp(path, "/v2", 3) == 0 &&
           (path[3] == '\0' || path[3] == '/' || path[3] == '?' || path[3] == '#');
}

/* The V2 routes (s[0] is "v2"): /v2, /v2/health/{live,ready},
 * /v2/models/{name}[/versions/{v}][/ready | /infer]. */
static void match_v2(const segment *s, int n, gp_route_match *m)
{
    if (n == 1) {
        m->route = GP_ROUTE_V2_SERVER;
        return;
    }
    if (n == 3 && seg_is(&s[1], "health")) {
        if (seg_is(&s[2], "live"))
            m->route = GP_ROUTE_V2_LIVE;
        else if (seg_is(&s[2], "ready"))
            m->route = GP_ROUTE_V2_READY;
        return;
    }
    if (n < 3 || !seg_is(&s[1], "models"))
        return;
    /* after the name: nothing, or "versions" {v}, then nothing, "ready" or "infer" */
    int versioned = n >= 5 && seg_is(&s[3], "versions");
    int tail = versioned ? 5 : 3; /* index of the segment after the name or version */
    if (n == tail)
        m->route = versioned ? GP_ROUTE_V2_MODEL_VERSION : GP_ROUTE_V2_MODEL;
    else if (n == tail + 1 && seg_is(&s[tail], "ready"))
        m->route = versioned ? GP_ROUTE_V2_VERSION_READY : GP_ROUTE_V2_MODEL_READY;
    else if (n == tail + 1 && seg_is(&s[tail], "infer"))
        m->route = versioned ? GP_ROUTE_V2_VERSION_INFER : GP_ROUTE_V2_INFER;
    if (m->route == GP_ROUTE_NONE)
        return;
    take_name(&s[2], m);
    if (m->param_error == GP_PARAM_OK && versioned)
        take_version(&s[4], m);
}

/* The rest of a /ui/ path (rest points past "/ui/"), up to its query. */
static void take_asset(const char *rest, gp_route_match *m)
{
    size_t n = strcspn(rest, "?#");
    if (gp_percent_decode(rest, n, m->asset, sizeof m->asset) < 0)
        m->asset[0] = '\0';
}

gp_route_id gp_route_match_path(const char *path, gp_route_match *m)
{
    memset(m, 0, sizeof *m);
    m->route = GP_ROUTE_NONE;
    m->v2 = under_v2(path);
    segment s[MAX_SEGMENTS];
    int n = split(path, s);
    if (n <= 0)
        return m->route;
    if (m->v2) {
        match_v2(s, n, m);
        return m->route;
    }
    if (n == 1) {
        if (s[0].n == 0)
            m->route = GP_ROUTE_UI_INDEX;
        else if (seg_is(&s[0], "healthz"))
            m->route = GP_ROUTE_HEALTHZ;
        else if (seg_is(&s[0], "readyz"))
            m->route = GP_ROUTE_READYZ;
        else if (seg_is(&s[0], "metrics"))
            m->route = GP_ROUTE_METRICS;
        else if (seg_is(&s[0], "openapi.yaml"))
            m->route = GP_ROUTE_OPENAPI;
        return m->route;
    }
    if (seg_is(&s[0], "ui")) {
        m->route = GP_ROUTE_UI_ASSET;
        take_asset(path + 4, m);
        return m->route;
    }
    if (!seg_is(&s[0], "v1"))
        return m->route;
    if (n == 2) {
        if (seg_is(&s[1], "methods"))
            m->route = GP_ROUTE_METHODS;
        else if (seg_is(&s[1], "models"))
            m->route = GP_ROUTE_MODELS;
        return m->route;
    }
    if (seg_is(&s[1], "jobs")) {
        if (n == 3) {
            m->route = GP_ROUTE_JOB;
            take_id(&s[2], m);
        }
        return m->route;
    }
    if (!seg_is(&s[1], "models"))
        return m->route;
    if (n == 3)
        m->route = GP_ROUTE_MODEL;
    else if (n == 4 && seg_is(&s[3], "predict"))
        m->route = GP_ROUTE_PREDICT;
    else if (n == 4 && seg_is(&s[3], "sample"))
        m->route = GP_ROUTE_SAMPLE;
    else if (n == 4 && seg_is(&s[3], "observe"))
        m->route = GP_ROUTE_OBSERVE;
    else if (n == 5 && seg_is(&s[3], "versions"))
        m->route = GP_ROUTE_MODEL_VERSION;
    if (m->route == GP_ROUTE_NONE)
        return m->route;
    take_name(&s[2], m);
    if (m->param_error == GP_PARAM_OK && m->route == GP_ROUTE_MODEL_VERSION)
        take_version(&s[4], m);
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

typedef struct route_info {
    const char *pattern;
    int verbs;
    const char *allow;
    int auth;
    int post_types; /* body media types of POST */
} route_info;

static const route_info routes[GP_ROUTE_COUNT] = {
    [GP_ROUTE_HEALTHZ] = {"/healthz", GP_VERB_GET, "GET, HEAD", 0, 0},
    [GP_ROUTE_READYZ] = {"/readyz", GP_VERB_GET, "GET, HEAD", 0, 0},
    [GP_ROUTE_METRICS] = {"/metrics", GP_VERB_GET, "GET, HEAD", 0, 0},
    [GP_ROUTE_OPENAPI] = {"/openapi.yaml", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_METHODS] = {"/v1/methods", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_MODELS] = {"/v1/models", GP_VERB_GET | GP_VERB_POST, "GET, HEAD, POST", 1, 3},
    [GP_ROUTE_MODEL] = {"/v1/models/{name}", GP_VERB_GET | GP_VERB_DELETE, "GET, HEAD, DELETE", 1,
                        0},
    [GP_ROUTE_MODEL_VERSION] = {"/v1/models/{name}/versions/{v}", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_PREDICT] = {"/v1/models/{name}/predict", GP_VERB_POST, "POST", 1, 1},
    [GP_ROUTE_SAMPLE] = {"/v1/models/{name}/sample", GP_VERB_POST, "POST", 1, 1},
    [GP_ROUTE_OBSERVE] = {"/v1/models/{name}/observe", GP_VERB_POST, "POST", 1, 1},
    [GP_ROUTE_JOB] = {"/v1/jobs/{id}", GP_VERB_GET | GP_VERB_DELETE, "GET, HEAD, DELETE", 1, 0},
    [GP_ROUTE_V2_SERVER] = {"/v2", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_V2_LIVE] = {"/v2/health/live", GP_VERB_GET, "GET, HEAD", 0, 0},
    [GP_ROUTE_V2_READY] = {"/v2/health/ready", GP_VERB_GET, "GET, HEAD", 0, 0},
    [GP_ROUTE_V2_MODEL] = {"/v2/models/{name}", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_V2_MODEL_VERSION] = {"/v2/models/{name}/versions/{v}", GP_VERB_GET, "GET, HEAD", 1,
                                   0},
    [GP_ROUTE_V2_MODEL_READY] = {"/v2/models/{name}/ready", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_V2_VERSION_READY] = {"/v2/models/{name}/versions/{v}/ready", GP_VERB_GET,
                                   "GET, HEAD", 1, 0},
    [GP_ROUTE_V2_INFER] = {"/v2/models/{name}/infer", GP_VERB_POST, "POST", 1, 1},
    [GP_ROUTE_V2_VERSION_INFER] = {"/v2/models/{name}/versions/{v}/infer", GP_VERB_POST, "POST",
                                   1, 1},
    /* The browser view needs the key like the API (as a Basic password). */
    [GP_ROUTE_UI_INDEX] = {"/", GP_VERB_GET, "GET, HEAD", 1, 0},
    [GP_ROUTE_UI_ASSET] = {"/ui/{file}", GP_VERB_GET, "GET, HEAD", 1, 0},
};

static const route_info *info(gp_route_id r)
{
    return r >= 0 && r < GP_ROUTE_COUNT ? &routes[r] : NULL;
}

int gp_route_verbs(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->verbs : 0;
}

const char *gp_route_allow(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->allow : "";
}

const char *gp_route_pattern(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->pattern : "unmatched";
}

int gp_route_needs_auth(gp_route_id r)
{
    const route_info *i = info(r);
    return i ? i->auth : 1;
}

int gp_route_body_types(gp_route_id r, int verb)
{
    const route_info *i = info(r);
    if (i == NULL || verb != GP_VERB_POST)
        return 0;
    return i->post_types;
}
