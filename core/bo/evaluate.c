/* gpserve core: the value the suggestion engine maximises (see evaluate.h). */
#include "core/bo/evaluate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

#define VAR_FLOOR_RELATIVE 1e-12
/* Points per gp_model_predict call of gp_bo_eval_batch. */
#define BATCH 128

double gp_bo_var_floor(const gp_model *m)
{
    return VAR_FLOOR_RELATIVE * m->y_scale * m->y_scale;
}

static int posterior(gp_bo_eval *e, const gp_model *m, const double *u, double *mean, double *var,
                     double *dmean, double *dvar)
{
    int rc = gp_model_predict_grad(m, u, mean, var, dmean, dvar, &e->err);
    if (rc == GP_OK && !(isfinite(*mean) && isfinite(*var)))
        rc = gp_error_set(&e->err, GP_EINTERNAL, NULL, "the posterior is not finite");
    if (rc != GP_OK && e->rc == GP_OK)
        e->rc = rc;
    return rc;
}

static double objective_part(gp_bo_eval *e, const double *u, double *grad)
{
    const size_t D = e->D;
    if (e->feasibility_only) {
        if (grad)
            memset(grad, 0, D * sizeof *grad);
        return 0.0;
    }
    if (e->spec.kind == GP_ACQ_THOMPSON) {
        double s = e->spec.maximize ? 1.0 : -1.0;
        double f = gp_bo_thompson_value(e->thompson, u, grad);
        for (size_t j = 0; grad != NULL && j < D; j++)
            grad[j] *= s;
        return s * f;
    }
    double mean, var, dmean[GP_BO_MAX_DIM], dvar[GP_BO_MAX_DIM];
    if (posterior(e, e->objective, u, &mean, &var, grad ? dmean : NULL, grad ? dvar : NULL))
        return -INFINITY;
    gp_acq_posterior p = {mean, var, dmean, dvar};
    return gp_acq_value(&e->spec, &p, D, grad);
}

double gp_bo_eval_value(gp_bo_eval *e, const double *u, double *grad)
{
    e->evaluations++;
    double v = objective_part(e, u, grad);
    for (size_t c = 0; c < e->n_constraints && isfinite(v); c++) {
        double mean, var, dmean[GP_BO_MAX_DIM], dvar[GP_BO_MAX_DIM];
        const gp_model *m = e->constraints[c];
        if (posterior(e, m, u, &mean, &var, grad ? dmean : NULL, grad ? dvar : NULL))
            return -INFINITY;
        gp_acq_posterior p = {mean, var, dmean, dvar};
        v += gp_acq_log_feasibility(e->limits[c], &p, gp_bo_var_floor(m), e->D, grad);
    }
    return isnan(v) ? -INFINITY : v;
}

/* Latent means and variances of model at the b points of Xc (b x D,
 * column-major). */
static int predict_block(gp_bo_eval *e, const gp_model *m, const double *Xc, size_t b,
                         double *mean, double *var)
{
    gp_predict_request req = {.X = Xc, .m = b, .d = e->D};
    gp_prediction out = {.mean = mean, .variance = var};
    int rc = gp_model_predict(m, &req, &out, &e->err);
    for (size_t i = 0; rc == GP_OK && i < b; i++)
        if (!(isfinite(mean[i]) && isfinite(var[i])))
            rc = gp_error_set(&e->err, GP_EINTERNAL, NULL, "the posterior is not finite");
    if (rc != GP_OK && e->rc == GP_OK)
        e->rc = rc;
    return rc;
}

static int batch_block(gp_bo_eval *e, const double *U, size_t b, double *Xc, double *mean,
                       double *var, double *values)
{
    const size_t D = e->D;
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < D; j++)
            Xc[i + b * j] = U[i * D + j];
    int thompson = e->spec.kind == GP_ACQ_THOMPSON;
    if (!e->feasibility_only && !thompson &&
        predict_block(e, e->objective, Xc, b, mean, var) != GP_OK)
        return e->rc;
    for (size_t i = 0; i < b; i++) {
        double s = e->spec.maximize ? 1.0 : -1.0;
        gp_acq_posterior p = {mean[i], var[i], NULL, NULL};
        values[i] = e->feasibility_only ? 0.0
                    : thompson          ? s * gp_bo_thompson_value(e->thompson, U + i * D, NULL)
                                        : gp_acq_value(&e->spec, &p, D, NULL);
    }
    for (size_t c = 0; c < e->n_constraints; c++) {
        const gp_model *m = e->constraints[c];
        if (predict_block(e, m, Xc, b, mean, var) != GP_OK)
            return e->rc;
        for (size_t i = 0; i < b; i++) {
            gp_acq_posterior p = {mean[i], var[i], NULL, NULL};
            values[i] += gp_acq_log_feasibility(e->limits[c], &p, gp_bo_var_floor(m), D, NULL);
        }
    }
    for (size_t i = 0; i < b; i++)
        if (isnan(values[i]))
            values[i] = -INFINITY;
    e->evaluations += b;
    return GP_OK;
}

int gp_bo_eval_batch(gp_bo_eval *e, const double *U, size_t m, double *values, gp_error *err)
{
    double *Xc = gp_alloc_doubles(BATCH * e->D, err), *mean = gp_alloc_doubles(BATCH, err),
           *var = gp_alloc_doubles(BATCH, err);
    int rc = Xc && mean && var ? GP_OK : GP_ENOMEM;
    for (size_t at = 0; rc == GP_OK && at < m; at += BATCH) {
        size_t b = m - at < BATCH ? m - at : BATCH;
        rc = batch_block(e, U + at * e->D, b, Xc, mean, var, values + at);
        if (rc != GP_OK)
            gp_error_set(err, rc, e->err.field, "%s", e->err.message);
    }
    free(Xc);
    free(mean);
    free(var);
    return rc;
}
