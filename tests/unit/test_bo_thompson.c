/* Acquisitions on fitted models: every acquisition's gradient in u (log EI,
 * UCB, PI, max-variance, the log probability of feasibility and Thompson's
 * draws) against central differences through gp_bo_eval_value on an exact
 * Matern 5/2 ARD model; Thompson draws (core/bo/thompson.h): their mean and
 * variance over many draws tend to the exact posterior's (a tolerance from
 * the draw count plus the features' approximation), the same seed and index
 * give the same draw, kernels without a spectral density are refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/bo/evaluate.h"
#include "core/bo/sobol.h"
#include "core/bo/thompson.h"
#include "tests/unit/bo_fixture.h"
#include "tests/unit/testutil.h"

#define DIM 3
#define NPTS 18

static double target(const double *u)
{
    return sin(4 * u[0]) + u[1] * u[1] - 0.7 * cos(5 * u[2]) + 0.3 * u[0] * u[2];
}

static void data(double *U, double *y, double *c)
{
    assert_int_equal(gp_sobol_points(DIM, 21, 0, NPTS, U, NULL), GP_OK);
    for (int i = 0; i < NPTS; i++) {
        y[i] = target(U + DIM * i);
        c[i] = sin(6 * U[DIM * i]) * cos(5 * U[DIM * i + 1]);
    }
}

static double eval_value(void *ctx, const double *u)
{
    return gp_bo_eval_value(ctx, u, NULL);
}

static void check_eval(gp_bo_eval *ev, const char *what)
{
    static const double points[][DIM] = {{0.2, 0.3, 0.7}, {0.81, 0.44, 0.13}, {0.5, 0.95, 0.52}};
    for (int i = 0; i < 3; i++) {
        double u[DIM], g[DIM];
        memcpy(u, points[i], sizeof u);
        double v = gp_bo_eval_value(ev, u, g);
        assert_true(isfinite(v));
        tu_fd_spec fd = {1e-6, 2e-5, 1e-7, 1.0, 0};
        tu_check_gradient(eval_value, ev, u, DIM, g, fd, NULL, what);
    }
    assert_int_equal(ev->rc, GP_OK);
}

static void test_gradients_on_a_fitted_model(void **state)
{
    (void)state;
    double U[DIM * NPTS], y[NPTS], c[NPTS];
    data(U, y, c);
    gp_model *m = bo_fit(U, y, NPTS, DIM), *mc = bo_fit(U, c, NPTS, DIM);
    gp_model *cons[1] = {mc};
    double limit = 0.1;
    for (int k = 0; k <= GP_ACQ_MAX_VARIANCE; k++) {
        if (k == GP_ACQ_THOMPSON)
            continue;
        for (int goal = 0; goal < 2; goal++)
            for (int constrained = 0; constrained < 2; constrained++) {
                gp_bo_eval ev;
                memset(&ev, 0, sizeof ev);
                ev.D = DIM;
                ev.objective = m;
                ev.spec = (gp_acq_spec){(gp_acq_kind)k, goal, goal ? 1.2 : -0.9, 2.0,
                                        gp_bo_var_floor(m)};
                if (constrained)
                    ev.n_constraints = 1, ev.constraints = cons, ev.limits = &limit;
                char what[64];
                snprintf(what, sizeof what, "%s goal %d constrained %d",
                         gp_acq_name((gp_acq_kind)k), goal, constrained);
                check_eval(&ev, what);
            }
    }
    gp_bo_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.D = DIM, ev.objective = m, ev.feasibility_only = 1;
    ev.n_constraints = 1, ev.constraints = cons, ev.limits = &limit;
    check_eval(&ev, "feasibility alone");
    gp_model_free(m);
    gp_model_free(mc);
}

static gp_bo_thompson *thompson_ok(const gp_model *m, const double *U, const double *y, size_t R)
{
    gp_bo_thompson *t = NULL;
    gp_error err;
    int rc = gp_bo_thompson_new(m, U, y, NPTS, R, 5, &t, &err);
    if (rc != GP_OK)
        fail_msg("thompson: %s (%s)", err.message, gp_status_name(rc));
    return t;
}

static void test_thompson_gradient(void **state)
{
    (void)state;
    double U[DIM * NPTS], y[NPTS], c[NPTS];
    data(U, y, c);
    gp_model *m = bo_fit(U, y, NPTS, DIM);
    gp_bo_thompson *t = thompson_ok(m, U, y, 256);
    for (uint64_t k = 0; k < 3; k++) {
        gp_bo_thompson_draw(t, k);
        gp_bo_eval ev;
        memset(&ev, 0, sizeof ev);
        ev.D = DIM, ev.objective = m, ev.thompson = t;
        ev.spec = (gp_acq_spec){GP_ACQ_THOMPSON, (int)(k % 2), 0, 0, gp_bo_var_floor(m)};
        check_eval(&ev, "thompson");
    }
    gp_bo_thompson_free(t);
    gp_model_free(m);
}

/* The average of K draws at a point is within 5 standard errors (the
 * exact posterior's sd / sqrt K) of the exact posterior mean, plus 5% of
 * the prior sd for what 1024 random features miss of the kernel; their
 * variance within 30% of the exact posterior variance (plus the same
 * allowance). The same draw index gives the same function. */
static void test_thompson_moments(void **state)
{
    (void)state;
    double U[DIM * NPTS], y[NPTS], c[NPTS];
    data(U, y, c);
    gp_model *m = bo_fit_method("exact", U, y, NPTS, DIM, GP_KERNEL_RBF);
    gp_bo_thompson *t = thompson_ok(m, U, y, 0);
    static const double points[][DIM] = {{0.3, 0.6, 0.2}, {0.9, 0.1, 0.8}, {0.02, 0.97, 0.5}};
    enum { K = 600, P = 3 };
    double sum[P] = {0}, sum2[P] = {0};
    for (uint64_t k = 0; k < K; k++) {
        gp_bo_thompson_draw(t, k);
        for (int i = 0; i < P; i++) {
            double f = gp_bo_thompson_value(t, points[i], NULL);
            sum[i] += f, sum2[i] += f * f;
        }
    }
    double prior_sd = m->y_scale * exp(0.5 * m->kernel->log_variance);
    for (int i = 0; i < P; i++) {
        double mean, var;
        assert_int_equal(gp_model_predict_grad(m, points[i], &mean, &var, NULL, NULL, NULL),
                         GP_OK);
        double avg = sum[i] / K, v = sum2[i] / K - avg * avg, allow = 0.05 * prior_sd;
        tu_assert_within(avg, mean, 5.0 * sqrt(var / K) + allow, "mean of draws at point %d", i);
        tu_assert_within(sqrt(v), sqrt(var), 0.3 * sqrt(var) + allow, "sd of draws at point %d", i);
    }
    gp_bo_thompson_draw(t, 7);
    double a = gp_bo_thompson_value(t, points[0], NULL);
    gp_bo_thompson_draw(t, 8);
    double b = gp_bo_thompson_value(t, points[0], NULL);
    gp_bo_thompson_draw(t, 7);
    assert_true(gp_bo_thompson_value(t, points[0], NULL) == a && a != b);
    gp_bo_thompson_free(t);
    gp_model_free(m);
}

static void test_thompson_refuses(void **state)
{
    (void)state;
    double U[DIM * NPTS], y[NPTS], c[NPTS];
    data(U, y, c);
    gp_model *m = bo_fit_method("exact", U, y, NPTS, DIM, GP_KERNEL_RQ);
    gp_bo_thompson *t = NULL;
    gp_error err;
    assert_int_equal(gp_bo_thompson_new(m, U, y, NPTS, 64, 1, &t, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "acquisition.type");
    assert_null(t);
    gp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_on_a_fitted_model),
        cmocka_unit_test(test_thompson_gradient),
        cmocka_unit_test(test_thompson_moments),
        cmocka_unit_test(test_thompson_refuses),
    };
    return cmocka_run_group_tests_name("bo_thompson", tests, NULL, NULL);
}
