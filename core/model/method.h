/* gpserve core: the plug-in interface of a method, and the helpers method
 * authors use. Included by core/ only (the methods, and shared pieces such
 * as core/inducing that implement parts of methods); the service layers use
 * core/model/model.h.
 *
 * A method is one file in core/methods/ defining a gp_method descriptor
 * (facts, core/model/model.h) whose ops point to a gp_method_ops table, and
 * one line in core/methods/registry.c. */
#ifndef GP_MODEL_METHOD_H
#define GP_MODEL_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/state.h"
#include "core/kernel/kernel.h"
#include "core/model/hyperfit.h"
#include "core/model/model.h"

struct gp_method_ops {
    /* Fit: on success *out is a new model owned by the caller (gp_model_free).
     * req->likelihood is one the descriptor lists and the labels fit it
     * (gp_model_fit checked both); gp_model_new sets model->likelihood.
     * m is the method's own descriptor, so a method's files read their
     * options through it and never name their descriptor (which names them:
     * core/methods/X/X.c holds the ops table), keeping a method folder free
     * of link-level circles. */
    int (*fit)(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);
    /* With a non-Gaussian likelihood gp_model_predict asks for the latent f
     * only (include_noise 0, no quantiles; components when the method is a
     * mixture) and derives every observation quantity itself. */
    int (*predict)(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                   gp_error *err);
    /* Single-output Gaussian methods that answer gp_model_predict_grad
     * (NULL: the method does not): at one point P (input_dim values, working
     * units) the latent posterior of the residual process f (no mean
     * function, no y scaling, no noise, the variance not clamped) and its
     * gradients with respect to P (input_dim each; dmean/dvar NULL: values
     * only). The caller has checked the model (one output, Gaussian, not
     * coregionalised, points as inputs) and P (finite, within
     * GP_WORKING_LIMIT). Must be thread-safe on a const model. */
    int (*predict_grad)(const gp_model *model, const double *P, double *mean, double *var,
                        double *dmean, double *dvar, gp_error *err);
    /* samples: column-major m x n_samples, caller-owned, original units. */
    int (*sample)(const gp_model *model, const gp_sample_request *req, double *samples,
                  gp_error *err);
    /* Several sample requests of the model at once (gp_model_sample_batch),
     * each already checked: samples[i], rcs[i] and errs[i] per request, and
     * samples[i] bit for bit what sample gives reqs[i] alone. NULL (most
     * methods): gp_model_sample_batch calls sample once per request. */
    void (*sample_batch)(const gp_model *model, const gp_sample_request *reqs,
                         double *const *samples, int *rcs, gp_error *errs, size_t n);
    /* Add the method's own arrays (impl) to st; the common part is done by gp_model_export. */
    int (*export_impl)(const gp_model *model, gp_state *st, gp_error *err);
    /* Rebuild model->impl from st; the common fields are already filled. */
    int (*import_impl)(gp_model *model, const gp_state *st, gp_error *err);
    void (*free_impl)(void *impl);
    /* Mixture methods: the number of equally weighted components of the
     * predictive (each a Gaussian); their predict fills quantiles and, when
     * asked, the components. NULL for single-Gaussian methods. */
    size_t (*components)(const gp_model *model);
    /* Additive methods (gp_model_parts): the number of parts and their names;
     * NULL for the others. Their predict fills component_mean/variance with
     * the parts when req->components. */
    size_t (*parts)(const gp_model *model);
    /* Methods with OBJECT options: check option `name`'s value v (NULL: not
     * given, so its default), naming the offending member under `field`
     * (e.g. "options.symmetry.generators[1]") in err. d is the number of
     * input columns, or 0 when not known yet (request parsing; the checks
     * that need d wait for gp_options_check_data). */
    int (*check_option)(const char *name, const gp_value *v, size_t d, const char *field,
                        gp_error *err);
    void (*part_name)(const gp_model *model, size_t i, char *buf, size_t len);
    /* Online methods (gp_model_observe; NULL for the others): add k rows in
     * place, all or nothing. X and Y are checked (sizes, finite, the input
     * kind's constraints) before the call; model->n_train is the method's to
     * update. */
    int (*observe)(gp_model *model, const double *X, const double *Y, size_t k, gp_error *err);
    /* Online methods that take per-point noise (gp_model_observe_noise): the
     * same with the k rows' noise variances in the caller's units (checked
     * finite and >= 0; NULL for a model fitted without). NULL: refused. */
    int (*observe_noise)(gp_model *model, const double *X, const double *Y, const double *noise,
                         size_t k, gp_error *err);
    /* What the model reports online beyond n_train (NULL: n_train, no
     * warm-up, no gate). st is zeroed with n = n_train and kappa NAN. */
    void (*online_status)(const gp_model *model, gp_online_status *st);
    /* Required, must be 1: predict's result for a point is bitwise
     * independent of the other points of the call (their number, order and
     * values), of the thread count and of the CPU's vector width, so
     * gp_model_predict_batch joins requests without changing an answer and a
     * lone point costs one point's work. BLAS does not give this (its kernels
     * change with the column count, docs/design/numerics.md "Determinism"):
     * a method's predict uses per-point arithmetic in a fixed order
     * (gp_dot, gp_dot_columns, gp_solve_lower_columns and its packed form).
     * test_method_contract fails a method that does not set it. */
    int batch_invariant;
    /* 1 when predicting (or sampling) k points in one call costs clearly
     * less than k calls of one point: the call makes a pass over a state
     * much larger than a point's work, which a batch shares (exact: its
     * N x N factor, read once per batch, not once per point; msrfr: every
     * particle's weights). The server's dynamic batching joins concurrent
     * requests only for these methods; a request to any other is answered
     * on its own thread, as a hand-off to a pool worker and back costs more
     * than joining saves (bench/results/http.md, "What dynamic batching
     * does"). Decided by the method's arithmetic, not by timing. */
    int batch_shares_work;
};

/* Value of option `name` from the request, or the spec default. For a NUMBER
 * option given as one of its keywords, gp_option_number is NAN and
 * gp_option_string the keyword (NULL when a number was given). */
double gp_option_number(const gp_method *m, const gp_fit_request *req, const char *name);
const char *gp_option_string(const gp_method *m, const gp_fit_request *req, const char *name);
/* An OBJECT option's value, NULL when not given (the method's default). */
const gp_value *gp_option_object(const gp_fit_request *req, const char *name);

/* 1 when the fit is coregionalised: m takes options.coregionalization
 * (descriptor fact coregionalization) and the request gives it. Only then
 * may y hold NaN (a missing entry) and several outputs go to a method that
 * is not multi_output (docs/design/multioutput.md). */
int gp_fit_coregionalised(const gp_method *m, const gp_fit_request *req);

/* The request's cap on N for methods that build N x N matrices
 * (max_train_points, else GP_DEFAULT_MAX_TRAIN_POINTS); the other methods
 * take cap^2 doubles, an exact fit's workspace, as their memory budget. */
size_t gp_fit_point_cap(const gp_fit_request *req);

/* A model shell of method m for n points in d dimensions: the common fields
 * zeroed, x_mean/x_scale allocated (caller: gp_model_free). */
gp_model *gp_model_alloc(const gp_method *m, size_t n, size_t d, gp_error *err);

/* ---- helpers shared by the methods ---- */

/* The noise variance as the methods optimise it: s = floor + exp(x) when
 * learned, with floor = 1e-8 times the targets' power P = mean(y^2) (their
 * variance once standardised; 1 if not positive), which keeps the covariance
 * away from singular as an optimiser drives the noise down on near-noiseless
 * data (as GPflow's variance lower bound does). Without a given value the
 * noise starts at P, "all noise", as scikit-learn's WhiteKernel(1.0) and
 * GPflow do on standardised data: it converged faster and to higher optima
 * than 0.1 P on the shared datasets (bench/results/exact.md). */
#define GP_NOISE_FLOOR_REL 1e-8
typedef struct gp_noise_param {
    int learned;  /* 0: the noise is `start` throughout */
    double start; /* the given value, or P */
    double floor;
} gp_noise_param;
/* From the request's noise fields and the working-unit targets y (n > 0). */
void gp_noise_param_init(gp_noise_param *np, const gp_fit_request *req, const double *y,
                         size_t n);
/* The same from the targets' power P (1 if not positive), for rows that are
 * not held: gp_rows_target_power gives it. */
void gp_noise_param_init_power(gp_noise_param *np, const gp_fit_request *req, double power);
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
/* The same from a factor of leading dimension lda >= n. */
int gp_state_put_cholesky_ld(gp_state *st, const char *name, const double *L, size_t n,
                             size_t lda, gp_error *err);
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
/* Joint Gaussian draws for the Gaussian methods: samples (req->m x
 * req->n_samples, original units) = mean + chol(S) e with e ~ N(0, I) from
 * req->seed (one dtrmm for all draws), where mean (m) and S (m x m, full,
 * overwritten by its factor) are the latent posterior in working units and
 * S gets the noise variance on its diagonal when req->include_noise. The
 * jitter policy of gp_cholesky_jitter applies. */
int gp_model_gaussian_draws(const gp_model *model, const gp_sample_request *req,
                            const double *mean, double *S, double *samples, gp_error *err);
/* The field of entry `bad` of y (n x p, column-major): "y[i]" for one output,
 * "y[i][j]" for several. */
void gp_y_field(char *field, size_t len, size_t bad, size_t n, size_t p);
/* The largest magnitude a value may have in working units (standardised by
 * the fit's data, or as given when a model does not standardise): a point
 * or target further than this many standard deviations from the training
 * data is refused. The bound keeps every quantity a model builds from its
 * rows finite: squares (1e200), sums of them over any N that fits in memory,
 * and products with inverses of jittered covariances (at most 1e12 or so)
 * all stay far below DBL_MAX (1.8e308). docs/design/numerics.md, "Finite in,
 * finite out". */
#define GP_WORKING_LIMIT 1e100
/* GP_EDATA naming the first cell of the k points X (original units, k x d
 * column-major, d = model->input_dim) whose value standardised by the
 * model's x_mean and x_scale is not finite or exceeds `limit` in magnitude
 * ("X[i][j]"). Points only (the model's input kind is GP_INPUT_POINT). */
int gp_check_working_points(const gp_model *model, const double *X, size_t k, double limit,
                            gp_error *err);
/* The same with the statistics given (mean, scale: d each) for k points of
 * leading dimension ld, row i named as the caller's i + shift ("X" when
 * negative): for a method that standardises by statistics of its own. */
int gp_check_standardised_points(const double *X, size_t ld, size_t k, size_t d,
                                 const double *mean, const double *scale, double limit,
                                 long shift, gp_error *err);
/* The same for k targets of a one-output model (y_mean, y_scale; "y[i]"). */
int gp_check_working_targets(const gp_model *model, const double *Y, size_t k, double limit,
                             gp_error *err);
/* GP_EDATA naming the first of the working values W (k x p, column-major,
 * leading dimension ld) that is not finite or exceeds GP_WORKING_LIMIT in
 * magnitude, row i named as the caller's row i + shift: "y[i + shift]"
 * (p = 1) or "y[i + shift][j]"; a row whose name would be negative (one the
 * caller gave earlier, e.g. in a buffer) is named "y". */
int gp_check_working_values(const double *W, size_t k, size_t p, size_t ld, long shift,
                            gp_error *err);
/* GP_EDATA naming the first value of the columns of A (n rows x cols,
 * column-major, leading dimension ld) that standardisation by its column's
 * own statistics (gp_column_stats; none without `standardize`) cannot keep
 * within GP_WORKING_LIMIT, or of a column whose standard deviation exceeds
 * it (the value furthest out): a column whose spread float64 cannot hold.
 * Every other column passes: standardised by its own statistics no value
 * lies further than sqrt(n) deviations out. Names "X[i][j]", or with is_y
 * "y[i]" (one column) or "y[i][j]", row i named as the caller's i + shift
 * ("X" or "y" when that is negative). */
int gp_check_standardisable(const double *A, size_t n, size_t cols, size_t ld, int standardize,
                            int is_y, long shift, gp_error *err);
/* Validate X/y: sizes, finiteness, the input kind's constraints (GP_EDATA
 * naming "X[i][j]", "X[i].gaussian.var[j]", "y[i]" or "y[i][j]"), values
 * that standardisation would carry beyond GP_WORKING_LIMIT (a column whose
 * spread overflows float64), then gp_check_fit_settings. */
int gp_check_training_data(const gp_fit_request *req, gp_error *err);
/* The parts of a fit request that do not depend on rows: the kernel's input
 * dimension (d, or the input kind's point dimension) and the noise. */
int gp_check_fit_settings(const gp_fit_request *req, gp_error *err);
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
/* Known per-point noise variances r (n, caller's units) in working units
 * (r / y_scale^2) into out. */
void gp_model_working_noise(const gp_model *model, const double *r, size_t n, double *out);
/* The same allocated (caller frees); NULL with *rc GP_OK when r is NULL. */
double *gp_model_working_noise_alloc(const gp_model *model, const double *r, size_t n, int *rc,
                                     gp_error *err);
/* The mean's basis H (n x p, column-major, gp_mean_basis) of n working-unit
 * points P (d x n), allocated here; NULL without memory. */
double *gp_model_mean_basis(const gp_model *model, const double *P, size_t n, gp_error *err);
/* A method that does not learn its mean inside its objective: the mean's
 * coefficients by ordinary least squares on the working targets yw of the
 * n points X (caller's units, column-major) into model->mean_coef, and yw
 * made the residual yw - H beta the method then fits (zero mean: nothing). */
int gp_model_mean_residual_ols(gp_model *model, const double *X, size_t n, double *yw,
                               gp_error *err);
/* Standardised targets (working units) of y (n) into out. */
void gp_model_working_targets(const gp_model *model, const double *y, size_t n, double *out);
/* Test points per prediction block of a feature method with width doubles
 * per point: the block stays below 4M doubles (32 MB); between 1 and m. */
size_t gp_predict_block_rows(size_t width, size_t m);
void gp_model_standardize_points(const gp_model *model, const double *X, size_t n, double *out);


#endif
