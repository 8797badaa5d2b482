/* The suggestion engine's search space and Sobol points (core/bo/space.h,
 * core/bo/sobol.h): encodings and their round trips, the checks naming the
 * field, the plain Sobol sequence against scipy's (tests/fixtures/bo_sobol.txt,
 * tests/fixtures/make_bo_fixtures.py), and the scrambled sequence's net
 * property, determinism and dependence on the seed. */
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
#include "core/bo/sobol.h"
#include "core/bo/space.h"
#include "tests/unit/testutil.h"

static const gp_bo_param MIXED[] = {
    {GP_BO_DOUBLE, -2.0, 3.0, 0, 0},
    {GP_BO_DOUBLE, 1e-4, 1.0, 1, 0},
    {GP_BO_INTEGER, 1.0, 5.0, 0, 0},
    {GP_BO_INTEGER, 1.0, 1000.0, 1, 0},
    {GP_BO_CATEGORICAL, 0.0, 0.0, 0, 3},
};
static const gp_bo_space MIXED_SPACE = {5, MIXED};

static void test_dim_and_encode(void **state)
{
    (void)state;
    assert_int_equal(gp_bo_space_dim(&MIXED_SPACE), 7);
    assert_int_equal(gp_bo_space_check(&MIXED_SPACE, NULL), GP_OK);
    double v[5] = {0.5, 1e-2, 3.0, 10.0, 2.0}, u[7], back[5];
    assert_int_equal(gp_bo_encode(&MIXED_SPACE, v, u, NULL), GP_OK);
    tu_assert_close(u[0], 0.5, 1e-15, 0, "double");
    tu_assert_close(u[1], 0.5, 1e-15, 0, "log double (the middle of 1e-4 .. 1 on logs)");
    tu_assert_close(u[2], 0.5, 1e-15, 0, "integer 3 owns the middle fifth of [0.5, 5.5]");
    tu_assert_close(u[3], (log(10.0) - log(0.5)) / (log(1000.5) - log(0.5)), 1e-15, 0, "log int");
    assert_true(u[4] == 0.0 && u[5] == 0.0 && u[6] == 1.0);
    gp_bo_decode(&MIXED_SPACE, u, back);
    for (int i = 0; i < 5; i++)
        tu_assert_close(back[i], v[i], 1e-13, 0, "round trip %d", i);
}

/* Each integer owns an equal slice of [0, 1]: u in [k/5, (k+1)/5) decodes to lo + k. */
static void test_integer_slices(void **state)
{
    (void)state;
    gp_bo_param p = {GP_BO_INTEGER, 1.0, 5.0, 0, 0};
    gp_bo_space s = {1, &p};
    for (int i = 0; i <= 1000; i++) {
        double u = i / 1000.0, v;
        gp_bo_decode(&s, &u, &v);
        int k = i == 1000 ? 4 : (int)floor(u * 5.0 + 1e-12);
        /* exact slice ends round half away from zero: the next integer */
        assert_true(v == 1.0 + k || (fabs(u * 5.0 - round(u * 5.0)) < 1e-12 && v == k + 1.0));
    }
}

static void test_decode_clamps_and_snaps(void **state)
{
    (void)state;
    double u[7] = {-0.3, 1.7, 0.999999, NAN, 0.2, 0.9, 0.4}, v[5], s[7];
    gp_bo_decode(&MIXED_SPACE, u, v);
    assert_true(v[0] == -2.0 && v[1] == 1.0 && v[2] == 5.0 && v[4] == 1.0);
    assert_true(v[3] == round(v[3]) && v[3] >= 1.0 && v[3] <= 1000.0);
    gp_bo_snap(&MIXED_SPACE, u, s);
    assert_true(s[4] == 0.0 && s[5] == 1.0 && s[6] == 0.0);
    double v2[5];
    gp_bo_decode(&MIXED_SPACE, s, v2);
    for (int i = 0; i < 5; i++)
        assert_true(v2[i] == v[i]);
    /* snapping is idempotent */
    double s2[7];
    gp_bo_snap(&MIXED_SPACE, s, s2);
    for (int j = 0; j < 7; j++)
        assert_true(s2[j] == s[j]);
}

static void expect_refused(gp_bo_param p, const char *field)
{
    gp_bo_param ps[2] = {{GP_BO_DOUBLE, 0.0, 1.0, 0, 0}, p};
    gp_bo_space s = {2, ps};
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_bo_space_check(&s, &err), GP_EINVAL);
    assert_string_equal(err.field, field);
}

static void test_check_names_field(void **state)
{
    (void)state;
    expect_refused((gp_bo_param){GP_BO_DOUBLE, 1.0, 1.0, 0, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_DOUBLE, 2.0, 1.0, 0, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_DOUBLE, NAN, 1.0, 0, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_DOUBLE, 0.0, INFINITY, 0, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_DOUBLE, 0.0, 1.0, 1, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_INTEGER, 0.5, 3.0, 0, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_INTEGER, 0.0, 3.0, 1, 0}, "parameters[1].bounds");
    expect_refused((gp_bo_param){GP_BO_CATEGORICAL, 0, 0, 0, 1}, "parameters[1].values");
    expect_refused((gp_bo_param){(gp_bo_type)7, 0, 1, 0, 0}, "parameters[1].type");
    gp_error err;
    gp_bo_space empty = {0, NULL};
    assert_int_equal(gp_bo_space_check(&empty, &err), GP_EINVAL);
    assert_string_equal(err.field, "parameters");
}

static void test_encode_refuses(void **state)
{
    (void)state;
    gp_error err;
    double u[7];
    double bad[][5] = {{3.5, 0.1, 1, 1, 0}, {0, 0.1, 2.5, 1, 0}, {0, 0.1, 1, 1, 3},
                       {0, NAN, 1, 1, 0}, {0, 0.1, 1, 0, 0}};
    const char *field[] = {"parameters[0]", "parameters[2]", "parameters[4]", "parameters[1]",
                           "parameters[3]"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(gp_bo_encode(&MIXED_SPACE, bad[i], u, &err), GP_EDATA);
        assert_string_equal(err.field, field[i]);
    }
}

/* ---- Sobol ---- */

static void compare_plain(const gp_fixture *fx, const char *name, size_t dim, size_t n)
{
    const double *want;
    assert_int_equal(gp_fixture_get(fx, name, n, dim, &want, NULL), GP_OK);
    double *got = malloc(dim * n * sizeof *got);
    assert_non_null(got);
    assert_int_equal(gp_sobol_points_plain(dim, 0, n, got, NULL), GP_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < dim; d++)
            tu_assert_within(got[i * dim + d] * 1073741824.0, want[d * n + i], 0.0,
                             "%s point %zu dim %zu", name, i, d);
    /* a later start continues the same sequence */
    size_t first = n / 3;
    assert_int_equal(gp_sobol_points_plain(dim, first, n - first, got, NULL), GP_OK);
    for (size_t i = first; i < n; i++)
        for (size_t d = 0; d < dim; d++)
            tu_assert_within(got[(i - first) * dim + d] * 1073741824.0, want[d * n + i], 0.0,
                             "%s from %zu: point %zu dim %zu", name, first, i, d);
    free(got);
}

static void test_sobol_plain_equals_scipy(void **state)
{
    (void)state;
    char path[512];
    gp_fixture fx;
    assert_int_equal(gp_fixture_path(path, sizeof path, "bo_sobol.txt", NULL), GP_OK);
    assert_int_equal(gp_fixture_load(path, &fx, NULL), GP_OK);
    compare_plain(&fx, "plain256", 256, 16);
    compare_plain(&fx, "plain8", 8, 256);
    gp_fixture_free(&fx);
}

/* Every coordinate of the first 2^m points of a scrambled sequence has
 * exactly one point in each of the 2^m intervals [k 2^-m, (k+1) 2^-m) (a
 * (0, m, 1)-net in each dimension), and every pair of the first two
 * coordinates one point in each 2^a x 2^b box with a + b = m. */
static void test_sobol_scrambled_nets(void **state)
{
    (void)state;
    const size_t dim = 12, m = 8, n = (size_t)1 << m;
    double *x = malloc(dim * n * sizeof *x);
    assert_non_null(x);
    assert_int_equal(gp_sobol_points(dim, 42, 0, n, x, NULL), GP_OK);
    for (size_t mm = 1; mm <= m; mm++) {
        size_t cells = (size_t)1 << mm;
        for (size_t d = 0; d < dim; d++) {
            unsigned count[256] = {0};
            for (size_t i = 0; i < cells; i++) {
                double v = x[i * dim + d];
                assert_true(v >= 0.0 && v < 1.0);
                count[(size_t)(v * cells)]++;
            }
            for (size_t k = 0; k < cells; k++)
                assert_int_equal(count[k], 1);
        }
    }
    for (size_t a = 0; a <= m; a++) { /* dims 0 and 1 form a (0, m, 2)-net */
        size_t ca = (size_t)1 << a, cb = (size_t)1 << (m - a);
        unsigned count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(size_t)(x[i * dim] * ca) * cb + (size_t)(x[i * dim + 1] * cb)]++;
        for (size_t k = 0; k < n; k++)
            assert_int_equal(count[k], 1);
    }
    free(x);
}

static void test_sobol_seeded(void **state)
{
    (void)state;
    const size_t dim = 5, n = 64;
    double a[5 * 64], b[5 * 64], c[5 * 64], d3[3 * 64];
    assert_int_equal(gp_sobol_points(dim, 7, 0, n, a, NULL), GP_OK);
    assert_int_equal(gp_sobol_points(dim, 7, 0, n, b, NULL), GP_OK);
    assert_int_equal(gp_sobol_points(dim, 8, 0, n, c, NULL), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    size_t same = 0;
    for (size_t i = 0; i < dim * n; i++)
        same += a[i] == c[i];
    assert_true(same < dim * n / 8);
    /* the first coordinates do not depend on dim; a later start continues */
    assert_int_equal(gp_sobol_points(3, 7, 0, n, d3, NULL), GP_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < 3; d++)
            assert_true(d3[i * 3 + d] == a[i * dim + d]);
    assert_int_equal(gp_sobol_points(dim, 7, 10, n - 10, b, NULL), GP_OK);
    assert_memory_equal(b, a + 10 * dim, (n - 10) * dim * sizeof *a);
}

static void test_sobol_refuses(void **state)
{
    (void)state;
    double x[4];
    gp_error err;
    assert_int_equal(gp_sobol_points(0, 1, 0, 1, x, &err), GP_EINVAL);
    assert_int_equal(gp_sobol_points(GP_SOBOL_MAX_DIM + 1, 1, 0, 1, x, &err), GP_EINVAL);
    assert_int_equal(gp_sobol_points(1, 1, (uint64_t)1 << 30, 1, x, &err), GP_EINVAL);
    assert_int_equal(gp_sobol_points(1, 1, ((uint64_t)1 << 30) - 1, 1, x, &err), GP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dim_and_encode),
        cmocka_unit_test(test_integer_slices),
        cmocka_unit_test(test_decode_clamps_and_snaps),
        cmocka_unit_test(test_check_names_field),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_sobol_plain_equals_scipy),
        cmocka_unit_test(test_sobol_scrambled_nets),
        cmocka_unit_test(test_sobol_seeded),
        cmocka_unit_test(test_sobol_refuses),
    };
    return cmocka_run_group_tests_name("bo_space", tests, NULL, NULL);
}
