/* See fit.h. */
#include "bench/support/fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/clock.h"
#include "core/base/error.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"

/* gp_model_fit of m on train (the protocol of fit.h); the wall time of the
 * fit alone goes to *seconds. */
gp_bench_fit_setup gp_bench_fit_default(void)
{
    gp_bench_fit_setup su;
    memset(&su, 0, sizeof su);
    su.standardize = 1;
    su.likelihood = GP_LIK_GAUSSIAN;
    su.kernel = GP_KERNEL_RBF;
    su.ard = 1;
    return su;
}

int gp_bench_fit_timed(const gp_method *m, const gp_option_value *opts, size_t n_opts,
                       const gp_dataset *train, uint64_t seed, gp_model **model, double *seconds,
                       gp_error *err)
{
    gp_bench_fit_setup su = gp_bench_fit_default();
    return gp_bench_fit_timed_with(m, opts, n_opts, train, seed, &su, model, seconds, err);
}

/* The kernel of su: every lengthscale at su->lengthscale when it is given
 * (e.g. a median heuristic), else at the kernel's default start. */
static int setup_kernel(const gp_bench_fit_setup *su, const gp_dataset *train, uint64_t seed,
                        gp_kernel **k, gp_error *err)
{
    size_t d = train->d;
    int rc = gp_kernel_leaf(k, su->kernel, d, su->ard, NULL, 0, err);
    double ell = su->median_rows > 0
                     ? gp_bench_median_heuristic(train->X, train->n, d, su->median_rows, seed)
                     : su->lengthscale;
    for (size_t j = 0; rc == GP_OK && ell > 0.0 && j < (su->ard ? d : 1); j++)
        (*k)->log_lengthscale[j] = log(ell);
    return rc;
}

int gp_bench_fit_timed_with(const gp_method *m, const gp_option_value *opts, size_t n_opts,
                            const gp_dataset *train, uint64_t seed, const gp_bench_fit_setup *su,
                            gp_model **model, double *seconds, gp_error *err)
{
    gp_kernel *k = NULL;
    gp_hyper_spec *hs = NULL;
    int rc = setup_kernel(su, train, seed, &k, err);
    if (rc == GP_OK && (su->default_priors || su->noise_lo > 0.0) &&
        (rc = gp_hyper_spec_new(&hs, k, err)) == GP_OK) {
        if (su->default_priors > 0)
            gp_hyper_default_priors(hs, k);
        if (su->noise_lo > 0.0) {
            hs->entry[hs->n_kernel].lo = su->noise_lo;
            hs->entry[hs->n_kernel].hi = su->noise_hi;
        }
    }
    if (rc == GP_OK)
        rc = gp_options_validate(m, opts, n_opts, err);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = train->X;
    req.y = train->y;
    req.n = train->n;
    req.d = train->d;
    req.kernel = k;
    req.hyper = hs;
    req.standardize = su->standardize;
    req.noise_given = su->noise_given;
    req.noise_fixed = su->noise_fixed;
    req.noise_variance = su->noise_variance;
    req.likelihood = su->likelihood;
    req.mean = su->mean;
    req.seed = seed;
    req.options = n_opts > 0 ? opts : NULL;
    req.n_options = n_opts;
    double t0 = gp_bench_seconds();
    if (rc == GP_OK)
        rc = gp_model_fit(m, &req, model, err);
    *seconds = gp_bench_seconds() - t0;
    gp_kernel_free(k);
    gp_hyper_spec_free(hs);
    return rc;
}

int gp_bench_fit_score(const char *name, const gp_option_value *opts, size_t n_opts,
                       const gp_dataset *train, const gp_dataset *test, uint64_t seed,
                       gp_model **model, gp_bench_run *r)
{
    memset(r, 0, sizeof *r);
    r->seconds = NAN;
    if (model != NULL)
        *model = NULL;
    const gp_method *m = gp_method_find(name);
    if (m == NULL) {
        r->unavailable = 1;
        snprintf(r->error, sizeof r->error, "%s: not available in this build", name);
        return 0;
    }
    gp_error err;
    gp_error_clear(&err);
    gp_model *fitted = NULL;
    int rc = gp_bench_fit_timed(m, opts, n_opts, train, seed, &fitted, &r->seconds, &err);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "fit failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return 0;
    }
    rc = gp_test_scores_compute(fitted, test, &r->scores, &err);
    if (rc != GP_OK)
        snprintf(r->error, sizeof r->error, "predict failed: %s (%s)", gp_status_name(rc),
                 err.message);
    r->ok = rc == GP_OK;
    if (model != NULL)
        *model = fitted;
    else
        gp_model_free(fitted);
    return r->ok;
}

/* A number option's text: a number, or one of the spec's keywords. */
static int number_from_text(const gp_option_spec *s, const char *text, gp_option_value *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end != text && *end == '\0' && isfinite(v)) {
        out->number = v;
        return 0;
    }
    /* choices lists the keywords as "a|b" (model.h); a plain substring test
     * would accept "a|b" itself, so match whole entries */
    for (const char *p = s->choices; p != NULL && *p != '\0';) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (strlen(text) == n && strncmp(p, text, n) == 0) {
            out->number = NAN;
            out->string = text;
            return 0;
        }
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

int gp_bench_option_from_text(const gp_method *m, const char *name, const char *text,
                              gp_option_value *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    const gp_option_spec *s = gp_method_option_spec(m, name);
    if (s == NULL) {
        snprintf(why, why_len, "%s has no option '%s'", m->name, name);
        return -1;
    }
    int rc = 0;
    switch (s->type) {
    case GP_OPTION_INT:
    case GP_OPTION_NUMBER:
        rc = number_from_text(s, text, out);
        break;
    case GP_OPTION_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
            out->number = 1.0;
        else if (strcmp(text, "false") != 0 && strcmp(text, "0") != 0)
            rc = -1;
        break;
    case GP_OPTION_ENUM:
        out->string = text;
        break;
    default:
        snprintf(why, why_len, "option '%s' takes a JSON object: not settable here", name);
        return -1;
    }
    if (rc != 0)
        snprintf(why, why_len, "option '%s': cannot read '%s'", name, text);
    return rc;
}

void gp_bench_info_text(const gp_model *model, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < model->diag.n_info && used < len; i++) {
        const gp_info_item *it = &model->diag.info[i];
        const char *sep = i > 0 ? ", " : "";
        int w = it->string != NULL
                    ? snprintf(buf + used, len - used, "%s%s %s", sep, it->key, it->string)
                    : snprintf(buf + used, len - used, "%s%s %.6g", sep, it->key, it->number);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

double gp_bench_info_number(const gp_model *model, const char *key)
{
    for (size_t i = 0; i < model->diag.n_info; i++) {
        const gp_info_item *it = &model->diag.info[i];
        if (it->string == NULL && strcmp(it->key, key) == 0)
            return it->number;
    }
    return NAN;
}

void gp_bench_mean_std(const double *x, size_t n, double out[2])
{
    double s = 0.0, ss = 0.0;
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            s += x[i];
            c++;
        }
    out[0] = out[1] = NAN;
    if (c == 0)
        return;
    out[0] = s / (double)c;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            ss += (x[i] - out[0]) * (x[i] - out[0]);
    out[1] = sqrt(ss / (double)c);
}

static int compare_distance(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* See fit.h. */
double gp_bench_median_heuristic(const double *X, size_t n, size_t d, size_t max_rows,
                                 uint64_t seed)
{
    double *mean = malloc(d * sizeof *mean), *scale = malloc(d * sizeof *scale);
    size_t r = n < max_rows ? n : max_rows;
    size_t *rows = malloc(n * sizeof *rows);
    double *P = malloc(r * d * sizeof *P);
    size_t n_pairs = r * (r - 1) / 2;
    double *dist = malloc((n_pairs > 0 ? n_pairs : 1) * sizeof *dist);
    double med = 1.0;
    if (mean == NULL || scale == NULL || rows == NULL || P == NULL || dist == NULL || r < 2)
        goto done;
    gp_column_stats(X, n, d, mean, scale);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        rows[i] = i;
    for (size_t i = 0; i < r; i++) { /* partial Fisher-Yates */
        size_t j = i + (size_t)gp_rng_below(&rng, n - i);
        size_t t = rows[i];
        rows[i] = rows[j];
        rows[j] = t;
    }
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < d; j++)
            P[i * d + j] = (X[j * n + rows[i]] - mean[j]) / scale[j];
    size_t p = 0;
    for (size_t a = 0; a < r; a++)
        for (size_t b = a + 1; b < r; b++) {
            double s = 0.0;
            for (size_t j = 0; j < d; j++) {
                double e = P[a * d + j] - P[b * d + j];
                s += e * e;
            }
            dist[p++] = sqrt(s);
        }
    qsort(dist, n_pairs, sizeof *dist, compare_distance);
    med = n_pairs % 2 ? dist[n_pairs / 2] : 0.5 * (dist[n_pairs / 2 - 1] + dist[n_pairs / 2]);
    if (!(med > 0.0) || !isfinite(med))
        med = 1.0;
done:
    free(mean);
    free(scale);
    free(rows);
    free(P);
    free(dist);
    return med;
}
