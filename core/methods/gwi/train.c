/* Training of method "gwi": the starting point (B3) and Adam over the mean parameters and L
 * (B4). */
#include "core/methods/gwi/train.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/loss.h"
#include "core/methods/gwi/network.h"

/* Fisher-Yates over the first k places of idx[0..n): idx[0..k) a uniform draw. */
void gwi_draw_prefix(gp_rng *rng, size_t *idx, size_t n, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)gp_rng_below(rng, n - i), x = idx[i];
        idx[i] = idx[j];
        idx[j] = x;
    }
}

/* ---- B3: the starting point ---- */

/* Over the n points X in blocks: B = I + A A^T / s2 (lower) and c = A y,
 * A = Lk^{-1} k(Z, X); no m x n matrix beyond one block. */
static int titsias_terms(const gp_gwi_setup *s, const double *X, const double *y, size_t n,
                         double *B, double *c, gp_error *err)
{
    size_t m = s->m, block = n < 1024 ? n : 1024;
    double *K = NULL;
    int rc = gwi_alloc2(&K, m, block, err);
    if (rc)
        return rc;
    memset(B, 0, m * m * sizeof *B);
    memset(c, 0, m * sizeof *c);
    for (size_t start = 0; start < n; start += block) {
        size_t b = n - start < block ? n - start : block;
        gp_kernel_cross(s->k, s->Z, m, X + start * s->d, b, K, m);
        gp_trsm_lower(s->Lk, m, m, 0, K, b, m);
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)b, 1.0 / s->s2,
                    K, (blasint)m, 1.0, B, (blasint)m);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)b, 1.0, K, (blasint)m,
                    y + start, 1, 1.0, c, 1);
    }
    free(K);
    for (size_t i = 0; i < m; i++)
        B[i * m + i] += 1.0;
    gp_symmetrize_from_lower(B, m, m);
    return GP_OK;
}

/* L = chol(Lk^{-T} B^{-1} Lk^{-1}) packed into Lp, from Lb = chol(B); S scratch. */
static int initial_factor(const gp_gwi_setup *s, const double *Lb, double *S, double *Lp,
                          gp_error *err)
{
    size_t m = s->m;
    memcpy(S, Lb, m * m * sizeof *S);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, S, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + A A^T / s2 is singular");
    gp_symmetrize_from_lower(S, m, m);
    gp_trsm_lower(s->Lk, m, m, 1, S, m, m);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 1.0, s->Lk, (blasint)m, S, (blasint)m);
    gp_symmetrize_average(S, m, m);
    int rc = gp_cholesky_jitter(S, m, m, NULL, err);
    if (rc)
        return rc;
    gp_zero_upper(S, m, m);
    gp_pack_lower(S, m, m, Lp);
    return GP_OK;
}

/* U(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights, zero biases. */
static void init_network(const gp_gwi_setup *s, uint64_t seed, double *p)
{
    size_t d = s->d, h = s->hidden;
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    mlp_view v = gwi_mlp_at(p, d, h);
    memset(p, 0, gp_gwi_mlp_size(d, h) * sizeof *p);
    struct {
        double *W;
        size_t count, fan_in;
    } layers[] = {{(double *)v.W1, h * d, d}, {(double *)v.W2, h * h, h}, {(double *)v.W3, h, h}};
    for (size_t l = 0; l < 3; l++) {
        double a = 1.0 / sqrt((double)layers[l].fan_in);
        for (size_t i = 0; i < layers[l].count; i++)
            layers[l].W[i] = a * (2.0 * gp_rng_uniform(&rng) - 1.0);
    }
}

int gp_gwi_init(const gp_gwi_setup *s, const double *X, const double *y, size_t n,
                uint64_t seed, double *theta, gp_error *err)
{
    size_t m = s->m;
    double *B = NULL, *S = NULL, *c = NULL;
    int rc = gwi_alloc2(&B, m, m, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&S, m, m, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&c, m, 1, err);
    if (rc == GP_OK)
        rc = titsias_terms(s, X, y, n, B, c, err);
    if (rc == GP_OK && LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, B, (lapack_int)m))
        rc = gp_error_set(err, GP_ENOTPD, NULL, "I + A A^T / s2 is not positive definite");
    if (rc == GP_OK)
        rc = initial_factor(s, B, S, theta + gp_gwi_mean_size(s), err);
    if (rc == GP_OK && s->mean == GP_GWI_MEAN_MLP)
        init_network(s, seed, theta);
    if (rc == GP_OK && s->learn_noise)
        theta[gp_gwi_n_params(s) - 1] = log(fmax(s->s2 - GP_GWI_NOISE_FLOOR, 1e-300));
    if (rc == GP_OK && s->mean == GP_GWI_MEAN_KERNEL_SUM) {
        /* beta = Lk^{-T} B^{-1} c / s2 */
        LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)m, 1, B, (lapack_int)m, c,
                       (lapack_int)m);
        for (size_t i = 0; i < m; i++)
            theta[i] = c[i] / s->s2;
        cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, s->Lk,
                    (blasint)m, theta, 1);
    }
    free(B);
    free(S);
    free(c);
    return rc;
}

/* ---- B4: Adam over (mean parameters, L) ---- */

void gwi_trainer_free(trainer *T)
{
    free(T->order);
    free(T->pool);
    free(T->XB);
    free(T->yB);
    free(T->XS);
    free(T->grad);
    free(T->best);
    free(T->vm);
    free(T->vv);
    gp_adam_free(&T->adam);
}

int gwi_trainer_init(trainer *T, gp_error *err)
{
    const gwi_data *D = T->D;
    size_t d = D->d, nv = D->nva ? D->nva : D->ntr;
    T->order = malloc(D->ntr * sizeof *T->order);
    T->pool = malloc(D->ntr * sizeof *T->pool);
    if (!T->order || !T->pool)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < D->ntr; i++)
        T->order[i] = T->pool[i] = i;
    int rc = gwi_alloc2(&T->XB, d, T->nb, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->yB, T->nb, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->XS, d, T->ns, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->grad, T->np, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->best, T->np, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->vm, nv, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&T->vv, nv, 1, err);
    if (rc == GP_OK)
        rc = gp_adam_init(&T->adam, T->np, T->st->learning_rate, err);
    gp_rng_derive(&T->rng, T->req->seed, STREAM_TRAIN);
    T->best_nll = INFINITY;
    return rc;
}

static void gather(const gwi_data *D, const size_t *idx, size_t k, double *X, double *y)
{
    for (size_t i = 0; i < k; i++) {
        memcpy(X + i * D->d, D->Xtr + idx[i] * D->d, D->d * sizeof *X);
        if (y)
            y[i] = D->ytr[idx[i]];
    }
}

/* The validation rows' (the training rows' when none are held out) mean
 * predictive NLL per point, untempered, and a = mean (y - m)^2 / (r + s2),
 * the NLL's minimiser over a variance factor (working units). */
static int validation_scores(trainer *T, double *nll, double *a, gp_error *err)
{
    const gwi_data *D = T->D;
    const double *X = D->nva ? D->Xva : D->Xtr, *y = D->nva ? D->yva : D->ytr;
    size_t n = D->nva ? D->nva : D->ntr;
    int rc = gp_gwi_latent(T->s, T->w, T->theta, X, n, T->vm, T->vv, err);
    if (rc)
        return rc;
    double sum = 0.0, q = 0.0, s2 = gp_gwi_noise(T->s, T->theta);
    for (size_t i = 0; i < n; i++) {
        double v = fmax(T->vv[i], 0.0) + s2, e = y[i] - T->vm[i];
        sum += 0.5 * (LOG_2PI + log(v)) + e * e / (2.0 * v);
        q += e * e / v;
    }
    *nll = sum / (double)n;
    *a = q / (double)n;
    return GP_OK;
}

/* B5: the tempering factor alpha from a (clipped; 1 without tempering, or
 * with fewer than GP_GWI_TEMPER_MIN_ROWS rows to estimate it from) and
 * the NLL with every variance times alpha: + log(alpha)/2, the squares over
 * alpha. */
static double tempered_nll(const trainer *T, double nll, double a, double *alpha)
{
    size_t rows = T->D->nva ? T->D->nva : T->D->ntr;
    int on = T->st->temper && rows >= GP_GWI_TEMPER_MIN_ROWS;
    *alpha = on ? fmin(fmax(a, GP_GWI_TEMPER_MIN), GP_GWI_TEMPER_MAX) : 1.0;
    return nll + 0.5 * log(*alpha) + 0.5 * a * (1.0 / *alpha - 1.0);
}

/* What early stopping compares: the NLL the model would have if it stopped
 * here, i.e. tempered when tempering is on (the fit keeps tempering's
 * factor, so an epoch whose variances are only off by a common factor is
 * not passed over: the SVGP covariance shrinks as the data term trains it,
 * and the untempered NLL stopped GWI-net while its mean still improved). */
static int epoch_score(trainer *T, double *score, double *untempered, gp_error *err)
{
    double a, alpha;
    int rc = validation_scores(T, untempered, &a, err);
    if (rc == GP_OK)
        *score = tempered_nll(T, *untempered, a, &alpha);
    return rc;
}

/* One pass over the shuffled training rows. */
static int run_epoch(trainer *T, gp_error *err)
{
    const gwi_data *D = T->D;
    gwi_draw_prefix(&T->rng, T->order, D->ntr, D->ntr);
    for (size_t start = 0; start < D->ntr; start += T->nb) {
        if (gp_cancel_requested(&T->req->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
        size_t b = D->ntr - start < T->nb ? D->ntr - start : T->nb;
        gather(D, T->order + start, b, T->XB, T->yB);
        gwi_draw_prefix(&T->rng, T->pool, D->ntr, T->ns);
        gather(D, T->pool, T->ns, T->XS, NULL);
        gp_gwi_terms t;
        int rc = gp_gwi_loss(T->s, T->w, T->theta, T->XB, T->yB, b, T->XS, T->ns, &t, T->grad,
                             err);
        size_t bad;
        if (rc == GP_ENOTPD || (rc == GP_OK && !gp_all_finite(T->grad, T->np, &bad))) {
            /* a failed eigensolver, an overflow, a degenerate eigenvector pair: skip the
             * step rather than let Adam take part of one */
            T->skipped++;
            continue;
        }
        if (rc)
            return rc;
        gp_adam_step(&T->adam, T->theta, T->grad);
        T->steps++;
    }
    return GP_OK;
}

/* Epochs until the budget or `patience` epochs without a better validation
 * NLL; T->theta ends at the best epoch's parameters. */
int gwi_train(trainer *T, gp_error *err)
{
    double best = INFINITY, raw;
    int since = 0, rc = epoch_score(T, &best, &T->best_nll, err); /* epoch 0: the start */
    memcpy(T->best, T->theta, T->np * sizeof *T->theta);
    for (int e = 1; rc == GP_OK && e <= T->st->epochs; e++) {
        double nll;
        if ((rc = run_epoch(T, err)) != GP_OK || (rc = epoch_score(T, &nll, &raw, err)) != GP_OK)
            break;
        T->epochs_run = e;
        if (nll < best) {
            best = nll;
            T->best_nll = raw;
            T->best_epoch = e;
            memcpy(T->best, T->theta, T->np * sizeof *T->theta);
            since = 0;
        } else {
            since++;
        }
        if (T->req->progress &&
            T->req->progress(T->req->progress_ctx, e, T->st->epochs, nll + log(T->y_scale))) {
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
            break;
        }
        if (since >= T->st->patience) {
            T->stopped_early = 1;
            break;
        }
    }
    if (rc == GP_OK)
        memcpy(T->theta, T->best, T->np * sizeof *T->theta);
    return rc;
}

/* B5 at the kept parameters: alpha and the tempered NLL (working units). */
int gwi_temper(trainer *T, double *alpha, double *nll, gp_error *err)
{
    double untempered, a;
    int rc = validation_scores(T, &untempered, &a, err);
    if (rc == GP_OK)
        *nll = tempered_nll(T, untempered, a, alpha);
    return rc;
}
