/* core/base/prior and core/model/hyperspec: priors, bounds and held
 * hyperparameters of a fit.
 *
 * - Each prior's log density against its textbook formula written out here,
 *   and its derivative in t = log x against central differences.
 * - The MAP objective (the exact LML of a seeded toy minus the log prior) and
 *   its gradient against central differences, for every prior type on the
 *   lengthscale and on the noise.
 * - A very tight prior ends the fit at the prior's mode (lognormal:
 *   exp(loc - scale^2); normal on log x: exp(loc); gamma: (shape - 1)/rate).
 * - Bounds hold exactly, and the at_bound warning appears when and only when
 *   a bound is active; a noiseless toy ends on the noise floor and says so.
 * - A held single lengthscale stays bit for bit as given.
 * - The spec and warnings survive export and import.
 * - Refusals: a method that does not take priors, a start outside its
 *   bounds, a noise prior on a bernoulli model. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/prior.h"
#include "core/base/rng.h"
#include "core/kernel/lml.h"
#include "core/methods/registry.h"
#include "core/model/hyperspec.h"
#include "core/model/method.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

#define N 40

/* ---- the densities ---- */

static double fd_dt(const gp_prior *p, double t)
{
    double h = 1e-5;
    return (gp_prior_log_density(p, t + h, NULL) - gp_prior_log_density(p, t - h, NULL)) /
           (2 * h);
}

static void test_densities(void **state)
{
    (void)state;
    double x = 0.7, t = log(x), pi = 3.14159265358979323846;
    struct {
        gp_prior p;
        double expect; /* log density written out from the textbook */
    } cases[] = {
        {{GP_PRIOR_LOGNORMAL, 0.3, 1.7},
         -log(x * 1.7 * sqrt(2 * pi)) - (t - 0.3) * (t - 0.3) / (2 * 1.7 * 1.7)},
        {{GP_PRIOR_NORMAL, 0.3, 1.7},
         -log(1.7 * sqrt(2 * pi)) - (t - 0.3) * (t - 0.3) / (2 * 1.7 * 1.7)},
        {{GP_PRIOR_GAMMA, 3.0, 6.0}, log(pow(6.0, 3.0) * x * x * exp(-6.0 * x) / 2.0)},
        {{GP_PRIOR_HALFCAUCHY, 0.5, 0}, log(2.0 / (pi * 0.5 * (1 + (x / 0.5) * (x / 0.5))))},
        {{GP_PRIOR_UNIFORM, 0.2, 1.2}, -log(1.0)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double d;
        double lp = gp_prior_log_density(&cases[i].p, t, &d);
        tu_assert_within(lp, cases[i].expect, 1e-12, "line %d", __LINE__);
        tu_assert_within(d, fd_dt(&cases[i].p, t), 1e-7, "line %d", __LINE__);
        gp_error err;
        assert_int_equal(gp_prior_check(&cases[i].p, "priors.x", &err), GP_OK);
    }
    gp_prior u = {GP_PRIOR_UNIFORM, 0.2, 1.2};
    assert_true(isinf(gp_prior_log_density(&u, log(1.3), NULL)));
    gp_prior bad = {GP_PRIOR_GAMMA, 2.0, -1.0};
    gp_error err;
    assert_int_equal(gp_prior_check(&bad, "kernel.priors.noise", &err), GP_EINVAL);
    assert_string_equal(err.field, "kernel.priors.noise.rate");
}

static void test_bound_map(void **state)
{
    (void)state;
    double lo = log(0.5), hi = log(4.0);
    for (double t = lo + 0.01; t < hi; t += 0.1) {
        double u = gp_bound_to_u(t, lo, hi), d;
        tu_assert_within(gp_bound_to_t(u, lo, hi, &d), t, 1e-12, "line %d", __LINE__);
        double h = 1e-6;
        double fd = (gp_bound_to_t(u + h, lo, hi, NULL) - gp_bound_to_t(u - h, lo, hi, NULL)) /
                    (2 * h);
        tu_assert_within(d, fd, 1e-8, "line %d", __LINE__);
    }
    /* no step, however long, leaves the interval */
    assert_true(gp_bound_to_t(1e6, lo, hi, NULL) <= hi);
    assert_true(gp_bound_to_t(-1e6, lo, hi, NULL) >= lo);
}

/* ---- the MAP objective on the exact LML ---- */

typedef struct toy {
    double X[N], y[N];
    gp_kernel *k;
    gp_noise_param np;
} toy;

static void make_toy(toy *t, double noise)
{
    gp_rng rng;
    gp_rng_seed(&rng, 33);
    double P = 0;
    for (size_t i = 0; i < N; i++) {
        t->X[i] = 6.0 * gp_rng_uniform(&rng) - 3.0;
        t->y[i] = sin(2.0 * t->X[i]) + sqrt(noise) * gp_rng_normal(&rng);
        P += t->y[i] * t->y[i] / N;
    }
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&t->k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    t->np = (gp_noise_param){1, P, 1e-8 * P};
}

/* -LML over x = (log variance, log lengthscale, noise x). */
static double toy_objective(void *ctx, const double *x, double *g)
{
    toy *t = ctx;
    gp_kernel_set_params(t->k, x);
    double s2 = gp_noise_param_value(&t->np, x[2]), lml, grad[3];
    gp_error err;
    if (gp_exact_lml_grad(t->k, s2, t->X, 1, N, t->y, &lml, grad, &err))
        return INFINITY;
    if (g) {
        g[0] = -grad[0];
        g[1] = -grad[1];
        g[2] = -gp_noise_param_grad(&t->np, s2, grad[2]);
    }
    return -lml;
}

static void test_map_gradient(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 0.01);
    gp_prior priors[] = {{GP_PRIOR_LOGNORMAL, 0.2, 0.8},
                         {GP_PRIOR_GAMMA, 2.5, 3.0},
                         {GP_PRIOR_NORMAL, -0.4, 1.3},
                         {GP_PRIOR_HALFCAUCHY, 0.6, 0},
                         {GP_PRIOR_UNIFORM, 0.01, 9.0}};
    size_t coord[3] = {0, 1, GP_HYPER_NOISE};
    gp_hyper_coords hc = {coord, 3, t.np.floor};
    double x[3] = {log(0.8), log(0.6), log(0.05)};
    for (size_t i = 0; i < sizeof priors / sizeof priors[0]; i++) {
        gp_hyper_spec *s;
        gp_error err;
        assert_int_equal(gp_hyper_spec_new(&s, t.k, &err), GP_OK);
        s->entry[1].prior = priors[i]; /* the lengthscale */
        s->entry[2].prior = priors[i]; /* the noise */
        double g[3], f = gp_hyper_eval(s, &hc, t.k, toy_objective, &t, x, g, &err);
        double plain = toy_objective(&t, x, NULL);
        assert_true(isfinite(f));
        assert_true(fabs(f - plain) > 1e-6); /* the prior is in the objective */
        for (size_t j = 0; j < 3; j++) {
            double xp[3], xm[3], h = 1e-5;
            memcpy(xp, x, sizeof xp);
            memcpy(xm, x, sizeof xm);
            xp[j] += h;
            xm[j] -= h;
            double fd = (gp_hyper_eval(s, &hc, t.k, toy_objective, &t, xp, NULL, &err) -
                         gp_hyper_eval(s, &hc, t.k, toy_objective, &t, xm, NULL, &err)) /
                        (2 * h);
            if (fabs(fd - g[j]) > 1e-5 * (1 + fabs(fd)))
                fail_msg("prior %s, coordinate %zu: gradient %.10g, differences %.10g",
                         gp_prior_type_name(priors[i].type), j, g[j], fd);
        }
        gp_hyper_spec_free(s);
    }
    gp_kernel_free(t.k);
}

/* ---- fits through gp_model_fit ---- */

typedef struct fit_case {
    toy t;
    gp_fit_request req;
    gp_hyper_spec *s;
} fit_case;

static void fit_case_init(fit_case *c, double noise)
{
    make_toy(&c->t, noise);
    fit_request(&c->req, c->t.X, c->t.y, N, 1, c->t.k, NULL, 0);
    c->req.standardize = 0; /* the toy's own units: the modes below are in them */
    gp_error err;
    assert_int_equal(gp_hyper_spec_new(&c->s, c->t.k, &err), GP_OK);
    c->req.hyper = c->s;
}

static void fit_case_free(fit_case *c)
{
    gp_hyper_spec_free(c->s);
    gp_kernel_free(c->t.k);
}

static double fitted(const gp_model *m, size_t i)
{
    double theta[4];
    gp_kernel_get_params(m->kernel, theta);
    return i < gp_kernel_n_params(m->kernel) ? exp(theta[i]) : m->noise_variance;
}

static void test_tight_prior_mode(void **state)
{
    (void)state;
    const gp_method *exact = gp_method_find("exact");
    fit_case c;
    fit_case_init(&c, 0.01);
    double sd = 1e-3;
    c.s->entry[0].prior = (gp_prior){GP_PRIOR_NORMAL, log(2.0), sd};       /* variance */
    c.s->entry[1].prior = (gp_prior){GP_PRIOR_LOGNORMAL, log(1.5), sd};    /* lengthscale */
    c.s->entry[2].prior = (gp_prior){GP_PRIOR_GAMMA, 1e6 + 1.0, 1e6 / 0.2}; /* noise */
    gp_model *m = fit_ok(exact, &c.req, "tight priors");
    tu_assert_within(fitted(m, 0), 2.0, 2.0 * 5 * sd, "line %d", __LINE__);
    tu_assert_within(fitted(m, 1), 1.5 * exp(-sd * sd), 1.5 * 5 * sd, "line %d", __LINE__);
    tu_assert_within(fitted(m, 2), 0.2, 0.2 * 5e-3, "line %d", __LINE__);
    /* the log prior is reported and the data pull is visible: a tight
     * prior's density at its mode is large */
    assert_true(m->diag.log_prior > 5.0);
    gp_model_free(m);
    fit_case_free(&c);
}

static size_t count_warnings(const gp_model *m, gp_warning_code code, size_t entry)
{
    size_t k = 0;
    for (size_t i = 0; i < m->warnings.n; i++)
        k += m->warnings.w[i].code == code && m->warnings.w[i].entry == entry;
    return k;
}

static void test_bounds(void **state)
{
    (void)state;
    const gp_method *exact = gp_method_find("exact");
    fit_case c;
    fit_case_init(&c, 0.01);
    /* free: the toy's lengthscale is about 0.5 */
    gp_model *free_fit = fit_ok(exact, &c.req, "no bounds");
    double ell = fitted(free_fit, 1);
    assert_true(ell > 0.2 && ell < 1.0);
    assert_int_equal(free_fit->warnings.n, 0);
    /* an active bound: the fit ends on it, exactly inside, and says so */
    c.s->entry[1].lo = 2.0;
    c.s->entry[1].hi = 3.0;
    c.t.k->log_lengthscale[0] = log(2.5);
    gp_model *m = fit_ok(exact, &c.req, "active bound");
    assert_true(fitted(m, 1) >= 2.0 && fitted(m, 1) <= 3.0);
    tu_assert_within(fitted(m, 1), 2.0, 2e-3, "line %d", __LINE__);
    assert_int_equal(count_warnings(m, GP_WARN_AT_BOUND, 1), 1);
    assert_int_equal(m->warnings.w[0].upper, 0);
    gp_model_free(m);
    /* an inactive bound: the same optimum, no warning */
    c.s->entry[1].lo = 0.05;
    c.s->entry[1].hi = 50.0;
    c.t.k->log_lengthscale[0] = 0.0;
    m = fit_ok(exact, &c.req, "inactive bound");
    tu_assert_within(fitted(m, 1), ell, 1e-3 * ell, "line %d", __LINE__);
    assert_int_equal(m->warnings.n, 0);
    gp_model_free(m);
    /* a noise bound above the toy's noise: active from above */
    c.s->entry[2].lo = 0.1;
    c.s->entry[2].hi = 0.5;
    m = fit_ok(exact, &c.req, "noise bound");
    assert_true(m->noise_variance >= 0.1 && m->noise_variance <= 0.5);
    assert_int_equal(count_warnings(m, GP_WARN_AT_BOUND, 2), 1);
    gp_model_free(m);
    gp_model_free(free_fit);
    fit_case_free(&c);
}

static void test_noise_floor_warning(void **state)
{
    (void)state;
    const gp_method *exact = gp_method_find("exact");
    fit_case c;
    fit_case_init(&c, 0.0); /* noiseless: the noise runs to its floor */
    c.req.hyper = NULL;
    gp_model *m = fit_ok(exact, &c.req, "noiseless");
    assert_int_equal(count_warnings(m, GP_WARN_AT_NOISE_FLOOR, 2), 1);
    gp_model_free(m);
    fit_case_free(&c);
    fit_case_init(&c, 0.01); /* noisy: no warning */
    c.req.hyper = NULL;
    m = fit_ok(exact, &c.req, "noisy");
    assert_int_equal(m->warnings.n, 0);
    gp_model_free(m);
    fit_case_free(&c);
}

static void test_held_single_lengthscale(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    double X[N * 3], y[N];
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < 3; j++)
            X[i + j * N] = gp_rng_normal(&rng);
        y[i] = sin(X[i]) + 0.5 * X[i + N] + 0.1 * gp_rng_normal(&rng);
    }
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 3, 1, NULL, 0, &err), GP_OK);
    k->log_lengthscale[2] = log(0.37);
    gp_hyper_spec *s;
    assert_int_equal(gp_hyper_spec_new(&s, k, &err), GP_OK);
    s->entry[3].fixed = 1; /* lengthscale[2] */
    const char *names[] = {"exact", "sgpr", "svgp"};
    for (size_t i = 0; i < 3; i++) {
        gp_fit_request req;
        fit_request(&req, X, y, N, 3, k, NULL, 0);
        req.hyper = s;
        gp_model *m = fit_ok(gp_method_find(names[i]), &req, names[i]);
        assert_true(m->kernel->log_lengthscale[2] == log(0.37));
        assert_true(m->kernel->log_lengthscale[0] != 0.0); /* the others moved */
        gp_model_free(m);
    }
    gp_hyper_spec_free(s);
    gp_kernel_free(k);
}

/* msrfr's own Adam ascent: projected steps keep the bounds, and a tight
 * prior on the noise ends the fit at its mode. */
static void test_msrfr_bounds_and_prior(void **state)
{
    (void)state;
    const gp_method *msrfr = gp_method_find("msrfr");
    fit_case c;
    fit_case_init(&c, 0.01);
    gp_option_value opts[] = {{.name = "iterations", .number = 60}};
    c.req.options = opts;
    c.req.n_options = 1;
    c.s->entry[1].lo = 1.5;
    c.s->entry[1].hi = 4.0;
    c.t.k->log_lengthscale[0] = log(2.0);
    c.s->entry[2].prior = (gp_prior){GP_PRIOR_NORMAL, log(0.3), 1e-4};
    gp_model *m = fit_ok(msrfr, &c.req, "msrfr");
    assert_true(fitted(m, 1) >= 1.5 && fitted(m, 1) <= 4.0);
    tu_assert_within(m->noise_variance, 0.3, 0.3 * 1e-2, "line %d", __LINE__);
    gp_model_free(m);
    /* no bound: the same start leaves the interval (the bound did the work) */
    c.s->entry[1].lo = 0.0;
    c.s->entry[1].hi = INFINITY;
    m = fit_ok(msrfr, &c.req, "msrfr, no bound");
    assert_true(fitted(m, 1) < 1.5);
    gp_model_free(m);
    fit_case_free(&c);
}

/* rfgp's width selection by marginal likelihood runs through the spec the
 * model keeps (it may run later, in observe); other selections fit nothing
 * and refuse priors and bounds. */
static void test_rfgp_ml_bounds(void **state)
{
    (void)state;
    const gp_method *rfgp = gp_method_find("rfgp");
    fit_case c;
    fit_case_init(&c, 0.01);
    gp_option_value opts[] = {{.name = "features", .number = 60},
                              {.name = "warmup", .number = N},
                              {.name = "max_iterations", .number = 40},
                              {.name = "width_selection", .string = "ml"}};
    c.req.options = opts;
    c.req.n_options = 4;
    c.s->entry[1].lo = 2.0;
    c.s->entry[1].hi = 3.0;
    c.t.k->log_lengthscale[0] = log(2.5);
    gp_model *m = fit_ok(rfgp, &c.req, "rfgp ml");
    assert_true(fitted(m, 1) >= 2.0 && fitted(m, 1) <= 3.0);
    assert_int_equal(count_warnings(m, GP_WARN_AT_BOUND, 1), 1);
    gp_model_free(m);
    opts[3].string = "median";
    gp_error err;
    assert_int_equal(gp_model_fit(rfgp, &c.req, &m, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "kernel.priors");
    fit_case_free(&c);
}

/* svgp's classifiers with ARD lengthscales fit under the default preset
 * unless told otherwise; an empty spec ("priors": "none") keeps plain ML,
 * bit for bit the fit of a request that states nothing to other methods. */
static void test_svgp_classifier_default(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 9);
    double X[N * 3], y[N];
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < 3; j++)
            X[i + j * N] = gp_rng_normal(&rng);
        y[i] = X[i] + 0.5 * X[i + N] > 0.0;
    }
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 3, 1, NULL, 0, &err), GP_OK);
    gp_option_value opts[] = {{.name = "max_iterations", .number = 30}};
    gp_fit_request req;
    fit_request(&req, X, y, N, 3, k, opts, 1);
    req.likelihood = GP_LIK_BERNOULLI;
    gp_model *m = fit_ok(gp_method_find("svgp"), &req, "svgp bernoulli");
    assert_non_null(m->hyper);
    assert_true(m->hyper->preset);
    assert_true(m->diag.log_prior != 0.0);
    gp_model_free(m);
    gp_hyper_spec *none;
    assert_int_equal(gp_hyper_spec_new(&none, k, &err), GP_OK);
    req.hyper = none;
    m = fit_ok(gp_method_find("svgp"), &req, "svgp bernoulli, priors none");
    assert_false(gp_hyper_shapes_objective(m->hyper));
    assert_true(m->diag.log_prior == 0.0);
    gp_model_free(m);
    gp_hyper_spec_free(none);
    /* gaussian: no default */
    req.hyper = NULL;
    req.likelihood = GP_LIK_GAUSSIAN;
    m = fit_ok(gp_method_find("svgp"), &req, "svgp gaussian");
    assert_null(m->hyper);
    gp_model_free(m);
    gp_kernel_free(k);
}

static void test_persisted(void **state)
{
    (void)state;
    const gp_method *exact = gp_method_find("exact");
    fit_case c;
    fit_case_init(&c, 0.01);
    c.s->entry[1].lo = 2.0;
    c.s->entry[1].hi = 3.0;
    c.s->entry[2].prior = (gp_prior){GP_PRIOR_LOGNORMAL, -4.0, 1.0};
    c.t.k->log_lengthscale[0] = log(2.5);
    gp_model *m = fit_ok(exact, &c.req, "persisted");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(m, &st, &err), GP_OK);
    gp_model *back = NULL;
    assert_int_equal(gp_model_import(exact, &st, &back, &err), GP_OK);
    assert_non_null(back->hyper);
    assert_int_equal(back->hyper->n_kernel, 2);
    assert_memory_equal(back->hyper->entry, m->hyper->entry, 3 * sizeof(gp_hyper_entry));
    assert_int_equal(back->warnings.n, m->warnings.n);
    assert_memory_equal(back->warnings.w, m->warnings.w, m->warnings.n * sizeof(gp_fit_warning));
    assert_true(back->diag.log_prior == m->diag.log_prior);
    gp_model_free(back);
    gp_state_free(&st);
    gp_model_free(m);
    fit_case_free(&c);
}

static void test_default_preset(void **state)
{
    (void)state;
    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_MATERN52, 4, 1, NULL, 0, &err), GP_OK);
    gp_hyper_spec *s;
    assert_int_equal(gp_hyper_spec_new(&s, k, &err), GP_OK);
    gp_hyper_default_priors(s, k);
    assert_int_equal(s->entry[0].prior.type, GP_PRIOR_GAMMA);
    tu_assert_within(s->entry[0].prior.a, 2.0, 0, "line %d", __LINE__);
    tu_assert_within(s->entry[0].prior.b, 0.15, 0, "line %d", __LINE__);
    for (size_t j = 1; j <= 4; j++) {
        assert_int_equal(s->entry[j].prior.type, GP_PRIOR_LOGNORMAL);
        tu_assert_within(s->entry[j].prior.a, sqrt(2.0) + 0.5 * log(48.0), 1e-15, "line %d", __LINE__);
        tu_assert_within(s->entry[j].prior.b, sqrt(3.0), 1e-15, "line %d", __LINE__);
    }
    tu_assert_within(s->entry[5].prior.a, -4.0, 0, "line %d", __LINE__);
    assert_true(s->preset);
    gp_hyper_spec_free(s);
    gp_kernel_free(k);
}

static void test_refusals(void **state)
{
    (void)state;
    fit_case c;
    fit_case_init(&c, 0.01);
    gp_model *m = NULL;
    gp_error err;
    /* a hyperparameter the method does not fit: msrfr never learns the variance */
    c.s->entry[0].prior = (gp_prior){GP_PRIOR_LOGNORMAL, 0, 1};
    assert_int_equal(gp_model_fit(gp_method_find("msrfr"), &c.req, &m, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "kernel.priors");
    c.s->entry[0].prior.type = GP_PRIOR_NONE;
    /* a start outside its bounds */
    c.s->entry[1].lo = 2.0;
    c.s->entry[1].hi = 3.0;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &c.req, &m, &err), GP_EINVAL);
    assert_string_equal(err.field, "kernel.lengthscale");
    assert_null(m);
    /* a noise prior on a model without noise */
    c.s->entry[1] = (gp_hyper_entry){.hi = INFINITY};
    c.s->entry[2].prior = (gp_prior){GP_PRIOR_LOGNORMAL, -4, 1};
    for (size_t i = 0; i < N; i++)
        c.t.y[i] = c.t.y[i] > 0;
    c.req.likelihood = GP_LIK_BERNOULLI;
    assert_int_equal(gp_model_fit(gp_method_find("svgp"), &c.req, &m, &err), GP_EINVAL);
    assert_string_equal(err.field, "kernel.priors.noise");
    fit_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_densities),
        cmocka_unit_test(test_bound_map),
        cmocka_unit_test(test_map_gradient),
        cmocka_unit_test(test_tight_prior_mode),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_noise_floor_warning),
        cmocka_unit_test(test_held_single_lengthscale),
        cmocka_unit_test(test_msrfr_bounds_and_prior),
        cmocka_unit_test(test_rfgp_ml_bounds),
        cmocka_unit_test(test_svgp_classifier_default),
        cmocka_unit_test(test_persisted),
        cmocka_unit_test(test_default_preset),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
