/* Method "gwi" (core/methods/gwi/gwi.h; docs/methods/sparse-variational-and-pls.md
 * §1.2, §5.3, §6 P1-P9, §7 T6-T7):
 *   T6  with the prior as Q (mean 0, Sigma = Kzz^{-1}) bures_sym is 0;
 *   T7  finite differences of every parameter's gradient, for both means,
 *       both W2 estimators and both objectives;
 *   bures_sym against a direct W2^2 (explicit inverses, Denman-Beavers roots),
 *   thesis_nonsym against its formula with the same explicit r;
 *   the kernel_sum start (B3) is sgpr's posterior (mean and latent variance);
 *   the mlp mean against a hand-written forward pass;
 *   the method: epochs 0 keeps the start (and its alpha), export/import,
 *   tempering, replay,
 *   refused imports and refused options. */
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

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/methods/gwi/gwi.h"
#include "core/methods/registry.h"
#include "core/methods/sgpr.h"
#include "core/model/method.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

/* ---- helpers ---- */

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *rbf_ard(size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

/* C (n x n) = A B, all n x n column-major (plain loops: no BLAS in the references). */
static void matmul(const double *A, const double *B, size_t n, double *C)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t a = 0; a < n; a++)
                s += A[i + a * n] * B[a + j * n];
            C[i + j * n] = s;
        }
}

/* The inverse of a general n x n matrix (dgetrf/dgetri), in place. */
static void invert_general(double *A, size_t n)
{
    lapack_int *piv = calloc(n, sizeof *piv);
    assert_non_null(piv);
    assert_int_equal(LAPACKE_dgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv), 0);
    assert_int_equal(LAPACKE_dgetri(LAPACK_COL_MAJOR, (int)n, A, (int)n, piv), 0);
    free(piv);
}

/* The inverse of an SPD n x n matrix (dpotrf/dpotri), full, in place. */
static void invert_spd(double *A, size_t n)
{
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)n, A, (int)n), 0);
    assert_int_equal(LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (int)n, A, (int)n), 0);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < j; i++)
            A[i + j * n] = A[j + i * n];
}

/* The principal square root of an SPD matrix A (n x n) by the Denman-Beavers
 * iteration Y <- (Y + Z^{-1}) / 2, Z <- (Z + Y^{-1}) / 2 (Y -> A^{1/2}); a
 * route independent of gwi.c's eigendecompositions. */
static void sqrtm_db(const double *A, size_t n, double *Y)
{
    double *Z = dalloc(n * n), *Yi = dalloc(n * n), *Zi = dalloc(n * n);
    memcpy(Y, A, n * n * sizeof *Y);
    for (size_t i = 0; i < n; i++)
        Z[i * n + i] = 1.0;
    for (int it = 0; it < 100; it++) {
        memcpy(Yi, Y, n * n * sizeof *Y);
        memcpy(Zi, Z, n * n * sizeof *Z);
        invert_general(Yi, n);
        invert_general(Zi, n);
        double change = 0.0, size = 0.0;
        for (size_t i = 0; i < n * n; i++) {
            double y = 0.5 * (Y[i] + Zi[i]);
            change = fmax(change, fabs(y - Y[i]));
            size = fmax(size, fabs(y));
            Y[i] = y;
            Z[i] = 0.5 * (Z[i] + Yi[i]);
        }
        if (change <= 1e-15 * size)
            break;
    }
    free(Z);
    free(Yi);
    free(Zi);
}

/* ---- the toy problem: 50 points in 2-D, 8 inducing inputs ---- */

enum { TN = 50, TD = 2, TM = 8, TNB = 20, TNS = 12, THIDDEN = 4 };

typedef struct toy {
    double X[TN * TD], y[TN], Z[TM * TD], Lk[TM * TM], jitter;
    const double *XB, *yB, *XS; /* B: the first TNB points, S: TNS points from 30 */
    gp_kernel *k;
    gp_gwi_setup s;
    gp_gwi_work *w;
    size_t np;
} toy;

static void toy_init(toy *t, gp_gwi_mean_kind mean, gp_gwi_w2_kind w2,
                     gp_gwi_objective_kind objective)
{
    memset(t, 0, sizeof *t);
    tu_random_problem(TN, TD, 17, t->X, t->y);
    double yz[TM];
    tu_random_problem(TM, TD, 18, t->Z, yz);
    t->k = rbf_ard(TD);
    t->k->log_variance = log(1.1);
    t->k->log_lengthscale[0] = log(0.8);
    t->k->log_lengthscale[1] = log(1.2);
    gp_error err;
    assert_int_equal(gp_inducing_kuu_factor(t->k, t->Z, TM, t->Lk, &t->jitter, &err), GP_OK);
    t->XB = t->X;
    t->yB = t->y;
    t->XS = t->X + 30 * TD;
    t->s = (gp_gwi_setup){.k = t->k, .s2 = 0.08, .Z = t->Z, .m = TM, .d = TD, .Lk = t->Lk,
                          .mean = mean, .hidden = THIDDEN, .w2 = w2, .objective = objective,
                          .n_total = TN};
    assert_int_equal(gp_gwi_work_new(&t->s, TNB, TNS, &t->w, &err), GP_OK);
    t->np = gp_gwi_n_params(&t->s);
}

static void toy_free(toy *t)
{
    gp_gwi_work_free(t->w);
    gp_kernel_free(t->k);
}

/* theta (t->np) = gp_gwi_init on the toy's 50 points, plus `noise` N(0, 1)
 * times a stream of `seed` (0: none). */
static double *toy_theta(const toy *t, double noise, uint64_t seed)
{
    double *theta = dalloc(t->np);
    gp_error err;
    assert_int_equal(gp_gwi_init(&t->s, t->X, t->y, TN, 7, theta, &err), GP_OK);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; noise > 0.0 && i < t->np; i++)
        theta[i] += noise * gp_rng_normal(&rng);
    return theta;
}

static gp_gwi_terms toy_loss(const toy *t, const double *theta, double *grad)
{
    gp_gwi_terms terms;
    gp_error err;
    int rc = gp_gwi_loss(&t->s, t->w, theta, t->XB, t->yB, TNB, t->XS, TNS, &terms, grad, &err);
    if (rc != GP_OK)
        fail_msg("gwi loss: %s (%s)", err.message, gp_status_name(rc));
    return terms;
}

/* The lower Cholesky factor of Kzz^{-1}, Kzz = Lk Lk^T (the setup's jittered Kzz). */
static void chol_of_kzz_inverse(const toy *t, double *L)
{
    memcpy(L, t->Lk, TM * TM * sizeof *L);
    assert_int_equal(LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', TM, L, TM), 0); /* Kzz^{-1}, lower */
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', TM, L, TM), 0);
    for (size_t j = 1; j < TM; j++)
        memset(L + j * TM, 0, j * sizeof *L);
}

static const char *mean_label(gp_gwi_mean_kind k)
{
    return k == GP_GWI_MEAN_MLP ? "mlp" : "kernel_sum";
}

/* ---- T6: the prior as Q ---- */

static void test_t6_prior_has_zero_w2(void **state)
{
    (void)state;
    for (int mk = 0; mk < 2; mk++) {
        gp_gwi_mean_kind mean = mk ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
        double nonsym = NAN;
        for (int wk = 0; wk < 2; wk++) {
            toy t;
            toy_init(&t, mean, wk ? GP_GWI_W2_THESIS_NONSYM : GP_GWI_W2_BURES_SYM,
                     GP_GWI_OBJECTIVE_THESIS_W2SQ);
            double *theta = dalloc(t.np), L[TM * TM]; /* mean part 0: beta = 0, all weights 0 */
            chol_of_kzz_inverse(&t, L);
            gp_pack_lower(L, TM, TM, theta + gp_gwi_mean_size(&t.s));
            gp_gwi_terms terms = toy_loss(&t, theta, NULL);
            double kvar = exp(t.k->log_variance); /* tr K_SS / ns */
            if (wk == 0) {
                print_message("T6 %s bures_sym: w2sq = %.3g (tr K_SS / ns = %.3g)\n",
                              mean_label(mean), terms.w2sq, kvar);
                tu_assert_within(terms.w2sq, 0.0, 1e-8 * kvar, "T6 %s: bures_sym w2sq at Q = P",
                                 mean_label(mean));
            } else {
                /* at Q = P the eigenvalues of K_SB K_BS are the squared singular
                 * values of K_SB: the estimate is 2 k(x, x) - 2 |K_SB|_* / sqrt(nb ns) */
                nonsym = terms.w2sq;
                double *Ksb = dalloc(TNS * TNB), sv[TNS], sup[TNS];
                for (size_t b = 0; b < TNB; b++)
                    for (size_t a = 0; a < TNS; a++)
                        Ksb[a + b * TNS] = gp_kernel_eval(t.k, t.XS + a * TD, t.XB + b * TD, 0);
                assert_int_equal(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', TNS, TNB, Ksb, TNS,
                                                sv, NULL, 1, NULL, 1, sup),
                                 0);
                double nuclear = 0.0;
                for (size_t i = 0; i < TNS; i++)
                    nuclear += sv[i];
                double want = 2.0 * kvar - 2.0 * nuclear / sqrt((double)TNB * TNS);
                print_message("T6 %s thesis_nonsym: w2sq = %.17g (2 k - 2 |K_SB|_* / "
                              "sqrt(nb ns) = %.17g)\n",
                              mean_label(mean), nonsym, want);
                assert_true(isfinite(nonsym));
                tu_assert_close(nonsym, want, 1e-10, 1e-12, "T6 %s: thesis_nonsym at Q = P",
                                mean_label(mean));
                free(Ksb);
            }
            free(theta);
            toy_free(&t);
        }
    }
}

/* ---- T7: finite differences of the gradient ---- */

typedef struct fd_stats {
    double worst;
    size_t where;
} fd_stats;

/* Central differences of the loss over every entry of theta; returns the
 * largest |fd - g| / max(1e-6, |fd| + |g|). */
static fd_stats fd_check(const toy *t, double *theta)
{
    double *g = dalloc(t->np);
    toy_loss(t, theta, g);
    fd_stats st = {0.0, 0};
    for (size_t i = 0; i < t->np; i++) {
        double xi = theta[i], h = 1e-5 * fmax(1.0, fabs(xi));
        theta[i] = xi + h;
        double fp = toy_loss(t, theta, NULL).loss;
        theta[i] = xi - h;
        double fm = toy_loss(t, theta, NULL).loss;
        theta[i] = xi;
        double fd = (fp - fm) / (2.0 * h);
        double rel = fabs(fd - g[i]) / fmax(1e-6, fabs(fd) + fabs(g[i]));
        if (rel > st.worst) {
            st.worst = rel;
            st.where = i;
        }
    }
    free(g);
    return st;
}

static void test_t7_gradients(void **state)
{
    (void)state;
    static const char *w2_names[] = {"bures_sym", "thesis_nonsym"};
    static const char *obj_names[] = {"thesis_w2sq", "code_w"};
    for (int ln = 0; ln < 2; ln++) /* the noise a parameter too (its entry is theta's last) */
        for (int mk = 0; mk < 2; mk++)
            for (int wk = 0; wk < 2; wk++)
                for (int ok = 0; ok < 2; ok++) {
                    gp_gwi_mean_kind mean = mk ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
                    toy t;
                    toy_init(&t, mean, (gp_gwi_w2_kind)wk, (gp_gwi_objective_kind)ok);
                    t.s.learn_noise = ln;
                    t.np = gp_gwi_n_params(&t.s);
                    double *theta =
                        toy_theta(&t, 0.1, 100 + (uint64_t)(8 * ln + 4 * mk + 2 * wk + ok));
                    gp_gwi_terms terms = toy_loss(&t, theta, NULL);
                    fd_stats st = fd_check(&t, theta);
                    print_message("T7 %-10s %-13s %-11s noise %s: loss %.6g, w2sq %.4g, max rel "
                                  "err %.2e (theta[%zu] of %zu)\n",
                                  mean_label(mean), w2_names[wk], obj_names[ok],
                                  ln ? "learned" : "fixed", terms.loss, terms.w2sq, st.worst,
                                  st.where, t.np);
                    if (st.worst >= 1e-5)
                        fail_msg("T7 %s %s %s noise %d: relative error %.3g at theta[%zu]",
                                 mean_label(mean), w2_names[wk], obj_names[ok], ln, st.worst,
                                 st.where);
                    free(theta);
                    toy_free(&t);
                }
}

/* ---- bures_sym against a direct computation ---- */

/* R = r(XA, XB) (na x nb) = k(XA, XB) - K_AZ Kzz^{-1} K_ZB + K_AZ Sigma K_ZB
 * with Kzz^{-1} explicit (dpotrf/dpotri of k(Z, Z) + jitter I) and Sigma =
 * L L^T from theta. */
static void direct_r(const toy *t, const double *theta, const double *XA, size_t na,
                     const double *XB, size_t nb, double *R)
{
    double Kzz[TM * TM], Lf[TM * TM] = {0}, D[TM * TM];
    double *Kza = dalloc(TM * na), *Kzb = dalloc(TM * nb);
    gp_kernel_gram(t->k, t->Z, TM, Kzz, TM);
    for (size_t i = 0; i < TM; i++)
        Kzz[i * TM + i] += t->jitter;
    invert_spd(Kzz, TM);
    gp_unpack_lower(theta + gp_gwi_mean_size(&t->s), TM, Lf, TM);
    for (size_t i = 0; i < TM; i++)
        for (size_t j = 0; j < TM; j++) {
            double s = 0.0; /* Sigma_ij */
            for (size_t a = 0; a < TM; a++)
                s += Lf[i + a * TM] * Lf[j + a * TM];
            D[i + j * TM] = s - Kzz[i + j * TM];
        }
    for (size_t i = 0; i < TM; i++) {
        for (size_t j = 0; j < na; j++)
            Kza[i + j * TM] = gp_kernel_eval(t->k, t->Z + i * TD, XA + j * TD, 0);
        for (size_t j = 0; j < nb; j++)
            Kzb[i + j * TM] = gp_kernel_eval(t->k, t->Z + i * TD, XB + j * TD, 0);
    }
    for (size_t b = 0; b < nb; b++)
        for (size_t a = 0; a < na; a++) {
            double s = gp_kernel_eval(t->k, XA + a * TD, XB + b * TD, XA == XB && a == b);
            for (size_t i = 0; i < TM; i++)
                for (size_t j = 0; j < TM; j++)
                    s += Kza[i + a * TM] * D[i + j * TM] * Kzb[j + b * TM];
            R[a + b * na] = s;
        }
    free(Kza);
    free(Kzb);
}

static void test_bures_direct(void **state)
{
    (void)state;
    for (int mk = 0; mk < 2; mk++) {
        gp_gwi_mean_kind mean = mk ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
        toy t;
        toy_init(&t, mean, GP_GWI_W2_BURES_SYM, GP_GWI_OBJECTIVE_THESIS_W2SQ);
        double *theta = toy_theta(&t, 0.1, 200 + (uint64_t)mk);
        gp_gwi_terms terms = toy_loss(&t, theta, NULL);
        size_t ns = TNS;
        double *K = dalloc(ns * ns), *R = dalloc(ns * ns), *Kh = dalloc(ns * ns);
        double *T = dalloc(ns * ns), *M = dalloc(ns * ns), *Mh = dalloc(ns * ns);
        double mS[TNS];
        gp_error err;
        assert_int_equal(gp_gwi_latent(&t.s, t.w, theta, t.XS, ns, mS, NULL, &err), GP_OK);
        for (size_t b = 0; b < ns; b++)
            for (size_t a = 0; a < ns; a++)
                K[a + b * ns] = gp_kernel_eval(t.k, t.XS + a * TD, t.XS + b * TD, a == b);
        direct_r(&t, theta, t.XS, ns, t.XS, ns, R);
        sqrtm_db(K, ns, Kh);
        matmul(R, Kh, ns, T);
        matmul(Kh, T, ns, M);
        for (size_t j = 0; j < ns; j++) /* symmetrise the product */
            for (size_t i = 0; i < j; i++)
                M[i + j * ns] = M[j + i * ns] = 0.5 * (M[i + j * ns] + M[j + i * ns]);
        sqrtm_db(M, ns, Mh);
        double mm = 0.0, trK = 0.0, trR = 0.0, root = 0.0;
        for (size_t i = 0; i < ns; i++) {
            mm += mS[i] * mS[i];
            trK += K[i * ns + i];
            trR += R[i * ns + i];
            root += Mh[i * ns + i];
        }
        double want = (mm + trK + trR - 2.0 * root) / (double)ns;
        print_message("bures direct %s: w2sq %.17g, direct %.17g, rel diff %.2e\n",
                      mean_label(mean), terms.w2sq, want, fabs(terms.w2sq - want) / fabs(want));
        tu_assert_close(terms.w2sq, want, 1e-9, 0.0, "%s: bures_sym w2sq vs direct",
                        mean_label(mean));
        free(K), free(R), free(Kh), free(T), free(M), free(Mh), free(theta);
        toy_free(&t);
    }
}

/* thesis_nonsym against its formula: (1/nb) sum_b (m_b^2 + k_bb + r_bb)
 * - 2 / sqrt(nb ns) sum_s sqrt(max(Re lambda_s, 0)), lambda the eigenvalues
 * of r(S, B) k(B, S) with r from direct_r. */
static void test_nonsym_direct(void **state)
{
    (void)state;
    for (int mk = 0; mk < 2; mk++) {
        gp_gwi_mean_kind mean = mk ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
        toy t;
        toy_init(&t, mean, GP_GWI_W2_THESIS_NONSYM, GP_GWI_OBJECTIVE_THESIS_W2SQ);
        double *theta = toy_theta(&t, 0.1, 250 + (uint64_t)mk);
        gp_gwi_terms terms = toy_loss(&t, theta, NULL);
        double mB[TNB], *Rsb = dalloc(TNS * TNB), *Rbb = dalloc(TNB * TNB);
        double *A = dalloc(TNS * TNS), wr[TNS], wi[TNS];
        gp_error err;
        assert_int_equal(gp_gwi_latent(&t.s, t.w, theta, t.XB, TNB, mB, NULL, &err), GP_OK);
        direct_r(&t, theta, t.XS, TNS, t.XB, TNB, Rsb);
        direct_r(&t, theta, t.XB, TNB, t.XB, TNB, Rbb);
        for (size_t j = 0; j < TNS; j++)
            for (size_t i = 0; i < TNS; i++) {
                double s = 0.0;
                for (size_t b = 0; b < TNB; b++)
                    s += Rsb[i + b * TNS] * gp_kernel_eval(t.k, t.XB + b * TD, t.XS + j * TD, 0);
                A[i + j * TNS] = s;
            }
        assert_int_equal(LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'N', TNS, A, TNS, wr, wi, NULL, 1,
                                       NULL, 1),
                         0);
        double first = 0.0, roots = 0.0;
        for (size_t b = 0; b < TNB; b++)
            first += mB[b] * mB[b] + gp_kernel_eval(t.k, t.XB + b * TD, t.XB + b * TD, 1) +
                     Rbb[b * TNB + b];
        for (size_t i = 0; i < TNS; i++)
            roots += wr[i] > 0.0 ? sqrt(wr[i]) : 0.0;
        double want = first / TNB - 2.0 * roots / sqrt((double)TNB * TNS);
        print_message("nonsym direct %s: w2sq %.17g, direct %.17g, rel diff %.2e\n",
                      mean_label(mean), terms.w2sq, want, fabs(terms.w2sq - want) / fabs(want));
        tu_assert_close(terms.w2sq, want, 1e-9, 0.0, "%s: thesis_nonsym w2sq vs direct",
                        mean_label(mean));
        free(Rsb), free(Rbb), free(A), free(theta);
        toy_free(&t);
    }
}

/* ---- B3: the kernel_sum start is sgpr's posterior ---- */

static void test_init_is_sgpr(void **state)
{
    (void)state;
    toy t;
    toy_init(&t, GP_GWI_MEAN_KERNEL_SUM, GP_GWI_W2_BURES_SYM, GP_GWI_OBJECTIVE_THESIS_W2SQ);
    gp_inducing_post post;
    gp_sgpr_terms st;
    gp_error err;
    assert_int_equal(gp_sgpr_bound(t.k, t.s.s2, t.X, TN, TD, t.y, t.Z, TM, &st, NULL, NULL,
                                   &post, &err),
                     GP_OK);
    /* the same jittered Kzz on both sides */
    tu_assert_close_array(post.L, t.Lk, TM * TM, 0.0, 0.0, "sgpr's L vs kuu_factor's");
    double *theta = toy_theta(&t, 0.0, 0);
    enum { NT = 15 };
    double Xt[NT * TD], yt[NT], mean[NT], var[NT];
    tu_random_problem(NT, TD, 19, Xt, yt);
    assert_int_equal(gp_gwi_latent(&t.s, t.w, theta, Xt, NT, mean, var, &err), GP_OK);
    double worst_m = 0.0, worst_v = 0.0;
    for (size_t j = 0; j < NT; j++) {
        double aw[TM], Caw[TM];
        for (size_t i = 0; i < TM; i++)
            aw[i] = gp_kernel_eval(t.k, t.Z + i * TD, Xt + j * TD, 0);
        gp_trsm_lower(post.L, TM, TM, 0, aw, 1, TM);
        double m = 0.0, v = gp_kernel_eval(t.k, Xt + j * TD, Xt + j * TD, 1);
        for (size_t i = 0; i < TM; i++) {
            m += aw[i] * post.mt[i];
            v -= aw[i] * aw[i];
            Caw[i] = 0.0;
            for (size_t a = 0; a < TM; a++)
                Caw[i] += post.C[i + a * TM] * aw[a];
        }
        for (size_t i = 0; i < TM; i++)
            v += aw[i] * Caw[i];
        worst_m = fmax(worst_m, fabs(mean[j] - m) / fmax(1.0, fabs(m)));
        worst_v = fmax(worst_v, fabs(var[j] - v) / fmax(1e-3, fabs(v)));
        tu_assert_close(mean[j], m, 1e-9, 1e-9, "init mean vs sgpr at point %zu", j);
        tu_assert_close(var[j], v, 1e-9, 1e-12, "init latent variance vs sgpr at point %zu", j);
    }
    print_message("init vs sgpr: max rel diff mean %.2e, variance %.2e\n", worst_m, worst_v);
    gp_inducing_post_free(&post);
    free(theta);
    toy_free(&t);
}

/* ---- the mlp mean by hand ---- */

static void test_mlp_mean_by_hand(void **state)
{
    (void)state;
    toy t;
    toy_init(&t, GP_GWI_MEAN_MLP, GP_GWI_W2_BURES_SYM, GP_GWI_OBJECTIVE_THESIS_W2SQ);
    double *theta = toy_theta(&t, 0.5, 300); /* random weights and biases, all nonzero */
    const size_t h = THIDDEN, d = TD;
    const double *W1 = theta, *b1 = W1 + h * d, *W2 = b1 + h, *b2 = W2 + h * h, *W3 = b2 + h,
                 *b3 = W3 + h;
    assert_int_equal((size_t)(b3 + 1 - theta), gp_gwi_mean_size(&t.s));
    enum { NP = 9 };
    double Xp[NP * TD], yp[NP], mean[NP];
    tu_random_problem(NP, TD, 21, Xp, yp);
    gp_error err;
    assert_int_equal(gp_gwi_latent(&t.s, t.w, theta, Xp, NP, mean, NULL, &err), GP_OK);
    double worst = 0.0;
    for (size_t p = 0; p < NP; p++) {
        const double *x = Xp + p * d;
        double h1[THIDDEN], h2[THIDDEN], f = b3[0];
        for (size_t i = 0; i < h; i++) {
            double a = b1[i];
            for (size_t j = 0; j < d; j++)
                a += W1[i + j * h] * x[j];
            h1[i] = tanh(a);
        }
        for (size_t i = 0; i < h; i++) {
            double a = b2[i];
            for (size_t j = 0; j < h; j++)
                a += W2[i + j * h] * h1[j];
            h2[i] = tanh(a);
        }
        for (size_t i = 0; i < h; i++)
            f += W3[i] * h2[i];
        worst = fmax(worst, fabs(mean[p] - f));
        tu_assert_close(mean[p], f, 1e-13, 1e-14, "mlp mean at point %zu", p);
    }
    print_message("mlp mean by hand: max |diff| %.2e\n", worst);
    free(theta);
    toy_free(&t);
}

/* ---- the method ---- */

enum { FN = 120, FD = 2 };

static const gp_method *gwi(void)
{
    const gp_method *m = gp_method_find("gwi");
    if (m == NULL)
        fail_msg("method 'gwi' is not registered");
    return m;
}

/* A fit's data and options: 120 seeded points, 10 inducing, 30 epochs. */
typedef struct fit_case {
    double X[FN * FD], y[FN];
    gp_option_value o[12];
    size_t no;
} fit_case;

static void case_init(fit_case *c, const char *mean)
{
    memset(c, 0, sizeof *c);
    tu_random_problem_colmajor(FN, FD, 41, c->X, c->y);
    gp_option_value base[] = {{"inducing", 10, NULL, NULL},     {"epochs", 30, NULL, NULL},
                              {"batch", 32, NULL, NULL},        {"w2_points", 16, NULL, NULL},
                              {"mean", 0, mean, NULL},          {"hidden", 4, NULL, NULL},
                              {"learning_rate", 0.02, NULL, NULL}};
    c->no = sizeof base / sizeof base[0];
    memcpy(c->o, base, sizeof base);
}

/* Set (or add) a numeric option. */
static void case_set(fit_case *c, const char *name, double value)
{
    for (size_t i = 0; i < c->no; i++)
        if (strcmp(c->o[i].name, name) == 0) {
            c->o[i].number = value;
            return;
        }
    assert_true(c->no < sizeof c->o / sizeof c->o[0]);
    c->o[c->no++] = (gp_option_value){name, value, NULL, NULL};
}

static gp_model *case_fit(const fit_case *c, const char *what)
{
    gp_kernel *k = rbf_ard(FD);
    gp_fit_request req;
    fit_request(&req, c->X, c->y, FN, FD, k, c->o, c->no);
    req.seed = 5;
    gp_model *model = fit_ok(gwi(), &req, what);
    gp_kernel_free(k);
    return model;
}

static double info_number(const gp_model *model, const char *key)
{
    const gp_info_item *it = find_info(model, key);
    if (it == NULL)
        fail_msg("info '%s' missing", key);
    return it->number;
}

static void export_ok(const gp_model *model, gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    if (gp_model_export(model, st, &err) != GP_OK)
        fail_msg("export: %s", err.message);
}

/* Test points (column-major, NQ x FD). */
enum { NQ = 11, NSAMP = 5 };
static void query_points(double *Xq)
{
    for (size_t i = 0; i < NQ; i++) {
        Xq[i] = -2.0 + 0.4 * (double)i;
        Xq[NQ + i] = 1.5 - 0.3 * (double)i;
    }
}

static void samples_ok(const gp_model *model, const double *Xq, double *out)
{
    gp_sample_request sr = {.X = Xq, .m = NQ, .d = FD, .n_samples = NSAMP, .seed = 9,
                            .include_noise = 0};
    gp_error err;
    if (gp_model_sample(model, &sr, out, &err) != GP_OK)
        fail_msg("sample: %s", err.message);
}

/* (a) epochs 0: the model is the start B3, rebuilt here from the model's
 * frozen prior, its standardisation and the exported Z and Kzz factor
 * (validation_fraction 0, so every row trains, in order). */
/* 30 inducing points: with 10 or 20 and prior "inducing" (the exact ML of
 * the M inducing targets) the start's alpha on the training rows was above
 * GP_GWI_TEMPER_MAX (6.6, 9.9 unclipped), and the clip would hide it. */
enum { INDUCING0 = 30 };

static void test_fit_epochs0_is_start(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "kernel_sum");
    case_set(&c, "epochs", 0);
    case_set(&c, "validation_fraction", 0);
    case_set(&c, "inducing", INDUCING0);
    case_set(&c, "learn_noise", 0); /* the start's noise, bit for bit */
    gp_model *model = case_fit(&c, "gwi epochs 0");
    assert_int_equal((int)info_number(model, "best_epoch"), 0);
    assert_int_equal((int)info_number(model, "epochs_run"), 0);
    double alpha = info_number(model, "temper");
    assert_true(alpha >= GP_GWI_TEMPER_MIN && alpha <= GP_GWI_TEMPER_MAX);
    gp_state st;
    export_ok(model, &st);
    const gp_named_array *za = gp_state_find(&st, "Z"), *la = gp_state_find(&st, "chol_kuu_packed"),
                         *pa = gp_state_find(&st, "params");
    assert_non_null(za);
    assert_non_null(la);
    assert_non_null(pa);
    size_t m = za->cols;
    assert_int_equal(m, INDUCING0);
    double *Lk = dalloc(m * m), *P = dalloc(FN * FD), *t = dalloc(FN);
    gp_unpack_lower(la->data, m, Lk, m);
    gp_model_standardize_points(model, c.X, FN, P);
    gp_model_working_targets(model, c.y, FN, t);
    gp_gwi_setup s = {.k = model->kernel, .s2 = model->noise_variance, .Z = za->data, .m = m,
                      .d = FD, .Lk = Lk, .mean = GP_GWI_MEAN_KERNEL_SUM, .hidden = 4,
                      .w2 = GP_GWI_W2_BURES_SYM, .objective = GP_GWI_OBJECTIVE_THESIS_W2SQ,
                      .n_total = FN};
    size_t np = gp_gwi_n_params(&s);
    assert_int_equal(pa->rows * pa->cols, np);
    double *theta = dalloc(np);
    gp_error err;
    gp_blas_serial_begin(); /* as the fit: the same BLAS paths, the same bits */
    int rc = gp_gwi_init(&s, P, t, FN, 1, theta, &err);
    gp_blas_serial_end();
    assert_int_equal(rc, GP_OK);
    tu_assert_close_array(pa->data, theta, np, 0.0, 0.0, "exported params vs the start");
    /* the predictive mean is the start's latent mean, in original units */
    double Xq[NQ * FD], Pq[NQ * FD], lat[NQ], mu[NQ], var[NQ];
    query_points(Xq);
    gp_model_standardize_points(model, Xq, NQ, Pq);
    gp_gwi_work *w = NULL;
    assert_int_equal(gp_gwi_work_new(&s, 16, 4, &w, &err), GP_OK);
    assert_int_equal(gp_gwi_latent(&s, w, theta, Pq, NQ, lat, NULL, &err), GP_OK);
    predict_ok(model, Xq, NQ, FD, 0, mu, var, NULL);
    for (size_t i = 0; i < NQ; i++)
        tu_assert_close(mu[i], model->y_mean + model->y_scale * lat[i], 1e-10,
                        1e-10 * model->y_scale, "epochs 0 mean at query %zu", i);
    /* B5 on the training rows (they validate): alpha = mean (y - m)^2 / (r + s2) */
    double *tm = dalloc(FN), *tv = dalloc(FN), a = 0.0;
    assert_int_equal(gp_gwi_latent(&s, w, theta, P, FN, tm, tv, &err), GP_OK);
    for (size_t i = 0; i < FN; i++)
        a += (t[i] - tm[i]) * (t[i] - tm[i]) / (fmax(tv[i], 0.0) + s.s2);
    a /= FN;
    print_message("epochs 0: temper %.17g, recomputed %.17g (unclipped; s2 %.3g)\n", alpha, a,
                  s.s2);
    a = fmin(fmax(a, GP_GWI_TEMPER_MIN), GP_GWI_TEMPER_MAX);
    tu_assert_close(alpha, a, 1e-10, 0.0, "epochs 0: the tempering factor");
    free(tm), free(tv);
    gp_gwi_work_free(w);
    free(Lk), free(P), free(t), free(theta);
    gp_state_free(&st);
    gp_model_free(model);
}

/* (b) export / import: bit-identical predictions and draws. */
static void check_round_trip(const char *mean)
{
    fit_case c;
    case_init(&c, mean);
    gp_model *model = case_fit(&c, mean);
    gp_state st;
    export_ok(model, &st);
    gp_model *copy = NULL;
    gp_error err;
    if (gp_model_import(gwi(), &st, &copy, &err) != GP_OK)
        fail_msg("%s import: %s (field '%s')", mean, err.message, err.field);
    double Xq[NQ * FD], mu1[NQ], v1[NQ], c1[NQ * NQ], mu2[NQ], v2[NQ], c2[NQ * NQ];
    double s1[NQ * NSAMP], s2[NQ * NSAMP];
    query_points(Xq);
    predict_ok(model, Xq, NQ, FD, 1, mu1, v1, c1);
    predict_ok(copy, Xq, NQ, FD, 1, mu2, v2, c2);
    assert_memory_equal(mu1, mu2, sizeof mu1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(c1, c2, sizeof c1);
    samples_ok(model, Xq, s1);
    samples_ok(copy, Xq, s2);
    assert_memory_equal(s1, s2, sizeof s1);
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
}

static void test_fit_export_import(void **state)
{
    (void)state;
    check_round_trip("kernel_sum");
    check_round_trip("mlp");
}

/* (c) temper false: the same fit with alpha = 1; every variance of the
 * tempered model is alpha times the untempered one, the means equal. */
static void test_fit_temper(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "kernel_sum");
    gp_model *on = case_fit(&c, "temper on");
    case_set(&c, "temper", 0);
    gp_model *off = case_fit(&c, "temper off");
    double alpha = info_number(on, "temper");
    assert_true(alpha >= GP_GWI_TEMPER_MIN && alpha <= GP_GWI_TEMPER_MAX);
    assert_true(info_number(off, "temper") == 1.0);
    print_message("temper: alpha = %.6g\n", alpha);
    double Xq[NQ * FD], m1[NQ], v1[NQ], m0[NQ], v0[NQ];
    query_points(Xq);
    for (int noise = 0; noise < 2; noise++) {
        predict_ok(on, Xq, NQ, FD, noise, m1, v1, NULL);
        predict_ok(off, Xq, NQ, FD, noise, m0, v0, NULL);
        assert_memory_equal(m1, m0, sizeof m1);
        for (size_t i = 0; i < NQ; i++)
            tu_assert_close(v1[i], alpha * v0[i], 1e-12, 0.0,
                            "tempered variance (include_noise %d) at query %zu", noise, i);
    }
    gp_model_free(on);
    gp_model_free(off);
    /* 6 validation rows (5 % of 120): too few to estimate alpha, which stays 1 */
    case_set(&c, "temper", 1);
    case_set(&c, "validation_fraction", 0.05);
    gp_model *few = case_fit(&c, "temper on, 6 validation rows");
    assert_true(info_number(few, "validation_rows") < GP_GWI_TEMPER_MIN_ROWS);
    assert_true(info_number(few, "temper") == 1.0);
    gp_model_free(few);
}

/* Fits of 1, 2 and 3 rows with the most validation allowed: at least one
 * row always trains (no validation rows below 3), and the fit predicts. */
static void test_fit_tiny(void **state)
{
    (void)state;
    const char *means[] = {"kernel_sum", "mlp"};
    for (size_t n = 1; n <= 3; n++)
        for (size_t k = 0; k < 2; k++) {
            fit_case c;
            case_init(&c, means[k]);
            case_set(&c, "validation_fraction", 0.5);
            case_set(&c, "inducing", 0);
            gp_kernel *kern = rbf_ard(FD);
            gp_fit_request req;
            memset(&req, 0, sizeof req);
            double X[3 * FD];
            for (size_t j = 0; j < FD; j++)
                for (size_t i = 0; i < n; i++)
                    X[j * n + i] = c.X[j * FN + i];
            req.X = X, req.y = c.y, req.n = n, req.d = FD, req.kernel = kern;
            req.standardize = 1, req.seed = 3, req.options = c.o, req.n_options = c.no;
            gp_model *model = NULL;
            gp_error err;
            if (gp_model_fit(gwi(), &req, &model, &err) != GP_OK)
                fail_msg("%s fit of %zu rows: %s", means[k], n, err.message);
            assert_true(info_number(model, "train_rows") >= 1.0);
            assert_true(info_number(model, "validation_rows") == (n < 3 ? 0.0 : 1.0));
            double m1[NQ], v1[NQ], Xq[NQ * FD];
            query_points(Xq);
            predict_ok(model, Xq, NQ, FD, 1, m1, v1, NULL);
            for (size_t i = 0; i < NQ; i++)
                assert_true(isfinite(m1[i]) && v1[i] > 0.0);
            gp_model_free(model);
            gp_kernel_free(kern);
        }
}

/* The mlp mean is per point (gwi is batch_invariant, core/model/method.h):
 * NQ points in one call, in calls of 2 and 4, and each alone give the same
 * bits, with 1 and 2 threads. */
static void test_mlp_batch_invariant(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "mlp");
    case_set(&c, "hidden", 13); /* odd: rows of the layers off any vector width */
    gp_model *model = case_fit(&c, "mlp, 13 hidden");
    double Xq[NQ * FD], mu[NQ], var[NQ];
    query_points(Xq);
    predict_ok(model, Xq, NQ, FD, 1, mu, var, NULL);
    for (int t = 1; t <= 2; t++) {
        gp_parallel_set_threads(t);
        for (size_t g = 1; g <= 4; g *= 2)
            for (size_t c0 = 0; c0 < NQ; c0 += g) {
                size_t n = NQ - c0 < g ? NQ - c0 : g;
                double Xg[4 * FD], m1[4], v1[4];
                for (size_t j = 0; j < FD; j++)
                    memcpy(Xg + j * n, Xq + j * NQ + c0, n * sizeof(double));
                predict_ok(model, Xg, n, FD, 1, m1, v1, NULL);
                assert_memory_equal(m1, mu + c0, n * sizeof(double));
                assert_memory_equal(v1, var + c0, n * sizeof(double));
            }
    }
    gp_parallel_set_threads(0);
    gp_model_free(model);
}

/* inducing_selection greedy: sgpr's choice with prior sgpr; refused with
 * prior inducing (whose fit needs the points' own targets), naming it. */
static void test_fit_greedy(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "kernel_sum");
    c.o[c.no++] = (gp_option_value){"inducing_selection", NAN, "greedy", NULL};
    gp_model *model = case_fit(&c, "greedy selection");
    assert_int_equal((int)info_number(model, "inducing"), 10);
    gp_model_free(model);
    c.o[c.no++] = (gp_option_value){"prior", NAN, "inducing", NULL};
    gp_kernel *k = rbf_ard(FD);
    gp_fit_request req;
    fit_request(&req, c.X, c.y, FN, FD, k, c.o, c.no);
    gp_error err;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_fit(gwi(), &req, &bad, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.inducing_selection");
    assert_null(bad);
    gp_kernel_free(k);
}

/* (d) the same seed: bit-identical parameters and predictions (every
 * exported number but diagnostics[5], the fit's wall-clock seconds). */
static void test_fit_replay(void **state)
{
    (void)state;
    const char *means[] = {"kernel_sum", "mlp"};
    for (size_t k = 0; k < 2; k++) {
        fit_case c;
        case_init(&c, means[k]);
        gp_model *a = case_fit(&c, "first"), *b = case_fit(&c, "second");
        gp_state sa, sb;
        export_ok(a, &sa);
        export_ok(b, &sb);
        assert_int_equal(sa.count, sb.count);
        for (size_t i = 0; i < sa.count; i++) {
            assert_string_equal(sa.arrays[i].name, sb.arrays[i].name);
            assert_int_equal(sa.arrays[i].rows * sa.arrays[i].cols,
                             sb.arrays[i].rows * sb.arrays[i].cols);
            size_t cnt = sa.arrays[i].rows * sa.arrays[i].cols;
            int diag = strcmp(sa.arrays[i].name, "diagnostics") == 0;
            for (size_t j = 0; j < cnt; j++)
                if (!(diag && j == 5) &&
                    memcmp(&sa.arrays[i].data[j], &sb.arrays[i].data[j], sizeof(double)) != 0)
                    fail_msg("%s: replayed fit differs in %s[%zu]: %.17g vs %.17g", means[k],
                             sa.arrays[i].name, j, sa.arrays[i].data[j], sb.arrays[i].data[j]);
        }
        double Xq[NQ * FD], m1[NQ], v1[NQ], m2[NQ], v2[NQ];
        query_points(Xq);
        predict_ok(a, Xq, NQ, FD, 1, m1, v1, NULL);
        predict_ok(b, Xq, NQ, FD, 1, m2, v2, NULL);
        assert_memory_equal(m1, m2, sizeof m1);
        assert_memory_equal(v1, v2, sizeof v1);
        gp_state_free(&sa);
        gp_state_free(&sb);
        gp_model_free(a);
        gp_model_free(b);
    }
}

/* (e) refused imports, each on a fresh export. */
static gp_named_array *state_array(gp_state *st, const char *name)
{
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->arrays[i].name, name) == 0)
            return &st->arrays[i];
    fail_msg("state has no array '%s'", name);
    return NULL;
}

static void expect_refused(const gp_model *model, int edit, const char *field)
{
    gp_state st;
    export_ok(model, &st);
    if (edit == 0)
        state_array(&st, "temper")->data[0] = 5.0;
    else if (edit == 1)
        state_array(&st, "params")->rows -= 1;
    else
        state_array(&st, "params")->data[2] = NAN;
    gp_model *bad = NULL;
    gp_error err;
    assert_int_equal(gp_model_import(gwi(), &st, &bad, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_null(bad);
    gp_state_free(&st);
}

static void test_bad_imports(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "mlp");
    case_set(&c, "epochs", 2);
    gp_model *model = case_fit(&c, "mlp");
    expect_refused(model, 0, "temper");
    expect_refused(model, 1, "params");
    expect_refused(model, 2, "params");
    gp_model_free(model);
}

/* (f) refused options. */
static void test_bad_options(void **state)
{
    (void)state;
    struct {
        gp_option_value o;
        const char *field;
    } bad[] = {
        {{"mean", 0, "foo", NULL}, "options.mean"},
        {{"hidden", 0, NULL, NULL}, "options.hidden"},
        {{"validation_fraction", 0.9, NULL, NULL}, "options.validation_fraction"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_error err;
        assert_int_equal(gp_options_validate(gwi(), &bad[i].o, 1, &err), GP_EINVAL);
        assert_string_equal(err.field, bad[i].field);
    }
    gp_option_value good[] = {{"mean", 0, "mlp", NULL}, {"hidden", 1, NULL, NULL},
                              {"validation_fraction", 0.5, NULL, NULL}};
    gp_error err;
    assert_int_equal(gp_options_validate(gwi(), good, 3, &err), GP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t6_prior_has_zero_w2),
        cmocka_unit_test(test_t7_gradients),
        cmocka_unit_test(test_bures_direct),
        cmocka_unit_test(test_nonsym_direct),
        cmocka_unit_test(test_init_is_sgpr),
        cmocka_unit_test(test_mlp_mean_by_hand),
        cmocka_unit_test(test_mlp_batch_invariant),
        cmocka_unit_test(test_fit_epochs0_is_start),
        cmocka_unit_test(test_fit_export_import),
        cmocka_unit_test(test_fit_temper),
        cmocka_unit_test(test_fit_replay),
        cmocka_unit_test(test_fit_tiny),
        cmocka_unit_test(test_fit_greedy),
        cmocka_unit_test(test_bad_imports),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
