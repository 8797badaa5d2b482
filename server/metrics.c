#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/blas_core.h"
#include "server/keys.h"
#include "server/ratelimit.h"

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_BUCKETS (sizeof buckets / sizeof buckets[0])
#define N_ROUTES (GP_ROUTE_COUNT + 1) /* + unmatched */

static const char *const method_labels[] = {"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD",
                                            "OPTIONS", "other"};
#define N_METHODS (sizeof method_labels / sizeof method_labels[0])

typedef struct req_counter {
    int route, method, status;
    uint64_t count;
} req_counter;

typedef struct histogram {
    uint64_t bucket[N_BUCKETS]; /* non-cumulative; summed when rendered */
    uint64_t count;
    double sum;
} histogram;

/* Requests refused by a rate limit, by key name and limit (server/ratelimit.h).
 * Names are bounded by the keys files seen; past MAX_LIMITED names (a file
 * of thousands of keys) the rest count under key "-", like auth-off clients. */
#define MAX_LIMITED 1024
typedef struct limited_counter {
    char key[GP_KEY_NAME_MAX];
    uint64_t count[GP_RATE_KINDS];
} limited_counter;

typedef struct fit_counter {
    char method[32];
    uint64_t succeeded, failed, cancelled;
    double seconds;
} fit_counter;

struct gp_metrics {
    pthread_mutex_t lock;
    req_counter *reqs;
    size_t n_reqs, cap_reqs;
    histogram hist[N_ROUTES];
    fit_counter *fits;
    size_t n_fits, cap_fits;
    limited_counter *limited;
    size_t n_limited, cap_limited;
};

gp_metrics *gp_metrics_new(void)
{
    gp_metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void gp_metrics_free(gp_metrics *m)
{
    if (m == NULL)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->reqs);
    free(m->fits);
    free(m->limited);
    free(m);
}

static int route_index(gp_route_id r)
{
    return r >= 0 && r < GP_ROUTE_COUNT ? (int)r : GP_ROUTE_COUNT;
}

static int method_index(const char *method)
{
    for (size_t i = 0; method && i + 1 < N_METHODS; i++)
        if (strcmp(method, method_labels[i]) == 0)
            return (int)i;
    return (int)N_METHODS - 1;
}

void gp_metrics_request(gp_metrics *m, gp_route_id route, const char *method, int status,
                        double seconds)
{
    if (m == NULL)
        return;
    int ri = route_index(route), mi = method_index(method);
    if (status < 0 || status > 999)
        status = 0;
    pthread_mutex_lock(&m->lock);
    size_t i;
    for (i = 0; i < m->n_reqs; i++)
        if (m->reqs[i].route == ri && m->reqs[i].method == mi && m->reqs[i].status == status)
            break;
    if (i == m->n_reqs) {
        if (m->n_reqs == m->cap_reqs) {
            size_t cap = m->cap_reqs ? 2 * m->cap_reqs : 32;
            req_counter *r = realloc(m->reqs, cap * sizeof *r);
            if (r) {
                m->reqs = r;
                m->cap_reqs = cap;
            }
        }
        if (m->n_reqs < m->cap_reqs)
            m->reqs[m->n_reqs++] = (req_counter){ri, mi, status, 0};
    }
    if (i < m->n_reqs)
        m->reqs[i].count++;
    histogram *h = &m->hist[ri];
    for (size_t b = 0; b < N_BUCKETS; b++)
        if (seconds <= buckets[b]) {
            h->bucket[b]++;
            break;
        }
    h->count++;
    h->sum += seconds > 0 ? seconds : 0;
    pthread_mutex_unlock(&m->lock);
}

void gp_metrics_fit(gp_metrics *m, const char *method, const char *outcome, double seconds)
{
    if (m == NULL)
        return;
    char name[32];
    snprintf(name, sizeof name, "%s", method ? method : "unknown");
    pthread_mutex_lock(&m->lock);
    size_t i;
    for (i = 0; i < m->n_fits; i++)
        if (strcmp(m->fits[i].method, name) == 0)
            break;
    if (i == m->n_fits) {
        if (m->n_fits == m->cap_fits) {
            size_t cap = m->cap_fits ? 2 * m->cap_fits : 16;
            fit_counter *f = realloc(m->fits, cap * sizeof *f);
            if (f) {
                m->fits = f;
                m->cap_fits = cap;
            }
        }
        if (m->n_fits < m->cap_fits) {
            memset(&m->fits[m->n_fits], 0, sizeof m->fits[0]);
            memcpy(m->fits[m->n_fits].method, name, sizeof name);
            m->n_fits++;
        }
    }
    if (i < m->n_fits) {
        fit_counter *f = &m->fits[i];
        if (strcmp(outcome, "succeeded") == 0)
            f->succeeded++;
        else if (strcmp(outcome, "cancelled") == 0)
            f->cancelled++;
        else
            f->failed++;
        f->seconds += seconds > 0 ? seconds : 0;
    }
    pthread_mutex_unlock(&m->lock);
}

/* The counter of key (grown on first use); NULL when out of room. Under m->lock. */
static limited_counter *limited_of(gp_metrics *m, const char *key)
{
    for (size_t i = 0; i < m->n_limited; i++)
        if (strcmp(m->limited[i].key, key) == 0)
            return &m->limited[i];
    if (m->n_limited >= MAX_LIMITED)
        return strcmp(key, "-") == 0 ? NULL : limited_of(m, "-");
    if (m->n_limited == m->cap_limited) {
        size_t cap = m->cap_limited ? 2 * m->cap_limited : 8;
        limited_counter *l = realloc(m->limited, cap * sizeof *l);
        if (l == NULL)
            return NULL;
        m->limited = l;
        m->cap_limited = cap;
    }
    limited_counter *c = &m->limited[m->n_limited++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    return c;
}

void gp_metrics_rate_limited(gp_metrics *m, const char *key, int kind)
{
    if (m == NULL || kind < 0 || kind >= GP_RATE_KINDS)
        return;
    pthread_mutex_lock(&m->lock);
    const char *k = key && key[0] ? key : "-";
    limited_counter *c = limited_of(m, k);
    if (c)
        c->count[kind]++;
    pthread_mutex_unlock(&m->lock);
}

typedef struct out_buf {
    char *data;
    size_t len, cap;
    int failed;
} out_buf;

static void emit(out_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(out_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)n;
        char *d = realloc(b->data, cap);
        if (d == NULL) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

/* Prometheus floats: shortest round-trip-ish text. */
static void fmt_double(double v, char *buf, size_t size)
{
    snprintf(buf, size, "%.17g", v);
    for (int p = 6; p <= 17; p++) {
        char t[40];
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v) {
            snprintf(buf, size, "%s", t);
            return;
        }
    }
}

char *gp_metrics_render(gp_metrics *m, const gp_metrics_gauges *g, size_t *len)
{
    out_buf b = {malloc(8192), 0, 8192, 0};
    if (b.data == NULL)
        return NULL;
    char num[40];
    pthread_mutex_lock(&m->lock);

    emit(&b, "# HELP gpserve_http_requests_total HTTP requests answered, by route pattern, "
             "method and status.\n# TYPE gpserve_http_requests_total counter\n");
    for (size_t i = 0; i < m->n_reqs; i++) {
        const req_counter *r = &m->reqs[i];
        emit(&b, "gpserve_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
             gp_route_pattern(r->route < GP_ROUTE_COUNT ? (gp_route_id)r->route : GP_ROUTE_NONE),
             method_labels[r->method], r->status, (unsigned long long)r->count);
    }

    emit(&b, "# HELP gpserve_http_request_duration_seconds Time from the request line to the "
             "response being queued.\n# TYPE gpserve_http_request_duration_seconds histogram\n");
    for (int ri = 0; ri < (int)N_ROUTES; ri++) {
        const histogram *h = &m->hist[ri];
        if (h->count == 0)
            continue;
        const char *route =
            gp_route_pattern(ri < GP_ROUTE_COUNT ? (gp_route_id)ri : GP_ROUTE_NONE);
        uint64_t cum = 0;
        for (size_t k = 0; k < N_BUCKETS; k++) {
            cum += h->bucket[k];
            fmt_double(buckets[k], num, sizeof num);
            emit(&b, "gpserve_http_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %llu\n",
                 route, num, (unsigned long long)cum);
        }
        emit(&b, "gpserve_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
             route, (unsigned long long)h->count);
        fmt_double(h->sum, num, sizeof num);
        emit(&b, "gpserve_http_request_duration_seconds_sum{route=\"%s\"} %s\n", route, num);
        emit(&b, "gpserve_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route,
             (unsigned long long)h->count);
    }

    emit(&b, "# HELP gpserve_fits_total Fits finished, by method and outcome.\n"
             "# TYPE gpserve_fits_total counter\n");
    for (size_t i = 0; i < m->n_fits; i++) {
        const fit_counter *f = &m->fits[i];
        emit(&b, "gpserve_fits_total{method=\"%s\",outcome=\"succeeded\"} %llu\n", f->method,
             (unsigned long long)f->succeeded);
        emit(&b, "gpserve_fits_total{method=\"%s\",outcome=\"failed\"} %llu\n", f->method,
             (unsigned long long)f->failed);
        emit(&b, "gpserve_fits_total{method=\"%s\",outcome=\"cancelled\"} %llu\n", f->method,
             (unsigned long long)f->cancelled);
    }
    emit(&b, "# HELP gpserve_fit_seconds_total Seconds spent fitting, by method.\n"
             "# TYPE gpserve_fit_seconds_total counter\n");
    for (size_t i = 0; i < m->n_fits; i++) {
        fmt_double(m->fits[i].seconds, num, sizeof num);
        emit(&b, "gpserve_fit_seconds_total{method=\"%s\"} %s\n", m->fits[i].method, num);
    }
    emit(&b, "# HELP gpserve_rate_limited_total Requests refused 429 by a rate limit, by key "
             "name (\"-\": a client address when authentication is off) and limit (rps, "
             "fits_per_minute).\n# TYPE gpserve_rate_limited_total counter\n");
    for (size_t i = 0; i < m->n_limited; i++)
        for (int k = 0; k < GP_RATE_KINDS; k++)
            emit(&b, "gpserve_rate_limited_total{key=\"%s\",limit=\"%s\"} %llu\n",
                 m->limited[i].key, gp_rate_kind_name(k),
                 (unsigned long long)m->limited[i].count[k]);
    pthread_mutex_unlock(&m->lock);

    emit(&b, "# HELP gpserve_jobs_queued Fit jobs waiting for a worker.\n"
             "# TYPE gpserve_jobs_queued gauge\ngpserve_jobs_queued %zu\n",
         g->jobs_queued);
    emit(&b, "# HELP gpserve_jobs_running Fit jobs running.\n"
             "# TYPE gpserve_jobs_running gauge\ngpserve_jobs_running %zu\n",
         g->jobs_running);
    emit(&b, "# HELP gpserve_models_loaded Fitted models held in the model cache.\n"
             "# TYPE gpserve_models_loaded gauge\ngpserve_models_loaded %zu\n",
         g->models_loaded);
    emit(&b, "# HELP gpserve_models_not_finite Stored versions found non-finite when loaded "
             "(poisoned before the daemon checked what enters a model): refused, not served.\n"
             "# TYPE gpserve_models_not_finite gauge\ngpserve_models_not_finite %zu\n",
         g->models_not_finite);
    emit(&b, "# HELP gpserve_blas_core_info The OpenBLAS core (kernel set) the daemon runs "
             "(docs/design/numerics.md, \"The OpenBLAS core\").\n"
             "# TYPE gpserve_blas_core_info gauge\ngpserve_blas_core_info{core=\"%s\"} 1\n",
         gp_blas_core_name());
    /* The counters and gauges sampled from elsewhere: one line each. */
    const struct {
        const char *name, *type, *help;
        uint64_t value;
    } sampled[] = {
        {"gpserve_jitter_escalations_total", "counter",
         "Fits whose cached factor needed jitter.", g->jitter_escalations},
        {"gpserve_variance_clamps_total", "counter", "Predictive variances clamped at zero.",
         g->variance_clamps},
        {"gpserve_batches_total", "counter",
         "Batched runs of predict or sample requests (dynamic batching; 0 with "
         "--batch-delay-us 0).",
         g->batches},
        {"gpserve_batched_requests_total", "counter",
         "Predict and sample requests answered in batches.", g->batched_requests},
        {"gpserve_batched_points_total", "counter", "Points predicted in batches.",
         g->batched_points},
        {"gpserve_batch_max_requests", "gauge", "The most requests one batch has answered.",
         g->batch_max_requests},
    };
    for (size_t k = 0; k < sizeof sampled / sizeof sampled[0]; k++)
        emit(&b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", sampled[k].name, sampled[k].help,
             sampled[k].name, sampled[k].type, sampled[k].name,
             (unsigned long long)sampled[k].value);
    if (g->http_threads)
        emit(&b, "# HELP gpserve_http_thread_connections Open connections held by each HTTP "
                 "thread (the acceptor hands a new one to the thread holding the fewest).\n"
                 "# TYPE gpserve_http_thread_connections gauge\n");
    for (size_t t = 0; t < g->http_threads; t++)
        emit(&b, "gpserve_http_thread_connections{thread=\"%zu\"} %zu\n", t,
             g->thread_connections[t]);
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    *len = b.len;
    return b.data;
}
