/* gpserve core: the method interface and registry.
 *
 * A method is a table of function pointers; adding one is one file and one
 * line in the registry (core/registry.c). Everything method-agnostic about a
 * fitted model (its kernel, noise, standardisation, diagnostics) lives in
 * gp_model, so api/ and store/ handle every method the same way; the method's
 * own numbers hang off gp_model.impl.
 *
 * Units: requests and results are in the caller's original units. With
 * standardisation, a method works in standardised units internally, and the
 * kernel and noise in gp_model are in those working units (as the DESIGN
 * says: given values are initial values in the units the model works in). */
#ifndef GP_METHOD_H
#define GP_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/kernel.h"
#include "core/state.h"

/* ---- method options ---- */
typedef enum gp_option_type {
    GP_OPTION_INT = 0,
    GP_OPTION_NUMBER,
    GP_OPTION_BOOL,
    GP_OPTION_ENUM
} gp_option_type;

typedef struct gp_option_spec {
    const char *name;
    gp_option_type type;
    double default_number;      /* INT, NUMBER, BOOL (0/1) */
    const char *default_string; /* ENUM */
    double min, max;            /* inclusive bounds for INT and NUMBER */
    const char *choices;        /* ENUM: "a|b|c"; NUMBER: keywords it also accepts as
                                   strings (e.g. "auto"), read by gp_option_string */
    const char *help;
} gp_option_spec;

/* A value given by the caller, already type-checked by api/ against the spec. */
typedef struct gp_option_value {
    const char *name;
    double number;      /* INT, NUMBER, BOOL */
    const char *string; /* ENUM, or a NUMBER option's keyword (number is then NAN) */
} gp_option_value;

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
    int standardize;
    uint64_t seed;
    const gp_option_value *options; /* validated against the method's spec */
    size_t n_options;
    size_t max_train_points; /* cap on N for methods that build N x N matrices; 0 = default */
    gp_progress_fn progress; /* may be NULL */
    void *progress_ctx;
} gp_fit_request;

#define GP_DEFAULT_MAX_TRAIN_POINTS 20000

/* A method-specific fact about a fit that the service reports with the model
 * (e.g. the frequency sampler `auto` chose). key and string point to static
 * text (string literals); string NULL means the value is number. */
#define GP_MODEL_INFO_MAX 16
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
    gp_diagnostics diag;
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
} gp_predict_request;

/* Caller-owned outputs, in original units: mean and variance m entries each,
 * covariance m x m (only when full_covariance, else may be NULL). */
typedef struct gp_prediction {
    double *mean;
    double *variance;
    double *covariance;
    double *quantiles; /* m x n_quantiles (column q = level q), when asked */
    /* m x gp_model_components(model) each (column k = component k), when
     * components is asked: each component's mean and variance. */
    double *component_mean, *component_variance;
    size_t clamped; /* variances that came out negative and were clamped at 0 */
} gp_prediction;

typedef struct gp_sample_request {
    const double *X; /* m x d, column-major, original units */
    size_t m, d;
    size_t n_samples;
    uint64_t seed;
    int include_noise;
} gp_sample_request;

typedef struct gp_method {
    const char *name;
    const char *summary;
    const char *objective_name; /* what diagnostics.objective is, e.g. "log_marginal_likelihood" */
    const gp_option_spec *options;
    size_t n_options;
    const gp_kernel_type *kernels; /* accepted leaf types; NULL = every kernel */
    size_t n_kernels;
    int single_leaf_kernel; /* 1: one leaf only, no sum/product */

    /* Fit: on success *out is a new model owned by the caller (gp_model_free). */
    int (*fit)(const gp_fit_request *req, gp_model **out, gp_error *err);
    int (*predict)(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                   gp_error *err);
    /* samples: column-major m x n_samples, caller-owned, original units. */
    int (*sample)(const gp_model *model, const gp_sample_request *req, double *samples,
                  gp_error *err);
    /* Add the method's own arrays (impl) to st; the common part is done by gp_model_export. */
    int (*export_impl)(const gp_model *model, gp_state *st, gp_error *err);
    /* Rebuild model->impl from st; the common fields are already filled. */
    int (*import_impl)(gp_model *model, const gp_state *st, gp_error *err);
    void (*free_impl)(void *impl);
    /* Mixture methods: the number of equally weighted components of the
     * predictive (each a Gaussian); their predict fills quantiles and, when
     * asked, the components. NULL for single-Gaussian methods. */
    size_t (*components)(const gp_model *model);
} gp_method;

/* Registry. */
const gp_method *gp_method_find(const char *name);
size_t gp_method_count(void);
const gp_method *gp_method_at(size_t i);

/* Value of option `name` from the request, or the spec default. For a NUMBER
 * option given as one of its keywords, gp_option_number is NAN and
 * gp_option_string the keyword (NULL when a number was given). */
double gp_option_number(const gp_method *m, const gp_fit_request *req, const char *name);
const char *gp_option_string(const gp_method *m, const gp_fit_request *req, const char *name);
/* Check every given option exists in the spec and is within its bounds/choices. */
int gp_options_validate(const gp_method *m, const gp_option_value *opts, size_t n, gp_error *err);

/* Model lifecycle (method-agnostic). */
int gp_model_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);
int gp_model_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                     gp_error *err);
int gp_model_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                    gp_error *err);
/* Export everything (common fields and the method's arrays) into st (initialised
 * by the caller); import builds a new model of method m from such a state (the
 * method name is kept beside the state, e.g. in the store's models row). */
int gp_model_export(const gp_model *model, gp_state *st, gp_error *err);
int gp_model_import(const gp_method *m, const gp_state *st, gp_model **out, gp_error *err);
void gp_model_free(gp_model *model);
/* Components of the model's predictive distribution: 1 unless a mixture. */
size_t gp_model_components(const gp_model *model);

/* Helpers shared by the methods. */
/* The noise variance as the methods optimise it: s = floor + exp(x) when
 * learned, with floor = 1e-8 times the targets' power P = mean(y^2) (their
 * variance once standardised; 1 if not positive), which keeps the covariance
 * away from singular as an optimiser drives the noise down on near-noiseless
 * data (as GPflow's variance lower bound does). Without a given value the
 * noise starts at P, "all noise", as scikit-learn's WhiteKernel(1.0) and
 * GPflow do on standardised data: it converged faster and to higher optima
 * than 0.1 P on the shared datasets (bench/results/exact.md). */
typedef struct gp_noise_param {
    int learned;  /* 0: the noise is `start` throughout */
    double start; /* the given value, or P */
    double floor;
} gp_noise_param;
/* From the request's noise fields and the working-unit targets y (n > 0). */
void gp_noise_param_init(gp_noise_param *np, const gp_fit_request *req, const double *y,
                         size_t n);
/* The unconstrained starting value x0 of a learned noise. */
double gp_noise_param_x0(const gp_noise_param *np);
/* s(x) (start when not learned). */
double gp_noise_param_value(const gp_noise_param *np, double x);
/* d/dx from d/dlog s at noise s: dlog_s (s - floor) / s. */
double gp_noise_param_grad(const gp_noise_param *np, double s, double dlog_s);
/* A lower Cholesky factor L (n x n, leading dimension n) in a state as the
 * packed array `name` (n(n+1)/2 x 1, no dead upper half); the get side
 * unpacks it into the caller's n x n buffer (upper triangle zeroed) and
 * answers GP_EDATA naming the array when a diagonal entry is not positive and
 * finite (a corrupt or foreign factor). */
int gp_state_put_cholesky(gp_state *st, const char *name, const double *L, size_t n,
                          gp_error *err);
int gp_state_get_cholesky(const gp_state *st, const char *name, size_t n, double *L,
                          gp_error *err);
/* GP_EUNSUPPORTED (field kernel.type, naming the accepted types) unless k's
 * type is one of m->kernels (every type when m->kernels is NULL): for
 * methods that take a single leaf of a few types, at fit and at import. */
int gp_method_check_kernel(const gp_method *m, const gp_kernel *k, gp_error *err);
/* Record a method-specific fact (static key/text); silently ignored beyond
 * GP_MODEL_INFO_MAX items, and a repeated key overwrites. */
void gp_model_info_number(gp_model *model, const char *key, double value);
void gp_model_info_string(gp_model *model, const char *key, const char *value);
/* Mean and population standard deviation (ddof 0) of each column of the
 * column-major n x d matrix X: the standardisation every model uses. A zero
 * (or non-finite) deviation gives scale 1. */
void gp_column_stats(const double *X, size_t n, size_t d, double *mean, double *scale);
/* Joint Gaussian draws for the Gaussian methods: samples (req->m x
 * req->n_samples, original units) = mean + chol(S) e with e ~ N(0, I) from
 * req->seed (one dtrmm for all draws), where mean (m) and S (m x m, full,
 * overwritten by its factor) are the latent posterior in working units and
 * S gets the noise variance on its diagonal when req->include_noise. The
 * jitter policy of gp_cholesky_jitter applies. */
int gp_model_gaussian_draws(const gp_model *model, const gp_sample_request *req,
                            const double *mean, double *S, double *samples, gp_error *err);
/* Validate X/y: sizes, finiteness (GP_EDATA naming "X[i][j]" or "y[i]"). */
int gp_check_training_data(const gp_fit_request *req, gp_error *err);
/* Allocate a model shell for method m with the common fields set from req
 * (kernel copied, standardisation statistics computed). */
int gp_model_new(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);
/* Standardised, point-major copy of X (n x d column-major, original units):
 * d x n column-major (each column a point), the layout the kernels read.
 * gp_model_points allocates it (caller frees); gp_model_standardize_points writes into out (n*d doubles). */
int gp_model_points(const gp_model *model, const double *X, size_t n, double **out,
                    gp_error *err);
/* The standardised inputs a single-leaf kernel sees, column-major b x d:
 * columns dims[0 .. d) of rows start .. start + b of X (original units,
 * leading dimension ldx), each times inv_ls[j] unless inv_ls is NULL (the
 * random-feature methods divide by the lengthscales in the same pass). */
void gp_model_leaf_inputs(const gp_model *model, const size_t *dims, size_t d,
                          const double *inv_ls, const double *X, size_t ldx, size_t start,
                          size_t b, double *out);
/* Standardised targets (working units) of y (n) into out. */
void gp_model_working_targets(const gp_model *model, const double *y, size_t n, double *out);
/* Test points per prediction block of a feature method with width doubles
 * per point: the block stays below 4M doubles (32 MB); between 1 and m. */
size_t gp_predict_block_rows(size_t width, size_t m);
void gp_model_standardize_points(const gp_model *model, const double *X, size_t n, double *out);

#endif
