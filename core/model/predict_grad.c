/* The posterior's gradient in x: see core/model/predict_grad.h. The checks
 * every method would repeat and the chain of standardisation and mean
 * function; the method's op gives the latent posterior in working units. */
#include "core/model/predict_grad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/model.h"

int gp_method_can_predict_grad(const gp_method *m)
{
    return m->ops->predict_grad != NULL;
}

static int check_model(const gp_model *model, gp_error *err)
{
    const gp_method *m = model->method;
    if (m->ops->predict_grad == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "method",
                            "method '%s' gives no posterior gradient in x (exact and sgpr do)",
                            m->name);
    if (model->n_outputs != 1 || model->coreg.type != GP_COREG_NONE)
        return gp_error_set(err, GP_EUNSUPPORTED, "n_outputs",
                            "the posterior gradient in x is for models of one output (this "
                            "one has %zu%s)",
                            model->n_outputs,
                            model->coreg.type != GP_COREG_NONE ? ", coregionalised" : "");
    if (model->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                            "the posterior gradient in x is for the gaussian likelihood, not %s",
                            gp_likelihood_name(model->likelihood));
    if (model->input.kind != GP_INPUT_POINT)
        return gp_error_set(err, GP_EUNSUPPORTED, "input",
                            "the posterior gradient in x is for models of points");
    return GP_OK;
}

/* The working point, refusing "x[j]" when it is not finite or lies beyond
 * GP_WORKING_LIMIT once standardised. */
static int working_point(const gp_model *model, const double *x, double *P, gp_error *err)
{
    for (size_t j = 0; j < model->input_dim; j++) {
        P[j] = (x[j] - model->x_mean[j]) / model->x_scale[j];
        if (!(isfinite(x[j]) && fabs(P[j]) <= GP_WORKING_LIMIT)) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "x[%zu]", j);
            return gp_error_set(err, GP_EDATA, field,
                                "%s = %g is not a finite number within %g standard deviations "
                                "of the training inputs",
                                field, x[j], GP_WORKING_LIMIT);
        }
    }
    return GP_OK;
}

/* Working-unit answers into the caller's units (predict_grad.h). */
static void to_caller_units(const gp_model *model, const double *P, double f, double v,
                            double *mean, double *var, double *dmean, double *dvar)
{
    size_t d = model->input_dim;
    double ys = model->y_scale, ys2 = ys * ys;
    *mean = model->y_mean +
            ys * (f + gp_mean_at(model->mean_type, model->mean_coef, P, d));
    int clamped = !(v > 0.0);
    *var = clamped ? 0.0 : ys2 * v;
    for (size_t j = 0; dmean && j < d; j++) {
        double dh = model->mean_type == GP_MEAN_LINEAR ? model->mean_coef[1 + j] : 0.0;
        dmean[j] = ys * (dmean[j] + dh) / model->x_scale[j];
    }
    for (size_t j = 0; dvar && j < d; j++)
        dvar[j] = clamped ? 0.0 : ys2 * dvar[j] / model->x_scale[j];
}

/* Nothing non-finite leaves: the answers checked once made. */
static int all_finite(size_t d, double mean, double var, const double *dmean, const double *dvar)
{
    int ok = isfinite(mean) && isfinite(var);
    for (size_t j = 0; ok && j < d; j++)
        ok = (dmean == NULL || isfinite(dmean[j])) && (dvar == NULL || isfinite(dvar[j]));
    return ok;
}

int gp_model_predict_grad(const gp_model *model, const double *x, double *mean, double *var,
                          double *dmean, double *dvar, gp_error *err)
{
    int rc = check_model(model, err);
    if (rc)
        return rc;
    double *P = gp_alloc_doubles(model->input_dim, err), f = 0.0, v = 0.0;
    if (P == NULL)
        return GP_ENOMEM;
    rc = working_point(model, x, P, err);
    if (rc == GP_OK)
        rc = model->method->ops->predict_grad(model, P, &f, &v, dmean, dvar, err);
    if (rc == GP_OK)
        to_caller_units(model, P, f, v, mean, var, dmean, dvar);
    free(P);
    if (rc == GP_OK && !all_finite(model->input_dim, *mean, *var, dmean, dvar))
        rc = gp_error_set(err, GP_EDATA, "x",
                          "the posterior at x is not finite in float64 (the model's scale "
                          "times the point's overflows)");
    return rc;
}
