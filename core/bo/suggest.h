/* gpserve core: the suggestion engine: the next q points of a study.
 *
 * Everything is in the encoded unit cube of core/bo/space.h. For each of
 * the q points (docs/design/numerics.md, "Suggestions"):
 *   1. raw candidates: n_raw scrambled Sobol points of the point's seed and
 *      16 Gaussian perturbations (sd 0.05) of each of the 5 best feasible
 *      observations, all snapped (gp_bo_snap) and scored by the acquisition;
 *   2. the n_starts best distinct ones start a box L-BFGS
 *      (core/bo/lbfgs_box.h) on the relaxed cube with the analytic gradient
 *      (integers and categoricals continuous there);
 *   3. each optimum is snapped and scored again; the best snapped point
 *      (optimum or raw candidate) that is not within 1e-9 (max norm) of an
 *      observed, pending or already chosen point is the answer.
 * Pending points, and the earlier points of a batch, are fantasised into
 * copies of the models (kriging believer, core/bo/fantasy.h); the incumbent
 * stays the best observed value. Thompson: one draw per point (independent
 * draws; the pending points are still fantasised into its data first).
 * Deterministic: the same problem gives the same bits (single-threaded). */
#ifndef GP_BO_SUGGEST_H
#define GP_BO_SUGGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/bo/acquisition.h"
#include "core/bo/space.h"
#include "core/model/model.h"

#define GP_BO_MAX_Q 64
#define GP_BO_DEFAULT_STARTS 10
#define GP_BO_DEFAULT_RAW 512

typedef struct gp_bo_problem {
    const gp_bo_space *space;
    const gp_model *objective;   /* NULL: no model yet: the answer is Sobol points */
    int maximize;
    size_t n_constraints;
    const gp_model *const *constraints; /* each fitted on encoded u; feasible when c(u) <= limits[i] */
    const double *limits;
    /* the observations the models hold, for the incumbent and Thompson's features:
     * X (D x n, encoded), y (n objective values as reported), C (n x n_constraints,
     * column-major, NAN: unknown) */
    const double *X, *y, *C;
    size_t n;
    const double *pending;       /* D x n_pending encoded active trials (fantasised) */
    size_t n_pending;
    gp_acq_kind acquisition;
    double beta;                 /* UCB: mean -/+ sqrt(beta) sd; the caller passes it (2.0 default) */
    size_t q;                    /* points to return (1 .. GP_BO_MAX_Q) */
    uint64_t seed;               /* the suggestion's seed (from the study seed and revision) */
    size_t n_starts;             /* L-BFGS starts (0: GP_BO_DEFAULT_STARTS) */
    size_t n_raw;                /* Sobol raw candidates (0: GP_BO_DEFAULT_RAW) */
    const gp_cancel *cancel;     /* may be NULL */
    size_t n_features;           /* Thompson's random features (0: GP_BO_THOMPSON_FEATURES) */
} gp_bo_problem;

typedef struct gp_bo_report {
    double acquisition_value[GP_BO_MAX_Q]; /* of each returned point */
    const char *method;          /* static text: "kriging believer" etc. */
    size_t evaluations;          /* acquisition evaluations */
} gp_bo_report;

/* q points (D x q, encoded and snapped) that are not already observed or
 * pending. Errors: GP_EINVAL naming "count" (q), "parameters...", "model"
 * (a model whose input width is not D), "y[i]" / "X[i]" (non-finite
 * observations), "pending"; GP_EUNSUPPORTED naming "model.method" (a model
 * without gp_model_predict_grad, or without observe when there are pending
 * points or q > 1) or "acquisition.type" (thompson on a kernel without a
 * spectral density); GP_EINVAL naming "count" when fewer than q distinct new
 * points remain (a small discrete space); GP_ECANCELLED. */
int gp_bo_suggest(const gp_bo_problem *p, double *out, gp_bo_report *rep, gp_error *err);

#endif
