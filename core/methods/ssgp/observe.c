/* Observe of method "ssgp": new rows update the weight posterior. */
#include "core/methods/ssgp/observe.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/ssgp/internal.h"
#include "core/methods/ssgp/model.h"

/* ---- observe ----
 *
 * The weight posterior depends on the rows only through A = Phi^T Phi + s I
 * and Phi^T y: new rows add their features' outer products to A (through
 * its factor L) and their terms to Phi^T y, with the frequencies, the
 * hyperparameters, the standardisation and the jitter of the fit. */

/* What a path does with the features (b x m) of one block of rows. */
typedef void (*rows_fn)(void *ctx, const double *Phi, size_t b);

/* phi_y += Phi^T yw over n rows of X (original units), taken in blocks of
 * `block` rows; returns yw^T yw. Phi (block x m) and Xw (block x d) are
 * scratch; `use` (when not NULL) gets each block's features. */
static double add_rows(const gp_model *model, const ssgp_impl *im, const double *X,
                       const double *yw, const double *wt, size_t n, size_t block, double *Phi,
                       double *Xw, double *phi_y, rows_fn use, void *ctx)
{
    double ysq = 0.0;
    for (size_t start = 0; start < n; start += block) {
        size_t b = n - start < block ? n - start : block;
        ssgp_test_features(model, im, X, n, start, b, Xw, Phi);
        for (size_t j = 0; wt && j < im->m; j++) /* rows weighted as the fit's */
            for (size_t i = 0; i < b; i++)
                Phi[j * b + i] *= wt[start + i];
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)b, (blasint)im->m, 1.0, Phi, (blasint)b,
                    yw + start, 1, 1.0, phi_y, 1);
        ysq += cblas_ddot((blasint)b, yw + start, 1, yw + start, 1);
        if (use)
            use(ctx, Phi, b);
    }
    return ysq;
}

/* Known noise rw (n, working units) as the row weights sqrt(d_i), d_i =
 * s / (s + rw_i), into wt; y (n) weighted in place; returns sum log d_i. */
static double weigh_rows(double s, const double *rw, size_t n, double *wt, double *y)
{
    double log_d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double di = s / (s + rw[i]);
        wt[i] = sqrt(di);
        y[i] *= wt[i];
        log_d += log(di);
    }
    return log_d;
}

/* Phi^T y and y^T y of the fit's rows at the fitted hyperparameters (X
 * original units, yw working targets, rw their known noise or NULL),
 * computed again from the rows rather than as A alpha, which would carry
 * alpha's error times cond(A). */
int ssgp_cache_targets(const gp_model *model, ssgp_impl *im, const double *X,
                       const double *yw, const double *rw, size_t n, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, n);
    double *Phi = gp_alloc_doubles(block * im->m, err), *Xw = gp_alloc_doubles(block * im->d, err);
    double *wt = rw ? gp_alloc_doubles(n, err) : NULL, *yt = rw ? gp_alloc_doubles(n, err) : NULL;
    int rc = Phi && Xw && (!rw || (wt && yt)) ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        im->log_d = 0.0;
        if (rw) {
            memcpy(yt, yw, n * sizeof *yt);
            im->log_d = weigh_rows(model->noise_variance, rw, n, wt, yt);
        }
        memset(im->phi_y, 0, im->m * sizeof *im->phi_y);
        im->y_sq = add_rows(model, im, X, rw ? yt : yw, wt, n, block, Phi, Xw, im->phi_y, NULL,
                            NULL);
    }
    free(Phi);
    free(Xw);
    free(wt);
    free(yt);
    return rc;
}

/* Batches of at least this many rows re-factorise A = L L^T + Phi_k^T Phi_k
 * (two dsyrk and one Cholesky factorisation, O(m^3) at level 3) instead of
 * applying k Givens rank-one updates to L (O(k m^2) at level 1). Measured on
 * one thread (the reference machine's OpenBLAS): the two cost the same at
 * k = 48 for m = 200 (0.37 ms) and at k = 200 or so for m = 800 (19 ms),
 * i.e. at k = m / 4. */
static size_t refactor_rows(size_t m)
{
    return m / 4 > 8 ? m / 4 : 8;
}

/* The Givens path: each block's feature rows, as columns of T (m x b), go
 * into L one rank-one update at a time. */
typedef struct givens_ctx {
    double *L, *T;
    size_t m;
} givens_ctx;

static void givens_rows(void *ctx, const double *Phi, size_t b)
{
    givens_ctx *g = ctx;
    for (size_t j = 0; j < g->m; j++)
        for (size_t i = 0; i < b; i++)
            g->T[i * g->m + j] = Phi[j * b + i];
    gp_chol_update(g->L, g->m, g->m, g->T, b, g->m);
}

/* The re-factorisation path: A += Phi^T Phi (lower). */
typedef struct gram_ctx {
    double *A;
    size_t m;
} gram_ctx;

static void gram_rows(void *ctx, const double *Phi, size_t b)
{
    gram_ctx *g = ctx;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)g->m, (blasint)b, 1.0, Phi,
                (blasint)b, 1.0, g->A, (blasint)g->m);
}

/* The LML of the model's rows from A's factor, alpha, Phi^T y and y^T y:
 * q = y^T y - b^T alpha - jitter ||alpha||^2 equals the fit's
 * ||y - Phi alpha||^2 + s ||alpha||^2 (gp_rff_lml). Left as it was when y^T y
 * is not known. */
static void update_objective(gp_model *model, const ssgp_impl *im)
{
    if (!isfinite(im->y_sq))
        return;
    blasint m = (blasint)im->m;
    double s = model->noise_variance, n = (double)model->n_train;
    double q = im->y_sq - cblas_ddot(m, im->phi_y, 1, im->alpha, 1) -
               model->diag.jitter * cblas_ddot(m, im->alpha, 1, im->alpha, 1);
    double lml = -q / (2.0 * s) - 0.5 * gp_chol_logdet(im->L, im->m, im->m) +
                 (double)im->R * log(s) - 0.5 * n * (LOG_2PI + log(s));
    if (model->per_point_noise)
        lml += 0.5 * im->log_d;
    model->diag.objective = lml - n * log(model->y_scale);
}

typedef struct observe_work {
    double *Phi, *Xw, *yw, *b, *alpha;
    double *wt; /* k row weights (per-point noise only) */
    double *A; /* m x m, the re-factorisation path */
    double *T; /* m x block, the Givens path */
} observe_work;

static void observe_work_free(observe_work *w)
{
    free(w->Phi);
    free(w->Xw);
    free(w->yw);
    free(w->b);
    free(w->alpha);
    free(w->wt);
    free(w->A);
    free(w->T);
}

/* A = L L^T + Phi_k^T Phi_k factorised into w->A under the jitter policy (a
 * jitter it adds is added to the model's; A's eigenvalues are at least
 * s + jitter, so none is expected). */
static int refactor(gp_model *model, const ssgp_impl *im, const double *X, size_t k,
                    size_t block, observe_work *w, double *ysq, gp_error *err)
{
    size_t m = im->m;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0, im->L,
                (blasint)m, 0.0, w->A, (blasint)m);
    gram_ctx g = {w->A, m};
    *ysq = add_rows(model, im, X, w->yw, w->wt, k, block, w->Phi, w->Xw, w->b, gram_rows, &g);
    gp_symmetrize_from_lower(w->A, m, m);
    gp_chol_info ci;
    int rc = gp_cholesky_jitter(w->A, m, m, &ci, err);
    if (rc)
        return rc;
    gp_zero_upper(w->A, m, m);
    model->diag.jitter += ci.jitter;
    return GP_OK;
}

int ssgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                 gp_error *err)
{
    return ssgp_observe_noise(model, X, Y, NULL, k, err);
}

int ssgp_observe_noise(gp_model *model, const double *X, const double *Y, const double *noise,
                       size_t k, gp_error *err)
{
    ssgp_impl *im = model->impl;
    size_t m = im->m, block = gp_predict_block_rows(m + im->d, k);
    int whole = k >= refactor_rows(m);
    /* Bounded working values keep the Givens path (in place, it cannot be
     * undone) finite: rotations preserve column norms, so L's entries grow
     * by at most the features' magnitude per row, and Phi^T y by at most
     * |Phi| GP_WORKING_LIMIT per row; both stay far below DBL_MAX. */
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    if (rc == GP_OK)
        rc = gp_check_working_targets(model, Y, k, GP_WORKING_LIMIT, err);
    if (rc)
        return rc;
    observe_work w;
    memset(&w, 0, sizeof w);
    if (whole)
        w.A = gp_alloc_doubles(m * m, err);
    else
        w.T = gp_alloc_doubles(block * m, err);
    if (!(whole ? w.A : w.T) || !(w.Phi = gp_alloc_doubles(block * m, err)) ||
        !(w.Xw = gp_alloc_doubles(block * im->d, err)) || !(w.yw = gp_alloc_doubles(k, err)) ||
        !(w.b = gp_alloc_doubles(m, err)) || !(w.alpha = gp_alloc_doubles(m, err)) ||
        (noise && !(w.wt = gp_alloc_doubles(k, err)))) {
        observe_work_free(&w);
        return GP_ENOMEM;
    }
    gp_model_working_targets(model, Y, k, w.yw);
    double log_d = 0.0;
    if (noise) { /* wt holds the working noise until weigh_rows turns it into weights */
        gp_model_working_noise(model, noise, k, w.wt);
        log_d = weigh_rows(model->noise_variance, w.wt, k, w.wt, w.yw);
    }
    memcpy(w.b, im->phi_y, m * sizeof *w.b);
    double ysq = 0.0, jitter = model->diag.jitter;
    if (whole) {
        rc = refactor(model, im, X, k, block, &w, &ysq, err);
        if (rc == GP_OK && !(gp_all_finite(w.A, m * m, NULL) && gp_all_finite(w.b, m, NULL) &&
                             isfinite(ysq))) {
            model->diag.jitter = jitter;
            rc = gp_error_set(err, GP_EDATA, "y",
                              "the %zu observed rows would make the model's state non-finite "
                              "(float64 overflow); the model is unchanged",
                              k);
        }
    }
    else { /* cannot fail from here on: L is updated in place */
        givens_ctx g = {im->L, w.T, m};
        ysq = add_rows(model, im, X, w.yw, w.wt, k, block, w.Phi, w.Xw, w.b, givens_rows, &g);
    }
    if (rc == GP_OK) {
        double *t;
        if (whole)
            t = im->L, im->L = w.A, w.A = t;
        memcpy(w.alpha, w.b, m * sizeof *w.alpha);
        gp_chol_solve(im->L, m, m, w.alpha, 1, m);
        t = im->phi_y, im->phi_y = w.b, w.b = t;
        t = im->alpha, im->alpha = w.alpha, w.alpha = t;
        im->y_sq += ysq;
        im->log_d += log_d;
        model->n_train += k;
        update_objective(model, im);
    }
    observe_work_free(&w);
    return rc;
}
