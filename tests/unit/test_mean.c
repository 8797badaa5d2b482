/* Mean functions (gp_fit_request.mean, core/model/mean.h): the profiled
 * objectives of exact and sgpr against finite differences and against a
 * brute-force maximum over the coefficients; exact recovering a linear trend
 * and predicting it far from the data; exact with a linear mean against the
 * same GP with the basis as a vague-prior linear kernel (R&W §2.7: the
 * predictive means agree in the limit); sgpr with M = N inducing points at
 * the inputs against exact; hkd's profiled bound (FD gradient, maximiser)
 * and gwi's prior beta (the prior bound's profile); export/import, samples,
 * observe; svgp's latent mean (the ELBO's gradient in beta against finite
 * differences for each likelihood; a gaussian trend far from the data by
 * L-BFGS and by Adam; a bernoulli trend whose mean moves the latent f, not
 * p(y = 1)); msrfr's coefficients learned on past their least-squares start;
 * pls (a trend by the profiled subset fit; bernoulli and poisson latent
 * means far out) and rfgp (least squares on the warm-up; observe keeps it;
 * a warm-up grown by observe equals the fit); bad input (several outputs). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/features/rff.h"
#include "core/inducing/collapsed.h"
#include "core/kernel/lml.h"
#include "core/methods/gwi/internal.h"
#include "core/methods/hkd/hkd.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/registry.h"
#include "core/methods/renyi/renyi.h"
#include "core/model/mean.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

#define N 40
#define D 2

/* y = 3 + 2 x_0 - x_1 + a smooth wiggle + noise, points column-major. */
static void trend_problem(double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    for (size_t i = 0; i < N * D; i++)
        X[i] = 5.0 * gp_rng_uniform(&rng);
    for (size_t i = 0; i < N; i++)
        y[i] = 3.0 + 2.0 * X[i] - X[N + i] + 0.3 * sin(2.0 * X[i]) +
               0.05 * gp_rng_normal(&rng);
}

static gp_kernel *rbf(size_t d, double var, double ls, int fixed)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 0, NULL, 0, &err), GP_OK);
    double th[2] = {log(var), log(ls)};
    gp_kernel_set_params(k, th);
    k->fixed = fixed ? GP_FIX_ALL : 0;
    return k;
}

static gp_fit_request request(const double *X, const double *y, size_t n, size_t d,
                              const gp_kernel *k, gp_mean_type mean)
{
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = X;
    req.y = y;
    req.n = n;
    req.d = d;
    req.kernel = k;
    req.seed = 3;
    req.standardize = 1;
    req.mean = mean;
    return req;
}

static gp_model *fit(const char *method, const gp_fit_request *req)
{
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find(method), req, &model, &err) != GP_OK)
        fail_msg("%s fit: %s (%s)", method, err.message, err.field);
    return model;
}

static void predict(const gp_model *model, const double *Xs, size_t m, size_t d, double *mu,
                    double *var)
{
    gp_predict_request pr = {.X = Xs, .m = m, .d = d};
    gp_prediction out = {.mean = mu, .variance = var};
    gp_error err;
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("predict: %s", err.message);
}

/* ---- the profiled objectives ---- */

typedef struct prof_ctx {
    gp_kernel *k;
    const double *P, *y, *H, *r, *Z;
    size_t n, d, p, m, np;
    int sparse; /* 0 exact, 1 sgpr, 2 renyi at a = 0.4 */
} prof_ctx;

/* The profiled objective at x = (kernel log-parameters, log s2). */
static double profiled(void *ctx, const double *x)
{
    prof_ctx *c = ctx;
    gp_kernel_set_params(c->k, x);
    double s2 = exp(x[c->np]), beta[1 + D], f;
    gp_error err;
    if (c->sparse == 2) {
        gp_renyi_terms t;
        renyi_mean mean = {c->p ? GP_MEAN_LINEAR : GP_MEAN_ZERO, beta};
        assert_int_equal(renyi_bound_eval(c->k, s2, 0.4, c->P, c->n, c->d, c->y, c->r, &mean,
                                          c->Z, c->m, &t, 0, NULL, NULL, NULL, &err),
                         GP_OK);
        return t.bound;
    }
    if (c->sparse) {
        gp_sgpr_terms t;
        assert_int_equal(gp_sgpr_bound_mean(c->k, s2, c->r, c->H, c->p, beta, c->P, c->n, c->d,
                                            c->y, c->Z, c->m, &t, NULL, NULL, NULL, &err),
                         GP_OK);
        return t.bound;
    }
    double *A = malloc(c->n * c->n * sizeof *A), *alpha = malloc(c->n * sizeof *alpha);
    double *work = malloc((c->n + c->p + 1) * c->p * sizeof *work);
    gp_lml_basis b = {c->H, c->p, beta, work};
    assert_int_equal(gp_exact_lml_grad_basis_on(c->k, s2, c->r, &b, c->P, c->n, c->y, A, alpha,
                                                &f, NULL, NULL, NULL, &err),
                     GP_OK);
    free(A);
    free(alpha);
    free(work);
    return f;
}

static void problem_points(double *P, double *y, double *H, double *r)
{
    double X[N * D];
    trend_problem(X, y);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            P[i * D + j] = X[j * N + i] - 2.5; /* roughly centred, as working units are */
    gp_mean_basis(GP_MEAN_LINEAR, P, D, N, H);
    for (size_t i = 0; r && i < N; i++)
        r[i] = 0.002 + 0.01 * (double)(i % 4);
}

static void check_profiled_gradient(int sparse, int with_r)
{
    double P[N * D], y[N], H[N * (1 + D)], r[N], Z[7 * D], beta[1 + D], x[3], g[3];
    problem_points(P, y, H, r);
    for (size_t i = 0; i < 7 * D; i++)
        Z[i] = P[5 * i % (N * D)] + 0.05;
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    prof_ctx c = {k, P, y, H, with_r ? r : NULL, Z, N, D, 1 + D, 7, 2, sparse};
    x[0] = log(1.7), x[1] = log(0.9), x[2] = log(0.03);
    gp_kernel_set_params(k, x);
    gp_error err;
    double f;
    if (sparse == 2) {
        gp_renyi_terms t;
        renyi_mean mean = {GP_MEAN_LINEAR, beta};
        assert_int_equal(renyi_bound_eval(k, exp(x[2]), 0.4, P, N, D, y, c.r, &mean, Z, 7, &t, 1,
                                          g, NULL, NULL, &err),
                         GP_OK);
    } else if (sparse) {
        gp_sgpr_terms t;
        assert_int_equal(gp_sgpr_bound_mean(k, exp(x[2]), c.r, H, 1 + D, beta, P, N, D, y, Z, 7,
                                            &t, g, NULL, NULL, &err),
                         GP_OK);
    } else {
        double *A = malloc(N * N * sizeof *A), alpha[N], work[(N + 4) * 3];
        gp_lml_basis b = {H, 1 + D, beta, work};
        assert_int_equal(gp_exact_lml_grad_basis_on(k, exp(x[2]), c.r, &b, P, N, y, A, alpha, &f,
                                                    g, NULL, NULL, &err),
                         GP_OK);
        free(A);
    }
    /* the envelope: the profiled objective's gradient is the fixed-beta one */
    tu_fd_spec spec = {1e-5, 1e-5, 1e-7, 1.0, 0};
    tu_check_gradient(profiled, &c, x, 3, g, spec, NULL,
                      sparse == 2 ? "renyi profiled bound"
                                  : sparse ? "sgpr profiled bound" : "exact profiled LML");
    /* and beta is the maximiser: the plain objective of y - H beta is the
     * profiled one, and of y - H (beta +- 0.01 e_j) less */
    double f0 = profiled(&c, x), yr[N], bt[1 + D];
    if (sparse == 2) {
        memcpy(bt, beta, sizeof bt);
    } else if (sparse) {
        gp_sgpr_terms t;
        assert_int_equal(gp_sgpr_bound_mean(k, exp(x[2]), c.r, H, 1 + D, bt, P, N, D, y, Z, 7, &t,
                                            NULL, NULL, NULL, &err),
                         GP_OK);
    } else {
        double *A = malloc(N * N * sizeof *A), alpha[N], work[(N + 4) * 3];
        gp_lml_basis b = {H, 1 + D, bt, work};
        assert_int_equal(gp_exact_lml_factor_basis(k, exp(x[2]), c.r, &b, P, N, y, A, alpha, &f,
                                                   NULL, NULL, &err),
                         GP_OK);
        free(A);
    }
    prof_ctx plain = c;
    plain.y = yr;
    plain.H = NULL;
    plain.p = 0;
    for (size_t j = 0; j < 1 + D; j++)
        for (int sg = -1; sg <= 1; sg++) {
            for (size_t i = 0; i < N; i++) {
                yr[i] = y[i];
                for (size_t l = 0; l < 1 + D; l++)
                    yr[i] -= H[l * N + i] * (bt[l] + (l == j ? 0.01 * sg : 0.0));
            }
            double fp = profiled(&plain, x);
            if (sg == 0)
                tu_assert_close(fp, f0, 1e-10, 1e-10, "objective of the residual");
            else if (!(fp < f0))
                fail_msg("beta[%zu] %+d: %.17g not below the profiled %.17g", j, sg, fp, f0);
        }
    gp_kernel_free(k);
}

static void test_exact_gradient(void **state)
{
    (void)state;
    check_profiled_gradient(0, 0);
    check_profiled_gradient(0, 1);
}

static void test_sgpr_gradient(void **state)
{
    (void)state;
    check_profiled_gradient(1, 0);
    check_profiled_gradient(1, 1);
}

static void test_renyi_gradient(void **state)
{
    (void)state;
    check_profiled_gradient(2, 0);
    check_profiled_gradient(2, 1);
}


/* ---- ssgp: the weight-space LML with the mean profiled out ---- */

typedef struct rff_ctx {
    gp_rff_problem rp;
    gp_rff_basis basis;
    gp_rff_work *w;
    const double *r;
    double log_ls[D];
} rff_ctx;

#define RFF_R 12

/* x = (log a2, log l_0, log l_1, log s) */
static double rff_profiled(void *ctx, const double *x)
{
    rff_ctx *c = ctx;
    c->rp.log_amplitude2 = x[0];
    c->log_ls[0] = x[1];
    c->log_ls[1] = x[2];
    c->rp.log_noise = x[3];
    double lml;
    gp_error err;
    assert_int_equal(gp_rff_lml_mean(&c->rp, c->r, &c->basis, c->w, &lml, NULL, &err), GP_OK);
    return lml;
}

static void check_rff_profile(int with_r)
{
    double P[N * D], Xc[N * D], y[N], H[N * (1 + D)], r[N], omega[RFF_R * D], beta[1 + D];
    double bt[1 + D], yr[N], x[4] = {log(1.3), log(0.8), log(1.4), log(0.02)}, g[4];
    problem_points(P, y, H, r);
    for (size_t i = 0; i < N; i++) /* rff.h takes column-major inputs */
        for (size_t j = 0; j < D; j++)
            Xc[j * N + i] = P[i * D + j];
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t i = 0; i < RFF_R * D; i++)
        omega[i] = gp_rng_normal(&rng);
    rff_ctx c;
    memset(&c, 0, sizeof c);
    c.rp = (gp_rff_problem){Xc, y, N, D, RFF_R, omega, c.log_ls, 0.0, 0.0, NULL};
    c.basis = (gp_rff_basis){H, 1 + D, beta};
    c.r = with_r ? r : NULL;
    gp_error err;
    assert_int_equal(gp_rff_work_new(N, D, RFF_R, &c.w, &err), GP_OK);
    double f0 = rff_profiled(&c, x), ga2, gs, gls[D];
    gp_rff_grad grad = {NULL, gls, &ga2, &gs};
    double lml;
    assert_int_equal(gp_rff_lml_mean(&c.rp, c.r, &c.basis, c.w, &lml, &grad, &err), GP_OK);
    tu_assert_close(lml, f0, 0.0, 0.0, "the same LML with the gradient");
    g[0] = ga2, g[1] = gls[0], g[2] = gls[1], g[3] = gs;
    tu_fd_spec spec = {1e-5, 1e-5, 1e-7, 1.0, 0};
    tu_check_gradient(rff_profiled, &c, x, 4, g, spec, NULL, "ssgp profiled LML");
    /* beta is the maximiser: the plain LML of y - H beta is f0, of
     * y - H (beta +- 0.01 e_j) less */
    memcpy(bt, beta, sizeof bt);
    rff_ctx plain = c;
    plain.rp.y = yr;
    plain.basis.n_coef = 0;
    for (size_t j = 0; j < 1 + D; j++)
        for (int sg = -1; sg <= 1; sg++) {
            for (size_t i = 0; i < N; i++) {
                yr[i] = y[i];
                for (size_t l = 0; l < 1 + D; l++)
                    yr[i] -= H[l * N + i] * (bt[l] + (l == j ? 0.01 * sg : 0.0));
            }
            double fp = rff_profiled(&plain, x);
            if (sg == 0)
                tu_assert_close(fp, f0, 1e-10, 1e-10, "ssgp LML of the residual");
            else if (!(fp < f0))
                fail_msg("ssgp beta[%zu] %+d: %.17g not below the profiled %.17g", j, sg, fp,
                         f0);
        }
    gp_rff_work_free(c.w);
}

static void test_ssgp_gradient(void **state)
{
    (void)state;
    check_rff_profile(0);
    check_rff_profile(1);
}

/* ---- hkd: the coefficients profiled out of the block-structured bound ---- */

static gp_model *hkd_model(const double *X, const double *y, const gp_kernel *k,
                           gp_fit_request *req, gp_option_value *opts)
{
    *req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    opts[0] = (gp_option_value){"inducing", 10, NULL, NULL};
    opts[1] = (gp_option_value){"max_iterations", 0, NULL, NULL};
    opts[2] = (gp_option_value){"pcg_tolerance", 1e-13, NULL, NULL};
    req->options = opts;
    req->n_options = 3;
    return fit("hkd", req);
}

/* The profiled bound's analytic gradient (kernel parameters, log s2)
 * against central differences: the envelope theorem's plain gradient of
 * the residual's bound. The default symmetry (every input negated) gives
 * 4 blocks, so the profile's solves go through the coupled PCG. */
static void test_hkd_gradient(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0), *kk = NULL;
    gp_fit_request req;
    gp_option_value opts[3];
    gp_model *model = hkd_model(X, y, k, &req, opts);
    gp_error err;
    assert_int_equal(gp_kernel_copy(&kk, model->kernel, &err), GP_OK);
    size_t np = gp_kernel_n_params(kk);
    double theta[4], grad[5], f, fp, fm, s2 = 0.05, beta[1 + D];
    gp_kernel_get_params(kk, theta);
    assert_int_equal(gp_hkd_bound_mean(model, &req, kk, s2, NULL, &f, grad, NULL, beta, &err),
                     GP_OK);
    for (size_t p = 0; p <= np; p++) {
        double h = 1e-5, th[4], sp = s2, sm = s2;
        memcpy(th, theta, sizeof th);
        if (p < np)
            th[p] += h;
        else
            sp = s2 * exp(h);
        gp_kernel_set_params(kk, th);
        assert_int_equal(gp_hkd_bound_mean(model, &req, kk, sp, NULL, &fp, NULL, NULL, NULL, &err),
                         GP_OK);
        if (p < np)
            th[p] -= 2 * h;
        else
            sm = s2 * exp(-h);
        gp_kernel_set_params(kk, th);
        assert_int_equal(gp_hkd_bound_mean(model, &req, kk, sm, NULL, &fm, NULL, NULL, NULL, &err),
                         GP_OK);
        gp_kernel_set_params(kk, theta);
        double num = (fp - fm) / (2 * h);
        if (fabs(num - grad[p]) > 1e-5 * (1.0 + fabs(num)))
            fail_msg("hkd parameter %zu: analytic %.10g, differences %.10g", p, grad[p], num);
    }
    gp_kernel_free(kk);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* beta-hat maximises the bound: the plain (zero-mean) bound of the targets
 * less h^T beta is the profiled one at beta-hat and lower at beta-hat +-
 * 0.01 in every coefficient. */
static void test_hkd_maximiser(void **state)
{
    (void)state;
    double X[N * D], y[N], yr[N], beta[1 + D], f, fb;
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req;
    gp_option_value opts[3];
    gp_model *model = hkd_model(X, y, k, &req, opts);
    gp_error err;
    double s2 = 0.05;
    assert_int_equal(
        gp_hkd_bound_mean(model, &req, model->kernel, s2, NULL, &f, NULL, NULL, beta, &err),
        GP_OK);
    model->mean_type = GP_MEAN_ZERO; /* the plain bound at the same structure */
    gp_fit_request plain = req;
    plain.y = yr;
    for (size_t j = 0; j <= D; j++)
        for (int sign = -1; sign <= 1; sign++) {
            double b[1 + D];
            memcpy(b, beta, sizeof b);
            b[j] += 0.01 * sign;
            for (size_t i = 0; i < N; i++) {
                double xw[D];
                for (size_t c = 0; c < D; c++)
                    xw[c] = (X[c * N + i] - model->x_mean[c]) / model->x_scale[c];
                yr[i] = y[i] - model->y_scale * gp_mean_at(GP_MEAN_LINEAR, b, xw, D);
            }
            assert_int_equal(
                gp_hkd_bound(model, &plain, model->kernel, s2, NULL, &fb, NULL, NULL, &err),
                GP_OK);
            if (sign == 0)
                tu_assert_within(fb, f, 1e-8 * (1.0 + fabs(f)), "plain bound at beta-hat");
            else if (!(fb < f))
                fail_msg("coefficient %zu %+d: plain %.12g not below the profiled %.12g", j,
                         sign, fb, f);
        }
    model->mean_type = GP_MEAN_LINEAR;
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- gwi: the prior's mean profiled by its sgpr bound ---- */

/* gwi's beta (prior sgpr, no validation rows, the noise held through the
 * W2 stage) is the profiled estimate of the prior's collapsed bound at the
 * frozen kernel, noise and Z: gp_sgpr_bound_mean there gives the same
 * coefficients, and the plain bound of y - H b is lower at b = beta +-
 * 0.01 in every coefficient. */
static void test_gwi_prior_beta(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    gp_option_value opts[] = {{"validation_fraction", 0, NULL, NULL},
                              {"learn_noise", 0, NULL, NULL},
                              {"inducing", 10, NULL, NULL},
                              {"epochs", 20, NULL, NULL}};
    req.options = opts;
    req.n_options = 4;
    gp_model *model = fit("gwi", &req);
    const gwi_impl *im = model->impl;
    double P[N * D], yw[N], H[N * (1 + D)], beta[1 + D], r[N], f, fb;
    gp_model_standardize_points(model, X, N, P);
    gp_model_working_targets(model, y, N, yw);
    gp_mean_basis(GP_MEAN_LINEAR, P, D, N, H);
    gp_sgpr_terms t;
    gp_error err;
    assert_int_equal(gp_sgpr_bound_mean(model->kernel, model->noise_variance, NULL, H, 1 + D,
                                        beta, P, N, D, yw, im->post.Z, im->post.m, &t, NULL,
                                        NULL, NULL, &err),
                     GP_OK);
    f = t.bound;
    for (size_t j = 0; j <= D; j++)
        tu_assert_within(model->mean_coef[j], beta[j], 1e-9 * (1.0 + fabs(beta[j])),
                         "gwi beta[%zu] against the prior's profile", j);
    for (size_t j = 0; j <= D; j++)
        for (int sign = -1; sign <= 1; sign += 2) {
            double b[1 + D];
            memcpy(b, beta, sizeof b);
            b[j] += 0.01 * sign;
            for (size_t i = 0; i < N; i++)
                r[i] = yw[i] - gp_mean_at(GP_MEAN_LINEAR, b, P + i * D, D);
            assert_int_equal(gp_sgpr_bound_mean(model->kernel, model->noise_variance, NULL, NULL,
                                                0, NULL, P, N, D, r, im->post.Z, im->post.m, &t,
                                                NULL, NULL, NULL, &err),
                             GP_OK);
            fb = t.bound;
            if (!(fb < f))
                fail_msg("coefficient %zu %+d: plain %.12g not below the profiled %.12g", j,
                         sign, fb, f);
        }
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- the trend recovered and extrapolated ---- */

/* A method with a linear mean finds the trend's coefficients (original
 * units, within tol of the slopes) and predicts it far outside the data,
 * where its zero-mean fit reverts. */
static void check_recovers_trend(const char *method, const gp_option_value *opts, size_t n_opts,
                                 double tol)
{
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    req.options = opts;
    req.n_options = n_opts;
    gp_model *lin = fit(method, &req);
    req.mean = GP_MEAN_ZERO;
    gp_model *zero = fit(method, &req);
    assert_int_equal(lin->mean_type, GP_MEAN_LINEAR);
    assert_null(zero->mean_coef);
    double c[1 + D];
    gp_mean_original(lin->mean_type, lin->mean_coef, D, lin->x_mean, lin->x_scale, lin->y_mean,
                     lin->y_scale, c);
    tu_assert_within(c[0], 3.0, 2.5 * tol, "%s intercept (original units)", method);
    tu_assert_within(c[1], 2.0, tol, "%s slope of x0", method);
    tu_assert_within(c[2], -1.0, tol, "%s slope of x1", method);
    double Xs[2 * D] = {200.0, -150.0, 10.0, 0.0}, want[2], mu[2], var[2], mz[2];
    for (size_t i = 0; i < 2; i++)
        want[i] = 3.0 + 2.0 * Xs[i] - Xs[2 + i];
    predict(lin, Xs, 2, D, mu, var);
    predict(zero, Xs, 2, D, mz, var);
    for (size_t i = 0; i < 2; i++) {
        tu_assert_within(mu[i], want[i], 0.05 * fabs(want[i]), "%s linear mean far out [%zu]",
                         method, i);
        if (!(fabs(mz[i] - want[i]) > 0.5 * fabs(want[i])))
            fail_msg("%s zero mean far out [%zu]: %g, the trend %g", method, i, mz[i], want[i]);
    }
    gp_model_free(lin);
    gp_model_free(zero);
    gp_kernel_free(k);
}

static void test_ssgp_recovers_trend(void **state)
{
    (void)state;
    gp_option_value opts[] = {{"features", 30, NULL, NULL}};
    check_recovers_trend("ssgp", opts, 1, 0.2);
}

static void test_hkd_recovers_trend(void **state)
{
    (void)state;
    gp_option_value opts[] = {{"inducing", 16, NULL, NULL}};
    check_recovers_trend("hkd", opts, 1, 0.2);
}

/* gwi: both variational means (kernel_sum, the network) and both priors
 * (sgpr profiles beta, inducing takes least squares first) learn the
 * residual of the prior's trend and revert to it far out. */
static void test_gwi_recovers_trend(void **state)
{
    (void)state;
    gp_option_value sum_sgpr[] = {{"inducing", 12, NULL, NULL}, {"epochs", 60, NULL, NULL}};
    check_recovers_trend("gwi", sum_sgpr, 2, 0.2);
    gp_option_value net_inducing[] = {{"inducing", 12, NULL, NULL},
                                      {"epochs", 60, NULL, NULL},
                                      {"mean", 0, "mlp", NULL},
                                      {"prior", 0, "inducing", NULL}};
    check_recovers_trend("gwi", net_inducing, 4, 0.2);
}

static void test_renyi_recovers_trend(void **state)
{
    (void)state;
    gp_option_value opts[] = {{"inducing", 12, NULL, NULL}};
    check_recovers_trend("renyi", opts, 1, 0.2);
}

/* pls: beta profiled in the subset fits (one subset here: N < N_sub), the
 * closed form on the residual targets. */
static void test_pls_recovers_trend(void **state)
{
    (void)state;
    check_recovers_trend("pls", NULL, 0, 0.2);
}

/* rfgp: least squares on the warm-up rows (30 of 40: the last 10 go through
 * the online update in the same fit, as residuals of the fitted mean). */
static const gp_option_value rfgp_opts[] = {{"warmup", 30, NULL, NULL},
                                            {"features", 100, NULL, NULL}};

static void test_rfgp_recovers_trend(void **state)
{
    (void)state;
    check_recovers_trend("rfgp", rfgp_opts, 2, 0.2);
}

/* ---- exact: the trend recovered and extrapolated ---- */

static void test_exact_recovers_trend(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    gp_model *lin = fit("exact", &req);
    req.mean = GP_MEAN_ZERO;
    gp_model *zero = fit("exact", &req);
    assert_int_equal(lin->mean_type, GP_MEAN_LINEAR);
    assert_null(zero->mean_coef);
    double c[1 + D];
    gp_mean_original(lin->mean_type, lin->mean_coef, D, lin->x_mean, lin->x_scale, lin->y_mean,
                     lin->y_scale, c);
    tu_assert_within(c[0], 3.0, 0.5, "intercept (original units)");
    tu_assert_within(c[1], 2.0, 0.2, "slope of x0");
    tu_assert_within(c[2], -1.0, 0.2, "slope of x1");
    /* far outside the data: the trend, where a zero-mean GP reverts */
    double Xs[2 * D] = {200.0, -150.0, 10.0, 0.0}, want[2], mu[2], var[2], mz[2];
    for (size_t i = 0; i < 2; i++)
        want[i] = 3.0 + 2.0 * Xs[i] - Xs[2 + i];
    predict(lin, Xs, 2, D, mu, var);
    predict(zero, Xs, 2, D, mz, var);
    for (size_t i = 0; i < 2; i++) {
        tu_assert_within(mu[i], want[i], 0.05 * fabs(want[i]), "linear mean far out [%zu]", i);
        if (!(fabs(mz[i] - want[i]) > 0.5 * fabs(want[i])))
            fail_msg("zero mean far out [%zu]: %g, the trend %g", i, mz[i], want[i]);
    }
    gp_model_free(lin);
    gp_model_free(zero);
    gp_kernel_free(k);
}

/* ---- the basis as a vague-prior kernel (R&W §2.7) ----
 * beta ~ N(0, b I) on the basis (1, x) is the kernel b (1 + x.x'): the
 * linear kernel on the points with a column of ones. As b grows, its
 * predictive mean tends to H_s^T beta_gls + K_s^T C^{-1} (y - H beta_gls),
 * the profiled model's (raw units, kernel and noise fixed). */
static void test_exact_equals_vague_basis(void **state)
{
    (void)state;
    double X[N * D], y[N], X1[N * (D + 1)];
    trend_problem(X, y);
    memcpy(X1, X, sizeof X);
    for (size_t i = 0; i < N; i++)
        X1[D * N + i] = 1.0;
    gp_error err;
    gp_kernel *k = rbf(D, 0.5, 1.2, 1);
    size_t act[D] = {0, 1};
    gp_kernel *terms[2] = {NULL, NULL}, *sum = NULL;
    assert_int_equal(gp_kernel_leaf(&terms[0], GP_KERNEL_RBF, D + 1, 0, act, D, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&terms[1], GP_KERNEL_LINEAR, D + 1, 0, NULL, 0, &err), GP_OK);
    double th[3] = {log(0.5), log(1.2), log(1e6)};
    assert_int_equal(gp_kernel_composite(&sum, GP_KERNEL_SUM, terms, 2, &err), GP_OK);
    gp_kernel_set_params(sum, th);
    sum->terms[0]->fixed = sum->terms[1]->fixed = GP_FIX_ALL;
    gp_fit_request a = request(X, y, N, D, k, GP_MEAN_LINEAR);
    gp_fit_request b = request(X1, y, N, D + 1, sum, GP_MEAN_ZERO);
    a.standardize = b.standardize = 0;
    a.noise_given = b.noise_given = 1;
    a.noise_fixed = b.noise_fixed = 1;
    a.noise_variance = b.noise_variance = 0.01;
    gp_model *ma = fit("exact", &a), *mb = fit("exact", &b);
    double Xs[3 * D] = {0.5, 2.0, 4.5, 1.0, 3.3, 0.2}, Xs1[3 * (D + 1)], mua[3], mub[3], v[3];
    memcpy(Xs1, Xs, sizeof Xs);
    for (size_t i = 0; i < 3; i++)
        Xs1[2 * 3 + i] = 1.0;
    predict(ma, Xs, 3, D, mua, v);
    predict(mb, Xs1, 3, D + 1, mub, v);
    for (size_t i = 0; i < 3; i++)
        tu_assert_close(mua[i], mub[i], 1e-5, 1e-5, "profiled vs vague-prior basis mean[%zu]", i);
    gp_model_free(ma);
    gp_model_free(mb);
    gp_kernel_free(k);
    gp_kernel_free(sum);
}

/* ---- sgpr with M = N inducing points at the inputs is exact ---- */

static void test_sgpr_equals_exact(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 0.8, 1.1, 1);
    gp_option_value opts[] = {{"inducing", (double)N, NULL, NULL},
                              {"optimize_inducing", 0, NULL, NULL},
                              {"reselect", 0, NULL, NULL}};
    for (int t = GP_MEAN_CONSTANT; t <= GP_MEAN_LINEAR; t++) {
        gp_fit_request req = request(X, y, N, D, k, (gp_mean_type)t);
        req.noise_given = req.noise_fixed = 1;
        req.noise_variance = 0.05;
        gp_model *ex = fit("exact", &req);
        req.options = opts;
        req.n_options = 3;
        gp_model *sp = fit("sgpr", &req);
        for (size_t j = 0; j < gp_mean_n_coef((gp_mean_type)t, D); j++)
            tu_assert_close(sp->mean_coef[j], ex->mean_coef[j], 1e-6, 1e-6, "beta[%zu]", j);
        double Xs[4 * D] = {0.3, 1.7, 2.9, 4.4, 4.0, 0.1, 2.2, 3.8}, m1[4], m2[4], v1[4], v2[4];
        predict(ex, Xs, 4, D, m1, v1);
        predict(sp, Xs, 4, D, m2, v2);
        for (size_t i = 0; i < 4; i++) {
            tu_assert_close(m2[i], m1[i], 1e-5, 1e-5, "sgpr mean[%zu]", i);
            tu_assert_close(v2[i], v1[i], 1e-4, 1e-5, "sgpr variance[%zu]", i);
        }
        gp_model_free(ex);
        gp_model_free(sp);
    }
    gp_kernel_free(k);
}

/* ---- persistence, samples, observe ---- */

static void test_export_import_samples(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    const char *methods[] = {"exact", "sgpr", "ssgp", "renyi", "hkd", "gwi", "pls", "rfgp"};
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; mi++) {
        gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
        if (strcmp(methods[mi], "rfgp") == 0) {
            req.options = rfgp_opts;
            req.n_options = 2;
        }
        gp_model *model = fit(methods[mi], &req), *back = NULL;
        gp_state st;
        gp_error err;
        gp_state_init(&st);
        assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
        assert_non_null(gp_state_find(&st, "mean_coef"));
        assert_int_equal(gp_model_import(gp_method_find(methods[mi]), &st, &back, &err), GP_OK);
        assert_int_equal(back->mean_type, GP_MEAN_LINEAR);
        double Xs[3 * D] = {9.0, 1.0, 2.0, 4.0, -3.0, 2.0}, m1[3], m2[3], v1[3], v2[3];
        predict(model, Xs, 3, D, m1, v1);
        predict(back, Xs, 3, D, m2, v2);
        assert_memory_equal(m1, m2, sizeof m1);
        assert_memory_equal(v1, v2, sizeof v1);
        /* samples carry the mean: their average is near the mean far out */
        gp_sample_request sr = {.X = Xs, .m = 3, .d = D, .n_samples = 400, .seed = 5};
        double *s = malloc(3 * 400 * sizeof *s);
        assert_int_equal(gp_model_sample(back, &sr, s, &err), GP_OK);
        for (size_t i = 0; i < 3; i++) {
            double avg = 0.0;
            for (size_t q = 0; q < 400; q++)
                avg += s[q * 3 + i] / 400.0;
            tu_assert_within(avg, m1[i], 4.0 * sqrt(v1[i] / 400.0) + 1e-9, "sample mean[%zu]", i);
        }
        free(s);
        gp_state_free(&st);
        gp_model_free(back);
        gp_model_free(model);
        /* a zero mean writes no mean arrays (states keep their bytes) */
        req.mean = GP_MEAN_ZERO;
        model = fit(methods[mi], &req);
        gp_state_init(&st);
        assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
        assert_null(gp_state_find(&st, "mean_type"));
        assert_null(gp_state_find(&st, "mean_coef"));
        gp_state_free(&st);
        gp_model_free(model);
    }
    gp_kernel_free(k);
}

/* Observe subtracts the fit's mean from the new targets: rows that lie on
 * the model's own predictive mean leave the mean where it was (a residual
 * GP updated with its own mean barely moves), while without the subtraction
 * they would pull a zero-mean residual by the whole trend. */
static void check_observe(const char *method, const gp_option_value *opts, size_t n_opts)
{
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    req.options = opts;
    req.n_options = n_opts;
    gp_model *model = fit(method, &req);
    double Xn[2 * D] = {12.0, 14.0, 1.0, 2.0}, yn[2], v[2], Xs[D] = {13.0, 1.5}, before, after, vs;
    predict(model, Xn, 2, D, yn, v);
    predict(model, Xs, 1, D, &before, &vs);
    gp_error err;
    assert_int_equal(gp_model_observe(model, Xn, yn, 2, &err), GP_OK);
    predict(model, Xs, 1, D, &after, &vs);
    tu_assert_within(after, before, 1e-3 * fabs(before), "%s: mean after observing its own mean",
                     method);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_exact_observe(void **state)
{
    (void)state;
    check_observe("exact", NULL, 0);
}

static void test_ssgp_observe(void **state)
{
    (void)state;
    check_observe("ssgp", NULL, 0);
}

/* rfgp: the generic observe subtracts the mean held since the warm-up. */
static void test_rfgp_observe(void **state)
{
    (void)state;
    check_observe("rfgp", rfgp_opts, 2);
}

/* rfgp: a model created empty observes its warm-up in two calls, the second
 * ending it with rows after it; it equals the fit of the same rows (the
 * generic observe subtracts nothing before the mean is fitted). */
static void test_rfgp_warmup_observe(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    req.options = rfgp_opts;
    req.n_options = 2;
    gp_model *whole = fit("rfgp", &req);
    req.n = 0;
    req.X = NULL;
    req.y = NULL;
    gp_model *grown = fit("rfgp", &req);
    double X1[20 * D], X2[20 * D];
    for (size_t j = 0; j < D; j++) {
        memcpy(X1 + j * 20, X + j * N, 20 * sizeof *X);
        memcpy(X2 + j * 20, X + j * N + 20, 20 * sizeof *X);
    }
    gp_error err;
    assert_int_equal(gp_model_observe(grown, X1, y, 20, &err), GP_OK);
    assert_int_equal(gp_model_observe(grown, X2, y + 20, 20, &err), GP_OK);
    assert_memory_equal(whole->mean_coef, grown->mean_coef, (1 + D) * sizeof(double));
    double Xs[2 * D] = {30.0, -2.0, 1.0, 3.0}, m1[2], m2[2], v1[2], v2[2];
    predict(whole, Xs, 2, D, m1, v1);
    predict(grown, Xs, 2, D, m2, v2);
    for (size_t i = 0; i < 2; i++)
        tu_assert_close(m2[i], m1[i], 1e-9, 1e-9, "grown model's mean [%zu]", i);
    gp_model_free(whole);
    gp_model_free(grown);
    gp_kernel_free(k);
}

/* ---- svgp: a latent mean ---- */

typedef struct elbo_ctx {
    gp_kernel *k;
    gp_lik lik;
    gp_quadrature q;
    const double *P, *y, *H, *Z, *mq, *Lq;
    size_t m;
    double off[N], *gmu; /* gmu: N, filled by the evaluation at x when set */
} elbo_ctx;

/* The ELBO at beta = x, with the latent mean H beta. */
static double elbo_at(void *ctx, const double *x)
{
    elbo_ctx *c = ctx;
    for (size_t i = 0; i < N; i++) {
        c->off[i] = 0.0;
        for (size_t j = 0; j < 1 + D; j++)
            c->off[i] += c->H[j * N + i] * x[j];
    }
    svgp_eval e = {c->k, &c->lik, &c->q, c->Z, c->m, c->mq, c->Lq, NULL, c->off, 1, NULL};
    svgp_work w;
    gp_error err;
    gp_svgp_terms t;
    assert_int_equal(svgp_work_alloc(&w, c->m, N, &err), GP_OK);
    assert_int_equal(svgp_eval_full(&e, c->P, N, c->y, &w, &t, NULL, &err), GP_OK);
    if (c->gmu)
        memcpy(c->gmu, w.gmu, N * sizeof *c->gmu);
    svgp_work_free(&w);
    return t.elbo;
}

/* dELBO/dbeta = H^T gmu (train.c) against central differences. */
static void check_svgp_mean_gradient(gp_likelihood l)
{
    double P[N * D], y[N], H[N * (1 + D)], Z[6 * D], mq[6], Lq[36] = {0}, gmu[N];
    problem_points(P, y, H, NULL);
    for (size_t i = 0; l != GP_LIK_GAUSSIAN && i < N; i++)
        y[i] = l == GP_LIK_BERNOULLI ? (y[i] > 3.0 ? 1.0 : 0.0) : floor(fabs(y[i]) / 2.0);
    for (size_t i = 0; i < 6 * D; i++)
        Z[i] = P[7 * i % (N * D)] + 0.03;
    for (size_t j = 0; j < 6; j++) {
        mq[j] = 0.1 * (double)j - 0.2;
        Lq[j + 6 * j] = 0.8;
        if (j)
            Lq[j + 6 * (j - 1)] = 0.1;
    }
    gp_kernel *k = rbf(D, 1.3, 1.1, 0);
    elbo_ctx c = {.k = k, .lik = {l, l == GP_LIK_GAUSSIAN ? 0.2 : 0.0}, .P = P, .y = y, .H = H,
                  .Z = Z, .mq = mq, .Lq = Lq, .m = 6, .gmu = gmu};
    gp_error err;
    assert_int_equal(gp_quadrature_init(&c.q, 20, &err), GP_OK);
    double beta[1 + D] = {0.3, 0.4, -0.2}, g[1 + D];
    elbo_at(&c, beta);
    for (size_t j = 0; j < 1 + D; j++) {
        g[j] = 0.0;
        for (size_t i = 0; i < N; i++)
            g[j] += H[j * N + i] * gmu[i];
    }
    c.gmu = NULL;
    tu_fd_spec spec = {1e-5, 1e-6, 1e-7, 1.0, 0};
    tu_check_gradient(elbo_at, &c, beta, 1 + D, g, spec, NULL, gp_likelihood_name(l));
    gp_kernel_free(k);
}

static void test_svgp_mean_gradient(void **state)
{
    (void)state;
    check_svgp_mean_gradient(GP_LIK_GAUSSIAN);
    check_svgp_mean_gradient(GP_LIK_BERNOULLI);
    check_svgp_mean_gradient(GP_LIK_POISSON);
}

static void add_option_svgp(gp_fit_request *req, gp_option_value *o, size_t n)
{
    req->options = o;
    req->n_options = n;
}

/* The trend far from the data (x = (40, 1), true 3 + 80 - 1 = 82): a
 * zero-mean svgp reverts towards the data's mean there, a linear mean
 * carries the trend, by L-BFGS and by minibatch Adam. */
static void test_svgp_recovers_trend(void **state)
{
    (void)state;
    double X[N * D], y[N], Xs[D] = {40.0, 1.0}, mu, var;
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    const char *opt[2] = {"lbfgs", "adam"};
    for (int a = 0; a < 2; a++) {
        gp_option_value o[3] = {{.name = "optimizer", .string = opt[a]},
                                {.name = "epochs", .number = 300},
                                {.name = "batch_size", .number = 10}};
        gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
        add_option_svgp(&req, o, 3);
        gp_model *model = fit("svgp", &req);
        predict(model, Xs, 1, D, &mu, &var);
        tu_assert_within(mu, 82.0, 4.0, "svgp %s, linear mean, far from the data", opt[a]);
        gp_model_free(model);
        req.mean = GP_MEAN_ZERO;
        model = fit("svgp", &req);
        predict(model, Xs, 1, D, &mu, &var);
        if (fabs(mu - 82.0) < 20.0)
            fail_msg("svgp %s zero mean %g: the test does not tell the means apart", opt[a], mu);
        gp_model_free(model);
    }
    gp_kernel_free(k);
}

/* Bernoulli labels of the trend: the mean moves the latent f, so far to the
 * right p(y = 1) goes to 1 (a zero mean: back to 1/2), every p stays in
 * [0, 1], and the observation mean is the likelihood's of the moved latent
 * moments (not p(y = 1) plus the mean). */
static void test_svgp_bernoulli_mean(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    for (size_t i = 0; i < N; i++)
        y[i] = y[i] > 6.0 ? 1.0 : 0.0;
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *model = fit("svgp", &req);
    double Xs[2 * D] = {25.0, -20.0, 1.0, 1.0}, mu[2], var[2], lm[2], lv[2], om[2], ov[2];
    gp_predict_request pr = {.X = Xs, .m = 2, .d = D, .include_noise = 1};
    gp_prediction out = {.mean = mu, .variance = var, .latent_mean = lm, .latent_variance = lv,
                         .obs_mean = om, .obs_variance = ov};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    if (!(lm[0] > 3.0 && lm[1] < -3.0))
        fail_msg("latent means %g, %g: the trend is not in the latent f", lm[0], lm[1]);
    for (size_t i = 0; i < 2; i++) {
        if (!(om[i] >= 0.0 && om[i] <= 1.0))
            fail_msg("p(y = 1) = %g at point %zu", om[i], i);
        double want_m, want_v;
        gp_lik lik = {GP_LIK_BERNOULLI, 0.0};
        gp_lik_predict(&lik, &model->quadrature, &lm[i], &lv[i], 1, 1, &want_m, &want_v, NULL,
                       NULL);
        tu_assert_close(om[i], want_m, 1e-12, 1e-12, "p(y = 1) from the moved latent at %zu", i);
    }
    if (!(om[0] > 0.9 && om[1] < 0.1))
        fail_msg("p(y = 1) = %g, %g far from the data", om[0], om[1]);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* pls: a non-gaussian mean moves the latent f of every particle. Bernoulli
 * labels of the trend: far to the right p(y = 1) goes to 1, far to the
 * left to 0 (beta: the logistic regression's, on the logit scale; a zero
 * mean reverts to 1/2); poisson counts of rate exp(0.5 + 0.6 x0): the
 * latent mean follows log rate far out. */
static void test_pls_latent_mean(void **state)
{
    (void)state;
    double X[N * D], y[N], yc[N];
    trend_problem(X, y);
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t i = 0; i < N; i++) {
        double rate = exp(0.5 + 0.6 * X[i]), c = 0.0, t = -log(gp_rng_uniform_pos(&rng));
        while (t < rate) { /* Poisson by exponential gaps */
            c += 1.0;
            t += -log(gp_rng_uniform_pos(&rng));
        }
        yc[i] = c;
        y[i] = y[i] > 6.0 ? 1.0 : 0.0;
    }
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_option_value o[2] = {{.name = "steps", .number = 60}, {.name = "particles", .number = 20}};
    double Xs[2 * D] = {25.0, -20.0, 1.0, 1.0}, mu[2], var[2], lm[2], lv[2], om[2], ov[2];
    double rm[2], rv[2];
    gp_predict_request pr = {.X = Xs, .m = 2, .d = D, .include_noise = 1};
    gp_prediction out = {.mean = mu, .variance = var, .latent_mean = lm, .latent_variance = lv,
                         .obs_mean = om, .obs_variance = ov, .rate_mean = rm, .rate_variance = rv};
    gp_error err;
    for (int zero = 0; zero < 2; zero++) {
        gp_fit_request req = request(X, y, N, D, k, zero ? GP_MEAN_ZERO : GP_MEAN_LINEAR);
        req.likelihood = GP_LIK_BERNOULLI;
        req.options = o;
        req.n_options = 2;
        gp_model *model = fit("pls", &req);
        if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
            fail_msg("pls bernoulli predict: %s", err.message);
        for (size_t i = 0; i < 2; i++)
            if (!(om[i] >= 0.0 && om[i] <= 1.0))
                fail_msg("p(y = 1) = %g at point %zu", om[i], i);
        if (!zero && !(lm[0] > 3.0 && lm[1] < -3.0 && om[0] > 0.9 && om[1] < 0.1))
            fail_msg("bernoulli: latent %g, %g, p(y = 1) %g, %g far from the data", lm[0],
                     lm[1], om[0], om[1]);
        if (zero && !(fabs(om[0] - 0.5) < 0.3 && fabs(om[1] - 0.5) < 0.3))
            fail_msg("bernoulli, zero mean: p(y = 1) %g, %g: the test does not tell the means "
                     "apart",
                     om[0], om[1]);
        gp_model_free(model);
    }
    gp_fit_request req = request(X, yc, N, D, k, GP_MEAN_LINEAR);
    req.likelihood = GP_LIK_POISSON;
    req.options = o;
    req.n_options = 2;
    gp_model *model = fit("pls", &req);
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("pls poisson predict: %s", err.message);
    /* log rate 0.5 + 0.6 x0: 15.5 at x0 = 25, -11.5 at x0 = -20 */
    tu_assert_within(lm[0], 15.5, 2.5, "poisson latent mean far right");
    tu_assert_within(lm[1], -11.5, 2.5, "poisson latent mean far left");
    gp_model_free(model);
    gp_kernel_free(k);
}

/* msrfr learns its coefficients in the SVGD run: they leave the
 * least-squares start (before: exactly the least-squares fit). */
static void test_msrfr_joint_mean(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_option_value o[3] = {{.name = "iterations", .number = 60},
                            {.name = "particles", .number = 3},
                            {.name = "features", .number = 10}};
    gp_fit_request req = request(X, y, N, D, k, GP_MEAN_LINEAR);
    req.options = o;
    req.n_options = 3;
    gp_model *model = fit("msrfr", &req);
    double learned[1 + D], yw[N];
    memcpy(learned, model->mean_coef, sizeof learned);
    gp_error err;
    gp_model_working_targets(model, y, N, yw);
    assert_int_equal(gp_model_mean_residual_ols(model, X, N, yw, &err), GP_OK);
    double moved = 0.0;
    for (size_t j = 0; j < 1 + D; j++)
        moved = fmax(moved, fabs(learned[j] - model->mean_coef[j]));
    if (!(moved > 1e-4))
        fail_msg("msrfr's coefficients are their least-squares start (moved %g)", moved);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
    (void)state;
    double X[N * D], y[N];
    trend_problem(X, y);
    gp_kernel *k = rbf(D, 1.0, 1.0, 0);
    gp_model *model = NULL;
    gp_error err;
    gp_fit_request req = request(X, y, N, D, k, (gp_mean_type)7);
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EINVAL);
    assert_string_equal(err.field, "mean.type");
    assert_null(model);
    req.mean = GP_MEAN_LINEAR;
    /* several outputs: one mean is for one output */
    double Y2[2 * N];
    memcpy(Y2, y, sizeof y);
    memcpy(Y2 + N, y, sizeof y);
    req.y = Y2;
    req.n_outputs = 2;
    assert_int_equal(gp_model_fit(gp_method_find("rfgp"), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "mean");
    assert_null(model);
    /* rfgp created empty with options.outputs 2 */
    gp_option_value two[] = {{"outputs", 2, NULL, NULL}};
    gp_fit_request empty = request(NULL, NULL, 0, D, k, GP_MEAN_LINEAR);
    empty.options = two;
    empty.n_options = 1;
    assert_int_equal(gp_model_fit(gp_method_find("rfgp"), &empty, &model, &err),
                     GP_EUNSUPPORTED);
    assert_string_equal(err.field, "mean");
    assert_null(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_gradient),
        cmocka_unit_test(test_sgpr_gradient),
        cmocka_unit_test(test_exact_recovers_trend),
        cmocka_unit_test(test_exact_equals_vague_basis),
        cmocka_unit_test(test_sgpr_equals_exact),
        cmocka_unit_test(test_export_import_samples),
        cmocka_unit_test(test_exact_observe),
        cmocka_unit_test(test_renyi_gradient),
        cmocka_unit_test(test_renyi_recovers_trend),
        cmocka_unit_test(test_ssgp_gradient),
        cmocka_unit_test(test_ssgp_recovers_trend),
        cmocka_unit_test(test_ssgp_observe),
        cmocka_unit_test(test_svgp_mean_gradient),
        cmocka_unit_test(test_svgp_recovers_trend),
        cmocka_unit_test(test_svgp_bernoulli_mean),
        cmocka_unit_test(test_msrfr_joint_mean),
        cmocka_unit_test(test_hkd_gradient),
        cmocka_unit_test(test_hkd_maximiser),
        cmocka_unit_test(test_hkd_recovers_trend),
        cmocka_unit_test(test_gwi_prior_beta),
        cmocka_unit_test(test_gwi_recovers_trend),
        cmocka_unit_test(test_pls_recovers_trend),
        cmocka_unit_test(test_pls_latent_mean),
        cmocka_unit_test(test_rfgp_recovers_trend),
        cmocka_unit_test(test_rfgp_observe),
        cmocka_unit_test(test_rfgp_warmup_observe),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
