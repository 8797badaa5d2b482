/* pls: export and import (§5.2 A6). */
#include "core/methods/pls/persist.h"

#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/pls/model.h"
#include "core/model/method.h"

/* ---- A6: export / import ---- */

int pls_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const pls_impl *im = model->impl;
    int rc = gp_state_put(st, "Z", im->d, im->M, im->Z, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "V", im->M, im->mk, im->V, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "lambda", im->mk, 1, im->lam, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "prior_mode_r", im->rmode ? 1.0 : 0.0, err);
    if (rc == GP_OK && im->J)
        rc = gp_state_put(st, "particles", im->mk, im->J, im->A, err);
    if (rc == GP_OK && !im->J)
        rc = gp_state_put(st, "mu", im->mk, 1, im->mu, err);
    if (rc == GP_OK && !im->J)
        rc = gp_state_put_cholesky(st, "H_chol", im->R, im->mk, err);
    return rc;
}

static int check_finite(const gp_named_array *a, gp_error *err)
{
    size_t bad = 0;
    if (!gp_all_finite(a->data, a->rows * a->cols, &bad))
        return gp_error_set(err, GP_EDATA, a->name, "%s holds a non-finite value at %zu",
                            a->name, bad);
    return GP_OK;
}

/* Shapes of the stored arrays: M landmarks of the model's dimension, mk <= M
 * eigenpairs with positive eigenvalues, and J particles or the closed form. */
static int import_shapes(const gp_model *model, const gp_state *st, size_t *M, size_t *mk,
                         size_t *J, gp_error *err)
{
    const gp_named_array *z = gp_state_find(st, "Z"), *v = gp_state_find(st, "V"),
                         *l = gp_state_find(st, "lambda"), *a = gp_state_find(st, "particles");
    if (z == NULL || z->rows != model->input_dim || z->cols == 0)
        return gp_error_set(err, GP_EDATA, "Z", "missing or malformed landmarks");
    if (v == NULL || v->rows != z->cols || v->cols == 0 || v->cols > v->rows)
        return gp_error_set(err, GP_EDATA, "V", "missing or malformed eigenvectors");
    if (l == NULL || l->rows != v->cols || l->cols != 1)
        return gp_error_set(err, GP_EDATA, "lambda", "missing or malformed eigenvalues");
    if (a && (a->rows != v->cols || a->cols == 0))
        return gp_error_set(err, GP_EDATA, "particles", "malformed particles");
    const gp_named_array *all[4] = {z, v, l, a};
    for (size_t i = 0; i < 4; i++) {
        int rc = all[i] ? check_finite(all[i], err) : GP_OK;
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < l->rows; i++)
        if (!(l->data[i] > 0.0))
            return gp_error_set(err, GP_EDATA, "lambda", "eigenvalue %zu is not positive", i);
    *M = z->cols;
    *mk = v->cols;
    *J = a ? a->cols : 0;
    return GP_OK;
}

static int import_closed(pls_impl *im, const gp_state *st, gp_error *err)
{
    const double *mu;
    int rc = gp_state_get(st, "mu", im->mk, 1, &mu, err);
    if (rc == GP_OK)
        rc = check_finite(gp_state_find(st, "mu"), err);
    if (rc == GP_OK)
        rc = gp_state_get_cholesky(st, "H_chol", im->mk, im->R, err);
    if (rc == GP_OK)
        memcpy(im->mu, mu, im->mk * sizeof *mu);
    return rc;
}

int pls_import(gp_model *model, const gp_state *st, gp_error *err)
{
    size_t M = 0, mk = 0, J = 0;
    double rmode = 0.0;
    int rc = import_shapes(model, st, &M, &mk, &J, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "prior_mode_r", &rmode, err);
    if (rc == GP_OK && rmode != 0.0 && rmode != 1.0)
        rc = gp_error_set(err, GP_EDATA, "prior_mode_r", "prior_mode_r must be 0 or 1");
    if (rc == GP_OK)
        rc = gp_method_check_kernel(model->method, model->kernel, err);
    if (rc)
        return rc;
    pls_impl *im = pls_impl_alloc(model->input_dim, M, mk, J, err);
    if (im == NULL)
        return GP_ENOMEM;
    im->rmode = rmode != 0.0;
    memcpy(im->Z, gp_state_find(st, "Z")->data, model->input_dim * M * sizeof *im->Z);
    memcpy(im->V, gp_state_find(st, "V")->data, M * mk * sizeof *im->V);
    memcpy(im->lam, gp_state_find(st, "lambda")->data, mk * sizeof *im->lam);
    if (J)
        memcpy(im->A, gp_state_find(st, "particles")->data, mk * J * sizeof *im->A);
    else
        rc = import_closed(im, st, err);
    if (rc == GP_OK)
        rc = pls_impl_derive(im, model->kernel, err);
    if (rc) {
        pls_impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}
