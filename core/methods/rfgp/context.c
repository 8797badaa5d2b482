/* rfgp: what the end of the warm-up works on: the unit draws the widths
 * scale, the staged map with the standardisation of the buffer, the working
 * targets and the heuristics' subsample. */
#include "core/methods/rfgp/context.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/model.h"
#include "core/methods/rfgp/update.h"
#include "core/model/method.h"

/* ---- the selection's context ---- */

static void unit_free(unit_draws *u)
{
    free(u->E);
    free(u->b1);
    free(u->U);
    free(u->b2);
}
static int unit_draw(const rfgp_cfg *c, unit_draws *u, gp_error *err)
{
    memset(u, 0, sizeof *u);
    size_t m1 = c->two_stage ? c->d_in : c->D;
    int ok = (u->E = gp_alloc_doubles(c->dk * m1, err)) && (u->b1 = gp_alloc_doubles(m1, err));
    if (ok && c->two_stage)
        ok = (u->U = gp_alloc_doubles(c->d_in * c->D, err)) &&
             (u->b2 = gp_alloc_doubles(c->D, err));
    if (!ok) {
        unit_free(u);
        return GP_ENOMEM;
    }
    gp_embed_draw(c->seed, STREAM_INNER, c->dk, m1, u->E, u->b1);
    if (c->two_stage)
        gp_embed_draw(c->seed, STREAM_OUTER, c->d_in, c->D, u->U, u->b2);
    return GP_OK;
}

/* The map's arrays at widths w (dk) and outer width gamma. */
void rfgp_scale_map(const rfgp_cfg *c, const unit_draws *u, const double *w, double gamma,
                    fmap *m)
{
    size_t dk = c->dk, m1 = c->two_stage ? c->d_in : c->D;
    double *W1 = c->two_stage ? m->w_in : m->w_out;
    for (size_t i = 0; i < m1; i++)
        for (size_t k = 0; k < dk; k++)
            W1[i * dk + k] = u->E[i * dk + k] / w[k];
    memcpy(c->two_stage ? m->b_in : m->b_out, u->b1, m1 * sizeof *u->b1);
    if (c->two_stage) {
        for (size_t i = 0; i < c->d_in * c->D; i++)
            m->w_out[i] = u->U[i] / gamma;
        memcpy(m->b_out, u->b2, c->D * sizeof *u->b2);
    }
    memcpy(m->widths, w, dk * sizeof *w);
    m->gamma = gamma;
}

const gp_cancel *rfgp_ctx_cancel(const sel_ctx *s)
{
    return s->req ? &s->req->cancel : NULL;
}

void rfgp_staged_free(staged *st)
{
    rfgp_map_free(&st->m);
    rfgp_post_free(&st->q);
    free(st->beta);
    st->beta = NULL;
}

/* Rows for the heuristics: all of them up to HEURISTIC_ROWS, else a seeded
 * subsample (the first ns of a partial Fisher-Yates shuffle), copied compact. */
static int gather_subsample(sel_ctx *s, gp_error *err)
{
    size_t n = s->n, ns = n < HEURISTIC_ROWS ? n : HEURISTIC_ROWS, w = s->c->width;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    s->Xs = gp_alloc_doubles((ns ? ns : 1) * w, err);
    if (idx == NULL || s->Xs == NULL) {
        free(idx);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    if (ns < n) {
        gp_rng rng;
        gp_rng_derive(&rng, s->c->seed, STREAM_SUBSAMPLE);
        for (size_t i = 0; i < ns; i++) {
            size_t j = i + (size_t)gp_rng_below(&rng, n - i), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    }
    for (size_t r = 0; r < ns; r++)
        for (size_t j = 0; j < w; j++)
            s->Xs[j * ns + r] = s->X[j * s->ldx + idx[r]];
    s->ns = ns;
    free(idx);
    return GP_OK;
}

/* The selection's context on the warm-up buffer: the staged map with the
 * standardisation fixed from the buffer, the working targets, the unit draws
 * and the heuristics' subsample. */
/* Row i of the warm-up buffer is the caller's row i + shift (the rows of
 * earlier calls come first). */
int rfgp_sel_prepare(const gp_model *model, const rfgp_impl *im, const gp_fit_request *req,
                     long shift, staged *st, sel_ctx *s, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf, p = c->p;
    memset(st, 0, sizeof *st);
    *s = (sel_ctx){.model = model, .c = c, .in = &model->input, .X = im->buf_x,
                   .ldx = c->warmup ? c->warmup : 1, .n = n, .m = &st->m, .req = req,
                   .noise0 = model->noise_variance, .s0 = exp(model->kernel->log_variance)};
    s->noise = s->noise0;
    int rc = rfgp_map_alloc(c, &st->m, err);
    if (rc == GP_OK && !(s->widths = gp_alloc_doubles(c->dk, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK && !(s->Yw = gp_alloc_doubles((n ? n : 1) * p, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        /* the standardisation, from the buffer (n = warmup: its leading dimension) */
        int stand = model->standardize && n > 0;
        for (size_t k = 0; k < c->dk; k++) {
            st->m.x_mean[k] = 0.0;
            st->m.x_scale[k] = 1.0;
        }
        if (stand && !c->two_stage)
            gp_column_stats(im->buf_x, n, c->dk, st->m.x_mean, st->m.x_scale);
        for (size_t q = 0; q < p; q++) {
            st->m.y_mean[q] = 0.0;
            st->m.y_scale[q] = 1.0;
        }
        if (stand)
            gp_column_stats(im->buf_y, n, p, st->m.y_mean, st->m.y_scale);
        rfgp_working_targets(c, &st->m, im->buf_y, s->ldx, 0, n, s->Yw);
        /* the fit's rule on the buffer: no column whose spread float64
         * cannot hold (its scale would overflow every variance) */
        rc = gp_check_standardisable(im->buf_y, n, p, s->ldx, stand, 1, shift, err);
        if (rc == GP_OK && model->input.kind == GP_INPUT_POINT && !c->two_stage)
            rc = gp_check_standardisable(im->buf_x, n, c->dk, s->ldx, stand, 0, shift, err);
    }
    if (rc == GP_OK) {
        rc = unit_draw(c, &s->u, err);
    }
    if (rc == GP_OK)
        rc = gather_subsample(s, err);
    return rc;
}

void rfgp_sel_release(sel_ctx *s)
{
    unit_free(&s->u);
    free(s->widths);
    free(s->Yw);
    free(s->Yr);
    free(s->Xs);
}

/* ---- a mean (docs/design/numerics.md "Mean functions") ---- */

/* H (n x p) of the buffer's points standardised by the staged map. */
static double *buffer_basis(const gp_model *model, const sel_ctx *s, size_t p, gp_error *err)
{
    size_t n = s->n, d = s->c->dk;
    double *P = gp_alloc_doubles(n * d, err), *H = gp_alloc_doubles(n * p, err);
    if (P == NULL || H == NULL) {
        free(P);
        free(H);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            P[i * d + j] = (s->X[j * s->ldx + i] - s->m->x_mean[j]) / s->m->x_scale[j];
    gp_mean_basis(model->mean_type, P, d, n, H);
    free(P);
    return H;
}

int rfgp_mean_fit(const gp_model *model, const rfgp_impl *im, staged *st, sel_ctx *s,
                  gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, s->c->dk), n = s->n;
    if (p == 0)
        return GP_OK;
    if ((st->beta = gp_alloc_doubles(p, err)) == NULL ||
        (s->Yr = gp_alloc_doubles(s->ldx, err)) == NULL)
        return GP_ENOMEM;
    memset(st->beta, 0, p * sizeof *st->beta);
    if (n == 0) /* warmup 0: nothing to fit, the mean stays 0 */
        return GP_OK;
    double *H = buffer_basis(model, s, p, err), *G = gp_alloc_doubles(p * p, err);
    int rc = H && G ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, H,
                    (blasint)n, 0.0, G, (blasint)p);
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, H, (blasint)n, s->Yw,
                    1, 0.0, st->beta, 1);
        rc = gp_mean_solve_normal(G, st->beta, p, err);
    }
    if (rc == GP_OK) {
        /* Yw's residual; the buffer's y less y_scale h^T beta (original units) */
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, H, (blasint)n,
                    st->beta, 1, 1.0, s->Yw, 1);
        memcpy(s->Yr, im->buf_y, n * sizeof *s->Yr);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -s->m->y_scale[0], H,
                    (blasint)n, st->beta, 1, 1.0, s->Yr, 1);
    }
    free(H);
    free(G);
    return rc;
}
