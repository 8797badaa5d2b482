/* Unit tests for core/optim/optim.c: L-BFGS and Adam.
 *
 * Every objective runs through a probe that counts calls and non-finite
 * returns and remembers the lowest finite value it handed out, so the tests can
 * check the "x is always the best point evaluated" promise and that the
 * back-off paths were really exercised. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/optim/optim.h"

/* ---- probe ----------------------------------------------------------------- */

typedef double (*plain_fn)(const void *params, const double *x, double *g, size_t n);

typedef struct probe {
    plain_fn f;
    const void *params;
    size_t n;
    int calls;
    int nonfinite;
    double best; /* lowest finite f returned */
} probe;

static double probe_fn(void *ctx, const double *x, double *g)
{
    probe *p = ctx;
    double f = p->f(p->params, x, g, p->n);
    p->calls++;
    if (!isfinite(f))
        p->nonfinite++;
    else if (f < p->best)
        p->best = f;
    return f;
}

static probe make_probe(plain_fn f, const void *params, size_t n)
{
    probe p = {f, params, n, 0, 0, INFINITY};
    return p;
}

/* The returned x must be the best point the optimiser saw, and result.f its
 * value (evaluated again here, without the probe's bookkeeping). */
static void assert_best_point(const probe *p, const double *x, const gp_optim_result *res)
{
    double *g = malloc((p->n + 1) * sizeof *g);
    assert_non_null(g);
    double f = p->f(p->params, x, g, p->n);
    free(g);
    assert_true(isfinite(res->f));
    assert_true(f == res->f);
    assert_true(res->f == p->best);
    assert_int_equal(res->evaluations, p->calls);
}

/* ---- objectives ------------------------------------------------------------- */

/* Chained Rosenbrock: sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2, minimum at 1s. */
static double rosenbrock(const void *params, const double *x, double *g, size_t n)
{
    (void)params;
    double f = 0.0;
    memset(g, 0, n * sizeof *g);
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        f += 100.0 * a * a + b * b;
        g[i] += -400.0 * a * x[i] - 2.0 * b;
        g[i + 1] += 200.0 * a;
    }
    return f;
}

/* f = 0.5 (x - 1)' A (x - 1) with A = Q diag(lambda) Q, Q = I - 2 v v'/v'v a
 * Householder reflection (so A is far from diagonal) and lambda log-spaced
 * from 1 to 1e4: condition number 1e4. */
typedef struct quad_params {
    const double *v;      /* unit Householder vector */
    const double *lambda; /* eigenvalues */
} quad_params;

static void householder(const double *v, const double *in, double *out, size_t n)
{
    double d = 0.0;
    for (size_t i = 0; i < n; i++)
        d += v[i] * in[i];
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] - 2.0 * d * v[i];
}

static double rotated_quadratic(const void *params, const double *x, double *g, size_t n)
{
    const quad_params *q = params;
    double e[64] = {0}, qe[64] = {0};
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++)
        e[i] = x[i] - 1.0;
    householder(q->v, e, qe, n);
    double f = 0.0;
    for (size_t i = 0; i < n; i++) {
        f += 0.5 * q->lambda[i] * qe[i] * qe[i];
        qe[i] *= q->lambda[i];
    }
    householder(q->v, qe, g, n);
    return f;
}

/* f = -log(1 - |x|^2) + |x - c|^2 inside the unit ball, `outside` beyond it.
 * With |c| > 1 the minimum sits close to the wall, so steps overshoot into the
 * region where f cannot be evaluated. */
typedef struct barrier_params {
    const double *c;
    double outside; /* INFINITY or NAN */
} barrier_params;

static double barrier(const void *params, const double *x, double *g, size_t n)
{
    const barrier_params *b = params;
    double r2 = 0.0, f = 0.0;
    for (size_t i = 0; i < n; i++)
        r2 += x[i] * x[i];
    if (!(r2 < 1.0)) {
        for (size_t i = 0; i < n; i++)
            g[i] = NAN;
        return b->outside;
    }
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - b->c[i];
        f += d * d;
        g[i] = 2.0 * x[i] / (1.0 - r2) + 2.0 * d;
    }
    return f - log1p(-r2);
}

/* The minimiser is t c/|c| with t/(1 - t^2) = |c| - t, solved by bisection. */
static double barrier_radius(double cnorm)
{
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 200; i++) {
        double t = 0.5 * (lo + hi);
        if (t / (1.0 - t * t) + t - cnorm > 0.0)
            hi = t;
        else
            lo = t;
    }
    return 0.5 * (lo + hi);
}

static double nonfinite_everywhere(const void *params, const double *x, double *g, size_t n)
{
    (void)params, (void)x;
    for (size_t i = 0; i < n; i++)
        g[i] = 0.0;
    return INFINITY;
}

/* x^2 with the gradient's sign flipped: no step along -g decreases f, so
 * every line search must fail. */
static double wrong_gradient(const void *params, const double *x, double *g, size_t n)
{
    (void)params;
    double f = 0.0;
    for (size_t i = 0; i < n; i++) {
        f += x[i] * x[i];
        g[i] = -2.0 * x[i];
    }
    return f;
}

/* ---- callbacks ----------------------------------------------------------------- */

typedef struct iter_log {
    int calls;
    int cancel_at; /* 0: never */
    int last_iteration;
    double last_f;
    int monotone; /* stays 1 while f never increases (L-BFGS accepts descent only) */
} iter_log;

static int log_iter(void *ctx, int iteration, double f)
{
    iter_log *l = ctx;
    l->calls++;
    if (iteration != l->calls)
        l->monotone = 0; /* iterations must be 1, 2, 3, ... */
    if (l->calls > 1 && f > l->last_f)
        l->monotone = 0;
    l->last_iteration = iteration;
    l->last_f = f;
    return l->cancel_at > 0 && iteration >= l->cancel_at;
}

/* ---- L-BFGS ---------------------------------------------------------------------- */

static void test_lbfgs_default_options(void **state)
{
    (void)state;
    gp_lbfgs_options o;
    gp_lbfgs_default_options(&o);
    assert_int_equal(o.max_iterations, 200);
    assert_int_equal(o.memory, 10);
    assert_true(o.grad_tol == 1e-6);
    assert_true(o.rel_tol == 1e-10);
    assert_int_equal(o.max_evaluations, 4000);
}

static void test_lbfgs_rosenbrock_2d(void **state)
{
    (void)state;
    double x[2] = {-1.2, 1.0};
    probe p = make_probe(rosenbrock, NULL, 2);
    iter_log log = {0, 0, 0, 0.0, 1};
    gp_optim_result res;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, NULL, log_iter, &log, &res, &err);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 1);
    assert_true(fabs(x[0] - 1.0) < 1e-6 && fabs(x[1] - 1.0) < 1e-6);
    assert_true(res.iterations > 0 && res.iterations < 100);
    assert_int_equal(log.calls, res.iterations);
    assert_true(log.monotone);
    assert_best_point(&p, x, &res);
}

static void test_lbfgs_rosenbrock_10d(void **state)
{
    (void)state;
    enum { N = 10 };
    double x[N];
    for (int i = 0; i < N; i++)
        x[i] = i % 2 == 0 ? -1.2 : 1.0;
    probe p = make_probe(rosenbrock, NULL, N);
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, N, NULL, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 1);
    for (int i = 0; i < N; i++)
        assert_true(fabs(x[i] - 1.0) < 1e-6);
    assert_best_point(&p, x, &res);
}

/* Eigenvalues evenly spaced on [1, 1e4]. (Log-spaced ones are much harder for
 * limited memory: ~500 iterations here, ~800 for SciPy's L-BFGS-B with m = 10,
 * so they cannot show "well below 200".) */
static void test_lbfgs_ill_conditioned_quadratic(void **state)
{
    (void)state;
    enum { N = 50 };
    double v[N], lambda[N], x[N];
    double vn = 0.0;
    for (int i = 0; i < N; i++) {
        v[i] = sin(1.0 + i) + 0.3;
        vn += v[i] * v[i];
        lambda[i] = 1.0 + (1e4 - 1.0) * i / (N - 1);
        x[i] = cos(0.7 * i); /* start: generic, O(1) away from the minimum */
    }
    for (int i = 0; i < N; i++)
        v[i] /= sqrt(vn);
    quad_params q = {v, lambda};
    probe p = make_probe(rotated_quadratic, &q, N);
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, N, NULL, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 1);
    /* f0 is ~6e4; the default rel_tol stops once f changes by < 1e-10. */
    assert_true(res.f < 1e-9);
    for (int i = 0; i < N; i++)
        assert_true(fabs(x[i] - 1.0) < 1e-5);
    assert_true(res.iterations < 150);
    assert_best_point(&p, x, &res);
}

static void run_barrier(double outside)
{
    enum { N = 3 };
    const double c[N] = {3.0, -2.0, 1.0}; /* |c| = 3.74: the minimum hugs the wall */
    double x[N] = {0.0, 0.0, 0.0};
    barrier_params b = {c, outside};
    probe p = make_probe(barrier, &b, N);
    iter_log log = {0, 0, 0, 0.0, 1};
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, N, NULL, log_iter, &log, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 1);
    /* The back-off path was taken, yet x is a finite best point. */
    assert_true(p.nonfinite > 0);
    assert_true(log.monotone);
    assert_best_point(&p, x, &res);
    double cn = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    double t = barrier_radius(cn);
    for (int i = 0; i < N; i++)
        assert_true(fabs(x[i] - t * c[i] / cn) < 1e-6);
}

static void test_lbfgs_barrier_infinity(void **state)
{
    (void)state;
    run_barrier(INFINITY);
}

static void test_lbfgs_barrier_nan(void **state)
{
    (void)state;
    run_barrier(NAN);
}

static void test_lbfgs_nonfinite_start(void **state)
{
    (void)state;
    double x[2] = {0.5, -0.5};
    probe p = make_probe(nonfinite_everywhere, NULL, 2);
    gp_optim_result res;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, NULL, NULL, NULL, &res, &err);
    assert_int_equal(rc, GP_ENOTPD);
    assert_int_equal(err.code, GP_ENOTPD);
    assert_true(strlen(err.message) > 0);
    assert_int_equal(res.evaluations, 1);
    assert_true(x[0] == 0.5 && x[1] == -0.5);

    /* A start outside the barrier's domain fails the same way. */
    const double c[2] = {0.0, 0.0};
    barrier_params b = {c, INFINITY};
    double y[2] = {2.0, 0.0};
    p = make_probe(barrier, &b, 2);
    assert_int_equal(gp_lbfgs_minimize(probe_fn, &p, y, 2, NULL, NULL, NULL, &res, NULL),
                     GP_ENOTPD);
}

static void test_lbfgs_cancel_after_three_iterations(void **state)
{
    (void)state;
    double x[2] = {-1.2, 1.0};
    probe p = make_probe(rosenbrock, NULL, 2);
    iter_log log = {0, 3, 0, 0.0, 1};
    gp_optim_result res;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, NULL, log_iter, &log, &res, &err);
    assert_int_equal(rc, GP_ECANCELLED);
    assert_int_equal(err.code, GP_ECANCELLED);
    assert_int_equal(res.iterations, 3);
    assert_int_equal(log.calls, 3);
    assert_int_equal(res.converged, 0);
    assert_true(res.f < 24.2); /* better than f(-1.2, 1) = 24.2 */
    assert_true(res.f == log.last_f || res.f < log.last_f);
    assert_best_point(&p, x, &res);
}

static void test_lbfgs_max_iterations(void **state)
{
    (void)state;
    double x[2] = {-1.2, 1.0};
    probe p = make_probe(rosenbrock, NULL, 2);
    iter_log log = {0, 0, 0, 0.0, 1};
    gp_lbfgs_options o = {0};
    o.max_iterations = 5;
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, &o, log_iter, &log, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.iterations, 5);
    assert_int_equal(log.calls, 5);
    assert_int_equal(res.converged, 0);
    assert_string_equal(res.reason, "max iterations");
    assert_best_point(&p, x, &res);
}

static void test_lbfgs_max_evaluations(void **state)
{
    (void)state;
    double x[2] = {-1.2, 1.0};
    probe p = make_probe(rosenbrock, NULL, 2);
    gp_lbfgs_options o = {0};
    o.max_evaluations = 7;
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, &o, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 0);
    assert_string_equal(res.reason, "max evaluations");
    assert_true(res.evaluations <= 7);
    assert_best_point(&p, x, &res);
}

/* A zeroed (or negative) options struct behaves exactly like the defaults. */
static void test_lbfgs_nonpositive_options_mean_default(void **state)
{
    (void)state;
    gp_lbfgs_options zero = {0}, neg = {-1, -5, -1.0, -1.0, -3, NULL};
    const gp_lbfgs_options *opts[3] = {NULL, &zero, &neg};
    gp_optim_result res[3];
    double x[3][2];
    for (int k = 0; k < 3; k++) {
        x[k][0] = -1.2, x[k][1] = 1.0;
        probe p = make_probe(rosenbrock, NULL, 2);
        assert_int_equal(
            gp_lbfgs_minimize(probe_fn, &p, x[k], 2, opts[k], NULL, NULL, &res[k], NULL), GP_OK);
    }
    for (int k = 1; k < 3; k++) {
        assert_int_equal(res[k].iterations, res[0].iterations);
        assert_int_equal(res[k].evaluations, res[0].evaluations);
        assert_memory_equal(x[k], x[0], sizeof x[0]);
    }
}

static void test_lbfgs_line_search_failure_keeps_start(void **state)
{
    (void)state;
    double x[2] = {0.5, -0.25};
    probe p = make_probe(wrong_gradient, NULL, 2);
    gp_optim_result res;
    int rc = gp_lbfgs_minimize(probe_fn, &p, x, 2, NULL, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_int_equal(res.converged, 0);
    assert_string_equal(res.reason, "line search failed");
    assert_int_equal(res.iterations, 0);
    assert_true(x[0] == 0.5 && x[1] == -0.25);
    assert_best_point(&p, x, &res);
}

static void test_lbfgs_already_optimal(void **state)
{
    (void)state;
    double x[3] = {1.0, 1.0, 1.0};
    probe p = make_probe(rosenbrock, NULL, 3);
    gp_optim_result res;
    assert_int_equal(gp_lbfgs_minimize(probe_fn, &p, x, 3, NULL, NULL, NULL, &res, NULL),
                     GP_OK);
    assert_int_equal(res.converged, 1);
    assert_int_equal(res.iterations, 0);
    assert_int_equal(res.evaluations, 1);
    assert_string_equal(res.reason, "gradient tolerance");
}

static void test_lbfgs_invalid_arguments(void **state)
{
    (void)state;
    double x[1] = {0.0};
    gp_optim_result res;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_lbfgs_minimize(NULL, NULL, x, 1, NULL, NULL, NULL, &res, &err),
                     GP_EINVAL);
    assert_int_equal(err.code, GP_EINVAL);
    probe p = make_probe(rosenbrock, NULL, 1);
    assert_int_equal(gp_lbfgs_minimize(probe_fn, &p, NULL, 1, NULL, NULL, NULL, &res, &err),
                     GP_EINVAL);
}

/* ---- Adam ------------------------------------------------------------------------- */

static void test_adam_init_and_free(void **state)
{
    (void)state;
    gp_adam a;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_adam_init(&a, 4, 0.01, &err), GP_OK);
    assert_true(a.n == 4 && a.lr == 0.01 && a.t == 0);
    assert_true(a.beta1 == 0.9 && a.beta2 == 0.999 && a.eps == 1e-8);
    for (int i = 0; i < 4; i++)
        assert_true(a.m[i] == 0.0 && a.v[i] == 0.0);
    gp_adam_free(&a);
    assert_null(a.m);
    gp_adam_free(&a); /* idempotent */
    assert_int_equal(gp_adam_init(&a, 4, 0.0, &err), GP_EINVAL);
    assert_string_equal(err.field, "lr");
    assert_int_equal(gp_adam_init(&a, 4, -1.0, NULL), GP_EINVAL);
    assert_int_equal(gp_adam_init(&a, 4, NAN, NULL), GP_EINVAL);
    assert_null(a.m);
}

static void test_adam_step_bias_corrected(void **state)
{
    (void)state;
    gp_adam a;
    assert_int_equal(gp_adam_init(&a, 2, 0.1, NULL), GP_OK);
    double x[2] = {1.0, 1.0};
    const double g[2] = {3.0, -0.5};
    /* With bias correction the first step is lr * g / (|g| + eps): lr * sign(g). */
    gp_adam_step(&a, x, g);
    assert_true(fabs(x[0] - 0.9) < 1e-7 && fabs(x[1] - 1.1) < 1e-7);
    /* Same gradient again: mhat = g, vhat = g^2 still, so another lr * sign(g). */
    gp_adam_step(&a, x, g);
    assert_true(fabs(x[0] - 0.8) < 1e-7 && fabs(x[1] - 1.2) < 1e-7);
    /* An explicit rate overrides adam.lr for this step only. */
    gp_adam_step_lr(&a, x, g, 0.5);
    assert_true(fabs(x[0] - 0.3) < 1e-7 && fabs(x[1] - 1.7) < 1e-7);
    assert_int_equal(a.t, 3);
    gp_adam_free(&a);
}

static void test_adam_nonfinite_gradient_entries_ignored(void **state)
{
    (void)state;
    gp_adam a;
    assert_int_equal(gp_adam_init(&a, 3, 0.1, NULL), GP_OK);
    double x[3] = {1.0, 2.0, 3.0};
    const double g[3] = {NAN, 1.0, INFINITY};
    for (int k = 0; k < 5; k++)
        gp_adam_step(&a, x, g);
    assert_true(x[0] == 1.0 && x[2] == 3.0);
    assert_true(fabs(x[1] - 1.5) < 1e-7);
    assert_true(a.m[0] == 0.0 && a.v[0] == 0.0 && a.m[2] == 0.0 && a.v[2] == 0.0);
    gp_adam_free(&a);
}

static void test_adam_minimize_quadratic(void **state)
{
    (void)state;
    enum { N = 5 };
    double v[N], lambda[N], x[N];
    double vn = 0.0;
    for (int i = 0; i < N; i++) {
        v[i] = sin(2.0 + i);
        vn += v[i] * v[i];
        lambda[i] = 1.0 + i;
        x[i] = -1.0 + 0.3 * i;
    }
    for (int i = 0; i < N; i++)
        v[i] /= sqrt(vn);
    quad_params q = {v, lambda};
    probe p = make_probe(rotated_quadratic, &q, N);
    iter_log log = {0, 0, 0, 0.0, 1};
    gp_optim_result res;
    int rc = gp_adam_minimize(probe_fn, &p, x, N, 0.05, 3000, log_iter, &log, &res, NULL);
    assert_int_equal(rc, GP_OK);
    for (int i = 0; i < N; i++)
        assert_true(fabs(x[i] - 1.0) < 1e-5);
    assert_int_equal(res.converged, 1);
    assert_int_equal(log.calls, res.iterations);
    assert_best_point(&p, x, &res);
}

/* A milder Rosenbrock valley, (1 - x)^2 + 10 (y - x^2)^2. */
static double mild_rosenbrock(const void *params, const double *x, double *g, size_t n)
{
    (void)params, (void)n;
    double a = x[1] - x[0] * x[0], b = 1.0 - x[0];
    g[0] = -40.0 * a * x[0] - 2.0 * b;
    g[1] = 20.0 * a;
    return b * b + 10.0 * a * a;
}

static void test_adam_minimize_rosenbrock_valley(void **state)
{
    (void)state;
    double x[2] = {-1.0, 1.5};
    probe p = make_probe(mild_rosenbrock, NULL, 2);
    gp_optim_result res;
    int rc = gp_adam_minimize(probe_fn, &p, x, 2, 0.02, 10000, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_true(fabs(x[0] - 1.0) < 2e-5 && fabs(x[1] - 1.0) < 4e-5);
    assert_true(res.f < 1e-6);
    assert_best_point(&p, x, &res);
}

/* Adam's gradient only: the second coordinate's gradient is NaN everywhere and
 * must be ignored while the first still converges. */
static double nan_second_gradient(const void *params, const double *x, double *g, size_t n)
{
    (void)params, (void)n;
    g[0] = 2.0 * (x[0] - 3.0);
    g[1] = NAN;
    return (x[0] - 3.0) * (x[0] - 3.0);
}

static void test_adam_minimize_ignores_nan_gradient(void **state)
{
    (void)state;
    double x[2] = {0.0, 7.0};
    probe p = make_probe(nan_second_gradient, NULL, 2);
    gp_optim_result res;
    assert_int_equal(gp_adam_minimize(probe_fn, &p, x, 2, 0.05, 3000, NULL, NULL, &res, NULL),
                     GP_OK);
    assert_true(fabs(x[0] - 3.0) < 1e-3);
    assert_true(x[1] == 7.0);
}

static void test_adam_backs_off_from_nonfinite(void **state)
{
    (void)state;
    enum { N = 3 };
    const double c[N] = {3.0, -2.0, 1.0};
    double x[N] = {0.0, 0.0, 0.0};
    barrier_params b = {c, INFINITY};
    probe p = make_probe(barrier, &b, N);
    gp_optim_result res;
    /* lr 0.6 is far too large for the wall at |x| = 1: a step crosses it. */
    int rc = gp_adam_minimize(probe_fn, &p, x, N, 0.6, 5000, NULL, NULL, &res, NULL);
    assert_int_equal(rc, GP_OK);
    assert_true(p.nonfinite > 0);
    assert_best_point(&p, x, &res);
    double cn = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    double t = barrier_radius(cn);
    for (int i = 0; i < N; i++)
        assert_true(fabs(x[i] - t * c[i] / cn) < 1e-5);
    assert_int_equal(res.converged, 1);
}

static void test_adam_cancel_and_errors(void **state)
{
    (void)state;
    double x[2] = {-1.0, 1.5};
    probe p = make_probe(mild_rosenbrock, NULL, 2);
    iter_log log = {0, 3, 0, 0.0, 1};
    gp_optim_result res;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_adam_minimize(probe_fn, &p, x, 2, 0.01, 100, log_iter, &log, &res, &err),
                     GP_ECANCELLED);
    assert_int_equal(err.code, GP_ECANCELLED);
    assert_int_equal(res.iterations, 3);
    assert_int_equal(log.calls, 3);
    assert_best_point(&p, x, &res);

    double y[2] = {0.0, 0.0};
    p = make_probe(nonfinite_everywhere, NULL, 2);
    assert_int_equal(gp_adam_minimize(probe_fn, &p, y, 2, 0.01, 100, NULL, NULL, &res, &err),
                     GP_ENOTPD);
    assert_int_equal(err.code, GP_ENOTPD);
    assert_int_equal(gp_adam_minimize(probe_fn, &p, y, 2, -0.01, 100, NULL, NULL, &res, &err),
                     GP_EINVAL);
    assert_int_equal(gp_adam_minimize(probe_fn, &p, y, 2, 0.01, -1, NULL, NULL, &res, &err),
                     GP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lbfgs_default_options),
        cmocka_unit_test(test_lbfgs_rosenbrock_2d),
        cmocka_unit_test(test_lbfgs_rosenbrock_10d),
        cmocka_unit_test(test_lbfgs_ill_conditioned_quadratic),
        cmocka_unit_test(test_lbfgs_barrier_infinity),
        cmocka_unit_test(test_lbfgs_barrier_nan),
        cmocka_unit_test(test_lbfgs_nonfinite_start),
        cmocka_unit_test(test_lbfgs_cancel_after_three_iterations),
        cmocka_unit_test(test_lbfgs_max_iterations),
        cmocka_unit_test(test_lbfgs_max_evaluations),
        cmocka_unit_test(test_lbfgs_nonpositive_options_mean_default),
        cmocka_unit_test(test_lbfgs_line_search_failure_keeps_start),
        cmocka_unit_test(test_lbfgs_already_optimal),
        cmocka_unit_test(test_lbfgs_invalid_arguments),
        cmocka_unit_test(test_adam_init_and_free),
        cmocka_unit_test(test_adam_step_bias_corrected),
        cmocka_unit_test(test_adam_nonfinite_gradient_entries_ignored),
        cmocka_unit_test(test_adam_minimize_quadratic),
        cmocka_unit_test(test_adam_minimize_rosenbrock_valley),
        cmocka_unit_test(test_adam_minimize_ignores_nan_gradient),
        cmocka_unit_test(test_adam_backs_off_from_nonfinite),
        cmocka_unit_test(test_adam_cancel_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
