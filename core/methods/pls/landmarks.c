/* pls: landmarks, the eigenbasis of K_ZZ and the features (§5.2 A2-A3). */
#include "core/methods/pls/landmarks.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/select.h"
#include "core/linalg/linalg.h"
#include "core/methods/pls/laplace.h"
#include "core/methods/pls/model.h"

/* ---- A2-A3: landmarks, eigenbasis, features ---- */

/* Eigenpairs of K_ZZ / M, descending, kept while lambda > tol lambda_1 and
 * > 0 (pitfall P25): V (M x M on entry) keeps its first *mk columns. */
static int eigenbasis(const gp_kernel *k, const double *Z, size_t M, double tol, double *V,
                      double *lam, size_t *mk, gp_error *err)
{
    gp_kernel_gram(k, Z, M, V, M);
    for (size_t i = 0; i < M * M; i++)
        V[i] /= (double)M;
    double *w = gp_alloc_doubles(M, err), *tmp = gp_alloc_doubles(M, err);
    if (w == NULL || tmp == NULL) {
        free(w);
        free(tmp);
        return GP_ENOMEM;
    }
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)M, V, (lapack_int)M, w);
    if (info != 0) {
        free(w);
        free(tmp);
        return gp_error_set(err, GP_ENOTPD, NULL, "the eigendecomposition of K_ZZ failed (%d)",
                            (int)info);
    }
    for (size_t i = 0; i < M / 2; i++) { /* ascending -> descending */
        size_t j = M - 1 - i;
        double t = w[i];
        w[i] = w[j];
        w[j] = t;
        memcpy(tmp, V + i * M, M * sizeof *V);
        memcpy(V + i * M, V + j * M, M * sizeof *V);
        memcpy(V + j * M, tmp, M * sizeof *V);
    }
    size_t kept = 0;
    while (kept < M && w[kept] > 0.0 && w[kept] > tol * w[0])
        kept++;
    memcpy(lam, w, kept * sizeof *w);
    free(w);
    free(tmp);
    if (kept == 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "K_ZZ has no positive eigenvalue");
    *mk = kept;
    return GP_OK;
}

/* Phi_X (mk x n) by blocks of points. */
static int train_features(const gp_kernel *k, const pls_impl *im, const double *Xt, size_t n,
                          double *Phi, gp_error *err)
{
    size_t blk = n < FEATURE_BLOCK ? n : FEATURE_BLOCK;
    double *K = gp_alloc_doubles(im->M * blk, err);
    if (K == NULL)
        return GP_ENOMEM;
    for (size_t s = 0; s < n; s += blk) {
        size_t b = n - s < blk ? n - s : blk;
        pls_features(k, im, Xt + s * im->d, b, K, Phi + s * im->mk);
    }
    free(K);
    return GP_OK;
}

/* [D] k-means centres moved to their nearest training inputs, distinct
 * (each centre in turn takes the nearest input not taken yet). Landmarks
 * that are data points keep the values of discrete inputs, on which A1 can
 * fit a vanishing lengthscale (doctor_visits: 1e-25 on a count column): a
 * centre between two such values is uncorrelated with every point, and the
 * basis collapsed to the prior on whole test splits (test log likelihood
 * -1.05 against -0.61). X and Z are point-major (d x n, d x m). */
static int snap_to_data(const double *X, size_t n, size_t d, double *Z, size_t m,
                        gp_error *err)
{
    unsigned char *taken = calloc(n ? n : 1, 1);
    if (taken == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < m; j++) {
        size_t best = n;
        double best_d = INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (taken[i])
                continue;
            double s = 0.0;
            for (size_t k = 0; k < d; k++) {
                double t = X[i * d + k] - Z[j * d + k];
                s += t * t;
            }
            if (s < best_d) {
                best_d = s;
                best = i;
            }
        }
        if (best == n)
            break; /* m <= n: not reached */
        taken[best] = 1;
        memcpy(Z + j * d, X + best * d, d * sizeof *Z);
    }
    free(taken);
    return GP_OK;
}

/* A2-A3: landmarks (greedy under the fitted kernel, or k-means snapped to
 * the data / random, seeded by the fit seed), the eigenbasis, Phi_X. */
int pls_build_basis(gp_model *model, const pls_settings *set, fit_data *D, pls_impl **out,
                    gp_error *err)
{
    uint64_t seed = D->seed;
    size_t M = set->M, m = 0, d = D->d, mk = 0;
    double *Z = gp_alloc_doubles(d * M, err), *V = gp_alloc_doubles(M * M, err),
           *lam = gp_alloc_doubles(M, err);
    int rc = Z && V && lam ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_inducing_select((gp_inducing_selection)set->selection, model->kernel, D->Xt,
                                D->n, d, M, seed, Z, &m, err);
    if (rc == GP_OK && set->selection == GP_INDUCING_KMEANS)
        rc = snap_to_data(D->Xt, D->n, d, Z, m, err);
    if (rc == GP_OK)
        rc = eigenbasis(model->kernel, Z, m, set->eig_tol, V, lam, &mk, err);
    pls_impl *im = NULL;
    if (rc == GP_OK) {
        im = pls_impl_alloc(d, m, mk, set->sampler == SAMPLER_CLOSED ? 0 : set->J, err);
        rc = im ? GP_OK : GP_ENOMEM;
    }
    if (rc == GP_OK) {
        im->rmode = set->rmode;
        memcpy(im->Z, Z, d * m * sizeof *Z);
        memcpy(im->V, V, m * mk * sizeof *V);
        memcpy(im->lam, lam, mk * sizeof *lam);
        rc = pls_impl_derive(im, model->kernel, err);
    }
    if (rc == GP_OK) {
        size_t cnt = 0;
        rc = gp_checked_size(mk, D->n, &cnt, err);
        if (rc == GP_OK && (D->Phi = gp_alloc_doubles(cnt, err)) == NULL)
            rc = GP_ENOMEM;
        if (rc == GP_OK)
            rc = train_features(model->kernel, im, D->Xt, D->n, D->Phi, err);
    }
    free(Z);
    free(V);
    free(lam);
    if (rc) {
        pls_impl_free(im);
        return rc;
    }
    *out = im;
    return GP_OK;
}

/* The [D] amplitude (pls_laplace_amplitude) on the first basis, then landmarks,
 * eigenbasis and features again under the rescaled kernel (the greedy
 * order is scale-free; the features are rebuilt rather than rescaled so a
 * refit from the stored kernel gives the same numbers). */
int pls_amplitude_rebuild(gp_model *model, const pls_settings *set, const gp_lik *lik,
                          fit_data *D, pls_impl **im, double *log_c, gp_error *err)
{
    newton_ws w;
    double *a = gp_alloc_doubles((*im)->mk, err);
    int rc = a ? pls_newton_alloc(&w, lik, D->Phi, D->y, D->n, (*im)->mk, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        w.off = D->off;
        rc = pls_laplace_amplitude(&w, (*im)->rmode, a, log_c);
        pls_newton_free(&w);
    }
    free(a);
    if (rc)
        return rc;
    model->kernel->log_variance += *log_c;
    pls_impl_free(*im);
    *im = NULL;
    free(D->Phi);
    D->Phi = NULL;
    return pls_build_basis(model, set, D, im, err);
}
