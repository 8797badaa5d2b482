/* libFuzzer target: server route matching (server/route.h) and the small
 * string parsers of server/util.h that see request data: percent-decoding,
 * the bearer token and the Basic password of an Authorization header, the media type of a
 * Content-Type, and the JSON string scanner used on response bodies.
 * Checks: a matched {name} passes gp_api_valid_name, a {v} is >= 1 or an
 * alias and an {alias} is one (gp_api_valid_alias), an {id}
 * is [A-Za-z0-9._-]{1,39}, a path is marked v2 exactly when it is under /v2
 * (and then its route's table row has the OIP error shape), and every route
 * answers its table lookups. A /ui/{file} path matches whatever the file
 * (the handler answers 404). */
#include "tests/fuzz/fuzz_common.h"

#include "server/route.h"
#include "server/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *path)
{
    fprintf(stderr, "fuzz: %s (path \"%.300s\")\n", what, path);
    abort();
}

static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= GP_ROUTE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    gp_route_match m;
    gp_route_id r = gp_route_match_path(s, &m);
    if (r != m.route || r < GP_ROUTE_NONE || r >= GP_ROUTE_COUNT)
        fail("route id out of range", s);
    /* Every path under /v2 (matched or not) answers errors in the Open
     * Inference Protocol's shape, and only those. */
    int v2 = strncmp(s, "/v2", 3) == 0 && (s[3] == '\0' || strchr("/?#", s[3]) != NULL);
    if (r != GP_ROUTE_NONE && m.param_error == GP_PARAM_OK) {
        /* the parameters of the route's pattern (server/routes.def) */
        int named = strstr(gp_route_pattern(r), "{name}") != NULL;
        int versioned = strstr(gp_route_pattern(r), "{v}") != NULL;
        if (named && !gp_api_valid_name(m.name))
            fail("matched a route with an invalid {name}", s);
        /* {v} is a version >= 1, or an alias the request checks resolve */
        if (versioned && m.version < 1 && !gp_api_valid_alias(m.version_alias))
            fail("matched a {v} that is neither a version >= 1 nor an alias", s);
        if (versioned && m.version >= 1 && m.version_alias[0] != '\0')
            fail("matched a {v} that is both a version and an alias", s);
        if (strstr(gp_route_pattern(r), "{alias}") != NULL && !gp_api_valid_alias(m.alias))
            fail("matched an invalid {alias}", s);
        if (strstr(gp_route_pattern(r), "{id}") != NULL && !valid_id(m.id))
            fail("matched a job with an invalid {id}", s);
    }
    static const char *const verbs[] = {"GET", "POST", "DELETE", "PUT", NULL};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        int v = gp_verb_of(verbs[i]);
        (void)gp_route_body_types(r, v);
    }
    if (r != GP_ROUTE_NONE && (gp_route_verbs(r) == 0 || gp_route_allow(r)[0] == '\0'))
        fail("a route without verbs", s);
    if (v2 != m.v2)
        fail("a path's error shape is not that of /v2 (OIP) or of the others (v1)", s);
    if (r != GP_ROUTE_NONE && m.v2 != (gp_route_shape(r) == GP_SHAPE_OIP))
        fail("a route's errors not in the shape of its table row", s);
    (void)gp_route_pattern(r);
    (void)gp_route_needs_auth(r);
    (void)gp_verb_of(s);

    /* the same bytes through the util parsers */
    char dec[512];
    long n = gp_percent_decode(s, size, dec, sizeof dec);
    if (n >= (long)sizeof dec || (n >= 0 && (dec[n] != '\0' || (long)strlen(dec) != n)))
        fail("gp_percent_decode length", s);
    const char *tok = NULL;
    size_t toklen = 0;
    if (gp_bearer_token(s, &tok, &toklen) &&
        (tok < s || toklen == 0 || tok + toklen > s + strlen(s)))
        fail("gp_bearer_token out of the header", s);
    /* Basic credentials decode into a buffer, never past it; the password
     * lies inside what was decoded. */
    char cred[64];
    const char *pw = NULL;
    size_t pwlen = 0;
    if (gp_basic_password(s, cred, sizeof cred, &pw, &pwlen) &&
        (pw <= cred || pw + pwlen >= cred + sizeof cred || pw[pwlen] != '\0' || pw[-1] != ':'))
        fail("gp_basic_password out of its buffer", s);
    (void)gp_media_type_is(s, "application/json");
    (void)gp_media_type_is(s, "text/csv");
    char out[256];
    static const char *const keys[] = {"message", "field", "code"};
    for (size_t i = 0; i < 3; i++) {
        int found = gp_json_find_string(s, size, keys[i], out, sizeof out);
        if (strnlen(out, sizeof out) >= sizeof out || (!found && out[0] != '\0'))
            fail("gp_json_find_string output", s);
    }
    free(s);
    return 0;
}
