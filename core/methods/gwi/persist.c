/* Export and import of a fitted "gwi" model (B7). */
#include "core/methods/gwi/persist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/model.h"

/* ---- export / import (B7) ---- */

int gwi_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const gwi_impl *im = model->impl;
    int rc = gp_inducing_post_export(&im->post, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "params", im->n_theta, 1, im->theta, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "temper", im->post.scale, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "mean_mlp", im->mean == GP_GWI_MEAN_MLP ? 1.0 : 0.0, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "hidden", (double)im->hidden, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "noise_learned", im->learn_noise ? 1.0 : 0.0, err);
    return rc;
}

/* The mean kind and width, checked (GP_EDATA naming the array). */
static int import_shape(const gp_state *st, gwi_impl *im, gp_error *err)
{
    double mlp, hidden, alpha, learned;
    int rc = gp_state_get_scalar(st, "mean_mlp", &mlp, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "noise_learned", &learned, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "hidden", &hidden, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "temper", &alpha, err);
    if (rc)
        return rc;
    if (mlp != 0.0 && mlp != 1.0)
        return gp_error_set(err, GP_EDATA, "mean_mlp", "mean_mlp must be 0 or 1");
    if (learned != 0.0 && learned != 1.0)
        return gp_error_set(err, GP_EDATA, "noise_learned", "noise_learned must be 0 or 1");
    im->learn_noise = learned == 1.0;
    if (!(hidden >= 1.0 && hidden <= 4096.0 && hidden == floor(hidden)))
        return gp_error_set(err, GP_EDATA, "hidden", "hidden must be a width from 1 to 4096");
    if (!(alpha >= GP_GWI_TEMPER_MIN && alpha <= GP_GWI_TEMPER_MAX))
        return gp_error_set(err, GP_EDATA, "temper", "temper must lie in [%g, %g]",
                            GP_GWI_TEMPER_MIN, GP_GWI_TEMPER_MAX);
    im->mean = mlp == 1.0 ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
    im->hidden = (size_t)hidden;
    im->post.scale = alpha;
    return GP_OK;
}

int gwi_import(gp_model *model, const gp_state *st, gp_error *err)
{
    /* the kernel type was checked by gp_model_import */
    gwi_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_inducing_post_import(model, st, &im->post, err);
    if (rc == GP_OK)
        rc = import_shape(st, im, err);
    const double *theta = NULL;
    if (rc == GP_OK) {
        gp_gwi_setup s = {.m = im->post.m, .d = model->input_dim, .mean = im->mean,
                          .hidden = im->hidden, .learn_noise = im->learn_noise};
        im->n_theta = gp_gwi_n_params(&s);
        rc = gp_state_get(st, "params", im->n_theta, 1, &theta, err);
    }
    size_t bad;
    if (rc == GP_OK && !gp_all_finite(theta, im->n_theta, &bad))
        rc = gp_error_set(err, GP_EDATA, "params", "params[%zu] is not finite", bad);
    if (rc == GP_OK && (im->theta = gp_alloc_doubles(im->n_theta, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc) {
        gwi_free(im);
        return rc;
    }
    memcpy(im->theta, theta, im->n_theta * sizeof *theta);
    model->impl = im;
    return GP_OK;
}
