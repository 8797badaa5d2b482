/* core/inducing/hyper: the exact-marginal-likelihood fit of a prior's
 * hyperparameters on a few points (pls's subsets, gwi's inducing inputs).
 * On a seeded 1-D toy (a sine with known noise): the fit raises the LML, ends
 * where its gradient in the free parameters vanishes, reports the LML of the
 * values it writes back and recovers the noise; fixed parameters and a fixed
 * noise stay exactly as given; nothing free evaluates once; cancellation and
 * failures leave the caller's kernel and noise untouched. pls's own use (the
 * averaged subset fits) is covered bit for bit by test_pls. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/cancel.h"
#include "core/base/rng.h"
#include "core/inducing/hyper.h"
#include "core/kernel/kernel.h"
#include "core/kernel/lml.h"
#include "tests/unit/testutil.h"

#define N 40
#define NOISE 0.01 /* the toy's noise variance */
#define GRAD_TOL 1e-3

typedef struct toy {
    double X[N], y[N]; /* d = 1: point-major is just the list */
    gp_kernel *k;
    gp_noise_param np;
} toy;

/* y = sin(2x) + N(0, NOISE) on 40 uniform points of [-3, 3]; an rbf kernel
 * started far from the data's lengthscale (~0.5) and amplitude, the noise
 * learned from "all noise" as the methods start it (gp_noise_param). */
static void make_toy(toy *t)
{
    gp_rng rng;
    gp_rng_seed(&rng, 2024);
    double P = 0.0;
    for (size_t i = 0; i < N; i++) {
        t->X[i] = 6.0 * gp_rng_uniform(&rng) - 3.0;
        t->y[i] = sin(2.0 * t->X[i]) + sqrt(NOISE) * gp_rng_normal(&rng);
        P += t->y[i] * t->y[i] / N;
    }
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&t->k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    t->k->log_lengthscale[0] = log(3.0);
    t->k->log_variance = log(0.2);
    t->np.learned = 1;
    t->np.start = P;
    t->np.floor = 1e-8 * P;
}

static double lml_at(const gp_kernel *k, double s2, const double *X, const double *y,
                     double *grad)
{
    double lml;
    gp_error err;
    assert_int_equal(gp_exact_lml_grad(k, s2, X, 1, N, y, &lml, grad, &err), GP_OK);
    return lml;
}

static void default_options(gp_driver_options *opt)
{
    gp_driver_default_options(opt);
    opt->max_iterations = 500;
    opt->tolerance = 1e-14;
    opt->seed = 7;
}

/* gp_hyper_fit_points on the toy with tight options; it must succeed. */
static void fit_ok(toy *t, double *s2, gp_driver_result *res)
{
    gp_driver_options opt;
    default_options(&opt);
    gp_error err;
    int rc = gp_hyper_fit_points(t->k, &t->np, NULL, s2, t->X, N, t->y, &opt, res, &err);
    if (rc != GP_OK)
        fail_msg("fit failed: %s", err.message);
}

static void test_fit_raises_lml_to_a_stationary_point(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    double s2 = t.np.start, g[3];
    double lml0 = lml_at(t.k, s2, t.X, t.y, NULL);
    gp_driver_result res;
    fit_ok(&t, &s2, &res);
    double lml = lml_at(t.k, s2, t.X, t.y, g);
    assert_true(lml > lml0 + 10.0); /* the start is far off: a real climb */
    /* the driver's objective is -LML at the values written back */
    tu_assert_close(-res.f, lml, 1e-10, 1e-10, "LML reported vs at the fitted values");
    assert_true(res.iterations > 0 && res.evaluations >= res.iterations);
    /* stationary in (log variance, log lengthscale, the noise's unconstrained x) */
    tu_assert_within(g[0], 0.0, GRAD_TOL, "dLML/dlog variance");
    tu_assert_within(g[1], 0.0, GRAD_TOL, "dLML/dlog lengthscale");
    tu_assert_within(gp_noise_param_grad(&t.np, s2, g[2]), 0.0, GRAD_TOL, "dLML/dx noise");
    /* and the values the data were made with, roughly */
    assert_true(s2 > NOISE / 3.0 && s2 < NOISE * 3.0);
    double ls = exp(t.k->log_lengthscale[0]);
    assert_true(ls > 0.25 && ls < 1.0);
    gp_kernel_free(t.k);
}

static void test_fixed_noise_stays_fixed(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    t.np.learned = 0;
    t.np.start = 0.05;
    double s2 = -1.0, g[3]; /* overwritten with the fixed value */
    double ls0 = t.k->log_lengthscale[0];
    fit_ok(&t, &s2, NULL); /* res may be NULL */
    assert_true(s2 == 0.05);
    assert_true(fabs(t.k->log_lengthscale[0] - ls0) > 0.5); /* the kernel did move */
    lml_at(t.k, s2, t.X, t.y, g);
    tu_assert_within(g[0], 0.0, GRAD_TOL, "dLML/dlog variance");
    tu_assert_within(g[1], 0.0, GRAD_TOL, "dLML/dlog lengthscale");
    /* the noise's own gradient is not zero: it was not optimised */
    assert_true(fabs(g[2]) > 0.1);
    gp_kernel_free(t.k);
}

static void test_fixed_kernel_parameter_stays_fixed(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    t.k->fixed = GP_FIX_VARIANCE;
    double lv0 = t.k->log_variance, s2 = t.np.start, g[3];
    fit_ok(&t, &s2, NULL);
    assert_true(t.k->log_variance == lv0);
    lml_at(t.k, s2, t.X, t.y, g);
    tu_assert_within(g[1], 0.0, GRAD_TOL, "dLML/dlog lengthscale");
    tu_assert_within(gp_noise_param_grad(&t.np, s2, g[2]), 0.0, GRAD_TOL, "dLML/dx noise");
    gp_kernel_free(t.k);
}

/* Nothing free: the LML at the given values, once, and nothing changes. */
static void test_nothing_free_evaluates_once(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    t.k->fixed = GP_FIX_ALL;
    t.np.learned = 0;
    double ls0 = t.k->log_lengthscale[0], lv0 = t.k->log_variance, s2 = 0.0;
    gp_driver_result res;
    fit_ok(&t, &s2, &res);
    assert_true(t.k->log_lengthscale[0] == ls0 && t.k->log_variance == lv0);
    assert_true(s2 == t.np.start);
    assert_int_equal(res.iterations, 0);
    assert_int_equal(res.evaluations, 1);
    tu_assert_close(-res.f, lml_at(t.k, s2, t.X, t.y, NULL), 1e-12, 0.0, "LML");
    gp_kernel_free(t.k);
}

/* Cancelled at once, or no finite start: an error, and the caller's kernel
 * and noise are as they were. */
static void test_failure_leaves_the_start(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    double ls0 = t.k->log_lengthscale[0], s2 = 0.123;
    atomic_long left = 0;
    gp_cancel cancel = {NULL, &left};
    gp_driver_options opt;
    default_options(&opt);
    opt.cancel = &cancel;
    gp_error err;
    assert_int_equal(gp_hyper_fit_points(t.k, &t.np, NULL, &s2, t.X, N, t.y, &opt, NULL, &err),
                     GP_ECANCELLED);
    assert_true(t.k->log_lengthscale[0] == ls0 && s2 == 0.123);
    /* a non-finite target makes the LML unevaluable everywhere */
    t.y[3] = NAN;
    default_options(&opt);
    assert_int_not_equal(gp_hyper_fit_points(t.k, &t.np, NULL, &s2, t.X, N, t.y, &opt, NULL, &err),
                         GP_OK);
    assert_true(t.k->log_lengthscale[0] == ls0 && s2 == 0.123);
    gp_kernel_free(t.k);
}

/* The pieces pls combines: more points than the problem was sized for is
 * refused, and apply writes x and the noise it describes. */
static void test_problem_capacity_and_apply(void **state)
{
    (void)state;
    toy t;
    make_toy(&t);
    gp_hyper_problem p;
    gp_error err;
    assert_int_equal(gp_hyper_problem_init(&p, t.k, &t.np, NULL, N / 2, &err), GP_OK);
    assert_int_equal(gp_hyper_problem_dim(&p), 3);
    double x[3], s2 = 0.0;
    gp_hyper_problem_start(&p, x);
    assert_true(x[0] == t.k->log_variance && x[1] == t.k->log_lengthscale[0]);
    assert_true(x[2] == gp_noise_param_x0(&t.np));
    gp_driver_options opt;
    default_options(&opt);
    gp_driver_result res;
    assert_int_equal(gp_hyper_problem_fit(&p, t.X, N, t.y, x, &opt, &res, &err), GP_EINVAL);
    assert_int_equal(gp_hyper_problem_fit(&p, t.X, N / 2, t.y, x, &opt, &res, &err), GP_OK);
    gp_hyper_problem_apply(&p, x, t.k, &s2);
    assert_true(t.k->log_variance == x[0] && t.k->log_lengthscale[0] == x[1]);
    assert_true(s2 == gp_noise_param_value(&t.np, x[2]));
    gp_hyper_problem_free(&p);
    gp_kernel_free(t.k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit_raises_lml_to_a_stationary_point),
        cmocka_unit_test(test_fixed_noise_stays_fixed),
        cmocka_unit_test(test_fixed_kernel_parameter_stays_fixed),
        cmocka_unit_test(test_nothing_free_evaluates_once),
        cmocka_unit_test(test_failure_leaves_the_start),
        cmocka_unit_test(test_problem_capacity_and_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
