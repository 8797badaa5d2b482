/* gpserve core: the value the suggestion engine maximises (see evaluate.h). */
#include "core/bo/evaluate.h"

#include <math.h>
#include <string.h>

#define VAR_FLOOR_RELATIVE 1e-12

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
