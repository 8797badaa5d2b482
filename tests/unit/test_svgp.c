/* Method "svgp" (core/methods/svgp/svgp.h): with a Gaussian likelihood the ELBO at
 * the closed-form optimal q is sgpr's collapsed bound and one full-batch
 * natural-gradient step of size 1 lands on that q
 * (docs/methods/sparse-variational-and-pls.md §1.1(b), §5.4); a fit with
 * everything but q held matches sgpr's bound and predictions; finite-difference
 * gradients of every block for gaussian, bernoulli and poisson; bernoulli and
 * poisson fits on synthetic data; the minibatch Adam path against L-BFGS;
 * export/import. */
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

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/inducing/inducing.h"
#include "core/methods/registry.h"
#include "core/methods/sgpr.h"
#include "core/methods/svgp/svgp.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

/* ---- helpers ---- */

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *rbf(size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

/* Points in [-2, 2]^d (point-major) and labels of the likelihood: a smooth
 * latent g(x), y = g + noise (gaussian), Bernoulli(logistic(2 g)), Poisson(exp(g)). */
static double latent_g(const double *x, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += sin(1.3 * x[j] + (double)j);
    return s;
}

static void problem(gp_likelihood lik, size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double g = latent_g(X + i * d, d);
        if (lik == GP_LIK_GAUSSIAN)
            y[i] = g + 0.2 * gp_rng_normal(&rng);
        else if (lik == GP_LIK_BERNOULLI)
            y[i] = gp_rng_uniform(&rng) < 1.0 / (1.0 + exp(-2.0 * g)) ? 1.0 : 0.0;
        else
            y[i] = gp_rng_poisson(&rng, exp(g));
    }
}

static gp_quadrature quad20(void)
{
    gp_quadrature q;
    gp_error err;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    return q;
}

static double elbo_of(const gp_kernel *k, const gp_lik *lik, const double *X, size_t n,
                      const double *y, const double *Z, size_t m, const double *mq,
                      const double *Lq, const gp_svgp_grad *g)
{
    gp_quadrature q = quad20();
    gp_svgp_terms t;
    gp_error err;
    if (gp_svgp_elbo(k, lik, &q, X, n, y, Z, m, mq, Lq, &t, g, &err) != GP_OK)
        fail_msg("svgp elbo: %s", err.message);
    return t.elbo;
}

/* sgpr's bound and whitened posterior at (k, s2, Z). */
static double sgpr_post(const gp_kernel *k, double s2, const double *X, size_t n, size_t d,
                        const double *y, const double *Z, size_t m, gp_inducing_post *post)
{
    gp_sgpr_terms t;
    gp_error err;
    if (gp_sgpr_bound(k, s2, X, n, d, y, Z, m, &t, NULL, NULL, post, &err) != GP_OK)
        fail_msg("sgpr: %s", err.message);
    return t.bound;
}

static void cholesky(const double *C, size_t m, double *L)
{
    memcpy(L, C, m * m * sizeof *L);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)m, L, (int)m), 0);
    for (size_t j = 1; j < m; j++)
        memset(L + j * m, 0, j * sizeof *L);
}

/* ---- 1. the Gaussian identities ---- */

#define GN 40
#define GD 2
#define GM 7

static void gaussian_setup(double *X, double *y, double *Z, gp_kernel **k)
{
    problem(GP_LIK_GAUSSIAN, GN, GD, 11, X, y);
    for (size_t i = 0; i < GM; i++) /* every fifth point */
        memcpy(Z + i * GD, X + 5 * i * GD, GD * sizeof *Z);
    *k = rbf(GD, 1);
    (*k)->log_variance = log(1.3);
    (*k)->log_lengthscale[0] = log(0.9);
    (*k)->log_lengthscale[1] = log(1.4);
}

static void test_gaussian_optimum_is_sgpr_bound(void **state)
{
    (void)state;
    double X[GN * GD], y[GN], Z[GM * GD], Lq[GM * GM];
    gp_kernel *k;
    gaussian_setup(X, y, Z, &k);
    double s2 = 0.07;
    gp_inducing_post post;
    double bound = sgpr_post(k, s2, X, GN, GD, y, Z, GM, &post);
    cholesky(post.C, GM, Lq);
    gp_lik lik = {GP_LIK_GAUSSIAN, s2};
    double elbo = elbo_of(k, &lik, X, GN, y, Z, GM, post.mt, Lq, NULL);
    tu_assert_close(elbo, bound, 1e-10, 0.0, "ELBO at the optimal q vs sgpr's bound");
    /* any other q is lower */
    post.mt[0] += 0.1;
    assert_true(elbo_of(k, &lik, X, GN, y, Z, GM, post.mt, Lq, NULL) < bound);
    gp_inducing_post_free(&post);
    gp_kernel_free(k);
}

static void test_natgrad_step_one_is_optimal_q(void **state)
{
    (void)state;
    double X[GN * GD], y[GN], Z[GM * GD], mq[GM], Lq[GM * GM] = {0}, S[GM * GM];
    gp_kernel *k;
    gaussian_setup(X, y, Z, &k);
    double s2 = 0.07;
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t j = 0; j < GM; j++) { /* an arbitrary q */
        mq[j] = gp_rng_normal(&rng);
        for (size_t i = j; i < GM; i++)
            Lq[i + j * GM] = i == j ? 0.5 + gp_rng_uniform(&rng) : 0.3 * gp_rng_normal(&rng);
    }
    gp_inducing_post post;
    sgpr_post(k, s2, X, GN, GD, y, Z, GM, &post);
    gp_lik lik = {GP_LIK_GAUSSIAN, s2};
    gp_quadrature q = quad20();
    gp_error err;
    assert_int_equal(gp_svgp_natgrad(k, &lik, &q, X, GN, y, 1.0, Z, GM, 1.0, mq, Lq, &err), GP_OK);
    for (size_t i = 0; i < GM; i++)
        for (size_t j = 0; j < GM; j++) {
            double s = 0.0;
            for (size_t a = 0; a < GM; a++)
                s += Lq[i + a * GM] * Lq[j + a * GM];
            S[i + j * GM] = s;
        }
    tu_assert_close_array(mq, post.mt, GM, 1e-9, 1e-11, "natgrad m vs B^{-1} A y / s2");
    tu_assert_close_array(S, post.C, GM * GM, 1e-9, 1e-11, "natgrad S vs B^{-1}");
    gp_inducing_post_free(&post);
    gp_kernel_free(k);
}

/* A fit with kernel, noise and Z held: only q moves, so svgp ends on sgpr's bound. */
static void test_fit_matches_sgpr(void **state)
{
    (void)state;
    enum { n = 120, d = 2, ms = 9 };
    double *X = dalloc(n * d), *y = dalloc(n), Xs[ms * d];
    problem(GP_LIK_GAUSSIAN, n, d, 3, X, y);
    for (size_t i = 0; i < ms * d; i++)
        Xs[i] = -1.8 + 0.4 * (double)i;
    gp_kernel *k = rbf(d, 1);
    k->fixed = GP_FIX_ALL;
    gp_option_value so[] = {{"inducing", 15, NULL, NULL},
                            {"optimize_inducing", 0, NULL, NULL},
                            {"reselect", 0, NULL, NULL}};
    gp_option_value vo[] = {{"inducing", 15, NULL, NULL}, {"optimize_inducing", 0, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, so, 3);
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = 0.05;
    gp_model *ms_ = fit_ok(gp_method_find("sgpr"), &req, "sgpr");
    req.options = vo;
    req.n_options = 2;
    gp_model *mv = fit_ok(gp_method_find("svgp"), &req, "svgp");
    tu_assert_close(mv->diag.objective, ms_->diag.objective, 1e-6, 0.0, "svgp ELBO vs sgpr bound");
    double mu1[ms], v1[ms], mu2[ms], v2[ms];
    predict_ok(ms_, Xs, ms, d, 1, mu1, v1, NULL);
    predict_ok(mv, Xs, ms, d, 1, mu2, v2, NULL);
    tu_assert_close_array(mu2, mu1, ms, 1e-6, 1e-7, "mean");
    tu_assert_close_array(v2, v1, ms, 1e-6, 1e-7, "variance");
    gp_model_free(ms_);
    gp_model_free(mv);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* ---- 2. gradients ---- */

#define FN 25
#define FD 2
#define FM 5

typedef struct fd_ctx {
    gp_kernel *k;
    gp_lik lik;
    double X[FN * FD], y[FN];
    size_t np; /* kernel parameters */
} fd_ctx;

/* x = (kernel log-parameters, log s2, Z, m, Lq lower triangle by columns) */
static size_t fd_dim(const fd_ctx *c)
{
    return c->np + 1 + FD * FM + FM + FM * (FM + 1) / 2;
}

static void fd_unpack(fd_ctx *c, const double *x, double *Z, double *mq, double *Lq)
{
    gp_kernel_set_params(c->k, x);
    if (c->lik.type == GP_LIK_GAUSSIAN)
        c->lik.noise = exp(x[c->np]);
    size_t o = c->np + 1;
    memcpy(Z, x + o, FD * FM * sizeof *Z);
    o += FD * FM;
    memcpy(mq, x + o, FM * sizeof *mq);
    o += FM;
    memset(Lq, 0, FM * FM * sizeof *Lq);
    for (size_t j = 0; j < FM; j++)
        for (size_t i = j; i < FM; i++)
            Lq[i + j * FM] = x[o++];
}

static double fd_value(void *ctx, const double *x)
{
    fd_ctx *c = ctx;
    double Z[FD * FM], mq[FM], Lq[FM * FM];
    fd_unpack(c, x, Z, mq, Lq);
    return elbo_of(c->k, &c->lik, c->X, FN, c->y, Z, FM, mq, Lq, NULL);
}

static void fd_name(void *ctx, size_t i, char *buf, size_t len)
{
    fd_ctx *c = ctx;
    size_t zo = c->np + 1, mo = zo + FD * FM, lo = mo + FM;
    if (i <= c->np)
        name_theta_s2_z(c->k, c->np, i, buf, len);
    else if (i < mo)
        snprintf(buf, len, "Z[%zu]", i - zo);
    else if (i < lo)
        snprintf(buf, len, "m[%zu]", i - mo);
    else
        snprintf(buf, len, "Lq packed[%zu]", i - lo);
}

static void check_gradients(gp_likelihood type)
{
    fd_ctx c = {.k = rbf(FD, 1), .lik = {type, type == GP_LIK_GAUSSIAN ? 0.3 : 0.0}};
    problem(type, FN, FD, 17, c.X, c.y);
    c.k->log_variance = log(1.5);
    c.k->log_lengthscale[0] = log(0.8);
    c.k->log_lengthscale[1] = log(1.2);
    c.np = gp_kernel_n_params(c.k);
    size_t n = fd_dim(&c), o = 0;
    double *x = dalloc(n), *an = dalloc(n);
    gp_kernel_get_params(c.k, x);
    o = c.np;
    x[o++] = log(0.3);
    gp_rng rng;
    gp_rng_seed(&rng, 23);
    for (size_t i = 0; i < FD * FM; i++)
        x[o++] = c.X[3 * i] + 0.1 * gp_rng_normal(&rng);
    for (size_t i = 0; i < FM; i++)
        x[o++] = 0.5 * gp_rng_normal(&rng);
    for (size_t j = 0; j < FM; j++)
        for (size_t i = j; i < FM; i++)
            x[o++] = i == j ? 0.4 + 0.5 * gp_rng_uniform(&rng) : 0.2 * gp_rng_normal(&rng);
    /* analytic */
    double Z[FD * FM], mq[FM], Lq[FM * FM], gth[16], gz[FD * FM], gm[FM], gc[FM * FM];
    fd_unpack(&c, x, Z, mq, Lq);
    gp_svgp_grad g = {gth, gz, gm, gc};
    elbo_of(c.k, &c.lik, c.X, FN, c.y, Z, FM, mq, Lq, &g);
    memcpy(an, gth, (c.np + 1) * sizeof *an);
    o = c.np + 1;
    memcpy(an + o, gz, FD * FM * sizeof *an);
    o += FD * FM;
    memcpy(an + o, gm, FM * sizeof *an);
    o += FM;
    for (size_t j = 0; j < FM; j++)
        for (size_t i = j; i < FM; i++)
            an[o++] = gc[i + j * FM];
    tu_fd_spec spec = {.step = 1e-5, .rtol = 1e-5, .atol = 1e-6, .floor = 1.0, .relative = 1};
    tu_check_gradient(fd_value, &c, x, n, an, spec, fd_name, gp_likelihood_name(type));
    if (type != GP_LIK_GAUSSIAN)
        assert_true(an[c.np] == 0.0);
    free(x);
    free(an);
    gp_kernel_free(c.k);
}

static void test_gradients_gaussian(void **state)
{
    (void)state;
    check_gradients(GP_LIK_GAUSSIAN);
}

static void test_gradients_bernoulli(void **state)
{
    (void)state;
    check_gradients(GP_LIK_BERNOULLI);
}

static void test_gradients_poisson(void **state)
{
    (void)state;
    check_gradients(GP_LIK_POISSON);
}

/* ---- 3. non-Gaussian fits ---- */

static void predict_obs(const gp_model *model, const double *Xs, size_t m, size_t d, double *lm,
                        double *lv, double *om, double *ov, double *rm, double *rv)
{
    double *mu = dalloc(m), *var = dalloc(m);
    gp_predict_request pr = {.X = Xs, .m = m, .d = d, .include_noise = 1};
    gp_prediction out = {.mean = mu, .variance = var, .latent_mean = lm, .latent_variance = lv,
                         .obs_mean = om, .obs_variance = ov, .rate_mean = rm,
                         .rate_variance = rv};
    gp_error err;
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("predict: %s", err.message);
    free(mu);
    free(var);
}

static void test_bernoulli_fit(void **state)
{
    (void)state;
    enum { n = 300, nt = 400, d = 2 };
    double *X = dalloc(n * d), *y = dalloc(n), *Xt = dalloc(nt * d), *yt = dalloc(nt);
    problem(GP_LIK_BERNOULLI, n, d, 31, X, y);
    problem(GP_LIK_BERNOULLI, nt, d, 32, Xt, yt);
    /* the test inputs column-major for predict (n x d) */
    double *Xc = dalloc(n * d), *Xtc = dalloc(nt * d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            Xc[i + j * n] = X[i * d + j];
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < d; j++)
            Xtc[i + j * nt] = Xt[i * d + j];
    gp_kernel *k = rbf(d, 1);
    gp_option_value o[] = {{"inducing", 30, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, Xc, y, n, d, k, o, 1);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *model = fit_ok(gp_method_find("svgp"), &req, "svgp bernoulli");
    assert_true(model->noise_variance == 0.0);
    double *lm = dalloc(nt), *lv = dalloc(nt), *p = dalloc(nt), *pv = dalloc(nt);
    predict_obs(model, Xtc, nt, d, lm, lv, p, pv, NULL, NULL);
    double loss = 0.0, bayes = 0.0;
    size_t right = 0, bayes_right = 0;
    for (size_t i = 0; i < nt; i++) {
        assert_true(p[i] > 0.0 && p[i] < 1.0);
        right += (p[i] > 0.5) == (yt[i] > 0.5);
        loss -= yt[i] > 0.5 ? log(p[i]) : log(1.0 - p[i]);
        double pt = 1.0 / (1.0 + exp(-2.0 * latent_g(Xt + i * d, d)));
        bayes -= yt[i] > 0.5 ? log(pt) : log(1.0 - pt);
        bayes_right += (pt > 0.5) == (yt[i] > 0.5);
    }
    double acc = (double)right / nt;
    loss /= nt;
    bayes /= nt;
    double bayes_acc = (double)bayes_right / nt;
    print_message("bernoulli: accuracy %.3f, log loss %.4f (true probabilities: %.3f, %.4f)\n",
                  acc, loss, bayes_acc, bayes);
    assert_true(acc > bayes_acc - 0.03);
    assert_true(loss < bayes + 0.05);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X), free(y), free(Xt), free(yt), free(Xc), free(Xtc);
    free(lm), free(lv), free(p), free(pv);
}

static void test_poisson_fit(void **state)
{
    (void)state;
    enum { n = 400, ng = 50 };
    double *X = dalloc(n), *y = dalloc(n), Xg[ng];
    problem(GP_LIK_POISSON, n, 1, 41, X, y); /* rate exp(sin(1.3 x)) */
    for (size_t i = 0; i < ng; i++)
        Xg[i] = -1.8 + 3.6 * (double)i / (ng - 1);
    gp_kernel *k = rbf(1, 0);
    gp_option_value o[] = {{"inducing", 20, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, 1, k, o, 1);
    req.likelihood = GP_LIK_POISSON;
    gp_model *model = fit_ok(gp_method_find("svgp"), &req, "svgp poisson");
    double lm[ng], lv[ng], om[ng], ov[ng], rm[ng], rv[ng];
    predict_obs(model, Xg, ng, 1, lm, lv, om, ov, rm, rv);
    double worst = 0.0;
    for (size_t i = 0; i < ng; i++) {
        double truth = exp(sin(1.3 * Xg[i]));
        worst = fmax(worst, fabs(rm[i] - truth) / truth);
        assert_true(ov[i] >= om[i]); /* a Poisson count's variance is at least its mean */
    }
    print_message("poisson: worst relative rate error %.3f\n", worst);
    assert_true(worst < 0.25);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* ---- 4. minibatch Adam with natural gradients ---- */

static void test_adam_reaches_lbfgs(void **state)
{
    (void)state;
    enum { n = 400, d = 1 };
    double *X = dalloc(n), *y = dalloc(n);
    problem(GP_LIK_GAUSSIAN, n, d, 51, X, y);
    gp_kernel *k = rbf(d, 0);
    gp_option_value lo[] = {{"inducing", 15, NULL, NULL}, {"optimizer", 0, "lbfgs", NULL}};
    gp_option_value ao[] = {{"inducing", 15, NULL, NULL},       {"optimizer", 0, "adam", NULL},
                            {"batch_size", 100, NULL, NULL},    {"epochs", 200, NULL, NULL},
                            {"learning_rate", 0.02, NULL, NULL}, {"natgrad_step", 0.1, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, lo, 2);
    gp_model *ml = fit_ok(gp_method_find("svgp"), &req, "lbfgs");
    req.options = ao;
    req.n_options = 6;
    gp_model *ma = fit_ok(gp_method_find("svgp"), &req, "adam");
    const gp_info_item *opt = find_info(ma, "optimizer");
    assert_non_null(opt);
    assert_string_equal(opt->string, "adam");
    double fl = ml->diag.objective, fa = ma->diag.objective;
    print_message("ELBO: lbfgs %.4f, adam %.4f\n", fl, fa);
    assert_true(fa <= fl + 1e-6 * fabs(fl));
    tu_assert_close(fa, fl, 0.0, 1e-3 * n, "adam ELBO vs lbfgs ELBO (within 1e-3 per point)");
    gp_model_free(ml);
    gp_model_free(ma);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* ---- 5. export / import ---- */

static void test_export_import_bit_identical(void **state)
{
    (void)state;
    enum { n = 80, d = 2, ms = 6 };
    double *X = dalloc(n * d), *y = dalloc(n), Xs[ms * d];
    problem(GP_LIK_BERNOULLI, n, d, 61, X, y); /* point-major values used as column-major: any inputs do */
    for (size_t i = 0; i < ms * d; i++)
        Xs[i] = -1.0 + 0.3 * (double)i;
    gp_kernel *k = rbf(d, 0);
    gp_option_value o[] = {{"inducing", 10, NULL, NULL}, {"max_iterations", 50, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, o, 2);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *a = fit_ok(gp_method_find("svgp"), &req, "fit");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(a, &st, &err), GP_OK);
    gp_model *b = NULL;
    assert_int_equal(gp_model_import(gp_method_find("svgp"), &st, &b, &err), GP_OK);
    double l1[ms], v1[ms], p1[ms], q1[ms], l2[ms], v2[ms], p2[ms], q2[ms];
    predict_obs(a, Xs, ms, d, l1, v1, p1, q1, NULL, NULL);
    predict_obs(b, Xs, ms, d, l2, v2, p2, q2, NULL, NULL);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(p1, p2, sizeof p1);
    gp_state_free(&st);
    gp_model_free(a);
    gp_model_free(b);
    gp_kernel_free(k);
    free(X);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_optimum_is_sgpr_bound),
        cmocka_unit_test(test_natgrad_step_one_is_optimal_q),
        cmocka_unit_test(test_fit_matches_sgpr),
        cmocka_unit_test(test_gradients_gaussian),
        cmocka_unit_test(test_gradients_bernoulli),
        cmocka_unit_test(test_gradients_poisson),
        cmocka_unit_test(test_bernoulli_fit),
        cmocka_unit_test(test_poisson_fit),
        cmocka_unit_test(test_adam_reaches_lbfgs),
        cmocka_unit_test(test_export_import_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
