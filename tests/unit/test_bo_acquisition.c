/* Acquisition numerics (core/bo/normal.h, core/bo/acquisition.h) and the
 * box L-BFGS (core/bo/lbfgs_box.h): log h and log Phi against mpmath at 60
 * digits (tests/fixtures/bo_logei.txt, make_bo_fixtures.py) from z = -1e4
 * to 40, where the naive log(EI) is -inf; every acquisition's gradient
 * against central differences through a smooth synthetic posterior; the
 * names; projected L-BFGS ending on a face and inside the box. The FD checks
 * on a fitted model are in test_bo_suggest.c. */
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
#include "core/bo/acquisition.h"
#include "core/bo/lbfgs_box.h"
#include "core/bo/normal.h"
#include "tests/unit/testutil.h"

static void load(gp_fixture *fx)
{
    char path[512];
    assert_int_equal(gp_fixture_path(path, sizeof path, "bo_logei.txt", NULL), GP_OK);
    assert_int_equal(gp_fixture_load(path, fx, NULL), GP_OK);
}

/* Values to 1e-13 relative (absolute 1e-13 near 0), derivatives to 1e-11;
 * the naive form fails below z ~ -38 (h underflows). */
static void test_log_h_against_mpmath(void **state)
{
    (void)state;
    gp_fixture fx;
    load(&fx);
    size_t rows;
    const double *t;
    assert_int_equal(gp_fixture_get_any(&fx, "logh", &rows, NULL, &t, NULL), GP_OK);
    int naive_failed = 0;
    for (size_t i = 0; i < rows; i++) {
        double z = t[i], want = t[rows + i], dwant = t[2 * rows + i], d;
        double got = gp_log_h(z, &d);
        tu_assert_close(got, want, 1e-13, 1e-13, "log h(%g)", z);
        tu_assert_close(d, dwant, 1e-11, 1e-13, "d log h(%g)", z);
        double naive = log(exp(-0.5 * z * z) / 2.5066282746310002 + z * 0.5 * erfc(-z / sqrt(2.0)));
        naive_failed += !isfinite(naive);
    }
    assert_true(naive_failed > 5); /* the fixture reaches where the naive form fails */
    gp_fixture_free(&fx);
}

static void test_log_ndtr_against_mpmath(void **state)
{
    (void)state;
    gp_fixture fx;
    load(&fx);
    size_t rows;
    const double *t;
    assert_int_equal(gp_fixture_get_any(&fx, "logphi", &rows, NULL, &t, NULL), GP_OK);
    for (size_t i = 0; i < rows; i++) {
        double z = t[i], d;
        double got = gp_log_ndtr(z, &d);
        tu_assert_close(got, t[rows + i], 1e-13, 1e-300, "log Phi(%g)", z);
        tu_assert_close(d, t[2 * rows + i], 1e-11, 1e-300, "d log Phi(%g)", z);
    }
    gp_fixture_free(&fx);
}

static void test_erfcx(void **state)
{
    (void)state;
    /* values from mpmath: erfc(x) exp(x^2) */
    tu_assert_close(gp_erfcx(0.0), 1.0, 1e-15, 0, "erfcx(0)");
    tu_assert_close(gp_erfcx(1.0), 0.42758357615580700442, 1e-14, 0, "erfcx(1)");
    tu_assert_close(gp_erfcx(10.0), 0.05614099274382258586, 1e-14, 0, "erfcx(10)");
    tu_assert_close(gp_erfcx(30.0), 0.018795888861416751146, 1e-14, 0, "erfcx(30)");
    tu_assert_close(gp_erfcx(1e6), 5.6418958354747419e-07, 1e-14, 0, "erfcx(1e6)");
}

static void test_names(void **state)
{
    (void)state;
    const char *names[] = {"log_ei", "ucb", "pi", "thompson", "max_variance"};
    for (int k = 0; k < 5; k++) {
        gp_acq_kind got;
        assert_int_equal(gp_acq_parse(names[k], &got), GP_OK);
        assert_int_equal((int)got, k);
        assert_string_equal(gp_acq_name(got), names[k]);
    }
    gp_acq_kind got;
    assert_int_equal(gp_acq_parse("ei", &got), GP_EINVAL);
    assert_int_equal(gp_acq_parse(NULL, &got), GP_EINVAL);
}

/* ---- gradients through a synthetic posterior in 3 dimensions ---- */

#define D3 3
typedef struct synth {
    gp_acq_spec spec;
    int constraint; /* 1: check the log feasibility instead */
    double limit;
} synth;

/* mean and var smooth in u, var > 0 */
static void posterior(const double *u, double *mean, double *var, double *dm, double *dv)
{
    *mean = sin(3 * u[0]) + u[1] * u[1] - 0.5 * u[2];
    *var = 0.05 + 0.3 * u[0] * u[0] + 0.2 * sin(u[1] + u[2]) * sin(u[1] + u[2]);
    dm[0] = 3 * cos(3 * u[0]), dm[1] = 2 * u[1], dm[2] = -0.5;
    double c = 2 * 0.2 * sin(u[1] + u[2]) * cos(u[1] + u[2]);
    dv[0] = 0.6 * u[0], dv[1] = c, dv[2] = c;
}

static double synth_value(void *ctx, const double *u)
{
    synth *s = ctx;
    double m, v, dm[D3], dv[D3];
    posterior(u, &m, &v, dm, dv);
    gp_acq_posterior p = {m, v, dm, dv};
    return s->constraint ? gp_acq_log_feasibility(s->limit, &p, 1e-12, D3, NULL)
                         : gp_acq_value(&s->spec, &p, D3, NULL);
}

static void check_synth(synth *s, const double *u0)
{
    double u[D3] = {u0[0], u0[1], u0[2]}, m, v, dm[D3], dv[D3], g[D3] = {0, 0, 0};
    posterior(u, &m, &v, dm, dv);
    gp_acq_posterior p = {m, v, dm, dv};
    double val = s->constraint ? gp_acq_log_feasibility(s->limit, &p, 1e-12, D3, g)
                               : gp_acq_value(&s->spec, &p, D3, g);
    assert_true(isfinite(val));
    tu_fd_spec fd = {1e-6, 1e-6, 1e-8, 1.0, 0};
    tu_check_gradient(synth_value, s, u, D3, g, fd, NULL,
                      s->constraint ? "log feasibility" : gp_acq_name(s->spec.kind));
}

static void test_gradients_synthetic(void **state)
{
    (void)state;
    const double points[][D3] = {{0.1, 0.2, 0.3}, {0.8, 0.5, 0.1}, {0.45, 0.9, 0.7}};
    /* incumbents near the mean, far above it (z very negative) and below */
    const double bests[] = {0.3, 40.0, -3.0};
    for (int goal = 0; goal < 2; goal++)
        for (int k = 0; k < 5; k++) {
            if (k == GP_ACQ_THOMPSON)
                continue;
            for (int b = 0; b < 3; b++)
                for (int i = 0; i < 3; i++) {
                    synth s = {{(gp_acq_kind)k, goal, goal ? bests[b] : -bests[b], 2.0, 1e-12},
                               0, 0.0};
                    check_synth(&s, points[i]);
                }
        }
    for (int i = 0; i < 3; i++) {
        synth s = {{GP_ACQ_LOG_EI, 0, 0, 0, 1e-12}, 1, 0.4};
        check_synth(&s, points[i]);
        s.limit = -30.0; /* deep in the infeasible tail: still finite, still right */
        check_synth(&s, points[i]);
    }
}

/* log EI far from the incumbent stays finite where EI is 0, and orders
 * points as EI would (a larger mean is better for maximisation). */
static void test_log_ei_finite_and_monotone(void **state)
{
    (void)state;
    double g[1], dm[1] = {1.0}, dv[1] = {0.0};
    gp_acq_spec spec = {GP_ACQ_LOG_EI, 1, 1000.0, 0, 1e-12};
    double prev = -INFINITY;
    for (double m = -10.0; m <= 10.0; m += 0.5) {
        gp_acq_posterior p = {m, 0.01, dm, dv};
        double v = gp_acq_value(&spec, &p, 1, g);
        assert_true(isfinite(v) && v > prev && g[0] > 0.0);
        prev = v;
    }
    /* minimisation: a lower mean is better */
    spec.maximize = 0;
    spec.best = -1000.0;
    gp_acq_posterior lo = {-5.0, 0.01, dm, dv}, hi = {5.0, 0.01, dm, dv};
    assert_true(gp_acq_value(&spec, &lo, 1, NULL) > gp_acq_value(&spec, &hi, 1, NULL));
    /* a variance at the floor: finite, variance gradient ignored */
    double dv1[1] = {5.0};
    gp_acq_posterior z = {0.0, 0.0, dm, dv1};
    spec.maximize = 1;
    spec.best = 0.0;
    assert_true(isfinite(gp_acq_value(&spec, &z, 1, g)) && isfinite(g[0]));
}

/* ---- box L-BFGS ---- */

typedef struct quad {
    double c[4];
} quad;

static double quad_fn(void *ctx, const double *x, double *g)
{
    quad *q = ctx;
    double f = 0.0;
    for (int j = 0; j < 4; j++) {
        double w = 1.0 + j; /* badly scaled on purpose */
        f += w * (x[j] - q->c[j]) * (x[j] - q->c[j]);
        g[j] = 2.0 * w * (x[j] - q->c[j]);
    }
    return f;
}

static void test_box_quadratic_outside(void **state)
{
    (void)state;
    quad q = {{1.7, 0.3, -0.4, 0.8}}; /* minimum outside the unit cube in 0 and 2 */
    double x[4] = {0.5, 0.5, 0.5, 0.5};
    gp_optim_result r;
    assert_int_equal(gp_lbfgs_minimize_box(quad_fn, &q, x, 4, NULL, NULL, NULL, 0, &r, NULL),
                     GP_OK);
    assert_true(x[0] == 1.0 && x[2] == 0.0); /* on the faces, exactly */
    tu_assert_close(x[1], 0.3, 0, 1e-6, "free coordinate 1");
    tu_assert_close(x[3], 0.8, 0, 1e-6, "free coordinate 3");
    assert_true(r.converged);
}

static double rosenbrock(void *ctx, const double *x, double *g)
{
    (void)ctx;
    double a = 1.0 - x[0], b = x[1] - x[0] * x[0];
    g[0] = -2.0 * a - 400.0 * x[0] * b;
    g[1] = 200.0 * b;
    return a * a + 100.0 * b * b;
}

static void test_box_rosenbrock_inside(void **state)
{
    (void)state;
    double lo[2] = {-2.0, -1.0}, hi[2] = {2.0, 3.0}, x[2] = {-1.2, 1.0};
    gp_lbfgs_options opt = {0};
    opt.max_iterations = 500;
    opt.grad_tol = 1e-9;
    opt.rel_tol = 1e-16;
    gp_optim_result r;
    assert_int_equal(gp_lbfgs_minimize_box(rosenbrock, NULL, x, 2, lo, hi, &opt, 1.0, &r, NULL),
                     GP_OK);
    tu_assert_close(x[0], 1.0, 0, 1e-5, "rosenbrock x");
    tu_assert_close(x[1], 1.0, 0, 1e-5, "rosenbrock y");
    /* the minimum (1, 1) outside a box [-2, 0.5]: ends on the face x = 0.5
     * at the constrained minimum y = 0.25 */
    double hi2[2] = {0.5, 3.0}, x2[2] = {-1.2, 1.0};
    assert_int_equal(gp_lbfgs_minimize_box(rosenbrock, NULL, x2, 2, lo, hi2, &opt, 1.0, &r, NULL),
                     GP_OK);
    assert_true(x2[0] == 0.5);
    tu_assert_close(x2[1], 0.25, 0, 1e-6, "face minimum y");
}

static double nonfinite_fn(void *ctx, const double *x, double *g)
{
    (void)ctx;
    g[0] = 1.0;
    return x[0] > -1.0 ? NAN : 0.0;
}

static void test_box_refuses_bad_start(void **state)
{
    (void)state;
    double x[1] = {0.5};
    gp_error err;
    assert_int_equal(gp_lbfgs_minimize_box(nonfinite_fn, NULL, x, 1, NULL, NULL, NULL, 0, NULL,
                                           &err),
                     GP_ENOTPD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_h_against_mpmath),
        cmocka_unit_test(test_log_ndtr_against_mpmath),
        cmocka_unit_test(test_erfcx),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_gradients_synthetic),
        cmocka_unit_test(test_log_ei_finite_and_monotone),
        cmocka_unit_test(test_box_quadratic_outside),
        cmocka_unit_test(test_box_rosenbrock_inside),
        cmocka_unit_test(test_box_refuses_bad_start),
    };
    return cmocka_run_group_tests_name("bo_acquisition", tests, NULL, NULL);
}
