/* gpbench: the test scores of one fitted model, by its likelihood.
 *
 * gaussian: "rmse", "nlpd" (mean per test point, observation variance),
 * "clamped" in original units (bench/support/scores.h); with the experiment's
 * "scores": {"mixture": true} instead the true predictive of a mixture model
 * (every component, gp_mixture_log_density) and three more: "nlpd_joint"
 * (minus the log density of the whole test vector under the mixture of joint
 * diagonal Gaussians, a sum, in the fitted units) and "coverage" (the share
 * of test points within mean ± z sd, z = "coverage_z", default 1.95); RMSE
 * and NLPD are then put back into original units by y_sd (the dataset's own
 * standardisation, prepare.h). bernoulli: "accuracy" (%, p(y=1) >= 0.5),
 * "auc" (%, rank formula, ties averaged), "log_loss" (p clipped to
 * [1e-15, 1 - 1e-15]). softmax (C = n_outputs classes, obs_mean m x C):
 * "accuracy" (%, the argmax class), "log_loss" (the true class's
 * probability clipped to [1e-15, 1]), "classes" (C). Other likelihoods (counts): "test_ll" (mean log
 * predictive per point from the latent predictive, every component) and
 * "rmse" of the observation mean. */
#ifndef GP_BENCH_SCORE_H
#define GP_BENCH_SCORE_H

#include <jansson.h>

#include "bench/support/dataset.h"
#include "core/model/model.h"

/* The scores of model on test into rec; a GP_E* code with err filled when
 * the prediction fails. spec: the experiment's "scores" (NULL: default). */
int gpb_score(const gp_model *model, const gp_dataset *test, const json_t *spec, double y_sd,
              json_t *rec, gp_error *err);

/* AUC by the rank (Mann-Whitney) formula over p (scores) and y (0/1); tied
 * scores share their average rank; NAN when one class is absent. */
double gpb_auc(const double *p, const double *y, size_t n);

#endif
