/* The fitted model's metadata, stored with its version as the text of the
 * model JSON (docs/design/api.md, "Fit response (201) and the model JSON"):
 * kernel with what the fit stated, noise, hyperparameters, diagnostics with
 * the log prior, warnings, method_info, mean, standardisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* A method_info value: text, an integer when the number is one (counts), else
 * a real. */
static json_t *info_value(const gp_info_item *it)
{
    double v = it->number;
    if (it->string)
        return json_string(it->string);
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return gp_json_real(v);
}

/* The bounds the fit ended on, as scikit-learn's ConvergenceWarning says
 * it: [{"code", "hyperparameter", "bound", "value", "limit", "message"}]. */
static json_t *warnings_json(const gp_model *m)
{
    json_t *a = json_array();
    for (size_t i = 0; i < m->warnings.n; i++) {
        const gp_fit_warning *w = &m->warnings.w[i];
        char name[GP_ERROR_FIELD_LEN], msg[320];
        gp_hyper_entry_name(m->kernel, w->entry, name, sizeof name);
        if (w->code == GP_WARN_AT_NOISE_FLOOR)
            snprintf(msg, sizeof msg,
                     "the noise variance ended at the built-in floor (%.3g, 1e-8 of the "
                     "targets' variance): the data may repeat points or be noiseless; state "
                     "a noise prior or a lower bound",
                     w->limit);
        else
            snprintf(msg, sizeof msg,
                     "%s ended at its %s bound %.6g: the optimum may lie beyond it; widen the "
                     "bounds if that is not intended",
                     name, w->upper ? "upper" : "lower", w->limit);
        json_t *o = json_object();
        json_object_set_new(o, "code", json_string(gp_warning_code_name(w->code)));
        json_object_set_new(o, "hyperparameter", json_string(name));
        json_object_set_new(o, "bound", json_string(w->code == GP_WARN_AT_NOISE_FLOOR ? "floor"
                                                    : w->upper                        ? "upper"
                                                                                      : "lower"));
        json_object_set_new(o, "value", gp_json_real(w->value));
        json_object_set_new(o, "limit", gp_json_real(w->limit));
        json_object_set_new(o, "message", json_string(msg));
        json_array_append_new(a, o);
    }
    return a;
}

/* {"type", "coefficients" (working units: b0, w), "coefficients_original"
 * (the caller's units: y = c0 + sum_j c_j x_j)}. */
static json_t *mean_json(const gp_model *m)
{
    size_t p = gp_mean_n_coef(m->mean_type, m->input_dim);
    double *c = malloc((p ? p : 1) * sizeof *c);
    json_t *o = json_object(), *w = json_array(), *orig = json_array();
    if (c)
        gp_mean_original(m->mean_type, m->mean_coef, m->input_dim, m->x_mean, m->x_scale,
                         m->y_mean, m->y_scale, c);
    for (size_t j = 0; c && j < p; j++) {
        json_array_append_new(w, gp_json_real(m->mean_coef[j]));
        json_array_append_new(orig, gp_json_real(c[j]));
    }
    free(c);
    json_object_set_new(o, "type", json_string(gp_mean_name(m->mean_type)));
    json_object_set_new(o, "coefficients", w);
    json_object_set_new(o, "coefficients_original", orig);
    return o;
}

json_t *gp_api_model_info_json(const gp_model *m)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int gaussian = m->likelihood == GP_LIK_GAUSSIAN;
    json_object_set_new(o, "kernel", gp_kernel_to_json_spec(m->kernel, m->hyper));
    json_object_set_new(o, "likelihood", json_string(gp_likelihood_name(m->likelihood)));
    if (m->likelihood == GP_LIK_SOFTMAX) /* the columns of its predictions: classes 0..C-1 */
        json_object_set_new(o, "classes", json_integer((json_int_t)m->n_outputs));
    if (gaussian) { /* other likelihoods have no noise variance */
        json_object_set_new(o, "noise_variance", gp_json_real(m->noise_variance));
        json_object_set_new(o, "noise_variance_original",
                            gp_json_real(m->noise_variance * m->y_scale * m->y_scale));
        if (m->per_point_noise) /* noise_variance is then the homoscedastic part only */
            json_object_set_new(o, "per_point_noise", json_true());
    }
    if (m->mean_type != GP_MEAN_ZERO) /* absent: a zero mean */
        json_object_set_new(o, "mean", mean_json(m));
    json_t *hp = json_object();
    size_t np = gp_kernel_n_params(m->kernel);
    double *theta = np ? malloc(np * sizeof *theta) : NULL;
    if (theta) {
        gp_kernel_get_params(m->kernel, theta);
        for (size_t i = 0; i < np; i++) {
            char name[128];
            gp_kernel_param_name(m->kernel, i, name, sizeof name);
            json_object_set_new(hp, name, gp_json_real(exp(theta[i])));
        }
        free(theta);
    }
    if (gaussian)
        json_object_set_new(hp, "noise_variance", gp_json_real(m->noise_variance));
    json_object_set_new(o, "hyperparameters", hp);
    const gp_diagnostics *dg = &m->diag;
    json_t *d = json_object();
    json_object_set_new(d, "objective", gp_json_real(dg->objective));
    json_object_set_new(d, "objective_name",
                        json_string(dg->objective_name ? dg->objective_name
                                                       : m->method->objective_name));
    json_object_set_new(d, "iterations", json_integer(dg->iterations));
    json_object_set_new(d, "evaluations", json_integer(dg->evaluations));
    json_object_set_new(d, "restarts", json_integer(dg->restarts));
    json_object_set_new(d, "converged", json_boolean(dg->converged));
    json_object_set_new(d, "fit_seconds", gp_json_real(dg->fit_seconds));
    json_object_set_new(d, "jitter", gp_json_real(dg->jitter));
    if (gp_hyper_shapes_objective(m->hyper)) { /* a MAP fit: the objective with the prior */
        json_object_set_new(d, "log_prior", gp_json_real(dg->log_prior));
        json_object_set_new(d, "objective_with_prior", gp_json_real(dg->objective + dg->log_prior));
        if (m->hyper->preset)
            json_object_set_new(d, "priors", json_string("default"));
    }
    json_object_set_new(o, "diagnostics", d);
    json_object_set_new(o, "warnings", warnings_json(m));
    int map = gp_hyper_shapes_objective(m->hyper);
    if (dg->n_info || map) {
        json_t *mi = json_object();
        for (size_t i = 0; i < dg->n_info; i++)
            json_object_set_new(mi, dg->info[i].key, info_value(&dg->info[i]));
        if (map) { /* the objective with and without the prior, beside the method's facts */
            json_object_set_new(mi, "log_prior", gp_json_real(dg->log_prior));
            json_object_set_new(mi, "objective_without_prior", gp_json_real(dg->objective));
            json_object_set_new(mi, "objective_with_prior",
                                gp_json_real(dg->objective + dg->log_prior));
        }
        json_object_set_new(o, "method_info", mi);
    }
    json_object_set_new(o, "standardize", json_boolean(m->standardize));
    json_t *st = json_object();
    json_t *xm = json_array(), *xs = json_array();
    for (size_t k = 0; k < m->input_dim; k++) {
        json_array_append_new(xm, gp_json_real(m->x_mean[k]));
        json_array_append_new(xs, gp_json_real(m->x_scale[k]));
    }
    json_object_set_new(st, "x_mean", xm);
    json_object_set_new(st, "x_scale", xs);
    json_object_set_new(st, "y_mean", gp_json_real(m->y_mean));
    json_object_set_new(st, "y_scale", gp_json_real(m->y_scale));
    json_object_set_new(o, "standardization", st);
    if (m->coreg.type != GP_COREG_NONE)
        json_object_set_new(o, "coregionalization", gp_api_coreg_json(m));
    return o;
}
