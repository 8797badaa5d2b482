/* Method "hkd" with inducing inputs per block ("share_inducing": false,
 * core/methods/hkd/): the bound's analytic gradient in every block's Z
 * against central differences (tu_check_gradient); the shared Z as a
 * feasible point of the per-block problem (the per-block bound at T copies
 * of a shared Z equals the shared bound, and the fitted per-block bound is
 * not below the fitted shared one from the same start); export/import
 * predicting the same bits, and a corrupt per-block state refused naming the
 * array; the requests that conflict with it refused naming the member. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/base/value.h"
#include "core/methods/hkd/hkd.h"
#include "core/methods/registry.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

/* ---- option values ---- */

static gp_value vnum(double x)
{
    return (gp_value){.type = GP_VALUE_NUMBER, .number = x};
}

static gp_value vstr(const char *s)
{
    gp_value v = {.type = GP_VALUE_STRING};
    v.string = strdup(s);
    return v;
}

static gp_value vints(size_t n, const int *x)
{
    gp_value v = {.type = GP_VALUE_ARRAY, .n = n};
    v.items = calloc(n ? n : 1, sizeof *v.items);
    for (size_t i = 0; i < n; i++)
        v.items[i] = vnum(x[i]);
    return v;
}

static gp_value vobj(size_t n, const char *const *keys, gp_value *items)
{
    gp_value v = {.type = GP_VALUE_OBJECT, .n = n};
    v.keys = calloc(n ? n : 1, sizeof *v.keys);
    v.items = calloc(n ? n : 1, sizeof *v.items);
    for (size_t i = 0; i < n; i++) {
        v.keys[i] = strdup(keys[i]);
        v.items[i] = items[i];
    }
    return v;
}

/* {"generators": [gen], "center": "origin", "share_inducing": share}; share
 * is a gp_value so that a wrong type can be sent too. */
static gp_value *symmetry(gp_value gen, gp_value share)
{
    gp_value arr = {.type = GP_VALUE_ARRAY, .n = 1};
    arr.items = calloc(1, sizeof *arr.items);
    arr.items[0] = gen;
    const char *k[] = {"generators", "center", "share_inducing"};
    gp_value it[] = {arr, vstr("origin"), share};
    gp_value *v = malloc(sizeof *v);
    *v = vobj(3, k, it);
    return v;
}

static gp_value vbool(int b)
{
    return (gp_value){.type = GP_VALUE_BOOL, .number = b ? 1.0 : 0.0};
}

static gp_value gen_rotate(int order)
{
    const char *k[] = {"type", "dims", "order"};
    gp_value it[] = {vstr("rotate2d"), vints(2, (int[]){0, 1}), vnum(order)};
    return vobj(3, k, it);
}

static gp_value gen_translate(double period, int order)
{
    const char *k[] = {"type", "dim", "period", "order"};
    gp_value it[] = {vstr("translate"), vnum(0), vnum(period), vnum(order)};
    return vobj(4, k, it);
}

/* ---- the fixture: a function invariant under quarter turns ---- */

#define NP 150
#define NT 11

typedef struct toy {
    double X[NP * 2], y[NP], Xs[NT * 2];
} toy;

static void make_toy(toy *t, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < NP; i++) {
        double a = 2.0 * gp_rng_uniform(&rng) - 1.0, b = 2.0 * gp_rng_uniform(&rng) - 1.0;
        double r = sqrt(a * a + b * b), th = atan2(b, a);
        t->X[i * 2] = a;
        t->X[i * 2 + 1] = b;
        t->y[i] = cos(3.0 * r) + 0.5 * r * cos(4.0 * th) + 0.05 * gp_rng_normal(&rng);
    }
    for (size_t i = 0; i < NT * 2; i++)
        t->Xs[i] = 2.2 * gp_rng_uniform(&rng) - 1.1;
}

static const gp_method *hkd(void)
{
    return gp_method_find("hkd");
}

static gp_kernel *matern32(double ls)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_MATERN32, 2, 0, NULL, 0, &err), GP_OK);
    double th[2] = {0.0, log(ls)};
    gp_kernel_set_params(k, th);
    return k;
}

/* An hkd fit with 3 real blocks (quarter turns) of m points. */
static gp_model *fit_rot(const toy *t, const gp_kernel *k, int per_block, size_t m, int iters)
{
    gp_value *sym = symmetry(gen_rotate(4), vbool(!per_block));
    gp_option_value o[] = {{"inducing", (double)m, NULL, NULL},
                           {"max_iterations", iters, NULL, NULL},
                           {"pcg_tolerance", 1e-13, NULL, NULL},
                           {"symmetry", 0, NULL, sym}};
    gp_fit_request req;
    fit_request(&req, t->X, t->y, NP, 2, k, o, 4);
    gp_model *model = fit_ok(hkd(), &req, per_block ? "per block" : "shared");
    gp_value_free(sym);
    return model;
}

static double info(const gp_model *model, const char *key)
{
    const gp_info_item *it = find_info(model, key);
    if (it == NULL)
        fail_msg("no method_info %s", key);
    return it->number;
}

/* The model's Z (dw x m, working coordinates) from its export. */
static double *model_z(const gp_model *model, size_t *nz)
{
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *za = gp_state_find(&st, "Z");
    assert_non_null(za);
    *nz = za->rows * za->cols;
    double *Z = malloc(*nz * sizeof *Z);
    memcpy(Z, za->data, *nz * sizeof *Z);
    gp_state_free(&st);
    return Z;
}

/* ---- the gradient in every block's Z ---- */

typedef struct bound_ctx {
    const gp_model *model;
    const gp_fit_request *req;
    const gp_kernel *k;
    double s2;
} bound_ctx;

static double bound_at(void *ctx, const double *Z)
{
    bound_ctx *c = ctx;
    double f;
    gp_error err;
    assert_int_equal(gp_hkd_bound(c->model, c->req, c->k, c->s2, Z, &f, NULL, NULL, &err),
                     GP_OK);
    return f;
}

/* dF/dZ of every block's own points against central differences, at Z moved
 * off the T identical copies the fit starts from (so the blocks differ), and
 * the kernel and noise gradient as with the shared Z. */
static void test_gradient_per_block_z(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 3);
    gp_kernel *k = matern32(0.7);
    gp_model *model = fit_rot(&t, k, 1, 7, 0);
    assert_true(info(model, "inducing_per_block") == 1.0);
    assert_true(info(model, "inducing") == 7.0);
    size_t nz;
    double *Z = model_z(model, &nz);
    assert_int_equal(nz, 2 * 7 * 3);
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    for (size_t i = 0; i < nz; i++)
        Z[i] += 0.2 * (gp_rng_uniform(&rng) - 0.5);
    gp_option_value o[] = {{"symmetry", 0, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, NP, 2, k, o, 0);
    bound_ctx c = {model, &req, model->kernel, 0.05};
    double f, *gz = calloc(nz, sizeof *gz), grad[3];
    gp_error err;
    assert_int_equal(gp_hkd_bound(model, &req, model->kernel, c.s2, Z, &f, grad, gz, &err), GP_OK);
    tu_check_gradient(bound_at, &c, Z, nz, gz,
                      (tu_fd_spec){.step = 1e-5, .rtol = 1e-5, .atol = 1e-6, .floor = 1.0},
                      NULL, "per-block bound in Z");
    free(gz);
    free(Z);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- the shared Z is a feasible point of the per-block problem ---- */

/* The per-block bound at T copies of a fitted shared model's Z, with that
 * model's kernel and noise, is the shared model's bound (the same blocks
 * with the same points); and the per-block fit from the same start reaches
 * at least the shared fit's bound. */
static void test_shared_is_feasible(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 5);
    gp_kernel *k = matern32(0.7);
    gp_model *shared = fit_rot(&t, k, 0, 8, 40);
    gp_model *start = fit_rot(&t, k, 1, 8, 0); /* the per-block structure at its start */
    size_t ns, np;
    double *Zs = model_z(shared, &ns), *Zp = model_z(start, &np);
    assert_int_equal(np, 3 * ns);
    for (size_t b = 0; b < 3; b++)
        memcpy(Zp + b * ns, Zs, ns * sizeof *Zs);
    gp_option_value o[] = {{"symmetry", 0, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, NP, 2, k, o, 0);
    double s2 = shared->noise_variance, fs, fp;
    gp_error err;
    assert_int_equal(gp_hkd_bound(shared, &req, shared->kernel, s2, NULL, &fs, NULL, NULL, &err),
                     GP_OK);
    assert_int_equal(gp_hkd_bound(start, &req, shared->kernel, s2, Zp, &fp, NULL, NULL, &err),
                     GP_OK);
    tu_assert_close(fp, fs, 1e-10, 1e-10, "per-block bound at the shared Z");
    gp_model *per = fit_rot(&t, k, 1, 8, 40);
    double bs = info(shared, "collapsed_bound"), bp = info(per, "collapsed_bound");
    if (!(bp >= bs - 1e-6 * fabs(bs)))
        fail_msg("per-block bound %.10g below the shared one %.10g", bp, bs);
    free(Zs);
    free(Zp);
    gp_model_free(per);
    gp_model_free(start);
    gp_model_free(shared);
    gp_kernel_free(k);
}

/* ---- persistence ---- */

static void test_roundtrip(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 8);
    gp_kernel *k = matern32(0.7);
    gp_model *model = fit_rot(&t, k, 1, 6, 15);
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *cap = gp_state_find(&st, "inducing_per_block");
    assert_non_null(cap);
    assert_true(cap->data[0] == 6.0);
    gp_model *back = NULL;
    assert_int_equal(gp_model_import(hkd(), &st, &back, &err), GP_OK);
    double m1[NT], v1[NT], c1[NT * NT], m2[NT], v2[NT], c2[NT * NT];
    predict_ok(model, t.Xs, NT, 2, 1, m1, v1, c1);
    predict_ok(back, t.Xs, NT, 2, 1, m2, v2, c2);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(c1, c2, sizeof c1);
    for (size_t i = 0; i < NT; i++)
        assert_true(isfinite(m1[i]) && v1[i] > 0.0);
    /* a capacity that does not divide Z among the blocks */
    gp_named_array *a = (gp_named_array *)cap;
    a->data[0] = 5.0;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_import(hkd(), &st, &bad, &err), GP_EDATA);
    assert_string_equal(err.field, "inducing_per_block");
    a->data[0] = 6.0;
    /* block 1 pointing at block 0's points */
    gp_named_array *bl = (gp_named_array *)gp_state_find(&st, "blocks");
    assert_int_equal(bl->rows, 7);
    bl->data[7 + 1] = 0.0;
    assert_int_equal(gp_model_import(hkd(), &st, &bad, &err), GP_EDATA);
    assert_string_equal(err.field, "blocks");
    gp_state_free(&st);
    gp_model_free(back);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- requests that conflict with it ---- */

static void expect_refused(const toy *t, gp_value *sym, double optimize, int want,
                           const char *field)
{
    gp_kernel *k = matern32(0.7);
    gp_option_value o[] = {{"inducing", 6, NULL, NULL},
                           {"optimize_inducing", optimize, NULL, NULL},
                           {"symmetry", 0, NULL, sym}};
    gp_fit_request req;
    fit_request(&req, t->X, t->y, NP, 2, k, o, 3);
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(hkd(), &req, &model, &err);
    if (rc != want)
        fail_msg("status %d, expected %d (%s)", rc, want, rc ? err.message : "fitted");
    assert_string_equal(err.field, field);
    gp_model_free(model);
    gp_value_free(sym);
    gp_kernel_free(k);
}

static void test_conflicts_named(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 2);
    const char *f = "options.symmetry.share_inducing";
    expect_refused(&t, symmetry(gen_rotate(4), vbool(0)), 0.0, GP_EUNSUPPORTED, f);
    expect_refused(&t, symmetry(gen_translate(2.0, 4), vbool(0)), 1.0, GP_EUNSUPPORTED, f);
    expect_refused(&t, symmetry(gen_rotate(4), vstr("no")), 1.0, GP_EINVAL, f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_per_block_z),
        cmocka_unit_test(test_shared_is_feasible),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_conflicts_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
