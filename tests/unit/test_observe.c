/* Online learning where it is exact (gp_model_observe on exact and ssgp):
 * a model fitted on the first rows and told the others, in one batch or in
 * several, predicts and samples as a fit on all rows with the same
 * hyperparameters (and, for ssgp, the same frequencies); with
 * standardisation on, as a dense computation in the frozen working units;
 * export/import and replays are bit-identical; a bad batch changes nothing;
 * states written before observe existed still take rows; the other methods
 * answer unsupported. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

#define RTOL 1e-10

/* ---- data and models ---- */

static double *dalloc(size_t count)
{
    double *p = malloc((count ? count : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

/* n rows in d dims (column-major), a smooth function plus noise; y has an
 * offset and a scale far from 0 and 1 so that standardisation matters. */
static void make_data(size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 3.0 * gp_rng_uniform(&rng) - 1.0 + 0.5 * (double)(i / n);
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t k = 0; k < d; k++)
            s += sin(1.7 * X[k * n + i] + 0.3 * (double)k);
        y[i] = 5.0 + 3.0 * s + 0.2 * gp_rng_normal(&rng);
    }
}

/* Rows lo..hi of X (n x d column-major) as a (hi - lo) x d matrix. */
static double *rows_of(const double *X, size_t n, size_t d, size_t lo, size_t hi)
{
    double *R = dalloc((hi - lo) * d);
    for (size_t k = 0; k < d; k++)
        memcpy(R + k * (hi - lo), X + k * n + lo, (hi - lo) * sizeof *R);
    return R;
}

typedef struct problem {
    size_t n, d, n1; /* fit on rows 0..n1, observe n1..n */
    double *X, *y;
    size_t m;        /* test points */
    double *Xs;
} problem;

static void problem_make(problem *p, size_t n, size_t n1, size_t d, size_t m)
{
    p->n = n;
    p->n1 = n1;
    p->d = d;
    p->m = m;
    p->X = dalloc(n * d);
    p->y = dalloc(n);
    make_data(n, d, 11, p->X, p->y);
    p->Xs = dalloc(m * d);
    double *ys = dalloc(m);
    make_data(m, d, 12, p->Xs, ys);
    free(ys);
}

static void problem_free(problem *p)
{
    free(p->X);
    free(p->y);
    free(p->Xs);
}

/* A leaf with distinct lengthscales and every parameter held. */
static gp_kernel *fixed_leaf(gp_kernel_type t, size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, t, d, 1, NULL, 0, &err), GP_OK);
    k->log_variance = log(1.7);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(0.8 + 0.3 * (double)j);
    k->fixed = GP_FIX_ALL;
    return k;
}

typedef struct fit_spec {
    const char *method;
    const gp_kernel *kernel;
    double noise; /* fixed */
    int standardize;
    const gp_option_value *opts;
    size_t n_opts;
    size_t cap; /* max_train_points, 0 = default */
} fit_spec;

/* A fit on rows lo..hi of the problem with the hyperparameters held. */
static gp_model *fit_rows(const fit_spec *s, const problem *p, size_t lo, size_t hi)
{
    double *X = rows_of(p->X, p->n, p->d, lo, hi);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = X;
    req.y = p->y + lo;
    req.n = hi - lo;
    req.d = p->d;
    req.kernel = s->kernel;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = s->noise;
    req.standardize = s->standardize;
    req.seed = 5;
    req.options = s->opts;
    req.n_options = s->n_opts;
    req.max_train_points = s->cap;
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(gp_method_find(s->method), &req, &model, &err);
    if (rc != GP_OK)
        fail_msg("%s: fit failed: %s (%s, field '%s')", s->method, err.message,
                 gp_status_name(rc), err.field);
    free(X);
    return model;
}

/* Observe rows lo..hi of the problem: the return code, err filled. */
static int observe_rows(gp_model *model, const problem *p, size_t lo, size_t hi, gp_error *err)
{
    double *X = rows_of(p->X, p->n, p->d, lo, hi);
    int rc = gp_model_observe(model, X, p->y + lo, hi - lo, err);
    free(X);
    return rc;
}

static void observe_ok(gp_model *model, const problem *p, size_t lo, size_t hi)
{
    gp_error err;
    int rc = observe_rows(model, p, lo, hi, &err);
    if (rc != GP_OK)
        fail_msg("observe of rows %zu..%zu failed: %s (%s, field '%s')", lo, hi, err.message,
                 gp_status_name(rc), err.field);
}

/* Observe rows n1..n in batches of the given sizes (the last one takes the rest). */
static void observe_batches(gp_model *model, const problem *p, const size_t *sizes, size_t nb)
{
    size_t lo = p->n1;
    for (size_t i = 0; i < nb && lo < p->n; i++) {
        size_t hi = i + 1 == nb || lo + sizes[i] > p->n ? p->n : lo + sizes[i];
        observe_ok(model, p, lo, hi);
        lo = hi;
    }
}

/* ---- what a model predicts ---- */

#define N_SAMPLES 3

typedef struct outputs {
    double *mean, *var_f, *var_y, *cov, *samples, *samples_y;
} outputs;

static void outputs_of(const gp_model *model, const problem *p, outputs *o)
{
    size_t m = p->m;
    o->mean = dalloc(m);
    o->var_f = dalloc(m);
    o->var_y = dalloc(m);
    o->cov = dalloc(m * m);
    o->samples = dalloc(m * N_SAMPLES);
    o->samples_y = dalloc(m * N_SAMPLES);
    double *mean2 = dalloc(m), *var2 = dalloc(m);
    gp_error err;
    gp_predict_request pr = {.X = p->Xs, .m = m, .d = p->d};
    gp_prediction out = {.mean = o->mean, .variance = o->var_f};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    pr.include_noise = 1;
    out.variance = o->var_y;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    pr.include_noise = 0;
    pr.full_covariance = 1;
    out = (gp_prediction){.mean = mean2, .variance = var2, .covariance = o->cov};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    gp_sample_request sr = {.X = p->Xs, .m = m, .d = p->d, .n_samples = N_SAMPLES, .seed = 99};
    assert_int_equal(gp_model_sample(model, &sr, o->samples, &err), GP_OK);
    sr.include_noise = 1;
    assert_int_equal(gp_model_sample(model, &sr, o->samples_y, &err), GP_OK);
    free(mean2);
    free(var2);
}

static void outputs_free(outputs *o)
{
    free(o->mean);
    free(o->var_f);
    free(o->var_y);
    free(o->cov);
    free(o->samples);
    free(o->samples_y);
}

/* Relative agreement with a floor at the array's largest magnitude times
 * rtol (a covariance entry near 0 is compared with the scale of the others),
 * or atol when larger. */
static void close_arrays_floor(const double *got, const double *want, size_t count, double rtol,
                               double atol, const char *what, const char *name)
{
    double scale = 0.0;
    for (size_t i = 0; i < count; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < count; i++)
        tu_assert_close(got[i], want[i], rtol, fmax(atol, rtol * scale), "%s: %s[%zu]", what,
                        name, i);
}

static void close_arrays(const double *got, const double *want, size_t count, double rtol,
                         const char *what, const char *name)
{
    close_arrays_floor(got, want, count, rtol, 0.0, what, name);
}

/* atol: an absolute floor for the (co)variances, for posteriors far
 * smaller than the prior whose rounding follows the prior's scale. */
static void compare_models_floor(const gp_model *a, const gp_model *b, const problem *p,
                                 double rtol, double atol, const char *what)
{
    assert_int_equal(a->n_train, b->n_train);
    outputs oa, ob;
    outputs_of(a, p, &oa);
    outputs_of(b, p, &ob);
    size_t m = p->m;
    close_arrays(oa.mean, ob.mean, m, rtol, what, "mean");
    close_arrays_floor(oa.var_f, ob.var_f, m, rtol, atol, what, "latent variance");
    close_arrays_floor(oa.var_y, ob.var_y, m, rtol, atol, what, "observation variance");
    close_arrays_floor(oa.cov, ob.cov, m * m, rtol, atol, what, "covariance");
    close_arrays(oa.samples, ob.samples, m * N_SAMPLES, rtol, what, "samples");
    close_arrays(oa.samples_y, ob.samples_y, m * N_SAMPLES, rtol, what, "samples of y");
    tu_assert_close(a->diag.objective, b->diag.objective, rtol, 0.0, "%s: objective", what);
    outputs_free(&oa);
    outputs_free(&ob);
}

static void compare_models(const gp_model *a, const gp_model *b, const problem *p, double rtol,
                           const char *what)
{
    compare_models_floor(a, b, p, rtol, 0.0, what);
}

/* Bit-identical outputs. */
static void same_outputs(const gp_model *a, const gp_model *b, const problem *p, const char *what)
{
    outputs oa, ob;
    outputs_of(a, p, &oa);
    outputs_of(b, p, &ob);
    size_t m = p->m, bytes = m * sizeof(double);
    if (memcmp(oa.mean, ob.mean, bytes) || memcmp(oa.var_f, ob.var_f, bytes) ||
        memcmp(oa.var_y, ob.var_y, bytes) || memcmp(oa.cov, ob.cov, m * bytes) ||
        memcmp(oa.samples, ob.samples, N_SAMPLES * bytes) ||
        memcmp(oa.samples_y, ob.samples_y, N_SAMPLES * bytes))
        fail_msg("%s: outputs differ", what);
    outputs_free(&oa);
    outputs_free(&ob);
}

/* ---- states ---- */

static void export_ok(const gp_model *model, gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    assert_int_equal(gp_model_export(model, st, &err), GP_OK);
}

static gp_model *import_ok(const char *method, const gp_state *st)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_import(gp_method_find(method), st, &model, &err);
    if (rc != GP_OK)
        fail_msg("import failed: %s (%s, field '%s')", err.message, gp_status_name(rc),
                 err.field);
    return model;
}

static gp_model *roundtrip(const char *method, const gp_model *model)
{
    gp_state st;
    export_ok(model, &st);
    gp_model *copy = import_ok(method, &st);
    gp_state_free(&st);
    return copy;
}

/* Two models export the same arrays, bit for bit. */
static void same_state(const gp_model *a, const gp_model *b, const char *what)
{
    gp_state sa, sb;
    export_ok(a, &sa);
    export_ok(b, &sb);
    assert_int_equal(sa.count, sb.count);
    for (size_t i = 0; i < sa.count; i++) {
        const gp_named_array *x = &sa.arrays[i], *y = gp_state_find(&sb, x->name);
        if (y == NULL)
            fail_msg("%s: array %s missing", what, x->name);
        if (x->rows != y->rows || x->cols != y->cols ||
            memcmp(x->data, y->data, x->rows * x->cols * sizeof *x->data) != 0)
            fail_msg("%s: array %s differs", what, x->name);
    }
    gp_state_free(&sa);
    gp_state_free(&sb);
}

/* A copy of st without the named arrays: a state as written before them. */
static void state_without(const gp_state *st, const char *const *names, size_t n_names,
                          gp_state *out)
{
    gp_error err;
    gp_state_init(out);
    for (size_t i = 0; i < st->count; i++) {
        int drop = 0;
        for (size_t j = 0; j < n_names; j++)
            drop |= strcmp(st->arrays[i].name, names[j]) == 0;
        if (!drop)
            assert_int_equal(gp_state_put(out, st->arrays[i].name, st->arrays[i].rows,
                                          st->arrays[i].cols, st->arrays[i].data, &err),
                             GP_OK);
    }
}

static const gp_named_array *array_of(const gp_state *st, const char *name)
{
    const gp_named_array *a = gp_state_find(st, name);
    if (a == NULL)
        fail_msg("no array %s", name);
    return a;
}

/* ---- the shared checks ---- */

/* Observing rows n1..n in one batch and in several matches a fit on all n
 * rows with the same hyperparameters. */
static void check_matches_refit(const fit_spec *s, const problem *p, const size_t *sizes,
                                size_t nb, const char *what)
{
    gp_model *full = fit_rows(s, p, 0, p->n);
    gp_model *one = fit_rows(s, p, 0, p->n1);
    gp_model *many = fit_rows(s, p, 0, p->n1);
    observe_ok(one, p, p->n1, p->n);
    observe_batches(many, p, sizes, nb);
    char label[128];
    snprintf(label, sizeof label, "%s, one batch", what);
    compare_models(one, full, p, RTOL, label);
    snprintf(label, sizeof label, "%s, batches", what);
    compare_models(many, full, p, RTOL, label);
    gp_model_free(full);
    gp_model_free(one);
    gp_model_free(many);
}

/* Export/import after observe predicts bit for bit; the same batches on an
 * imported copy and on the original give the same state, bit for bit, with
 * one compute thread or two. */
static void check_bits(const fit_spec *s, const problem *p, const size_t *sizes, size_t nb)
{
    gp_model *a = fit_rows(s, p, 0, p->n1);
    gp_model *b = roundtrip(s->method, a);
    int threads = gp_parallel_threads();
    gp_parallel_set_threads(1);
    observe_batches(a, p, sizes, nb);
    gp_parallel_set_threads(2);
    observe_batches(b, p, sizes, nb);
    gp_parallel_set_threads(threads);
    same_state(a, b, "replay on an imported copy");
    gp_model *c = roundtrip(s->method, a);
    same_outputs(a, c, p, "export/import after observe");
    same_state(a, c, "export/import after observe");
    /* further rows on the observed model and on its reloaded copy (which
     * holds the same numbers in a fresh layout) */
    problem more = *p;
    more.n1 = 0;
    more.n = p->n1;
    static const size_t again[] = {2, 1, 7};
    observe_batches(a, &more, again, 3);
    observe_batches(c, &more, again, 3);
    same_state(a, c, "observe after a reload");
    same_outputs(a, c, p, "observe after a reload");
    gp_model_free(a);
    gp_model_free(b);
    gp_model_free(c);
}

/* A state without the arrays observe added (names) imports, rebuilds them,
 * and takes rows as the original does, to rounding. */
static void check_old_state(const fit_spec *s, const problem *p, const char *const *names,
                            size_t n_names, double rtol)
{
    gp_model *a = fit_rows(s, p, 0, p->n1);
    gp_state st, old, rebuilt;
    export_ok(a, &st);
    state_without(&st, names, n_names, &old);
    gp_model *b = import_ok(s->method, &old);
    export_ok(b, &rebuilt);
    for (size_t i = 0; i < n_names; i++) {
        const gp_named_array *x = array_of(&st, names[i]), *y = array_of(&rebuilt, names[i]);
        assert_int_equal(x->rows * x->cols, y->rows * y->cols);
        close_arrays(y->data, x->data, x->rows * x->cols, rtol, "rebuilt", names[i]);
    }
    observe_ok(a, p, p->n1, p->n);
    observe_ok(b, p, p->n1, p->n);
    compare_models(b, a, p, rtol, "observe on a state from before observe");
    gp_state_free(&st);
    gp_state_free(&old);
    gp_state_free(&rebuilt);
    gp_model_free(a);
    gp_model_free(b);
}

/* A refused batch leaves the model as it was (its export unchanged). */
static void check_refused(gp_model *model, const double *X, const double *Y, size_t k,
                          int code, const char *field, const char *what)
{
    gp_state before, after;
    export_ok(model, &before);
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_model_observe(model, X, Y, k, &err);
    if (rc != code)
        fail_msg("%s: got %s (%s), want %s", what, gp_status_name(rc), err.message,
                 gp_status_name(code));
    if (field && strcmp(err.field, field) != 0)
        fail_msg("%s: field '%s', want '%s'", what, err.field, field);
    export_ok(model, &after);
    assert_int_equal(before.count, after.count);
    for (size_t i = 0; i < before.count; i++) {
        const gp_named_array *x = &before.arrays[i], *y = array_of(&after, x->name);
        if (x->rows != y->rows || x->cols != y->cols ||
            memcmp(x->data, y->data, x->rows * x->cols * sizeof *x->data) != 0)
            fail_msg("%s: array %s changed", what, x->name);
    }
    gp_state_free(&before);
    gp_state_free(&after);
}

/* NaN and Inf in X or y, and no rows: refused by name, the model unchanged. */
static void check_bad_values(gp_model *model, const problem *p)
{
    size_t k = 6, d = p->d;
    double *X = rows_of(p->X, p->n, d, p->n1, p->n1 + k), y[6];
    memcpy(y, p->y + p->n1, sizeof y);
    X[1 * k + 4] = NAN;
    check_refused(model, X, y, k, GP_EDATA, "X[4][1]", "NaN in X");
    X[1 * k + 4] = INFINITY;
    check_refused(model, X, y, k, GP_EDATA, "X[4][1]", "Inf in X");
    X[1 * k + 4] = 0.5;
    y[2] = NAN;
    check_refused(model, X, y, k, GP_EDATA, "y[2]", "NaN in y");
    y[2] = 1.0;
    check_refused(model, X, y, 0, GP_EDATA, "X", "no rows");
    free(X);
}

/* ---- exact ---- */

static const size_t batches[] = {1, 2, 9, 5, 1};

static void exact_matches_refit(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 90, 50, 3, 6);
    gp_kernel *k = fixed_leaf(GP_KERNEL_MATERN52, 3);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.05};
    check_matches_refit(&s, &p, batches, 5, "exact matern52");
    gp_kernel_free(k);
    problem_free(&p);
}

/* A sum with white noise: the kernel's `same` pairs are the new rows' own
 * diagonal, never a new row against an old one. */
static void exact_matches_refit_composite(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 60, 35, 2, 5);
    gp_kernel *terms[2] = {fixed_leaf(GP_KERNEL_RBF, 2), fixed_leaf(GP_KERNEL_WHITE, 2)};
    terms[1]->log_variance = log(0.02);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_composite(&k, GP_KERNEL_SUM, terms, 2, &err), GP_OK);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.01};
    check_matches_refit(&s, &p, batches, 5, "exact rbf + white");
    gp_kernel_free(k);
    problem_free(&p);
}

/* With standardisation the statistics stay those of the fit's rows: the
 * observed model is the dense GP of all rows in those working units. */
static void exact_standardized_dense(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 70, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.03, .standardize = 1};
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    double xm[2] = {model->x_mean[0], model->x_mean[1]};
    double xs[2] = {model->x_scale[0], model->x_scale[1]};
    double ym = model->y_mean, ysc = model->y_scale, jit = model->diag.jitter;
    assert_true(fabs(ym) > 1.0 && fabs(ysc - 1.0) > 0.1); /* standardisation is not a no-op */
    observe_batches(model, &p, batches, 3);
    assert_true(model->x_mean[0] == xm[0] && model->x_scale[1] == xs[1] &&
                model->y_mean == ym && model->y_scale == ysc);
    size_t n = p.n, d = p.d, m = p.m;
    /* working units: points d x n and d x m, targets n */
    double *P = dalloc(d * n), *Q = dalloc(d * m), *yw = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++)
            P[i * d + j] = (p.X[j * n + i] - xm[j]) / xs[j];
        yw[i] = (p.y[i] - ym) / ysc;
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < d; j++)
            Q[i * d + j] = (p.Xs[j * m + i] - xm[j]) / xs[j];
    double *K = dalloc(n * n), *Ks = dalloc(n * m), *Kss = dalloc(m * m);
    gp_kernel_gram(model->kernel, P, n, K, n);
    for (size_t i = 0; i < n; i++)
        K[i * n + i] += model->noise_variance + jit;
    gp_kernel_cross(model->kernel, P, n, Q, m, Ks, n);
    gp_kernel_gram(model->kernel, Q, m, Kss, m);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, K, (lapack_int)n), 0);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)n, 1, K, (lapack_int)n,
                                    yw, (lapack_int)n),
                     0);
    double *V = dalloc(n * m), *mean = dalloc(m), *cov = dalloc(m * m);
    memcpy(V, Ks, n * m * sizeof *V);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)n, (lapack_int)m, K,
                                    (lapack_int)n, V, (lapack_int)n),
                     0);
    for (size_t a = 0; a < m; a++) {
        double s1 = 0.0;
        for (size_t i = 0; i < n; i++)
            s1 += Ks[a * n + i] * yw[i];
        mean[a] = s1 * ysc + ym;
        for (size_t b = 0; b < m; b++) {
            double s2 = 0.0;
            for (size_t i = 0; i < n; i++)
                s2 += Ks[a * n + i] * V[b * n + i];
            cov[b * m + a] = (Kss[b * m + a] - s2) * ysc * ysc;
        }
    }
    double *gm = dalloc(m), *gv = dalloc(m), *gc = dalloc(m * m);
    gp_predict_request pr = {.X = p.Xs, .m = m, .d = d, .full_covariance = 1};
    gp_prediction out = {.mean = gm, .variance = gv, .covariance = gc};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    close_arrays(gm, mean, m, 1e-9, "exact standardised", "mean");
    close_arrays(gc, cov, m * m, 1e-9, "exact standardised", "covariance");
    free(P), free(Q), free(yw), free(K), free(Ks), free(Kss), free(V), free(mean), free(cov);
    free(gm), free(gv), free(gc);
    gp_model_free(model);
    gp_kernel_free(k);
    problem_free(&p);
}

static void exact_bits(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 60, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_MATERN32, 2);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.02, .standardize = 1};
    check_bits(&s, &p, batches, 5);
    gp_kernel_free(k);
    problem_free(&p);
}

static void exact_old_state(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 60, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.02, .standardize = 1};
    static const char *const names[] = {"y_train", "max_train_points"};
    check_old_state(&s, &p, names, 1, 1e-9);
    /* without the cap, the default one */
    gp_model *a = fit_rows(&s, &p, 0, p.n1);
    gp_state st, old, again;
    export_ok(a, &st);
    state_without(&st, names, 2, &old);
    gp_model *b = import_ok("exact", &old);
    export_ok(b, &again);
    double cap;
    gp_error err;
    assert_int_equal(gp_state_get_scalar(&again, "max_train_points", &cap, &err), GP_OK);
    assert_true(cap == (double)GP_DEFAULT_MAX_TRAIN_POINTS);
    gp_state_free(&st);
    gp_state_free(&old);
    gp_state_free(&again);
    gp_model_free(a);
    gp_model_free(b);
    gp_kernel_free(k);
    problem_free(&p);
}

/* Bad values, and rows beyond the fit's max_train_points (kept through
 * export/import): refused, the model unchanged; up to the cap accepted. */
static void exact_refused(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 60, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 0.02, .standardize = 1, .cap = 40};
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    check_bad_values(model, &p);
    gp_model *copy = roundtrip("exact", model);
    double *X = rows_of(p.X, p.n, p.d, p.n1, p.n1 + 11);
    check_refused(model, X, p.y + p.n1, 11, GP_ETOOBIG, "X", "over the cap");
    check_refused(copy, X, p.y + p.n1, 11, GP_ETOOBIG, "X", "over the cap after import");
    gp_error err;
    assert_int_equal(gp_model_observe(copy, X, p.y + p.n1, 10, &err), GP_OK);
    assert_int_equal(copy->n_train, 40);
    check_refused(copy, X, p.y + p.n1, 1, GP_ETOOBIG, "X", "one row over the cap");
    free(X);
    gp_model_free(model);
    gp_model_free(copy);
    gp_kernel_free(k);
    problem_free(&p);
}

/* Rows that repeat training rows under a tiny noise: the bordered factor's
 * new block is singular to rounding, and the model takes the fit's jitter
 * policy over all rows, as a fit of all rows with these hyperparameters
 * does. */
static void exact_duplicate_rows(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 40, 30, 2, 4);
    /* rows 30..40 repeat rows 0..10 (same X, same y) */
    for (size_t j = 0; j < p.d; j++)
        memcpy(p.X + j * p.n + 30, p.X + j * p.n, 10 * sizeof *p.X);
    memcpy(p.y + 30, p.y, 10 * sizeof *p.y);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    /* a noise below rounding: the repeated rows make K + s2 I singular */
    fit_spec s = {.method = "exact", .kernel = k, .noise = 1e-20};
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    gp_model *full = fit_rows(&s, &p, 0, p.n);
    assert_true(full->diag.jitter > model->diag.jitter);
    observe_ok(model, &p, p.n1, p.n);
    assert_true(model->diag.jitter == full->diag.jitter);
    compare_models(model, full, &p, 1e-6, "duplicate rows");
    gp_model_free(model);
    gp_model_free(full);
    gp_kernel_free(k);
    problem_free(&p);
}

/* A fit that needed jitter: the new rows get the same jitter on their
 * diagonal (K + (s2 + jitter) I over all rows), as a fit of all rows that
 * needs the same jitter has. */
static void exact_fit_jitter(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 50, 30, 2, 4);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    k->log_lengthscale[0] = k->log_lengthscale[1] = log(10.0);
    fit_spec s = {.method = "exact", .kernel = k, .noise = 1e-20};
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    gp_model *full = fit_rows(&s, &p, 0, p.n);
    assert_true(model->diag.jitter > 0.0);
    tu_assert_close(full->diag.jitter, model->diag.jitter, 1e-12, 0.0, "the refit's jitter");
    double jitter = model->diag.jitter;
    observe_batches(model, &p, batches, 5);
    assert_true(model->diag.jitter == jitter);
    /* the posterior (co)variances are ~1e-9 of the prior's 1.7: an absolute floor */
    compare_models_floor(model, full, &p, 1e-7, 1e-12, "jitter");
    gp_model_free(model);
    gp_model_free(full);
    gp_kernel_free(k);
    problem_free(&p);
}

/* ---- ssgp ---- */

#define R_FEATURES 24 /* 2R = 48 weights: batches of 8 rows and more re-factorise */

static void ssgp_spec(fit_spec *s, gp_option_value *opts, const char *sampler,
                      const gp_kernel *k, int standardize)
{
    opts[0] = (gp_option_value){.name = "features", .number = R_FEATURES};
    opts[1] = (gp_option_value){.name = "frequencies", .string = sampler};
    opts[2] = (gp_option_value){.name = "stein_iterations", .number = 30};
    *s = (fit_spec){.method = "ssgp", .kernel = k, .noise = 0.04, .standardize = standardize,
                    .opts = opts, .n_opts = 3};
}

/* Both update paths (Givens for small batches, re-factorisation for large
 * ones) and the frequency samplers, Stein's included. */
static void ssgp_matches_refit(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 120, 60, 3, 6);
    gp_kernel *k = fixed_leaf(GP_KERNEL_MATERN32, 3);
    static const char *const samplers[] = {"orf", "qmc", "stein"};
    static const size_t small[] = {1, 3, 7, 2, 1, 5};
    static const size_t mixed[] = {1, 20, 2, 30};
    for (size_t i = 0; i < 3; i++) {
        fit_spec s;
        gp_option_value opts[3];
        ssgp_spec(&s, opts, samplers[i], k, 0);
        char what[64];
        snprintf(what, sizeof what, "ssgp %s, small batches", samplers[i]);
        check_matches_refit(&s, &p, small, 6, what);
        snprintf(what, sizeof what, "ssgp %s, mixed batches", samplers[i]);
        check_matches_refit(&s, &p, mixed, 4, what);
    }
    gp_kernel_free(k);
    problem_free(&p);
}

/* The model in the frozen working units, computed densely here from the
 * exported frequencies: A = Phi^T Phi + (s + jitter) I over all rows. */
static void ssgp_standardized_dense(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 90, 40, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s;
    gp_option_value opts[3];
    ssgp_spec(&s, opts, "mc", k, 1);
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    static const size_t sizes[] = {3, 30, 1};
    observe_batches(model, &p, sizes, 3);
    gp_state st;
    export_ok(model, &st);
    const gp_named_array *om = array_of(&st, "omega");
    size_t R = om->rows, mm = 2 * R, d = p.d, n = p.n, m = p.m;
    assert_int_equal(R, R_FEATURES);
    double a2 = exp(model->kernel->log_variance), c = sqrt(a2 / (double)R);
    double s2 = model->noise_variance;
    /* features of a point x (original units) in working units */
    double *Phi = dalloc(n * mm), *Phis = dalloc(m * mm), *yw = dalloc(n);
    for (int set = 0; set < 2; set++) {
        const double *X = set ? p.Xs : p.X;
        size_t rows = set ? m : n;
        double *F = set ? Phis : Phi;
        for (size_t i = 0; i < rows; i++)
            for (size_t r = 0; r < R; r++) {
                double z = 0.0;
                for (size_t j = 0; j < d; j++) {
                    double xw = (X[j * rows + i] - model->x_mean[j]) / model->x_scale[j];
                    z += om->data[j * R + r] * xw * exp(-model->kernel->log_lengthscale[j]);
                }
                F[r * rows + i] = c * cos(z);
                F[(R + r) * rows + i] = c * sin(z);
            }
    }
    for (size_t i = 0; i < n; i++)
        yw[i] = (p.y[i] - model->y_mean) / model->y_scale;
    double *A = dalloc(mm * mm), *b = dalloc(mm);
    for (size_t a = 0; a < mm; a++) {
        for (size_t e = 0; e < mm; e++) {
            double t = 0.0;
            for (size_t i = 0; i < n; i++)
                t += Phi[a * n + i] * Phi[e * n + i];
            A[e * mm + a] = t + (a == e ? s2 + model->diag.jitter : 0.0);
        }
        double t = 0.0;
        for (size_t i = 0; i < n; i++)
            t += Phi[a * n + i] * yw[i];
        b[a] = t;
    }
    assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)mm, 1, A, (lapack_int)mm,
                                   b, (lapack_int)mm),
                     0);
    /* mean phi*^T alpha, latent variance s phi*^T A^{-1} phi* */
    double *W = dalloc(mm * m), *mean = dalloc(m), *var = dalloc(m);
    for (size_t i = 0; i < m; i++)
        for (size_t a = 0; a < mm; a++)
            W[i * mm + a] = Phis[a * m + i];
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)mm, (lapack_int)m, A,
                                    (lapack_int)mm, W, (lapack_int)mm),
                     0);
    for (size_t i = 0; i < m; i++) {
        double mu = 0.0, v = 0.0;
        for (size_t a = 0; a < mm; a++) {
            mu += Phis[a * m + i] * b[a];
            v += Phis[a * m + i] * W[i * mm + a];
        }
        mean[i] = mu * model->y_scale + model->y_mean;
        var[i] = s2 * v * model->y_scale * model->y_scale;
    }
    double *gm = dalloc(m), *gv = dalloc(m);
    gp_predict_request pr = {.X = p.Xs, .m = m, .d = d};
    gp_prediction out = {.mean = gm, .variance = gv};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    close_arrays(gm, mean, m, 1e-9, "ssgp standardised", "mean");
    close_arrays(gv, var, m, 1e-9, "ssgp standardised", "latent variance");
    free(Phi), free(Phis), free(yw), free(A), free(b), free(W), free(mean), free(var);
    free(gm), free(gv);
    gp_state_free(&st);
    gp_model_free(model);
    gp_kernel_free(k);
    problem_free(&p);
}

static void ssgp_bits(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 80, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s;
    gp_option_value opts[3];
    ssgp_spec(&s, opts, "orf", k, 1);
    static const size_t sizes[] = {1, 20, 3, 26};
    check_bits(&s, &p, sizes, 4);
    gp_kernel_free(k);
    problem_free(&p);
}

static void ssgp_old_state(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 80, 40, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_MATERN52, 2);
    fit_spec s;
    gp_option_value opts[3];
    ssgp_spec(&s, opts, "orf", k, 1);
    static const char *const names[] = {"phi_y", "y_sq"};
    check_old_state(&s, &p, names, 2, 1e-9);
    gp_kernel_free(k);
    problem_free(&p);
}

static void ssgp_refused(void **state)
{
    (void)state;
    problem p;
    problem_make(&p, 60, 30, 2, 5);
    gp_kernel *k = fixed_leaf(GP_KERNEL_RBF, 2);
    fit_spec s;
    gp_option_value opts[3];
    ssgp_spec(&s, opts, "orf", k, 1);
    gp_model *model = fit_rows(&s, &p, 0, p.n1);
    check_bad_values(model, &p);
    gp_model_free(model);
    gp_kernel_free(k);
    problem_free(&p);
}

/* ---- the other methods ---- */

static const struct {
    const char *method, *option;
    double value;
} small_fits[] = {
    {"msrfr", "particles", 3}, {"renyi", "inducing", 8},
    {"svgp", "inducing", 8}, {"pls", "particles", 20},  {"hkd", NULL, 0},
};

static void others_unsupported(void **state)
{
    (void)state;
    assert_true(gp_method_can_observe(gp_method_find("exact")));
    assert_true(gp_method_can_observe(gp_method_find("ssgp")));
    assert_true(gp_method_can_observe(gp_method_find("sgpr"))); /* test_sgpr_observe.c */
    problem p;
    problem_make(&p, 40, 40, 2, 3);
    for (size_t i = 0; i < sizeof small_fits / sizeof small_fits[0]; i++) {
        const gp_method *m = gp_method_find(small_fits[i].method);
        if (m == NULL)
            fail_msg("method %s is not registered", small_fits[i].method);
        assert_false(gp_method_can_observe(m));
        gp_kernel *k = NULL;
        gp_error err;
        assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
        gp_option_value opts[2];
        size_t n_opts = 0;
        if (m->iterations_option)
            opts[n_opts++] = (gp_option_value){.name = m->iterations_option, .number = 3};
        if (small_fits[i].option)
            opts[n_opts++] =
                (gp_option_value){.name = small_fits[i].option, .number = small_fits[i].value};
        gp_fit_request req;
        memset(&req, 0, sizeof req);
        req.X = p.X;
        req.y = p.y;
        req.n = p.n;
        req.d = p.d;
        req.kernel = k;
        req.standardize = 1;
        req.seed = 3;
        req.options = opts;
        req.n_options = n_opts;
        gp_model *model = NULL;
        int rc = gp_model_fit(m, &req, &model, &err);
        if (rc != GP_OK)
            fail_msg("%s: fit failed: %s", m->name, err.message);
        check_refused(model, p.X, p.y, 5, GP_EUNSUPPORTED, NULL, m->name);
        gp_model_free(model);
        gp_kernel_free(k);
    }
    problem_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_matches_refit),
        cmocka_unit_test(exact_matches_refit_composite),
        cmocka_unit_test(exact_standardized_dense),
        cmocka_unit_test(exact_bits),
        cmocka_unit_test(exact_old_state),
        cmocka_unit_test(exact_refused),
        cmocka_unit_test(exact_duplicate_rows),
        cmocka_unit_test(exact_fit_jitter),
        cmocka_unit_test(ssgp_matches_refit),
        cmocka_unit_test(ssgp_standardized_dense),
        cmocka_unit_test(ssgp_bits),
        cmocka_unit_test(ssgp_old_state),
        cmocka_unit_test(ssgp_refused),
        cmocka_unit_test(others_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
