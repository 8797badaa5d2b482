/* Export and import of a fitted "msrfr" model. */
#include "core/methods/msrfr/persist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/msrfr/internal.h"
#include "core/methods/msrfr/model.h"

/* ---- export / import ---- */

int msrfr_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t M = im->M, R = im->R, d = im->d, m = im->m, np = m * (m + 1) / 2;
    double *pooled = gp_alloc_doubles(M * R * d, err), *packed = gp_alloc_doubles(np * M, err);
    int rc = pooled && packed ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t k = 0; k < M; k++) {
            for (size_t j = 0; j < d; j++)
                memcpy(pooled + j * M * R + k * R, im->omega + k * R * d + j * R,
                       R * sizeof *pooled);
            gp_pack_lower(im->L + k * m * m, m, m, packed + k * np);
        }
        rc = gp_state_put(st, "omega", M * R, d, pooled, err);
    }
    if (rc == GP_OK)
        rc = gp_state_put(st, "chol_packed", np, M, packed, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", m, M, im->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "variance_scale", im->variance_scale, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "particles", (double)M, err);
    free(pooled);
    free(packed);
    return rc;
}

/* The factors from their packed columns; a diagonal that is not positive
 * and finite means a corrupt or foreign array. */
static int import_factors(msrfr_impl *im, const double *packed, gp_error *err)
{
    size_t m = im->m, np = m * (m + 1) / 2;
    for (size_t k = 0; k < im->M; k++) {
        double *L = im->L + k * m * m;
        memset(L, 0, m * m * sizeof *L);
        gp_unpack_lower(packed + k * np, m, L, m);
        for (size_t i = 0; i < m; i++)
            if (!(L[i * m + i] > 0.0) || !isfinite(L[i * m + i]))
                return gp_error_set(err, GP_EDATA, "chol_packed",
                                    "component %zu: the factor's diagonal is not positive", k);
    }
    return GP_OK;
}

int msrfr_import(gp_model *model, const gp_state *st, gp_error *err)
{
    double Md = 0, scale = 1;
    int rc = gp_state_get_scalar(st, "particles", &Md, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "variance_scale", &scale, err);
    if (rc)
        return rc;
    const gp_named_array *om = gp_state_find(st, "omega");
    size_t d = model->kernel->n_active, M = (size_t)Md;
    if (!(Md >= 1 && Md <= 1e6 && Md == floor(Md)) || !(scale > 0 && isfinite(scale)) ||
        om == NULL || om->cols != d || om->rows == 0 || om->rows % M != 0)
        return gp_error_set(err, GP_EDATA, "omega", "missing or malformed particles");
    size_t R = om->rows / M;
    msrfr_impl *im = msrfr_impl_alloc(model->kernel, M, R, err);
    if (im == NULL)
        return GP_ENOMEM;
    const double *packed, *alpha;
    size_t m = im->m;
    rc = gp_state_get(st, "chol_packed", m * (m + 1) / 2, M, &packed, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", m, M, &alpha, err);
    if (rc == GP_OK)
        rc = import_factors(im, packed, err);
    if (rc == GP_OK) {
        for (size_t k = 0; k < M; k++)
            for (size_t j = 0; j < d; j++)
                memcpy(im->omega + k * R * d + j * R, om->data + j * M * R + k * R,
                       R * sizeof *im->omega);
        memcpy(im->alpha, alpha, m * M * sizeof *alpha);
        im->variance_scale = scale;
        msrfr_impl_set_kernel(im, model->kernel);
        model->impl = im;
        return GP_OK;
    }
    msrfr_impl_free(im);
    return rc;
}
