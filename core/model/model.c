/* The user API of a model (core/model/model.h): the lifecycle (fit, with
 * the checks every method shares) and online learning. Predictions and
 * samples: predict.c; the common part of export/import: persist.c. The
 * descriptor's facts and option validation: descriptor.c; what methods use
 * to build a model (gp_model_alloc, gp_model_free, the data checks):
 * method.c. */
#include "core/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/coreg/params.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/persist.h"
#include "core/model/predict.h"
#include "core/model/rows_passes.h"

/* ---- lifecycle ---- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


/* What the descriptor allows: several outputs, an empty fit, inputs other
 * than points, and an encoded width that matches the input spec. */
static int check_fit_shape(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    size_t p = req->n_outputs ? req->n_outputs : 1;
    if (p > 1 && !m->multi_output && m->coregionalization && !gp_fit_coregionalised(m, req))
        return gp_error_set(err, GP_EUNSUPPORTED, "y",
                            "y: %zu outputs; method '%s' models several outputs jointly with "
                            "options.coregionalization (e.g. {\"type\": \"icm\"}), "
                            "docs/design/multioutput.md",
                            p, m->name);
    if (p > 1 && !m->multi_output && !gp_fit_coregionalised(m, req))
        return gp_error_set(err, GP_EUNSUPPORTED, "y",
                            "method '%s' fits one output: y must be a list of numbers", m->name);
    if (req->n == 0 && !m->starts_empty)
        return gp_error_set(err, GP_EDATA, "X", "training data is empty");
    if (req->input.kind != GP_INPUT_POINT) {
        if (!(m->input_kinds & (1u << req->input.kind)))
            return gp_error_set(err, GP_EUNSUPPORTED, "options.input",
                                "method '%s' takes points, not %s inputs", m->name,
                                gp_input_kind_name(req->input.kind));
        if (req->d != gp_input_width(&req->input))
            return gp_error_set(err, GP_EDATA, "X",
                                "%s inputs of this spec are %zu numbers, not %zu",
                                gp_input_kind_name(req->input.kind),
                                gp_input_width(&req->input), req->d);
    }
    if (req->d == 0)
        return gp_error_set(err, GP_EDATA, "X", "the inputs have no columns");
    return GP_OK;
}

/* Rows read in chunks (gp_fit_request.rows) go to the methods that stream
 * them, with one output of points and no per-point noise; the rows' own
 * values are checked by their reader (rows.h: every value finite). */
static int check_rows_taken(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    if (!m->streams_rows)
        return gp_error_set(err, GP_EUNSUPPORTED, "data.dataset",
                            "method '%s' needs its rows in memory: a fit over a data set "
                            "streams with ssgp, sgpr or svgp (GET /v1/methods: streams_rows)",
                            m->name);
    int rc = gp_rows_check(req->rows, err);
    if (rc)
        return rc;
    if (req->rows->d != req->d || req->rows->n_total != req->n || req->X || req->y ||
        req->noise_per_point || (req->n_outputs > 1) || req->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EINVAL, "data",
                            "a fit over a data set has one gaussian output, no per-point noise "
                            "and no X or y of its own");
    if (req->n == 0)
        return gp_error_set(err, GP_EDATA, "data.rows", "the data set has no rows");
    return gp_check_fit_settings(req, err);
}

/* A spec that states something goes to methods that honour it; a noise
 * entry only to a model with a noise. */
static int check_hyper_taken(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    const gp_hyper_spec *s = req->hyper;
    if (s == NULL)
        return GP_OK;
    int held = 0;
    for (size_t i = 0; i < s->n_kernel; i++)
        held |= s->entry[i].fixed;
    if ((gp_hyper_shapes_objective(s) || held) && !m->hyper_priors)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.priors",
                            "method '%s' does not take priors, bounds or single held "
                            "hyperparameters (GET /v1/methods lists those that do)",
                            m->name);
    const gp_hyper_entry *noise = &s->entry[s->n_kernel];
    if (req->likelihood != GP_LIK_GAUSSIAN && gp_hyper_entry_stated(noise) && !s->preset)
        return gp_error_set(err, GP_EINVAL, "kernel.priors.noise",
                            "a %s model has no noise variance to give a prior or bounds",
                            gp_likelihood_name(req->likelihood));
    return GP_OK;
}

/* The working targets' power mean(y^2), whose 1e-8 is the noise floor
 * (gp_noise_param_init). */
static double working_power(const gp_model *model, const gp_fit_request *req)
{
    double power = 1.0;
    if (req->rows) { /* one more pass: the floor is only for the warnings */
        gp_rows_sync s;
        gp_error err;
        int rc = gp_rows_sync_init(&s, req->rows, NULL, &err);
        if (rc == GP_OK)
            rc = gp_rows_target_power(&s, model->y_mean, model->y_scale, &power, &err);
        gp_rows_sync_free(&s);
        return rc ? 1.0 : power;
    }
    double ss = 0.0;
    for (size_t i = 0; i < req->n; i++) {
        double t = (req->y[i] - model->y_mean) / model->y_scale;
        ss += t * t;
    }
    return req->n && ss > 0.0 && isfinite(ss) ? ss / (double)req->n : 1.0;
}

/* The spec stays with the model; the bounds its fit ended on and its log
 * prior are found from the fitted values. */
static int keep_hyper(gp_model *model, const gp_fit_request *req, gp_error *err)
{
    int rc = GP_OK;
    if (req->hyper && model->hyper == NULL) /* gp_model_new copies it; a method may not */
        rc = gp_hyper_spec_copy(&model->hyper, req->hyper, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    int gaussian = model->likelihood == GP_LIK_GAUSSIAN && model->n_outputs <= 1;
    double noise = gaussian ? model->noise_variance : -1.0;
    double floor = gaussian && req->n ? GP_NOISE_FLOOR_REL * working_power(model, req) : 0.0;
    gp_hyper_find_warnings(model->hyper, model->kernel, noise, floor, !req->noise_fixed,
                           &model->warnings);
    model->diag.log_prior = gp_hyper_log_prior(model->hyper, model->kernel, noise);
    return GP_OK;
}

/* A mean other than zero: a known type, on a method that learns one, for
 * one output. A method that sets mean_functions takes a mean with every
 * likelihood it fits: with a non-Gaussian one the mean is the latent f's
 * (svgp, pls), moved before the likelihood's predictive is formed. */
static int check_mean_taken(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    if (req->mean == GP_MEAN_ZERO)
        return GP_OK;
    if (gp_mean_name(req->mean) == NULL)
        return gp_error_set(err, GP_EINVAL, "mean.type", "mean.type: unknown mean type %d",
                            (int)req->mean);
    if (!m->mean_functions)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: method '%s' fits a zero mean only (GET /v1/methods lists "
                            "the methods that take a constant or linear mean: mean_functions)",
                            m->name);
    if (req->n_outputs > 1)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: a constant or linear mean is for one output");
    return GP_OK;
}

/* What a coregionalised fit does not take (yet), and the option's checks
 * that need p (rank, the output count). */
static int check_coreg_taken(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    if (!gp_fit_coregionalised(m, req))
        return GP_OK;
    if (req->mean != GP_MEAN_ZERO)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: a constant or linear mean with options.coregionalization is "
                            "not supported yet (give the zero mean)");
    if (req->noise_per_point)
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.per_point",
                            "noise.per_point: known per-point noise with "
                            "options.coregionalization is not supported yet");
    if (req->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                            "likelihood: a coregionalised model is gaussian only");
    if (req->hyper && gp_hyper_shapes_objective(req->hyper))
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.priors",
                            "kernel.priors: priors and bounds with options.coregionalization "
                            "are not supported yet (held parameters are)");
    /* solver: the method's own check_option has taken or refused it */
    gp_coreg_spec spec;
    return gp_coreg_spec_from_request(req, 1, &spec, err);
}

int gp_model_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    *out = NULL;
    int rc = gp_options_validate(m, req->options, req->n_options, err);
    if (rc == GP_OK)
        rc = check_fit_shape(m, req, err);
    if (rc == GP_OK)
        rc = check_coreg_taken(m, req, err);
    if (rc == GP_OK && req->rows)
        rc = check_rows_taken(m, req, err);
    else if (rc == GP_OK)
        rc = req->n == 0 && m->starts_empty ? gp_check_fit_settings(req, err)
                                            : gp_check_training_data(req, err);
    if (rc == GP_OK && req->n > 0 && gp_fit_coregionalised(m, req))
        rc = gp_coreg_check_targets(req->y, req->n, req->n_outputs ? req->n_outputs : 1, 1,
                                    req->standardize, 0, err);
    if (rc == GP_OK)
        rc = gp_options_check_data(m, req->options, req->n_options, req->d, err);
    /* The descriptor's kernel facts are the rule, whatever the method checks itself. */
    if (rc == GP_OK && req->kernel)
        rc = gp_method_check_kernel(m, req->kernel, err);
    if (rc == GP_OK && !gp_method_accepts_likelihood(m, req->likelihood))
        rc = gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                          "method '%s' does not fit the %s likelihood", m->name,
                          gp_likelihood_name(req->likelihood));
    if (rc == GP_OK && req->likelihood != GP_LIK_GAUSSIAN)
        rc = gp_likelihood_check_labels(req->likelihood, req->y, req->n, err);
    if (rc == GP_OK)
        rc = check_hyper_taken(m, req, err);
    if (rc == GP_OK && req->noise_per_point && !m->per_point_noise)
        rc = gp_error_set(err, GP_EUNSUPPORTED, "noise.per_point",
                          "noise.per_point: method '%s' does not take known per-point noise "
                          "(GET /v1/methods lists the methods that do: per_point_noise)",
                          m->name);
    if (rc == GP_OK)
        rc = check_mean_taken(m, req, err);
    if (rc)
        return rc;
    double t0 = seconds_now();
    rc = m->ops->fit(m, req, out, err);
    if (rc == GP_OK)
        (*out)->diag.fit_seconds = seconds_now() - t0;
    if (rc == GP_OK)
        rc = keep_hyper(*out, req, err);
    if (rc == GP_OK && (rc = gp_model_prepare_likelihood(*out, err)) != GP_OK) {
        gp_model_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- online learning (gp_model_online_status: predict.c) ---- */

int gp_model_observe(gp_model *model, const double *X, const double *Y, size_t k,
                     gp_error *err)
{
    return gp_model_observe_noise(model, X, Y, NULL, k, err);
}

/* Per-point noise in observe: a model fitted with it needs the rows' own,
 * one fitted without takes none, and the method must have observe_noise. */
static int check_observe_noise(const gp_model *model, const double *noise, size_t k,
                               gp_error *err)
{
    if (model->per_point_noise && noise == NULL)
        return gp_error_set(err, GP_EINVAL, "noise",
                            "noise: the model was fitted with known per-point noise; give the "
                            "noise variance of every observed row");
    if (noise == NULL)
        return GP_OK;
    if (!model->per_point_noise || model->method->ops->observe_noise == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "noise",
                            "noise: method '%s' %s", model->method->name,
                            model->per_point_noise ? "does not observe rows with known noise"
                                                   : "model was fitted without per-point noise");
    return gp_check_noise_values(noise, k, "noise", err);
}

int gp_model_observe_noise(gp_model *model, const double *X, const double *Y,
                           const double *noise, size_t k, gp_error *err)
{
    const gp_method *m = model->method;
    if (m->ops->observe == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, NULL,
                            "method '%s' does not update online: fit a new version with all "
                            "the data instead",
                            m->name);
    if (k == 0 || X == NULL || Y == NULL)
        return gp_error_set(err, GP_EDATA, "X", "no rows given");
    int rc = gp_model_check_inputs(model, X, k, model->input_dim, err);
    size_t count = 0, bad = 0;
    if (rc == GP_OK)
        rc = gp_checked_size(k, model->n_outputs, &count, err);
    if (rc)
        return rc;
    /* a coregionalised model's new rows may miss outputs (NaN) */
    if (model->coreg.type != GP_COREG_NONE &&
        (rc = gp_coreg_check_targets(Y, k, model->n_outputs, 0, 0, 0, err)) != GP_OK)
        return rc;
    if (model->coreg.type == GP_COREG_NONE && !gp_all_finite(Y, count, &bad)) {
        char field[GP_ERROR_FIELD_LEN];
        gp_y_field(field, sizeof field, bad, k, model->n_outputs);
        return gp_error_set(err, GP_EDATA, field, "%s is not a finite number", field);
    }
    if (model->likelihood != GP_LIK_GAUSSIAN &&
        (rc = gp_likelihood_check_labels(model->likelihood, Y, k, err)) != GP_OK)
        return rc;
    if ((rc = check_observe_noise(model, noise, k, err)) != GP_OK)
        return rc;
    /* A model with a mean updates its residual process: the new targets
     * less the mean, whose coefficients stay the fit's until the next fit. */
    double *R = NULL;
    if (model->mean_type != GP_MEAN_ZERO) {
        if ((R = gp_alloc_doubles(k, err)) == NULL)
            return GP_ENOMEM;
        gp_model_mean_shift(model, X, k, R);
        for (size_t i = 0; i < k; i++)
            R[i] = Y[i] - R[i];
        Y = R;
    }
    /* Each method bounds its own working values (GP_WORKING_LIMIT, with the
     * statistics it standardises by) before it changes anything. */
    rc = noise ? m->ops->observe_noise(model, X, Y, noise, k, err)
               : m->ops->observe(model, X, Y, k, err);
    free(R);
    return rc;
}
