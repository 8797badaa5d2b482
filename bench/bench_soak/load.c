/* bench_soak: the seed models and one loop of the mix of scenarios (main.c's
 * comment); each loop is a thread on its own connection. */

#include "bench/bench_soak/soak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/support/clock.h"

#define REQUEST_SECONDS 60.0              /* bound on one request */
#define FIT_SECONDS 120.0                 /* bound on one fit request */
#define JOB_SECONDS 120.0                 /* bound on polling one job */
#define N_SEED 5

/* ---- one loop ------------------------------------------------------------ */

static unsigned long long rng_next(worker *w)
{
    /* xorshift64* */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ull;
}

static double rng_unit(worker *w)
{
    return (double)(rng_next(w) >> 11) * (1.0 / 9007199254740992.0);
}

static int rng_int(worker *w, int n)
{
    return (int)(rng_next(w) % (unsigned long long)n);
}

static const char *const seed_names[N_SEED] = {"soak-exact", "soak-ssgp", "soak-sgpr",
                                               "soak-msrfr", "soak-renyi"};

/* One request of kind K; the status, or -1 without an answer (then an error).
 * A status outside EXPECT is an error. */
static int request(worker *w, int k, const char *method, const char *path, const char *body,
                   int expect, double max_s, hresp *r)
{
    char why[200];
    double t = gp_bench_seconds();
    int rc = http_request(&w->conn, method, path, body, max_s, r, why, sizeof why);
    double ms = (gp_bench_seconds() - t) * 1000.0;
    atomic_fetch_add(&g_requests, 1);
    if (rc != 0) {
        kstats_add(&w->stats[k], -1, ms);
        note_error("%s %s: %s", method, path, why);
        return -1;
    }
    kstats_add(&w->stats[k], r->status, ms);
    int ok = (status_bit(r->status) & expect) != 0;
    if (ok && r->status == 422 && strstr(r->body, "\"unsupported\"") == NULL)
        ok = 0;
    if (!ok)
        note_error("%s %s: status %d: %.160s", method, path, r->status, r->body);
    return r->status;
}

/* Appends "[[x],...]" of m points in [-1, 6] to w->body at *len. */
static void put_points(worker *w, size_t *len, int m)
{
    *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "[");
    for (int i = 0; i < m && *len < BODY_CAP - 64; i++)
        *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "%s[%.5f]", i ? "," : "",
                                 -1.0 + 7.0 * rng_unit(w));
    *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "]");
}

/* A fit body for NAME: n points of a noisy sine on [0, 5] (flat X or rows), a
 * small configuration of a method drawn at random; async when asked. */
static void fit_body(worker *w, const char *name, int n, int async, int method)
{
    static const char *const exact_kernels[] = {"rbf", "matern52", "matern32"};
    static const char *const ssgp_freq[] = {"mc", "qmc", "orf"};
    char opts[200];
    switch (method) {
    case 0:
        snprintf(opts, sizeof opts, "\"method\":\"exact\",\"kernel\":{\"type\":\"%s\"}",
                 exact_kernels[rng_int(w, 3)]);
        break;
    case 1:
        snprintf(opts, sizeof opts,
                 "\"method\":\"ssgp\",\"options\":{\"features\":%d,\"frequencies\":\"%s\"}",
                 10 + rng_int(w, 20), ssgp_freq[rng_int(w, 3)]);
        break;
    case 2:
        snprintf(opts, sizeof opts, "\"method\":\"sgpr\",\"options\":{\"inducing\":%d}",
                 4 + rng_int(w, 6));
        break;
    case 3:
        snprintf(opts, sizeof opts,
                 "\"method\":\"msrfr\",\"options\":{\"particles\":2,\"features\":10,"
                 "\"iterations\":%d}",
                 20 + rng_int(w, 40));
        break;
    default:
        snprintf(opts, sizeof opts, "\"method\":\"renyi\",\"options\":{\"inducing\":%d}",
                 4 + rng_int(w, 4));
        break;
    }
    int rows = rng_int(w, 2);
    size_t len = (size_t)snprintf(w->body, BODY_CAP, "{\"name\":\"%s\",%s,\"seed\":%d%s,\"X\":[",
                                  name, opts, rng_int(w, 1000), async ? ",\"async\":true" : "");
    double x[512];
    if (n > 512)
        n = 512;
    for (int i = 0; i < n; i++) {
        x[i] = 5.0 * ((double)i + rng_unit(w)) / (double)n;
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, rows ? "%s[%.5f]" : "%s%.5f",
                                i ? "," : "", x[i]);
    }
    len += (size_t)snprintf(w->body + len, BODY_CAP - len, "],\"y\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, "%s%.5f", i ? "," : "",
                                sin(x[i]) + 0.1 * (rng_unit(w) - 0.5));
    snprintf(w->body + len, BODY_CAP - len, "]}");
}

/* The id of "/v1/jobs/ID" in a Location header into path; 0 if found. */
static int job_path(const hresp *r, char *path, size_t cap)
{
    if (strncmp(r->location, "/v1/jobs/", 9) != 0 || strlen(r->location) >= cap)
        return -1;
    snprintf(path, cap, "%s", r->location);
    return 0;
}

/* The job's "status" (the first in the answer) into st. */
static void job_status(const hresp *r, char *st, size_t cap)
{
    st[0] = '\0';
    const char *p = strstr(r->body, "\"status\"");
    if (p == NULL)
        return;
    p = strchr(p + 8, '"');
    if (p == NULL)
        return;
    p++;
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < cap)
        n++;
    memcpy(st, p, n);
    st[n] = '\0';
}

/* Polls JOBPATH until the job ends; its final status into st ("" on failure). */
static void poll_job(worker *w, const char *jobpath, char *st, size_t cap)
{
    double until = gp_bench_seconds() + JOB_SECONDS;
    st[0] = '\0';
    for (int i = 0; i < 100000 && gp_bench_seconds() < until; i++) {
        hresp r;
        if (request(w, K_JOB_POLL, "GET", jobpath, NULL, E200, REQUEST_SECONDS, &r) != 200)
            return;
        job_status(&r, st, cap);
        if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
            strcmp(st, "cancelled") == 0)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    note_error("GET %s: job not finished after %.0f s (last status '%s')", jobpath, JOB_SECONDS,
               st);
    st[0] = '\0';
}

/* Predict on, delete, and check the absence of the throwaway model NAME. */
static void finish_model(worker *w, const char *name, int predict, int delete_expect)
{
    hresp r;
    char path[160];
    if (predict) {
        size_t len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 5));
        snprintf(w->body + len, BODY_CAP - len, "}");
        snprintf(path, sizeof path, "/v1/models/%s/predict", name);
        request(w, K_PREDICT_FITTED, "POST", path, w->body, E200, REQUEST_SECONDS, &r);
    }
    snprintf(path, sizeof path, "/v1/models/%s", name);
    request(w, K_DELETE, "DELETE", path, NULL, delete_expect, REQUEST_SECONDS, &r);
    request(w, K_GET_DELETED, "GET", path, NULL, E404, REQUEST_SECONDS, &r);
}

static void scenario_fit_sync(worker *w)
{
    char name[64];
    hresp r;
    snprintf(name, sizeof name, "soak-L%d-%ld", w->id, w->fits++);
    int method = rng_int(w, 5);
    fit_body(w, name, 15 + rng_int(w, 40), 0, method);
    if (request(w, K_FIT_SYNC, "POST", "/v1/models", w->body, E201, FIT_SECONDS, &r) != 201)
        return;
    if (rng_int(w, 2) == 0) {
        /* a second version under the same name, then read it */
        fit_body(w, name, 15 + rng_int(w, 40), 0, method);
        if (request(w, K_FIT_SYNC, "POST", "/v1/models", w->body, E201, FIT_SECONDS, &r) == 201) {
            char path[160];
            snprintf(path, sizeof path, "/v1/models/%s/versions/2", name);
            request(w, K_GET_VERSION, "GET", path, NULL, E200, REQUEST_SECONDS, &r);
        }
    }
    finish_model(w, name, 1, E204);
}

static void scenario_fit_async(worker *w, int cancel)
{
    char name[64], jobpath[160], st[32];
    hresp r;
    snprintf(name, sizeof name, "soak-L%d-%ld", w->id, w->fits++);
    /* the cancelled fits are larger (exact on 300 points: ~0.3 s) so that the
     * cancel often finds them queued or running */
    if (cancel)
        fit_body(w, name, 250 + rng_int(w, 100), 1, 0);
    else
        fit_body(w, name, 15 + rng_int(w, 40), 1, rng_int(w, 5));
    if (request(w, K_FIT_ASYNC, "POST", "/v1/models", w->body, E202, FIT_SECONDS, &r) != 202)
        return;
    if (job_path(&r, jobpath, sizeof jobpath) != 0) {
        note_error("POST /v1/models (async): 202 without a Location /v1/jobs/ID");
        return;
    }
    if (cancel)
        request(w, K_JOB_CANCEL, "DELETE", jobpath, NULL, E202 | E200 | E204 | E409,
                REQUEST_SECONDS, &r);
    poll_job(w, jobpath, st, sizeof st);
    if (st[0] == '\0')
        return;
    if (strcmp(st, "failed") == 0) {
        note_error("GET %s: the job failed", jobpath);
        finish_model(w, name, 0, E204 | E404);
        return;
    }
    if (strcmp(st, "cancelled") == 0) {
        if (!cancel)
            note_error("GET %s: a job nobody cancelled was cancelled", jobpath);
        finish_model(w, name, 0, E404);
        return;
    }
    finish_model(w, name, 1, E204);
}

static void scenario(worker *w)
{
    hresp r;
    size_t len;
    int s = rng_int(w, N_SEED);
    const char *model = seed_names[s];
    int pick = rng_int(w, 100);
    /* the mix, in percent of scenarios */
    if (pick < 24) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 20));
        snprintf(w->body + len, BODY_CAP - len, "%s}",
                 rng_int(w, 2) ? ",\"include_noise\":false" : "");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_PREDICT, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 34) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 10));
        snprintf(w->body + len, BODY_CAP - len,
                 ",\"full_covariance\":true,\"quantiles\":[0.05,0.5,0.95],"
                 "\"include_noise\":%s%s}",
                 rng_int(w, 2) ? "true" : "false",
                 strcmp(model, "soak-msrfr") == 0 ? ",\"components\":true" : "");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_PREDICT_FULL, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 44) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 10));
        snprintf(w->body + len, BODY_CAP - len, ",\"n_samples\":%d,\"seed\":%d}",
                 1 + rng_int(w, 5), rng_int(w, 100000));
        snprintf(w->path, sizeof w->path, "/v1/models/%s/sample", model);
        request(w, K_SAMPLE, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 49) {
        request(w, K_LIST, "GET", "/v1/models", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 54) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s", model);
        request(w, K_GET_MODEL, "GET", w->path, NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 57) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s/versions/1", model);
        request(w, K_GET_VERSION, "GET", w->path, NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 62) {
        int m = 1 + rng_int(w, 3);
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, m);
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, ",\"y\":[");
        for (int i = 0; i < m; i++)
            len += (size_t)snprintf(w->body + len, BODY_CAP - len, "%s%.4f", i ? "," : "",
                                    rng_unit(w) - 0.5);
        snprintf(w->body + len, BODY_CAP - len, "]}");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/observe", model);
        request(w, K_OBSERVE, "POST", w->path, w->body, E200 | E201 | E202 | E204 | E422U,
                REQUEST_SECONDS, &r);
    } else if (pick < 64) {
        request(w, K_METRICS, "GET", "/metrics", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 66) {
        request(w, K_HEALTHZ, "GET", "/healthz", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 67) {
        request(w, K_READYZ, "GET", "/readyz", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 68) {
        request(w, K_METHODS, "GET", "/v1/methods", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 70) {
        request(w, K_MISSING, "POST", "/v1/models/soak-missing/predict", "{\"X\":[[1.0]]}", E404,
                REQUEST_SECONDS, &r);
    } else if (pick < 72) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_BAD_JSON, "POST", w->path, "{\"X\":[[1.0],", E400, REQUEST_SECONDS, &r);
    } else if (pick < 84) {
        scenario_fit_sync(w);
    } else if (pick < 94) {
        scenario_fit_async(w, 0);
    } else {
        scenario_fit_async(w, 1);
    }
}

void *worker_main(void *arg)
{
    worker *w = arg;
    for (long i = 0; i < 1000000000L && !atomic_load(&g_stop); i++) {
        if (rng_int(w, 20) == 0)
            hconn_close(&w->conn); /* the next request opens a fresh connection */
        scenario(w);
        if (g_think_ms > 0.0) {
            struct timespec ts = {(time_t)(g_think_ms / 1000.0),
                                  (long)(fmod(g_think_ms, 1000.0) * 1e6)};
            nanosleep(&ts, NULL);
        }
    }
    hconn_close(&w->conn);
    return NULL;
}

/* ---- seeds --------------------------------------------------------------- */

int fit_seeds(void)
{
    static const char *const opts[N_SEED] = {
        "\"method\":\"exact\",\"kernel\":{\"type\":\"rbf\",\"ard\":true}",
        "\"method\":\"ssgp\",\"options\":{\"features\":50,\"frequencies\":\"qmc\"}",
        "\"method\":\"sgpr\",\"options\":{\"inducing\":10}",
        "\"method\":\"msrfr\",\"options\":{\"particles\":4,\"features\":20,\"iterations\":200}",
        "\"method\":\"renyi\",\"options\":{\"inducing\":10}",
    };
    static worker w; /* its buffers, for the seed requests */
    w.conn.fd = -1;
    w.conn.cap = 65536;
    w.conn.buf = malloc(w.conn.cap);
    if (w.conn.buf == NULL)
        return -1;
    int rc = 0;
    for (int s = 0; s < N_SEED && rc == 0; s++) {
        size_t len = (size_t)snprintf(w.body, BODY_CAP, "{\"name\":\"%s\",%s,\"seed\":1,\"X\":[",
                                      seed_names[s], opts[s]);
        for (int i = 0; i < 40; i++)
            len += (size_t)snprintf(w.body + len, BODY_CAP - len, "%s[%.3f]", i ? "," : "",
                                    0.125 * i);
        len += (size_t)snprintf(w.body + len, BODY_CAP - len, "],\"y\":[");
        for (int i = 0; i < 40; i++)
            len += (size_t)snprintf(w.body + len, BODY_CAP - len, "%s%.6f", i ? "," : "",
                                    sin(0.125 * i) + 0.05 * sin(17.0 * 0.125 * i));
        snprintf(w.body + len, BODY_CAP - len, "]}");
        hresp r;
        char why[200];
        if (http_request(&w.conn, "POST", "/v1/models", w.body, FIT_SECONDS, &r, why,
                         sizeof why) != 0) {
            fprintf(stderr, "bench_soak: seed fit %s: %s\n", seed_names[s], why);
            rc = -1;
        } else if (r.status != 201) {
            fprintf(stderr, "bench_soak: seed fit %s: status %d: %.300s\n", seed_names[s],
                    r.status, r.body);
            rc = -1;
        }
    }
    hconn_close(&w.conn);
    free(w.conn.buf);
    return rc;
}
