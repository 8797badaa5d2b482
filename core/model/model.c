/* The user API of a model (core/model/model.h): the lifecycle, predictions
 * (batched, checked finite), the common part of export/import, observe. The
 * descriptor's facts and option validation: descriptor.c; what methods use
 * to build a model (gp_model_alloc, gp_model_free, the data checks): method.c.
 * This file calls both, neither calls it. */
#include "core/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "core/base/rng.h"
#include "core/kernel/kernel_codec.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/mixture.h"

#define GP_STATE_FORMAT 1
#define GP_DIAG_FIELDS 7

/* ---- lifecycle ---- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What a non-Gaussian model's predictions need beside the method's state. */
static int prepare_likelihood(gp_model *model, gp_error *err)
{
    if (model->likelihood == GP_LIK_GAUSSIAN)
        return GP_OK;
    return gp_quadrature_init(&model->quadrature, GP_LIK_QUADRATURE_POINTS, err);
}

/* What the descriptor allows: several outputs, an empty fit, inputs other
 * than points, and an encoded width that matches the input spec. */
static int check_fit_shape(const gp_method *m, const gp_fit_request *req, gp_error *err)
{
    size_t p = req->n_outputs ? req->n_outputs : 1;
    if (p > 1 && !m->multi_output)
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

int gp_model_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    *out = NULL;
    int rc = gp_options_validate(m, req->options, req->n_options, err);
    if (rc == GP_OK)
        rc = check_fit_shape(m, req, err);
    if (rc == GP_OK)
        rc = req->n == 0 && m->starts_empty ? gp_check_fit_settings(req, err)
                                            : gp_check_training_data(req, err);
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
    if (rc == GP_OK && (rc = prepare_likelihood(*out, err)) != GP_OK) {
        gp_model_free(*out);
        *out = NULL;
    }
    return rc;
}

static int check_inputs(const gp_model *model, const double *X, size_t m, size_t d,
                        gp_error *err)
{
    if (m == 0 || X == NULL)
        return gp_error_set(err, GP_EDATA, "X", "no points given");
    if (d != model->input_dim)
        return gp_error_set(err, GP_EDATA, "X", "X has %zu columns; the model expects %zu", d,
                            model->input_dim);
    size_t count = 0, bad = 0;
    int rc = gp_checked_size(m, d, &count, err);
    if (rc)
        return rc;
    if (model->input.kind != GP_INPUT_POINT)
        return gp_input_check(&model->input, X, m, "X", err);
    if (!gp_all_finite(X, count, &bad)) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "X[%zu][%zu]", bad % m, bad / m);
        return gp_error_set(err, GP_EDATA, field, "%s is not a finite number", field);
    }
    /* a finite point that overflows once standardised: named here, before
     * any work, rather than as the non-finite answer it would give */
    return gp_check_working_points(model, X, m, INFINITY, err);
}

/* Quantiles of the Gaussian N(mean, variance) of each point. */
static void gaussian_quantiles(const gp_predict_request *req, size_t p, gp_prediction *out)
{
    size_t m = req->m, nq = req->n_quantiles;
    for (size_t j = 0; j < p; j++)
        for (size_t q = 0; q < nq; q++) {
            double z = gp_normal_quantile(req->quantiles[q]);
            for (size_t i = 0; i < m; i++)
                out->quantiles[(j * nq + q) * m + i] =
                    out->mean[j * m + i] + sqrt(out->variance[j * m + i]) * z;
        }
}

/* An online model still in warm-up has nothing to predict with yet. */
static int check_not_warming_up(const gp_model *model, gp_error *err)
{
    gp_online_status st;
    gp_model_online_status(model, &st);
    if (!st.warmup)
        return GP_OK;
    return gp_error_set(err, GP_ECONFLICT, NULL,
                        "the model is warming up: %zu of the %zu rows it needs before it "
                        "predicts", st.n, st.warmup_target);
}

static int check_observation_buffers(const gp_model *model, const gp_predict_request *req,
                                     const gp_prediction *out, gp_error *err)
{
    int poisson = model->likelihood == GP_LIK_POISSON || model->likelihood == GP_LIK_POISSON_SQ;
    if (!out->latent_mean || !out->latent_variance || !out->obs_mean || !out->obs_variance ||
        (poisson && (!out->rate_mean || !out->rate_variance)))
        return gp_error_set(err, GP_EINVAL, NULL, "no buffers for the observation quantities");
    if (req->full_covariance && req->include_noise)
        return gp_error_set(err, GP_EUNSUPPORTED, "full_covariance",
                            "full_covariance: the covariance of %s observations has no closed "
                            "form; ask \"include_noise\": false for the latent function's",
                            gp_likelihood_name(model->likelihood));
    return GP_OK;
}

static void mean_shift(const gp_model *model, const double *X, size_t m, double *shift);

/* A non-Gaussian model's mean moves its latent f: the mixture's mean and
 * each component's (cm, m x K; the same buffer when K is 1), before the
 * likelihood turns them into y's predictive (not p(y) itself). */
static int add_mean_to_latent(const gp_model *model, const gp_predict_request *req, double *cm,
                              size_t K, double *latent_mean, gp_error *err)
{
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    size_t m = req->m;
    double *shift = gp_alloc_doubles(m ? m : 1, err);
    if (shift == NULL)
        return GP_ENOMEM;
    mean_shift(model, req->X, m, shift);
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < m; i++)
            cm[k * m + i] += shift[i];
    for (size_t i = 0; cm != latent_mean && i < m; i++)
        latent_mean[i] += shift[i];
    free(shift);
    return GP_OK;
}

/* Non-Gaussian likelihoods: the method predicts the latent f (a mixture of K
 * Gaussians for mixture methods), and the likelihood turns it into y's
 * predictive (docs/methods/sparse-variational-and-pls.md §5.2 A5). */
static int predict_observations(const gp_model *model, const gp_predict_request *req,
                                gp_prediction *out, gp_error *err)
{
    size_t m = req->m, K = gp_model_components(model), mk = 0;
    int rc = check_observation_buffers(model, req, out, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, K, &mk, err);
    if (rc)
        return rc;
    /* A mixture's components: the caller's buffers when asked, else ours. */
    double *own = NULL, *cm = out->latent_mean, *cv = out->latent_variance;
    if (K > 1) {
        cm = out->component_mean;
        cv = out->component_variance;
        if (!req->components) {
            if ((own = gp_alloc_doubles(2 * mk, err)) == NULL)
                return GP_ENOMEM;
            cm = own;
            cv = own + mk;
        }
    }
    gp_predict_request lreq = *req;
    lreq.include_noise = 0;
    lreq.quantiles = NULL;
    lreq.n_quantiles = 0;
    lreq.components = K > 1;
    gp_prediction lout = *out;
    lout.mean = out->latent_mean;
    lout.variance = out->latent_variance;
    lout.quantiles = NULL;
    lout.component_mean = K > 1 ? cm : NULL;
    lout.component_variance = K > 1 ? cv : NULL;
    rc = model->method->ops->predict(model, &lreq, &lout, err);
    if (rc == GP_OK)
        rc = add_mean_to_latent(model, req, cm, K, out->latent_mean, err);
    if (rc == GP_OK) {
        out->clamped = lout.clamped;
        gp_lik lik = {model->likelihood, 0.0};
        gp_lik_predict(&lik, &model->quadrature, cm, cv, m, K, out->obs_mean,
                       out->obs_variance, out->rate_mean, out->rate_variance);
        const double *mean = req->include_noise ? out->obs_mean : out->latent_mean;
        const double *var = req->include_noise ? out->obs_variance : out->latent_variance;
        memcpy(out->mean, mean, m * sizeof *mean);
        memcpy(out->variance, var, m * sizeof *var);
        if (req->n_quantiles && req->include_noise)
            gp_lik_quantiles(&lik, &model->quadrature, cm, cv, m, K, req->quantiles,
                             req->n_quantiles, out->quantiles);
        else if (req->n_quantiles)
            gp_mixture_quantiles(cm, cv, m, K, req->quantiles, req->n_quantiles, out->quantiles);
    }
    free(own);
    return rc;
}

int gp_predict_noise_included(const gp_model *model, const gp_predict_request *req)
{
    return req->include_noise && (!model->per_point_noise || req->noise != NULL);
}

/* The points' known noise: Gaussian single-Gaussian models, finite, >= 0. */
static int check_point_noise(const gp_model *model, const gp_predict_request *req,
                             gp_error *err)
{
    if (req->noise == NULL || !req->include_noise)
        return GP_OK;
    if (model->likelihood != GP_LIK_GAUSSIAN || model->method->ops->components != NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "noise",
                            "noise: known noise of the points is added to a Gaussian "
                            "predictive only (method '%s', %s likelihood)",
                            model->method->name, gp_likelihood_name(model->likelihood));
    return gp_check_noise_values(req->noise, req->m, "noise", err);
}

/* Every check of a predict request, before any work. */
static int predict_checks(const gp_model *model, const gp_predict_request *req,
                          const gp_prediction *out, gp_error *err)
{
    int rc = check_inputs(model, req->X, req->m, req->d, err);
    if (rc == GP_OK)
        rc = check_point_noise(model, req, err);
    if (rc)
        return rc;
    if (req->full_covariance && out->covariance == NULL)
        return gp_error_set(err, GP_EINVAL, "full_covariance", "no covariance buffer given");
    for (size_t q = 0; q < req->n_quantiles; q++)
        if (!(req->quantiles[q] > 0.0 && req->quantiles[q] < 1.0))
            return gp_error_set(err, GP_EINVAL, "quantiles",
                                "quantile levels must lie strictly between 0 and 1");
    if (req->n_quantiles && out->quantiles == NULL)
        return gp_error_set(err, GP_EINVAL, "quantiles", "no quantile buffer given");
    if (req->components && model->method->ops->components == NULL &&
        model->method->ops->parts == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "components",
                            "components: method '%s' predicts with a single Gaussian, not a "
                            "mixture or a sum of parts", model->method->name);
    if (req->components && (out->component_mean == NULL || out->component_variance == NULL))
        return gp_error_set(err, GP_EINVAL, "components", "no component buffers given");
    return check_not_warming_up(model, err);
}

/* Known noise of the points: the method's answer with the homoscedastic
 * noise when it is included (gp_predict_noise_included), plus each point's
 * own variance (caller's units, as the answer is) on every output's
 * variance and covariance diagonal. */
static int predict_with_point_noise(const gp_model *model, const gp_predict_request *req,
                                    gp_prediction *out, gp_error *err)
{
    gp_predict_request r = *req;
    r.include_noise = gp_predict_noise_included(model, req);
    int rc = model->method->ops->predict(model, &r, out, err);
    if (rc || !r.include_noise || req->noise == NULL)
        return rc;
    size_t m = req->m;
    for (size_t j = 0; j < model->n_outputs; j++)
        for (size_t i = 0; i < m; i++) {
            out->variance[j * m + i] += req->noise[i];
            if (req->full_covariance)
                out->covariance[j * m * m + i * m + i] += req->noise[i];
        }
    return GP_OK;
}

/* The mean function on m points (caller's units) into shift: y_scale
 * h(x_w)^T beta, what a model with a mean adds to everything the method
 * answers for its residual process. */
static void mean_shift(const gp_model *model, const double *X, size_t m, double *shift)
{
    for (size_t i = 0; i < m; i++)
        shift[i] = 0.0;
    gp_mean_add_original(model->mean_type, model->mean_coef, X, m, model->input_dim,
                         model->x_mean, model->x_scale, model->y_scale, shift);
}

/* A Gaussian answer's location fields moved by the mean: mean, and for a
 * mixture its components and its own quantiles (a single Gaussian's are
 * made from the moved mean afterwards). Variances do not change: the
 * coefficients are point estimates. */
static int add_mean_to_prediction(const gp_model *model, const gp_predict_request *req,
                                  gp_prediction *out, gp_error *err)
{
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    size_t m = req->m;
    double *shift = gp_alloc_doubles(m ? m : 1, err);
    if (shift == NULL)
        return GP_ENOMEM;
    mean_shift(model, req->X, m, shift);
    for (size_t i = 0; i < m; i++)
        out->mean[i] += shift[i];
    /* a mixture's components each carry the mean; a sum's parts do not
     * (the mean is none of them) */
    int mixture = model->method->ops->components != NULL;
    size_t K = req->components && mixture ? gp_model_components(model) : 0;
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < m; i++)
            out->component_mean[k * m + i] += shift[i];
    for (size_t q = 0; mixture && q < req->n_quantiles; q++)
        for (size_t i = 0; i < m; i++)
            out->quantiles[q * m + i] += shift[i];
    free(shift);
    return GP_OK;
}

/* The method's answer for exactly the points of req. */
static int predict_points(const gp_model *model, const gp_predict_request *req,
                          gp_prediction *out, gp_error *err)
{
    if (model->likelihood != GP_LIK_GAUSSIAN)
        return predict_observations(model, req, out, err);
    int rc;
    if (req->noise == NULL && !model->per_point_noise)
        rc = model->method->ops->predict(model, req, out, err);
    else
        rc = predict_with_point_noise(model, req, out, err);
    if (rc == GP_OK)
        rc = add_mean_to_prediction(model, req, out, err);
    if (rc == GP_OK && req->n_quantiles && model->method->ops->components == NULL)
        gaussian_quantiles(req, model->n_outputs, out);
    return rc;
}

/* ---- predictions of many points held in one buffer ----
 *
 * The per-point outputs a request asked for (which pointers of its
 * gp_prediction are set) and their widths: mean and variance m x p, quantiles
 * m x nq x p, components m x K, the six observation fields m each, the gate's
 * flags m. A "row range" copy moves points [off, off + m) of one such set of
 * buffers (of M points) to another of m points. */
typedef struct pred_shape {
    size_t p, nq, K;
    int fields; /* observation fields the likelihood writes (bernoulli: no rates) */
    int cov;    /* a covariance too (never in a joined call: same_options) */
} pred_shape;

static pred_shape shape_of(const gp_model *model, const gp_predict_request *req)
{
    size_t parts = gp_model_parts(model);
    pred_shape sh = {model->n_outputs, req->n_quantiles, 0, 0, req->full_covariance};
    if (model->likelihood != GP_LIK_GAUSSIAN)
        sh.fields = model->likelihood == GP_LIK_BERNOULLI ? 4 : 6;
    if (req->components)
        sh.K = parts ? parts : gp_model_components(model);
    return sh;
}

static double **obs_field(gp_prediction *pr, int k)
{
    double **f[6] = {&pr->latent_mean, &pr->latent_variance, &pr->obs_mean,
                     &pr->obs_variance, &pr->rate_mean, &pr->rate_variance};
    return f[k];
}

static const double *obs_value(const gp_prediction *pr, int k)
{
    const double *f[6] = {pr->latent_mean, pr->latent_variance, pr->obs_mean,
                          pr->obs_variance, pr->rate_mean, pr->rate_variance};
    return f[k];
}

/* Buffers for M points shaped like `like` (the same pointers set), in one
 * block *mem (caller frees); returns GP_OK or GP_ENOMEM. */
static int pred_alloc(const gp_prediction *like, pred_shape sh, size_t M, gp_prediction *pr,
                      double **mem, gp_error *err)
{
    memset(pr, 0, sizeof *pr);
    size_t n_obs = 0;
    for (int k = 0; k < sh.fields; k++)
        n_obs += obs_value(like, k) != NULL;
    /* + 1: the flags (a joined call asks no covariance: same_options) */
    size_t per_point = 2 * sh.p + sh.nq * sh.p + 2 * sh.K + n_obs + 1;
    size_t total = 0;
    if (gp_checked_size(M, per_point, &total, err))
        return GP_ENOMEM;
    double *p = *mem = gp_alloc_doubles(total, err);
    if (p == NULL)
        return GP_ENOMEM;
    pr->mean = p;
    pr->variance = p + M * sh.p;
    p += 2 * M * sh.p;
    if (like->quantiles) {
        pr->quantiles = p;
        p += M * sh.nq * sh.p;
    }
    if (like->component_mean) {
        pr->component_mean = p;
        pr->component_variance = p + M * sh.K;
        p += 2 * M * sh.K;
    }
    for (int k = 0; k < sh.fields; k++)
        if (obs_value(like, k)) {
            *obs_field(pr, k) = p;
            p += M;
        }
    if (like->ask_oracle)
        pr->ask_oracle = (unsigned char *)p;
    return GP_OK;
}

static void copy_block(double *dst, const double *src, size_t m, size_t M, size_t off,
                       size_t blocks)
{
    for (size_t b = 0; b < blocks; b++)
        memcpy(dst + b * m, src + b * M + off, m * sizeof *dst);
}

/* Points [off, off + m) of src (M points) into dst (m points). */
static void pred_copy_rows(gp_prediction *dst, size_t m, const gp_prediction *src, size_t M,
                           size_t off, pred_shape sh)
{
    copy_block(dst->mean, src->mean, m, M, off, sh.p);
    copy_block(dst->variance, src->variance, m, M, off, sh.p);
    if (dst->quantiles)
        copy_block(dst->quantiles, src->quantiles, m, M, off, sh.nq * sh.p);
    if (dst->component_mean) {
        copy_block(dst->component_mean, src->component_mean, m, M, off, sh.K);
        copy_block(dst->component_variance, src->component_variance, m, M, off, sh.K);
    }
    for (int k = 0; k < sh.fields; k++)
        if (*obs_field(dst, k))
            memcpy(*obs_field(dst, k), obs_value(src, k) + off, m * sizeof(double));
    if (dst->ask_oracle)
        memcpy(dst->ask_oracle, src->ask_oracle + off, m);
}

/* Requests g[0..k) (options alike, same_options) answered by one
 * predict_points over their concatenated points. Every method's arithmetic
 * is per point (batch_invariant, method.h), so a point gets the same bits in
 * the joint call as alone, and a lone request is the method's call on the
 * caller's buffers: nothing is padded. outs[g[0]].clamped gets the call's
 * clamps, the others 0. */
static int predict_joined(const gp_model *model, const gp_predict_request *reqs,
                          gp_prediction *outs, const size_t *g, size_t k, gp_error *err)
{
    const gp_predict_request *first = &reqs[g[0]];
    if (k == 1) /* nothing to join: the caller's buffers */
        return predict_points(model, first, &outs[g[0]], err);
    size_t M = 0, d = first->d, count = 0;
    for (size_t i = 0; i < k; i++)
        M += reqs[g[i]].m;
    if (gp_checked_size(M, d, &count, err))
        return GP_ENOMEM;
    double *X = gp_alloc_doubles(count ? count : 1, err), *mem = NULL, *noise = NULL;
    pred_shape sh = shape_of(model, first);
    gp_prediction all;
    int rc = X ? pred_alloc(&outs[g[0]], sh, M, &all, &mem, err) : GP_ENOMEM;
    /* requests join only when all or none give noise (same_options) */
    if (rc == GP_OK && first->noise && (noise = gp_alloc_doubles(M, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t i = 0, off = 0; i < k; off += reqs[g[i]].m, i++) {
            for (size_t c = 0; c < d; c++)
                memcpy(X + c * M + off, reqs[g[i]].X + c * reqs[g[i]].m,
                       reqs[g[i]].m * sizeof *X);
            if (noise)
                memcpy(noise + off, reqs[g[i]].noise, reqs[g[i]].m * sizeof *noise);
        }
        gp_predict_request joint = *first;
        joint.X = X;
        joint.m = M;
        joint.noise = noise;
        all.clamped = 0;
        rc = predict_points(model, &joint, &all, err);
    }
    if (rc == GP_OK)
        for (size_t i = 0, off = 0; i < k; off += reqs[g[i]].m, i++) {
            pred_copy_rows(&outs[g[i]], reqs[g[i]].m, &all, M, off, sh);
            outs[g[i]].clamped = i == 0 ? all.clamped : 0;
        }
    free(mem);
    free(X);
    free(noise);
    return rc;
}

/* ---- nothing non-finite leaves a prediction ----
 * A point far enough outside the training data (or a model at the edge of
 * float64) can give an answer that is not a number; it is refused naming
 * the point, never sent as null. */

/* The lowest row of the m x blocks column-major v holding a non-finite
 * number, below *row (which it lowers). */
static void lowest_bad_row(const double *v, size_t m, size_t blocks, size_t *row)
{
    if (v == NULL)
        return;
    for (size_t b = 0; b < blocks; b++)
        for (size_t i = 0; i < m && i < *row; i++)
            if (!isfinite(v[b * m + i])) {
                *row = i;
                break;
            }
}

static int refuse_point(size_t row, const char *what, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "X[%zu]", row);
    return gp_error_set(err, GP_EDATA, field,
                        "the %s at %s is not a finite number: the point lies too far from "
                        "the training data for float64 arithmetic",
                        what, field);
}

static int check_prediction_finite(const gp_model *model, const gp_predict_request *req,
                                   const gp_prediction *out, gp_error *err)
{
    pred_shape sh = shape_of(model, req);
    size_t m = req->m, row = m;
    lowest_bad_row(out->mean, m, sh.p, &row);
    lowest_bad_row(out->variance, m, sh.p, &row);
    lowest_bad_row(out->quantiles, m, sh.nq * sh.p, &row);
    lowest_bad_row(out->component_mean, m, sh.K, &row);
    lowest_bad_row(out->component_variance, m, sh.K, &row);
    for (int k = 0; k < sh.fields; k++)
        lowest_bad_row(obs_value(out, k), m, 1, &row);
    if (sh.cov) /* entry (r, c) of a covariance: row r (c's own diagonal is a variance) */
        lowest_bad_row(out->covariance, m, m * sh.p, &row);
    return row < m ? refuse_point(row, "prediction", err) : GP_OK;
}

int gp_model_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                     gp_error *err)
{
    int rc = predict_checks(model, req, out, err);
    if (rc)
        return rc;
    out->clamped = 0;
    const size_t only = 0;
    rc = predict_joined(model, req, out, &only, 1, err);
    return rc ? rc : check_prediction_finite(model, req, out, err);
}

/* ---- batches ---- */

static int same_options(const gp_predict_request *a, const gp_prediction *oa,
                        const gp_predict_request *b, const gp_prediction *ob)
{
    if (a->full_covariance || b->full_covariance)
        return 0;
    if (a->include_noise != b->include_noise || a->components != b->components ||
        a->n_quantiles != b->n_quantiles || a->d != b->d || (a->noise == NULL) != (b->noise == NULL))
        return 0;
    if (a->n_quantiles && memcmp(a->quantiles, b->quantiles, a->n_quantiles * sizeof(double)))
        return 0;
    for (int k = 0; k < 6; k++) /* the same outputs asked for */
        if ((obs_value(oa, k) == NULL) != (obs_value(ob, k) == NULL))
            return 0;
    return (oa->ask_oracle == NULL) == (ob->ask_oracle == NULL);
}

int gp_model_predict_batch(const gp_model *model, const gp_predict_request *reqs,
                           gp_prediction *outs, int *rcs, gp_error *errs, size_t n)
{
    gp_error err;
    gp_error_clear(&err);
    size_t *g = malloc((n ? n : 1) * sizeof *g);
    unsigned char *done = calloc(n ? n : 1, 1);
    if (g == NULL || done == NULL) {
        free(g);
        free(done);
        for (size_t i = 0; i < n; i++)
            rcs[i] = gp_error_set(&errs[i], GP_ENOMEM, NULL, "out of memory for a batch");
        return GP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        gp_error_clear(&errs[i]);
        outs[i].clamped = 0;
        rcs[i] = predict_checks(model, &reqs[i], &outs[i], &errs[i]);
        done[i] = rcs[i] != GP_OK;
    }
    int status = GP_OK;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (!done[j] && (j == i || same_options(&reqs[i], &outs[i], &reqs[j], &outs[j]))) {
                g[k++] = j;
                done[j] = 1;
            }
        int rc = predict_joined(model, reqs, outs, g, k, &err);
        if (rc == GP_ENOMEM)
            status = GP_ENOMEM;
        for (size_t j = 0; j < k; j++) {
            rcs[g[j]] = rc;
            if (rc)
                errs[g[j]] = err;
            else /* each request answers for its own points */
                rcs[g[j]] = check_prediction_finite(model, &reqs[g[j]], &outs[g[j]],
                                                    &errs[g[j]]);
        }
    }
    free(g);
    free(done);
    return status;
}

size_t gp_model_components(const gp_model *model)
{
    return model->method->ops->components ? model->method->ops->components(model) : 1;
}

size_t gp_model_parts(const gp_model *model)
{
    return model->method->ops->parts ? model->method->ops->parts(model) : 0;
}

void gp_model_part_name(const gp_model *model, size_t i, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    if (model->method->ops->part_name)
        model->method->ops->part_name(model, i, buf, len);
}

/* The checks of a sample request before any work. */
static int sample_checks(const gp_model *model, const gp_sample_request *req, gp_error *err)
{
    int rc = check_inputs(model, req->X, req->m, req->d, err);
    if (rc)
        return rc;
    if (req->n_samples == 0)
        return gp_error_set(err, GP_EINVAL, "n_samples", "n_samples must be at least 1");
    if ((rc = check_not_warming_up(model, err)) != GP_OK)
        return rc;
    if (req->include_noise && model->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "include_noise",
                            "include_noise: draws of %s observations are asked with "
                            "\"observations\": true",
                            gp_likelihood_name(model->likelihood));
    if (req->include_noise && model->per_point_noise)
        return gp_error_set(err, GP_EUNSUPPORTED, "include_noise",
                            "include_noise: the model was fitted with known per-point noise, "
                            "which new points do not have here; draw the latent function");
    size_t count = 0;
    return gp_checked_size(req->m, req->n_samples, &count, err);
}

/* A draw that is not a number is refused, naming its point. */
static int check_samples_finite(const gp_model *model, const gp_sample_request *req,
                                const double *samples, gp_error *err)
{
    size_t row = req->m; /* m x (n_samples x outputs), column-major */
    lowest_bad_row(samples, req->m, req->n_samples * model->n_outputs, &row);
    return row < req->m ? refuse_point(row, "sample", err) : GP_OK;
}

/* Draws of the residual process moved by the mean (one output). */
static int add_mean_to_samples(const gp_model *model, const gp_sample_request *req,
                               double *samples, gp_error *err)
{
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    size_t m = req->m;
    double *shift = gp_alloc_doubles(m ? m : 1, err);
    if (shift == NULL)
        return GP_ENOMEM;
    mean_shift(model, req->X, m, shift);
    for (size_t s = 0; s < req->n_samples; s++)
        for (size_t i = 0; i < m; i++)
            samples[s * m + i] += shift[i];
    free(shift);
    return GP_OK;
}

int gp_model_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                    gp_error *err)
{
    int rc = sample_checks(model, req, err);
    if (rc == GP_OK)
        rc = model->method->ops->sample(model, req, samples, err);
    if (rc == GP_OK)
        rc = add_mean_to_samples(model, req, samples, err);
    return rc == GP_OK ? check_samples_finite(model, req, samples, err) : rc;
}

int gp_model_sample_batch(const gp_model *model, const gp_sample_request *reqs,
                          double *const *samples, int *rcs, gp_error *errs, size_t n)
{
    const gp_method_ops *ops = model->method->ops;
    if (ops->sample_batch == NULL || n == 1) {
        for (size_t i = 0; i < n; i++) {
            gp_error_clear(&errs[i]);
            rcs[i] = gp_model_sample(model, &reqs[i], samples[i], &errs[i]);
        }
        return GP_OK;
    }
    /* the requests that pass their checks, gathered for the hook */
    gp_sample_request *ok = malloc(n * sizeof *ok);
    double **out = malloc(n * sizeof *out);
    size_t *idx = malloc(n * sizeof *idx);
    int *ok_rcs = malloc(n * sizeof *ok_rcs);
    gp_error *ok_errs = malloc(n * sizeof *ok_errs);
    if (!ok || !out || !idx || !ok_rcs || !ok_errs) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = gp_error_set(&errs[i], GP_ENOMEM, NULL, "out of memory for a batch");
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            gp_error_clear(&errs[i]);
            rcs[i] = sample_checks(model, &reqs[i], &errs[i]);
            if (rcs[i] == GP_OK) {
                ok[k] = reqs[i];
                out[k] = samples[i];
                idx[k++] = i;
            }
        }
        for (size_t j = 0; j < k; j++)
            gp_error_clear(&ok_errs[j]);
        if (k)
            ops->sample_batch(model, ok, out, ok_rcs, ok_errs, k);
        for (size_t j = 0; j < k; j++) {
            size_t i = idx[j];
            rcs[i] = ok_rcs[j] ? ok_rcs[j]
                               : add_mean_to_samples(model, &reqs[i], samples[i], &ok_errs[j]);
            if (rcs[i] == GP_OK)
                rcs[i] = check_samples_finite(model, &reqs[i], samples[i], &ok_errs[j]);
            if (rcs[i])
                errs[i] = ok_errs[j];
        }
    }
    free(ok);
    free(out);
    free(idx);
    free(ok_rcs);
    free(ok_errs);
    return GP_OK;
}

/* The stream of observation draws: derived from the request's seed, apart
 * from the latent draws' own stream. */
#define OBSERVATION_STREAM 0x0b5e7a710ULL

int gp_model_sample_observations(const gp_model *model, const gp_sample_request *req,
                                 const double *samples, double *obs, gp_error *err)
{
    size_t count = 0;
    int rc = gp_checked_size(req->m, req->n_samples, &count, err);
    if (rc)
        return rc;
    if (model->per_point_noise)
        return gp_error_set(err, GP_EUNSUPPORTED, "observations",
                            "observations: the model was fitted with known per-point noise, "
                            "which new points do not have here; draw the latent function");
    if (model->n_outputs > 1) /* draws of y are the method's own (include_noise) */
        return gp_error_set(err, GP_EUNSUPPORTED, "observations",
                            "observations: ask \"include_noise\": true for draws of y");
    /* a Gaussian model's noise in original units, as its samples are */
    gp_lik lik = {model->likelihood, model->noise_variance * model->y_scale * model->y_scale};
    gp_rng rng;
    gp_rng_derive(&rng, req->seed, OBSERVATION_STREAM);
    gp_lik_draw(&lik, samples, count, &rng, obs);
    size_t row = req->m;
    lowest_bad_row(obs, req->m, req->n_samples, &row);
    return row < req->m ? refuse_point(row, "observation draw", err) : GP_OK;
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
        model->diag.iterations = (int)p[1];
        model->diag.evaluations = (int)p[2];
        model->diag.restarts = (int)p[3];
        model->diag.converged = (int)p[4];
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
        rc = prepare_likelihood(model, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- online learning ---- */

void gp_model_online_status(const gp_model *model, gp_online_status *st)
{
    memset(st, 0, sizeof *st);
    st->n = model->n_train;
    st->kappa = NAN;
    if (model->method->ops->online_status)
        model->method->ops->online_status(model, st);
}

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
    int rc = check_inputs(model, X, k, model->input_dim, err);
    size_t count = 0, bad = 0;
    if (rc == GP_OK)
        rc = gp_checked_size(k, model->n_outputs, &count, err);
    if (rc)
        return rc;
    if (!gp_all_finite(Y, count, &bad)) {
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
        mean_shift(model, X, k, R);
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
