/* rfgp: rows into the posterior by the recursive-least-squares QR update
 * (Givens rotations with forgetting) or a batch re-factorisation. The
 * warm-up buffer before them is rfgp.c's, its end select.c's. */
#include "core/methods/rfgp/update.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/model.h"
#include "core/model/method.h"

/* ---- the recursive-least-squares QR update ---- */

/* One row (x, t) = (psi / sd, y / sd) into [sqrt(l) L | sqrt(l) z]: on return
 * L L^T = l L L^T + x x^T and z = L^{-1} (l b + x t^T), with x and t
 * overwritten (t holds the whitened residual). Not gp_chol_update_rank1_packed:
 * the forgetting rides in the rotation (gp_givens_rotate's c1, s2), z turns
 * with L, and r is sqrt(a^2 + b^2) (hypot only where that over- or
 * underflows), which rounds differently from that update's hypot. */
static void qr_row(double *L, size_t D, double *x, double *z, size_t p, double *t, double rl)
{
    double *col = L;
    for (size_t j = 0; j < D; col += D - j, j++) {
        double a = rl * col[0], bb = x[j];
        if (bb == 0.0) { /* the identity rotation: only the forgetting's scaling */
            for (size_t i = 0; rl != 1.0 && i < D - j; i++)
                col[i] *= rl;
            for (size_t q = 0; rl != 1.0 && q < p; q++)
                z[q * D + j] *= rl;
            continue;
        }
        double r = sqrt(a * a + bb * bb);
        if (!(r < INFINITY) || r < 1e-150)
            r = hypot(a, bb);
        if (!(r > 0.0))
            continue;
        double c = a / r, s = bb / r;
        col[0] = r;
        x[j] = 0.0;
        gp_givens_rotate(col + 1, x + j + 1, D - j - 1, c * rl, s, c, s * rl);
        for (size_t q = 0; q < p; q++) {
            double zq = rl * z[q * D + j], tq = t[q];
            z[q * D + j] = c * zq + s * tq;
            t[q] = c * tq - s * zq;
        }
    }
}

/* Rows of a batch from which the precision is re-factorised. */
size_t rfgp_crossover(const rfgp_cfg *c)
{
    double k = c->refactor_batch > 0 ? c->refactor_batch : ceil(AUTO_CROSSOVER_PER_D * (double)c->D);
    return k < 1 ? 1 : (size_t)k;
}

/* k rank-one updates in place (cannot fail): Psi (D x k) the features, Yw
 * (k x p, leading dimension ldy) the working targets; x (D) and t (p) scratch. */
static void apply_rank_one(const rfgp_cfg *c, post *q, double noise, const double *Psi,
                           const double *Yw, size_t ldy, size_t k, double *x, double *t)
{
    size_t D = c->D, p = c->p;
    double sd = sqrt(noise), lam = c->forgetting, rl = sqrt(lam);
    for (size_t i = 0; i < k; i++) {
        const double *psi = Psi + i * D;
        for (size_t j = 0; j < D; j++)
            x[j] = psi[j] / sd;
        for (size_t o = 0; o < p; o++)
            t[o] = Yw[o * ldy + i] / sd;
        qr_row(q->L, D, x, q->z, p, t, rl);
        for (size_t o = 0; o < p; o++) {
            double yo = Yw[o * ldy + i] / noise, *bo = q->b + o * D;
            for (size_t j = 0; j < D; j++)
                bo[j] = lam * bo[j] + psi[j] * yo;
        }
    }
    q->n += (double)k;
    q->rank_one += (double)k;
}

/* The batch route into a new posterior out (allocated here): P = l^k L L^T +
 * sum_i l^(k-1-i) psi_i psi_i^T / s (the rows' weights as k rank-one updates
 * with forgetting give them), factorised by the jitter policy's blocked
 * Cholesky; b likewise, z = L^{-1} b. */
static int apply_refactor(const rfgp_cfg *c, const post *q, double noise, double s0,
                          const double *Psi, const double *Yw, size_t ldy, size_t k, post *out,
                          double *jitter, gp_error *err)
{
    size_t D = c->D, p = c->p;
    double lam = c->forgetting, lk = pow(lam, (double)k);
    memset(out, 0, sizeof *out);
    double *P = gp_alloc_doubles(D * D, err), *W = gp_alloc_doubles(D * k, err),
           *Yk = gp_alloc_doubles(k * p, err);
    int rc = P && W && Yk ? rfgp_post_alloc(c, out, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t i = 0; i < k; i++) {
            double w = lam == 1.0 ? 1.0 : pow(lam, 0.5 * (double)(k - 1 - i));
            for (size_t j = 0; j < D; j++)
                W[i * D + j] = w * Psi[i * D + j];
            for (size_t o = 0; o < p; o++)
                Yk[o * k + i] = w * Yw[o * ldy + i];
        }
        if (q->n == 0.0) { /* the prior, exactly */
            memset(P, 0, D * D * sizeof *P);
            for (size_t j = 0; j < D; j++)
                P[j * D + j] = lk / s0;
        } else {
            /* l^k L L^T, with the old factor unpacked into the scratch F */
            double *F = gp_alloc_doubles(D * D, err);
            if (F == NULL)
                rc = GP_ENOMEM;
            else {
                gp_unpack_lower(q->L, D, F, D);
                cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)D,
                            lk, F, (blasint)D, 0.0, P, (blasint)D);
                free(F);
            }
        }
    }
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)k,
                    1.0 / noise, W, (blasint)D, 1.0, P, (blasint)D);
        gp_symmetrize_from_lower(P, D, D);
        gp_chol_info info = {0};
        rc = gp_cholesky_jitter(P, D, D, &info, err);
        *jitter = info.jitter;
    }
    if (rc == GP_OK) {
        memcpy(out->b, q->b, D * p * sizeof *q->b);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p,
                    (blasint)k, 1.0 / noise, W, (blasint)D, Yk, (blasint)k, lk, out->b,
                    (blasint)D);
        memcpy(out->z, out->b, D * p * sizeof *q->b);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)D, (blasint)p, 1.0, P, (blasint)D, out->z, (blasint)D);
        gp_pack_lower(P, D, D, out->L);
        out->n = q->n + (double)k;
        out->refactorisations = q->refactorisations + 1.0;
        out->rank_one = q->rank_one;
    }
    if (rc)
        rfgp_post_free(out);
    free(P);
    free(W);
    free(Yk);
    return rc;
}

/* Working targets of rows start .. start + k of Y (original units, leading
 * dimension ldy) into Yw (k x p). */
void rfgp_working_targets(const rfgp_cfg *c, const fmap *m, const double *Y, size_t ldy,
                          size_t start, size_t k, double *Yw)
{
    for (size_t o = 0; o < c->p; o++)
        for (size_t i = 0; i < k; i++)
            Yw[o * k + i] = (Y[o * ldy + start + i] - m->y_mean[o]) / m->y_scale[o];
}

/* Whether the new posterior's arrays are all finite. */
static int post_finite(const rfgp_cfg *c, const post *q)
{
    return gp_all_finite(q->L, rfgp_packed_len(c->D), NULL) &&
           gp_all_finite(q->z, c->D * c->p, NULL) && gp_all_finite(q->b, c->D * c->p, NULL);
}

/* GP_EDATA unless the rows' working targets are within GP_WORKING_LIMIT and
 * their features finite: with both, the rank-one path (in place, it cannot
 * be undone) stays finite, since its rotations preserve column norms and
 * b grows by at most |psi| GP_WORKING_LIMIT / noise per row. Rows are named
 * as the caller's row i + shift. */
static int check_rows(const rfgp_cfg *c, const double *Psi, const double *Yw, size_t k,
                      long shift, gp_error *err)
{
    int rc = gp_check_working_values(Yw, k, c->p, k, shift, err);
    size_t bad = 0;
    if (rc == GP_OK && !gp_all_finite(Psi, c->D * k, &bad)) {
        char field[GP_ERROR_FIELD_LEN] = "X";
        long row = (long)(bad / c->D) + shift;
        if (row >= 0)
            snprintf(field, sizeof field, "X[%ld]", row);
        rc = gp_error_set(err, GP_EDATA, field,
                          "%s is too far from the data for float64 once standardised: its "
                          "features are not finite",
                          field);
    }
    return rc;
}

/* Rows start .. start + k of (X, Y) (original units) into the posterior q:
 * all or nothing (q is untouched on failure). Errors name row i as the
 * caller's row start + i + shift. */
int rfgp_apply_rows(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, post *q,
                    double noise, double s0, const double *X, size_t ldx, const double *Y,
                    size_t ldy, size_t start, size_t k, long shift, double *jitter,
                    gp_error *err)
{
    if (k == 0)
        return GP_OK;
    size_t D = c->D, count;
    int rc = gp_checked_size(D, k, &count, err);
    if (rc)
        return rc;
    /* two-stage maps learn their own input scale: check_rows' finite features */
    if (in->kind == GP_INPUT_POINT && !c->two_stage &&
        (rc = gp_check_standardised_points(X + start, ldx, k, c->dk, m->x_mean, m->x_scale,
                                           GP_WORKING_LIMIT, (long)start + shift, err)) != GP_OK)
        return rc;
    gp_embed e;
    rfgp_embed_of(c, in, m, &e);
    gp_embed_work *w = NULL;
    double *Psi = gp_alloc_doubles(count, err), *Yw = gp_alloc_doubles(k * c->p, err);
    double *x = gp_alloc_doubles(D, err), *t = gp_alloc_doubles(c->p, err);
    if (!Psi || !Yw || !x || !t)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_embed_work_new(&e, k, &w, err);
    if (rc == GP_OK) {
        gp_embed_features_in(&e, w, X, ldx, start, k, Psi);
        rfgp_working_targets(c, m, Y, ldy, start, k, Yw);
        rc = check_rows(c, Psi, Yw, k, (long)start + shift, err);
    }
    if (rc == GP_OK) {
        if (k >= rfgp_crossover(c)) {
            post nq;
            double jit = *jitter;
            rc = apply_refactor(c, q, noise, s0, Psi, Yw, k, k, &nq, &jit, err);
            if (rc == GP_OK && !post_finite(c, &nq)) {
                rfgp_post_free(&nq);
                rc = gp_error_set(err, GP_EDATA, "y",
                                  "the %zu rows would make the model's state non-finite "
                                  "(float64 overflow); the model is unchanged",
                                  k);
            }
            if (rc == GP_OK) {
                rfgp_post_free(q);
                *q = nq;
                *jitter = jit;
            }
        } else
            apply_rank_one(c, q, noise, Psi, Yw, k, k, x, t);
    }
    gp_embed_work_free(w);
    free(Psi);
    free(Yw);
    free(x);
    free(t);
    return rc;
}


