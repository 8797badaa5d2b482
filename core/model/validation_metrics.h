/* gpserve core: the scores of held-out rows against a model's predictive
 * (docs/design/numerics.md, "Validation"), in the caller's units of y:
 *
 *   gaussian   rmse of the predictive mean; nlpd = -mean log p(y) under the
 *              predictive of y (noise included; a mixture's own density);
 *              coverage(a) = share of y inside the central interval of
 *              level a, [q((1-a)/2), q((1+a)/2)] of the predictive's
 *              quantiles (mean +- z sd for a single Gaussian)
 *   poisson    rmse of the count's mean; nlpd = -mean log P(y) (the mixed
 *              Poisson's mass, gp_lik_log_predictive); coverage of the
 *              count quantiles' intervals (ends included), read from the
 *              count CDF at y and y - 1 (gp_lik_count_cdf)
 *   bernoulli  nlpd = log loss of p(y=1) clipped to [1e-15, 1 - 1e-15];
 *              accuracy of p >= 0.5; a reliability table (gp_reliability)
 *   softmax    nlpd = log loss of the label's class probability; accuracy
 *              of the most probable class (the lowest on a tie); a top-label
 *              reliability table (that class's probability against its hits)
 *
 * A NaN target (a coregionalised output's missing entry) is skipped. */
#ifndef GP_MODEL_VALIDATION_METRICS_H
#define GP_MODEL_VALIDATION_METRICS_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/model/model.h"

/* The nominal levels of the coverage (the calibration plot's x axis). */
#define GP_VALIDATION_LEVELS 11
extern const double gp_validation_levels[GP_VALIDATION_LEVELS];
/* The index of level a in gp_validation_levels, or -1. */
int gp_validation_level_index(double a);

typedef struct gp_validation_metrics {
    size_t n;        /* held-out values scored */
    double rmse;     /* gaussian, poisson (NAN otherwise) */
    double nlpd;     /* every likelihood; the log loss for bernoulli and softmax */
    double accuracy; /* bernoulli, softmax: share in [0, 1] (NAN otherwise) */
    double coverage[GP_VALIDATION_LEVELS]; /* gaussian, poisson (NAN otherwise) */
} gp_validation_metrics;

/* The reliability table: a predicted probability in GP_RELIABILITY_BINS
 * equal bins of [0, 1] (p = 1 in the last); per bin the count, the mean
 * prediction and the observed share of hits. Bernoulli: p(y=1), hit y = 1;
 * softmax: the most probable class's probability, hit its being the label. */
#define GP_RELIABILITY_BINS 10
typedef struct gp_reliability {
    double count[GP_RELIABILITY_BINS];
    double sum_p[GP_RELIABILITY_BINS];
    double sum_y[GP_RELIABILITY_BINS];
} gp_reliability;

/* Score m held-out rows X (m x d, original units) with targets y (m x p
 * column-major; softmax: m labels) against model, into out[j] for each of
 * the model's scored outputs j (gp_validation_scored_outputs); noise (m,
 * NULL: none) the rows' known noise variances. rel (may be NULL) gets the
 * bernoulli and softmax rows added. 0 or the prediction's error. */
int gp_validation_score(const gp_model *model, const double *X, const double *y,
                        const double *noise, size_t m, size_t d, gp_validation_metrics *out,
                        gp_reliability *rel, gp_error *err);
/* The outputs a score has: the model's outputs, one for softmax. */
size_t gp_validation_scored_outputs(const gp_model *model);

/* The mean of n metrics (each field over the entries where it is finite;
 * NAN where none is), and their sample deviation (ddof 1; 0 for n = 1). */
void gp_validation_metrics_mean(const gp_validation_metrics *v, size_t n, size_t stride,
                                gp_validation_metrics *mean);
void gp_validation_metrics_sd(const gp_validation_metrics *v, size_t n, size_t stride,
                              const gp_validation_metrics *mean, gp_validation_metrics *sd);

#endif
