/* rfgp: the end of the warm-up. The widths (median heuristics, closed-form
 * leave-one-out; the marginal likelihood in ml.c), the features, the
 * standardisation and the batch fit of the buffered rows. */
#include "core/methods/rfgp/select.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/methods/rfgp/context.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/ml.h"
#include "core/methods/rfgp/model.h"
#include "core/methods/rfgp/update.h"
#include "core/model/method.h"

/* ---- the end of the warm-up: widths, features, standardisation, batch fit ---- */

static int report_progress(const sel_ctx *s, int it, int max, double objective)
{
    if (s->req && s->req->progress &&
        s->req->progress(s->req->progress_ctx, it, max, objective))
        return GP_ECANCELLED;
    return gp_cancel_requested(rfgp_ctx_cancel(s)) ? GP_ECANCELLED : GP_OK;
}

/* 1 when the kernel's lengthscales are the widths (fixed, or width_selection fixed). */
static int widths_from_kernel(const sel_ctx *s)
{
    return s->c->selection == SEL_FIXED || (s->model->kernel->fixed & GP_FIX_LENGTHSCALE);
}

static void kernel_widths(const gp_kernel *k, size_t dk, double *w)
{
    for (size_t j = 0; j < dk; j++)
        w[j] = exp(k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
}

/* A non-ARD kernel holds one width: the root mean square of the per-dimension ones. */
static void share_widths(const gp_kernel *k, size_t dk, double *w)
{
    if (k->n_lengthscale != 1)
        return;
    double s = 0.0;
    for (size_t j = 0; j < dk; j++)
        s += w[j] * w[j];
    s = sqrt(s / (double)dk);
    for (size_t j = 0; j < dk; j++)
        w[j] = s;
}

/* Inner widths of distributional inputs (§4, pitfall 8): width_k^2 = the
 * average variance of dimension k over the subsample; a dimension without
 * spread (every input a point there) takes the point rule, the median squared
 * difference of the means; both floored at 1e-8 times the spread of the means. */
static int median_inner_widths(sel_ctx *s, double *w, gp_error *err)
{
    size_t dk = s->c->dk, ns = s->ns;
    gp_embed e;
    rfgp_embed_of(s->c, s->in, s->m, &e);
    double *M = gp_alloc_doubles(dk * ns, err), *V = gp_alloc_doubles(dk * ns, err),
           *row = gp_alloc_doubles(ns, err);
    int rc = M && V && row ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        gp_embed_moments(&e, s->Xs, ns, 0, ns, M, V);
    for (size_t k = 0; rc == GP_OK && k < dk; k++) {
        double mv = 0.0, mm = 0.0, ss = 0.0;
        for (size_t r = 0; r < ns; r++) {
            mv += V[r * dk + k] / (double)ns;
            mm += M[r * dk + k] / (double)ns;
        }
        for (size_t r = 0; r < ns; r++)
            ss += (M[r * dk + k] - mm) * (M[r * dk + k] - mm) / (double)ns;
        double scale = ss > 0.0 ? sqrt(ss) : 1.0, floor2 = 1e-16 * scale * scale;
        double w2 = mv;
        if (!(w2 > floor2)) {
            for (size_t r = 0; r < ns; r++)
                row[r] = M[r * dk + k];
            w2 = gp_embed_median_sq_dist(row, 1, ns, NULL, 0, err);
            if (isnan(w2))
                rc = GP_ENOMEM;
            if (!(w2 > floor2))
                w2 = scale * scale;
        }
        w[k] = sqrt(w2 > floor2 ? w2 : floor2);
    }
    free(M);
    free(V);
    free(row);
    return rc;
}

/* The median heuristics (§4, §7): the widths, and the median squared distance
 * of the embeddings at those widths (*med; two stages). */
static int median_heuristic(sel_ctx *s, double *w, double *med, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    size_t dk = c->dk, ns = s->ns;
    int rc = GP_OK;
    *med = 1.0;
    if (widths_from_kernel(s))
        kernel_widths(s->model->kernel, dk, w);
    else if (!c->two_stage) {
        gp_embed e;
        rfgp_embed_of(c, s->in, s->m, &e);
        double *Xp = gp_alloc_doubles(dk * (ns ? ns : 1), err);
        if (Xp == NULL)
            return GP_ENOMEM;
        gp_embed_points(&e, s->Xs, ns, 0, ns, Xp);
        double d2 = gp_embed_median_sq_dist(Xp, dk, ns, NULL, 0, err);
        free(Xp);
        if (isnan(d2))
            return GP_ENOMEM;
        for (size_t k = 0; k < dk; k++)
            w[k] = d2 > 0.0 ? sqrt(d2) : 1.0;
    } else {
        rc = median_inner_widths(s, w, err);
        share_widths(s->model->kernel, dk, w);
    }
    if (rc || !c->two_stage)
        return rc;
    /* the outer width: the embeddings' median squared distance (pitfall 9:
     * off-diagonal pairs only) */
    rfgp_scale_map(c, &s->u, w, 1.0, s->m);
    gp_embed e;
    rfgp_embed_of(c, s->in, s->m, &e);
    double *Phi = gp_alloc_doubles(c->d_in * (ns ? ns : 1), err);
    if (Phi == NULL)
        return GP_ENOMEM;
    rc = gp_embed_inner(&e, s->Xs, ns, 0, ns, Phi, err);
    double d2 = rc ? NAN : gp_embed_median_sq_dist(Phi, c->d_in, ns, NULL, 0, err);
    free(Phi);
    if (rc == GP_OK && isnan(d2))
        rc = GP_ENOMEM;
    *med = d2 > 0.0 ? d2 : 1.0;
    return rc;
}

/* ---- closed-form leave-one-out (§4, §7 option 2) ---- */

/* Sum over rows and outputs of the squared leave-one-out residuals of ridge
 * regression on Psi (D x n) with ridge l = s / s0: dual form (n <= D) from
 * (K + l I)^{-1}, e_i = alpha_i / [(K + l I)^{-1}]_ii; primal form from the
 * hat diagonal h_i = psi_i^T (Psi Psi^T + l I)^{-1} psi_i. G is the Gram
 * (Psi^T Psi or Psi Psi^T) the caller computed once per feature map. */
static double loo_score(const sel_ctx *s, const double *Psi, const double *G, double l,
                        gp_error *err)
{
    size_t D = s->c->D, n = s->n, p = s->c->p, m = n <= D ? n : D;
    double *A = gp_alloc_doubles(m * m, err), *Y = gp_alloc_doubles(n * p, err),
           *V = gp_alloc_doubles(n <= D ? n * n : D * n, err), *U = gp_alloc_doubles(D * p, err);
    double score = INFINITY;
    if (!A || !Y || !V || !U)
        goto done;
    memcpy(A, G, m * m * sizeof *A);
    for (size_t j = 0; j < m; j++)
        A[j * m + j] += l;
    if (gp_cholesky_jitter(A, m, m, NULL, NULL) != GP_OK)
        goto done;
    memcpy(Y, s->Yw, n * p * sizeof *Y);
    score = 0.0;
    if (n <= D) {
        gp_chol_solve(A, n, n, Y, p, n); /* alpha */
        memset(V, 0, n * n * sizeof *V);
        for (size_t j = 0; j < n; j++)
            V[j * n + j] = 1.0;
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)n, (blasint)n, 1.0, A, (blasint)n, V, (blasint)n);
        for (size_t i = 0; i < n; i++) {
            double dii = 0.0; /* [(K + l I)^{-1}]_ii = |column i of L^{-1}|^2 */
            for (size_t k = i; k < n; k++)
                dii += V[i * n + k] * V[i * n + k];
            for (size_t q = 0; q < p; q++) {
                double e = Y[q * n + i] / dii;
                score += e * e;
            }
        }
    } else {
        memcpy(V, Psi, D * n * sizeof *V);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)D, (blasint)n, 1.0, A, (blasint)D, V, (blasint)D);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p,
                    (blasint)n, 1.0, V, (blasint)D, Y, (blasint)n, 0.0, U, (blasint)D);
        for (size_t i = 0; i < n; i++) {
            double h = 0.0;
            for (size_t k = 0; k < D; k++)
                h += V[i * D + k] * V[i * D + k];
            for (size_t q = 0; q < p; q++) {
                double yh = 0.0;
                for (size_t k = 0; k < D; k++)
                    yh += V[i * D + k] * U[q * D + k];
                double e = (Y[q * n + i] - yh) / (1.0 - h);
                score += e * e;
            }
        }
    }
done:
    free(A);
    free(Y);
    free(V);
    free(U);
    return score;
}

static const double loo_factors[] = {0.1, 0.2, 1.0 / 3.0, 0.5, 1.0, 2.0, 5.0, 10.0};
static const double loo_ridges[] = {1e-2, 1.0, 1e2};

/* Over the note's grid (§4): median factors {1/10 .. 10} on the squared
 * widths (points) or on gamma^2 (two stages), times the ridges {1e-2, 1, 100}
 * and the ridge of the starting noise; a fixed noise keeps its own ridge only. */
static int select_loocv(sel_ctx *s, double med, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, dk = c->dk, m = n <= D ? n : D;
    size_t nf = sizeof loo_factors / sizeof loo_factors[0];
    double *base = gp_alloc_doubles(dk, err), *w = gp_alloc_doubles(dk, err),
           *Psi = gp_alloc_doubles(D * (n ? n : 1), err), *G = gp_alloc_doubles(m * m, err);
    int rc = base && w && Psi && G ? GP_OK : GP_ENOMEM;
    double ridges[4];
    size_t nr = 0;
    if (c->noise_learn)
        for (size_t r = 0; r < sizeof loo_ridges / sizeof loo_ridges[0]; r++)
            ridges[nr++] = loo_ridges[r];
    ridges[nr++] = s->noise0 / s->s0;
    double best = INFINITY, best_f = 1.0, best_l = ridges[nr - 1];
    if (rc == GP_OK)
        memcpy(base, s->widths, dk * sizeof *base);
    gp_embed e;
    rfgp_embed_of(c, s->in, s->m, &e);
    for (size_t f = 0; rc == GP_OK && f < nf; f++) {
        double fac = loo_factors[f], gamma = sqrt(fac * med);
        for (size_t k = 0; k < dk; k++)
            w[k] = c->two_stage || widths_from_kernel(s) ? base[k] : base[k] * sqrt(fac);
        rfgp_scale_map(c, &s->u, w, c->two_stage ? gamma : 1.0, s->m);
        rc = gp_embed_features(&e, s->X, s->ldx, 0, n, Psi, err);
        if (rc)
            break;
        if (n <= D)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)n, (blasint)D, 1.0, Psi,
                        (blasint)D, 0.0, G, (blasint)n);
        else
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)n, 1.0,
                        Psi, (blasint)D, 0.0, G, (blasint)D);
        gp_symmetrize_from_lower(G, m, m);
        for (size_t r = 0; r < nr; r++) {
            double sc = loo_score(s, Psi, G, ridges[r], err);
            if (sc < best) {
                best = sc;
                best_f = fac;
                best_l = ridges[r];
            }
        }
        s->iterations = (int)f + 1;
        rc = report_progress(s, (int)f + 1, (int)nf, -best);
    }
    if (rc == GP_OK) {
        for (size_t k = 0; k < dk; k++)
            s->widths[k] = c->two_stage || widths_from_kernel(s) ? base[k] : base[k] * sqrt(best_f);
        s->gamma = sqrt(best_f * med);
        if (c->noise_learn)
            s->noise = best_l * s->s0;
    }
    free(base);
    free(w);
    free(Psi);
    free(G);
    return rc;
}

static int run_selection(sel_ctx *s, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    double med = 1.0;
    int rc = GP_OK;
    if (c->selection == SEL_FIXED) {
        kernel_widths(s->model->kernel, c->dk, s->widths);
        s->gamma = c->outer_width > 0 ? c->outer_width : 1.0;
        return GP_OK;
    }
    rc = median_heuristic(s, s->widths, &med, err);
    s->gamma = c->outer_width > 0 && c->selection == SEL_ML ? c->outer_width
                                                           : sqrt(c->median_factor * med);
    if (rc == GP_OK && c->selection == SEL_LOOCV)
        rc = select_loocv(s, med, err);
    else if (rc == GP_OK && c->selection == SEL_ML && s->n > 0)
        rc = rfgp_select_ml(s, err);
    return rc;
}

int rfgp_warmup_end(gp_model *model, const rfgp_impl *im, const gp_fit_request *req,
                    long shift, staged *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    sel_ctx s;
    int rc = rfgp_sel_prepare(model, im, req, shift, st, &s, err);
    if (rc == GP_OK)
        rc = rfgp_mean_fit(model, im, st, &s, err);
    if (rc == GP_OK)
        rc = run_selection(&s, err);
    if (rc == GP_OK) {
        rfgp_scale_map(c, &s.u, s.widths, s.gamma, &st->m);
        rc = rfgp_post_alloc(c, &st->q, err);
    }
    if (rc == GP_OK) {
        rfgp_post_prior(c, &st->q, s.s0);
        rc = rfgp_apply_rows(c, &model->input, &st->m, &st->q, s.noise, s.s0, im->buf_x, s.ldx,
                             s.Yr ? s.Yr : im->buf_y, s.ldx, 0, n, shift, &st->jitter, err);
    }
    st->objective = 0.0;
    if (rc == GP_OK && n > 0 && (rc = rfgp_selected_lml(&s, &st->objective, err)) == GP_OK)
        st->objective += rfgp_lml_offset(&s);
    /* selected_lml scaled the map's arrays again: the same values, the same bits */
    if (rc == GP_OK && c->selection != SEL_ML && c->selection != SEL_LOOCV)
        rc = report_progress(&s, 1, 1, st->objective);
    st->s0 = s.s0;
    st->noise = s.noise;
    st->iterations = s.iterations;
    st->evaluations = s.evaluations;
    rfgp_sel_release(&s);
    if (rc) {
        rfgp_staged_free(st);
        if (rc == GP_ECANCELLED)
            gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    }
    return rc;
}

