/* gpserve core: the validation report of a fit (docs/design/numerics.md,
 * "Validation"): a seeded split of the rows into k folds or one hold-out
 * part, a fit (gp_model_fit) on each training part, the held-out part
 * predicted (gp_model_predict) and scored. Used by the fit route when a
 * request asks for "validation", and by whoever compares methods on the same
 * split (method "auto" picks by nlpd and its spread across folds).
 *
 * The split: rows are shuffled with the spec's seed; k folds deal the
 * shuffled rows round robin (sizes differ by at most one); a hold-out part is
 * round(fraction n) of them. For bernoulli and softmax the split is
 * stratified: the shuffled rows are grouped by class before they are dealt,
 * so every class with at least two rows is in every training part and each
 * fold holds its share of every class.
 *
 * Metrics per held-out part and output (validation_metrics.h): rmse and
 * nlpd of y (noise included; poisson: the count's mass), the coverage of the
 * central predictive intervals at gp_validation_levels, log loss (in nlpd)
 * and accuracy for bernoulli and softmax. No I/O; the result depends only on
 * the request, the spec and the method, for any thread count. */
#ifndef GP_MODEL_VALIDATION_H
#define GP_MODEL_VALIDATION_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/model.h"
#include "core/model/validation_metrics.h"

typedef struct gp_validation_spec {
    size_t folds;    /* k >= 2 folds, or 0 for a hold-out part */
    double fraction; /* the hold-out share in (0, 1) when folds is 0 */
    uint64_t seed;   /* of the shuffle */
} gp_validation_spec;

/* The outcome: per fit (fold, or the one hold-out part) and output. */
typedef struct gp_validation_report {
    gp_validation_spec spec;
    gp_likelihood likelihood;
    size_t n_fits;    /* folds, or 1 */
    size_t n_outputs; /* scored outputs (a softmax model's labels are one) */
    /* n_fits x n_outputs: fit f's output j at f * n_outputs + j (owned) */
    gp_validation_metrics *per_output;
    /* n_fits: each fit's metrics averaged over outputs (owned) */
    gp_validation_metrics *per_fit;
    /* n_outputs: each output's metrics averaged over fits (owned) */
    gp_validation_metrics *output_mean;
    /* over fits of per_fit: the mean, and the sample standard deviation
     * (ddof 1; 0 for one fit): the spread a comparison of methods needs */
    gp_validation_metrics mean, sd;
    gp_reliability reliability; /* bernoulli, softmax: pooled over every held-out point */
    double seconds;             /* the whole validation: fits and predictions */
    double fit_seconds;         /* of it, in the fits */
} gp_validation_report;

/* GP_EINVAL naming "validation.folds" (an integer 2..n) or
 * "validation.fraction" (in (0, 1) leaving a row on each side) for a spec
 * that cannot split n rows. */
int gp_validation_check(const gp_validation_spec *spec, size_t n, gp_error *err);
/* Fits a validation makes: folds, or 1 for a hold-out part. */
size_t gp_validation_fits(const gp_validation_spec *spec);

/* The split of n rows: part[i] = the fit whose held-out part row i is in
 * (0..k-1), or for a hold-out spec 0 (held out) and 1 (training only). y
 * (n labels) is read for the stratified likelihoods only. GP_EINVAL naming
 * "validation" when a class has a single row under k folds (it would be
 * missing from a training part). */
int gp_validation_split(const gp_validation_spec *spec, gp_likelihood lik, const double *y,
                        size_t n, size_t *part, gp_error *err);

/* Validate method m on the request's rows (X and y in memory, not
 * req->rows): out is filled (gp_validation_report_free). The request's
 * progress sees every fit's iterations as one run: fit f's iteration i is
 * reported as f * max + i of (n_fits + extra_fits) * max, max being that
 * fit's own budget, so a caller adding its own fits after (the final fit
 * on every row: extra_fits 1) continues the count (gp_validation_progress).
 * A fit's error is returned as is (its field), GP_ECANCELLED included. */
int gp_validate(const gp_method *m, const gp_fit_request *req, const gp_validation_spec *spec,
                size_t extra_fits, gp_validation_report *out, gp_error *err);
/* gp_validate, keeping the model of its last fit in *last (the hold-out
 * part's model, or the last fold's; NULL on failure; the caller frees it):
 * method auto's model when the final fit on every row cannot end within
 * its budget (api/auto.c). */
int gp_validate_keep(const gp_method *m, const gp_fit_request *req,
                     const gp_validation_spec *spec, size_t extra_fits,
                     gp_validation_report *out, gp_model **last, gp_error *err);
void gp_validation_report_free(gp_validation_report *r);

/* The progress of fit `index` of `total` fits reported as one run through
 * the caller's callback (what gp_validate does for its own fits). Set
 * fn/ctx/index/total, pass gp_validation_progress_fn and the struct as a
 * fit request's progress and progress_ctx. */
typedef struct gp_validation_progress {
    gp_progress_fn fn;
    void *ctx;
    size_t index, total;
} gp_validation_progress;
int gp_validation_progress_fn(void *ctx, int iteration, int max_iterations, double objective);

#endif
