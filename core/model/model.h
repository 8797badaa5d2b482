/* gpserve core: the user API of a fitted model, and the method descriptor.
 *
 * This is what the service layers (api/, store/, benchmarks) include: look a
 * method up in the registry (core/methods/registry.h), read its facts (name,
 * options, kernels, progress budget, the method_info keys it reports), fit a
 * model, predict, sample, export and import it. How a method plugs in (its
 * ops table and the helpers method authors use) is core/model/method.h, which
 * only core/ includes: the split of libuv's uv.h and uv-common.h.
 *
 * Everything method-agnostic about a fitted model (its kernel, noise,
 * standardisation, diagnostics) lives in gp_model, so api/ and store/ handle
 * every method the same way; the method's own numbers hang off gp_model.impl.
 *
 * Units: requests and results are in the caller's original units. With
 * standardisation, a method works in standardised units internally, and the
 * kernel and noise in gp_model are in those working units (as the design
 * says: given values are initial values in the units the model works in). */
#ifndef GP_MODEL_MODEL_H
#define GP_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/base/state.h"
#include "core/base/value.h"
#include "core/kernel/kernel.h"
#include "core/likelihood/likelihood.h"
#include "core/likelihood/softmax.h"
#include "core/model/hyperspec.h"
#include "core/model/inputs.h"
#include "core/model/mean.h"

/* ---- method options ---- */
typedef enum gp_option_type {
    GP_OPTION_INT = 0,
    GP_OPTION_NUMBER,
    GP_OPTION_BOOL,
    GP_OPTION_ENUM,
    GP_OPTION_OBJECT /* a JSON object (gp_value), checked by the method's check_option */
} gp_option_type;

typedef struct gp_option_spec {
    const char *name;
    gp_option_type type;
    double default_number;      /* INT, NUMBER, BOOL (0/1) */
    const char *default_string; /* ENUM */
    double min, max;            /* inclusive bounds for INT and NUMBER */
    const char *choices;        /* ENUM: "a|b|c"; NUMBER: keywords it also accepts as
                                   strings (e.g. "auto"), read by gp_option_string;
                                   OBJECT: its JSON Schema, JSON text (GET
                                   /v1/methods parses it; gen_docs writes it
                                   into the OpenAPI document as YAML flow) */
    const char *help;
} gp_option_spec;

/* An option's value in a preset of the descriptor (gp_method.quick): an INT
 * or NUMBER option (sizes and budgets, not switches). */
typedef struct gp_option_setting {
    const char *name;
    double number;
} gp_option_setting;

/* A value given by the caller, already type-checked by api/ against the spec. */
typedef struct gp_option_value {
    const char *name;
    double number;      /* INT, NUMBER, BOOL */
    const char *string; /* ENUM, or a NUMBER option's keyword (number is then NAN) */
    const gp_value *object; /* OBJECT (owned by whoever built the request) */
} gp_option_value;

/* ---- several outputs at once: coregionalisation ----
 * A coregionalised model (exact, sgpr, svgp with options.coregionalization,
 * docs/design/multioutput.md) models p outputs jointly: the covariance of
 * output i at x and output j at x' is
 *     sum_q B_q[i,j] k_q(x, x'),   B_q = W_q W_q^T + diag(kappa_q),
 * with Q latent kernels k_q (each a copy of the request's kernel with its
 * variance held at 1: W carries the scale), W_q p x rank. ICM is Q = 1 of
 * rank R; LMC is Q latents (rank 1 each unless given). Each output has its
 * own noise variance and its own standardisation (mean and deviation of its
 * observed entries). Targets are y (n x p column-major) with NaN for a
 * missing entry (heterotopic data): only observed entries enter the fit. */
#define GP_COREG_MAX_OUTPUTS 16
#define GP_COREG_MAX_LATENTS 8
typedef enum gp_coreg_type { GP_COREG_NONE = 0, GP_COREG_ICM, GP_COREG_LMC } gp_coreg_type;

/* What a coregionalised model holds, read-only for the service layers
 * (gp_model.coreg; type GP_COREG_NONE for every other model). The arrays
 * belong to the method's impl and live as long as the model. Everything is
 * in working units: output j's original value is y_mean[j] + y_scale[j] * v
 * (noise and B entries scale by y_scale[i] y_scale[j]). */
typedef struct gp_coreg_view {
    gp_coreg_type type;
    size_t p, q, rank;             /* outputs, latent kernels, columns of each W_q */
    const gp_kernel *const *kernels; /* q latent kernels (input working units) */
    const double *W;               /* q blocks of p x rank, column-major: W_q at q*p*rank */
    const double *kappa;           /* p x q, column q = kappa_q (>= 0; zero when not learned) */
    const double *noise;           /* p noise variances */
    const double *y_mean, *y_scale; /* p each */
    size_t n_observed;             /* observed entries of y the model holds */
    int kronecker;                 /* 1: the fit used the Kronecker path (isotopic ICM) */
} gp_coreg_view;

/* Progress of a fit: return nonzero to ask the fit to stop (cancellation). */
typedef int (*gp_progress_fn)(void *ctx, int iteration, int max_iterations, double objective);

typedef struct gp_fit_request {
    const double *X; /* n x d, column-major */
    const double *y; /* n */
    size_t n, d;
    const gp_kernel *kernel; /* initial values in working units; copied by the fit */
    int noise_given;         /* 0: initialise from the data */
    double noise_variance;   /* initial (or fixed) value in working units */
    int noise_fixed;
    /* Known noise variances of the n rows (NULL: none), in the caller's units
     * of y (finite, >= 0): added to the homoscedastic noise above, which may
     * then be fixed at 0 (noise_given, noise_fixed). The fit divides them by
     * y_scale^2 for its working units. Only methods whose descriptor sets
     * per_point_noise take them (gp_model_fit refuses the others). */
    const double *noise_per_point;
    int standardize;
    uint64_t seed;
    const gp_option_value *options; /* validated against the method's spec */
    size_t n_options;
    size_t max_train_points; /* cap on N for methods that build N x N matrices; 0 = default */
    gp_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    /* Cancellation inside an evaluation (zeroed: none): the owner's flag,
     * polled between blocks of the long loops (kernel matrices, the blocked
     * Cholesky factor and inverse, gradient contractions, feature maps), so a
     * fit stops within a fraction of a second of the flag being set instead
     * of at the next progress report; the fit then returns GP_ECANCELLED. */
    gp_cancel cancel;
    /* The observation model (zeroed: gaussian). With another likelihood the
     * labels y are checked against it (gp_likelihood_check_labels) and never
     * standardised (y_mean 0, y_scale 1); noise_* fields are ignored. */
    gp_likelihood likelihood;
    /* Columns of y: y is n x n_outputs, column-major (0 means 1). More than
     * one only for methods whose descriptor sets multi_output, or with
     * options.coregionalization on one that sets coregionalization; only
     * then may y hold NaN (a missing entry; never a whole row or output). */
    size_t n_outputs;
    /* What one row of X is (zeroed: points of d columns). d is then the
     * encoded width, gp_input_width(&input); methods that take other kinds
     * list them in their descriptor (input_kinds). */
    gp_input_spec input;
    /* What the caller knows of the hyperparameters (core/model/hyperspec.h):
     * priors, bounds, single parameters held; NULL: nothing. Only methods
     * whose descriptor sets hyper_priors take one that states something. */
    const gp_hyper_spec *hyper;
    /* The mean function (core/model/mean.h; zeroed: zero mean, the GP of
     * old). Only methods whose descriptor sets mean_functions take another,
     * with the gaussian likelihood; its coefficients are learned by the fit. */
    gp_mean_type mean;
    /* The rows read in chunks instead of X and y (core/model/rows.h; NULL:
     * X and y hold them): a fit over a data set in the store, or one rank's
     * shard of it under MPI. X, y and noise_per_point are then NULL and n is
     * rows->n_total. Only methods whose descriptor sets streams_rows take it,
     * with one output and points as inputs. */
    const struct gp_rows *rows;
} gp_fit_request;

#define GP_DEFAULT_MAX_TRAIN_POINTS 20000

/* A method-specific fact about a fit that the service reports with the model
 * (e.g. the frequency sampler `auto` chose). key and string point to static
 * text (string literals); string NULL means the value is number. */
#define GP_MODEL_INFO_MAX 24 /* gwi with inducing_factor auto: 19 */
typedef struct gp_info_item {
    const char *key;
    const char *string;
    double number;
} gp_info_item;

typedef struct gp_diagnostics {
    double objective;           /* in original units */
    const char *objective_name; /* static, e.g. "log_marginal_likelihood" */
    int iterations;
    int evaluations;
    int restarts;
    int converged;
    double fit_seconds;
    double jitter;              /* absolute jitter of the cached factor, working units */
    gp_info_item info[GP_MODEL_INFO_MAX]; /* method-specific facts, see gp_model_info_* */
    size_t n_info;
    /* log p of the fitted hyperparameters under the fit's priors (0
     * without): the MAP objective is objective + log_prior. */
    double log_prior;
} gp_diagnostics;

struct gp_method;

typedef struct gp_model {
    const struct gp_method *method;
    size_t n_train, input_dim;
    gp_kernel *kernel;     /* owned; fitted values, working units */
    double noise_variance; /* working units */
    int standardize;
    double *x_mean, *x_scale; /* owned; input_dim each (0 and 1 without standardisation) */
    double y_mean, y_scale;
    gp_likelihood likelihood; /* the fit's; non-Gaussian models have noise_variance 0 */
    /* 1: fitted with known per-point noise (gp_fit_request.noise_per_point);
     * predict's include_noise then needs the new points' noise
     * (gp_predict_request.noise), else it answers the latent variance. */
    int per_point_noise;
    /* Non-Gaussian models: the Gauss-Hermite rule of their predictive
     * (core/likelihood), computed once by gp_model_fit and gp_model_import
     * rather than by every prediction (a 20 x 20 eigenproblem, ~20 us). */
    gp_quadrature quadrature;
    /* Softmax models: the fixed draws of their predictive probabilities
     * (GP_SOFTMAX_PREDICT_DRAWS x n_outputs, owned), made once by the fit
     * and by import like the quadrature; empty otherwise. */
    gp_softmax_mc softmax_draws;
    gp_diagnostics diag;
    /* Outputs (columns of y); 1 except for multi-output methods. Their
     * predictions carry n_outputs columns (gp_prediction). A softmax model
     * (likelihood GP_LIK_SOFTMAX) has one output per class: n_outputs = C,
     * the number of classes its labels 0..C-1 gave (y itself is one column
     * of labels, gp_fit_request.n_outputs 1). */
    size_t n_outputs;
    /* What one input is; input_dim is its encoded width. Kind POINT for
     * every model of points. */
    gp_input_spec input;
    /* The fit's priors, bounds and held parameters (owned; NULL: none), and
     * the bounds its hyperparameters ended on (core/model/hyperspec.h). */
    gp_hyper_spec *hyper;
    gp_fit_warnings warnings;
    /* The mean function and its coefficients (owned; gp_mean_n_coef of
     * them, working units; NULL for a zero mean). gp_model_predict and the
     * samples add it back generically: the method predicts the residual
     * process f, and the answer is y_mean + y_scale (f + h(x_w)^T beta). */
    gp_mean_type mean_type;
    double *mean_coef;
    /* Coregionalised models: the method points this at its impl's arrays
     * at fit and import (type GP_COREG_NONE otherwise). */
    gp_coreg_view coreg;
    void *impl; /* owned by the method */
} gp_model;

typedef struct gp_predict_request {
    const double *X; /* m x d, column-major, original units */
    size_t m, d;
    int include_noise;   /* observation (1) or latent (0) variance */
    int full_covariance; /* also fill covariance */
    /* Quantile levels in (0, 1) of the predictive distribution (of y with
     * include_noise, else of f): n_quantiles of them, out->quantiles gets
     * m x n_quantiles. Gaussian methods: mean + sd z_q (gp_model_predict does
     * it); mixture methods (gp_method.components) the mixture's own. */
    const double *quantiles;
    size_t n_quantiles;
    /* Mixture methods only: also fill out->component_mean/variance. */
    int components;
    /* Known noise variances of the m points in the caller's units (NULL:
     * none; finite, >= 0), added with include_noise to the homoscedastic
     * noise (Gaussian, single-Gaussian methods only). A model fitted with
     * per-point noise asked include_noise without them answers the latent
     * variance (gp_predict_noise_included says so). */
    const double *noise;
} gp_predict_request;

/* Caller-owned outputs, in original units: mean and variance m entries each,
 * covariance m x m (only when full_covariance, else may be NULL).
 * A model of p = n_outputs > 1 outputs fills p of each, one after the other
 * (column-major): mean and variance m x p, quantiles m x n_quantiles x p,
 * covariance m x m x p (output j's block at j m m), samples m x n_samples x p. */
typedef struct gp_prediction {
    double *mean;
    double *variance;
    double *covariance;
    /* Coregionalised models with full_covariance (NULL otherwise; the caller
     * allocates it when model->coreg.type != GP_COREG_NONE): the joint
     * covariance of the m points' p outputs, (m p) x (m p) column-major, the
     * entry of (point i, output j) at index i + m j (output-major, as mean
     * is). covariance still gets its p within-output blocks. */
    double *cross_covariance;
    double *quantiles; /* m x n_quantiles (column q = level q), when asked */
    /* m x gp_model_components(model) each (column k = component k), when
     * components is asked: each component's mean and variance. */
    double *component_mean, *component_variance;
    /* Non-Gaussian likelihoods (gp_model_predict fills them; m each, all
     * required then, NULL otherwise): the latent f's moments, the moments of
     * y (bernoulli: obs_mean is p(y=1) integrated over f; Poisson: the
     * count's), and the rate's moments (Poisson ones only, else untouched).
     * mean and variance are then y's with include_noise, f's without. */
    double *latent_mean, *latent_variance;
    double *obs_mean, *obs_variance;
    double *rate_mean, *rate_variance;
    /* Softmax models (n_outputs = C classes): latent_mean, latent_variance,
     * obs_mean and obs_variance are m x C each, column c = class c, as mean
     * is. obs_mean is the class probabilities p(y = c), integrated over the
     * latent posterior (gp_softmax_probabilities, not softmax of the latent
     * mean), obs_variance p (1 - p): the moments of the one-hot label. mean
     * and variance are those (include_noise) or the latents'. Quantiles are
     * refused; rate_* are untouched. Samples (gp_model_sample) are the
     * latents, m x n_samples x C; gp_model_sample_observations turns them
     * into labels, m x n_samples (one column per draw, not per class). */
    size_t clamped; /* variances that came out negative and were clamped at 0 */
    /* Methods with an uncertainty gate (gp_method_has_gate), filled when not
     * NULL: one flag per point, 1 where the model asks for the true answer
     * (its log observation variance reaches the threshold for some output,
     * docs/methods/kernel-jit-online.md §2). */
    unsigned char *ask_oracle;
} gp_prediction;

typedef struct gp_sample_request {
    const double *X; /* m x d, column-major, original units */
    size_t m, d;
    size_t n_samples;
    uint64_t seed;
    int include_noise; /* Gaussian likelihood only: draws of y instead of f */
} gp_sample_request;

/* A method_info key a method reports (gp_diagnostics.info): the facts the
 * service lists in /v1/methods and the docs. A fit reports only keys listed
 * here (the contract test checks it). */
typedef enum gp_info_type { GP_INFO_NUMBER = 0, GP_INFO_STRING } gp_info_type;

typedef struct gp_info_spec {
    const char *key;
    gp_info_type type;
    const char *help;
} gp_info_spec;

/* The method's implementation (core/model/method.h). */
typedef struct gp_method_ops gp_method_ops;

/* Everything the service says about a method is written here once:
 * /v1/methods, job progress, the OpenAPI method section and the README's
 * option tables are produced from it or checked against it. */
typedef struct gp_method {
    const char *name;
    const char *summary;
    const char *objective_name; /* what diagnostics.objective is, e.g. "log_marginal_likelihood" */
    const gp_option_spec *options;
    size_t n_options;
    /* Kernels: the accepted leaf types (NULL = every leaf type) and whether
     * sums and products of them are accepted (0: a single leaf only). */
    const gp_kernel_type *kernels;
    size_t n_kernels;
    int composite_kernels;
    /* Job progress: the option whose value is the iteration budget of one
     * optimiser run, and the option counting extra runs (NULL: none); the
     * budget of a fit is iterations x (restarts + 1) (gp_method_max_iterations). */
    const char *iterations_option;
    const char *restarts_option;
    /* The likelihoods it fits (NULL: gaussian only). */
    const gp_likelihood *likelihoods;
    size_t n_likelihoods;
    const gp_info_spec *info; /* the method_info keys a fit may report */
    size_t n_info;
    /* Online learning (gp_model_observe): the method's ops say whether it
     * updates; these say what else it takes and gives. multi_output: y may have
     * several columns. starts_empty: a fit may have no rows (the model then
     * waits for observations; its dimensions come from the options).
     * input_kinds: bit (1 << kind) for every gp_input_kind it takes besides
     * points (0: points only), given by its OBJECT option "input". */
    int multi_output;
    int starts_empty;
    unsigned input_kinds;
    int gate; /* predictions fill ask_oracle (gp_method_has_gate) */
    /* Its fit runs through gp_hyper_minimize: it takes priors, bounds and
     * single held parameters (gp_fit_request.hyper). */
    int hyper_priors;
    /* 1: a fit takes known per-point noise (gp_fit_request.noise_per_point). */
    int per_point_noise;
    /* 1: a fit takes a constant or linear mean (gp_fit_request.mean) and
     * fills gp_model.mean_coef; gp_model_fit refuses a mean elsewhere. */
    int mean_functions;
    /* 1: takes the OBJECT option "coregionalization" (several outputs
     * modelled jointly, gp_coreg_view), with y's missing entries as NaN. */
    int coregionalization;
    /* 1: a fit may read its rows in chunks (gp_fit_request.rows) with memory
     * independent of N, and sum over shards of them across processes. */
    int streams_rows;
    /* The `quick` preset: option values that make a fit of some 40-60 points
     * fast while the method does what it always does (budgets and sizes only:
     * the iterations option, features, inducing points, particles, warm-up;
     * never a behaviour switch). The contract test, the integration tests and
     * quick benchmark runs fit with it; GET /v1/methods lists it. */
    const gp_option_setting *quick;
    size_t n_quick;
    const gp_method_ops *ops;
} gp_method;

/* Model lifecycle (method-agnostic). */
int gp_model_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);
int gp_model_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                     gp_error *err);
/* GP_EDATA naming field[i] (e.g. "noise.per_point[3]") for the first of the
 * n noise variances that is not finite or is negative. */
int gp_check_noise_values(const double *r, size_t n, const char *field, gp_error *err);
/* Whether a prediction of req on model includes observation noise: 0 when
 * include_noise is not asked, or when the model was fitted with per-point
 * noise and req gives no noise for its points (the answer is then latent). */
int gp_predict_noise_included(const gp_model *model, const gp_predict_request *req);
/* Several predict requests of one model answered by one call of the method
 * (dynamic batching): each out[i] gets bit for bit what gp_model_predict
 * gives reqs[i] alone. Each request is checked on its own first (rcs[i] and
 * errs[i] get its result; those that fail are left out). Requests whose
 * options agree (include_noise, quantile levels, components) and that ask no
 * covariance are answered together over their concatenated points; the
 * others one by one. Returns GP_OK, or GP_ENOMEM when the joint buffers
 * cannot be allocated (then every rcs[i] says so). out[i].clamped counts the
 * clamps of its own call group (the group's total on its first member, 0 on
 * the others).
 *
 * Why the answers agree: every method's predict is per-point arithmetic in
 * a fixed order (method.h, batch_invariant), so a point's bits do not depend
 * on the other points of a call, their number, its position, the thread
 * count or the CPU's vector width; nothing is padded, and a lone point costs
 * one point's work. */
int gp_model_predict_batch(const gp_model *model, const gp_predict_request *reqs,
                           gp_prediction *outs, int *rcs, gp_error *errs, size_t n);
/* samples: req->m x req->n_samples, joint draws of the latent f (of y with
 * include_noise, Gaussian likelihood only). */
int gp_model_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                    gp_error *err);
/* Several sample requests of one model (dynamic batching): samples[i]
 * (reqs[i].m x reqs[i].n_samples x outputs) gets bit for bit what
 * gp_model_sample gives reqs[i] alone, rcs[i] and errs[i] its result. Each
 * request is checked on its own first. Methods with a sample_batch hook
 * (exact: one multi-column solve shared by the requests, then each its own
 * covariance, factor and draws from its own seed) answer them together; the
 * others one by one. Always returns GP_OK: every outcome is in rcs. */
int gp_model_sample_batch(const gp_model *model, const gp_sample_request *reqs,
                          double *const *samples, int *rcs, gp_error *errs, size_t n);
/* Draws of y given each latent draw (samples as gp_model_sample wrote them
 * with include_noise 0) into obs (same shape), from a stream derived from
 * req->seed: the observation model of the fit applied point by point.
 * Softmax: one label per point and draw from its C latents, obs m x
 * n_samples (the labels 0..C-1 as numbers). */
int gp_model_sample_observations(const gp_model *model, const gp_sample_request *req,
                                 const double *samples, double *obs, gp_error *err);
/* Export everything (common fields and the method's arrays) into st (initialised
 * by the caller); import builds a new model of method m from such a state (the
 * method name is kept beside the state, e.g. in the store's models row). */
int gp_model_export(const gp_model *model, gp_state *st, gp_error *err);
int gp_model_import(const gp_method *m, const gp_state *st, gp_model **out, gp_error *err);
void gp_model_free(gp_model *model);
/* ---- online learning (docs/design/architecture.md, "Online learning") ----
 * A model whose method updates online takes new rows after its fit:
 * gp_model_observe adds k rows (X: k x input_dim column-major in the model's
 * input encoding, original units; Y: k x n_outputs column-major) in place,
 * all or nothing: on any error the model is as it was. The result depends
 * only on the model before and the rows (no clock, no global state), so
 * replaying the same batches in the same order from the same state gives the
 * same model, bit for bit. Methods that cannot: GP_EUNSUPPORTED. */
int gp_model_observe(gp_model *model, const double *X, const double *Y, size_t k,
                     gp_error *err);
/* The same with the known noise variances of the k rows (caller's units,
 * NULL: none). A model fitted with per-point noise needs them (GP_EINVAL,
 * field "noise", without); a model fitted without refuses them
 * (GP_EUNSUPPORTED). Methods that observe with per-point noise have an
 * observe_noise op (exact). */
int gp_model_observe_noise(gp_model *model, const double *X, const double *Y,
                           const double *noise, size_t k, gp_error *err);

typedef struct gp_online_status {
    size_t n;             /* rows the model holds (fit and observed) */
    int warmup;           /* 1: still collecting its first rows; it cannot predict yet */
    size_t warmup_target; /* rows it waits for before it can (0: none) */
    /* The uncertainty gate (gp_method_has_gate), known once out of warm-up:
     * per output, the threshold on the log observation variance in original
     * units (has_threshold 0 before). kappa: the relative form's kappa
     * (threshold = log noise + log(1 + kappa)), NAN when given absolutely. */
    int has_threshold;
    const double *threshold; /* n_outputs entries, owned by the model */
    double kappa;
    /* 1 when the threshold is at or below the log noise floor of an output,
     * so every prediction asks (kernel-jit-online.md §8.2). */
    int always_asks;
} gp_online_status;

/* What an online model reports about itself (any model: n = n_train, no
 * warm-up, no gate). */
void gp_model_online_status(const gp_model *model, gp_online_status *st);
/* Components of the model's predictive distribution: 1 unless a mixture. */
size_t gp_model_components(const gp_model *model);
/* Additive parts of the latent function (hkd's blocks: f = sum of independent
 * parts), 0 when the method has none. A predict request with `components`
 * on such a model fills component_mean/variance with each part's latent
 * mean and variance (the variances sum to the latent variance). */
size_t gp_model_parts(const gp_model *model);
/* The name of part i (e.g. "symmetric"), into buf. */
void gp_model_part_name(const gp_model *model, size_t i, char *buf, size_t len);

/* Mean and population standard deviation (ddof 0) of each column of the
 * column-major n x d matrix X: the standardisation every model uses. A zero
 * (or non-finite) deviation gives scale 1. */
void gp_column_stats(const double *X, size_t n, size_t d, double *mean, double *scale);

/* The options' validation and the facts of a method's descriptor
 * (descriptor.c), for every user of this header. */
#include "core/model/descriptor.h"
/* The posterior's gradient in x (predict_grad.c). */
#include "core/model/predict_grad.h"

#endif
