/* Method "hkd" (core/methods/hkd/hkd.h) and its groups (core/methods/hkd/group.h):
 * the oracles of docs/methods/harmonic-kernel-decomposition.md §8.16 — the
 * weights (sum_t W[t, s] = [s = 0], the factor 2 of the paired real blocks,
 * pitfall 2), sum_t k_t = k to 1e-12, every K_t PSD, zero cross-block
 * inter-domain covariance, the shift property; one block equals sgpr's bound
 * and predictions; the means and bound against a dense re-implementation of
 * note §5 steps 5-9 (PCG against a direct solve); the analytic gradient
 * against central differences; the validation rejecting symmetries the
 * kernel does not have; parts that add up; export/import bit-identical. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cblas.h>
#include <lapacke.h>

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/base/value.h"
#include "core/methods/hkd/hkd.h"
#include "core/methods/registry.h"
#include "core/methods/hkd/group.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

/* ---- building option values ---- */

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

static gp_value vbool(int b)
{
    return (gp_value){.type = GP_VALUE_BOOL, .number = b ? 1.0 : 0.0};
}

/* An array of n numbers. */
static gp_value vints(size_t n, const int *x)
{
    gp_value v = {.type = GP_VALUE_ARRAY, .n = n};
    v.items = calloc(n ? n : 1, sizeof *v.items);
    for (size_t i = 0; i < n; i++)
        v.items[i] = vnum(x[i]);
    return v;
}

/* An object of n members (keys copied, items moved in). */
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

/* {"generators": [g...]} (generators moved in), heap-allocated. */
static gp_value *symmetry_of(size_t n, gp_value *gens)
{
    gp_value arr = {.type = GP_VALUE_ARRAY, .n = n};
    arr.items = calloc(n ? n : 1, sizeof *arr.items);
    for (size_t i = 0; i < n; i++)
        arr.items[i] = gens[i];
    const char *k[] = {"generators"};
    gp_value *v = malloc(sizeof *v);
    *v = vobj(1, k, &arr);
    return v;
}

static gp_value gen_negate(size_t n, const int *dims)
{
    const char *k[] = {"type", "dims"};
    gp_value it[] = {vstr("negate"), vints(n, dims)};
    return vobj(2, k, it);
}

static gp_value gen_rotate(int i, int j, int order)
{
    const char *k[] = {"type", "dims", "order"};
    int dims[] = {i, j};
    gp_value it[] = {vstr("rotate2d"), vints(2, dims), vnum(order)};
    return vobj(3, k, it);
}

static gp_value gen_cycle(size_t n, const int *dims, int shift)
{
    const char *k[] = {"type", "dims", "shift"};
    gp_value it[] = {vstr("cycle_dims"), vints(n, dims), vnum(shift)};
    return vobj(3, k, it);
}

static gp_value gen_translate(int dim, double period, int order)
{
    const char *k[] = {"type", "dim", "period", "order"};
    gp_value it[] = {vstr("translate"), vnum(dim), vnum(period), vnum(order)};
    return vobj(4, k, it);
}

static gp_value gen_pca(int ways)
{
    const char *k[] = {"type", "ways"};
    gp_value it[] = {vstr("negate_pca"), vnum(ways)};
    return vobj(2, k, it);
}

/* ---- groups on an identity frame ---- */

typedef struct grp {
    gp_symmetry sym;
    gp_hkd_frame frame;
    gp_group g;
} grp;

static void grp_make(grp *G, const gp_value *v, size_t d)
{
    gp_error err;
    memset(G, 0, sizeof *G);
    if (gp_symmetry_parse(v, d, "options.symmetry", &G->sym, &err) != GP_OK)
        fail_msg("parse: %s (%s)", err.message, err.field);
    G->frame.d = d;
    G->frame.dw = d;
    if (gp_group_build(&G->sym, &G->frame, &G->g, &err) != GP_OK)
        fail_msg("build: %s", err.message);
}

static gp_kernel *leaf(gp_kernel_type t, size_t d, int ard, double ls)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, t, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    double th[16] = {0};
    size_t np = gp_kernel_n_params(k);
    th[0] = log(1.3);
    for (size_t p = 1; p < np; p++)
        th[p] = log(ls * (1.0 + 0.1 * (double)p * (ard ? 1 : 0)));
    gp_kernel_set_params(k, th);
    return k;
}

/* k_t(x, z) = sum_s W[t, s] k(x, G^s z). */
static double kt(const grp *G, const gp_kernel *k, size_t t, const double *x, const double *z)
{
    double gz[GP_SYM_MAX_DIMS], v = 0.0;
    for (size_t s = 0; s < G->g.size; s++) {
        gp_group_apply(&G->g, s, z, gz);
        v += G->g.W[t + s * G->g.blocks] * gp_kernel_eval(k, x, gz, 0);
    }
    return v;
}

/* A handful of symmetries on 3 inputs, each with an isotropic kernel it holds for. */
static size_t some_groups(gp_value **out)
{
    int all[] = {0, 1, 2}, two[] = {0, 2}, one[] = {1};
    size_t n = 0;
    gp_value g1[] = {gen_negate(3, all)};
    out[n++] = symmetry_of(1, g1);
    gp_value g2[] = {gen_negate(2, two), gen_negate(1, one)};
    out[n++] = symmetry_of(2, g2);
    gp_value g3[] = {gen_rotate(0, 1, 4)};
    out[n++] = symmetry_of(1, g3);
    gp_value g4[] = {gen_rotate(0, 1, 5)};
    out[n++] = symmetry_of(1, g4);
    gp_value g5[] = {gen_rotate(0, 1, 6), gen_negate(1, (int[]){2})};
    out[n++] = symmetry_of(2, g5);
    gp_value g6[] = {gen_cycle(3, all, 1)};
    out[n++] = symmetry_of(1, g6);
    gp_value g7[] = {gen_pca(3)};
    out[n++] = symmetry_of(1, g7);
    return n;
}

static void random_points(double *P, size_t n, size_t d, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        P[i] = 1.5 * gp_rng_normal(&rng);
}

/* ---- the group oracles (§8.16) ---- */

static void test_weights_sum_and_factor_two(void **state)
{
    (void)state;
    gp_value *vs[8];
    size_t n = some_groups(vs);
    for (size_t i = 0; i < n; i++) {
        grp G;
        grp_make(&G, vs[i], 3);
        for (size_t s = 0; s < G.g.size; s++) {
            double sum = 0.0;
            for (size_t t = 0; t < G.g.blocks; t++)
                sum += G.g.W[t + s * G.g.blocks];
            assert_true(fabs(sum - (s == 0 ? 1.0 : 0.0)) < 1e-15);
        }
        gp_group_free(&G.g);
        gp_value_free(vs[i]);
    }
    /* order 5: blocks r = 0, 1, 2; the paired ones carry 2 cos(2 pi r s / 5) / 5 */
    gp_value g[] = {gen_rotate(0, 1, 5)};
    gp_value *v = symmetry_of(1, g);
    grp G;
    grp_make(&G, v, 2);
    assert_int_equal(G.g.blocks, 3);
    assert_int_equal(G.g.size, 5);
    assert_true(fabs(G.g.W[1 + 0 * 3] - 0.4) < 1e-15); /* not 0.2: pitfall 2 */
    assert_true(fabs(G.g.W[2 + 1 * 3] - 0.4 * cos(4.0 * 3.14159265358979323846 / 5.0)) < 1e-15);
    gp_group_free(&G.g);
    gp_value_free(v);
}

static void test_decomposition_psd_orthogonal(void **state)
{
    (void)state;
    gp_value *vs[8];
    size_t n = some_groups(vs);
    double P[20 * 3];
    random_points(P, 20, 3, 7);
    for (size_t i = 0; i < n; i++) {
        grp G;
        grp_make(&G, vs[i], 3);
        gp_kernel *k = leaf(GP_KERNEL_MATERN32, 3, 0, 1.1);
        size_t T = G.g.blocks;
        for (size_t a = 0; a < 20; a++)
            for (size_t b = 0; b < 20; b++) {
                double sum = 0.0;
                for (size_t t = 0; t < T; t++)
                    sum += kt(&G, k, t, P + 3 * a, P + 3 * b);
                assert_true(fabs(sum - gp_kernel_eval(k, P + 3 * a, P + 3 * b, 0)) < 1e-12);
            }
        for (size_t t = 0; t < T; t++) { /* K_t PSD */
            double K[400], ev[20];
            for (size_t a = 0; a < 20; a++)
                for (size_t b = 0; b < 20; b++)
                    K[a + 20 * b] = 0.5 * (kt(&G, k, t, P + 3 * a, P + 3 * b) +
                                           kt(&G, k, t, P + 3 * b, P + 3 * a));
            assert_int_equal(LAPACKE_dsyev(LAPACK_COL_MAJOR, 'N', 'L', 20, K, 20, ev), 0);
            assert_true(ev[0] > -1e-10);
        }
        /* cross-block inter-domain covariance sum_{s,s'} W[t,s] W[t',s'] k(G^s z, G^s' z') */
        for (size_t t = 0; t < T; t++)
            for (size_t u = 0; u < T; u++) {
                if (t == u)
                    continue;
                double c = 0.0, gz[3], gw[3];
                for (size_t s = 0; s < G.g.size; s++)
                    for (size_t s2 = 0; s2 < G.g.size; s2++) {
                        gp_group_apply(&G.g, s, P, gz);
                        gp_group_apply(&G.g, s2, P + 3, gw);
                        c += G.g.W[t + s * T] * G.g.W[u + s2 * T] * gp_kernel_eval(k, gz, gw, 0);
                    }
                assert_true(fabs(c) < 1e-12);
            }
        gp_kernel_free(k);
        gp_group_free(&G.g);
        gp_value_free(vs[i]);
    }
}

/* k_t(x, G z) = chi_t(G) k_t(x, z) where the block is one character: the
 * trivial block is invariant, the r = T/2 block changes sign, and a paired
 * block of order 4 changes sign under G^2. */
static void test_shift_property(void **state)
{
    (void)state;
    gp_value g[] = {gen_rotate(0, 1, 4)};
    gp_value *v = symmetry_of(1, g);
    grp G;
    grp_make(&G, v, 2);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 0, 0.9);
    double P[10 * 2];
    random_points(P, 10, 2, 3);
    for (size_t a = 0; a < 9; a++) {
        const double *x = P + 2 * a, *z = P + 2 * a + 2;
        double gz[2], g2z[2];
        gp_group_apply(&G.g, 1, z, gz);
        gp_group_apply(&G.g, 2, z, g2z);
        assert_true(fabs(kt(&G, k, 0, x, gz) - kt(&G, k, 0, x, z)) < 1e-13);
        assert_true(fabs(kt(&G, k, 2, x, gz) + kt(&G, k, 2, x, z)) < 1e-13);
        assert_true(fabs(kt(&G, k, 1, x, g2z) + kt(&G, k, 1, x, z)) < 1e-13);
    }
    gp_kernel_free(k);
    gp_group_free(&G.g);
    gp_value_free(v);
}

/* ---- method-level ---- */

#define NP 120
#define NT 9

typedef struct toy {
    size_t n, d;
    double X[NP * 3], y[NP], Xs[NT * 3];
} toy;

/* A function even in x (plus a small odd part) on d inputs, noise 0.05. */
static void make_toy(toy *t, size_t d, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    t->n = NP;
    t->d = d;
    for (size_t i = 0; i < NP * d; i++)
        t->X[i] = 2.0 * gp_rng_uniform(&rng) - 1.0;
    for (size_t i = 0; i < NP; i++) {
        double r2 = 0.0, s = 0.0;
        for (size_t j = 0; j < d; j++) {
            r2 += t->X[i + j * NP] * t->X[i + j * NP];
            s += t->X[i + j * NP];
        }
        t->y[i] = cos(2.0 * r2) + 0.3 * sin(s) + 0.05 * gp_rng_normal(&rng);
    }
    for (size_t i = 0; i < NT * d; i++)
        t->Xs[i] = 2.2 * gp_rng_uniform(&rng) - 1.1;
}

static const gp_method *hkd(void)
{
    return gp_method_find("hkd");
}

static gp_model *fit_hkd(const toy *t, gp_kernel *k, gp_value *sym, size_t m, int iters,
                         double noise)
{
    gp_option_value o[] = {{"inducing", (double)m, NULL, NULL},
                           {"max_iterations", iters, NULL, NULL},
                           {"pcg_tolerance", 1e-13, NULL, NULL},
                           {"symmetry", 0, NULL, sym}};
    gp_fit_request req;
    fit_request(&req, t->X, t->y, t->n, t->d, k, o, sym ? 4 : 3);
    if (noise > 0) {
        req.noise_given = 1;
        req.noise_variance = noise;
        req.noise_fixed = 1;
    }
    return fit_ok(hkd(), &req, "hkd");
}

static double info(const gp_model *model, const char *key)
{
    const gp_info_item *it = find_info(model, key);
    if (it == NULL)
        fail_msg("no method_info %s", key);
    return it->number;
}

static void test_one_block_is_sgpr(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 2, 11);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 1, 0.7);
    k->fixed = GP_FIX_ALL;
    gp_value *sym = symmetry_of(0, NULL);
    gp_model *a = fit_hkd(&t, k, sym, 12, 0, 0.02);
    gp_option_value o[] = {{"inducing", 12, NULL, NULL},
                           {"inducing_selection", 0, "kmeans", NULL},
                           {"optimize_inducing", 0, NULL, NULL},
                           {"reselect", 0, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, t.n, t.d, k, o, 4);
    req.noise_given = 1;
    req.noise_variance = 0.02;
    req.noise_fixed = 1;
    gp_model *b = fit_ok(gp_method_find("sgpr"), &req, "sgpr");
    assert_int_equal((int)info(a, "n_blocks"), 1);
    assert_true(fabs(a->diag.objective - b->diag.objective) < 1e-9 * fabs(b->diag.objective));
    double ma[NT], va[NT], mb[NT], vb[NT], ca[NT * NT], cb[NT * NT];
    predict_ok(a, t.Xs, NT, 2, 1, ma, va, ca);
    predict_ok(b, t.Xs, NT, 2, 1, mb, vb, cb);
    for (size_t i = 0; i < NT; i++) {
        assert_true(fabs(ma[i] - mb[i]) < 1e-9);
        assert_true(fabs(va[i] - vb[i]) < 1e-9 * vb[i]);
    }
    for (size_t i = 0; i < NT * NT; i++)
        assert_true(fabs(ca[i] - cb[i]) < 1e-9);
    gp_model_free(a);
    gp_model_free(b);
    gp_value_free(sym);
    gp_kernel_free(k);
}

/* Dense re-implementation of note §5 steps 5-9 from the model's exported Z
 * and blocks: the means by a direct solve (against hkd's PCG), the
 * predictive mean and the bound L*. */
static void dense_check(const gp_model *model, const toy *t, const gp_kernel *k0)
{
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *za = gp_state_find(&st, "Z"), *ba = gp_state_find(&st, "blocks");
    assert_non_null(za);
    assert_non_null(ba);
    size_t d = t->d, m = za->cols, T = ba->cols, n = t->n;
    const gp_kernel *k = model->kernel;
    (void)k0;
    /* the group on the identity frame (negations / rotations only) */
    const gp_named_array *code = gp_state_find(&st, "symmetry");
    grp G;
    memset(&G, 0, sizeof G);
    assert_int_equal(gp_symmetry_decode(code->data, code->rows, d, &G.sym, &err), GP_OK);
    G.frame.d = G.frame.dw = d;
    assert_int_equal(gp_group_build(&G.sym, &G.frame, &G.g, &err), GP_OK);
    double Xw[NP * 3], yw[NP], s2 = model->noise_variance;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++)
            Xw[j + i * d] = (t->X[i + j * n] - model->x_mean[j]) / model->x_scale[j];
        yw[i] = (t->y[i] - model->y_mean) / model->y_scale;
    }
    size_t P = 0, off[16], mt[16];
    for (size_t b = 0; b < T; b++) {
        off[b] = P;
        mt[b] = (size_t)ba->data[b * (m + 1)];
        P += mt[b];
    }
    double *Phi = calloc(P * n, sizeof *Phi), *A = calloc(P * P, sizeof *A);
    double *rhs = calloc(P, sizeof *rhs), *L = calloc(m * m * T, sizeof *L);
    double eps = 1e-6 * gp_kernel_diag(k, Xw), r0 = 0.0, logdet = 0.0;
    for (size_t b = 0; b < T; b++) {
        const double *id = ba->data + b * (m + 1) + 1;
        double *Lb = L + b * m * m;
        for (size_t j = 0; j < mt[b]; j++)
            for (size_t l = 0; l < mt[b]; l++)
                Lb[j + l * m] = kt(&G, k, b, za->data + (size_t)id[j] * d,
                                   za->data + (size_t)id[l] * d) + (j == l ? eps : 0.0);
        assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)mt[b], Lb, (int)m), 0);
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < mt[b]; j++)
                Phi[off[b] + j + i * P] = kt(&G, k, b, Xw + i * d, za->data + (size_t)id[j] * d);
            cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)mt[b], Lb,
                        (int)m, Phi + off[b] + i * P, 1);
        }
    }
    for (size_t i = 0; i < n; i++)
        r0 += gp_kernel_diag(k, Xw) - cblas_ddot((int)P, Phi + i * P, 1, Phi + i * P, 1);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)P, (int)n, 1.0 / s2, Phi, (int)P,
                0.0, A, (int)P);
    for (size_t b = 0; b < T; b++) { /* log|I + C_t/s2| from the diagonal blocks */
        double Bt[256] = {0};
        for (size_t j = 0; j < mt[b]; j++)
            for (size_t l = 0; l <= j; l++)
                Bt[j + l * 16] = A[off[b] + j + (off[b] + l) * P] + (j == l ? 1.0 : 0.0);
        assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)mt[b], Bt, 16), 0);
        for (size_t j = 0; j < mt[b]; j++)
            logdet += 2.0 * log(Bt[j + j * 16]);
    }
    for (size_t i = 0; i < P; i++)
        A[i + i * P] += 1.0;
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)P, (int)n, 1.0 / s2, Phi, (int)P, yw, 1, 0.0,
                rhs, 1);
    double g_dot_m, yy = cblas_ddot((int)n, yw, 1, yw, 1), *mean = calloc(P, sizeof *mean);
    memcpy(mean, rhs, P * sizeof *mean);
    assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (int)P, 1, A, (int)P, mean, (int)P), 0);
    const gp_named_array *mw = gp_state_find(&st, "mean_white");
    for (size_t i = 0; i < P; i++)
        assert_true(fabs(mw->data[i] - mean[i]) < 1e-8 * (1.0 + fabs(mean[i])));
    g_dot_m = s2 * cblas_ddot((int)P, rhs, 1, mean, 1);
    double bound = -0.5 * (double)n * (log(2.0 * 3.14159265358979323846 * s2)) -
                   (yy - g_dot_m) / (2.0 * s2) - 0.5 * logdet - r0 / (2.0 * s2);
    double objective = model->diag.objective + (double)n * log(model->y_scale);
    assert_true(fabs(objective - bound) < 1e-8 * fabs(bound));
    /* the predictive mean at the test points */
    double mu[NT], var[NT];
    predict_ok(model, t->Xs, NT, d, 1, mu, var, NULL);
    for (size_t q = 0; q < NT; q++) {
        double xs[3], f = 0.0;
        for (size_t j = 0; j < d; j++)
            xs[j] = (t->Xs[q + j * NT] - model->x_mean[j]) / model->x_scale[j];
        for (size_t b = 0; b < T; b++) {
            const double *id = ba->data + b * (m + 1) + 1;
            double a[16];
            for (size_t j = 0; j < mt[b]; j++)
                a[j] = kt(&G, k, b, xs, za->data + (size_t)id[j] * d);
            cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)mt[b],
                        L + b * m * m, (int)m, a, 1);
            f += cblas_ddot((int)mt[b], a, 1, mean + off[b], 1);
        }
        f = f * model->y_scale + model->y_mean;
        assert_true(fabs(f - mu[q]) < 1e-8 * (1.0 + fabs(f)));
    }
    free(Phi);
    free(A);
    free(rhs);
    free(L);
    free(mean);
    gp_group_free(&G.g);
    gp_state_free(&st);
}

static void test_dense_reference(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 2, 5);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, 2, 0, 0.8);
    /* two blocks (x -> -x) and four (each axis negated), then a rotation (3 blocks) */
    gp_value g1[] = {gen_negate(2, (int[]){0, 1})};
    gp_value g2[] = {gen_negate(1, (int[]){0}), gen_negate(1, (int[]){1})};
    gp_value g3[] = {gen_rotate(0, 1, 4)};
    gp_value *syms[] = {symmetry_of(1, g1), symmetry_of(2, g2), symmetry_of(1, g3)};
    for (size_t i = 0; i < 3; i++) {
        gp_model *model = fit_hkd(&t, k, syms[i], 10, 15, 0.0);
        assert_true(info(model, "pcg_residual") < 1e-12);
        dense_check(model, &t, k);
        gp_model_free(model);
        gp_value_free(syms[i]);
    }
    gp_kernel_free(k);
}

/* Central differences of the bound in Z (dw x m) against gz. */
static void check_gz(const gp_model *model, const gp_fit_request *req, const gp_kernel *k,
                     double s2, size_t c)
{
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *za = gp_state_find(&st, "Z");
    size_t nz = za->rows * za->cols;
    double *Z = malloc(nz * sizeof *Z), *gz = calloc(nz, sizeof *gz), f, fp, fm;
    memcpy(Z, za->data, nz * sizeof *Z);
    assert_int_equal(gp_hkd_bound(model, req, k, s2, Z, &f, NULL, gz, &err), GP_OK);
    for (size_t i = 0; i < nz; i++) {
        double h = 1e-5, z0 = Z[i];
        Z[i] = z0 + h;
        assert_int_equal(gp_hkd_bound(model, req, k, s2, Z, &fp, NULL, NULL, &err), GP_OK);
        Z[i] = z0 - h;
        assert_int_equal(gp_hkd_bound(model, req, k, s2, Z, &fm, NULL, NULL, &err), GP_OK);
        Z[i] = z0;
        double num = (fp - fm) / (2 * h);
        if (fabs(num - gz[i]) > 1e-5 * (1.0 + fabs(num)))
            fail_msg("case %zu Z[%zu]: analytic %.10g, differences %.10g", c, i, gz[i], num);
    }
    free(Z);
    free(gz);
    gp_state_free(&st);
}

/* The analytic gradient of the bound against central differences, for every
 * kernel parameter (ARD), log s2 and every coordinate of Z, with 4, 2 and 3
 * blocks (the rotation carries the orbit's gradient back through G^-s). */
static void test_gradient_matches_differences(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 3, 9);
    gp_value g1[] = {gen_negate(2, (int[]){0, 2}), gen_negate(1, (int[]){1})};
    gp_value g2[] = {gen_negate(3, (int[]){0, 1, 2})};
    gp_value g3[] = {gen_rotate(0, 2, 4)};
    gp_value *syms[] = {symmetry_of(2, g1), symmetry_of(1, g2), symmetry_of(1, g3)};
    gp_kernel_type types[] = {GP_KERNEL_MATERN32, GP_KERNEL_RBF, GP_KERNEL_MATERN52};
    for (size_t c = 0; c < 3; c++) {
        gp_kernel *k = leaf(types[c], 3, c < 2, 0.9);
        gp_model *model = fit_hkd(&t, k, syms[c], 9, 0, 0.0);
        gp_option_value o[] = {{"symmetry", 0, NULL, syms[c]}};
        gp_fit_request req;
        fit_request(&req, t.X, t.y, t.n, t.d, k, o, 1);
        size_t np = gp_kernel_n_params(k);
        double theta[8], grad[9], f, fp, fm, s2 = 0.07;
        gp_kernel *kk = NULL;
        gp_error err;
        assert_int_equal(gp_kernel_copy(&kk, model->kernel, &err), GP_OK);
        gp_kernel_get_params(kk, theta);
        assert_int_equal(gp_hkd_bound(model, &req, kk, s2, NULL, &f, grad, NULL, &err), GP_OK);
        for (size_t p = 0; p <= np; p++) {
            double h = 1e-5, num;
            if (p < np) {
                double th[8];
                memcpy(th, theta, sizeof th);
                th[p] += h;
                gp_kernel_set_params(kk, th);
                assert_int_equal(gp_hkd_bound(model, &req, kk, s2, NULL, &fp, NULL, NULL, &err),
                                 GP_OK);
                th[p] -= 2 * h;
                gp_kernel_set_params(kk, th);
                assert_int_equal(gp_hkd_bound(model, &req, kk, s2, NULL, &fm, NULL, NULL, &err),
                                 GP_OK);
                gp_kernel_set_params(kk, theta);
            } else {
                assert_int_equal(
                    gp_hkd_bound(model, &req, kk, s2 * exp(h), NULL, &fp, NULL, NULL, &err),
                    GP_OK);
                assert_int_equal(
                    gp_hkd_bound(model, &req, kk, s2 * exp(-h), NULL, &fm, NULL, NULL, &err),
                    GP_OK);
            }
            num = (fp - fm) / (2 * h);
            if (fabs(num - grad[p]) > 1e-5 * (1.0 + fabs(num)))
                fail_msg("kernel %zu parameter %zu: analytic %.10g, differences %.10g", c, p,
                         grad[p], num);
        }
        check_gz(model, &req, kk, s2, c);
        gp_kernel_free(kk);
        gp_kernel_free(k);
        gp_model_free(model);
        gp_value_free(syms[c]);
    }
}

static int fit_status(const toy *t, gp_kernel *k, gp_value *sym, gp_error *err)
{
    gp_option_value o[] = {{"inducing", 6, NULL, NULL},
                           {"max_iterations", 2, NULL, NULL},
                           {"symmetry", 0, NULL, sym}};
    gp_fit_request req;
    fit_request(&req, t->X, t->y, t->n, t->d, k, o, 3);
    gp_model *model = NULL;
    int rc = gp_model_fit(hkd(), &req, &model, err);
    gp_model_free(model);
    gp_value_free(sym);
    return rc;
}

static void expect_status(int rc, int want, const gp_error *err, const char *field,
                          const char *words)
{
    if (rc != want)
        fail_msg("status %d, expected %d (%s)", rc, want, err->message);
    if (field && strcmp(err->field, field) != 0)
        fail_msg("field '%s', expected '%s' (%s)", err->field, field, err->message);
    if (words && strstr(err->message, words) == NULL)
        fail_msg("message '%s' lacks '%s'", err->message, words);
}

static void test_validation_rejects(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 3, 4);
    gp_error err;
    gp_kernel *ard = leaf(GP_KERNEL_RBF, 3, 1, 1.0), *iso = leaf(GP_KERNEL_RBF, 3, 0, 1.0);
    /* ARD lengthscales break a rotation and a cycle, even when they start equal */
    gp_kernel *ard_eq = leaf(GP_KERNEL_RBF, 3, 1, 1.0);
    double th[4] = {0, 0, 0, 0};
    gp_kernel_set_params(ard_eq, th);
    gp_value r1[] = {gen_rotate(0, 1, 4)};
    expect_status(fit_status(&t, ard_eq, symmetry_of(1, r1), &err), GP_EUNSUPPORTED, &err,
                  "options.symmetry.generators[0]", "kernel invariance");
    gp_value c1[] = {gen_cycle(3, (int[]){0, 1, 2}, 1)};
    expect_status(fit_status(&t, ard, symmetry_of(1, c1), &err), GP_EUNSUPPORTED, &err,
                  "options.symmetry.generators[0]", "kernel invariance");
    /* a reflection of one axis does not commute with a rotation of order 4 */
    gp_value nc[] = {gen_rotate(0, 1, 4), gen_negate(1, (int[]){0})};
    expect_status(fit_status(&t, iso, symmetry_of(2, nc), &err), GP_EUNSUPPORTED, &err,
                  "options.symmetry.generators[1]", "commut");
    /* what holds: the rotation with an isotropic kernel, axis negations with ARD, a
     * translated (circle-embedded) input with ARD, PCA negations with ARD */
    gp_value ok1[] = {gen_rotate(0, 1, 4)};
    expect_status(fit_status(&t, iso, symmetry_of(1, ok1), &err), GP_OK, &err, NULL, NULL);
    gp_value ok2[] = {gen_negate(1, (int[]){2}), gen_negate(1, (int[]){0})};
    expect_status(fit_status(&t, ard, symmetry_of(2, ok2), &err), GP_OK, &err, NULL, NULL);
    gp_value ok3[] = {gen_translate(2, 2.0, 6)};
    expect_status(fit_status(&t, ard, symmetry_of(1, ok3), &err), GP_OK, &err, NULL, NULL);
    gp_value ok4[] = {gen_pca(2)};
    expect_status(fit_status(&t, ard, symmetry_of(1, ok4), &err), GP_OK, &err, NULL, NULL);
    /* request errors name the member */
    gp_value b1[] = {gen_negate(2, (int[]){0, 3})};
    expect_status(fit_status(&t, iso, symmetry_of(1, b1), &err), GP_EINVAL, &err,
                  "options.symmetry.generators[0].dims[1]", "columns");
    gp_value b2[] = {gen_pca(1), gen_negate(1, (int[]){0})};
    expect_status(fit_status(&t, iso, symmetry_of(2, b2), &err), GP_EINVAL, &err,
                  "options.symmetry.generators[0]", "negate_pca");
    const char *kk[] = {"type", "dims"};
    gp_value it[] = {vstr("rotate2d"), vints(2, (int[]){0, 1})};
    gp_value b3[] = {vobj(2, kk, it)};
    expect_status(fit_status(&t, iso, symmetry_of(1, b3), &err), GP_EINVAL, &err,
                  "options.symmetry.generators[0].order", "missing");
    const char *ks[] = {"generators", "share_inducing"};
    gp_value its[] = {{.type = GP_VALUE_ARRAY}, vbool(0)};
    gp_value *bs = malloc(sizeof *bs);
    *bs = vobj(2, ks, its);
    /* false (a Z per block) is fitted since issue 40 (test_hkd_per_block.c) */
    expect_status(fit_status(&t, iso, bs, &err), GP_OK, &err, NULL, NULL);
    /* "center": "origin" keeps the caller's origin; an unknown member is named */
    const char *kc[] = {"generators", "center"};
    gp_value ic[] = {{.type = GP_VALUE_ARRAY}, vstr("origin")};
    gp_value *vc = malloc(sizeof *vc);
    *vc = vobj(2, kc, ic);
    gp_option_value oc[] = {{"inducing", 6, NULL, NULL}, {"symmetry", 0, NULL, vc}};
    gp_fit_request rc_req;
    fit_request(&rc_req, t.X, t.y, t.n, t.d, iso, oc, 2);
    gp_model *mc = fit_ok(hkd(), &rc_req, "center origin");
    for (size_t j = 0; j < t.d; j++)
        assert_true(mc->x_mean[j] == 0.0);
    gp_model_free(mc);
    gp_value_free(vc);
    const char *ku[] = {"colour"};
    gp_value iu[] = {vnum(1)};
    gp_value *vu = malloc(sizeof *vu);
    *vu = vobj(1, ku, iu);
    expect_status(fit_status(&t, iso, vu, &err), GP_EINVAL, &err, "options.symmetry.colour",
                  "no member");
    /* the default symmetry is checked against the data too: at most 64 inputs */
    {
        size_t n = 4, d = 65;
        double *X = calloc(n * d, sizeof *X), y[4] = {0, 1, 2, 3};
        gp_kernel *k65 = leaf(GP_KERNEL_RBF, d, 0, 1.0);
        gp_fit_request r65;
        fit_request(&r65, X, y, n, d, k65, NULL, 0);
        gp_model *m65 = NULL;
        expect_status(gp_model_fit(hkd(), &r65, &m65, &err), GP_EUNSUPPORTED, &err, "X", "64");
        gp_kernel_free(k65);
        free(X);
    }
    /* the workspace is checked against the fit budget before anything is allocated */
    gp_option_value o[] = {{"inducing", 2048, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, t.X, t.y, t.n, t.d, iso, o, 1);
    req.max_train_points = 1000;
    gp_model *model = NULL;
    expect_status(gp_model_fit(hkd(), &req, &model, &err), GP_ETOOBIG, &err, "options.inducing",
                  "budget");
    gp_kernel_free(ard);
    gp_kernel_free(ard_eq);
    gp_kernel_free(iso);
}

/* The parts add up to the prediction; export/import gives the same bits. */
static void test_parts_and_roundtrip(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 2, 21);
    gp_kernel *k = leaf(GP_KERNEL_MATERN32, 2, 0, 0.8);
    gp_value g[] = {gen_negate(1, (int[]){0}), gen_negate(1, (int[]){1})};
    gp_value *sym = symmetry_of(2, g);
    gp_model *model = fit_hkd(&t, k, sym, 10, 20, 0.0);
    size_t P = gp_model_parts(model);
    assert_int_equal(P, 4);
    char name[32];
    gp_model_part_name(model, 3, name, sizeof name);
    assert_string_equal(name, "r=(1,1)");
    double mu[NT], var[NT], cm[NT * 4], cv[NT * 4];
    gp_predict_request pr = {.X = t.Xs, .m = NT, .d = 2, .include_noise = 0, .components = 1};
    gp_prediction out = {.mean = mu, .variance = var, .component_mean = cm,
                         .component_variance = cv};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    for (size_t q = 0; q < NT; q++) {
        double sm = 0.0, sv = 0.0;
        for (size_t p = 0; p < P; p++) {
            sm += cm[q + p * NT];
            sv += cv[q + p * NT];
        }
        assert_true(fabs(sm - mu[q]) < 1e-10 * (1.0 + fabs(mu[q])));
        assert_true(fabs(sv - var[q]) < 1e-9 * var[q]);
    }
    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *back = NULL;
    assert_int_equal(gp_model_import(hkd(), &st, &back, &err), GP_OK);
    double m1[NT], v1[NT], c1[NT * NT], m2[NT], v2[NT], c2[NT * NT];
    predict_ok(model, t.Xs, NT, 2, 1, m1, v1, c1);
    predict_ok(back, t.Xs, NT, 2, 1, m2, v2, c2);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(c1, c2, sizeof c1);
    double s1[NT * 3], s2[NT * 3];
    gp_sample_request sr = {.X = t.Xs, .m = NT, .d = 2, .n_samples = 3, .seed = 5};
    assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
    assert_int_equal(gp_model_sample(back, &sr, s2, &err), GP_OK);
    assert_memory_equal(s1, s2, sizeof s1);
    /* a corrupt factor is refused naming the array */
    gp_named_array *a = (gp_named_array *)gp_state_find(&st, "chol_kuu_blocks");
    a->data[0] = -1.0;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_import(hkd(), &st, &bad, &err), GP_EDATA);
    assert_string_equal(err.field, "chol_kuu_blocks");
    gp_state_free(&st);
    gp_model_free(back);
    gp_model_free(model);
    gp_value_free(sym);
    gp_kernel_free(k);
}

/* Streaming (cache_mb 0: every pass recomputes the features chunk by chunk)
 * gives the same bits as holding them in memory. */
static void test_streaming_equals_cached(void **state)
{
    (void)state;
    toy t;
    make_toy(&t, 3, 17);
    gp_kernel *k = leaf(GP_KERNEL_MATERN32, 3, 1, 0.8);
    gp_value g[] = {gen_negate(1, (int[]){0}), gen_negate(2, (int[]){1, 2})};
    gp_value *sym = symmetry_of(2, g);
    double mu[2][NT], var[2][NT];
    for (int c = 0; c < 2; c++) {
        gp_option_value o[] = {{"inducing", 8, NULL, NULL},
                               {"max_iterations", 10, NULL, NULL},
                               {"cache_mb", c ? 0 : 64, NULL, NULL},
                               {"symmetry", 0, NULL, sym}};
        gp_fit_request req;
        fit_request(&req, t.X, t.y, t.n, t.d, k, o, 4);
        gp_model *model = fit_ok(hkd(), &req, "cache");
        assert_true(info(model, "features_cached") == (c ? 0.0 : 1.0));
        predict_ok(model, t.Xs, NT, 3, 1, mu[c], var[c], NULL);
        gp_model_free(model);
    }
    assert_memory_equal(mu[0], mu[1], sizeof mu[0]);
    assert_memory_equal(var[0], var[1], sizeof var[0]);
    gp_value_free(sym);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_sum_and_factor_two),
        cmocka_unit_test(test_decomposition_psd_orthogonal),
        cmocka_unit_test(test_shift_property),
        cmocka_unit_test(test_one_block_is_sgpr),
        cmocka_unit_test(test_dense_reference),
        cmocka_unit_test(test_gradient_matches_differences),
        cmocka_unit_test(test_validation_rejects),
        cmocka_unit_test(test_parts_and_roundtrip),
        cmocka_unit_test(test_streaming_equals_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
