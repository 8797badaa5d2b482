/* Method pls (docs/methods/sparse-variational-and-pls.md §5.2, oracles §7):
 *   T1  k-mode closed form with M = N landmarks = the exact GP posterior;
 *   T2  its mean = Nystrom KRR with lambda = s2 / N (same Z);
 *   T3  pula and mala particles vs the closed form (mean, covariance), and
 *       pula's O(eta) variance bias 1 / (1 - eta/2) on a Gaussian target;
 *   T4  k-mode closed form = sgpr (Titsias) with the same Z and hyperparameters;
 *   T5  r-mode with M = N = the exact GP with kernel r(X, X) = K^2 / N;
 *   T9  poisson_sq particles bimodal and symmetric about 0;
 * plus a bernoulli fit's probabilities, the potential's gradient against
 * finite differences, export/import bit for bit with corrupt arrays refused,
 * and thread-count independence of the samplers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/model/hyperspec.h"
#include "core/model/method.h"
#include "core/base/state.h"
#include "core/kernel/kernel.h"
#include "core/linalg/linalg.h"
#include "core/methods/pls/pls.h"
#include "core/methods/sgpr.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

#define N 30
#define D 2
#define MS 6 /* test points */
#define NOISE 0.05
#define LS 0.6
#define AMP 1.3

typedef struct toy {
    double X[N * D], y[N], Xs[MS * D];
    gp_kernel *k;
} toy;

static void make_toy(toy *t)
{
    gp_rng rng;
    gp_rng_seed(&rng, 99);
    for (size_t i = 0; i < N * D; i++)
        t->X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < N; i++)
        t->y[i] = sin(1.5 * t->X[i]) + 0.4 * t->X[N + i] + 0.2 * gp_rng_normal(&rng);
    for (size_t i = 0; i < MS * D; i++)
        t->Xs[i] = 3.0 * gp_rng_uniform(&rng) - 1.5;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&t->k, GP_KERNEL_RBF, D, 0, NULL, 0, &err), GP_OK);
    t->k->log_variance = log(AMP);
    t->k->log_lengthscale[0] = log(LS);
}

/* A request on raw units with the toy's kernel and noise held fixed. */
static void fixed_request(gp_fit_request *req, const toy *t, const gp_option_value *o, size_t n)
{
    fit_request(req, t->X, t->y, N, D, t->k, o, n);
    req->standardize = 0;
    req->noise_given = 1;
    req->noise_fixed = 1;
    req->noise_variance = NOISE;
}

/* Points as the kernel reads them (d x n, point-major). */
static void point_major(const double *X, size_t n, double *P)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < D; k++)
            P[i * D + k] = X[k * n + i];
}

/* Exact GP posterior mean/var at Xs for the Gram K (N x N, overwritten),
 * cross C (N x MS), prior variances kss (MS), noise s2. */
static void gp_posterior(double *K, const double *C, const double *kss, const double *y,
                         double *mu, double *var)
{
    double a[N], W[N * MS];
    for (size_t i = 0; i < N; i++)
        K[i * N + i] += NOISE;
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', N, K, N), 0);
    memcpy(a, y, sizeof a);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', N, 1, K, N, a, N), 0);
    memcpy(W, C, sizeof W);
    assert_int_equal(LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'L', 'N', 'N', N, MS, K, N, W, N), 0);
    for (size_t j = 0; j < MS; j++) {
        mu[j] = 0.0;
        var[j] = kss[j];
        for (size_t i = 0; i < N; i++) {
            mu[j] += C[j * N + i] * a[i];
            var[j] -= W[j * N + i] * W[j * N + i];
        }
    }
}

static void latent(const gp_model *m, const double *Xs, double *mu, double *var)
{
    predict_ok(m, Xs, MS, D, 0, mu, var, NULL);
}

static void test_t1_exact_limit(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    gp_option_value o[] = {{"landmarks", N, NULL, NULL}, {"optimize", 0, NULL, NULL},
                           {"eig_rel_tol", 0, NULL, NULL}};
    gp_fit_request req;
    fixed_request(&req, &t, o, 3);
    gp_model *m = fit_ok(&gp_method_pls, &req, "T1");
    assert_int_equal((int)find_info(m, "eigenpairs")->number, N);
    double P[N * D], Ps[MS * D], K[N * N], C[N * MS], kss[MS], mu[MS], var[MS], gm[MS], gv[MS];
    point_major(t.X, N, P);
    point_major(t.Xs, MS, Ps);
    gp_kernel_gram(t.k, P, N, K, N);
    gp_kernel_cross(t.k, P, N, Ps, MS, C, N);
    for (size_t j = 0; j < MS; j++)
        kss[j] = gp_kernel_diag(t.k, Ps + j * D);
    gp_posterior(K, C, kss, t.y, gm, gv);
    latent(m, t.Xs, mu, var);
    tu_assert_close_array(mu, gm, MS, 1e-7, 1e-8, "T1 mean");
    tu_assert_close_array(var, gv, MS, 1e-6, 1e-8, "T1 variance");
    gp_model_free(m);
    gp_kernel_free(t.k);
}

/* Z of a fitted model (raw units: standardize off). */
static size_t exported_z(const gp_model *m, double *Z)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(m, &st, &err), GP_OK);
    const gp_named_array *z = gp_state_find(&st, "Z");
    assert_non_null(z);
    memcpy(Z, z->data, z->rows * z->cols * sizeof *Z);
    size_t M = z->cols;
    gp_state_free(&st);
    return M;
}

static void test_t2_nystrom_krr(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    gp_option_value o[] = {{"landmarks", 8, NULL, NULL}, {"optimize", 0, NULL, NULL},
                           {"eig_rel_tol", 0, NULL, NULL}};
    gp_fit_request req;
    fixed_request(&req, &t, o, 3);
    gp_model *m = fit_ok(&gp_method_pls, &req, "T2");
    double Z[8 * D], P[N * D], Ps[MS * D], Kzx[8 * N], Kzz[64], Kzs[8 * MS], A[64], al[8];
    size_t M = exported_z(m, Z);
    assert_int_equal((int)M, 8);
    point_major(t.X, N, P);
    point_major(t.Xs, MS, Ps);
    gp_kernel_cross(t.k, Z, M, P, N, Kzx, M);
    gp_kernel_gram(t.k, Z, M, Kzz, M);
    gp_kernel_cross(t.k, Z, M, Ps, MS, Kzs, M);
    /* alpha = (K_ZX K_XZ + N lambda K_ZZ)^{-1} K_ZX y, N lambda = s2 */
    for (size_t j = 0; j < M; j++) {
        al[j] = 0.0;
        for (size_t n = 0; n < N; n++)
            al[j] += Kzx[n * M + j] * t.y[n];
        for (size_t i = 0; i < M; i++) {
            A[j * M + i] = NOISE * Kzz[j * M + i];
            for (size_t n = 0; n < N; n++)
                A[j * M + i] += Kzx[n * M + i] * Kzx[n * M + j];
        }
    }
    assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)M, 1, A, (lapack_int)M, al,
                                   (lapack_int)M), 0);
    double mu[MS], var[MS], want[MS];
    latent(m, t.Xs, mu, var);
    for (size_t j = 0; j < MS; j++) {
        want[j] = 0.0;
        for (size_t i = 0; i < M; i++)
            want[j] += Kzs[j * M + i] * al[i];
    }
    tu_assert_close_array(mu, want, MS, 1e-8, 1e-9, "T2 mean vs Nystrom KRR");
    gp_model_free(m);
    gp_kernel_free(t.k);
}

static void test_t4_sgpr(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    t.k->fixed = GP_FIX_ALL;
    gp_option_value o[] = {{"landmarks", 8, NULL, NULL}, {"optimize", 0, NULL, NULL},
                           {"eig_rel_tol", 0, NULL, NULL}};
    gp_option_value os[] = {{"inducing", 8, NULL, NULL}, {"optimize_inducing", 0, NULL, NULL},
                            {"reselect", 0, NULL, NULL}};
    gp_fit_request req, rs;
    fixed_request(&req, &t, o, 3);
    fixed_request(&rs, &t, os, 3);
    gp_model *m = fit_ok(&gp_method_pls, &req, "T4 pls");
    gp_model *s = fit_ok(&gp_method_sgpr, &rs, "T4 sgpr");
    double mu[MS], var[MS], sm[MS], sv[MS];
    latent(m, t.Xs, mu, var);
    latent(s, t.Xs, sm, sv);
    tu_assert_close_array(mu, sm, MS, 1e-7, 1e-9, "T4 mean vs sgpr");
    /* sgpr factors K_ZZ with the jitter policy's 1e-8 mean(diag) here: a
     * relative 1e-6 on the variances. */
    tu_assert_close_array(var, sv, MS, 1e-5, 1e-9, "T4 variance vs sgpr");
    predict_ok(m, t.Xs, MS, D, 1, mu, var, NULL);
    predict_ok(s, t.Xs, MS, D, 1, sm, sv, NULL);
    tu_assert_close_array(var, sv, MS, 1e-5, 1e-9, "T4 observation variance vs sgpr");
    gp_model_free(m);
    gp_model_free(s);
    gp_kernel_free(t.k);
}

static void test_t5_r_mode(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    gp_option_value o[] = {{"landmarks", N, NULL, NULL}, {"optimize", 0, NULL, NULL},
                           {"eig_rel_tol", 0, NULL, NULL}, {"prior_mode", NAN, "r", NULL}};
    gp_fit_request req;
    fixed_request(&req, &t, o, 4);
    gp_model *m = fit_ok(&gp_method_pls, &req, "T5");
    assert_int_equal((int)find_info(m, "eigenpairs")->number, N);
    double P[N * D], Ps[MS * D], K[N * N], Kc[N * MS], Kr[N * N], Cr[N * MS], kss[MS];
    point_major(t.X, N, P);
    point_major(t.Xs, MS, Ps);
    gp_kernel_gram(t.k, P, N, K, N);
    gp_kernel_cross(t.k, P, N, Ps, MS, Kc, N);
    for (size_t j = 0; j < N; j++) /* r(X, X) = K K / N, r(X, x*) = K k(X, x*) / N */
        for (size_t i = 0; i < N; i++) {
            Kr[j * N + i] = 0.0;
            for (size_t l = 0; l < N; l++)
                Kr[j * N + i] += K[l * N + i] * K[j * N + l] / N;
        }
    for (size_t j = 0; j < MS; j++) {
        kss[j] = 0.0;
        for (size_t i = 0; i < N; i++) {
            Cr[j * N + i] = 0.0;
            for (size_t l = 0; l < N; l++)
                Cr[j * N + i] += K[l * N + i] * Kc[j * N + l] / N;
            kss[j] += Kc[j * N + i] * Kc[j * N + i] / N;
        }
    }
    double gm[MS], gv[MS], mu[MS], var[MS];
    gp_posterior(Kr, Cr, kss, t.y, gm, gv);
    latent(m, t.Xs, mu, var);
    tu_assert_close_array(mu, gm, MS, 1e-6, 1e-8, "T5 mean vs exact GP with kernel r");
    tu_assert_close_array(var, gv, MS, 1e-5, 1e-8, "T5 variance vs exact GP with kernel r");
    gp_model_free(m);
    gp_kernel_free(t.k);
}

/* ---- T3 ---- */

typedef struct coef_law {
    size_t mk, J;
    double mean[64], cov[64 * 64];
} coef_law;

/* The coefficient law of a model: (mu, H^{-1}) for the closed form, the
 * particles' mean and population covariance otherwise. */
static void coefficient_law(const gp_model *m, coef_law *c)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(m, &st, &err), GP_OK);
    const gp_named_array *a = gp_state_find(&st, "particles");
    if (a == NULL) {
        const gp_named_array *mu = gp_state_find(&st, "mu");
        c->mk = mu->rows;
        c->J = 0;
        double L[64 * 64];
        const gp_named_array *h = gp_state_find(&st, "H_chol");
        assert_non_null(h);
        gp_unpack_lower(h->data, c->mk, L, c->mk);
        assert_int_equal(LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)c->mk, L,
                                        (lapack_int)c->mk), 0);
        memcpy(c->mean, mu->data, c->mk * sizeof *c->mean);
        for (size_t j = 0; j < c->mk; j++)
            for (size_t i = 0; i < c->mk; i++)
                c->cov[j * c->mk + i] = i >= j ? L[j * c->mk + i] : L[i * c->mk + j];
    } else {
        c->mk = a->rows;
        c->J = a->cols;
        for (size_t i = 0; i < c->mk; i++) {
            c->mean[i] = 0.0;
            for (size_t j = 0; j < c->J; j++)
                c->mean[i] += a->data[j * c->mk + i] / (double)c->J;
        }
        for (size_t p = 0; p < c->mk; p++)
            for (size_t q = 0; q < c->mk; q++) {
                double s = 0.0;
                for (size_t j = 0; j < c->J; j++)
                    s += (a->data[j * c->mk + p] - c->mean[p]) *
                         (a->data[j * c->mk + q] - c->mean[q]);
                c->cov[q * c->mk + p] = s / (double)c->J;
            }
    }
    gp_state_free(&st);
}

/* Particles vs the closed form scaled by `inflate`, within 5 Monte-Carlo
 * standard errors (mean: sqrt(C_ii / J); covariance: sqrt((C_pp C_qq +
 * C_pq^2) / J)). */
static void compare_law(const coef_law *p, const coef_law *c, double inflate, const char *what)
{
    assert_int_equal(p->mk, c->mk);
    size_t mk = p->mk;
    double J = (double)p->J;
    for (size_t i = 0; i < mk; i++)
        tu_assert_within(p->mean[i], c->mean[i], 5.0 * sqrt(inflate * c->cov[i * mk + i] / J),
                         "%s: mean[%zu]", what, i);
    for (size_t q = 0; q < mk; q++)
        for (size_t r = 0; r < mk; r++) {
            double cqr = inflate * c->cov[r * mk + q], cqq = inflate * c->cov[q * mk + q],
                   crr = inflate * c->cov[r * mk + r];
            tu_assert_within(p->cov[r * mk + q], cqr, 5.0 * sqrt((cqq * crr + cqr * cqr) / J),
                             "%s: cov[%zu][%zu]", what, q, r);
        }
}

static gp_model *fit_sampler(const toy *t, const char *sampler, double eta, size_t J)
{
    gp_option_value o[] = {{"landmarks", 6, NULL, NULL}, {"optimize", 0, NULL, NULL},
                           {"sampler", NAN, sampler, NULL}, {"step", eta, NULL, NULL},
                           {"particles", (double)J, NULL, NULL}, {"steps", 400, NULL, NULL}};
    gp_fit_request req;
    fixed_request(&req, t, o, 6);
    return fit_ok(&gp_method_pls, &req, sampler);
}

static void test_t3_samplers(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    const size_t J = 4000;
    gp_model *cf = fit_sampler(&t, "closed_form", 0.05, J);
    coef_law c, p;
    coefficient_law(cf, &c);
    /* pula on a Gaussian target with the exact preconditioner is an AR(1)
     * chain whose stationary covariance is H^{-1} / (1 - eta/2). */
    const double etas[2] = {0.05, 0.3};
    for (size_t e = 0; e < 2; e++) {
        gp_model *m = fit_sampler(&t, "pula", etas[e], J);
        coefficient_law(m, &p);
        compare_law(&p, &c, 1.0 / (1.0 - etas[e] / 2.0), "pula vs closed form with O(eta) bias");
        if (e == 1) { /* the bias is there: the unscaled law fails by far */
            double ratio = 0.0;
            for (size_t i = 0; i < c.mk; i++)
                ratio += p.cov[i * c.mk + i] / c.cov[i * c.mk + i] / (double)c.mk;
            tu_assert_within(ratio, 1.0 / 0.85, 0.03, "pula variance inflation at eta 0.3");
        }
        gp_model_free(m);
    }
    gp_model *mm = fit_sampler(&t, "mala", 0.3, J);
    coefficient_law(mm, &p);
    compare_law(&p, &c, 1.0, "mala vs closed form (no bias)");
    double acc = find_info(mm, "acceptance_rate")->number;
    assert_true(acc > 0.5 && acc <= 1.0);
    gp_model_free(mm);
    gp_model_free(cf);
    gp_kernel_free(t.k);
}

/* The Laplace start (precondition = laplace, zero steps) on a Gaussian
 * target draws N(a*, H*^{-1}) = the closed form exactly: no eta bias. */
static void test_laplace_start(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    const size_t J = 4000;
    gp_model *cf = fit_sampler(&t, "closed_form", 0.05, J);
    gp_option_value o[] = {{"landmarks", 6, NULL, NULL},        {"optimize", 0, NULL, NULL},
                           {"sampler", NAN, "pula", NULL},       {"particles", (double)J, NULL, NULL},
                           {"steps", 0, NULL, NULL},             {"precondition", NAN, "laplace", NULL}};
    gp_fit_request req;
    fixed_request(&req, &t, o, 6);
    gp_model *m = fit_ok(&gp_method_pls, &req, "laplace start");
    coef_law c, p;
    coefficient_law(cf, &c);
    coefficient_law(m, &p);
    compare_law(&p, &c, 1.0, "laplace start vs closed form");
    gp_model_free(m);
    gp_model_free(cf);
    gp_kernel_free(t.k);
}

/* ---- non-Gaussian likelihoods ---- */

typedef struct lik_pred {
    double mean[64], var[64], cm[64 * 512], cv[64 * 512];
    double lm[64], lv[64], om[64], ov[64], rm[64], rv[64];
} lik_pred;

/* Latent predictive with its components (the buffers of the observation
 * outputs are given as gp_model_predict asks for them with a likelihood). */
static void predict_components(const gp_model *m, const double *Xs, size_t ms, lik_pred *p)
{
    assert_true(ms <= 64 && gp_model_components(m) <= 512);
    gp_predict_request pr = {.X = Xs, .m = ms, .d = m->input_dim, .components = 1};
    gp_prediction out = {.mean = p->mean, .variance = p->var, .component_mean = p->cm,
                         .component_variance = p->cv, .latent_mean = p->lm,
                         .latent_variance = p->lv, .obs_mean = p->om, .obs_variance = p->ov,
                         .rate_mean = p->rm, .rate_variance = p->rv};
    gp_error err;
    int rc = gp_model_predict(m, &pr, &out, &err);
    if (rc != GP_OK)
        fail_msg("predict: %s", err.message);
}

static double logistic(double f)
{
    return 1.0 / (1.0 + exp(-f));
}

/* p(y = 1) from the mixture: mean over components of the probit-approximated
 * E logistic(f), f ~ N(mu, v). */
static double prob_one(const lik_pred *p, size_t i, size_t ms, size_t K)
{
    double s = 0.0;
    for (size_t k = 0; k < K; k++)
        s += logistic(p->cm[k * ms + i] / sqrt(1.0 + 3.14159265358979 * p->cv[k * ms + i] / 8.0));
    return s / (double)K;
}

#define NB 200
#define TB 60

static void bernoulli_problem(double *X, double *y, double *Xt, double *pt, size_t d)
{
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t i = 0; i < NB; i++) {
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
        X[NB + i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
        double f = 3.0 * sin(1.5 * X[i]) + 2.0 * X[NB + i];
        y[i] = gp_rng_uniform(&rng) < logistic(f) ? 1.0 : 0.0;
    }
    for (size_t i = 0; i < TB; i++) {
        Xt[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
        Xt[TB + i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
        pt[i] = logistic(3.0 * sin(1.5 * Xt[i]) + 2.0 * Xt[TB + i]);
    }
    (void)d;
}

static gp_model *fit_bernoulli(const double *X, const double *y, gp_kernel *k, const char *smp)
{
    gp_option_value o[] = {{"particles", 50, NULL, NULL}, {"steps", 300, NULL, NULL},
                           {"sampler", NAN, smp, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, NB, 2, k, o, 3);
    req.likelihood = GP_LIK_BERNOULLI;
    return fit_ok(&gp_method_pls, &req, "bernoulli");
}

static void test_bernoulli(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    gp_model *m = fit_bernoulli(X, y, k, "pula");
    assert_int_equal((int)gp_model_components(m), 50);
    static lik_pred p;
    predict_components(m, Xt, TB, &p);
    double brier = 0.0, brier0 = 0.0, acc = 0.0;
    for (size_t i = 0; i < TB; i++) {
        double q = prob_one(&p, i, TB, 50);
        assert_true(q > 0.0 && q < 1.0);
        brier += (q - pt[i]) * (q - pt[i]) / TB;
        brier0 += (0.5 - pt[i]) * (0.5 - pt[i]) / TB;
        acc += ((q > 0.5) == (pt[i] > 0.5)) / (double)TB;
    }
    print_message("bernoulli: squared error of p %.4f (p = 1/2: %.4f), agreement %.3f\n", brier,
                  brier0, acc);
    assert_true(brier < 0.25 * brier0);
    assert_true(acc > 0.85);
    gp_model_free(m);
    gp_kernel_free(k);
}

/* ---- A1 by the labels' Laplace marginal likelihood (option hyper) ---- */

#define NL 14
#define DL 3

typedef struct lap_ctx {
    gp_kernel *k;
    gp_lik lik;
    double Xt[NL * DL], y[NL], off[NL];
    const double *offp;
} lap_ctx;

static double lap_value(void *ctx, const double *x)
{
    lap_ctx *c = ctx;
    gp_kernel_set_params(c->k, x);
    double lml = NAN;
    gp_error err;
    assert_int_equal(gp_pls_laplace_lml(c->k, &c->lik, c->Xt, NL, c->y, c->offp, &lml, NULL, &err),
                     GP_OK);
    return lml;
}

static void lap_problem(lap_ctx *c, gp_likelihood l, int with_offset, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&c->k, GP_KERNEL_RBF, DL, 1, NULL, 0, &err), GP_OK);
    c->lik = (gp_lik){l, 1.0};
    for (size_t i = 0; i < NL * DL; i++)
        c->Xt[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < NL; i++) {
        double f = 1.5 * sin(1.3 * c->Xt[i * DL]) + c->Xt[i * DL + 1];
        c->y[i] = l == GP_LIK_BERNOULLI ? (double)(gp_rng_uniform(&rng) < logistic(f))
                                        : (double)gp_rng_below(&rng, 1 + (uint64_t)(3.0 * exp(0.5 * f)));
        c->off[i] = 0.3 * gp_rng_normal(&rng) - (l == GP_LIK_POISSON ? 0.5 : 0.0);
    }
    c->offp = with_offset ? c->off : NULL;
    double theta[1 + DL] = {log(1.7), log(0.8), log(1.4), log(2.5)};
    gp_kernel_set_params(c->k, theta);
}

/* d log q / d log-parameters against central differences, for bernoulli and
 * poisson, with and without a mean offset. */
static void test_laplace_lml_gradient(void **state)
{
    (void)state;
    const gp_likelihood liks[2] = {GP_LIK_BERNOULLI, GP_LIK_POISSON};
    for (size_t l = 0; l < 2; l++)
        for (int off = 0; off < 2; off++) {
            lap_ctx c;
            lap_problem(&c, liks[l], off, 21 + l);
            size_t np = gp_kernel_n_params(c.k);
            double x[1 + DL], g[1 + DL], lml;
            gp_error err;
            gp_kernel_get_params(c.k, x);
            assert_int_equal(gp_pls_laplace_lml(c.k, &c.lik, c.Xt, NL, c.y, c.offp, &lml, g, &err),
                             GP_OK);
            assert_true(isfinite(lml));
            tu_fd_spec spec = {.step = 1e-5, .rtol = 1e-5, .atol = 1e-7, .floor = 1.0};
            tu_check_gradient(lap_value, &c, x, np, g, spec, NULL, gp_likelihood_name(liks[l]));
            gp_kernel_free(c.k);
        }
}

/* An independent fixture of the value: the weight-space Laplace of the
 * potential (gp_pls_laplace_mode) with features Phi = L^T, K = L L^T, is
 * the same approximation (f = Phi^T a, a ~ N(0, I) is GP(0, K)):
 * log q = -V(a*) - log det(I + Phi W Phi^T) / 2, and by Sylvester's
 * identity the determinant is that of B = I + W^(1/2) K W^(1/2). */
static void test_laplace_lml_weight_space(void **state)
{
    (void)state;
    const gp_likelihood liks[2] = {GP_LIK_BERNOULLI, GP_LIK_POISSON};
    for (size_t l = 0; l < 2; l++) {
        lap_ctx c;
        lap_problem(&c, liks[l], 0, 40 + l);
        double K[NL * NL], Phi[NL * NL], H[NL * NL], a[NL] = {0}, lml;
        gp_error err;
        gp_kernel_gram(c.k, c.Xt, NL, K, NL);
        assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', NL, K, NL), 0);
        for (size_t j = 0; j < NL; j++) /* Phi[m, i] = L[i, m] */
            for (size_t i = 0; i < NL; i++)
                Phi[i * NL + j] = j <= i ? K[j * NL + i] : 0.0;
        double V = gp_pls_laplace_mode(&c.lik, Phi, NL, NL, c.y, a, H);
        double want = -V - 0.5 * gp_chol_logdet(H, NL, NL);
        assert_int_equal(gp_pls_laplace_lml(c.k, &c.lik, c.Xt, NL, c.y, NULL, &lml, NULL, &err),
                         GP_OK);
        tu_assert_close(lml, want, 1e-9, 1e-9, "%s: log q against the weight-space Laplace",
                        gp_likelihood_name(liks[l]));
        gp_kernel_free(c.k);
    }
}

/* A bernoulli fit with option hyper; spec: the request's priors (NULL:
 * none stated, an empty spec: "priors": "none"). */
static gp_model *fit_hyper(const double *X, const double *y, gp_kernel *k, const char *hyper,
                           const gp_hyper_spec *spec)
{
    gp_option_value o[] = {{"particles", 50, NULL, NULL}, {"steps", 100, NULL, NULL},
                           {"hyper", NAN, hyper, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, NB, 2, k, o, 3);
    req.likelihood = GP_LIK_BERNOULLI;
    req.hyper = spec;
    return fit_ok(&gp_method_pls, &req, hyper);
}

/* The fitted hyperparameters maximise the objective they were fitted by:
 * with N <= N_sub the one subset is all the points, and, without priors
 * ("priors": "none"), at the model's kernel the gradient of log q on the
 * model's points vanishes and a step of 0.05 in any log-parameter lowers
 * log q. With nothing stated an ARD laplace fit carries the default
 * priors (the preset), a regression fit none. */
static void test_laplace_hyper_optimum(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    gp_hyper_spec *none;
    assert_int_equal(gp_hyper_spec_new(&none, k, &err), GP_OK);
    gp_model *m = fit_hyper(X, y, k, "laplace", none);
    gp_model *mp = fit_hyper(X, y, k, "laplace", NULL), *mr = fit_hyper(X, y, k, "regression", NULL);
    assert_non_null(mp->hyper);
    assert_true(mp->hyper->preset);
    assert_null(mr->hyper);
    gp_model_free(mp);
    gp_model_free(mr);
    gp_hyper_spec_free(none);
    double *P = NULL, x[3], g[3], lml, lml2;
    assert_int_equal(gp_model_points(m, X, NB, &P, &err), GP_OK);
    gp_lik lik = {GP_LIK_BERNOULLI, 1.0};
    gp_kernel *km;
    assert_int_equal(gp_kernel_copy(&km, m->kernel, &err), GP_OK);
    assert_int_equal(gp_pls_laplace_lml(km, &lik, P, NB, y, NULL, &lml, g, &err), GP_OK);
    gp_kernel_get_params(km, x);
    for (size_t i = 0; i < 3; i++) {
        print_message("laplace optimum: theta[%zu] = %.4f, d log q = %.2e (log q %.4f)\n", i, x[i],
                      g[i], lml);
        tu_assert_within(g[i], 0.0, 1e-3, "d log q / d theta[%zu] at the fit", i);
        for (int s = -1; s <= 1; s += 2) {
            double xi = x[i];
            x[i] = xi + 0.05 * s;
            gp_kernel_set_params(km, x);
            assert_int_equal(gp_pls_laplace_lml(km, &lik, P, NB, y, NULL, &lml2, NULL, &err),
                             GP_OK);
            assert_true(lml2 < lml);
            x[i] = xi;
        }
        gp_kernel_set_params(km, x);
    }
    free(P);
    gp_kernel_free(km);
    gp_model_free(m);
    gp_kernel_free(k);
}

/* On data drawn from a logistic GP-like function, the labels' likelihood
 * fits a better model than the regression on 0/1 labels (both without
 * priors: the objectives alone): lower expected log loss against the true
 * probabilities at held-out points. */
static void test_laplace_hyper_beats_regression(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    const char *modes[2] = {"laplace", "regression"};
    double loss[2];
    gp_hyper_spec *none;
    assert_int_equal(gp_hyper_spec_new(&none, k, &err), GP_OK);
    for (int j = 0; j < 2; j++) {
        gp_model *m = fit_hyper(X, y, k, modes[j], none);
        static lik_pred p;
        predict_components(m, Xt, TB, &p);
        loss[j] = 0.0;
        for (size_t i = 0; i < TB; i++) {
            double q = prob_one(&p, i, TB, 50);
            loss[j] -= (pt[i] * log(q) + (1.0 - pt[i]) * log(1.0 - q)) / TB;
        }
        gp_model_free(m);
    }
    print_message("expected log loss: laplace %.4f, regression %.4f\n", loss[0], loss[1]);
    assert_true(loss[0] < loss[1]);
    gp_hyper_spec_free(none);
    gp_kernel_free(k);
}

/* k-means landmarks are moved onto the data ([D], §5.2 as implemented): every
 * landmark of a bernoulli fit (auto = kmeans) is a training input, no two the
 * same, and the inputs are on an integer grid so a centre between values
 * would show. */
static void test_kmeans_landmarks_on_data(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    for (size_t i = 0; i < 2 * NB; i++)
        X[i] = round(3.0 * X[i]); /* discrete inputs */
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    gp_option_value o[] = {{"particles", 10, NULL, NULL}, {"steps", 5, NULL, NULL}, {"landmarks", 12, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, NB, 2, k, o, 3);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *m = fit_ok(&gp_method_pls, &req, "kmeans landmarks");
    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(m, &st, &err), GP_OK);
    const gp_named_array *z = gp_state_find(&st, "Z");
    assert_non_null(z);
    assert_int_equal(z->rows, 2);
    double *P;
    assert_int_equal(gp_model_points(m, X, NB, &P, &err), GP_OK); /* standardised, 2 x NB */
    for (size_t j = 0; j < z->cols; j++) {
        int found = 0;
        for (size_t i = 0; i < NB && !found; i++)
            found = P[2 * i] == z->data[2 * j] && P[2 * i + 1] == z->data[2 * j + 1];
        if (!found)
            fail_msg("landmark %zu (%g, %g) is not a training input", j, z->data[2 * j],
                     z->data[2 * j + 1]);
        for (size_t l = 0; l < j; l++)
            if (z->data[2 * l] == z->data[2 * j] && z->data[2 * l + 1] == z->data[2 * j + 1])
                fail_msg("landmarks %zu and %zu are the same input", l, j);
    }
    free(P);
    gp_state_free(&st);
    gp_model_free(m);
    gp_kernel_free(k);
}

/* Poisson draws by inversion (small rates), so the test needs nothing else. */
static double poisson_draw(gp_rng *rng, double rate)
{
    double u = gp_rng_uniform(rng), p = exp(-rate), c = p, k = 0.0;
    while (u > c && k < 1000.0) {
        k += 1.0;
        p *= rate / k;
        c += p;
    }
    return k;
}

static void test_t9_poisson_sq_bimodal(void **state)
{
    (void)state;
    enum { NP = 120, JP = 200 };
    double X[NP], y[NP], x0[1] = {0.1};
    gp_rng rng;
    gp_rng_seed(&rng, 8);
    for (size_t i = 0; i < NP; i++) {
        X[i] = 2.0 * gp_rng_uniform(&rng) - 1.0;
        double f = 2.0 + sin(3.0 * X[i]);
        y[i] = poisson_draw(&rng, f * f);
    }
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    gp_option_value o[] = {{"particles", JP, NULL, NULL}, {"steps", 500, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, NP, 1, k, o, 2);
    req.likelihood = GP_LIK_POISSON_SQ;
    gp_model *m = fit_ok(&gp_method_pls, &req, "poisson_sq");
    static lik_pred p;
    predict_components(m, x0, 1, &p);
    size_t pos = 0, small = 0;
    double sp = 0.0, sn = 0.0;
    for (size_t j = 0; j < JP; j++) {
        double f = p.cm[j];
        if (f > 0) {
            pos++;
            sp += f;
        } else {
            sn += f;
        }
        small += fabs(f) < 0.5;
    }
    double mp = sp / (double)pos, mn = sn / (double)(JP - pos);
    print_message("poisson_sq at x = 0.1: %zu of %d particles positive, means %.3f and %.3f, "
                  "%zu near 0\n", pos, JP, mp, mn, small);
    assert_true(pos > JP * 3 / 10 && pos < JP * 7 / 10);  /* both modes, about equally */
    tu_assert_within(mp, -mn, 0.2 * mp, "T9: the modes mirror each other");
    tu_assert_within(mp, 2.0 + sin(0.3), 0.6, "T9: the mode is at sqrt(rate)");
    assert_true(small < JP / 10); /* bimodal: no mass at 0 */
    gp_model_free(m);
    gp_kernel_free(k);
}

/* ---- the potential's gradient ---- */

typedef struct pot_ctx {
    gp_lik lik;
    double Phi[5 * 12], y[12];
} pot_ctx;

static double pot_value(void *ctx, const double *a)
{
    pot_ctx *c = ctx;
    return gp_pls_potential(&c->lik, c->Phi, 5, 12, c->y, a, NULL);
}

static void test_potential_gradient(void **state)
{
    (void)state;
    const gp_likelihood liks[4] = {GP_LIK_GAUSSIAN, GP_LIK_BERNOULLI, GP_LIK_POISSON,
                                   GP_LIK_POISSON_SQ};
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    for (size_t l = 0; l < 4; l++) {
        pot_ctx c = {.lik = {liks[l], 0.3}};
        double a[5], g[5];
        gp_rng_normal_fill(&rng, c.Phi, 5 * 12);
        for (size_t i = 0; i < 60; i++)
            c.Phi[i] *= 0.4;
        for (size_t i = 0; i < 12; i++)
            c.y[i] = liks[l] == GP_LIK_GAUSSIAN    ? gp_rng_normal(&rng)
                     : liks[l] == GP_LIK_BERNOULLI ? (double)(gp_rng_uniform(&rng) < 0.5)
                                                   : (double)gp_rng_below(&rng, 5);
        gp_rng_normal_fill(&rng, a, 5);
        pot_value(&c, a);
        gp_pls_potential(&c.lik, c.Phi, 5, 12, c.y, a, g);
        tu_fd_spec spec = {.step = 1e-6, .rtol = 1e-6, .atol = 1e-7, .floor = 1.0};
        tu_check_gradient(pot_value, &c, a, 5, g, spec, NULL, gp_likelihood_name(liks[l]));
    }
}

/* The Laplace mode: grad V(a*) = 0; the factor is of I + Phi W Phi^T at a*
 * (W = -d2 log p); gaussian: a* = (I + Phi Phi^T / s2)^{-1} Phi y / s2. */
static void test_laplace_mode(void **state)
{
    (void)state;
    const gp_likelihood liks[3] = {GP_LIK_GAUSSIAN, GP_LIK_BERNOULLI, GP_LIK_POISSON};
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    for (size_t l = 0; l < 3; l++) {
        pot_ctx c = {.lik = {liks[l], 0.3}};
        double a[5] = {0}, g[5], L[25], H[25], f[12];
        gp_rng_normal_fill(&rng, c.Phi, 5 * 12);
        for (size_t i = 0; i < 12; i++)
            c.y[i] = liks[l] == GP_LIK_GAUSSIAN    ? gp_rng_normal(&rng)
                     : liks[l] == GP_LIK_BERNOULLI ? (double)(gp_rng_uniform(&rng) < 0.5)
                                                   : (double)gp_rng_below(&rng, 6);
        double V = gp_pls_laplace_mode(&c.lik, c.Phi, 5, 12, c.y, a, L);
        assert_true(isfinite(V));
        tu_assert_within(gp_pls_potential(&c.lik, c.Phi, 5, 12, c.y, a, g), V, 1e-10,
                         "%s: V(a*)", gp_likelihood_name(liks[l]));
        for (size_t m = 0; m < 5; m++)
            tu_assert_within(g[m], 0.0, 1e-8, "%s: grad V(a*)[%zu]",
                             gp_likelihood_name(liks[l]), m);
        for (size_t i = 0; i < 12; i++) {
            f[i] = 0.0;
            for (size_t m = 0; m < 5; m++)
                f[i] += c.Phi[i * 5 + m] * a[m];
        }
        for (size_t q = 0; q < 5; q++)
            for (size_t r = 0; r <= q; r++) {
                double h = q == r, llt = 0.0;
                for (size_t i = 0; i < 12; i++) {
                    double d2;
                    gp_lik_derivatives(&c.lik, c.y[i], f[i], NULL, &d2);
                    h -= c.Phi[i * 5 + q] * d2 * c.Phi[i * 5 + r];
                }
                for (size_t k = 0; k <= r; k++)
                    llt += L[k * 5 + q] * L[k * 5 + r];
                H[r * 5 + q] = h;
                tu_assert_within(llt, h, 1e-9 * (1.0 + fabs(h)), "%s: H[%zu][%zu]",
                                 gp_likelihood_name(liks[l]), q, r);
            }
        if (liks[l] == GP_LIK_GAUSSIAN) { /* direct solve: H a = Phi y / s2 */
            double b[5];
            for (size_t m = 0; m < 5; m++) {
                b[m] = 0.0;
                for (size_t i = 0; i < 12; i++)
                    b[m] += c.Phi[i * 5 + m] * c.y[i] / 0.3;
            }
            assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', 5, 1, H, 5, b, 5), 0);
            for (size_t m = 0; m < 5; m++)
                tu_assert_within(a[m], b[m], 1e-9, "gaussian: a*[%zu]", m);
        }
    }
}

/* ---- export / import, threads ---- */

static void same_predictions(const gp_model *a, const gp_model *b, const double *Xs, size_t ms)
{
    static lik_pred pa, pb;
    memset(&pa, 0, sizeof pa);
    memset(&pb, 0, sizeof pb);
    predict_components(a, Xs, ms, &pa);
    predict_components(b, Xs, ms, &pb);
    assert_memory_equal(&pa, &pb, sizeof pa);
    double sa[64 * 7], sb[64 * 7];
    gp_sample_request sr = {.X = Xs, .m = ms, .d = a->input_dim, .n_samples = 7, .seed = 4};
    gp_error err;
    assert_int_equal(gp_model_sample(a, &sr, sa, &err), GP_OK);
    assert_int_equal(gp_model_sample(b, &sr, sb, &err), GP_OK);
    assert_memory_equal(sa, sb, ms * 7 * sizeof *sa);
}

static gp_model *roundtrip(const gp_model *m, gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    assert_int_equal(gp_model_export(m, st, &err), GP_OK);
    gp_model *back = NULL;
    int rc = gp_model_import(&gp_method_pls, st, &back, &err);
    if (rc != GP_OK)
        fail_msg("import: %s", err.message);
    return back;
}

/* Poison one value (or the shape) of array `name`: import names it. */
static void refused(gp_state *st, const char *name, int shape)
{
    gp_named_array *a = NULL;
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->arrays[i].name, name) == 0)
            a = &st->arrays[i];
    assert_non_null(a);
    double keep = a->data[0];
    size_t rows = a->rows;
    if (shape)
        a->rows = rows - 1;
    else
        a->data[0] = NAN;
    gp_model *back = NULL;
    gp_error err;
    assert_int_equal(gp_model_import(&gp_method_pls, st, &back, &err), GP_EDATA);
    assert_string_equal(err.field, name);
    assert_null(back);
    a->data[0] = keep;
    a->rows = rows;
}

static void test_export_import(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_MATERN32, 2, 1, NULL, 0, &err), GP_OK);
    const char *samplers[2] = {"pula", "mala"};
    for (size_t s = 0; s < 2; s++) {
        gp_model *m = fit_bernoulli(X, y, k, samplers[s]);
        gp_state st;
        gp_model *back = roundtrip(m, &st);
        same_predictions(m, back, Xt, 20);
        refused(&st, "particles", 0);
        refused(&st, "V", 1);
        refused(&st, "lambda", 0);
        refused(&st, "Z", 0);
        gp_state_free(&st);
        gp_model_free(back);
        gp_model_free(m);
    }
    toy t;
    make_toy(&t);
    gp_option_value o[] = {{"landmarks", 8, NULL, NULL}, {"prior_mode", NAN, "r", NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, N, D, t.k, o, 2);
    gp_model *m = fit_ok(&gp_method_pls, &req, "closed form r");
    gp_state st;
    gp_model *back = roundtrip(m, &st);
    same_predictions(m, back, t.Xs, MS);
    refused(&st, "mu", 0);
    refused(&st, "H_chol", 0);
    gp_state_free(&st);
    gp_model_free(back);
    gp_model_free(m);
    gp_kernel_free(t.k);
    gp_kernel_free(k);
}

static void test_threads(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    gp_model *m[2];
    for (int t = 0; t < 2; t++) {
        gp_parallel_set_threads(t + 1);
        m[t] = fit_bernoulli(X, y, k, "mala");
    }
    gp_parallel_set_threads(0);
    same_predictions(m[0], m[1], Xt, 20);
    gp_model_free(m[0]);
    gp_model_free(m[1]);
    gp_kernel_free(k);
}

/* hyper laplace is for the label likelihoods: a gaussian fit asking for it
 * is refused naming the option (and fits nothing). */
static void test_laplace_hyper_needs_labels(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    gp_option_value o[] = {{"hyper", NAN, "laplace", NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, N, D, t.k, o, 1);
    gp_model *m = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(&gp_method_pls, &req, &m, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.hyper");
    assert_null(m);
    gp_kernel_free(t.k);
}

static void test_closed_form_needs_gaussian(void **state)
{
    (void)state;
    double X[NB * 2], y[NB], Xt[TB * 2], pt[TB];
    bernoulli_problem(X, y, Xt, pt, 2);
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err), GP_OK);
    gp_option_value o[] = {{"sampler", NAN, "closed_form", NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, NB, 2, k, o, 1);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *m = NULL;
    assert_int_equal(gp_model_fit(&gp_method_pls, &req, &m, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.sampler");
    assert_null(m);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t1_exact_limit),
        cmocka_unit_test(test_t2_nystrom_krr),
        cmocka_unit_test(test_t4_sgpr),
        cmocka_unit_test(test_t5_r_mode),
        cmocka_unit_test(test_t3_samplers),
        cmocka_unit_test(test_laplace_start),
        cmocka_unit_test(test_laplace_mode),
        cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_laplace_lml_gradient),
        cmocka_unit_test(test_laplace_lml_weight_space),
        cmocka_unit_test(test_laplace_hyper_optimum),
        cmocka_unit_test(test_laplace_hyper_beats_regression),
        cmocka_unit_test(test_kmeans_landmarks_on_data),
        cmocka_unit_test(test_t9_poisson_sq_bimodal),
        cmocka_unit_test(test_potential_gradient),
        cmocka_unit_test(test_export_import),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_closed_form_needs_gaussian),
        cmocka_unit_test(test_laplace_hyper_needs_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
