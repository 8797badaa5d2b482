/* The fitted "gwi" model: its posterior, predict and sample. */
#include "core/methods/gwi/model.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/loss.h"
#include "core/methods/gwi/network.h"

void gwi_free(void *p)
{
    gwi_impl *im = p;
    if (im == NULL)
        return;
    gp_inducing_post_free(&im->post);
    free(im->theta);
    free(im);
}

/* The whitened posterior of the fitted parameters (gp_inducing_post's form). */
int gwi_build_post(const gp_gwi_setup *s, const double *theta, double jitter, double alpha,
                   gp_inducing_post *p, gp_error *err)
{
    size_t m = s->m;
    int rc = gp_inducing_post_alloc(p, m, s->d, err);
    if (rc)
        return rc;
    memcpy(p->Z, s->Z, s->d * m * sizeof *s->Z);
    memcpy(p->L, s->Lk, m * m * sizeof *s->Lk);
    p->jitter = jitter;
    p->scale = alpha;
    /* C = (Lk^T L)(Lk^T L)^T, with Lk^T L formed in mt's place first */
    double *T = NULL;
    if ((rc = gwi_alloc2(&T, m, m, err)) != GP_OK)
        return rc;
    memset(T, 0, m * m * sizeof *T);
    gp_unpack_lower(theta + gp_gwi_mean_size(s), m, T, m);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 1.0, s->Lk, (blasint)m, T, (blasint)m);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0, T,
                (blasint)m, 0.0, p->C, (blasint)m);
    gp_symmetrize_from_lower(p->C, m, m);
    free(T);
    memset(p->mt, 0, m * sizeof *p->mt);
    if (s->mean == GP_GWI_MEAN_KERNEL_SUM) {
        memcpy(p->mt, theta, m * sizeof *theta);
        cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, s->Lk,
                    (blasint)m, p->mt, 1);
    }
    return GP_OK;
}

/* Memory checked before anything is allocated: the workspace and the data
 * copies within the budget of an exact fit of max_train_points points. */
/* ---- predict and sample ---- */

/* Adds y_scale net(x) to the n_cols columns (m each) of out, for the
 * network mean; P the standardised points (d x m). per_point: the network a
 * point at a time (predict: a point's mean does not depend on the other
 * points of the call); 0: BLAS (the sample path, one call). */
static int add_network_mean(const gp_model *model, const gwi_impl *im, const double *P, size_t m,
                            double *out, size_t n_cols, int per_point, gp_error *err)
{
    size_t d = model->input_dim, h = im->hidden, block = m < 1024 ? m : 1024;
    if (block == 0)
        return GP_OK;
    size_t wt = h * (d > h ? d : h);
    double *buf = NULL; /* H1, H2 (h x block each), f (block), WT */
    int rc = gwi_alloc2(&buf, 2 * h + 1 + (wt + block - 1) / block, block, err);
    double *H1 = buf, *H2 = buf + h * block, *f = buf + 2 * h * block, *WT = f + block;
    for (size_t start = 0; rc == GP_OK && start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        if (per_point)
            gwi_mlp_forward_points(im->theta, d, h, P + start * d, b, WT, H1, H2, f);
        else
            gwi_mlp_forward(im->theta, d, h, P + start * d, b, H1, H2, f);
        for (size_t c = 0; c < n_cols; c++)
            for (size_t j = 0; j < b; j++)
                out[c * m + start + j] += model->y_scale * f[j];
    }
    free(buf);
    return rc;
}

int gwi_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err)
{
    const gwi_impl *im = model->impl;
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_predict_points(model, &im->post, P, req, out, err);
    if (rc == GP_OK && im->mean == GP_GWI_MEAN_MLP)
        rc = add_network_mean(model, im, P, req->m, out->mean, 1, 1, err);
    free(P);
    return rc;
}

int gwi_sample(const gp_model *model, const gp_sample_request *req, double *samples,
               gp_error *err)
{
    const gwi_impl *im = model->impl;
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_sample_points(model, &im->post, P, req, samples, err);
    if (rc == GP_OK && im->mean == GP_GWI_MEAN_MLP)
        rc = add_network_mean(model, im, P, req->m, samples, req->n_samples, 0, err);
    free(P);
    return rc;
}
