/* The route table (server/routes.def) held against the OpenAPI document the
 * daemon embeds and serves (api/openapi.yaml, through gp_api_openapi), both
 * ways: every route and verb of the table is a path and operation of the
 * document, and every path and operation of the document is in the table.
 * Paths are compared with their parameters' names left out ("{v}" of the
 * table is "{version}" of the document). The check is shown to fail when
 * either side loses a route or an operation. Also: every pattern of the table
 * is matched by the matcher as its own route. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "server/route.h"

#define MAX_OPS 128
#define PATH_MAX_LEN 128

typedef struct operation {
    char path[PATH_MAX_LEN]; /* parameters as "{}" */
    char method[8];          /* "get", "post", ... as the document writes them */
} operation;

typedef struct operation_set {
    operation ops[MAX_OPS];
    int n;
} operation_set;

/* path with each "{...}" as "{}". */
static void normalise(const char *path, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n && path[i] != '\0' && o + 3 < size; i++) {
        out[o++] = path[i];
        if (path[i] == '{') {
            while (i < n && path[i] != '}' && path[i] != '\0')
                i++;
            out[o++] = '}';
        }
    }
    out[o] = '\0';
}

static int is_http_method(const char *s, size_t n)
{
    static const char *const methods[] = {"get", "put", "post", "delete", "options",
                                          "head", "patch", "trace"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i]) == n && memcmp(methods[i], s, n) == 0)
            return 1;
    return 0;
}

static void add(operation_set *set, const char *path, const char *method, size_t method_len)
{
    assert_true(set->n < MAX_OPS);
    operation *op = &set->ops[set->n++];
    snprintf(op->path, sizeof op->path, "%s", path);
    snprintf(op->method, sizeof op->method, "%.*s", (int)method_len, method);
}

/* The operations of the document's top-level "paths:" map: a path is a key
 * indented two spaces ("  /v1/models:"), an operation an HTTP method indented
 * four below it ("    get:"). The map ends at the next top-level key. */
static void openapi_operations(const char *yaml, operation_set *set)
{
    set->n = 0;
    const char *p = strstr(yaml, "\npaths:\n");
    assert_non_null(p);
    p += strlen("\npaths:\n");
    char path[PATH_MAX_LEN] = "";
    while (*p != '\0') {
        size_t len = strcspn(p, "\n");
        if (len > 0 && p[0] != ' ' && p[0] != '#')
            break; /* the next top-level key */
        if (len >= 4 && strncmp(p, "  /", 3) == 0 && p[len - 1] == ':') {
            normalise(p + 2, len - 3, path, sizeof path);
        } else if (len > 5 && strncmp(p, "    ", 4) == 0 && p[4] != ' ' && p[len - 1] == ':' &&
                   is_http_method(p + 4, len - 5)) {
            assert_true(path[0] != '\0');
            add(set, path, p + 4, len - 5);
        }
        p += len + (p[len] == '\n');
    }
}

/* The table's operations: each route and verb (GET as "get"; HEAD goes with
 * it), but the route skip (GP_ROUTE_NONE: none skipped). */
static void table_operations(gp_route_id skip, operation_set *set)
{
    static const struct {
        int verb;
        const char *method;
    } verbs[] = {{GP_VERB_GET, "get"}, {GP_VERB_POST, "post"}, {GP_VERB_PUT, "put"}, {GP_VERB_DELETE, "delete"}};
    set->n = 0;
    for (int r = 0; r < GP_ROUTE_COUNT; r++) {
        if (r == (int)skip)
            continue;
        const char *pattern = gp_route_pattern((gp_route_id)r);
        char path[PATH_MAX_LEN];
        normalise(pattern, strlen(pattern), path, sizeof path);
        for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
            if (gp_route_verbs((gp_route_id)r) & verbs[v].verb)
                add(set, path, verbs[v].method, strlen(verbs[v].method));
    }
}

static int contains(const operation_set *set, const operation *op)
{
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->ops[i].path, op->path) == 0 && strcmp(set->ops[i].method, op->method) == 0)
            return 1;
    return 0;
}

/* The operations of a missing from b, each printed under what; their count. */
static int missing(const operation_set *a, const operation_set *b, const char *what)
{
    int count = 0;
    for (int i = 0; i < a->n; i++) {
        if (!contains(b, &a->ops[i])) {
            printf("routes: %s %s: %s\n", a->ops[i].method, a->ops[i].path, what);
            count++;
        }
    }
    return count;
}

/* The differences between the table (but the route skip) and the document. */
static int differences(const char *yaml, gp_route_id skip)
{
    operation_set *doc = malloc(sizeof *doc);
    operation_set *table = malloc(sizeof *table);
    assert_non_null(doc);
    assert_non_null(table);
    openapi_operations(yaml, doc);
    table_operations(skip, table);
    int n = missing(table, doc, "in the route table (server/routes.def), not in api/openapi.yaml") +
            missing(doc, table, "in api/openapi.yaml, not in the route table (server/routes.def)");
    free(doc);
    free(table);
    return n;
}

/* The document the daemon serves at /openapi.yaml, NUL-terminated. */
static char *openapi_text(void)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_openapi(&res);
    assert_int_equal(res.status, 200);
    char *text = malloc(res.body_len + 1);
    assert_non_null(text);
    memcpy(text, res.body, res.body_len);
    text[res.body_len] = '\0';
    gp_response_free(&res);
    return text;
}

/* yaml without the lines from the one that starts with from (given with its
 * newline before) up to (not including) the next line that starts with
 * until_prefix. */
static char *without(const char *yaml, const char *from, const char *until_prefix)
{
    const char *a = strstr(yaml, from);
    if (a == NULL)
        fail_msg("the document no longer has '%s', which this test removes", from + 1);
    a++;
    const char *b = strchr(a, '\n') + 1;
    while (*b != '\0' && strncmp(b, until_prefix, strlen(until_prefix)) != 0)
        b = strchr(b, '\n') + 1;
    size_t n = strlen(yaml) - (size_t)(b - a);
    char *out = malloc(n + 1);
    assert_non_null(out);
    memcpy(out, yaml, (size_t)(a - yaml));
    memcpy(out + (a - yaml), b, strlen(b) + 1);
    return out;
}

static void test_routes_match_openapi(void **state)
{
    (void)state;
    char *yaml = openapi_text();
    operation_set *doc = malloc(sizeof *doc);
    assert_non_null(doc);
    openapi_operations(yaml, doc);
    assert_true(doc->n >= GP_ROUTE_COUNT); /* the parse found the document's paths */
    free(doc);
    assert_int_equal(differences(yaml, GP_ROUTE_NONE), 0);
    free(yaml);
}

/* The check fails when the document loses a path, or one operation of it. */
static void test_routes_check_sees_a_lost_openapi_path(void **state)
{
    (void)state;
    char *yaml = openapi_text();
    char *lost_path = without(yaml, "\n  /v1/jobs/{id}:\n", "  /");
    assert_int_equal(differences(lost_path, GP_ROUTE_NONE), 2); /* its get and delete */
    char *lost_op = without(yaml, "\n    delete:\n      summary: Delete every version", "  /");
    assert_int_equal(differences(lost_op, GP_ROUTE_NONE), 1);
    free(lost_op);
    free(lost_path);
    free(yaml);
}

/* The check fails when the table loses a route. */
static void test_routes_check_sees_a_lost_table_route(void **state)
{
    (void)state;
    char *yaml = openapi_text();
    assert_int_equal(differences(yaml, GP_ROUTE_OBSERVE), 1);
    assert_int_equal(differences(yaml, GP_ROUTE_MODELS), 2); /* its get and post */
    free(yaml);
}

/* Each pattern, its parameters filled in, is matched as its own route: the
 * matcher reads the table it is listed in. */
static void test_routes_patterns_match_themselves(void **state)
{
    (void)state;
    for (int r = 0; r < GP_ROUTE_COUNT; r++) {
        const char *pattern = gp_route_pattern((gp_route_id)r);
        char path[PATH_MAX_LEN];
        size_t o = 0;
        for (const char *p = pattern; *p != '\0' && o + 16 < sizeof path; p++) {
            if (*p != '{') {
                path[o++] = *p;
                continue;
            }
            const char *value = strncmp(p, "{v}", 3) == 0      ? "2"
                                : strncmp(p, "{id}", 4) == 0   ? "job-1"
                                : strncmp(p, "{file}", 6) == 0 ? "app.js"
                                : strncmp(p, "{trial}", 7) == 0 ? "3"
                                                               : "m";
            o += (size_t)snprintf(path + o, sizeof path - o, "%s", value);
            p = strchr(p, '}');
        }
        path[o] = '\0';
        gp_route_match m;
        assert_int_equal(gp_route_match_path(path, &m), r);
        assert_int_equal(m.param_error, GP_PARAM_OK);
        assert_int_equal(m.v2, gp_route_shape((gp_route_id)r) == GP_SHAPE_OIP);
    }
}

/* {trial}: an integer from 1 to 2^53; anything else is GP_PARAM_BAD_TRIAL. */
static void test_routes_trial_ids(void **state)
{
    (void)state;
    gp_route_match m;
    assert_int_equal(gp_route_match_path("/v1/studies/s/trials/42", &m), GP_ROUTE_STUDY_TRIAL);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_true(m.trial == 42);
    assert_string_equal(m.name, "s");
    assert_int_equal(gp_route_match_path("/v1/studies/s/trials/9007199254740992", &m),
                     GP_ROUTE_STUDY_TRIAL);
    assert_true(m.trial == 9007199254740992LL);
    const char *bad[] = {"0", "-1", "abc", "1.5", "9007199254740993", "12345678901234567", "%20"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/studies/s/trials/%s", bad[i]);
        assert_int_equal(gp_route_match_path(path, &m), GP_ROUTE_STUDY_TRIAL);
        assert_int_equal(m.param_error, GP_PARAM_BAD_TRIAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_match_openapi),
        cmocka_unit_test(test_routes_check_sees_a_lost_openapi_path),
        cmocka_unit_test(test_routes_check_sees_a_lost_table_route),
        cmocka_unit_test(test_routes_patterns_match_themselves),
        cmocka_unit_test(test_routes_trial_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
