/* gpserve server: the route table of the HTTP API v1 and of the Open
 * Inference Protocol V2 (docs/design/api.md, "Routes" and "Open Inference
 * Protocol V2"). Pure string work, no libmicrohttpd: testable on its own. */
#ifndef GP_SERVER_ROUTE_H
#define GP_SERVER_ROUTE_H

#include <stddef.h>

typedef enum gp_route_id {
    GP_ROUTE_NONE = -1, /* no route: 404 */
    GP_ROUTE_HEALTHZ = 0,
    GP_ROUTE_READYZ,
    GP_ROUTE_METRICS,
    GP_ROUTE_OPENAPI,
    GP_ROUTE_METHODS,
    GP_ROUTE_MODELS,        /* /v1/models */
    GP_ROUTE_MODEL,         /* /v1/models/{name} */
    GP_ROUTE_MODEL_VERSION, /* /v1/models/{name}/versions/{v} */
    GP_ROUTE_PREDICT,       /* /v1/models/{name}/predict */
    GP_ROUTE_SAMPLE,        /* /v1/models/{name}/sample */
    GP_ROUTE_OBSERVE,       /* /v1/models/{name}/observe */
    GP_ROUTE_JOB,           /* /v1/jobs/{id} */
    /* Open Inference Protocol V2 */
    GP_ROUTE_V2_SERVER,        /* /v2 (server metadata) */
    GP_ROUTE_V2_LIVE,          /* /v2/health/live */
    GP_ROUTE_V2_READY,         /* /v2/health/ready */
    GP_ROUTE_V2_MODEL,         /* /v2/models/{name} (model metadata) */
    GP_ROUTE_V2_MODEL_VERSION, /* /v2/models/{name}/versions/{v} */
    GP_ROUTE_V2_MODEL_READY,   /* /v2/models/{name}/ready */
    GP_ROUTE_V2_VERSION_READY, /* /v2/models/{name}/versions/{v}/ready */
    GP_ROUTE_V2_INFER,         /* /v2/models/{name}/infer */
    GP_ROUTE_V2_VERSION_INFER, /* /v2/models/{name}/versions/{v}/infer */
    GP_ROUTE_UI_INDEX,      /* / : the browser view's page (web/index.html) */
    GP_ROUTE_UI_ASSET,      /* /ui/{file} : the page's other files (web/...) */
    GP_ROUTE_COUNT
} gp_route_id;

/* HTTP verbs as bits. */
enum {
    GP_VERB_GET = 1,
    GP_VERB_POST = 2,
    GP_VERB_DELETE = 4,
    GP_VERB_OTHER = 8
};

/* Why a matched route's parameter was rejected (400 invalid_argument). */
typedef enum gp_route_param_error {
    GP_PARAM_OK = 0,
    GP_PARAM_BAD_NAME,    /* field "name" */
    GP_PARAM_BAD_VERSION, /* field "version" */
    GP_PARAM_BAD_ID       /* field "id" */
} gp_route_param_error;

#define GP_ROUTE_NAME_MAX 65 /* [A-Za-z0-9._-]{1,64} + NUL */
#define GP_ROUTE_ID_MAX 40   /* gp_job_info.id */
#define GP_ROUTE_ASSET_MAX 128 /* {file} of /ui/{file}, decoded, + NUL */

typedef struct gp_route_match {
    gp_route_id route;
    gp_route_param_error param_error;
    char name[GP_ROUTE_NAME_MAX]; /* {name}, decoded (valid only when param_error == OK) */
    char id[GP_ROUTE_ID_MAX];     /* {id} of a job */
    int version;                  /* {v}, >= 1 */
    /* The path is under /v2 (a V2 route, or none): its errors take the
     * protocol's shape {"error": "..."}. */
    int v2;
    /* {file} of /ui/{file}: the rest of the path, percent-decoded, slashes
     * kept ("vendor/chart.umd.min.js"); "" when it cannot be decoded or is
     * too long (then no file has that name: 404). */
    char asset[GP_ROUTE_ASSET_MAX];
} gp_route_match;

/* Match a raw request path (as sent: percent-encoded, no query string; a
 * "?query" suffix is ignored). Returns m->route (GP_ROUTE_NONE when no route
 * matches). Segments are percent-decoded; a {name} must pass
 * gp_api_valid_name, a {v} must be an integer in 1..INT_MAX, an {id} must be
 * [A-Za-z0-9._-]{1,39}; else m->param_error says which. "/" is the page
 * and every path under "/ui/" an asset of it (m->asset). */
gp_route_id gp_route_match_path(const char *path, gp_route_match *m);

/* Verb bit of a method string ("GET" -> GP_VERB_GET, unknown -> OTHER). */
int gp_verb_of(const char *method);
/* Verbs a route accepts (bits); 0 for GP_ROUTE_NONE. */
int gp_route_verbs(gp_route_id r);
/* The Allow header value of a route, e.g. "GET, POST". */
const char *gp_route_allow(gp_route_id r);
/* The route pattern used as the metrics label ("/v1/models/{name}/predict");
 * "unmatched" for GP_ROUTE_NONE. */
const char *gp_route_pattern(gp_route_id r);
/* 0 for the routes open without an API key (/healthz, /readyz, /metrics,
 * /v2/health/live, /v2/health/ready). */
int gp_route_needs_auth(gp_route_id r);
/* Media types accepted by (route, verb) bodies: 0 none (no body expected),
 * 1 application/json, 3 application/json or text/csv. */
int gp_route_body_types(gp_route_id r, int verb);

#endif
