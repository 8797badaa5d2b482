/* See validation.h. */
#include "core/model/validation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/rng.h"
#include "core/likelihood/softmax.h"
#include "core/linalg/linalg.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t gp_validation_fits(const gp_validation_spec *spec)
{
    return spec->folds ? spec->folds : 1;
}

/* Rows held out of n by a fraction: round(fraction n). */
static size_t held_out_rows(double fraction, size_t n)
{
    return (size_t)floor(fraction * (double)n + 0.5);
}

int gp_validation_check(const gp_validation_spec *spec, size_t n, gp_error *err)
{
    if (spec->folds) {
        if (spec->folds < 2 || spec->folds > n)
            return gp_error_set(err, GP_EINVAL, "validation.folds",
                                "validation.folds must be an integer from 2 to the rows (%zu)",
                                n);
        return GP_OK;
    }
    double f = spec->fraction;
    if (!(f > 0.0 && f < 1.0))
        return gp_error_set(err, GP_EINVAL, "validation.fraction",
                            "validation.fraction must be in (0, 1)");
    size_t t = held_out_rows(f, n);
    if (t < 1 || t + 1 > n)
        return gp_error_set(err, GP_EINVAL, "validation.fraction",
                            "validation.fraction %g of %zu rows holds out %zu: it must leave at "
                            "least one row on each side",
                            f, n, t);
    return GP_OK;
}

static int stratified(gp_likelihood lik)
{
    return lik == GP_LIK_BERNOULLI || lik == GP_LIK_SOFTMAX;
}

#define MAX_CLASSES 64

/* order (n) shuffled, then grouped by class (stable) when stratified;
 * count[c] the rows of class c. */
static void shuffled_order(const gp_validation_spec *spec, int strat, const double *y, size_t n,
                           size_t *order, size_t *tmp, size_t *count)
{
    gp_rng rng;
    gp_rng_seed(&rng, spec->seed);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gp_rng_below(&rng, i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    memset(count, 0, MAX_CLASSES * sizeof *count);
    if (!strat)
        return;
    for (size_t i = 0; i < n; i++)
        count[(size_t)y[i]]++;
    size_t start[MAX_CLASSES], s = 0;
    for (size_t c = 0; c < MAX_CLASSES; c++) {
        start[c] = s;
        s += count[c];
    }
    for (size_t i = 0; i < n; i++)
        tmp[start[(size_t)y[order[i]]]++] = order[i];
    memcpy(order, tmp, n * sizeof *order);
}

/* A hold-out part: round(fraction n_c) of each class (of every row when not
 * stratified), leaving a row of each class in training. */
static void hold_out(const gp_validation_spec *spec, int strat, const size_t *order,
                     const size_t *count, size_t n, size_t *part)
{
    for (size_t i = 0; i < n; i++)
        part[i] = 1;
    if (!strat) {
        size_t t = held_out_rows(spec->fraction, n);
        for (size_t i = 0; i < t; i++)
            part[order[i]] = 0;
        return;
    }
    size_t pos = 0, taken = 0;
    for (size_t c = 0; c < MAX_CLASSES; c++) {
        size_t t = held_out_rows(spec->fraction, count[c]);
        t = count[c] && t >= count[c] ? count[c] - 1 : t;
        for (size_t i = 0; i < t; i++)
            part[order[pos + i]] = 0;
        taken += t;
        pos += count[c];
    }
    if (taken == 0) /* a small fraction: one row of the first class with two */
        for (size_t c = 0, p = 0; c < MAX_CLASSES; p += count[c], c++)
            if (count[c] >= 2) {
                part[order[p]] = 0;
                break;
            }
}

int gp_validation_split(const gp_validation_spec *spec, gp_likelihood lik, const double *y,
                        size_t n, size_t *part, gp_error *err)
{
    int rc = gp_validation_check(spec, n, err);
    if (rc)
        return rc;
    int strat = stratified(lik);
    for (size_t i = 0; strat && i < n; i++)
        if (!(y[i] >= 0.0 && y[i] < MAX_CLASSES && y[i] == floor(y[i])))
            return gp_error_set(err, GP_EDATA, "y", "y[%zu] is not a class label", i);
    size_t *order = malloc(2 * (n ? n : 1) * sizeof *order);
    size_t count[MAX_CLASSES];
    if (order == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    shuffled_order(spec, strat, y, n, order, order + n, count);
    if (spec->folds)
        for (size_t c = 0; strat && c < MAX_CLASSES; c++)
            if (count[c] == 1) {
                free(order);
                return gp_error_set(err, GP_EINVAL, "validation",
                                    "class %zu has a single row: a %zu-fold validation would "
                                    "leave it out of a training part; give it more rows or "
                                    "use validation.fraction",
                                    c, spec->folds);
            }
    if (spec->folds)
        for (size_t i = 0; i < n; i++)
            part[order[i]] = i % spec->folds;
    else
        hold_out(spec, strat, order, count, n, part);
    free(order);
    return GP_OK;
}

int gp_validation_progress_fn(void *ctx, int iteration, int max_iterations, double objective)
{
    const gp_validation_progress *p = ctx;
    if (p->fn == NULL)
        return 0;
    long long max = max_iterations > 0 ? max_iterations : 1;
    long long it = (long long)p->index * max + iteration, total = (long long)p->total * max;
    if (total > 2000000000LL) /* keep the count an int: scale both */
        it = it / (total / 2000000000LL + 1), total = total / (total / 2000000000LL + 1);
    return p->fn(p->ctx, (int)it, (int)total, objective);
}

/* ---- the fits ---- */

/* One part's rows gathered: X (rows x d), y (rows x p), noise (rows). */
typedef struct rows_buf {
    double *X, *y, *noise;
    size_t n;
} rows_buf;

static int gather(const gp_fit_request *req, const size_t *part, size_t which, int keep,
                  rows_buf *b, gp_error *err)
{
    size_t p = req->n_outputs ? req->n_outputs : 1, n = 0;
    for (size_t i = 0; i < req->n; i++)
        n += (part[i] == which) == keep;
    memset(b, 0, sizeof *b);
    b->n = n;
    size_t nx = 0, ny = 0;
    int rc = gp_checked_size(n, req->d, &nx, err);
    if (rc == GP_OK)
        rc = gp_checked_size(n, p, &ny, err);
    if (rc)
        return rc;
    b->X = gp_alloc_doubles(nx + 1, err);
    b->y = gp_alloc_doubles(ny + 1, err);
    b->noise = req->noise_per_point ? gp_alloc_doubles(n + 1, err) : NULL;
    if (b->X == NULL || b->y == NULL || (req->noise_per_point && b->noise == NULL))
        return GP_ENOMEM;
    for (size_t i = 0, r = 0; i < req->n; i++) {
        if ((part[i] == which) != keep)
            continue;
        for (size_t k = 0; k < req->d; k++)
            b->X[k * n + r] = req->X[k * req->n + i];
        for (size_t j = 0; j < p; j++)
            b->y[j * n + r] = req->y[j * req->n + i];
        if (b->noise)
            b->noise[r] = req->noise_per_point[i];
        r++;
    }
    return GP_OK;
}

static void rows_free(rows_buf *b)
{
    free(b->X);
    free(b->y);
    free(b->noise);
}

/* A fold's model that is not ready to predict (rfgp warming up on fewer
 * rows than options.warmup): the validation, not the model, is what the
 * request can change, so the error names it (422, not the model's 409). */
static int cannot_predict(size_t f, size_t rows, gp_error *err)
{
    char why[GP_ERROR_MESSAGE_LEN] = "";
    if (err)
        snprintf(why, sizeof why, "%s", err->message);
    return gp_error_set(err, GP_EUNSUPPORTED, "validation",
                        "validation: fold %zu's model, fitted on %zu rows, cannot predict (%s); "
                        "give it more rows (fewer folds, a smaller fraction) or lower the "
                        "method's warm-up",
                        f, rows, why);
}

/* Fit f: train on every row not in part f, score the rows in it; its
 * model handed to *keep when keep is not NULL (else freed). */
static int run_fit(const gp_method *m, const gp_fit_request *req, const size_t *part, size_t f,
                   size_t total, gp_validation_report *r, gp_model **keep, gp_error *err)
{
    rows_buf train, test;
    memset(&test, 0, sizeof test);
    int rc = gather(req, part, f, 0, &train, err);
    if (rc == GP_OK)
        rc = gather(req, part, f, 1, &test, err);
    gp_model *model = NULL;
    if (rc == GP_OK) {
        gp_validation_progress pr = {req->progress, req->progress_ctx, f, total};
        gp_fit_request fr = *req;
        fr.X = train.X;
        fr.y = train.y;
        fr.noise_per_point = train.noise;
        fr.n = train.n;
        fr.progress = gp_validation_progress_fn;
        fr.progress_ctx = &pr;
        rc = gp_model_fit(m, &fr, &model, err);
    }
    if (rc == GP_OK) {
        r->fit_seconds += model->diag.fit_seconds;
        size_t S = gp_validation_scored_outputs(model);
        if (S != r->n_outputs)
            rc = gp_error_set(err, GP_EINTERNAL, "validation",
                              "a fold's model has %zu outputs, not %zu", S, r->n_outputs);
        else
            rc = gp_validation_score(model, test.X, test.y, test.noise, test.n, req->d,
                                     r->per_output + f * S, &r->reliability, err);
        if (rc == GP_ECONFLICT)
            rc = cannot_predict(f, train.n, err);
    }
    if (rc == GP_OK && keep) {
        gp_model_free(*keep);
        *keep = model;
        model = NULL;
    }
    gp_model_free(model);
    rows_free(&train);
    rows_free(&test);
    return rc;
}

static size_t scored_outputs(const gp_fit_request *req)
{
    return req->likelihood == GP_LIK_SOFTMAX ? 1 : req->n_outputs ? req->n_outputs : 1;
}

static void summarise(gp_validation_report *r)
{
    size_t S = r->n_outputs;
    for (size_t f = 0; f < r->n_fits; f++)
        gp_validation_metrics_mean(r->per_output + f * S, S, 1, &r->per_fit[f]);
    for (size_t j = 0; j < S; j++)
        gp_validation_metrics_mean(r->per_output + j, r->n_fits, S, &r->output_mean[j]);
    gp_validation_metrics_mean(r->per_fit, r->n_fits, 1, &r->mean);
    gp_validation_metrics_sd(r->per_fit, r->n_fits, 1, &r->mean, &r->sd);
    /* the rows scored: every held-out row once, not once per output */
    r->mean.n = r->sd.n = 0;
    for (size_t f = 0; f < r->n_fits; f++) {
        size_t n = 0;
        for (size_t j = 0; j < S; j++)
            n = r->per_output[f * S + j].n > n ? r->per_output[f * S + j].n : n;
        r->per_fit[f].n = n;
        r->mean.n += n;
    }
    r->sd.n = r->mean.n;
}

int gp_validate(const gp_method *m, const gp_fit_request *req, const gp_validation_spec *spec,
                size_t extra_fits, gp_validation_report *out, gp_error *err)
{
    return gp_validate_keep(m, req, spec, extra_fits, out, NULL, err);
}

int gp_validate_keep(const gp_method *m, const gp_fit_request *req,
                     const gp_validation_spec *spec, size_t extra_fits,
                     gp_validation_report *out, gp_model **last, gp_error *err)
{
    if (last)
        *last = NULL;
    double t0 = seconds_now();
    memset(out, 0, sizeof *out);
    if (req->rows || req->X == NULL || req->y == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "validation",
                            "validation needs the rows in the request (not a data set)");
    out->spec = *spec;
    out->likelihood = req->likelihood;
    out->n_fits = gp_validation_fits(spec);
    out->n_outputs = scored_outputs(req);
    size_t S = out->n_outputs, F = out->n_fits;
    size_t *part = malloc((req->n ? req->n : 1) * sizeof *part);
    out->per_output = calloc(F * S, sizeof *out->per_output);
    out->per_fit = calloc(F, sizeof *out->per_fit);
    out->output_mean = calloc(S, sizeof *out->output_mean);
    int rc = part && out->per_output && out->per_fit && out->output_mean
                 ? GP_OK
                 : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_validation_split(spec, req->likelihood, req->y, req->n, part, err);
    for (size_t f = 0; rc == GP_OK && f < F; f++)
        rc = run_fit(m, req, part, f, F + extra_fits, out, last, err);
    free(part);
    if (rc) {
        if (last) {
            gp_model_free(*last);
            *last = NULL;
        }
        gp_validation_report_free(out);
        return rc;
    }
    summarise(out);
    out->seconds = seconds_now() - t0;
    return GP_OK;
}

void gp_validation_report_free(gp_validation_report *r)
{
    free(r->per_output);
    free(r->per_fit);
    free(r->output_mean);
    r->per_output = r->per_fit = r->output_mean = NULL;
}
