/* gpserve core: the suggestion engine's objective at one point: the
 * acquisition of the objective model (core/bo/acquisition.h) or the current
 * Thompson draw (core/bo/thompson.h), plus the log probability of
 * feasibility under each constraint model, and its gradient in u. */
#ifndef GP_BO_EVALUATE_H
#define GP_BO_EVALUATE_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/bo/acquisition.h"
#include "core/bo/thompson.h"
#include "core/model/model.h"

typedef struct gp_bo_eval {
    size_t D;
    const gp_model *objective;
    size_t n_constraints;
    gp_model *const *constraints;
    const double *limits;
    /* spec.kind GP_ACQ_THOMPSON: the value is s f(u) of `thompson`'s draw */
    gp_acq_spec spec;
    const gp_bo_thompson *thompson;
    /* 1: no observation is feasible yet: the value is the log probability of
     * feasibility alone (what constrained EI tends to as the incumbent goes
     * to -inf, and the usual first aim: find a feasible point) */
    int feasibility_only;
    size_t evaluations;
    /* the first failure of a model (values are then -inf) */
    int rc;
    gp_error err;
} gp_bo_eval;

/* The value to maximise at u (D values) and its gradient into grad (D
 * entries, may be NULL); -inf when a model fails (e->rc and e->err say
 * why). */
double gp_bo_eval_value(gp_bo_eval *e, const double *u, double *grad);

/* The variance floor of a model: 1e-12 y_scale^2, far below any noise the
 * fits keep, so only a point the model holds exactly reaches it. */
double gp_bo_var_floor(const gp_model *m);

#endif
