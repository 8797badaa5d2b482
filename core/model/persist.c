/* The common part of a model's state (model.h's export and import;
 * persist.h): kernel, shape, noise, standardisation, diagnostics,
 * likelihood, outputs, input kind, priors and bounds, warnings, mean; the
 * method adds its own arrays. */
#include "core/model/persist.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/base/rng.h"
#include "core/kernel/kernel_codec.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/mixture.h"

#define GP_STATE_FORMAT 1
#define GP_DIAG_FIELDS 7

/* What a non-Gaussian model's predictions need beside the method's state. */
int gp_model_prepare_likelihood(gp_model *model, gp_error *err)
{
    if (model->likelihood == GP_LIK_GAUSSIAN)
        return GP_OK;
    if (model->likelihood == GP_LIK_SOFTMAX) {
        gp_softmax_mc_free(&model->softmax_draws);
        return gp_softmax_mc_init(&model->softmax_draws, model->n_outputs,
                                  GP_SOFTMAX_PREDICT_DRAWS, err);
    }
    return gp_quadrature_init(&model->quadrature, GP_LIK_QUADRATURE_POINTS, err);
}

/* ---- export / import of the common part ---- */

static int is_count(double v);

#define WARNING_COLS 5 /* code, entry, upper, value, limit */

/* "warnings", only when there are some (other states keep their arrays). */
static int export_warnings(const gp_fit_warnings *w, gp_state *st, gp_error *err)
{
    if (w->n == 0)
        return GP_OK;
    double a[GP_FIT_WARNINGS_MAX * WARNING_COLS];
    for (size_t i = 0; i < w->n; i++) {
        const gp_fit_warning *x = &w->w[i];
        double v[WARNING_COLS] = {(double)x->code, (double)x->entry, (double)x->upper, x->value,
                                  x->limit};
        for (size_t c = 0; c < WARNING_COLS; c++)
            a[c * w->n + i] = v[c];
    }
    return gp_state_put(st, "warnings", w->n, WARNING_COLS, a, err);
}

static int import_warnings(const gp_state *st, gp_model *model, gp_error *err)
{
    const gp_named_array *a = gp_state_find(st, "warnings");
    if (a == NULL)
        return GP_OK;
    size_t n = a->rows, entries = gp_kernel_n_params(model->kernel) + 1;
    if (a->cols != WARNING_COLS || n > GP_FIT_WARNINGS_MAX)
        return gp_error_set(err, GP_EDATA, "warnings", "corrupt warnings");
    for (size_t i = 0; i < n; i++) {
        const double *d = a->data;
        double code = d[i], entry = d[n + i];
        if (!(code == GP_WARN_AT_BOUND || code == GP_WARN_AT_NOISE_FLOOR) || !is_count(entry) ||
            entry >= (double)entries)
            return gp_error_set(err, GP_EDATA, "warnings", "corrupt warnings");
        model->warnings.w[i] = (gp_fit_warning){(gp_warning_code)code, (size_t)entry,
                                                d[2 * n + i] != 0.0, d[3 * n + i], d[4 * n + i]};
    }
    model->warnings.n = n;
    return GP_OK;
}

static int export_common(const gp_model *model, gp_state *st, gp_error *err)
{
    size_t klen = gp_kernel_encode(model->kernel, NULL);
    double *code = gp_alloc_doubles(klen, err);
    if (code == NULL)
        return GP_ENOMEM;
    gp_kernel_encode(model->kernel, code);
    int rc = gp_state_put_owned(st, "kernel", klen, 1, code, err);
    const gp_diagnostics *dg = &model->diag;
    double shape[2] = {(double)model->n_train, (double)model->input_dim};
    double ystats[2] = {model->y_mean, model->y_scale};
    double diag[GP_DIAG_FIELDS] = {dg->objective,  (double)dg->iterations,
                                   (double)dg->evaluations, (double)dg->restarts,
                                   (double)dg->converged,   dg->fit_seconds,
                                   dg->jitter};
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "format_version", GP_STATE_FORMAT, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "shape", 2, 1, shape, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "noise_variance", model->noise_variance, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "standardize", model->standardize, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "x_mean", model->input_dim, 1, model->x_mean, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "x_scale", model->input_dim, 1, model->x_scale, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "y_stats", 2, 1, ystats, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "diagnostics", GP_DIAG_FIELDS, 1, diag, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "likelihood", (double)model->likelihood, err);
    /* written only when not the default, so that states of point models of
     * one output keep the arrays they always had */
    if (rc == GP_OK && model->n_outputs > 1)
        rc = gp_state_put_scalar(st, "n_outputs", (double)model->n_outputs, err);
    if (rc == GP_OK && model->per_point_noise)
        rc = gp_state_put_scalar(st, "per_point_noise", 1.0, err);
    if (rc == GP_OK)
        rc = gp_mean_export(model->mean_type, model->mean_coef, model->input_dim, st, err);
    if (rc == GP_OK && model->input.kind != GP_INPUT_POINT) {
        double spec[GP_INPUT_CODE_LEN];
        gp_input_spec_encode(&model->input, spec);
        rc = gp_state_put(st, "input_spec", GP_INPUT_CODE_LEN, 1, spec, err);
    }
    if (rc == GP_OK)
        rc = gp_hyper_export(model->hyper, st, err);
    if (rc == GP_OK)
        rc = export_warnings(&model->warnings, st, err);
    return rc;
}

int gp_model_export(const gp_model *model, gp_state *st, gp_error *err)
{
    int rc = export_common(model, st, err);
    if (rc == GP_OK)
        rc = model->method->ops->export_impl(model, st, err);
    return rc;
}

static int is_count(double v)
{
    return isfinite(v) && v >= 0.0 && v == floor(v) && v < 1e15;
}

/* "likelihood" (absent in states written before likelihoods: gaussian). */
static int import_likelihood(const gp_state *st, gp_model *model, gp_error *err)
{
    model->likelihood = GP_LIK_GAUSSIAN;
    if (gp_state_find(st, "likelihood") == NULL)
        return GP_OK;
    double v;
    int rc = gp_state_get_scalar(st, "likelihood", &v, err);
    if (rc)
        return rc;
    if (!is_count(v) || v >= GP_LIK_COUNT)
        return gp_error_set(err, GP_EDATA, "likelihood", "unknown likelihood %g", v);
    model->likelihood = (gp_likelihood)v;
    return GP_OK;
}

/* "n_outputs" and "input_spec" (absent: one output, points). */
static int import_shape(const gp_state *st, gp_model *model, gp_error *err)
{
    int rc = GP_OK;
    if (gp_state_find(st, "n_outputs")) {
        double p;
        rc = gp_state_get_scalar(st, "n_outputs", &p, err);
        if (rc == GP_OK && (!is_count(p) || p < 1 || p > 1e6))
            rc = gp_error_set(err, GP_EDATA, "n_outputs", "corrupt output count");
        if (rc == GP_OK)
            model->n_outputs = (size_t)p;
    }
    const gp_named_array *a = gp_state_find(st, "input_spec");
    if (rc == GP_OK && a) {
        rc = gp_input_spec_decode(a->data, a->rows * a->cols, &model->input, err);
        if (rc == GP_OK && gp_input_width(&model->input) != model->input_dim)
            rc = gp_error_set(err, GP_EDATA, "input_spec", "input spec does not match the shape");
    }
    return rc;
}

/* A diagnostics count as stored: an int, and a state from outside (a model
 * file) may hold any double, whose conversion past int's range is undefined. */
static int diag_count(double v)
{
    return v >= 0.0 && v <= (double)INT_MAX ? (int)v : 0;
}

static int import_common(const gp_method *m, const gp_state *st, gp_model **out, gp_error *err)
{
    const double *shape, *p;
    double version;
    int rc = gp_state_get_scalar(st, "format_version", &version, err);
    if (rc == GP_OK && version != GP_STATE_FORMAT)
        return gp_error_set(err, GP_EDATA, "format_version", "unknown model format %g", version);
    if (rc == GP_OK)
        rc = gp_state_get(st, "shape", 2, 1, &shape, err);
    if (rc)
        return rc;
    if (!is_count(shape[0]) || !is_count(shape[1]) || shape[1] < 1)
        return gp_error_set(err, GP_EDATA, "shape", "corrupt model shape");
    size_t n = (size_t)shape[0], d = (size_t)shape[1];
    gp_model *model = gp_model_alloc(m, n, d, err);
    if (model == NULL)
        return err ? err->code : GP_ENOMEM;
    const gp_named_array *kc = gp_state_find(st, "kernel");
    double standardize = 0.0;
    rc = import_shape(st, model, err);
    if (rc == GP_OK)
        rc = kc ? gp_kernel_decode(kc->data, kc->rows * kc->cols, &model->kernel, err)
                : gp_error_set(err, GP_EDATA, "kernel", "model state has no kernel");
    if (rc == GP_OK && model->kernel->input_dim != gp_input_point_dim(&model->input))
        rc = gp_error_set(err, GP_EDATA, "kernel", "kernel dimension does not match the model");
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "noise_variance", &model->noise_variance, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "standardize", &standardize, err);
    if (rc == GP_OK && (rc = gp_state_get(st, "x_mean", d, 1, &p, err)) == GP_OK)
        memcpy(model->x_mean, p, d * sizeof *p);
    if (rc == GP_OK && (rc = gp_state_get(st, "x_scale", d, 1, &p, err)) == GP_OK)
        memcpy(model->x_scale, p, d * sizeof *p);
    if (rc == GP_OK && (rc = gp_state_get(st, "y_stats", 2, 1, &p, err)) == GP_OK) {
        model->y_mean = p[0];
        model->y_scale = p[1];
    }
    if (rc == GP_OK && (rc = gp_state_get(st, "diagnostics", GP_DIAG_FIELDS, 1, &p, err)) == 0) {
        model->diag.objective = p[0];
        model->diag.iterations = diag_count(p[1]);
        model->diag.evaluations = diag_count(p[2]);
        model->diag.restarts = diag_count(p[3]);
        model->diag.converged = diag_count(p[4]);
        model->diag.fit_seconds = p[5];
        model->diag.jitter = p[6];
    }
    model->standardize = standardize != 0.0;
    if (rc == GP_OK)
        rc = import_likelihood(st, model, err);
    if (rc == GP_OK)
        rc = gp_hyper_import(st, model->kernel, &model->hyper, err);
    if (rc == GP_OK)
        rc = import_warnings(st, model, err);
    if (rc == GP_OK) {
        int gaussian = model->likelihood == GP_LIK_GAUSSIAN && model->n_outputs <= 1;
        model->diag.log_prior =
            gp_hyper_log_prior(model->hyper, model->kernel, gaussian ? model->noise_variance : -1);
    }
    if (rc == GP_OK && gp_state_find(st, "per_point_noise")) {
        double v;
        rc = gp_state_get_scalar(st, "per_point_noise", &v, err);
        if (rc == GP_OK && v != 1.0)
            rc = gp_error_set(err, GP_EDATA, "per_point_noise", "corrupt per-point noise flag");
        model->per_point_noise = 1;
    }
    if (rc == GP_OK)
        rc = gp_mean_import(st, d, &model->mean_type, &model->mean_coef, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

int gp_model_import(const gp_method *m, const gp_state *st, gp_model **out, gp_error *err)
{
    *out = NULL;
    gp_model *model = NULL;
    int rc = import_common(m, st, &model, err);
    if (rc)
        return rc;
    /* A stored kernel the method does not take is a foreign or corrupt state. */
    rc = gp_method_check_kernel(m, model->kernel, err);
    if (rc == GP_OK)
        rc = m->ops->import_impl(model, st, err);
    if (rc == GP_OK)
        rc = gp_model_prepare_likelihood(model, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}
