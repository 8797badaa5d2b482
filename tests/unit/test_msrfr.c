/* Method "msrfr" (core/methods/msrfr/msrfr.h): the pooled SVGD step against a direct
 * per-pair implementation, the particle score against finite differences,
 * M = 1 without coupling as plain Adam ascent of the SSGP log posterior, the
 * mixture predictive (law of total variance, covariance, quantiles,
 * components), joint samples, export/import, thread-count independence,
 * calibration, and bad input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/support/fixture.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/features/rff.h"
#include "core/methods/msrfr/msrfr.h"
#include "core/methods/registry.h"
#include "core/model/mixture.h"
#include "core/model/model.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"
#include "tests/unit/testutil.h"

#define N 60
#define D 2

/* ---- helpers ---- */

static const gp_method *msrfr(void)
{
    const gp_method *m = gp_method_find("msrfr");
    if (m == NULL)
        fail_msg("method 'msrfr' is not registered");
    return m;
}

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* y = sin(3 x1) + 0.5 x2^2 + noise on N points in [-1, 1]^2 (column-major). */
static void toy_data(double *X, double *y, size_t n, uint64_t seed)
{
    gp_rng r;
    gp_rng_seed(&r, seed);
    for (size_t i = 0; i < n * D; i++)
        X[i] = 2.0 * gp_rng_uniform(&r) - 1.0;
    for (size_t i = 0; i < n; i++)
        y[i] = sin(3.0 * X[i]) + 0.5 * X[n + i] * X[n + i] + 0.05 * gp_rng_normal(&r);
}

static gp_kernel *rbf(size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

static void fit_request(gp_fit_request *req, const double *X, const double *y, size_t n,
                        size_t d, const gp_kernel *k, const gp_option_value *opts, size_t n_opts)
{
    memset(req, 0, sizeof *req);
    req->X = X;
    req->y = y;
    req->n = n;
    req->d = d;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 3;
    req->options = opts;
    req->n_options = n_opts;
}

static gp_model *fit_ok(const gp_fit_request *req, const char *what)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(msrfr(), req, &model, &err);
    if (rc != GP_OK)
        fail_msg("%s: fit failed: %s (%s, field '%s')", what, err.message, gp_status_name(rc),
                 err.field);
    return model;
}

/* A small standard fit: M = 3 particles of R = 8 frequencies, T = 40. */
static const gp_option_value small_opts[] = {
    {"particles", 3, NULL, NULL}, {"features", 8, NULL, NULL}, {"iterations", 40, NULL, NULL},
    {"repulsion", 0.5, NULL, NULL},
};

static gp_model *small_fit(const double *X, const double *y, gp_kernel *k)
{
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, small_opts, 4);
    return fit_ok(&req, "small fit");
}

static const double *state_array(const gp_state *st, const char *name, size_t *rows,
                                 size_t *cols)
{
    const gp_named_array *a = gp_state_find(st, name);
    if (a == NULL)
        fail_msg("exported state has no array '%s'", name);
    *rows = a->rows;
    *cols = a->cols;
    return a->data;
}

/* ---- the pooled SVGD step ---- */

static double median_of(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++) /* insertion sort: n is small */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The formula of docs/methods/stein-random-features.md §4.2 pair by pair, with the per-dimension median over
 * all P^2 ordered pairs (self pairs included). */
static void direct_direction(const double *W, const double *G, size_t M, size_t R, size_t d,
                             double gamma, double alpha, double *phi)
{
    size_t P = M * R;
    double *h = dalloc(d), *buf = dalloc(P * P);
    for (size_t k = 0; k < d; k++) {
        for (size_t a = 0; a < P; a++)
            for (size_t b = 0; b < P; b++) {
                double t = W[k * P + a] - W[k * P + b];
                buf[a * P + b] = t * t;
            }
        h[k] = fmax(median_of(buf, P * P), 1e-12);
    }
    for (size_t p = 0; p < P; p++)
        for (size_t k = 0; k < d; k++) {
            double s = 0.0;
            for (size_t q = 0; q < P; q++) {
                double e = 0.0;
                for (size_t j = 0; j < d; j++) {
                    double t = W[j * P + p] - W[j * P + q];
                    e += t * t / h[j];
                }
                double kap = exp(-0.5 * e);
                s += gamma * kap * G[k * P + q] +
                     alpha * kap * (W[k * P + p] - W[k * P + q]) / h[k];
            }
            phi[k * P + p] = s / (double)M;
        }
    free(h);
    free(buf);
}

static void test_direction_matches_pairs(void **state)
{
    (void)state;
    size_t M = 3, R = 7, d = 3, P = M * R;
    double *W = dalloc(P * d), *G = dalloc(P * d), *phi = dalloc(P * d), *ref = dalloc(P * d);
    gp_rng r;
    gp_rng_seed(&r, 11);
    for (size_t i = 0; i < P * d; i++) {
        W[i] = gp_rng_normal(&r) * (1.0 + (double)(i / P));
        G[i] = gp_rng_normal(&r);
    }
    gp_svgd_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_svgd_work_new(P, d, &w, &err), GP_OK);
    const double gammas[] = {0.0, 0.37, 1.0}, alphas[] = {0.0, 1.8};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 2; b++) {
            gp_msrfr_direction(W, G, M, R, d, "per_dim", gammas[a], alphas[b], w, phi, NULL);
            direct_direction(W, G, M, R, d, gammas[a], alphas[b], ref);
            for (size_t i = 0; i < P * d; i++)
                assert_true(fabs(phi[i] - ref[i]) <= 1e-12 * (1.0 + fabs(ref[i])));
        }
    /* bandwidth none: phi = gamma G / M exactly */
    gp_msrfr_direction(W, G, M, R, d, "none", 0.5, 2.0, NULL, phi, NULL);
    for (size_t i = 0; i < P * d; i++)
        assert_true(phi[i] == 0.5 * G[i] / 3.0);
    gp_svgd_work_free(w);
    free(W);
    free(G);
    free(phi);
    free(ref);
}

/* ---- the particle score ---- */

static double log_post_at(const gp_rff_problem *p, gp_rff_work *w, double c, double tau)
{
    double v;
    gp_error err;
    assert_int_equal(gp_msrfr_log_posterior(p, w, c, tau, &v, NULL, NULL, NULL, &err), GP_OK);
    return v;
}

typedef struct post_fd {
    const gp_rff_problem *p;
    gp_rff_work *w;
    double c, tau;
} post_fd;

static double log_post_fd(void *ctx, const double *x)
{
    (void)x; /* the problem's omega is x */
    post_fd *f = ctx;
    return log_post_at(f->p, f->w, f->c, f->tau);
}

static void test_score_finite_differences(void **state)
{
    (void)state;
    size_t n = 25, d = 3, R = 6;
    double *X = dalloc(n * d), *y = dalloc(n), *om = dalloc(R * d), *score = dalloc(R * d);
    gp_rng r;
    gp_rng_seed(&r, 5);
    for (size_t i = 0; i < n * d; i++)
        X[i] = gp_rng_uniform(&r);
    for (size_t i = 0; i < n; i++)
        y[i] = gp_rng_normal(&r);
    for (size_t i = 0; i < R * d; i++)
        om[i] = gp_rng_normal(&r);
    double log_ls[3] = {log(0.4), log(1.3), log(0.8)};
    gp_rff_problem p = {X, y, n, d, R, om, log_ls, 0.0, log(0.05), NULL};
    gp_rff_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    const double cs[] = {1.0, 1.0 / 6.0}, taus[] = {3.0, 0.7};
    for (size_t t = 0; t < 2; t++) {
        double v, lml;
        assert_int_equal(gp_msrfr_log_posterior(&p, w, cs[t], taus[t], &v, score, NULL, &lml,
                                                &err),
                         GP_OK);
        /* the value: c LML + the N(0, tau^2) log density of every entry */
        double prior = 0.0;
        for (size_t i = 0; i < R * d; i++)
            prior += -0.5 * om[i] * om[i] / (taus[t] * taus[t]) - log(taus[t]) -
                     0.5 * log(2.0 * 3.14159265358979323846);
        assert_true(fabs(v - (cs[t] * lml + prior)) <= 1e-10 * (1.0 + fabs(v)));
        /* p.omega is om: the checker moves om itself. */
        post_fd c = {&p, w, cs[t], taus[t]};
        tu_check_gradient(log_post_fd, &c, om, R * d, score,
                          (tu_fd_spec){.step = 1e-5, .rtol = 1e-6, .atol = 1e-6}, NULL, "score");
    }
    gp_rff_work_free(w);
    free(X);
    free(y);
    free(om);
    free(score);
}

/* ---- an iteration against the independent numpy implementation ---- */

/* Component m's R x d block of the pooled P x d matrix W, contiguous. */
static void take_block(const double *W, size_t P, size_t R, size_t d, size_t m, double *out)
{
    for (size_t k = 0; k < d; k++)
        memcpy(out + k * R, W + k * P + m * R, R * sizeof *out);
}

static void put_block(double *W, size_t P, size_t R, size_t d, size_t m, const double *in)
{
    for (size_t k = 0; k < d; k++)
        memcpy(W + k * P + m * R, in + k * R, R * sizeof *in);
}

/* T iterations of Algorithm 1 (docs/methods/stein-random-features.md §4.4) from the fixture's start, built
 * from the pieces the fit uses, against the trajectory of
 * docs/methods/reference/msrfr_numpy.py (tests/fixtures/
 * make_msrfr_fixtures.py): per-dimension bandwidth, repulsion, annealing,
 * 1/M likelihood weight, trained ARD lengthscales. */
static void test_trajectory_matches_numpy(void **state)
{
    (void)state;
    char path[4096];
    gp_fixture fx;
    gp_error err;
    assert_int_equal(gp_fixture_path(path, sizeof path, "msrfr_reference.txt", &err), GP_OK);
    assert_int_equal(gp_fixture_load(path, &fx, &err), GP_OK);
    const double *X, *y, *cfg, *tau, *W0, *th0, *Wref, *thref, *lmlref;
    size_t n, d, P;
    assert_int_equal(gp_fixture_get_any(&fx, "X", &n, &d, &X, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "y", n, 1, &y, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "config", 1, 8, &cfg, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "prior_std", 1, 1, &tau, &err), GP_OK);
    assert_int_equal(gp_fixture_get_any(&fx, "W0", &P, NULL, &W0, &err), GP_OK);
    size_t M = (size_t)cfg[0], R = (size_t)cfg[1], T = (size_t)cfg[2];
    double s2 = cfg[3], lr = cfg[4], lr_gd = cfg[5], alpha = cfg[6], s_pow = cfg[7];
    assert_int_equal(P, M * R);
    assert_int_equal(gp_fixture_get(&fx, "theta0", 1, d, &th0, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "W", P, d, &Wref, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "theta", 1, d, &thref, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "lml", T, M, &lmlref, &err), GP_OK);
    double *W = dalloc(P * d), *G = dalloc(P * d), *phi = dalloc(P * d), *om = dalloc(R * d);
    double *sc = dalloc(R * d), *theta = dalloc(d), *gth = dalloc(d), *gls = dalloc(d);
    memcpy(W, W0, P * d * sizeof *W);
    memcpy(theta, th0, d * sizeof *theta);
    gp_rff_work *w = NULL;
    gp_svgd_work *sw = NULL;
    gp_adam aw, at;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    assert_int_equal(gp_svgd_work_new(P, d, &sw, &err), GP_OK);
    assert_int_equal(gp_adam_init(&aw, P * d, lr, &err), GP_OK);
    assert_int_equal(gp_adam_init(&at, d, lr_gd, &err), GP_OK);
    for (size_t t = 0; t < T; t++) {
        memset(gth, 0, d * sizeof *gth);
        for (size_t m = 0; m < M; m++) {
            take_block(W, P, R, d, m, om);
            gp_rff_problem p = {X, y, n, d, R, om, theta, 0.0, log(s2), NULL};
            gp_rff_grad hyper = {NULL, gls, NULL, NULL};
            double lp, lml;
            assert_int_equal(gp_msrfr_log_posterior(&p, w, 1.0 / (double)M, *tau, &lp, sc,
                                                    &hyper, &lml, &err),
                             GP_OK);
            double ref = lmlref[m * T + t];
            if (fabs(lml - ref) > 1e-9 * fabs(ref))
                fail_msg("iteration %zu component %zu: LML %.15g, numpy %.15g", t, m, lml, ref);
            put_block(G, P, R, d, m, sc);
            for (size_t k = 0; k < d; k++)
                gth[k] += gls[k] / (double)M;
        }
        double gamma = gp_svgd_anneal((int)t, (int)T, 5, s_pow);
        gp_msrfr_direction(W, G, M, R, d, "per_dim", gamma, alpha, sw, phi, NULL);
        gp_svgd_adam_step(&aw, W, phi, lr, 1e-4);
        gp_svgd_adam_step(&at, theta, gth, lr_gd, 0.0);
    }
    for (size_t i = 0; i < P * d; i++)
        if (fabs(W[i] - Wref[i]) > 1e-9 * (1.0 + fabs(Wref[i])))
            fail_msg("W[%zu] = %.15g, numpy %.15g", i, W[i], Wref[i]);
    for (size_t k = 0; k < d; k++)
        assert_true(fabs(theta[k] - thref[k]) <= 1e-9 * (1.0 + fabs(thref[k])));
    gp_adam_free(&aw);
    gp_adam_free(&at);
    gp_svgd_work_free(sw);
    gp_rff_work_free(w);
    gp_fixture_free(&fx);
    free(W);
    free(G);
    free(phi);
    free(om);
    free(sc);
    free(theta);
    free(gth);
    free(gls);
}

/* ---- M = 1 without coupling is Adam ascent of the SSGP log posterior ---- */

static void export_omega(const gp_model *model, double *omega, size_t count)
{
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    size_t rows, cols;
    const double *om = state_array(&st, "omega", &rows, &cols);
    assert_int_equal(rows * cols, count);
    memcpy(omega, om, count * sizeof *omega);
    gp_state_free(&st);
}

static void test_single_particle_is_gradient_ascent(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 7);
    gp_kernel *k = rbf(D);
    size_t R = 10, T = 25;
    const double tau = 2.0, lr = 0.05;
    gp_option_value o[] = {
        {"particles", 1, NULL, NULL},        {"features", (double)R, NULL, NULL},
        {"iterations", 0, NULL, NULL},       {"bandwidth", 0, "none", NULL},
        {"repulsion", 0, NULL, NULL},        {"anneal_power", 0, NULL, NULL},
        {"learn_lengthscales", 0, NULL, NULL}, {"lengthscale_init", 0, "kernel", NULL},
        {"prior_std", tau, NULL, NULL},      {"step", lr, NULL, NULL},
    };
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, o, sizeof o / sizeof o[0]);
    req.standardize = 0;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = 0.01;
    gp_model *m0 = fit_ok(&req, "T = 0");
    double om[10 * D], fitted[10 * D], score[10 * D];
    export_omega(m0, om, R * D);
    /* the direct loop from the same start */
    double log_ls[D] = {0.0, 0.0};
    gp_rff_problem p = {X, y, N, D, R, om, log_ls, 0.0, log(0.01), NULL};
    gp_rff_work *w = NULL;
    gp_adam adam;
    gp_error err;
    assert_int_equal(gp_rff_work_new(N, D, R, &w, &err), GP_OK);
    assert_int_equal(gp_adam_init(&adam, R * D, lr, &err), GP_OK);
    double first = 0.0, last = 0.0;
    for (size_t t = 0; t < T; t++) {
        double v;
        assert_int_equal(gp_msrfr_log_posterior(&p, w, 1.0, tau, &v, score, NULL, NULL, &err),
                         GP_OK);
        if (t == 0)
            first = v;
        last = v;
        gp_svgd_adam_step(&adam, om, score, lr, 1e-4);
    }
    assert_true(last > first); /* it is an ascent */
    o[2].number = (double)T;
    gp_model *mT = fit_ok(&req, "T = 25");
    export_omega(mT, fitted, R * D);
    for (size_t i = 0; i < R * D; i++)
        if (fabs(fitted[i] - om[i]) > 1e-12 * (1.0 + fabs(om[i])))
            fail_msg("omega[%zu]: fit %.17g, direct ascent %.17g", i, fitted[i], om[i]);
    gp_adam_free(&adam);
    gp_rff_work_free(w);
    gp_model_free(m0);
    gp_model_free(mT);
    gp_kernel_free(k);
}

/* per_dim with M = 1, no repulsion: phi = K G with K positive definite, an
 * ascent direction (phi . G > 0 for every dimension). */
static void test_single_particle_per_dim_ascends(void **state)
{
    (void)state;
    size_t R = 12, d = 2;
    double W[24], G[24], phi[24];
    gp_rng r;
    gp_rng_seed(&r, 9);
    for (size_t i = 0; i < R * d; i++) {
        W[i] = gp_rng_normal(&r);
        G[i] = gp_rng_normal(&r);
    }
    gp_svgd_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_svgd_work_new(R, d, &w, &err), GP_OK);
    gp_msrfr_direction(W, G, 1, R, d, "per_dim", 1.0, 0.0, w, phi, NULL);
    for (size_t k = 0; k < d; k++) {
        double dot = 0.0;
        for (size_t i = 0; i < R; i++)
            dot += phi[k * R + i] * G[k * R + i];
        assert_true(dot > 0.0);
    }
    gp_svgd_work_free(w);
}

/* ---- prediction ---- */

static void test_mixture_predictive(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 1);
    gp_kernel *k = rbf(D);
    gp_model *model = small_fit(X, y, k);
    assert_int_equal(gp_model_components(model), 3);
    enum { m = 7, K = 3 };
    double Xs[m * D], mean[m], var[m], cm[m * K], cv[m * K], cov[m * m], q[m * 3];
    double mean2[m], var2[m];
    for (size_t i = 0; i < m * D; i++)
        Xs[i] = -1.2 + 0.4 * (double)i;
    const double levels[3] = {0.025, 0.5, 0.975};
    for (int noise = 0; noise <= 1; noise++) {
        gp_predict_request pr = {.X = Xs, .m = m, .d = D, .include_noise = noise,
                                 .full_covariance = 1, .quantiles = levels, .n_quantiles = 3,
                                 .components = 1};
        gp_prediction out = {.mean = mean, .variance = var, .covariance = cov,
                             .quantiles = q, .component_mean = cm, .component_variance = cv};
        gp_error err;
        assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
        /* law of total variance over the components */
        for (size_t i = 0; i < m; i++) {
            double mu = (cm[i] + cm[m + i] + cm[2 * m + i]) / 3.0, ev = 0.0, vm = 0.0;
            for (size_t c = 0; c < K; c++) {
                ev += cv[c * m + i] / 3.0;
                vm += (cm[c * m + i] - mu) * (cm[c * m + i] - mu) / 3.0;
            }
            assert_true(fabs(mean[i] - mu) <= 1e-12 * (1.0 + fabs(mu)));
            assert_true(fabs(var[i] - (ev + vm)) <= 1e-10 * (ev + vm));
            assert_true(cv[i] > 0.0);
            /* quantiles of the mixture: its CDF hits each level */
            for (size_t l = 0; l < 3; l++) {
                double F = 0.0;
                for (size_t c = 0; c < K; c++)
                    F += 0.5 * erfc(-(q[l * m + i] - cm[c * m + i]) / sqrt(2.0 * cv[c * m + i])) /
                         3.0;
                assert_true(fabs(F - levels[l]) <= 1e-9);
            }
        }
        /* the same without covariance (the block path) */
        gp_predict_request pr2 = {.X = Xs, .m = m, .d = D, .include_noise = noise};
        gp_prediction out2 = {.mean = mean2, .variance = var2};
        assert_int_equal(gp_model_predict(model, &pr2, &out2, &err), GP_OK);
        for (size_t i = 0; i < m; i++) {
            assert_true(fabs(mean2[i] - mean[i]) <= 1e-12 * (1.0 + fabs(mean[i])));
            assert_true(fabs(var2[i] - var[i]) <= 1e-10 * var[i]);
        }
    }
    gp_model_free(model);
    gp_kernel_free(k);
}

/* Joint samples: the sample mean and covariance approach the mixture's. */
static void test_samples_match_mixture(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 2);
    gp_kernel *k = rbf(D);
    gp_model *model = small_fit(X, y, k);
    enum { m = 3, S = 20000 };
    double Xs[m * D] = {-0.5, 0.1, 0.9, 0.3, -0.2, 0.6}, mean[m], cov[m * m];
    double *smp = dalloc((size_t)m * S);
    gp_error err;
    gp_predict_request pr = {.X = Xs, .m = m, .d = D, .include_noise = 1, .full_covariance = 1};
    gp_prediction out = {.mean = mean, .variance = dalloc(m), .covariance = cov};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    gp_sample_request sr = {.X = Xs, .m = m, .d = D, .n_samples = S, .seed = 4,
                            .include_noise = 1};
    assert_int_equal(gp_model_sample(model, &sr, smp, &err), GP_OK);
    for (size_t a = 0; a < m; a++) {
        double ma = 0.0;
        for (size_t s = 0; s < S; s++)
            ma += smp[s * m + a] / S;
        double sd = sqrt(cov[a * m + a]);
        assert_true(fabs(ma - mean[a]) < 5.0 * sd / sqrt((double)S));
        for (size_t b = 0; b <= a; b++) {
            double mb = 0.0, c = 0.0;
            for (size_t s = 0; s < S; s++)
                mb += smp[s * m + b] / S;
            for (size_t s = 0; s < S; s++)
                c += (smp[s * m + a] - ma) * (smp[s * m + b] - mb) / (S - 1);
            double tol = 0.08 * sqrt(cov[a * m + a] * cov[b * m + b]);
            if (fabs(c - cov[b * m + a]) > tol)
                fail_msg("sample covariance (%zu,%zu) %.6g, mixture %.6g", a, b, c,
                         cov[b * m + a]);
        }
    }
    /* reproducible for a seed */
    double *again = dalloc((size_t)m * S);
    assert_int_equal(gp_model_sample(model, &sr, again, &err), GP_OK);
    assert_memory_equal(smp, again, (size_t)m * S * sizeof *smp);
    free(again);
    free(out.variance);
    free(smp);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- persistence and determinism ---- */

static void predict_plain(const gp_model *model, const double *Xs, size_t m, double *mean,
                          double *var)
{
    gp_error err;
    gp_predict_request pr = {.X = Xs, .m = m, .d = D, .include_noise = 1};
    gp_prediction out = {.mean = mean, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
}

static void test_export_import_bit_identical(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 4);
    gp_kernel *k = rbf(D);
    gp_model *model = small_fit(X, y, k);
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    size_t rows, cols;
    state_array(&st, "omega", &rows, &cols);
    assert_int_equal(rows, 3 * 8);
    assert_int_equal(cols, D);
    state_array(&st, "chol_packed", &rows, &cols);
    assert_int_equal(rows, 16 * 17 / 2);
    assert_int_equal(cols, 3);
    gp_model *copy = NULL;
    assert_int_equal(gp_model_import(msrfr(), &st, &copy, &err), GP_OK);
    double Xs[5 * D] = {-1, -0.3, 0.2, 0.7, 1.4, 0.5, -0.9, 0.0, 0.3, 1.1};
    double m1[5], v1[5], m2[5], v2[5];
    predict_plain(model, Xs, 5, m1, v1);
    predict_plain(copy, Xs, 5, m2, v2);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(v1, v2, sizeof v1);
    /* a corrupt factor is refused */
    gp_named_array *ch = (gp_named_array *)gp_state_find(&st, "chol_packed");
    ch->data[0] = -1.0;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_import(msrfr(), &st, &bad, &err), GP_EDATA);
    assert_null(bad);
    gp_state_free(&st);
    gp_model_free(copy);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void fitted_state(int threads, gp_state *st)
{
    double X[N * D], y[N];
    toy_data(X, y, N, 6);
    gp_kernel *k = rbf(D);
    gp_parallel_set_threads(threads);
    gp_model *model = small_fit(X, y, k);
    gp_parallel_set_threads(0);
    gp_error err;
    gp_state_init(st);
    assert_int_equal(gp_model_export(model, st, &err), GP_OK);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_thread_count_independent(void **state)
{
    (void)state;
    gp_state a, b;
    fitted_state(1, &a);
    const int counts[] = {2, 3, 4};
    for (size_t t = 0; t < 3; t++) {
        fitted_state(counts[t], &b);
        assert_int_equal(a.count, b.count);
        for (size_t i = 0; i < a.count; i++) {
            const gp_named_array *x = &a.arrays[i], *z = gp_state_find(&b, x->name);
            if (strcmp(x->name, "diagnostics") == 0) /* holds the fit's wall time */
                continue;
            assert_non_null(z);
            assert_int_equal(x->rows * x->cols, z->rows * z->cols);
            if (memcmp(x->data, z->data, x->rows * x->cols * sizeof(double)) != 0)
                fail_msg("array '%s' differs between 1 and %d threads", x->name, counts[t]);
        }
        gp_state_free(&b);
    }
    gp_state_free(&a);
}

/* ---- calibration and options ---- */

static void test_calibrate(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 8);
    gp_kernel *k = rbf(D);
    gp_option_value o[] = {{"particles", 3, NULL, NULL}, {"features", 8, NULL, NULL},
                           {"iterations", 30, NULL, NULL}, {"calibrate", 1, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, o, 4);
    gp_model *cal = fit_ok(&req, "calibrated");
    fit_request(&req, X, y, N, D, k, o, 3);
    gp_model *plain = fit_ok(&req, "plain");
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(cal, &st, &err), GP_OK);
    double scale = 0.0;
    assert_int_equal(gp_state_get_scalar(&st, "variance_scale", &scale, &err), GP_OK);
    assert_true(scale > 1e-3 && scale < 1e3 && scale != 1.0);
    gp_state_free(&st);
    /* the same final fit, its variances times the scale */
    double Xs[4 * D] = {-0.8, -0.1, 0.4, 0.9, 0.2, -0.6, 0.8, 0.0};
    double m1[4], v1[4], m2[4], v2[4];
    predict_plain(cal, Xs, 4, m1, v1);
    predict_plain(plain, Xs, 4, m2, v2);
    for (size_t i = 0; i < 4; i++) {
        assert_true(fabs(m1[i] - m2[i]) <= 1e-12 * (1.0 + fabs(m2[i])));
        double within = v1[i]; /* c * mean component variance + spread of the means */
        assert_true(within > 0.0);
    }
    /* too few rows to hold out */
    fit_request(&req, X, y, 12, D, k, o, 4);
    gp_model *none = NULL;
    assert_int_equal(gp_model_fit(msrfr(), &req, &none, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.calibrate");
    gp_model_free(cal);
    gp_model_free(plain);
    gp_kernel_free(k);
}

static void test_registered_and_bad_input(void **state)
{
    (void)state;
    const gp_method *m = msrfr();
    const char *names[] = {"particles", "features", "iterations", "step", "lengthscale_step",
                           "repulsion", "anneal_power", "anneal_cycles", "prior_std",
                           "likelihood_weight", "learn_lengthscales", "init", "bandwidth",
                           "calibrate"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < m->n_options; j++)
            found |= strcmp(m->options[j].name, names[i]) == 0;
        if (!found)
            fail_msg("option '%s' missing", names[i]);
    }
    assert_true(gp_method_is_mixture(m));
    double X[N * D], y[N];
    toy_data(X, y, N, 9);
    gp_error err;
    gp_model *model = NULL;
    /* a composite kernel */
    gp_kernel *terms[2] = {rbf(D), rbf(D)}, *sum = NULL;
    assert_int_equal(gp_kernel_composite(&sum, GP_KERNEL_SUM, terms, 2, &err), GP_OK);
    gp_fit_request req;
    fit_request(&req, X, y, N, D, sum, small_opts, 4);
    assert_int_equal(gp_model_fit(m, &req, &model, &err), GP_EUNSUPPORTED);
    assert_null(model);
    gp_kernel_free(sum);
    /* a non-finite target */
    gp_kernel *k = rbf(D);
    y[5] = NAN;
    fit_request(&req, X, y, N, D, k, small_opts, 4);
    assert_int_equal(gp_model_fit(m, &req, &model, &err), GP_EDATA);
    y[5] = 0.0;
    /* a workspace above the budget names the option */
    gp_option_value big[] = {{"particles", 200, NULL, NULL}, {"features", 20000, NULL, NULL}};
    fit_request(&req, X, y, N, D, k, big, 2);
    assert_int_equal(gp_model_fit(m, &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "options.particles");
    /* components on a single-Gaussian method */
    gp_model *exact = NULL;
    fit_request(&req, X, y, N, D, k, NULL, 0);
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &exact, &err), GP_OK);
    double mu[1], var[1], cm[1], cv[1], xs[D] = {0.1, 0.2};
    gp_predict_request pr = {.X = xs, .m = 1, .d = D, .components = 1};
    gp_prediction out = {.mean = mu, .variance = var, .component_mean = cm,
                         .component_variance = cv};
    assert_int_equal(gp_model_predict(exact, &pr, &out, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "components");
    gp_model_free(exact);
    gp_kernel_free(k);
}

/* Cancellation between iterations. */
static int cancel_at_5(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)max_iterations;
    int *seen = ctx;
    assert_true(isfinite(objective));
    *seen = iteration;
    return iteration >= 5;
}

static void test_progress_and_cancel(void **state)
{
    (void)state;
    double X[N * D], y[N];
    toy_data(X, y, N, 10);
    gp_kernel *k = rbf(D);
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, small_opts, 4);
    int seen = 0;
    req.progress = cancel_at_5;
    req.progress_ctx = &seen;
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(msrfr(), &req, &model, &err), GP_ECANCELLED);
    assert_int_equal(seen, 5);
    assert_null(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direction_matches_pairs),
        cmocka_unit_test(test_score_finite_differences),
        cmocka_unit_test(test_trajectory_matches_numpy),
        cmocka_unit_test(test_single_particle_is_gradient_ascent),
        cmocka_unit_test(test_single_particle_per_dim_ascends),
        cmocka_unit_test(test_mixture_predictive),
        cmocka_unit_test(test_samples_match_mixture),
        cmocka_unit_test(test_export_import_bit_identical),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_calibrate),
        cmocka_unit_test(test_registered_and_bad_input),
        cmocka_unit_test(test_progress_and_cancel),
    };
    return cmocka_run_group_tests_name("msrfr", tests, NULL, NULL);
}
