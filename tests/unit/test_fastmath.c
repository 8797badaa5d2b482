/* Unit tests for core/linalg/fastmath.c: gp_sincos_scaled against libm cos()/sin(),
 * and gp_exp / gp_exp_block against libm exp() (at the end).
 *
 * Bounds (measured on 4 million random inputs per range and on every 997th
 * multiple of pi/2 up to 6e6 with its neighbours): absolute error at most
 * 1 ulp of 1 (2^-52) against libm for any finite |z| <= 1e7; the test allows
 * 1.5 ulp of 1. Near multiples of pi/2, where the result is tiny and the
 * reduction is what matters, the error is at most 14 ulps of the result
 * itself (about 1e-24 absolute); the test allows 32. A wrong polynomial
 * coefficient or a two-part split of pi/2 misses these by orders of
 * magnitude. Beyond 1e7 and for NaN / Inf the result is libm's, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/fastmath.h"

#define PIO2 1.5707963267948966
#define ULP1 0x1p-52

static double *dalloc(size_t count)
{
    double *p = malloc((count ? count : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

/* Worst |fast - scale * libm| over z[0..n-1] for both functions. */
static double max_abs_error(const double *z, size_t n, double scale)
{
    double *c = dalloc(n), *s = dalloc(n);
    memcpy(c, z, n * sizeof *c);
    gp_sincos_scaled(c, s, n, scale);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(c[i] - scale * cos(z[i])));
        worst = fmax(worst, fabs(s[i] - scale * sin(z[i])));
        assert_false(isnan(c[i]) || isnan(s[i]));
    }
    free(c);
    free(s);
    return worst;
}

static void check_range(double half_width, uint64_t seed)
{
    size_t n = 200000;
    double *z = dalloc(n);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        z[i] = half_width * (2.0 * gp_rng_uniform(&rng) - 1.0);
    double err = max_abs_error(z, n, 1.0);
    print_message("|z| <= %g: max abs error %.3g (%.2f ulp of 1)\n", half_width, err,
                  err / ULP1);
    assert_true(err <= 1.5 * ULP1);
    /* A scale is applied after the function, as scale * cos(z) would be. */
    assert_true(max_abs_error(z, 1000, 0.37) <= 1.5 * 0.37 * ULP1);
    free(z);
}

static void test_random_ranges(void **state)
{
    (void)state;
    check_range(1.0, 1);
    check_range(100.0, 2);
    check_range(1e5, 3);
    check_range(GP_SINCOS_FAST_MAX, 4);
}

/* Near k pi/2 the result is tiny: compare relative to it (ulps of libm's
 * value), which tests the Cody-Waite reduction. */
static void test_near_multiples_of_pio2(void **state)
{
    (void)state;
    double worst_ulps = 0.0;
    for (long k = -6000000; k <= 6000000; k += 4999) {
        for (int j = -3; j <= 3; j++) {
            double z = (double)k * PIO2;
            for (int t = 0; t < abs(j); t++)
                z = nextafter(z, j > 0 ? INFINITY : -INFINITY);
            double c = z, s;
            gp_sincos_scaled(&c, &s, 1, 1.0);
            double rc = cos(z), rs = sin(z);
            double uc = nextafter(fabs(rc), INFINITY) - fabs(rc);
            double us = nextafter(fabs(rs), INFINITY) - fabs(rs);
            worst_ulps = fmax(worst_ulps, fabs(c - rc) / uc);
            worst_ulps = fmax(worst_ulps, fabs(s - rs) / us);
        }
    }
    print_message("near k pi/2: max error %.1f ulps of the result\n", worst_ulps);
    assert_true(worst_ulps <= 32.0);
    /* Exact zero keeps its sign like sin(): sin(-0) = -0, cos(-0) = 1. */
    double c = -0.0, s = 1.0;
    gp_sincos_scaled(&c, &s, 1, 1.0);
    assert_true(c == 1.0 && s == 0.0 && signbit(s));
}

/* Beyond the fast range and for non-finite inputs: libm's values exactly,
 * also when such inputs sit inside a block of ordinary ones. */
static void test_huge_and_nonfinite(void **state)
{
    (void)state;
    const double special[] = {NAN, INFINITY, -INFINITY, 1.0000001e7, -2e7, 1e15,
                              -3.5e22, 1e300, DBL_MAX, -DBL_MAX};
    size_t ns = sizeof special / sizeof special[0];
    size_t n = 150;
    double *z = dalloc(n), *c = dalloc(n), *s = dalloc(n);
    for (size_t i = 0; i < n; i++)
        z[i] = i % 7 == 3 ? special[(i / 7) % ns] : 0.01 * (double)i - 0.5;
    memcpy(c, z, n * sizeof *c);
    gp_sincos_scaled(c, s, n, 2.0);
    for (size_t i = 0; i < n; i++) {
        double rc = 2.0 * cos(z[i]), rs = 2.0 * sin(z[i]);
        if (isnan(z[i]) || isinf(z[i])) {
            assert_true(isnan(c[i]) && isnan(s[i]));
        } else if (fabs(z[i]) > GP_SINCOS_FAST_MAX) {
            assert_memory_equal(&c[i], &rc, sizeof rc);
            assert_memory_equal(&s[i], &rs, sizeof rs);
        } else {
            assert_true(fabs(c[i] - rc) <= 3.0 * ULP1 && fabs(s[i] - rs) <= 3.0 * ULP1);
        }
    }
    free(z);
    free(c);
    free(s);
}

/* Every length (block tails included) gives the same values as one element
 * at a time, and n = 0 touches nothing. */
static void test_lengths_and_blocks(void **state)
{
    (void)state;
    size_t nmax = 300;
    double *z = dalloc(nmax), *c = dalloc(nmax), *s = dalloc(nmax);
    gp_rng rng;
    gp_rng_seed(&rng, 9);
    for (size_t i = 0; i < nmax; i++)
        z[i] = 20.0 * gp_rng_normal(&rng);
    const size_t lengths[] = {1, 2, 63, 64, 65, 127, 128, 129, 300};
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        size_t n = lengths[t];
        memcpy(c, z, n * sizeof *c);
        gp_sincos_scaled(c, s, n, 0.5);
        for (size_t i = 0; i < n; i++) {
            double c1 = z[i], s1;
            gp_sincos_scaled(&c1, &s1, 1, 0.5);
            assert_memory_equal(&c[i], &c1, sizeof c1);
            assert_memory_equal(&s[i], &s1, sizeof s1);
        }
    }
    c[0] = 42.0;
    s[0] = 43.0;
    gp_sincos_scaled(c, s, 0, 1.0);
    assert_true(c[0] == 42.0 && s[0] == 43.0);
    free(z);
    free(c);
    free(s);
}

/* ---- gp_exp ---- */

/* |a - b| in ulps of b (b libm's, correctly rounded or nearly). */
static double ulps(double a, double b)
{
    if (a == b)
        return 0.0;
    return fabs(a - b) / (nextafter(fabs(b), INFINITY) - fabs(b));
}

/* Within 1 ulp of libm's exp over the kernels' arguments (-50 .. 0), the
 * whole fast range, near 0 and near the fast range's ends: a wrong
 * coefficient or a one-part ln2 misses by orders of magnitude. gp_exp and
 * gp_exp_block agree bit for bit everywhere. */
static void test_exp_accuracy(void **state)
{
    (void)state;
    size_t n = 200000;
    double *x = dalloc(n), *y = dalloc(n);
    gp_rng rng;
    gp_rng_seed(&rng, 31);
    const double lo[4] = {-50.0, -GP_EXP_FAST_MAX, -1e-6, 700.0};
    const double hi[4] = {0.0, GP_EXP_FAST_MAX, 1e-6, GP_EXP_FAST_MAX};
    for (int r = 0; r < 4; r++) {
        for (size_t i = 0; i < n; i++)
            x[i] = lo[r] + (hi[r] - lo[r]) * gp_rng_uniform(&rng);
        gp_exp_block(x, y, n);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) {
            double one = gp_exp(x[i]);
            assert_memory_equal(&y[i], &one, sizeof one);
            worst = fmax(worst, ulps(y[i], exp(x[i])));
        }
        print_message("exp on [%g, %g]: %.3f ulp at most\n", lo[r], hi[r], worst);
        assert_true(worst <= 1.0);
    }
    free(x);
    free(y);
}

/* Beyond the fast range libm's results (0 below -746), NaN stays NaN, exp(0)
 * is 1 exactly; the slow lanes of a block do not disturb the others, and the
 * block may work in place. */
static void test_exp_edges(void **state)
{
    (void)state;
    const double x[] = {0.0,     -0.0,      1.0,      -1.0,    -708.0,   -708.5,
                        -720.0,  -745.0,    -745.2,   -746.0,  -800.0,   -1e300,
                        708.5,   709.7,     709.8,    1e300,   INFINITY, -INFINITY,
                        NAN,     -DBL_MIN,  DBL_MIN,  -30.25,  2.5,      -0.5};
    size_t n = sizeof x / sizeof x[0];
    double y[sizeof x / sizeof x[0]], z[sizeof x / sizeof x[0]];
    gp_exp_block(x, y, n);
    memcpy(z, x, sizeof z);
    gp_exp_block(z, z, n);
    for (size_t i = 0; i < n; i++) {
        double want = exp(x[i]), one = gp_exp(x[i]);
        assert_memory_equal(&y[i], &one, sizeof one);
        assert_memory_equal(&z[i], &one, sizeof one);
        if (isnan(want)) {
            assert_true(isnan(y[i]));
        } else if (x[i] < GP_EXP_ZERO_BELOW || !(fabs(x[i]) <= GP_EXP_FAST_MAX)) {
            assert_memory_equal(&y[i], &want, sizeof want);
        } else {
            assert_true(ulps(y[i], want) <= 1.0);
        }
    }
    assert_true(gp_exp(0.0) == 1.0 && gp_exp(-0.0) == 1.0);
    /* Lengths around the block of 64, a slow lane in each block. */
    double *a = dalloc(300), *b = dalloc(300);
    for (size_t i = 0; i < 300; i++)
        a[i] = i % 50 == 7 ? -720.0 - (double)i : -0.1 * (double)i;
    const size_t lengths[] = {1, 63, 64, 65, 128, 129, 300};
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        gp_exp_block(a, b, lengths[t]);
        for (size_t i = 0; i < lengths[t]; i++) {
            double one = gp_exp(a[i]);
            assert_memory_equal(&b[i], &one, sizeof one);
        }
    }
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ranges),
        cmocka_unit_test(test_near_multiples_of_pio2),
        cmocka_unit_test(test_huge_and_nonfinite),
        cmocka_unit_test(test_lengths_and_blocks),
        cmocka_unit_test(test_exp_accuracy),
        cmocka_unit_test(test_exp_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
