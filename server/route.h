/* gpserve server: the routes of the HTTP API v1, of the Open Inference
 * Protocol V2 and of the browser view (docs/design/api.md, "Routes"): the
 * matcher and the lookups of the one route table, server/routes.def. Pure
 * string work, no libmicrohttpd: testable on its own. */
#ifndef GP_SERVER_ROUTE_H
#define GP_SERVER_ROUTE_H

#include <stddef.h>
#include <stdio.h>

/* One id per row of server/routes.def, in its order. */
typedef enum gp_route_id {
    GP_ROUTE_NONE = -1, /* no route: 404 */
#define ROUTE(id, pattern, verbs, auth, scopes, batch, shape, body, handler) GP_ROUTE_##id,
#include "server/routes.def"
#undef ROUTE
    GP_ROUTE_COUNT
} gp_route_id;

/* HTTP verbs as bits. */
enum {
    GP_VERB_GET = 1,
    GP_VERB_POST = 2,
    GP_VERB_DELETE = 4,
    GP_VERB_OTHER = 8,
    GP_VERB_PUT = 16
};

/* Who may call a route (the auth column of server/routes.def). */
enum {
    GP_AUTH_OPEN = 0,   /* no API key needed */
    GP_AUTH_BEARER = 1, /* the key; a 401 asks for a Bearer token */
    GP_AUTH_BASIC = 2   /* the key; a 401 asks for Basic credentials (browsers prompt) */
};

/* The scope a named key needs for each verb of a route (the scopes column of
 * server/routes.def; the GP_SCOPE_* values of server/keys.h, 2 bits a verb). */
#define GP_SCOPE_BITS_NONE 0
#define GP_SCOPE_BITS_READ 1
#define GP_SCOPE_BITS_WRITE 2
#define GP_SCOPE_BITS_ADMIN 3
#define GP_SCOPES(get, post, put, delete)                                                        \
    (GP_SCOPE_BITS_##get | GP_SCOPE_BITS_##post << 2 | GP_SCOPE_BITS_##put << 4 |               \
     GP_SCOPE_BITS_##delete << 6)

/* Whether a route goes through the dynamic batcher (server/batcher.h). */
enum { GP_UNBATCHED = 0, GP_BATCHED = 1 };

/* The shape of a route's error answers. */
enum {
    GP_SHAPE_V1 = 0, /* {"error": {"code": ..., "message": ..., ...}} */
    GP_SHAPE_OIP = 1 /* the Open Inference Protocol's {"error": "..."} */
};

/* Media types of a POST body (bits). */
enum {
    GP_BODY_NONE = 0,
    GP_BODY_JSON = 1,
    GP_BODY_JSON_CSV = 3,
    GP_BODY_MODEL = 4, /* a model file: application/vnd.gpserve.model or application/octet-stream */
    GP_BODY_DATASET = 8 /* a data set, streamed: text/csv or application/x-ndjson */
};

/* Why a matched route's parameter was rejected (400 invalid_argument). */
typedef enum gp_route_param_error {
    GP_PARAM_OK = 0,
    GP_PARAM_BAD_NAME,    /* field "name" */
    GP_PARAM_BAD_VERSION, /* field "version" */
    GP_PARAM_BAD_ALIAS,   /* field "alias" */
    GP_PARAM_BAD_ID,      /* field "id" */
    GP_PARAM_BAD_TRIAL    /* field "trial" */
} gp_route_param_error;

#define GP_ROUTE_NAME_MAX 65 /* [A-Za-z0-9._-]{1,64} + NUL */
#define GP_ROUTE_ID_MAX 40   /* gp_job_info.id */
#define GP_ROUTE_ALIAS_MAX 65 /* [A-Za-z][A-Za-z0-9_.-]{0,63} + NUL */
#define GP_ROUTE_ASSET_MAX 128 /* {file} of /ui/{file}, decoded, + NUL */

typedef struct gp_route_match {
    gp_route_id route;
    gp_route_param_error param_error;
    char name[GP_ROUTE_NAME_MAX]; /* {name}, decoded (valid only when param_error == OK) */
    char id[GP_ROUTE_ID_MAX];     /* {id} of a job */
    int version;                  /* {v}, >= 1; 0 while version_alias is unresolved */
    /* {v} given as an alias ("champion"; else ""): the request checks
     * resolve it into version once (gp_api_resolve_alias), before any
     * handler runs, so every route taking {v} takes an alias too. */
    char version_alias[GP_ROUTE_ALIAS_MAX];
    char alias[GP_ROUTE_ALIAS_MAX]; /* {alias} of the alias routes */
    long long trial;                /* {trial} of a study's trial: an integer >= 1 */
    /* Its errors take the Open Inference Protocol's shape {"error": "..."}:
     * the route's shape is GP_SHAPE_OIP or, when no route matches, that of
     * the routes under the same first segment (/v2/...). */
    int v2;
    /* {file} of /ui/{file}: the rest of the path, percent-decoded, slashes
     * kept ("vendor/chart.umd.min.js"); "" when it cannot be decoded or is
     * too long (then no file has that name: 404). */
    char asset[GP_ROUTE_ASSET_MAX];
} gp_route_match;

/* Match a raw request path (as sent: percent-encoded, no query string; a
 * "?query" suffix is ignored) against the patterns of server/routes.def.
 * Returns m->route (GP_ROUTE_NONE when no route matches). Literal segments
 * are compared as sent; parameters are percent-decoded; a {name} must pass
 * gp_api_valid_name, a {v} must be an integer in 1..INT_MAX, a {trial} in
 * 1..2^53, an {id} must be
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
/* The route's ID in server/routes.def ("PREDICT"); "NONE" for GP_ROUTE_NONE. */
const char *gp_route_name(gp_route_id r);
/* 0 for the routes open without an API key (GP_AUTH_OPEN); 1 for
 * GP_ROUTE_NONE. */
int gp_route_needs_auth(gp_route_id r);
/* The auth column (GP_AUTH_*); GP_AUTH_BEARER for GP_ROUTE_NONE. */
int gp_route_auth(gp_route_id r);
/* The scope (GP_SCOPE_BITS_*, the GP_SCOPE_* of server/keys.h) a key needs
 * for verb (a GP_VERB_* bit; HEAD is GET) on r: NONE for an open route, a
 * verb r does not take, and GP_ROUTE_NONE. */
int gp_route_scope(gp_route_id r, int verb);
/* The table, a line a route and verb: "ID VERB PATTERN SCOPE SHAPE" (SCOPE
 * open, read, write or admin; SHAPE v1 or oip): `gpserve routes`,
 * from which the keys integration area makes its matrix. */
void gp_routes_print(FILE *out);
/* Whether r goes through the dynamic batcher (when batching is on). */
int gp_route_batched(gp_route_id r);
/* The shape of r's errors (GP_SHAPE_*). */
int gp_route_shape(gp_route_id r);
/* Media types accepted by (route, verb) bodies: 0 none (no body expected),
 * 1 application/json, 3 application/json or text/csv. */
int gp_route_body_types(gp_route_id r, int verb);

#endif
