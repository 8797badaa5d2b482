/* Export and import of a fitted "ssgp" model. */
#include "core/methods/ssgp/persist.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/methods/ssgp/internal.h"
#include "core/methods/ssgp/model.h"

/* ---- export / import ---- */

int ssgp_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const ssgp_impl *im = model->impl;
    size_t m = im->m;
    int rc = gp_state_put_cholesky(st, "chol_packed", im->L, m, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "omega", im->R, im->d, im->omega, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", m, 1, im->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "sampler", (double)im->sampler, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "phi_y", m, 1, im->phi_y, err);
    if (rc == GP_OK && isfinite(im->y_sq)) /* unknown for some states from before phi_y */
        rc = gp_state_put_scalar(st, "y_sq", im->y_sq, err);
    if (rc == GP_OK && model->per_point_noise) /* only then: other states keep their bytes */
        rc = gp_state_put_scalar(st, "noise_logd", im->log_d, err);
    return rc;
}

/* Phi^T y and y^T y of a state written before they were stored: Phi^T y =
 * A alpha (to alpha's rounding times cond(A)), and y^T y from the stored
 * objective, whose q = y^T y - b^T alpha - jitter ||alpha||^2 it solves for
 * (update_objective's formula); NAN when the objective is not finite. */
static void targets_from_alpha(const gp_model *model, ssgp_impl *im)
{
    size_t m = im->m;
    memcpy(im->phi_y, im->alpha, m * sizeof *im->phi_y);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, im->L,
                (blasint)m, im->phi_y, 1);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, im->L,
                (blasint)m, im->phi_y, 1);
    double s = model->noise_variance, n = (double)model->n_train;
    double lml = model->diag.objective + n * log(model->y_scale);
    double q = -2.0 * s * (lml + 0.5 * gp_chol_logdet(im->L, m, m) - (double)im->R * log(s) +
                           0.5 * n * (LOG_2PI + log(s)));
    im->y_sq = q + cblas_ddot((blasint)m, im->phi_y, 1, im->alpha, 1) +
               model->diag.jitter * cblas_ddot((blasint)m, im->alpha, 1, im->alpha, 1);
    if (!isfinite(im->y_sq))
        im->y_sq = NAN;
}

static int import_targets(const gp_model *model, const gp_state *st, ssgp_impl *im,
                          gp_error *err)
{
    const double *b;
    if (gp_state_find(st, "phi_y") == NULL) {
        targets_from_alpha(model, im);
        return GP_OK;
    }
    int rc = gp_state_get(st, "phi_y", im->m, 1, &b, err);
    if (rc)
        return rc;
    memcpy(im->phi_y, b, im->m * sizeof *b);
    im->y_sq = NAN;
    if (gp_state_find(st, "y_sq"))
        rc = gp_state_get_scalar(st, "y_sq", &im->y_sq, err);
    return rc;
}

int ssgp_import(gp_model *model, const gp_state *st, gp_error *err)
{
    const gp_named_array *om = gp_state_find(st, "omega");
    if (om == NULL || om->rows == 0 || om->cols != model->kernel->n_active)
        return gp_error_set(err, GP_EDATA, "omega", "missing or malformed frequencies");
    ssgp_impl *im = ssgp_impl_alloc(model->kernel, om->rows, err);
    if (im == NULL)
        return GP_ENOMEM;
    const double *alpha;
    double sampler = 0;
    size_t m = im->m;
    int rc = gp_state_get_cholesky(st, "chol_packed", m, im->L, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", m, 1, &alpha, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "sampler", &sampler, err);
    if (rc == GP_OK && !(sampler >= 0 && sampler < GP_FREQ_SAMPLER_COUNT))
        rc = gp_error_set(err, GP_EDATA, "sampler", "unknown frequency sampler");
    if (rc == GP_OK) {
        memcpy(im->omega, om->data, im->R * im->d * sizeof *im->omega);
        memcpy(im->alpha, alpha, m * sizeof *alpha);
        im->sampler = (gp_freq_sampler)sampler;
        ssgp_impl_set_kernel(im, model->kernel);
        rc = import_targets(model, st, im, err);
    }
    if (rc == GP_OK && model->per_point_noise) {
        rc = gp_state_get_scalar(st, "noise_logd", &im->log_d, err);
        if (rc == GP_OK && !(isfinite(im->log_d) && im->log_d <= 0.0))
            rc = gp_error_set(err, GP_EDATA, "noise_logd", "corrupt per-point noise term");
    }
    if (rc) {
        ssgp_impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}
