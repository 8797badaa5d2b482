/* The suggestion engine (core/bo/suggest.h) on fitted exact models: the
 * chosen point is the argmax of log EI on a fine grid; q = 4 distinct
 * points; pending points are not suggested again; integers and categoricals
 * come back snapped; a seeded Branin minimisation beats the same budget of
 * Sobol points; constrained EI stays where the constraint model says
 * feasible; determinism; refusals naming the field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/bo/acquisition.h"
#include "core/bo/evaluate.h"
#include "core/bo/sobol.h"
#include "core/bo/suggest.h"
#include "tests/unit/bo_fixture.h"
#include "tests/unit/testutil.h"

static double f1(double u)
{
    return sin(9.0 * u) + 0.6 * cos(23.0 * u) + u;
}

static const gp_bo_param UNIT[] = {{GP_BO_DOUBLE, 0.0, 1.0, 0, 0}, {GP_BO_DOUBLE, 0.0, 1.0, 0, 0}};
static const gp_bo_space UNIT1 = {1, UNIT};
static const gp_bo_space UNIT2 = {2, UNIT};

static gp_bo_problem problem(const gp_bo_space *s, const gp_model *m, const double *U,
                             const double *y, size_t n)
{
    gp_bo_problem p;
    memset(&p, 0, sizeof p);
    p.space = s;
    p.objective = m;
    p.X = U, p.y = y, p.n = n;
    p.acquisition = GP_ACQ_LOG_EI;
    p.beta = 2.0;
    p.q = 1;
    p.seed = 11;
    return p;
}

static void suggest_ok(const gp_bo_problem *p, double *out, gp_bo_report *rep)
{
    gp_error err;
    int rc = gp_bo_suggest(p, out, rep, &err);
    if (rc != GP_OK)
        fail_msg("suggest: %s (%s, field '%s')", err.message, gp_status_name(rc), err.field);
}

/* ---- 1-D: the argmax of log EI ---- */

static void test_1d_argmax_of_log_ei(void **state)
{
    (void)state;
    double U[7] = {0.05, 0.2, 0.35, 0.5, 0.62, 0.8, 0.95}, y[7];
    for (int i = 0; i < 7; i++)
        y[i] = f1(U[i]);
    gp_model *m = bo_fit(U, y, 7, 1);
    gp_bo_problem p = problem(&UNIT1, m, U, y, 7);
    double u, best = INFINITY;
    gp_bo_report rep;
    suggest_ok(&p, &u, &rep);
    for (int i = 0; i < 7; i++)
        best = fmin(best, y[i]);
    gp_acq_spec spec = {GP_ACQ_LOG_EI, 0, best, 2.0, gp_bo_var_floor(m)};
    const int G = 20000;
    double grid_best = -INFINITY, grid_u = 0;
    for (int g = 0; g <= G; g++) {
        double x = (double)g / G, mean, var;
        assert_int_equal(gp_model_predict_grad(m, &x, &mean, &var, NULL, NULL, NULL), GP_OK);
        gp_acq_posterior post = {mean, var, NULL, NULL};
        double v = gp_acq_value(&spec, &post, 1, NULL);
        if (v > grid_best)
            grid_best = v, grid_u = x;
    }
    tu_assert_within(u, grid_u, 1.0 / G, "the suggestion against the grid's argmax");
    assert_true(rep.acquisition_value[0] >= grid_best - 1e-9);
    assert_string_equal(rep.method, "single point");
    gp_model_free(m);
}

/* ---- batches, pending, determinism ---- */

static void data2(size_t n, double *U, double *y)
{
    assert_int_equal(gp_sobol_points(2, 5, 0, n, U, NULL), GP_OK);
    for (size_t i = 0; i < n; i++)
        y[i] = branin_u(U + 2 * i);
}

static double dist(const double *a, const double *b, size_t D)
{
    double d = 0;
    for (size_t j = 0; j < D; j++)
        d = fmax(d, fabs(a[j] - b[j]));
    return d;
}

static void test_batch_distinct_and_deterministic(void **state)
{
    (void)state;
    double U[24], y[12], out[8], again[8];
    data2(12, U, y);
    gp_model *m = bo_fit(U, y, 12, 2);
    gp_bo_problem p = problem(&UNIT2, m, U, y, 12);
    p.q = 4;
    gp_bo_report rep;
    suggest_ok(&p, out, &rep);
    assert_string_equal(rep.method, "kriging believer");
    for (int a = 0; a < 4; a++) {
        for (int b = 0; b < a; b++)
            assert_true(dist(out + 2 * a, out + 2 * b, 2) > 1e-6);
        for (int i = 0; i < 12; i++)
            assert_true(dist(out + 2 * a, U + 2 * i, 2) > 1e-9);
        assert_true(isfinite(rep.acquisition_value[a]));
    }
    suggest_ok(&p, again, NULL);
    assert_memory_equal(out, again, sizeof out);
    /* the model is left as it was: a fresh q = 1 gives the batch's first point */
    p.q = 1;
    suggest_ok(&p, again, NULL);
    assert_memory_equal(out, again, 2 * sizeof *out);
    gp_model_free(m);
}

static void test_pending_not_suggested_again(void **state)
{
    (void)state;
    double U[24], y[12], first[2], next[2];
    data2(12, U, y);
    gp_model *m = bo_fit(U, y, 12, 2);
    gp_bo_problem p = problem(&UNIT2, m, U, y, 12);
    suggest_ok(&p, first, NULL);
    p.pending = first;
    p.n_pending = 1;
    gp_bo_report rep;
    suggest_ok(&p, next, &rep);
    assert_true(dist(first, next, 2) > 1e-6);
    assert_string_equal(rep.method, "kriging believer");
    /* pending work with every acquisition */
    for (int k = 0; k < 5; k++) {
        p.acquisition = (gp_acq_kind)k;
        p.n_features = 256;
        suggest_ok(&p, next, NULL);
        assert_true(dist(first, next, 2) > 1e-9);
    }
    gp_model_free(m);
}

/* ---- integers and categoricals ---- */

static void test_mixed_space_snapped(void **state)
{
    (void)state;
    static const gp_bo_param P[] = {{GP_BO_INTEGER, 1.0, 6.0, 0, 0},
                                    {GP_BO_CATEGORICAL, 0, 0, 0, 3},
                                    {GP_BO_DOUBLE, -1.0, 1.0, 0, 0}};
    gp_bo_space s = {3, P};
    enum { D = 5, N = 14 };
    double raw[D * N], U[D * N], y[N], v[3];
    assert_int_equal(gp_sobol_points(D, 3, 0, N, raw, NULL), GP_OK);
    for (int i = 0; i < N; i++) {
        gp_bo_snap(&s, raw + D * i, U + D * i);
        gp_bo_decode(&s, U + D * i, v);
        y[i] = (v[0] - 4.0) * (v[0] - 4.0) + (v[1] == 2.0 ? -3.0 : 0.0) + v[2] * v[2];
    }
    gp_model *m = bo_fit(U, y, N, D);
    gp_bo_problem p = problem(&s, m, U, y, N);
    p.q = 3;
    double out[D * 3];
    suggest_ok(&p, out, NULL);
    for (int j = 0; j < 3; j++) {
        const double *u = out + D * j;
        gp_bo_decode(&s, u, v);
        assert_true(v[0] == round(v[0]) && v[0] >= 1 && v[0] <= 6);
        int ones = 0;
        for (int c = 1; c <= 3; c++) {
            assert_true(u[c] == 0.0 || u[c] == 1.0);
            ones += u[c] == 1.0;
        }
        assert_int_equal(ones, 1);
        double snapped[D];
        gp_bo_snap(&s, u, snapped);
        assert_memory_equal(snapped, u, sizeof snapped);
    }
    gp_model_free(m);
}

/* ---- Branin: BO against Sobol, same budget ---- */

static double branin_bo(uint64_t seed, size_t budget, size_t initial)
{
    double U[2 * 64], y[64], best = INFINITY;
    assert_int_equal(gp_sobol_points(2, seed, 0, initial, U, NULL), GP_OK);
    for (size_t i = 0; i < initial; i++)
        y[i] = branin_u(U + 2 * i), best = fmin(best, y[i]);
    for (size_t n = initial; n < budget; n++) {
        gp_model *m = bo_fit(U, y, n, 2);
        gp_bo_problem p = problem(&BRANIN_SPACE, m, U, y, n);
        p.seed = seed * 1000 + n;
        suggest_ok(&p, U + 2 * n, NULL);
        y[n] = branin_u(U + 2 * n);
        best = fmin(best, y[n]);
        gp_model_free(m);
    }
    return best - BRANIN_MIN;
}

static double branin_sobol(uint64_t seed, size_t budget)
{
    double U[2 * 64], best = INFINITY;
    assert_int_equal(gp_sobol_points(2, seed, 0, budget, U, NULL), GP_OK);
    for (size_t i = 0; i < budget; i++)
        best = fmin(best, branin_u(U + 2 * i));
    return best - BRANIN_MIN;
}

static void test_branin_beats_sobol(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        double bo = branin_bo(seed, 25, 6), sobol = branin_sobol(seed, 25);
        printf("branin seed %llu: regret after 25: bo %.3g, sobol %.3g\n",
               (unsigned long long)seed, bo, sobol);
        assert_true(bo < 0.1);
        assert_true(bo < sobol / 5.0);
    }
}

/* ---- constrained EI ---- */

static void test_constrained_ei_avoids_infeasible(void **state)
{
    (void)state;
    /* minimise y = -u0 (best at u0 = 1), subject to c = u0 - 0.5 <= 0 */
    double U[24], y[12], c[12], out[2], free_out[2];
    assert_int_equal(gp_sobol_points(2, 9, 0, 12, U, NULL), GP_OK);
    for (int i = 0; i < 12; i++)
        y[i] = -U[2 * i] + 0.1 * U[2 * i + 1], c[i] = U[2 * i] - 0.5;
    gp_model *m = bo_fit(U, y, 12, 2), *mc = bo_fit(U, c, 12, 2);
    gp_bo_problem p = problem(&UNIT2, m, U, y, 12);
    suggest_ok(&p, free_out, NULL);
    assert_true(free_out[0] > 0.8);
    const gp_model *cons[1] = {mc};
    double limit = 0.0;
    p.n_constraints = 1, p.constraints = cons, p.limits = &limit, p.C = c;
    suggest_ok(&p, out, NULL);
    assert_true(out[0] < 0.55);
    assert_true(out[0] > 0.3); /* still pushed towards the objective's side */
    /* no feasible observation yet: the most probably feasible point, at
     * least as probable as the best of a 101 x 101 grid */
    double c_bad[12];
    for (int i = 0; i < 12; i++)
        c_bad[i] = c[i] + 2.0;
    gp_model *mc_bad = bo_fit(U, c_bad, 12, 2);
    cons[0] = mc_bad;
    p.C = c_bad;
    gp_bo_report rep;
    suggest_ok(&p, out, &rep);
    double grid_best = -INFINITY;
    for (int a = 0; a <= 100; a++)
        for (int b = 0; b <= 100; b++) {
            double u[2] = {a / 100.0, b / 100.0}, mean, var;
            assert_int_equal(gp_model_predict_grad(mc_bad, u, &mean, &var, NULL, NULL, NULL), GP_OK);
            gp_acq_posterior post = {mean, var, NULL, NULL};
            grid_best = fmax(grid_best, gp_acq_log_feasibility(0.0, &post, gp_bo_var_floor(mc_bad),
                                                               2, NULL));
        }
    assert_true(rep.acquisition_value[0] >= grid_best - 1e-9);
    gp_model_free(m);
    gp_model_free(mc);
    gp_model_free(mc_bad);
}

/* ---- no model, refusals ---- */

static void test_no_model_is_sobol(void **state)
{
    (void)state;
    double U[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, y[3] = {1, 2, 3}, out[4], want[10];
    gp_bo_problem p = problem(&UNIT2, NULL, U, y, 3);
    p.q = 2;
    gp_bo_report rep;
    suggest_ok(&p, out, &rep);
    assert_int_equal(gp_sobol_points(2, p.seed, 0, 5, want, NULL), GP_OK);
    assert_memory_equal(out, want + 6, sizeof out);
    assert_string_equal(rep.method, "sobol");
}

static void expect_refused(const gp_bo_problem *p, int code, const char *field)
{
    double out[2 * GP_BO_MAX_Q];
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_bo_suggest(p, out, NULL, &err), code);
    assert_string_equal(err.field, field);
}

static void test_refusals(void **state)
{
    (void)state;
    double U[24], y[12];
    data2(12, U, y);
    gp_model *m = bo_fit(U, y, 12, 2);
    gp_bo_problem p = problem(&UNIT2, m, U, y, 12);
    p.q = 0;
    expect_refused(&p, GP_EINVAL, "count");
    p.q = GP_BO_MAX_Q + 1;
    expect_refused(&p, GP_EINVAL, "count");
    p.q = 1;
    p.space = &UNIT1; /* the model has 2 columns */
    expect_refused(&p, GP_EINVAL, "model");
    p.space = &UNIT2;
    double ybad[12];
    memcpy(ybad, y, sizeof ybad);
    ybad[4] = NAN;
    p.y = ybad;
    expect_refused(&p, GP_EINVAL, "y[4]");
    p.y = y;
    p.acquisition = GP_ACQ_UCB, p.beta = -1;
    expect_refused(&p, GP_EINVAL, "acquisition.beta");
    p.acquisition = GP_ACQ_LOG_EI;
    /* a tiny discrete space runs out of new points */
    static const gp_bo_param two[] = {{GP_BO_INTEGER, 0.0, 1.0, 0, 0}};
    gp_bo_space s2 = {1, two};
    double Ud[2] = {0.25, 0.75}, yd[2] = {1.0, 2.0};
    gp_model *md = bo_fit(Ud, yd, 2, 1);
    gp_bo_problem pd = problem(&s2, md, Ud, yd, 2);
    expect_refused(&pd, GP_EINVAL, "count");
    gp_model_free(md);
    /* a method without the posterior gradient */
    gp_model *ms = bo_fit_method("ssgp", U, y, 12, 2, GP_KERNEL_RBF);
    p.objective = ms;
    expect_refused(&p, GP_EUNSUPPORTED, "model.method");
    gp_model_free(ms);
    gp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1d_argmax_of_log_ei),
        cmocka_unit_test(test_batch_distinct_and_deterministic),
        cmocka_unit_test(test_pending_not_suggested_again),
        cmocka_unit_test(test_mixed_space_snapped),
        cmocka_unit_test(test_branin_beats_sobol),
        cmocka_unit_test(test_constrained_ei_avoids_infeasible),
        cmocka_unit_test(test_no_model_is_sobol),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("bo_suggest", tests, NULL, NULL);
}
