/* gpserve core: kriging-believer fantasies (see fantasy.h). */
#include "core/bo/fantasy.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/state.h"
#include "core/linalg/linalg.h"

int gp_bo_model_copy(const gp_model *model, gp_model **out, gp_error *err)
{
    gp_state st;
    gp_state_init(&st);
    int rc = gp_model_export(model, &st, err);
    if (rc == GP_OK)
        rc = gp_model_import(model->method, &st, out, err);
    gp_state_free(&st);
    return rc;
}

int gp_bo_posterior_means(const gp_model *model, const double *U, size_t k, double *mean,
                          gp_error *err)
{
    for (size_t i = 0; i < k; i++) {
        double var;
        int rc = gp_model_predict_grad(model, U + i * model->input_dim, &mean[i], &var, NULL,
                                       NULL, err);
        if (rc != GP_OK)
            return rc;
    }
    return GP_OK;
}

int gp_bo_observe_believed(gp_model *model, const double *U, size_t k, double *believed,
                           gp_error *err)
{
    if (k == 0)
        return GP_OK;
    if (!gp_method_can_observe(model->method))
        return gp_error_set(err, GP_EUNSUPPORTED, "model.method",
                            "method %s does not update online: pending trials and batches need "
                            "a method that does (exact, sgpr)",
                            model->method->name);
    size_t D = model->input_dim, count;
    int rc = gp_checked_size(k, D, &count, err);
    if (rc != GP_OK)
        return rc;
    double *X = gp_alloc_doubles(count, err), *y = gp_alloc_doubles(k, err);
    if (X == NULL || y == NULL) {
        free(X);
        free(y);
        return GP_ENOMEM;
    }
    rc = gp_bo_posterior_means(model, U, k, y, err);
    for (size_t i = 0; rc == GP_OK && i < k; i++) /* point-major -> column-major k x D */
        for (size_t j = 0; j < D; j++)
            X[i + k * j] = U[i * D + j];
    if (rc == GP_OK)
        rc = gp_model_observe(model, X, y, k, err);
    if (rc == GP_OK && believed != NULL)
        memcpy(believed, y, k * sizeof *y);
    free(X);
    free(y);
    return rc;
}
