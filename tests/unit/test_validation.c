/* The validation report (core/model/validation.h):
 * - the split: every row held out once, fold sizes within one, the seed
 *   decides it, stratified classes in every training part, hold-out sizes;
 * - the metrics against scikit-learn: an exact model with the fixture's
 *   hyperparameters (tests/fixtures/exact_rbf.txt, GaussianProcessRegressor)
 *   scored on held-out targets placed at chosen multiples of the fixture's
 *   predictive sd: coverage, NLPD and RMSE follow from the fixture alone;
 * - the fits: leave-one-out of an exact GP with held hyperparameters against
 *   its closed form (Rasmussen & Williams eq. 5.12: mu_i = y_i - [K^-1 y]_i /
 *   [K^-1]_ii, var_i = 1 / [K^-1]_ii, K with the noise);
 * - every likelihood returns a report; progress counts the folds; a cancel
 *   in a fold stops it; the same seed gives the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/fixture.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/methods/registry.h"
#include "core/model/validation.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the split ---- */

static void check_kfold(size_t n, size_t k, uint64_t seed)
{
    gp_validation_spec s = {.folds = k, .seed = seed};
    size_t *part = malloc(n * sizeof *part), count[64] = {0};
    gp_error err;
    assert_int_equal(gp_validation_split(&s, GP_LIK_GAUSSIAN, NULL, n, part, &err), GP_OK);
    for (size_t i = 0; i < n; i++) {
        assert_true(part[i] < k);
        count[part[i]]++;
    }
    for (size_t f = 0; f < k; f++)
        assert_true(count[f] == n / k || count[f] == n / k + 1);
    free(part);
}

static void test_kfold_sizes(void **state)
{
    (void)state;
    check_kfold(10, 2, 1);
    check_kfold(17, 5, 2);
    check_kfold(7, 7, 3);
    check_kfold(100, 3, 4);
}

static void test_split_seeded(void **state)
{
    (void)state;
    size_t n = 50, a[50], b[50], c[50];
    gp_validation_spec s = {.folds = 5, .seed = 9};
    gp_error err;
    assert_int_equal(gp_validation_split(&s, GP_LIK_GAUSSIAN, NULL, n, a, &err), GP_OK);
    assert_int_equal(gp_validation_split(&s, GP_LIK_GAUSSIAN, NULL, n, b, &err), GP_OK);
    s.seed = 10;
    assert_int_equal(gp_validation_split(&s, GP_LIK_GAUSSIAN, NULL, n, c, &err), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    /* shuffled: not the rows in order */
    int in_order = 1;
    for (size_t i = 0; i < n; i++)
        in_order &= a[i] == i % 5;
    assert_false(in_order);
}

static void test_split_stratified(void **state)
{
    (void)state;
    /* 3 classes of 20, 7 and 3 rows, 3 folds: each fold holds 6-7, 2-3 and 1 of them */
    size_t n = 30, part[30], held[3][3] = {{0}};
    double y[30];
    for (size_t i = 0; i < n; i++)
        y[i] = i < 20 ? 0.0 : i < 27 ? 1.0 : 2.0;
    gp_validation_spec s = {.folds = 3, .seed = 5};
    gp_error err;
    assert_int_equal(gp_validation_split(&s, GP_LIK_SOFTMAX, y, n, part, &err), GP_OK);
    for (size_t i = 0; i < n; i++)
        held[part[i]][(size_t)y[i]]++;
    for (size_t f = 0; f < 3; f++) {
        assert_true(held[f][0] >= 6 && held[f][0] <= 7);
        assert_true(held[f][1] >= 2 && held[f][1] <= 3);
        assert_int_equal(held[f][2], 1);
    }
    /* a class of one row cannot be in every training part */
    y[29] = 3.0;
    assert_int_equal(gp_validation_split(&s, GP_LIK_SOFTMAX, y, n, part, &err), GP_EINVAL);
    assert_string_equal(err.field, "validation");
}

static void test_split_hold_out(void **state)
{
    (void)state;
    size_t n = 41, part[41], held = 0;
    gp_validation_spec s = {.fraction = 0.25, .seed = 1};
    gp_error err;
    assert_int_equal(gp_validation_split(&s, GP_LIK_GAUSSIAN, NULL, n, part, &err), GP_OK);
    for (size_t i = 0; i < n; i++) {
        assert_true(part[i] <= 1);
        held += part[i] == 0;
    }
    assert_int_equal(held, 10); /* round(0.25 x 41) */
    /* stratified: 0.5 of classes of 9 and 3 rows: 5 (round half up) and 2 */
    double y[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    size_t p12[12], h[2] = {0};
    s.fraction = 0.5;
    assert_int_equal(gp_validation_split(&s, GP_LIK_BERNOULLI, y, 12, p12, &err), GP_OK);
    for (size_t i = 0; i < 12; i++)
        h[(size_t)y[i]] += p12[i] == 0;
    assert_int_equal(h[0], 5);
    assert_int_equal(h[1], 2);
}

static void test_check_errors(void **state)
{
    (void)state;
    gp_error err;
    gp_validation_spec s = {.folds = 1};
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    assert_string_equal(err.field, "validation.folds");
    s.folds = 11;
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    s.folds = 10;
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_OK);
    s = (gp_validation_spec){.fraction = 0.0};
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    assert_string_equal(err.field, "validation.fraction");
    s.fraction = 1.0;
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    s.fraction = 0.04; /* rounds to no row of 10 */
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    s.fraction = 0.96; /* rounds to every row */
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_EINVAL);
    s.fraction = 0.5;
    assert_int_equal(gp_validation_check(&s, 10, &err), GP_OK);
}

/* ---- the metrics against scikit-learn ---- */

static gp_kernel *held_kernel(const double *theta, size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    gp_kernel_set_params(k, theta);
    k->fixed = GP_FIX_ALL;
    return k;
}

/* z quantiles of the standard normal at (1 + a)/2 for the levels */
static const double z_level[GP_VALIDATION_LEVELS] = {
    0.12566134685507402, 0.25334710313579978, 0.38532046640756773, 0.52440051270804067,
    0.67448975019608171, 0.84162123357291418, 1.0364333894937898,  1.2815515655446004,
    1.6448536269514722,  1.959963984540054,   2.5758293035489004};

static void test_metrics_sklearn(void **state)
{
    (void)state;
    gp_fixture fx;
    gp_error err;
    if (gp_fixture_load("tests/fixtures/exact_rbf.txt", &fx, &err) != GP_OK)
        fail_msg("fixture: %s", err.message);
    const double *X, *y, *Xs, *theta, *noise, *mean, *sd;
    size_t n = 36, d = 3, m = 14;
    assert_int_equal(gp_fixture_get(&fx, "X", n, d, &X, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "y", n, 1, &y, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "Xs", m, d, &Xs, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "theta", d + 1, 1, &theta, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "noise", 1, 1, &noise, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "mean", m, 1, &mean, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "std", m, 1, &sd, &err), GP_OK);
    gp_kernel *k = held_kernel(theta, d);
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, NULL, 0);
    req.standardize = 0;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = noise[0];
    gp_model *model = fit_ok(gp_method_find("exact"), &req, "exact");
    /* held-out targets at z_i predictive sds from scikit-learn's mean, away
     * from every level's edge */
    static const double z[14] = {0.05, -0.2,  0.3,  -0.45, 0.6, -0.75, 0.95,
                                 -1.1, 1.45,  -1.8, 2.2,   -2.4, 2.8,  -3.5};
    double yt[14], want_cov[GP_VALIDATION_LEVELS] = {0}, nlpd = 0.0, se = 0.0;
    for (size_t i = 0; i < m; i++) {
        double v = sd[i] * sd[i] + noise[0];
        yt[i] = mean[i] + z[i] * sqrt(v);
        nlpd += 0.5 * (LOG_2PI + log(v) + z[i] * z[i]) / (double)m;
        se += z[i] * z[i] * v;
        for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++)
            want_cov[l] += (fabs(z[i]) < z_level[l]) / (double)m;
    }
    gp_validation_metrics got;
    assert_int_equal(gp_validation_score(model, Xs, yt, NULL, m, d, &got, NULL, &err), GP_OK);
    assert_int_equal(got.n, m);
    tu_assert_close(got.nlpd, nlpd, 1e-9, 0.0, "nlpd");
    tu_assert_close(got.rmse, sqrt(se / (double)m), 1e-9, 0.0, "rmse");
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++)
        tu_assert_within(got.coverage[l], want_cov[l], 1e-12, "coverage at %g",
                         gp_validation_levels[l]);
    assert_true(isnan(got.accuracy));
    gp_model_free(model);
    gp_kernel_free(k);
    gp_fixture_free(&fx);
}

/* ---- leave-one-out against its closed form ---- */

/* The inverse of the SPD matrix A (n x n) by Gauss-Jordan, into Ai. */
static void invert(const double *A, size_t n, double *Ai)
{
    double *W = malloc(n * 2 * n * sizeof *W);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 2 * n; j++)
            W[i * 2 * n + j] = j < n ? A[j * n + i] : (j - n == i);
    for (size_t c = 0; c < n; c++) {
        double piv = W[c * 2 * n + c];
        for (size_t j = 0; j < 2 * n; j++)
            W[c * 2 * n + j] /= piv;
        for (size_t r = 0; r < n; r++) {
            if (r == c)
                continue;
            double f = W[r * 2 * n + c];
            for (size_t j = 0; j < 2 * n; j++)
                W[r * 2 * n + j] -= f * W[c * 2 * n + j];
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Ai[j * n + i] = W[i * 2 * n + n + j];
    free(W);
}

#define LOO_N 12

static void loo_problem(double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, 21);
    for (size_t i = 0; i < LOO_N; i++) {
        X[i] = 4.0 * gp_rng_uniform(&rng);
        y[i] = sin(2.0 * X[i]) + 0.2 * gp_rng_normal(&rng);
    }
}

static void test_leave_one_out(void **state)
{
    (void)state;
    double X[LOO_N], y[LOO_N], theta[2] = {log(0.8), log(0.7)}, s2 = 0.05;
    loo_problem(X, y);
    gp_kernel *k = held_kernel(theta, 1);
    gp_fit_request req;
    fit_request(&req, X, y, LOO_N, 1, k, NULL, 0);
    req.standardize = 0;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = s2;
    gp_validation_spec spec = {.folds = LOO_N, .seed = 4};
    gp_validation_report r;
    gp_error err;
    if (gp_validate(gp_method_find("exact"), &req, &spec, 1, &r, &err) != GP_OK)
        fail_msg("validate: %s", err.message);
    /* the closed form: K = 0.8 exp(-(x - x')^2 / (2 0.49)) + s2 I */
    double K[LOO_N * LOO_N], Ki[LOO_N * LOO_N], nlpd = 0.0, abs_err = 0.0;
    for (size_t i = 0; i < LOO_N; i++)
        for (size_t j = 0; j < LOO_N; j++) {
            double t = X[i] - X[j];
            K[j * LOO_N + i] = 0.8 * exp(-t * t / (2.0 * 0.49)) + (i == j ? s2 : 0.0);
        }
    invert(K, LOO_N, Ki);
    for (size_t i = 0; i < LOO_N; i++) {
        double a = 0.0;
        for (size_t j = 0; j < LOO_N; j++)
            a += Ki[j * LOO_N + i] * y[j];
        double v = 1.0 / Ki[i * LOO_N + i], e = a * v; /* y_i - mu_i */
        nlpd += 0.5 * (LOG_2PI + log(v) + e * e / v) / LOO_N;
        abs_err += fabs(e) / LOO_N;
    }
    assert_int_equal(r.n_fits, LOO_N);
    assert_int_equal(r.mean.n, LOO_N);
    tu_assert_close(r.mean.nlpd, nlpd, 1e-8, 0.0, "LOO nlpd");
    tu_assert_close(r.mean.rmse, abs_err, 1e-8, 0.0, "LOO mean |error|");
    assert_true(r.sd.nlpd > 0.0);
    assert_true(r.seconds >= r.fit_seconds);
    gp_validation_report_free(&r);
    gp_kernel_free(k);
}

/* ---- every likelihood, progress, cancel, determinism ---- */

static gp_kernel *rbf2(void)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 0, NULL, 0, &err), GP_OK);
    return k;
}

static size_t quick_options(const gp_method *m, gp_option_value *o)
{
    for (size_t i = 0; i < m->n_quick; i++)
        o[i] = (gp_option_value){.name = m->quick[i].name, .number = m->quick[i].number};
    return m->n_quick;
}

#define LK_N 48

static void labels(gp_likelihood lik, const double *X, double *y)
{
    for (size_t i = 0; i < LK_N; i++) {
        double f = sin(2.0 * X[i]) + 0.5 * X[LK_N + i];
        y[i] = lik == GP_LIK_BERNOULLI ? (f > 0.2)
               : lik == GP_LIK_SOFTMAX ? (double)(i % 3)
               : lik == GP_LIK_POISSON || lik == GP_LIK_POISSON_SQ
                   ? floor(exp(f) + 0.5 * (double)(i % 2))
                   : f + 0.1 * cos(7.0 * (double)i);
    }
}

static void validate_ok(const char *method, gp_likelihood lik, gp_validation_report *r,
                        const gp_validation_spec *spec)
{
    const gp_method *m = gp_method_find(method);
    double X[LK_N * 2], y[LK_N];
    for (size_t i = 0; i < LK_N * 2; i++)
        X[i] = 3.0 * sin(0.37 * (double)i * (double)i);
    labels(lik, X, y);
    gp_option_value o[16];
    gp_fit_request req;
    gp_kernel *k = rbf2();
    fit_request(&req, X, y, LK_N, 2, k, o, quick_options(m, o));
    req.likelihood = lik;
    gp_error err;
    if (gp_validate(m, &req, spec, 1, r, &err) != GP_OK)
        fail_msg("%s %s: %s (%s)", method, gp_likelihood_name(lik), err.message, err.field);
    gp_kernel_free(k);
}

static void test_every_likelihood(void **state)
{
    (void)state;
    static const struct {
        const char *method;
        gp_likelihood lik;
    } cases[] = {{"exact", GP_LIK_GAUSSIAN},    {"msrfr", GP_LIK_GAUSSIAN},
                 {"svgp", GP_LIK_BERNOULLI},    {"pls", GP_LIK_BERNOULLI},
                 {"svgp", GP_LIK_POISSON},      {"svgp", GP_LIK_SOFTMAX},
                 {"pls", GP_LIK_POISSON},       {"pls", GP_LIK_POISSON_SQ}};
    gp_validation_spec spec = {.folds = 3, .seed = 2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gp_validation_report r;
        validate_ok(cases[c].method, cases[c].lik, &r, &spec);
        const char *what = cases[c].method;
        assert_int_equal(r.mean.n, LK_N);
        if (!isfinite(r.mean.nlpd) || !isfinite(r.sd.nlpd))
            fail_msg("%s: nlpd %g sd %g", what, r.mean.nlpd, r.sd.nlpd);
        int classes = cases[c].lik == GP_LIK_BERNOULLI || cases[c].lik == GP_LIK_SOFTMAX;
        if (classes) {
            assert_true(r.mean.accuracy >= 0.0 && r.mean.accuracy <= 1.0);
            assert_true(isnan(r.mean.coverage[0]));
        } else {
            assert_true(isfinite(r.mean.rmse));
            for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++)
                assert_true(r.mean.coverage[l] >= 0.0 && r.mean.coverage[l] <= 1.0);
            /* nested intervals: coverage never falls with the level */
            for (size_t f = 0; f < r.n_fits; f++)
                for (size_t l = 1; l < GP_VALIDATION_LEVELS; l++)
                    assert_true(r.per_fit[f].coverage[l] >= r.per_fit[f].coverage[l - 1]);
        }
        if (classes) { /* every held-out row in one bin */
            double total = 0.0, hits = 0.0, correct = 0.0;
            for (size_t b = 0; b < GP_RELIABILITY_BINS; b++) {
                total += r.reliability.count[b];
                hits += r.reliability.sum_y[b];
            }
            tu_assert_within(total, LK_N, 0.0, "%s reliability rows", what);
            for (size_t f = 0; f < r.n_fits; f++)
                correct += r.per_fit[f].accuracy * (double)r.per_fit[f].n;
            /* softmax's table is of the top class: its hits are the correct rows */
            if (cases[c].lik == GP_LIK_SOFTMAX)
                tu_assert_within(hits, correct, 1e-9, "%s top-label hits", what);
        }
        gp_validation_report_free(&r);
    }
}

/* Two outputs modelled jointly (exact ICM), one entry missing: a report per
 * output, averaged per fold; the missing entry is not scored. */
static void test_two_outputs(void **state)
{
    (void)state;
    double X[LK_N * 2], Y[LK_N * 2];
    for (size_t i = 0; i < LK_N * 2; i++)
        X[i] = 3.0 * sin(0.37 * (double)i * (double)i);
    for (size_t i = 0; i < LK_N; i++) {
        Y[i] = sin(X[i]) + 0.3 * X[LK_N + i];
        Y[LK_N + i] = 2.0 * sin(X[i]) - 1.0 + 0.05 * cos(5.0 * (double)i);
    }
    Y[LK_N + 7] = NAN; /* output 1 of row 7 is missing */
    char *keys[1] = {"type"};
    gp_value items[1] = {{.type = GP_VALUE_STRING, .string = "icm"}};
    gp_value obj = {.type = GP_VALUE_OBJECT, .n = 1, .keys = keys, .items = items};
    gp_option_value o[2] = {{.name = "coregionalization", .object = &obj},
                            {.name = "max_iterations", .number = 30}};
    gp_kernel *k = rbf2();
    gp_fit_request req;
    fit_request(&req, X, Y, LK_N, 2, k, o, 2);
    req.n_outputs = 2;
    gp_validation_spec spec = {.folds = 3, .seed = 6};
    gp_validation_report r;
    gp_error err;
    if (gp_validate(gp_method_find("exact"), &req, &spec, 0, &r, &err) != GP_OK)
        fail_msg("validate: %s (%s)", err.message, err.field);
    assert_int_equal(r.n_outputs, 2);
    size_t n0 = 0, n1 = 0;
    for (size_t f = 0; f < r.n_fits; f++) {
        const gp_validation_metrics *a = &r.per_output[2 * f], *b = &r.per_output[2 * f + 1];
        n0 += a->n;
        n1 += b->n;
        tu_assert_close(r.per_fit[f].nlpd, 0.5 * (a->nlpd + b->nlpd), 1e-12, 0.0, "fold %zu", f);
    }
    assert_int_equal(n0, LK_N);
    assert_int_equal(n1, LK_N - 1);
    assert_int_equal(r.mean.n, LK_N);
    assert_true(isfinite(r.output_mean[0].nlpd) && isfinite(r.output_mean[1].nlpd));
    gp_validation_report_free(&r);
    gp_kernel_free(k);
}

typedef struct progress_log {
    int calls, last_total, cancel_at_fit, max_seen;
    int monotone;
    int last;
} progress_log;

static int on_progress(void *ctx, int it, int max, double obj)
{
    (void)obj;
    progress_log *p = ctx;
    p->calls++;
    p->monotone &= it >= p->last;
    p->last = it;
    p->last_total = max;
    p->max_seen = it > p->max_seen ? it : p->max_seen;
    return p->cancel_at_fit && it >= p->cancel_at_fit * max / 4;
}

static void test_progress_and_cancel(void **state)
{
    (void)state;
    const gp_method *m = gp_method_find("sgpr");
    double X[LK_N * 2], y[LK_N];
    for (size_t i = 0; i < LK_N * 2; i++)
        X[i] = 3.0 * sin(0.37 * (double)i * (double)i);
    labels(GP_LIK_GAUSSIAN, X, y);
    gp_option_value o[16];
    gp_fit_request req;
    gp_kernel *k = rbf2();
    fit_request(&req, X, y, LK_N, 2, k, o, quick_options(m, o));
    progress_log log = {.monotone = 1};
    req.progress = on_progress;
    req.progress_ctx = &log;
    gp_validation_spec spec = {.folds = 3, .seed = 2};
    gp_validation_report r;
    gp_error err;
    assert_int_equal(gp_validate(m, &req, &spec, 1, &r, &err), GP_OK);
    gp_validation_report_free(&r);
    int budget = gp_method_max_iterations(m, o, req.n_options);
    assert_true(log.calls > 0);
    assert_int_equal(log.last_total, 4 * budget); /* 3 folds and the final fit */
    assert_true(log.monotone);
    assert_true(log.max_seen > 2 * budget); /* the third fold counts past two budgets */
    assert_true(log.max_seen <= 3 * budget);
    /* a stop asked in the second fold ends the validation cancelled */
    progress_log stop = {.monotone = 1, .cancel_at_fit = 1};
    req.progress_ctx = &stop;
    spec.folds = 4;
    assert_int_equal(gp_validate(m, &req, &spec, 0, &r, &err), GP_ECANCELLED);
    gp_kernel_free(k);
}

static void test_deterministic(void **state)
{
    (void)state;
    gp_validation_spec spec = {.fraction = 0.3, .seed = 8};
    gp_validation_report a, b;
    gp_parallel_set_threads(1);
    validate_ok("svgp", GP_LIK_BERNOULLI, &a, &spec);
    gp_parallel_set_threads(2);
    validate_ok("svgp", GP_LIK_BERNOULLI, &b, &spec);
    gp_parallel_set_threads(0);
    assert_int_equal(a.n_fits, 1);
    assert_memory_equal(a.per_output, b.per_output, sizeof *a.per_output);
    assert_memory_equal(&a.reliability, &b.reliability, sizeof a.reliability);
    gp_validation_report_free(&a);
    gp_validation_report_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kfold_sizes),      cmocka_unit_test(test_split_seeded),
        cmocka_unit_test(test_split_stratified), cmocka_unit_test(test_split_hold_out),
        cmocka_unit_test(test_check_errors),     cmocka_unit_test(test_metrics_sklearn),
        cmocka_unit_test(test_leave_one_out),    cmocka_unit_test(test_every_likelihood),
        cmocka_unit_test(test_progress_and_cancel), cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_two_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
