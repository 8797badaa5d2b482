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
#include "core/model/validation.h"

#define GP_AUTO_MAX_CANDIDATES 16
#define GP_AUTO_DEFAULT_BUDGET_S 60.0
/* Auto's validation when the request gives none: GP_AUTO_DEFAULT_FOLDS
 * folds up to GP_AUTO_HOLDOUT_MIN_ROWS rows, a seeded hold-out of
 * GP_AUTO_HOLDOUT_FRACTION beyond (one fit per candidate instead of five).
 * Why 2000: a hold-out of 0.2 x 2000 = 400 rows measures a candidate's
 * NLPD with a standard error of sd/20, sd the spread of one row's NLPD
 * (0.67-0.85 nats for sgpr, ssgp and svgp on protein's test rows), and the
 * difference of two candidates scored on the same rows, whose per-row
 * spread is 0.39-0.46 nats there, within 0.020-0.023 nats: under the issue's
 * 0.05-nat target (bench/results/auto.md, "Budgets at scale"). Below 2000
 * rows five folds keep that error (every row held out once); above, five
 * folds cost five fits per candidate, and at 40 000 rows no candidate's
 * folds fit 60 s (auto.md, "Budgets at scale"). A heavy-tailed candidate
 * (pls there: per-row sd 17.8) is not resolved by either. */
#define GP_AUTO_DEFAULT_FOLDS 5
#define GP_AUTO_HOLDOUT_MIN_ROWS 2000
#define GP_AUTO_HOLDOUT_FRACTION 0.2

/* What the rules read of a fit. */
typedef struct gp_auto_problem {
    size_t n, d;           /* rows, input columns */
    gp_likelihood likelihood;
    size_t outputs;        /* columns of y (> 1: only the methods that model several) */
    double budget_s;       /* the whole job's seconds (> 0) */
    size_t fits_each;      /* fits of one candidate's validation (folds, or 1) */
    double train_share;    /* the rows each of those fits trains on, as a share of n
                            * ((k-1)/k, or 1 - fraction; 0 counts as 1) */
    int symmetry;          /* the request gives a symmetry (hkd's option) */
} gp_auto_problem;

typedef struct gp_auto_candidate {
    const char *method;    /* a registered method's name (static) */
    double est_fit_s;      /* one fit on all n rows, estimated: the final fit */
    double est_validation_s; /* its validation: fits_each fits on train_share x n rows */
    const char *skip;      /* NULL: validate it; else why not (static), e.g. the budget */
} gp_auto_candidate;

/* The rows of the table that apply to p, in run order: out[0..*count)
 * (at most GP_AUTO_MAX_CANDIDATES). A rule that applies but cannot fit the
 * budget (its validation and then its final fit, est_validation_s +
 * est_fit_s, are over budget_s) is listed with skip set, so the leaderboard
 * says why. */
void gp_auto_candidates(const gp_auto_problem *p, gp_auto_candidate *out, size_t *count);

/* The validation auto runs when the request gives none: spec's folds and
 * fraction set for n rows (its seed kept); returns 1 when it is the
 * hold-out (n > GP_AUTO_HOLDOUT_MIN_ROWS). */
int gp_auto_default_validation(size_t n, gp_validation_spec *spec);

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

/* ---- the plan: the final fit inside budget_s ---- */

/* The seconds reserved for the final fit while the candidates c[0..n)
 * with scores s have run: the dearest final fit (est_fit_s, scaled by what
 * that candidate's validation took against est_validation_s) among the
 * done candidates that could still win, i.e. those the pick ties with its
 * winner now (within one standard error of the best mean). 0 when none is
 * done. A later best with a wider standard error may bring an earlier one
 * back into the tie; the final fit's deadline covers that case. */
double gp_auto_reserve(const gp_auto_candidate *c, const gp_auto_score *s, size_t n);

/* Candidate c's final fit on every row, estimated from what its validation
 * (score s, done) took against its estimate: est_fit_s x s->seconds /
 * est_validation_s. */
double gp_auto_final_estimate(const gp_auto_candidate *c, const gp_auto_score *s);

/* Whether a candidate may start `elapsed` seconds into the job: its
 * validation (validation_s) and then the final fit, the dearer of its own
 * (final_s) and the one reserved (reserved_s), end within budget_s. *need
 * (may be NULL) gets validation_s + that final fit. */
int gp_auto_admits(double budget_s, double elapsed, double validation_s, double final_s,
                   double reserved_s, double *need);

#endif
