/* core/optim/driver: the hyperparameter driver every fitting method uses.
 * Minima of known functions, restarts keeping the best run, progress
 * numbering across runs and calls, cancellation at every iteration, the error
 * policy, and reproducibility. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/optim/driver.h"
#include "tests/unit/testutil.h"

/* Rosenbrock in two variables: minimum 0 at (1, 1). */
static double rosenbrock(void *ctx, const double *x, double *g)
{
    (void)ctx;
    double a = 1.0 - x[0], b = x[1] - x[0] * x[0];
    g[0] = -2.0 * a - 400.0 * x[0] * b;
    g[1] = 200.0 * b;
    return a * a + 100.0 * b * b;
}

/* Two wells in one variable: f = (x^2 - 1)^2 + 0.3 x, the deeper at x ~ -1.04,
 * a shallower local one at x ~ +0.96. */
static double two_wells(void *ctx, const double *x, double *g)
{
    (void)ctx;
    double u = x[0] * x[0] - 1.0;
    g[0] = 4.0 * x[0] * u + 0.3;
    return u * u + 0.3 * x[0];
}

/* Not finite anywhere left of 0.5 (as a covariance that cannot be factorised). */
static double half_line(void *ctx, const double *x, double *g)
{
    (void)ctx;
    if (x[0] < 0.5)
        return INFINITY;
    g[0] = 2.0 * (x[0] - 2.0);
    return (x[0] - 2.0) * (x[0] - 2.0);
}

typedef struct log_t {
    int calls, first, last, max_seen_budget, decreasing, stop_at;
    double last_objective;
} log_t;

static int record(void *ctx, int iteration, int max_iterations, double objective)
{
    log_t *l = ctx;
    if (l->calls == 0)
        l->first = iteration;
    if (iteration < l->last)
        l->decreasing = 1;
    l->calls++;
    l->last = iteration;
    l->max_seen_budget = max_iterations;
    l->last_objective = objective;
    return l->stop_at > 0 && iteration >= l->stop_at;
}

static void test_finds_minimum(void **state)
{
    (void)state;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    double x[2] = {-1.2, 1.0};
    gp_driver_result res;
    gp_error err;
    assert_int_equal(gp_driver_minimize(rosenbrock, NULL, x, 2, &opt, &res, &err), GP_OK);
    tu_assert_close(x[0], 1.0, 0.0, 1e-5, "x[0]");
    tu_assert_close(x[1], 1.0, 0.0, 1e-5, "x[1]");
    assert_true(res.f < 1e-10);
    assert_true(res.converged);
    assert_int_equal(res.restarts, 0);
    assert_true(res.iterations > 0 && res.evaluations >= res.iterations);
}

static void test_restarts_keep_the_best(void **state)
{
    (void)state;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.restart_spread = 3.0;
    opt.seed = 5;
    double x[1] = {1.5}; /* the shallow well's side */
    gp_driver_result res;
    gp_error err;
    assert_int_equal(gp_driver_minimize(two_wells, NULL, x, 1, &opt, &res, &err), GP_OK);
    assert_true(x[0] > 0.0); /* one run: the local minimum */
    double local = res.f;
    x[0] = 1.5;
    opt.restarts = 8;
    assert_int_equal(gp_driver_minimize(two_wells, NULL, x, 1, &opt, &res, &err), GP_OK);
    assert_true(x[0] < 0.0); /* some restart reached the deeper well */
    assert_true(res.f < local);
    assert_int_equal(res.restarts, 8);
    /* Same seed, same answer, bit for bit. */
    double x2[1] = {1.5};
    gp_driver_result res2;
    assert_int_equal(gp_driver_minimize(two_wells, NULL, x2, 1, &opt, &res2, &err), GP_OK);
    assert_memory_equal(x, x2, sizeof x);
    assert_memory_equal(&res.f, &res2.f, sizeof res.f);
}

static void test_progress_numbering(void **state)
{
    (void)state;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = 5;
    opt.restarts = 2;
    opt.seed = 3;
    opt.iteration_base = 100; /* as after an earlier fit of the same request */
    opt.objective_offset = 10.0;
    log_t l = {0};
    opt.progress = record;
    opt.progress_ctx = &l;
    double x[2] = {-1.2, 1.0};
    gp_driver_result res;
    gp_error err;
    assert_int_equal(gp_driver_minimize(rosenbrock, NULL, x, 2, &opt, &res, &err), GP_OK);
    assert_int_equal(l.first, 101);
    assert_int_equal(l.last, 100 + res.iterations);
    assert_int_equal(l.calls, res.iterations);
    assert_false(l.decreasing);
    assert_int_equal(l.max_seen_budget, 100 + 5 * 3);
    assert_true(l.last <= l.max_seen_budget);
    /* The reported objective is -f + offset: here below 10 for f >= 0. */
    assert_true(l.last_objective <= 10.0);
    opt.max_total = 7;
    l = (log_t){0};
    x[0] = -1.2;
    x[1] = 1.0;
    assert_int_equal(gp_driver_minimize(rosenbrock, NULL, x, 2, &opt, &res, &err), GP_OK);
    assert_int_equal(l.max_seen_budget, 7);
}

static void test_cancel_at_every_iteration(void **state)
{
    (void)state;
    for (int k = 1; k <= 12; k++) {
        gp_driver_options opt;
        gp_driver_default_options(&opt);
        opt.max_iterations = 4;
        opt.restarts = 2; /* cancellation inside a restart too */
        log_t l = {.stop_at = k};
        opt.progress = record;
        opt.progress_ctx = &l;
        double x[2] = {-1.2, 1.0};
        gp_driver_result res;
        gp_error err;
        int rc = gp_driver_minimize(rosenbrock, NULL, x, 2, &opt, &res, &err);
        if (rc != GP_ECANCELLED)
            fail_msg("stop at %d: %s", k, gp_status_name(rc));
        assert_int_equal(err.code, GP_ECANCELLED);
        assert_int_equal(l.last, k);
        assert_int_equal(res.iterations, k);
    }
}

static void test_error_policy(void **state)
{
    (void)state;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    gp_driver_result res;
    gp_error err;
    /* One run from a point where f is not finite: that run's error. */
    double x[1] = {0.0};
    assert_int_equal(gp_driver_minimize(half_line, NULL, x, 1, &opt, &res, &err), GP_ENOTPD);
    assert_true(strlen(err.message) > 0);
    /* With restarts, failed runs are skipped and a good one wins. */
    opt.restarts = 10;
    opt.restart_spread = 3.0;
    opt.seed = 1;
    x[0] = 0.0;
    assert_int_equal(gp_driver_minimize(half_line, NULL, x, 1, &opt, &res, &err), GP_OK);
    tu_assert_close(x[0], 2.0, 0.0, 1e-6, "x");
    /* No run can start: GP_ENOTPD. */
    opt.restart_spread = 0.1;
    x[0] = -5.0;
    assert_int_equal(gp_driver_minimize(half_line, NULL, x, 1, &opt, &res, &err), GP_ENOTPD);
    assert_true(x[0] == -5.0); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_minimum),
        cmocka_unit_test(test_restarts_keep_the_best),
        cmocka_unit_test(test_progress_numbering),
        cmocka_unit_test(test_cancel_at_every_iteration),
        cmocka_unit_test(test_error_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
