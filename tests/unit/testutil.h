/* The unit tests' shared checks: closeness of numbers and arrays, one
 * finite-difference gradient checker, and one seeded regression problem. Header-only (static inline), as
 * api_testutil.h, so that the benchmarks, which link the tests' support
 * objects without cmocka, never see it; include after cmocka.h.
 *
 * Closeness: |got - want| <= atol + rtol |want|, the rule of numpy.isclose.
 * A failure names what was compared (a printf format) and both values with
 * 17 digits, so a test's output shows the digit that differs. */
#ifndef GP_TESTUTIL_H
#define GP_TESTUTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/base/rng.h"

/* The one closeness check: fails unless |got - want| <= tol (NaN never passes;
 * equal infinities do). Every rule of the tests (numpy's, relative to the
 * larger value, relative with a floor) computes its tol and calls this. */
static inline void tu_assert_within(double got, double want, double tol, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

static inline void tu_assert_within(double got, double want, double tol, const char *what, ...)
{
    if (got == want || fabs(got - want) <= tol)
        return;
    char label[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(label, sizeof label, what, ap);
    va_end(ap);
    fail_msg("%s: got %.17g, want %.17g (|diff| %.3g, tol %.3g)", label, got, want,
             fabs(got - want), tol);
}

static inline int tu_close(double got, double want, double rtol, double atol)
{
    if (isnan(got) || isnan(want))
        return 0;
    if (got == want) /* equal infinities included */
        return 1;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static inline void tu_assert_close(double got, double want, double rtol, double atol,
                                   const char *what, ...) __attribute__((format(printf, 5, 6)));

static inline void tu_assert_close(double got, double want, double rtol, double atol,
                                   const char *what, ...)
{
    if (tu_close(got, want, rtol, atol))
        return;
    char label[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(label, sizeof label, what, ap);
    va_end(ap);
    tu_assert_within(got, want, atol + rtol * fabs(want), "%s", label);
}

/* Every entry of got against want (count entries each). */
static inline void tu_assert_close_array(const double *got, const double *want, size_t count,
                                         double rtol, double atol, const char *what)
{
    for (size_t i = 0; i < count; i++)
        tu_assert_close(got[i], want[i], rtol, atol, "%s[%zu]", what, i);
}

/* ---- the finite-difference gradient checker ---- */

/* f(ctx, x) at the point x (n entries); returns the value. */
typedef double (*tu_scalar_fn)(void *ctx, const double *x);

/* Names coordinate i into buf (for the failure message). */
typedef void (*tu_name_fn)(void *ctx, size_t i, char *buf, size_t len);

/* Central differences with step `step` (times max(1, |x_i|) when relative);
 * coordinate i passes when |analytic_i - fd_i| <= atol + rtol * max(floor, |fd_i|). */
typedef struct tu_fd_spec {
    double step, rtol, atol, floor;
    int relative;
} tu_fd_spec;

/* Check the analytic gradient (n entries) of f at x (restored on return)
 * against central differences, coordinate by coordinate. */
static inline void tu_check_gradient(tu_scalar_fn f, void *ctx, double *x, size_t n,
                                     const double *analytic, tu_fd_spec spec, tu_name_fn name,
                                     const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = spec.relative ? spec.step * fmax(1.0, fabs(xi)) : spec.step;
        x[i] = xi + h;
        double fp = f(ctx, x);
        x[i] = xi - h;
        double fm = f(ctx, x);
        x[i] = xi;
        double fd = (fp - fm) / (2.0 * h);
        char label[128];
        if (name)
            name(ctx, i, label, sizeof label);
        else
            snprintf(label, sizeof label, "x[%zu]", i);
        tu_assert_within(analytic[i], fd, spec.atol + spec.rtol * fmax(spec.floor, fabs(fd)),
                         "%s: d/d %s (analytic vs central difference)", what, label);
    }
}

/* n random points in [-2, 2]^d (point-major: X is d x n) and a smooth target
 * sum_j sin(1.3 x_j + j) plus N(0, 0.01) noise, from gp_rng_seed(seed). */
static inline void tu_random_problem(size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += sin(1.3 * X[i * d + j] + (double)j);
        y[i] = s + 0.1 * gp_rng_normal(&rng);
    }
}

/* The same data column-major (X n x d), as a fit request takes it. */
static inline void tu_random_problem_colmajor(size_t n, size_t d, uint64_t seed, double *X,
                                              double *y)
{
    double *P = (double *)malloc((n * d > 0 ? n * d : 1) * sizeof *P);
    assert_non_null(P);
    tu_random_problem(n, d, seed, P, y);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            X[j * n + i] = P[i * d + j];
    free(P);
}

#endif
