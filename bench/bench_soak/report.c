/* bench_soak: the request kinds, their statistics (statuses, a latency
 * histogram) and the markdown report. */

#include "bench/bench_soak/soak.h"

#include <math.h>
#include <stdio.h>

/* ---- request kinds (rows of the report) ---------------------------------- */

static const struct {
    const char *label;
    const char *route;
} kinds[K_COUNT] = {
    [K_PREDICT] = {"predict", "POST /v1/models/{name}/predict"},
    [K_PREDICT_FULL] = {"predict, full_covariance + quantiles", "POST /v1/models/{name}/predict"},
    [K_SAMPLE] = {"sample", "POST /v1/models/{name}/sample"},
    [K_LIST] = {"list models", "GET /v1/models"},
    [K_GET_MODEL] = {"get model", "GET /v1/models/{name}"},
    [K_GET_VERSION] = {"get version", "GET /v1/models/{name}/versions/{v}"},
    [K_OBSERVE] = {"observe", "POST /v1/models/{name}/observe"},
    [K_FIT_SYNC] = {"fit, synchronous", "POST /v1/models"},
    [K_FIT_ASYNC] = {"fit, async", "POST /v1/models"},
    [K_JOB_POLL] = {"poll job", "GET /v1/jobs/{id}"},
    [K_JOB_CANCEL] = {"cancel job", "DELETE /v1/jobs/{id}"},
    [K_PREDICT_FITTED] = {"predict on a fresh fit", "POST /v1/models/{name}/predict"},
    [K_DELETE] = {"delete model", "DELETE /v1/models/{name}"},
    [K_GET_DELETED] = {"get deleted model", "GET /v1/models/{name}"},
    [K_METRICS] = {"metrics", "GET /metrics"},
    [K_HEALTHZ] = {"healthz", "GET /healthz"},
    [K_READYZ] = {"readyz", "GET /readyz"},
    [K_METHODS] = {"methods", "GET /v1/methods"},
    [K_MISSING] = {"predict, missing model", "POST /v1/models/{name}/predict"},
    [K_BAD_JSON] = {"predict, malformed JSON", "POST /v1/models/{name}/predict"},
};

int status_bit(int status)
{
    switch (status) {
    case 200: return E200;
    case 201: return E201;
    case 202: return E202;
    case 204: return E204;
    case 400: return E400;
    case 404: return E404;
    case 409: return E409;
    case 422: return E422U;
    default: return 0;
    }
}

/* ---- statistics ---------------------------------------------------------- */

void kstats_add(kstats *k, int status, double ms)
{
    if (status < 0) {
        k->failures++;
        return;
    }
    int slot = -1;
    for (int i = 0; i < NSTATUS && slot < 0; i++)
        if (k->status[i] == status || k->status[i] == 0)
            slot = i;
    if (slot < 0) {
        slot = NSTATUS - 1;
        status = -1;
    }
    k->status[slot] = k->status[slot] ? k->status[slot] : status;
    k->count[slot]++;
    k->n++;
    double us = ms * 1000.0;
    int b = us <= 1.0 ? 0 : (int)(16.0 * log2(us));
    if (b >= NBUCKET)
        b = NBUCKET - 1;
    k->hist[b]++;
    if (ms > k->max_ms)
        k->max_ms = ms;
}

void kstats_merge(kstats *into, const kstats *k)
{
    for (int i = 0; i < NSTATUS; i++) {
        if (k->status[i] == 0)
            continue;
        int slot = -1;
        for (int j = 0; j < NSTATUS && slot < 0; j++)
            if (into->status[j] == k->status[i] || into->status[j] == 0)
                slot = j;
        if (slot < 0)
            slot = NSTATUS - 1;
        if (into->status[slot] == 0)
            into->status[slot] = k->status[i];
        into->count[slot] += k->count[i];
    }
    into->failures += k->failures;
    into->n += k->n;
    for (int b = 0; b < NBUCKET; b++)
        into->hist[b] += k->hist[b];
    if (k->max_ms > into->max_ms)
        into->max_ms = k->max_ms;
}

/* The upper edge (ms) of the histogram bucket holding quantile q (nearest rank). */
static double kstats_quantile(const kstats *k, double q)
{
    if (k->n == 0)
        return 0.0;
    long rank = (long)ceil(q * (double)k->n);
    if (rank < 1)
        rank = 1;
    long seen = 0;
    for (int b = 0; b < NBUCKET; b++) {
        seen += k->hist[b];
        if (seen >= rank) {
            double ms = pow(2.0, (double)(b + 1) / 16.0) / 1000.0;
            return ms < k->max_ms ? ms : k->max_ms;
        }
    }
    return k->max_ms;
}

/* ---- report -------------------------------------------------------------- */

void print_requests(const kstats *total, double seconds, int loops)
{
    long n = 0, failures = 0;
    for (int k = 0; k < K_COUNT; k++) {
        n += total[k].n;
        failures += total[k].failures;
    }
    printf("## Requests\n\n");
    printf("%ld answered requests in %.0f s from %d loops (%.0f/s), %ld without an answer;\n", n,
           seconds, loops, (double)n / seconds, failures);
    printf("%ld keep-alive connections found closed and reopened. Latency from the client\n",
           atomic_load(&g_reconnects));
    printf("(request written to answer read), percentiles from a log histogram (within 4.5%%).\n\n");
    printf("| request | route | count | statuses | p50 ms | p99 ms | max ms |\n");
    printf("|---|---|---:|---|---:|---:|---:|\n");
    for (int k = 0; k < K_COUNT; k++) {
        const kstats *s = &total[k];
        char st[200];
        size_t l = 0;
        st[0] = '\0';
        for (int i = 0; i < NSTATUS; i++) {
            if (s->status[i] == 0)
                continue;
            if (s->status[i] < 0)
                l += (size_t)snprintf(st + l, sizeof st - l, "%sother: %ld", l ? ", " : "",
                                      s->count[i]);
            else
                l += (size_t)snprintf(st + l, sizeof st - l, "%s%d: %ld", l ? ", " : "",
                                      s->status[i], s->count[i]);
        }
        if (s->failures)
            snprintf(st + l, sizeof st - l, "%sno answer: %ld", l ? ", " : "", s->failures);
        printf("| %s | `%s` | %ld | %s | %.2f | %.2f | %.2f |\n", kinds[k].label, kinds[k].route,
               s->n + s->failures, st[0] ? st : "-", kstats_quantile(s, 0.5),
               kstats_quantile(s, 0.99), s->max_ms);
    }
    printf("\n");
}

double mean_rss(const sample *s, int n, double from, double to)
{
    double sum = 0.0;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (s[i].t >= from - 0.5 && s[i].t <= to + 0.5) {
            sum += (double)s[i].rss_kib;
            c++;
        }
    return c ? sum / c : 0.0;
}

/* Least-squares slope (KiB/min) of RSS (what = 0), RssAnon (1) or RssFile (2)
 * over the samples from t = from on; their count into *m. */
double rss_slope(const sample *s, int n, double from, int what, int *m)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    *m = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].t + 0.5 < from)
            continue;
        double x = s[i].t / 60.0;
        double y = (double)(what == 0 ? s[i].rss_kib : what == 1 ? s[i].anon_kib : s[i].file_kib);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        (*m)++;
    }
    double den = (double)*m * sxx - sx * sx;
    return *m >= 2 && den > 0 ? ((double)*m * sxy - sx * sy) / den : 0.0;
}
