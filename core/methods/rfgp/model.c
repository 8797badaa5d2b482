/* rfgp: the model's state (the posterior, the feature map), and predict and
 * sample from it. */
#include "core/methods/rfgp/model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/methods/rfgp/embed.h"
#include "core/model/method.h"

void rfgp_post_free(post *q)
{
    free(q->L);
    free(q->z);
    free(q->b);
    memset(q, 0, sizeof *q);
}

void rfgp_map_free(fmap *m)
{
    free(m->w_in);
    free(m->b_in);
    free(m->w_out);
    free(m->b_out);
    free(m->widths);
    free(m->x_mean);
    free(m->x_scale);
    free(m->y_mean);
    free(m->y_scale);
    memset(m, 0, sizeof *m);
}

void rfgp_impl_free(void *p)
{
    rfgp_impl *im = p;
    if (im == NULL)
        return;
    free(im->buf_x);
    free(im->buf_y);
    rfgp_map_free(&im->map);
    rfgp_post_free(&im->post);
    free(im->threshold);
    free(im);
}

size_t rfgp_packed_len(size_t D)
{
    return D * (D + 1) / 2;
}

int rfgp_post_alloc(const rfgp_cfg *c, post *q, gp_error *err)
{
    memset(q, 0, sizeof *q);
    q->L = gp_alloc_doubles(rfgp_packed_len(c->D), err);
    q->z = gp_alloc_doubles(c->D * c->p, err);
    q->b = gp_alloc_doubles(c->D * c->p, err);
    if (!q->L || !q->z || !q->b) {
        rfgp_post_free(q);
        return GP_ENOMEM;
    }
    return GP_OK;
}

/* The prior: P = I / s0, so L = I / sqrt(s0), b = z = 0. */
void rfgp_post_prior(const rfgp_cfg *c, post *q, double s0)
{
    size_t D = c->D;
    memset(q->L, 0, rfgp_packed_len(D) * sizeof *q->L);
    double *col = q->L;
    for (size_t j = 0; j < D; col += D - j, j++)
        col[0] = 1.0 / sqrt(s0);
    memset(q->z, 0, D * c->p * sizeof *q->z);
    memset(q->b, 0, D * c->p * sizeof *q->b);
    q->n = q->refactorisations = q->rank_one = 0.0;
}

int rfgp_map_alloc(const rfgp_cfg *c, fmap *m, gp_error *err)
{
    memset(m, 0, sizeof *m);
    size_t m_in = c->two_stage ? c->d_in : c->dk;
    int ok = (m->w_out = gp_alloc_doubles(m_in * c->D, err)) &&
             (m->b_out = gp_alloc_doubles(c->D, err)) &&
             (m->widths = gp_alloc_doubles(c->dk, err)) &&
             (m->x_mean = gp_alloc_doubles(c->dk, err)) &&
             (m->x_scale = gp_alloc_doubles(c->dk, err)) &&
             (m->y_mean = gp_alloc_doubles(c->p, err)) &&
             (m->y_scale = gp_alloc_doubles(c->p, err));
    if (ok && c->two_stage)
        ok = (m->w_in = gp_alloc_doubles(c->dk * c->d_in, err)) &&
             (m->b_in = gp_alloc_doubles(c->d_in, err));
    if (!ok) {
        rfgp_map_free(m);
        return GP_ENOMEM;
    }
    return GP_OK;
}

void rfgp_embed_of(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, gp_embed *e)
{
    memset(e, 0, sizeof *e);
    e->input = *in;
    e->dk = c->dk;
    e->d_in = c->two_stage ? c->d_in : 0;
    e->d_out = c->D;
    e->w_in = m->w_in;
    e->b_in = m->b_in;
    e->w_out = m->w_out;
    e->b_out = m->b_out;
    if (!c->two_stage) {
        e->x_mean = m->x_mean;
        e->x_scale = m->x_scale;
    }
}

int rfgp_impl_new(const rfgp_cfg *c, rfgp_impl **out, gp_error *err)
{
    rfgp_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    im->c = *c;
    size_t cx = 0, cy = 0;
    int rc = gp_checked_size(c->warmup, c->width, &cx, err);
    if (rc == GP_OK)
        rc = gp_checked_size(c->warmup, c->p, &cy, err);
    if (rc == GP_OK && (!(im->threshold = gp_alloc_doubles(c->p, err)) ||
                        !(im->buf_x = gp_alloc_doubles(cx ? cx : 1, err)) ||
                        !(im->buf_y = gp_alloc_doubles(cy ? cy : 1, err))))
        rc = GP_ENOMEM;
    if (rc) {
        rfgp_impl_free(im);
        return rc;
    }
    *out = im;
    return GP_OK;
}

/* Per output, tau_j in original units (§2, §8.2, §8.13). */
void rfgp_set_thresholds(const gp_model *model, rfgp_impl *im)
{
    const rfgp_cfg *c = &im->c;
    im->always_asks = 0;
    for (size_t q = 0; q < c->p; q++) {
        double ys = im->map.y_scale[q], lnoise = log(model->noise_variance * ys * ys);
        if (c->gate_absolute) {
            im->threshold[q] = c->gate_tau;
            if (c->gate_tau <= lnoise)
                im->always_asks = 1;
        } else
            im->threshold[q] = lnoise + log1p(c->kappa);
    }
}

/* ---- predict and sample ---- */

/* v <- L^{-1} v for each of the b columns of V (D x b): the batch-invariant
 * packed solve, so a point's numbers never depend on its batch. */
static void whiten(const rfgp_impl *im, double *V, size_t b)
{
    gp_solve_lower_packed_columns(im->post.L, im->c.D, V, b, im->c.D);
}

/* Means, variances and the gate of b points (whitened columns of V) from
 * point `start` of the request. */
static void predict_points(const gp_model *model, const gp_predict_request *req, const double *V,
                           size_t start, size_t b, gp_prediction *out)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m;
    double noise = model->noise_variance;
    for (size_t i = 0; i < b; i++) {
        const double *v = V + i * D;
        double vv = gp_dot(v, v, D);
        int ask = 0;
        for (size_t q = 0; q < p; q++) {
            double ys = im->map.y_scale[q], ys2 = ys * ys;
            out->mean[q * m + start + i] = gp_dot(v, im->post.z + q * D, D) * ys + im->map.y_mean[q];
            out->variance[q * m + start + i] = (vv + (req->include_noise ? noise : 0.0)) * ys2;
            ask |= log((vv + noise) * ys2) >= im->threshold[q];
        }
        if (out->ask_oracle)
            out->ask_oracle[start + i] = (unsigned char)ask;
    }
}

/* The latent covariance V^T V (m x m), per output times its scale squared. */
static void predict_covariance(const gp_model *model, const gp_predict_request *req,
                               const double *V, gp_prediction *out)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m;
    double *C0 = out->covariance;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)m, (blasint)D, 1.0, V,
                (blasint)D, 0.0, C0, (blasint)m);
    gp_symmetrize_from_lower(C0, m, m);
    for (size_t q = p; q-- > 0;) {
        double ys = im->map.y_scale[q], ys2 = ys * ys, *C = out->covariance + q * m * m;
        for (size_t i = 0; i < m * m; i++)
            C[i] = C0[i] * ys2;
        for (size_t i = 0; i < m; i++) {
            if (req->include_noise)
                C[i * m + i] += model->noise_variance * ys2;
            out->variance[q * m + i] = C[i * m + i];
        }
    }
}

static int rfgp_predict_body(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                             gp_error *err)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, m = req->m;
    if (m == 0)
        return GP_OK;
    size_t block = req->full_covariance ? m : gp_predict_block_rows(D, m), count;
    int rc = gp_checked_size(D, block, &count, err);
    if (rc)
        return rc;
    gp_embed e;
    rfgp_embed_of(&im->c, &model->input, &im->map, &e);
    e.per_point = 1;
    gp_embed_work *w = NULL;
    double *V = gp_alloc_doubles(count, err);
    rc = V ? gp_embed_work_new(&e, block, &w, err) : GP_ENOMEM;
    for (size_t start = 0; rc == GP_OK && start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        gp_embed_features_in(&e, w, req->X, m, start, b, V);
        whiten(im, V, b);
        predict_points(model, req, V, start, b, out);
    }
    if (rc == GP_OK && req->full_covariance)
        predict_covariance(model, req, V, out);
    gp_embed_work_free(w);
    free(V);
    return rc;
}

int rfgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                 gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_predict_body(model, req, out, err);
    gp_blas_serial_end();
    return rc;
}

static int rfgp_sample_body(const gp_model *model, const gp_sample_request *req, double *samples,
                            gp_error *err)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m, S = req->n_samples, ws;
    if (m == 0 || S == 0)
        return GP_OK;
    int rc = gp_checked_size(D, S, &ws, err);
    if (rc)
        return rc;
    size_t block = gp_predict_block_rows(D, m);
    gp_embed e;
    rfgp_embed_of(&im->c, &model->input, &im->map, &e);
    gp_embed_work *w = NULL;
    double *W = gp_alloc_doubles(ws, err), *Psi = gp_alloc_doubles(D * block, err);
    rc = W && Psi ? gp_embed_work_new(&e, block, &w, err) : GP_ENOMEM;
    gp_rng rng, noise;
    gp_rng_seed(&rng, req->seed);
    gp_rng_derive(&noise, req->seed, STREAM_SAMPLE_NOISE);
    double sd = sqrt(model->noise_variance);
    /* one block holds every point: their features serve every output */
    if (rc == GP_OK && block == m)
        gp_embed_features_in(&e, w, req->X, m, 0, m, Psi);
    for (size_t q = 0; rc == GP_OK && q < p; q++) {
        /* weight draws w = L^{-T} (z_q + e): N(P^{-1} b_q, P^{-1}) */
        gp_rng_normal_fill(&rng, W, D * S);
        for (size_t s = 0; s < S; s++) {
            double *ws_ = W + s * D;
            for (size_t j = 0; j < D; j++)
                ws_[j] += im->post.z[q * D + j];
            cblas_dtpsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                        im->post.L, ws_, 1);
        }
        double *out = samples + q * m * S, ys = im->map.y_scale[q], ym = im->map.y_mean[q];
        for (size_t start = 0; start < m; start += block) {
            size_t b = m - start < block ? m - start : block;
            if (block < m)
                gp_embed_features_in(&e, w, req->X, m, start, b, Psi);
            cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)b, (blasint)S,
                        (blasint)D, 1.0, Psi, (blasint)D, W, (blasint)D, 0.0, out + start,
                        (blasint)m);
        }
        for (size_t i = 0; i < m * S; i++) {
            double f = out[i] + (req->include_noise ? sd * gp_rng_normal(&noise) : 0.0);
            out[i] = f * ys + ym;
        }
    }
    gp_embed_work_free(w);
    free(W);
    free(Psi);
    return rc;
}

int rfgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_sample_body(model, req, samples, err);
    gp_blas_serial_end();
    return rc;
}

