/* gpserve core: the candidates of method "auto" (docs/design/api.md,
 * "Auto"): from the rows, inputs, likelihood and time budget of a fit, the
 * methods worth validating, in the order they run (the preference; the
 * dearest last), each
 * with the seconds one fit of it is estimated to take. The rules are one
 * table in auto.c, each row citing the measurement behind it
 * (bench/results/NAME.md); their order is also the preference among
 * candidates that tie (gp_auto_pick). No I/O: the api runs the candidates
 * (gp_validate) and picks among them (gp_auto_pick). */
#ifndef GP_MODEL_AUTO_H
#define GP_MODEL_AUTO_H

#include <stddef.h>

#include "core/likelihood/likelihood.h"

#define GP_AUTO_MAX_CANDIDATES 16
#define GP_AUTO_DEFAULT_BUDGET_S 60.0

/* What the rules read of a fit. */
typedef struct gp_auto_problem {
    size_t n, d;           /* rows, input columns */
    gp_likelihood likelihood;
    size_t outputs;        /* columns of y (> 1: only the methods that model several) */
    double budget_s;       /* the whole job's seconds (> 0) */
    size_t fits_each;      /* fits of one candidate's validation (folds, or 1) */
    int symmetry;          /* the request gives a symmetry (hkd's option) */
} gp_auto_problem;

typedef struct gp_auto_candidate {
    const char *method;    /* a registered method's name (static) */
    double est_fit_s;      /* one fit on all n rows, estimated */
    const char *skip;      /* NULL: validate it; else why not (static), e.g. the budget */
} gp_auto_candidate;

/* The rows of the table that apply to p, in run order: out[0..*count)
 * (at most GP_AUTO_MAX_CANDIDATES). A rule that applies but cannot fit the
 * budget (its validation alone, est_fit_s x fits_each, is over budget_s) is
 * listed with skip set, so the leaderboard says why. */
void gp_auto_candidates(const gp_auto_problem *p, gp_auto_candidate *out, size_t *count);

/* The outcome of one validated candidate, as the pick reads it. */
typedef struct gp_auto_score {
    int done;       /* validated (else skipped or failed: not picked) */
    double mean;    /* mean held-out nlpd (log loss for classes) over folds */
    double sd;      /* its sample standard deviation over folds */
    size_t folds;   /* the fits the mean is over */
    double seconds; /* the candidate's validation, wall clock (reported only) */
} gp_auto_score;

/* The index of the winner among s[0..n) (in the table's order), or -1
 * when none is done. The one-standard-error rule: the lowest mean is the
 * best; every done candidate whose mean is within one standard error of
 * the best's mean (its sd over sqrt(folds)) ties with it, and the earliest
 * of those in the table's order wins: the order is a preference, exact
 * first (bench/results/auto.md: over 20 test20 splits this rule's mean gap
 * to the best single method in hindsight was 0.003-0.026 nats per set,
 * picking the cheapest within min(se, 0.02) 0.003-0.072). */
int gp_auto_pick(const gp_auto_score *s, size_t n);

#endif
