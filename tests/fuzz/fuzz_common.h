/* Shared set-up of the libFuzzer targets in tests/fuzz/ (header-only: every
 * target is one .c file that includes it). `make fuzz` builds and runs them.
 *
 * fuzz_api_open() opens a gp_api on a database in a fresh temporary directory
 * (removed at exit) with small limits, so that no single input can ask for
 * hundreds of megabytes: the code paths of the limits are the same, only the
 * numbers are lower. */
#ifndef GP_FUZZ_COMMON_H
#define GP_FUZZ_COMMON_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "api/api.h"
#include "core/base/parallel.h"

/* Inputs above this are ignored (make fuzz also passes -max_len=65536). */
#define FUZZ_MAX_INPUT 65536

static char fuzz_dir[256];
static gp_api *fuzz_api;

static inline void fuzz_rm_dir(void)
{
    if (fuzz_api) {
        gp_api_close(fuzz_api);
        fuzz_api = NULL;
    }
    if (fuzz_dir[0] == '\0')
        return;
    DIR *d = opendir(fuzz_dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fuzz_dir);
    fuzz_dir[0] = '\0';
}

static inline void fuzz_die(const char *what, const gp_error *err)
{
    fprintf(stderr, "fuzz set-up: %s: %s (%s)\n", what, err ? err->message : "",
            err ? err->field : "");
    fuzz_rm_dir();
    exit(2);
}

static inline gp_api *fuzz_api_open(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gpserve-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(fuzz_dir) == NULL) {
        fuzz_dir[0] = '\0';
        fuzz_die("mkdtemp", NULL);
    }
    atexit(fuzz_rm_dir);
    /* One thread for our own loops: the fuzzer runs one input at a time. */
    gp_parallel_set_threads(1);
    char db[320];
    snprintf(db, sizeof db, "%s/fuzz.db", fuzz_dir);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.max_train_points = 2000;
    cfg.max_points = 20000;
    cfg.max_covariance_points = 300;
    cfg.max_samples = 1000;
    cfg.max_sample_values = 100000;
    cfg.model_cache = 4;
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_open(&cfg, &fuzz_api, &err) != 0)
        fuzz_die("gp_api_open", &err);
    return fuzz_api;
}

/* Fit a model once (set-up only, never from a fuzzed input); exits on failure. */
static inline void fuzz_fit(gp_api *api, const char *json)
{
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = json;
    req.body_len = strlen(json);
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_parse_fit(api, &req, &job, &err) != 0)
        fuzz_die("parse of the set-up fit", &err);
    gp_response res;
    memset(&res, 0, sizeof res);
    int rc = gp_api_run_fit(api, job, NULL, NULL, &res, NULL);
    gp_fit_job_free(job);
    if (rc != 0 || res.status != 201) {
        fprintf(stderr, "fuzz set-up: fit failed (%d): %.*s\n", res.status, (int)res.body_len,
                res.body ? res.body : "");
        gp_response_free(&res);
        fuzz_die("fit", NULL);
    }
    gp_response_free(&res);
}

/* The model the predict and sample targets use: "fz", version 1 with one
 * input column (12 points), version 2 with two (16 points). Bodies without
 * "version" use version 2; "version": 1 selects the other. */
static inline void fuzz_fit_models(gp_api *api)
{
    fuzz_fit(api, "{\"name\":\"fz\",\"method\":\"exact\",\"seed\":1,"
                  "\"options\":{\"max_iterations\":20},"
                  "\"X\":[0,0.5,1,1.5,2,2.5,3,3.5,4,4.5,5,5.5],"
                  "\"y\":[0.02,0.47,0.86,0.99,0.9,0.61,0.13,-0.36,-0.74,-0.98,-0.95,-0.7]}");
    fuzz_fit(api, "{\"name\":\"fz\",\"method\":\"exact\",\"seed\":2,"
                  "\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"matern52\",\"ard\":true},"
                  "{\"type\":\"linear\",\"active_dims\":[1]}]},"
                  "\"noise\":{\"variance\":0.05},\"options\":{\"max_iterations\":20},"
                  "\"X\":[[0,0],[0,1],[0,2],[0,3],[1,0],[1,1],[1,2],[1,3],"
                  "[2,0],[2,1],[2,2],[2,3],[3,0],[3,1],[3,2],[3,3]],"
                  "\"y\":[0,1,2,3,0.8,1.9,2.7,4.1,1.1,2.2,2.9,3.8,0.1,1.2,2.1,3.3]}");
}

/* The response of a handler must be a well-formed one: a status in the
 * catalogue's range, a body whose length is what it says, and (for
 * application/json) a body that is valid JSON (jansson checks UTF-8 too):
 * error messages echo parts of the request, so this checks their escaping. */
/* Whether an array anywhere in v holds a null: a number that was not finite
 * (the writer's last resort). Deliberate nulls (an rfgp mean in warm-up, an
 * unknown oracle rate) are never array elements. */
static inline int fuzz_null_in_array(const json_t *v, int in_array)
{
    if (json_is_null(v))
        return in_array;
    size_t i;
    const char *k;
    json_t *x;
    if (json_is_array(v))
        json_array_foreach(v, i, x) if (fuzz_null_in_array(x, 1)) return 1;
    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, x) if (fuzz_null_in_array(x, 0)) return 1;
    return 0;
}

static inline void fuzz_check_response(const gp_response *res)
{
    if (res->status < 200 || res->status > 599) {
        fprintf(stderr, "fuzz: response status %d out of range\n", res->status);
        abort();
    }
    if (getenv("FUZZ_VERBOSE")) /* seed triage: FUZZ_VERBOSE=1 build/fuzz/T -runs=0 DIR */
        fprintf(stderr, "fuzz: status %d: %.200s\n", res->status, res->body ? res->body : "");
    if (res->body == NULL)
        return;
    if (memchr(res->body, '\0', res->body_len) != NULL || res->body[res->body_len] != '\0') {
        fprintf(stderr, "fuzz: response body_len %zu does not match its text\n", res->body_len);
        abort();
    }
    if (res->content_type && strcmp(res->content_type, "application/json") == 0) {
        json_error_t je;
        json_t *v = json_loadb(res->body, res->body_len, 0, &je);
        if (v == NULL) {
            fprintf(stderr, "fuzz: response (status %d) is not valid JSON: %s at %d: %.300s\n",
                    res->status, je.text, je.position, res->body);
            abort();
        }
        /* nothing non-finite leaves the daemon (docs/design/numerics.md) */
        if (res->status < 300 && fuzz_null_in_array(v, 0)) {
            fprintf(stderr, "fuzz: a %d answer carries a null number: %.300s\n", res->status,
                    res->body);
            abort();
        }
        json_decref(v);
    }
}

/* A copy of exactly size bytes (NULL for an empty input), so that ASan sees
 * any read past the body. *failed is set when the allocation fails. */
static inline char *fuzz_copy(const uint8_t *data, size_t size, int *failed)
{
    char *copy = size ? malloc(size) : NULL;
    *failed = size && copy == NULL;
    if (copy)
        memcpy(copy, data, size);
    return copy;
}

/* One input through a model handler (predict or sample) against "fz". */
typedef void (*fuzz_model_handler)(gp_api *api, const char *name, const gp_request *req,
                                   gp_response *out);

/* A JSON body of size bytes through handler against the model `name` (an
 * exact-size copy, as fuzz_copy); the response is checked. Its status, or 0
 * when the copy could not be made. */
static inline int fuzz_call_json(fuzz_model_handler handler, const char *name, const char *data,
                                 size_t size)
{
    int failed;
    char *body = fuzz_copy((const uint8_t *)data, size, &failed);
    if (failed)
        return 0;
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = body;
    req.body_len = size;
    gp_response res;
    memset(&res, 0, sizeof res);
    handler(fuzz_api, name, &req, &res);
    fuzz_check_response(&res);
    int status = res.status;
    gp_response_free(&res);
    free(body);
    return status;
}

static inline int fuzz_model_input(fuzz_model_handler handler, const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    fuzz_call_json(handler, "fz", (const char *)data, size);
    return 0;
}

/* A fit body made from a template with one "%s" where the fuzzed JSON text
 * goes (text[0..len), which may hold anything: the result is then malformed
 * JSON, which is fine). Parsed; when run_it is set and it parses, the fit is
 * run (synchronously) and the version it made deleted again, so the store
 * does not grow. Every response is checked. */
static inline void fuzz_fit_template(const char *tmpl, const char *text, size_t len, int run_it,
                                     const char *name)
{
    const char *hole = strstr(tmpl, "%s");
    size_t head = (size_t)(hole - tmpl), tail = strlen(hole + 2);
    char *body = malloc(head + len + tail);
    if (body == NULL)
        return;
    memcpy(body, tmpl, head);
    memcpy(body + head, text, len);
    memcpy(body + head + len, hole + 2, tail);
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = body;
    req.body_len = head + len + tail;
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    gp_response res;
    memset(&res, 0, sizeof res);
    if (gp_api_parse_fit(fuzz_api, &req, &job, &err) != 0) {
        if (job != NULL || err.code == 0) {
            fprintf(stderr, "fuzz: rejected fit: code %d, job %p\n", err.code, (void *)job);
            abort();
        }
        gp_api_error(&err, &res);
    } else if (run_it) {
        gp_api_run_fit(fuzz_api, job, NULL, NULL, &res, NULL);
        gp_fit_job_free(job);
        if (res.status == 201) {
            gp_response del;
            memset(&del, 0, sizeof del);
            gp_api_delete_model(fuzz_api, name, NULL, &del);
            if (del.status != 204) {
                fprintf(stderr, "fuzz: delete of %s answered %d\n", name, del.status);
                abort();
            }
            gp_response_free(&del);
        }
    } else {
        gp_fit_job_free(job);
    }
    if (res.status != 0) /* 0: parsed, not run */
        fuzz_check_response(&res);
    gp_response_free(&res);
    free(body);
}

#endif
