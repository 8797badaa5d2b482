/* Predictions and samples of a model (model.h's predict, predict_batch,
 * sample, sample_batch, sample_observations; predict.h): the checks, the
 * method's call, per-point noise and the mean added back, the likelihood's
 * predictive of y, requests joined into one call, nothing non-finite out. */
#include "core/model/predict.h"

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

int gp_model_check_inputs(const gp_model *model, const double *X, size_t m, size_t d,
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

/* What an online model reports about itself (model.h): here, as every
 * prediction first asks it whether the model is still warming up. */
void gp_model_online_status(const gp_model *model, gp_online_status *st)
{
    memset(st, 0, sizeof *st);
    st->n = model->n_train;
    st->kappa = NAN;
    if (model->method->ops->online_status)
        model->method->ops->online_status(model, st);
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

/* The mean function on m points, allocated (caller frees; NULL: out of memory). */
static double *mean_shift_alloc(const gp_model *model, const double *X, size_t m, gp_error *err)
{
    double *shift = gp_alloc_doubles(m ? m : 1, err);
    if (shift)
        gp_model_mean_shift(model, X, m, shift);
    return shift;
}

/* A non-Gaussian model's mean moves its latent f: the mixture's mean and
 * each component's (cm, m x K; the same buffer when K is 1), before the
 * likelihood turns them into y's predictive (not p(y) itself). */
static int add_mean_to_latent(const gp_model *model, const gp_predict_request *req, double *cm,
                              size_t K, double *latent_mean, gp_error *err)
{
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    size_t m = req->m;
    double *shift = mean_shift_alloc(model, req->X, m, err);
    if (shift == NULL)
        return GP_ENOMEM;
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < m; i++)
            cm[k * m + i] += shift[i];
    for (size_t i = 0; cm != latent_mean && i < m; i++)
        latent_mean[i] += shift[i];
    free(shift);
    return GP_OK;
}

/* Softmax: the method predicts the C latents (m x C, as several outputs),
 * and the probabilities are their integral over the latent posterior; the
 * one-hot label's moments are p and p (1 - p). */
static int predict_classes(const gp_model *model, const gp_predict_request *req,
                           gp_prediction *out, gp_error *err)
{
    size_t m = req->m, mc = m * model->n_outputs;
    if (req->n_quantiles)
        return gp_error_set(err, GP_EUNSUPPORTED, "quantiles",
                            "quantiles: a class label has no quantiles; the answer's "
                            "probabilities give its distribution");
    gp_predict_request lreq = *req;
    lreq.include_noise = 0;
    gp_prediction lout = *out;
    lout.mean = out->latent_mean;
    lout.variance = out->latent_variance;
    lout.quantiles = NULL;
    int rc = model->method->ops->predict(model, &lreq, &lout, err);
    if (rc)
        return rc;
    out->clamped = lout.clamped;
    gp_softmax_probabilities(&model->softmax_draws, out->latent_mean, out->latent_variance, m,
                             out->obs_mean);
    for (size_t i = 0; i < mc; i++)
        out->obs_variance[i] = out->obs_mean[i] * (1.0 - out->obs_mean[i]);
    const double *mean = req->include_noise ? out->obs_mean : out->latent_mean;
    const double *var = req->include_noise ? out->obs_variance : out->latent_variance;
    memcpy(out->mean, mean, mc * sizeof *mean);
    memcpy(out->variance, var, mc * sizeof *var);
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
    if (rc == GP_OK && model->likelihood == GP_LIK_SOFTMAX)
        return predict_classes(model, req, out, err);
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
    int rc = gp_model_check_inputs(model, req->X, req->m, req->d, err);
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
void gp_model_mean_shift(const gp_model *model, const double *X, size_t m, double *shift)
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
    double *shift = mean_shift_alloc(model, req->X, m, err);
    if (shift == NULL)
        return GP_ENOMEM;
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
    /* the joint one's row i + m j is point i's output j, so index % m is the point */
    if (sh.cov && out->cross_covariance && model->coreg.type != GP_COREG_NONE)
        lowest_bad_row(out->cross_covariance, m, m * sh.p * sh.p, &row);
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
    int rc = gp_model_check_inputs(model, req->X, req->m, req->d, err);
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
    double *shift = mean_shift_alloc(model, req->X, m, err);
    if (shift == NULL)
        return GP_ENOMEM;
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

/* Softmax: a label per point and draw from its C latents (samples m x n x C,
 * obs m x n). */
static int draw_labels(const gp_model *model, const gp_sample_request *req,
                       const double *samples, double *obs, gp_error *err)
{
    size_t m = req->m, n = req->n_samples, C = model->n_outputs, count = m * n;
    double f[GP_SOFTMAX_MAX_CLASSES];
    gp_rng rng;
    gp_rng_derive(&rng, req->seed, OBSERVATION_STREAM);
    for (size_t k = 0; k < count; k++) { /* k = s m + i: point i of draw s */
        for (size_t c = 0; c < C; c++)
            f[c] = samples[c * count + k];
        gp_softmax_draw(f, C, 1, &rng, obs + k);
    }
    (void)err;
    return GP_OK;
}

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
    if (model->likelihood == GP_LIK_SOFTMAX)
        return draw_labels(model, req, samples, obs, err);
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
