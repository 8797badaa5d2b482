/* gpserve core: acquisition functions of one point, from the posterior.
 *
 * Every acquisition here is a value to MAXIMISE, computed from the latent
 * posterior at u (mean mu, variance var, and their gradients with respect
 * to u, as gp_model_predict_grad gives them), with s = +1 when the goal is
 * to maximise and -1 to minimise:
 *   log_ei        log EI = log h(z) + log sd,  z = s (mu - best) / sd
 *                 (core/bo/normal.h: finite and accurate where EI underflows)
 *   ucb           s mu + sqrt(beta) sd  (the upper bound for a maximum, minus
 *                 the lower bound for a minimum)
 *   pi            log PI = log Phi(z)
 *   max_variance  log var (active learning: the most uncertain point)
 *   thompson      s f(u) for one posterior draw f (core/bo/thompson.h)
 * and, with constraint models, the log probability of feasibility
 *   sum_i log Phi((limit_i - mu_i) / sd_i)
 * added (constrained EI is the product EI x P(feasible), so its log is the
 * sum). The variance is floored at var_floor (gradient 0 there), so a point
 * the model has seen exactly (latent variance ~0) stays finite. D is at
 * most GP_BO_MAX_DIM. */
#ifndef GP_BO_ACQUISITION_H
#define GP_BO_ACQUISITION_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/bo/space.h"

typedef enum {
    GP_ACQ_LOG_EI = 0,
    GP_ACQ_UCB,
    GP_ACQ_PI,
    GP_ACQ_THOMPSON,
    GP_ACQ_MAX_VARIANCE
} gp_acq_kind;

/* "log_ei", "ucb", "pi", "thompson", "max_variance" ("unknown" outside). */
const char *gp_acq_name(gp_acq_kind k);
/* GP_EINVAL for an unknown name. */
int gp_acq_parse(const char *name, gp_acq_kind *out);

/* The posterior of one model at one point (caller's units of y): mean and
 * variance with their gradients (D entries each) with respect to u. */
typedef struct gp_acq_posterior {
    double mean, var;
    const double *dmean, *dvar;
} gp_acq_posterior;

/* What an acquisition of the objective needs besides the posterior. */
typedef struct gp_acq_spec {
    gp_acq_kind kind;    /* log_ei, ucb, pi or max_variance (thompson: gp_bo_thompson_*) */
    int maximize;        /* the goal */
    double best;         /* log_ei, pi: the incumbent (best feasible observed value) */
    double beta;         /* ucb */
    double var_floor;    /* > 0: variances below it count as it */
} gp_acq_spec;

/* The acquisition of the objective at a point, its gradient into grad (D
 * entries, may be NULL). */
double gp_acq_value(const gp_acq_spec *spec, const gp_acq_posterior *post, size_t D,
                    double *grad);

/* log P(c(u) <= limit) of one constraint model's posterior, its gradient
 * ADDED into grad (D entries, may be NULL). */
double gp_acq_log_feasibility(double limit, const gp_acq_posterior *post, double var_floor,
                              size_t D, double *grad);

#endif
