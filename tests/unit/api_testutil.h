/* Helpers shared by the api tests (test_api*.c): a temporary database, request
 * builders, response checks. Header-only (static inline) so that nothing else
 * links it. */
#ifndef GP_API_TESTUTIL_H
#define GP_API_TESTUTIL_H

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api.h"
#include "api/internal.h"
#include "core/base/rng.h"

/* A temporary directory holding the test database. */
static inline char *tmp_db(char *dir, size_t dirlen, char *path, size_t pathlen)
{
    snprintf(dir, dirlen, "/tmp/gpapi-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, pathlen, "%s/test.db", dir);
    return path;
}

static inline void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline gp_request make_req(const char *ctype, const char *body, const gp_query_param *q,
                                  size_t nq)
{
    gp_request r;
    memset(&r, 0, sizeof r);
    r.content_type = ctype;
    r.body = body;
    r.body_len = body ? strlen(body) : 0;
    r.query = q;
    r.n_query = nq;
    return r;
}

/* POST /v1/models: parse, then fit synchronously (async is ignored here). */
static inline void do_fit(gp_api *api, const gp_request *req, gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_parse_fit(api, req, &job, &err) != GP_OK) {
        gp_api_error(&err, res);
        return;
    }
    double secs = -1.0;
    gp_api_run_fit(api, job, NULL, NULL, res, &secs);
    gp_fit_job_free(job);
}

static inline void fit_json(gp_api *api, const char *body, gp_response *res)
{
    gp_request req = make_req("application/json", body, NULL, 0);
    do_fit(api, &req, res);
}

static inline void predict_json(gp_api *api, const char *name, const char *body,
                                gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_api_predict(api, name, &req, res);
}

static inline void sample_json(gp_api *api, const char *name, const char *body,
                               gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_api_sample(api, name, &req, res);
}

static inline json_t *res_json(const gp_response *res)
{
    json_error_t je;
    assert_non_null(res->body);
    json_t *j = json_loadb(res->body, res->body_len, 0, &je);
    if (j == NULL)
        fail_msg("response is not JSON: %s: %.*s", je.text, (int)res->body_len, res->body);
    return j;
}

/* Status, and for errors the code and field ("" = no field). */
static inline void expect_error(const gp_response *res, int status, const char *code,
                                const char *field)
{
    if (res->status != status)
        fail_msg("status %d, expected %d: %.*s", res->status, status, (int)res->body_len,
                 res->body ? res->body : "");
    json_t *j = res_json(res);
    json_t *e = json_object_get(j, "error");
    assert_non_null(e);
    const char *c = json_string_value(json_object_get(e, "code"));
    const char *f = json_string_value(json_object_get(e, "field"));
    const char *m = json_string_value(json_object_get(e, "message"));
    assert_non_null(c);
    assert_non_null(m);
    assert_true(strlen(m) > 0);
    if (strcmp(c, code) != 0)
        fail_msg("code '%s', expected '%s': %.*s", c, code, (int)res->body_len, res->body);
    if (strcmp(f ? f : "", field) != 0)
        fail_msg("field '%s', expected '%s': %.*s", f ? f : "", field, (int)res->body_len,
                 res->body);
    json_decref(j);
}

static inline void expect_status(const gp_response *res, int status)
{
    if (res->status != status)
        fail_msg("status %d, expected %d: %.*s", res->status, status, (int)res->body_len,
                 res->body ? res->body : "");
}

/* Smooth function with deterministic noise; X column-major n x d. */
static inline void toy_data(size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t k = 0; k < d; k++)
            s += sin(1.3 * X[k * n + i] + 0.4 * (double)k);
        y[i] = 3.0 + 2.0 * s + 0.1 * gp_rng_normal(&rng);
    }
}

/* "[[x00,x01],[x10,x11],...]" (or a flat list when flat) into b. */
static inline void put_matrix(gp_buf *b, const double *X, size_t n, size_t d, int flat)
{
    gp_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            gp_buf_puts(b, ",");
        if (!flat)
            gp_buf_puts(b, "[");
        for (size_t k = 0; k < d; k++) {
            if (k)
                gp_buf_puts(b, ",");
            gp_buf_json_number(b, X[k * n + i]);
        }
        if (!flat)
            gp_buf_puts(b, "]");
    }
    gp_buf_puts(b, "]");
}

/* A fit request body: {"name": name, <extra>, "X": ..., "y": ...}; extra is
 * raw JSON members ("" for none). The caller frees. */
static inline char *fit_body(const char *name, const char *extra, const double *X,
                             const double *y, size_t n, size_t d)
{
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"name\":\"%s\",%s%s\"X\":", name, extra, extra[0] ? "," : "");
    put_matrix(&b, X, n, d, 0);
    gp_buf_puts(&b, ",\"y\":");
    gp_buf_json_array(&b, y, n, 1);
    gp_buf_puts(&b, "}");
    assert_false(b.failed);
    return b.data;
}

/* A predict/sample body {"X": ..., <extra>}. */
static inline char *points_body(const double *X, size_t n, size_t d, const char *extra)
{
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "{\"X\":");
    put_matrix(&b, X, n, d, 0);
    if (extra[0])
        gp_buf_printf(&b, ",%s", extra);
    gp_buf_puts(&b, "}");
    assert_false(b.failed);
    return b.data;
}

/* Doubles of a JSON array (exact: jansson reads numbers with strtod). */
static inline void json_doubles(json_t *a, double *out, size_t n)
{
    assert_true(json_is_array(a));
    assert_int_equal(json_array_size(a), n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        assert_true(json_is_number(v));
        out[i] = json_number_value(v);
    }
}

#endif
