/* exact GP: LML gradients, reference fixtures from scikit-learn, optimum on
 * shared datasets, sampling, jitter, bad data, export/import, size guard. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/support/dataset.h"
#include "bench/support/fixture.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

/* ---- helpers ---- */

static gp_kernel *leaf(gp_kernel_type t, size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, t, d, ard, NULL, 0, &err), GP_OK);
    return k;
}

static gp_kernel *combine(gp_kernel_type t, gp_kernel *a, gp_kernel *b)
{
    gp_kernel *terms[2] = {a, b}, *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_composite(&k, t, terms, 2, &err), GP_OK);
    return k;
}

/* Smooth test function with noise, n points in d dims, column-major X. */
static void toy_data(size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t k = 0; k < d; k++)
            s += sin(1.3 * X[k * n + i] + 0.4 * (double)k);
        y[i] = s + 0.1 * gp_rng_normal(&rng);
    }
}

/* Point-major copy (d x n) of a column-major n x d matrix. */
static double *points(const double *X, size_t n, size_t d)
{
    double *P = malloc(n * d * sizeof *P);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            P[i * d + k] = X[k * n + i];
    return P;
}

/* Set every kernel parameter to a distinct, non-trivial value. */
static void spread_params(gp_kernel *k)
{
    size_t np = gp_kernel_n_params(k);
    double *theta = malloc(np * sizeof *theta);
    for (size_t i = 0; i < np; i++)
        theta[i] = 0.3 * sin(1.7 * (double)i + 0.5);
    gp_kernel_set_params(k, theta);
    free(theta);
}

static void fit_request(gp_fit_request *req, const double *X, const double *y, size_t n,
                        size_t d, const gp_kernel *k)
{
    memset(req, 0, sizeof *req);
    req->X = X;
    req->y = y;
    req->n = n;
    req->d = d;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 1;
}

/* ---- LML gradient against central finite differences ---- */

typedef struct lml_fd {
    gp_kernel *k;
    const double *P, *y;
    size_t n, d, np;
} lml_fd;

/* The LML at x = (kernel log-parameters, log noise). */
static double lml_at(void *ctx, const double *x)
{
    lml_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    double lml;
    gp_error err;
    assert_int_equal(gp_exact_lml_grad(c->k, exp(x[c->np]), c->P, c->d, c->n, c->y, &lml, NULL,
                                       &err),
                     GP_OK);
    return lml;
}

static void lml_param_name(void *ctx, size_t i, char *buf, size_t len)
{
    lml_fd *c = ctx;
    if (i < c->np)
        gp_kernel_param_name(c->k, i, buf, len);
    else
        snprintf(buf, len, "log noise");
}

static void check_lml_gradient(gp_kernel *k, size_t d)
{
    size_t n = 30, np = gp_kernel_n_params(k);
    double *X = malloc(n * d * sizeof *X), *y = malloc(n * sizeof *y);
    toy_data(n, d, 7, X, y);
    double *P = points(X, n, d), noise = 0.05;
    double *grad = malloc((np + 1) * sizeof *grad), *x = malloc((np + 1) * sizeof *x);
    double lml;
    gp_error err;
    if (gp_exact_lml_grad(k, noise, P, d, n, y, &lml, grad, &err) != GP_OK)
        fail_msg("%s: %s", gp_kernel_type_name(k->type), err.message);
    gp_kernel_get_params(k, x);
    x[np] = log(noise);
    lml_fd c = {k, P, y, n, d, np};
    tu_check_gradient(lml_at, &c, x, np + 1, grad,
                      (tu_fd_spec){.step = 1e-5, .rtol = 1e-6, .atol = 1e-6},
                      lml_param_name, gp_kernel_type_name(k->type));
    gp_kernel_set_params(k, x);
    free(X);
    free(y);
    free(P);
    free(grad);
    free(x);
}

static void test_lml_gradient_leaves(void **state)
{
    (void)state;
    const gp_kernel_type types[] = {GP_KERNEL_RBF,      GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                    GP_KERNEL_MATERN52, GP_KERNEL_RQ,       GP_KERNEL_PERIODIC,
                                    GP_KERNEL_LINEAR,   GP_KERNEL_WHITE};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        /* periodic on the Euclidean distance of several dimensions is not positive
         * definite in general (as in scikit-learn), so it gets one dimension. */
        size_t d = types[t] == GP_KERNEL_PERIODIC ? 1 : 3;
        for (int ard = 0; ard <= 1; ard++) {
            gp_kernel *k = leaf(types[t], d, ard);
            spread_params(k);
            check_lml_gradient(k, d);
            gp_kernel_free(k);
        }
    }
}

static void test_lml_gradient_composites(void **state)
{
    (void)state;
    /* product(sum(rbf, periodic), matern32) + sum(product(rq, linear), white) */
    gp_kernel *a = combine(GP_KERNEL_PRODUCT,
                           combine(GP_KERNEL_SUM, leaf(GP_KERNEL_RBF, 2, 1),
                                   leaf(GP_KERNEL_PERIODIC, 2, 0)),
                           leaf(GP_KERNEL_MATERN32, 2, 1));
    gp_kernel *b = combine(GP_KERNEL_SUM,
                           combine(GP_KERNEL_PRODUCT, leaf(GP_KERNEL_RQ, 2, 1),
                                   leaf(GP_KERNEL_LINEAR, 2, 0)),
                           leaf(GP_KERNEL_WHITE, 2, 0));
    gp_kernel *k = combine(GP_KERNEL_SUM, a, b);
    spread_params(k);
    check_lml_gradient(k, 2);
    gp_kernel_free(k);

    /* active_dims: rbf on column 0, matern52 on columns 1 and 2. */
    gp_kernel *r = NULL, *m = NULL;
    size_t d0[1] = {0}, d12[2] = {1, 2};
    assert_int_equal(gp_kernel_leaf(&r, GP_KERNEL_RBF, 3, 1, d0, 1, NULL), GP_OK);
    assert_int_equal(gp_kernel_leaf(&m, GP_KERNEL_MATERN52, 3, 1, d12, 2, NULL), GP_OK);
    k = combine(GP_KERNEL_PRODUCT, r, m);
    spread_params(k);
    check_lml_gradient(k, 3);
    gp_kernel_free(k);
}

/* The threaded pair loops cut work by problem size only: any thread count gives
 * bit-identical LML and gradient. */
static void test_thread_count_invariance(void **state)
{
    (void)state;
    size_t n = 400, d = 3;
    double *X = malloc(n * d * sizeof *X), *y = malloc(n * sizeof *y);
    toy_data(n, d, 21, X, y);
    double *P = points(X, n, d);
    gp_kernel *k = combine(GP_KERNEL_SUM, leaf(GP_KERNEL_MATERN32, d, 1), leaf(GP_KERNEL_RBF, d, 1));
    spread_params(k);
    size_t np = gp_kernel_n_params(k);
    double lml[3], *grad = malloc(3 * (np + 1) * sizeof *grad);
    gp_error err;
    for (int t = 1; t <= 3; t++) {
        gp_parallel_set_threads(t);
        assert_int_equal(gp_exact_lml_grad(k, 0.1, P, d, n, y, &lml[t - 1],
                                           grad + (size_t)(t - 1) * (np + 1), &err),
                         GP_OK);
    }
    gp_parallel_set_threads(0);
    assert_memory_equal(&lml[0], &lml[1], sizeof lml[0]);
    assert_memory_equal(&lml[0], &lml[2], sizeof lml[0]);
    assert_memory_equal(grad, grad + np + 1, (np + 1) * sizeof *grad);
    assert_memory_equal(grad, grad + 2 * (np + 1), (np + 1) * sizeof *grad);
    gp_kernel_free(k);
    free(grad);
    free(P);
    free(X);
    free(y);
}

/* ---- reference values from scikit-learn ---- */

static gp_kernel *fixture_kernel(const char *name)
{
    if (strcmp(name, "rbf") == 0)
        return leaf(GP_KERNEL_RBF, 3, 1);
    if (strcmp(name, "matern12") == 0)
        return leaf(GP_KERNEL_MATERN12, 2, 1);
    if (strcmp(name, "matern32") == 0)
        return leaf(GP_KERNEL_MATERN32, 2, 1);
    if (strcmp(name, "matern52") == 0)
        return leaf(GP_KERNEL_MATERN52, 2, 1);
    if (strcmp(name, "rq") == 0)
        return leaf(GP_KERNEL_RQ, 2, 0);
    if (strcmp(name, "periodic") == 0)
        return leaf(GP_KERNEL_PERIODIC, 1, 0);
    if (strcmp(name, "composite") == 0)
        return combine(GP_KERNEL_SUM,
                       combine(GP_KERNEL_PRODUCT, leaf(GP_KERNEL_RBF, 2, 1),
                               leaf(GP_KERNEL_PERIODIC, 2, 0)),
                       leaf(GP_KERNEL_MATERN52, 2, 1));
    if (strcmp(name, "composite2") == 0)
        return combine(GP_KERNEL_SUM,
                       combine(GP_KERNEL_PRODUCT, leaf(GP_KERNEL_RQ, 2, 0),
                               leaf(GP_KERNEL_LINEAR, 2, 0)),
                       leaf(GP_KERNEL_MATERN32, 2, 0));
    fail_msg("unknown fixture %s", name);
    return NULL;
}

static void assert_rel(double got, double want, double tol, const char *what, size_t i)
{
    if (!(fabs(got - want) <= tol * fmax(fabs(want), 1e-300)))
        fail_msg("%s[%zu]: got %.17g, scikit-learn %.17g (rel. error %.3g)", what, i, got, want,
                 fabs(got - want) / fabs(want));
}

static void check_fixture(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/exact_%s.txt", name);
    gp_fixture fx;
    gp_error err;
    if (gp_fixture_load(path, &fx, &err) != GP_OK)
        fail_msg("cannot load %s: %s", path, err.message);
    gp_kernel *k = fixture_kernel(name);
    size_t np = gp_kernel_n_params(k);
    const double *X, *y, *Xs, *theta, *noise, *lml, *mean, *sd, *cov;
    const gp_fixture_block *bx = gp_fixture_find(&fx, "X"), *bs = gp_fixture_find(&fx, "Xs");
    assert_non_null(bx);
    assert_non_null(bs);
    size_t n = bx->rows, d = bx->cols, m = bs->rows;
    assert_int_equal(gp_fixture_get(&fx, "X", n, d, &X, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "y", n, 1, &y, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "Xs", m, d, &Xs, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "theta", np, 1, &theta, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "noise", 1, 1, &noise, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "lml", 1, 1, &lml, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "mean", m, 1, &mean, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "std", m, 1, &sd, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "cov", m, m, &cov, &err), GP_OK);
    gp_kernel_set_params(k, theta);

    /* Every hyperparameter and the noise fixed, raw units: a fit only factorises. */
    gp_kernel *kf = NULL;
    assert_int_equal(gp_kernel_copy(&kf, k, &err), GP_OK);
    gp_kernel *stack[64]; /* fix every node, depth-first */
    size_t top = 0;
    stack[top++] = kf;
    while (top) {
        gp_kernel *t = stack[--top];
        t->fixed = GP_FIX_ALL;
        for (size_t i = 0; i < t->n_terms; i++)
            stack[top++] = t->terms[i];
    }
    gp_fit_request req;
    fit_request(&req, X, y, n, d, kf);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = noise[0];
    gp_model *model = NULL;
    if (gp_model_fit(gp_method_find("exact"), &req, &model, &err) != GP_OK)
        fail_msg("%s: fit failed: %s", name, err.message);
    assert_rel(model->diag.objective, lml[0], 1e-9, "lml", 0);
    assert_true(model->diag.jitter == 0.0);

    double *mu = malloc(m * sizeof *mu), *var = malloc(m * sizeof *var);
    double *C = malloc(m * m * sizeof *C);
    gp_predict_request pr = {.X = Xs, .m = m, .d = d, .include_noise = 0, .full_covariance = 0};
    gp_prediction out = {.mean = mu, .variance = var, .covariance = NULL};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    for (size_t i = 0; i < m; i++) {
        assert_rel(mu[i], mean[i], 1e-9, "mean", i);
        assert_rel(sqrt(var[i]), sd[i], 1e-9, "std", i);
    }
    pr.full_covariance = 1;
    out.covariance = C;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    for (size_t i = 0; i < m * m; i++)
        if (fabs(C[i] - cov[i]) > 1e-9 * fmax(fabs(cov[i]), sd[i % m] * sd[i / m]))
            fail_msg("%s cov[%zu]: %.17g vs %.17g", name, i, C[i], cov[i]);
    for (size_t i = 0; i < m; i++)
        assert_rel(sqrt(var[i]), sd[i], 1e-9, "std(full)", i);
    /* Observation variance adds exactly the noise. */
    pr.full_covariance = 0;
    pr.include_noise = 1;
    out.covariance = NULL;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    for (size_t i = 0; i < m; i++)
        assert_rel(var[i], sd[i] * sd[i] + noise[0], 1e-9, "observation variance", i);
    free(mu);
    free(var);
    free(C);
    gp_model_free(model);
    gp_kernel_free(kf);
    gp_kernel_free(k);
    gp_fixture_free(&fx);
}

static void test_sklearn_fixtures(void **state)
{
    (void)state;
    const char *cases[] = {"rbf", "matern12", "matern32", "matern52",
                           "rq",  "periodic", "composite", "composite2"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_fixture(cases[i]);
}

/* After optimisation our LML (standardised units) is at least scikit-learn's. */
static void test_optimum_vs_sklearn(void **state)
{
    (void)state;
    char why[256];
    if (!gp_datasets_present(why, sizeof why)) {
        printf("skipped: shared datasets absent (%s)\n", why);
        skip();
    }
    gp_fixture fx;
    gp_error err;
    assert_int_equal(gp_fixture_load("tests/fixtures/exact_optimum.txt", &fx, &err), GP_OK);
    const char *names[] = {"concrete", "energy", "yacht"};
    for (size_t t = 0; t < 3; t++) {
        gp_dataset train, test;
        assert_int_equal(
            gp_dataset_load_split(names[t], "test20", 0, 0, 0, &train, &test, NULL, &err),
            GP_OK);
        char key[64];
        const double *ref, *nref;
        snprintf(key, sizeof key, "%s_lml", names[t]);
        assert_int_equal(gp_fixture_get(&fx, key, 1, 1, &ref, &err), GP_OK);
        snprintf(key, sizeof key, "%s_n", names[t]);
        assert_int_equal(gp_fixture_get(&fx, key, 1, 1, &nref, &err), GP_OK);
        assert_int_equal((size_t)nref[0], train.n);
        gp_kernel *k = leaf(GP_KERNEL_RBF, train.d, 1);
        gp_fit_request req;
        fit_request(&req, train.X, train.y, train.n, train.d, k);
        req.noise_given = 1;
        req.noise_variance = 1.0; /* scikit-learn's WhiteKernel(1.0) start */
        gp_model *model = NULL;
        if (gp_model_fit(gp_method_find("exact"), &req, &model, &err) != GP_OK)
            fail_msg("%s: %s", names[t], err.message);
        double ours = model->diag.objective + (double)train.n * log(model->y_scale);
        printf("%s: LML ours %.10f, scikit-learn %.10f (N=%zu, %d iterations)\n", names[t],
               ours, ref[0], train.n, model->diag.iterations);
        if (ours < ref[0] - 1e-6)
            fail_msg("%s: our optimum %.10f is below scikit-learn's %.10f", names[t], ours,
                     ref[0]);
        gp_model_free(model);
        gp_kernel_free(k);
        gp_dataset_free(&train);
        gp_dataset_free(&test);
    }
    gp_fixture_free(&fx);
}

/* ---- sampling ---- */

static gp_model *toy_model(size_t n, size_t d, uint64_t seed)
{
    double *X = malloc(n * d * sizeof *X), *y = malloc(n * sizeof *y);
    toy_data(n, d, seed, X, y);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1);
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k);
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find("exact"), &req, &model, &err) != GP_OK)
        fail_msg("toy fit failed: %s", err.message);
    gp_kernel_free(k);
    free(X);
    free(y);
    return model;
}

static void test_samples_converge(void **state)
{
    (void)state;
    gp_model *model = toy_model(40, 2, 3);
    size_t m = 6, S = 20000;
    double Xs[12];
    for (size_t i = 0; i < 12; i++)
        Xs[i] = -2.5 + 0.45 * (double)i;
    double *samples = malloc(m * S * sizeof *samples), mu[6], var[6], C[36];
    gp_error err;
    for (int noise = 0; noise <= 1; noise++) {
        gp_sample_request sr = {.X = Xs, .m = m, .d = 2, .n_samples = S, .seed = 11,
                                .include_noise = noise};
        assert_int_equal(gp_model_sample(model, &sr, samples, &err), GP_OK);
        gp_predict_request pr = {.X = Xs, .m = m, .d = 2, .include_noise = noise,
                                 .full_covariance = 1};
        gp_prediction out = {.mean = mu, .variance = var, .covariance = C};
        assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
        for (size_t i = 0; i < m; i++) {
            double em = 0;
            for (size_t s = 0; s < S; s++)
                em += samples[s * m + i];
            em /= (double)S;
            /* 5 standard errors of the mean */
            assert_true(fabs(em - mu[i]) <= 5.0 * sqrt(var[i] / (double)S));
            for (size_t j = 0; j <= i; j++) {
                double ec = 0, emj = 0;
                for (size_t s = 0; s < S; s++)
                    emj += samples[s * m + j];
                emj /= (double)S;
                for (size_t s = 0; s < S; s++)
                    ec += (samples[s * m + i] - em) * (samples[s * m + j] - emj);
                ec /= (double)(S - 1);
                /* standard error of a sample covariance ~ sqrt((s_ii s_jj + s_ij^2)/S) */
                double se = sqrt((C[i * m + i] * C[j * m + j] + C[j * m + i] * C[j * m + i]) /
                                 (double)S);
                if (fabs(ec - C[j * m + i]) > 5.0 * se + 1e-12)
                    fail_msg("cov(%zu,%zu): empirical %.6g, predictive %.6g", i, j, ec,
                             C[j * m + i]);
            }
        }
    }
    free(samples);
    gp_model_free(model);
}

static void test_samples_reproducible(void **state)
{
    (void)state;
    gp_model *model = toy_model(25, 1, 5);
    double Xs[5] = {-1, -0.5, 0, 0.5, 1}, a[50], b[50], c[50];
    gp_sample_request sr = {.X = Xs, .m = 5, .d = 1, .n_samples = 10, .seed = 99};
    gp_error err;
    assert_int_equal(gp_model_sample(model, &sr, a, &err), GP_OK);
    assert_int_equal(gp_model_sample(model, &sr, b, &err), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    sr.seed = 100;
    assert_int_equal(gp_model_sample(model, &sr, c, &err), GP_OK);
    assert_memory_not_equal(a, c, sizeof a);
    gp_model_free(model);
}

/* ---- robustness ---- */

static void test_duplicates_need_jitter(void **state)
{
    (void)state;
    /* Every input repeated three times, tiny fixed noise: K + s2 I is singular to
     * working precision, so the factor only exists with jitter. */
    size_t n = 30, d = 1;
    double X[30], y[30];
    for (size_t i = 0; i < n; i++) {
        X[i] = (double)(i / 3) * 0.3;
        y[i] = sin(X[i]);
    }
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1);
    k->fixed = GP_FIX_ALL;
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k);
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = 1e-18;
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find("exact"), &req, &model, &err) != GP_OK)
        fail_msg("fit failed: %s", err.message);
    assert_true(model->diag.jitter > 0.0);
    double mu[1], var[1], xs[1] = {0.45};
    gp_predict_request pr = {.X = xs, .m = 1, .d = 1, .include_noise = 0};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    assert_true(fabs(mu[0] - sin(0.45)) < 1e-2);
    gp_model_free(model);

    /* Learned hyperparameters on the same data also succeed. */
    k->fixed = 0;
    req.noise_fixed = 0;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_OK);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_nan_is_invalid_data(void **state)
{
    (void)state;
    double X[10] = {0, 1, 2, NAN, 4, 5, 6, 7, 8, 9}, y[10] = {0};
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1);
    gp_fit_request req;
    fit_request(&req, X, y, 10, 1, k);
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EDATA);
    assert_string_equal(err.field, "X[3][0]");
    assert_null(model);
    X[3] = 3;
    y[7] = INFINITY;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EDATA);
    assert_string_equal(err.field, "y[7]");
    /* NaN in a predict request names the point too. */
    y[7] = 0;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_OK);
    double xs[2] = {0.5, NAN}, mu[2], var[2];
    gp_predict_request pr = {.X = xs, .m = 2, .d = 1};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_EDATA);
    assert_string_equal(err.field, "X[1][0]");
    pr.d = 2;
    pr.m = 1;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_EDATA);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_size_guard(void **state)
{
    (void)state;
    size_t n = 50;
    double X[50], y[50];
    toy_data(n, 1, 2, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1);
    gp_fit_request req;
    fit_request(&req, X, y, n, 1, k);
    req.max_train_points = 49;
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_ETOOBIG);
    assert_non_null(strstr(err.message, "max_train_points"));
    req.max_train_points = 50;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_OK);
    gp_model_free(model);
    gp_kernel_free(k);
}

static int cancel_after_two(void *ctx, int iteration, int max_iterations, double objective)
{
    int *calls = ctx;
    (*calls)++;
    assert_true(isfinite(objective));
    assert_true(iteration <= max_iterations);
    return iteration >= 2;
}

static void test_progress_and_cancel(void **state)
{
    (void)state;
    size_t n = 40;
    double X[80], y[40];
    toy_data(n, 2, 4, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 1);
    gp_fit_request req;
    fit_request(&req, X, y, n, 2, k);
    int calls = 0;
    req.progress = cancel_after_two;
    req.progress_ctx = &calls;
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_ECANCELLED);
    assert_null(model);
    assert_int_equal(calls, 2);
    gp_kernel_free(k);
}

static void test_restarts_deterministic(void **state)
{
    (void)state;
    size_t n = 40;
    double X[80], y[40];
    toy_data(n, 2, 8, X, y);
    gp_kernel *k = leaf(GP_KERNEL_MATERN32, 2, 1);
    gp_option_value opt = {.name = "restarts", .number = 3};
    gp_fit_request req;
    fit_request(&req, X, y, n, 2, k);
    req.options = &opt;
    req.n_options = 1;
    gp_model *a = NULL, *b = NULL, *c = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &a, &err), GP_OK);
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &b, &err), GP_OK);
    assert_true(a->diag.objective == b->diag.objective);
    assert_int_equal(a->diag.restarts, 3);
    req.n_options = 0;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &c, &err), GP_OK);
    /* The restarts include the plain start, so they can only do as well or better. */
    assert_true(a->diag.objective >= c->diag.objective - 1e-9);
    gp_model_free(a);
    gp_model_free(b);
    gp_model_free(c);
    opt.name = "no_such_option";
    req.n_options = 1;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &a, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.no_such_option");
    opt.name = "restarts";
    opt.number = 1.5;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &a, &err), GP_EINVAL);
    gp_kernel_free(k);
}

static void test_export_import_exact(void **state)
{
    (void)state;
    gp_model *model = toy_model(60, 3, 9);
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *copy = NULL;
    assert_int_equal(gp_model_import(gp_method_find("exact"), &st, &copy, &err), GP_OK);
    size_t m = 37;
    double Xs[111];
    for (size_t i = 0; i < 111; i++)
        Xs[i] = sin(0.7 * (double)i) * 2.0;
    double mu1[37], v1[37], mu2[37], v2[37], C1[37 * 37], C2[37 * 37];
    gp_predict_request pr = {.X = Xs, .m = m, .d = 3, .include_noise = 1, .full_covariance = 1};
    gp_prediction o1 = {.mean = mu1, .variance = v1, .covariance = C1};
    gp_prediction o2 = {.mean = mu2, .variance = v2, .covariance = C2};
    assert_int_equal(gp_model_predict(model, &pr, &o1, &err), GP_OK);
    assert_int_equal(gp_model_predict(copy, &pr, &o2, &err), GP_OK);
    assert_memory_equal(mu1, mu2, sizeof mu1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(C1, C2, sizeof C1);
    double s1[37 * 4], s2[37 * 4];
    gp_sample_request sr = {.X = Xs, .m = m, .d = 3, .n_samples = 4, .seed = 3};
    assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
    assert_int_equal(gp_model_sample(copy, &sr, s2, &err), GP_OK);
    assert_memory_equal(s1, s2, sizeof s1);
    assert_true(copy->diag.objective == model->diag.objective);
    assert_true(copy->noise_variance == model->noise_variance);

    /* A corrupt state is refused, not trusted. */
    gp_named_array *a = (gp_named_array *)gp_state_find(&st, "chol_packed");
    a->data[0] = -1.0;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_import(gp_method_find("exact"), &st, &bad, &err), GP_EDATA);
    assert_null(bad);
    a->rows -= 1;
    assert_int_equal(gp_model_import(gp_method_find("exact"), &st, &bad, &err), GP_EDATA);
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
}

/* Point i of X (m x 2) predicted alone gives the bits mu, var. */
static void check_single(const gp_model *model, const double *X, size_t m, size_t i, double mu,
                         double var)
{
    double x1[2] = {X[i], X[m + i]}, mu1, v1;
    gp_predict_request p1 = {.X = x1, .m = 1, .d = 2};
    gp_prediction o1 = {.mean = &mu1, .variance = &v1};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &p1, &o1, &err), GP_OK);
    assert_memory_equal(&mu1, &mu, sizeof mu);
    assert_memory_equal(&v1, &var, sizeof var);
    assert_true(var >= 0.0);
}

static void test_blocked_predict_matches_single(void **state)
{
    (void)state;
    /* More test points than one block (N = 50: blocks of 4M/50 = 83886 points):
     * each point, those on either side of a block boundary included, is the
     * same bits as its single-point prediction. */
    gp_model *model = toy_model(50, 2, 12);
    size_t m = 170000;
    double *Xs = malloc(m * 2 * sizeof *Xs), *mu = malloc(m * sizeof *mu),
           *var = malloc(m * sizeof *var);
    for (size_t i = 0; i < m * 2; i++)
        Xs[i] = 3.0 * sin(0.37 * (double)i);
    gp_predict_request pr = {.X = Xs, .m = m, .d = 2, .include_noise = 0};
    gp_prediction out = {.mean = mu, .variance = var};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    static const size_t edges[] = {83885, 83886, 83887, 167771, 167772, 169999};
    for (size_t i = 0; i < m; i += 9973)
        check_single(model, Xs, m, i, mu[i], var[i]);
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        check_single(model, Xs, m, edges[e], mu[edges[e]], var[edges[e]]);
    free(Xs);
    free(mu);
    free(var);
    gp_model_free(model);
}

/* m points (m x d, column-major) predicted in one call, then in contiguous
 * slices of g points: mean, variance and quantiles are the same bits, as the
 * server's batching of concurrent requests needs. */
static void check_slices(const gp_model *model, const double *X, size_t m, size_t d,
                         int include_noise, size_t g)
{
    static const double levels[] = {0.05, 0.5, 0.975};
    size_t nq = sizeof levels / sizeof levels[0];
    double *mu = malloc(m * sizeof *mu), *var = malloc(m * sizeof *var),
           *q = malloc(m * nq * sizeof *q), *Xs = malloc(g * d * sizeof *Xs);
    double smu[8], svar[8], sq[8 * 3];
    assert_true(g <= 8);
    gp_error err;
    gp_predict_request pr = {.X = X, .m = m, .d = d, .include_noise = include_noise,
                             .quantiles = levels, .n_quantiles = nq};
    gp_prediction all = {.mean = mu, .variance = var, .quantiles = q};
    assert_int_equal(gp_model_predict(model, &pr, &all, &err), GP_OK);
    for (size_t s0 = 0; s0 < m; s0 += g) {
        size_t c = m - s0 < g ? m - s0 : g;
        for (size_t k = 0; k < d; k++)
            memcpy(Xs + k * c, X + k * m + s0, c * sizeof *Xs);
        gp_predict_request ps = pr;
        ps.X = Xs;
        ps.m = c;
        gp_prediction part = {.mean = smu, .variance = svar, .quantiles = sq};
        assert_int_equal(gp_model_predict(model, &ps, &part, &err), GP_OK);
        assert_memory_equal(smu, mu + s0, c * sizeof *mu);
        assert_memory_equal(svar, var + s0, c * sizeof *var);
        for (size_t l = 0; l < nq; l++)
            assert_memory_equal(sq + l * c, q + l * m + s0, c * sizeof *q);
    }
    free(mu);
    free(var);
    free(q);
    free(Xs);
}

static void test_predict_batch_invariant(void **state)
{
    (void)state;
    gp_model *model = toy_model(90, 3, 31);
    size_t m = 23, d = 3;
    double X[23 * 3];
    for (size_t i = 0; i < m * d; i++)
        X[i] = 2.0 * sin(0.61 * (double)i + 0.2);
    static const size_t groups[] = {1, 2, 3, 5, 7};
    for (int noise = 0; noise <= 1; noise++)
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            check_slices(model, X, m, d, noise, groups[g]);
    /* a covariance request's means and variances are those asked without one */
    for (int noise = 0; noise <= 1; noise++) {
        double mean[23], var[23], cmean[23], cvar[23], cov[23 * 23];
        gp_predict_request r = {.X = X, .m = m, .d = d, .include_noise = noise};
        gp_prediction plain = {.mean = mean, .variance = var};
        gp_prediction full = {.mean = cmean, .variance = cvar, .covariance = cov};
        gp_error err;
        assert_int_equal(gp_model_predict(model, &r, &plain, &err), GP_OK);
        r.full_covariance = 1;
        assert_int_equal(gp_model_predict(model, &r, &full, &err), GP_OK);
        assert_memory_equal(mean, cmean, sizeof mean);
        assert_memory_equal(var, cvar, sizeof var);
        for (size_t j = 0; j < m; j++)
            assert_memory_equal(&cov[j * m + j], &var[j], sizeof(double));
    }
    gp_model_free(model);
}

/* Sample requests answered together (gp_model_sample_batch: exact shares one
 * multi-column solve) get bit for bit the draws each gets alone, whatever
 * the other requests (points, draws, seeds, noise, a bad one), for 1 and 2
 * compute threads; the bad one gets its own error. */
static void test_sample_batch_invariant(void **state)
{
    (void)state;
    gp_model *model = toy_model(90, 3, 31);
    enum { NREQ = 5, MAXM = 9, MAXS = 6 };
    static const size_t ms[NREQ] = {4, 1, 9, 4, 3}, ns[NREQ] = {6, 2, 3, 6, 1};
    double X[NREQ][MAXM * 3];
    for (size_t r = 0; r < NREQ; r++)
        for (size_t i = 0; i < ms[r] * 3; i++)
            X[r][i] = 2.0 * sin(0.61 * (double)(i + 7 * r) + 0.2);
    X[3][2] = NAN; /* request 3 is refused, naming its point */
    gp_sample_request reqs[NREQ];
    double alone[NREQ][MAXM * MAXS], got[NREQ][MAXM * MAXS];
    double *outs[NREQ];
    int rcs[NREQ];
    gp_error errs[NREQ], err;
    for (size_t r = 0; r < NREQ; r++) {
        reqs[r] = (gp_sample_request){.X = X[r], .m = ms[r], .d = 3, .n_samples = ns[r],
                                      .seed = 40 + r % 2, .include_noise = r == 2};
        outs[r] = got[r];
        int rc = gp_model_sample(model, &reqs[r], alone[r], &err);
        assert_int_equal(rc, r == 3 ? GP_EDATA : GP_OK);
    }
    for (int threads = 1; threads <= 2; threads++) {
        gp_parallel_set_threads(threads);
        for (size_t first = 0; first < NREQ; first++) { /* batches of NREQ - first */
            memset(got, 0, sizeof got);
            assert_int_equal(gp_model_sample_batch(model, reqs + first, outs + first,
                                                   rcs + first, errs + first, NREQ - first),
                             GP_OK);
            for (size_t r = first; r < NREQ; r++) {
                if (r == 3) {
                    assert_int_equal(rcs[r], GP_EDATA);
                    assert_string_equal(errs[r].field, "X[2][0]");
                    continue;
                }
                assert_int_equal(rcs[r], GP_OK);
                if (memcmp(got[r], alone[r], ms[r] * ns[r] * sizeof(double)) != 0)
                    fail_msg("%d threads, batch from %zu: request %zu differs from alone",
                             threads, first, r);
            }
        }
    }
    gp_parallel_set_threads(0);
    gp_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lml_gradient_leaves),
        cmocka_unit_test(test_lml_gradient_composites),
        cmocka_unit_test(test_thread_count_invariance),
        cmocka_unit_test(test_sklearn_fixtures),
        cmocka_unit_test(test_optimum_vs_sklearn),
        cmocka_unit_test(test_samples_converge),
        cmocka_unit_test(test_samples_reproducible),
        cmocka_unit_test(test_duplicates_need_jitter),
        cmocka_unit_test(test_nan_is_invalid_data),
        cmocka_unit_test(test_size_guard),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_restarts_deterministic),
        cmocka_unit_test(test_export_import_exact),
        cmocka_unit_test(test_blocked_predict_matches_single),
        cmocka_unit_test(test_predict_batch_invariant),
        cmocka_unit_test(test_sample_batch_invariant),
    };
    return cmocka_run_group_tests_name("exact", tests, NULL, NULL);
}
