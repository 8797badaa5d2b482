/* gpserve core: the suggestion engine (see suggest.h). */
#include "core/bo/suggest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/bo/evaluate.h"
#include "core/bo/fantasy.h"
#include "core/bo/lbfgs_box.h"
#include "core/bo/sobol.h"
#include "core/bo/thompson.h"
#include "core/linalg/linalg.h"

/* Candidates around the best observations: 16 perturbations of each of the
 * 5 best, N(0, 0.05^2) per encoded coordinate (a local search where the
 * optimum usually is, beside the global Sobol cover). */
#define LOCAL_CENTRES 5
#define LOCAL_PER_CENTRE 16
#define LOCAL_SD 0.05
/* Two points closer than this (max norm, encoded) are the same trial. */
#define SAME_POINT 1e-9
/* Each start's L-BFGS: enough for the smooth acquisitions of a GP. */
#define START_ITERATIONS 100
#define START_EVALUATIONS 300
#define START_GRAD_TOL 1e-7
#define START_REL_TOL 1e-10

typedef struct gp_bo_ranked {
    double value;
    size_t index;
} gp_bo_ranked;

typedef struct engine {
    const gp_bo_problem *p;
    size_t D;
    gp_model *obj_copy;       /* owned working copies (fantasies), or NULL */
    gp_model **con_copy;      /* owned, n_constraints, or NULL */
    gp_model **con_view;      /* what the evaluator reads */
    gp_bo_thompson *ts;       /* owned */
    gp_bo_eval ev;
    double *taken;            /* D x n_taken: observed, pending, chosen */
    size_t n_taken;
    double *cand, *val;       /* D x n_cand candidates and their values */
    gp_bo_ranked *order;      /* candidates by value */
    size_t n_cand;
    double *x, *best;         /* D each: an L-BFGS iterate, the best point */
    int have_best;            /* ev.spec.best holds an incumbent */
} engine;

/* ---- checks ---- */

static int check_finite(const double *a, size_t count, const char *name, gp_error *err)
{
    size_t bad;
    if (count > 0 && a == NULL)
        return gp_error_set(err, GP_EINVAL, name, "missing");
    if (count > 0 && !gp_all_finite(a, count, &bad)) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "%s[%zu]", name, bad);
        return gp_error_set(err, GP_EINVAL, field, "not finite");
    }
    return GP_OK;
}

static int check_model(const gp_model *m, size_t D, const char *field, gp_error *err)
{
    if (m == NULL || m->input_dim != D || m->n_outputs > 1)
        return gp_error_set(err, GP_EINVAL, field,
                            "the model must be fitted on the %zu encoded columns, one output", D);
    if (!gp_method_can_predict_grad(m->method))
        return gp_error_set(err, GP_EUNSUPPORTED, "model.method",
                            "method %s has no posterior gradient for suggestions (exact, sgpr)",
                            m->method->name);
    return GP_OK;
}

static int check_problem(const gp_bo_problem *p, size_t *D_out, gp_error *err)
{
    int rc = gp_bo_space_check(p->space, err);
    if (rc != GP_OK)
        return rc;
    size_t D = gp_bo_space_dim(p->space);
    *D_out = D;
    if (p->q < 1 || p->q > GP_BO_MAX_Q)
        return gp_error_set(err, GP_EINVAL, "count", "count must be 1 to %d", GP_BO_MAX_Q);
    if ((unsigned)p->acquisition > GP_ACQ_MAX_VARIANCE)
        return gp_error_set(err, GP_EINVAL, "acquisition.type", "unknown acquisition");
    if (p->acquisition == GP_ACQ_UCB && !(isfinite(p->beta) && p->beta >= 0.0))
        return gp_error_set(err, GP_EINVAL, "acquisition.beta", "beta must be finite and >= 0");
    if ((rc = check_finite(p->X, p->n * D, "X", err)) != GP_OK ||
        (rc = check_finite(p->y, p->n, "y", err)) != GP_OK ||
        (rc = check_finite(p->pending, p->n_pending * D, "pending", err)) != GP_OK ||
        (rc = check_finite(p->limits, p->n_constraints, "constraints.max", err)) != GP_OK)
        return rc;
    if (p->objective == NULL)
        return GP_OK;
    if ((rc = check_model(p->objective, D, "model", err)) != GP_OK)
        return rc;
    for (size_t c = 0; c < p->n_constraints; c++) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "constraints[%zu]", c);
        if ((rc = check_model(p->constraints ? p->constraints[c] : NULL, D, field, err)) != GP_OK)
            return rc;
    }
    return GP_OK;
}

/* ---- the engine's state ---- */

static void engine_free(engine *e)
{
    gp_model_free(e->obj_copy);
    for (size_t c = 0; e->con_copy != NULL && c < e->p->n_constraints; c++)
        gp_model_free(e->con_copy[c]);
    free(e->con_copy);
    free(e->con_view);
    gp_bo_thompson_free(e->ts);
    free(e->taken);
    free(e->cand);
    free(e->val);
    free(e->order);
    free(e->x);
    free(e->best);
}

static size_t raw_count(const gp_bo_problem *p)
{
    return (p->n_raw > 0 ? p->n_raw : GP_BO_DEFAULT_RAW) + LOCAL_CENTRES * LOCAL_PER_CENTRE;
}

static int engine_alloc(engine *e, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    size_t D = e->D, nc = p->n_constraints, cap, count;
    cap = p->n + p->n_pending + p->q;
    if (gp_checked_size(cap, D, &count, err) != GP_OK ||
        gp_checked_size(raw_count(p), D, &count, err) != GP_OK)
        return GP_ENOMEM;
    e->taken = gp_alloc_doubles(cap * D, err);
    e->cand = gp_alloc_doubles(raw_count(p) * D, err);
    e->val = gp_alloc_doubles(raw_count(p), err);
    e->order = malloc(raw_count(p) * sizeof *e->order);
    e->x = gp_alloc_doubles(D, err);
    e->best = gp_alloc_doubles(D, err);
    e->con_view = calloc(nc > 0 ? nc : 1, sizeof *e->con_view);
    e->con_copy = calloc(nc > 0 ? nc : 1, sizeof *e->con_copy);
    if (!e->taken || !e->cand || !e->val || !e->order || !e->x || !e->best || !e->con_view ||
        !e->con_copy)
        return gp_error_set(err, GP_ENOMEM, NULL, "no memory for a suggestion");
    if (p->n > 0)
        memcpy(e->taken, p->X, p->n * D * sizeof *e->taken);
    if (p->n_pending > 0)
        memcpy(e->taken + p->n * D, p->pending, p->n_pending * D * sizeof *e->taken);
    e->n_taken = p->n + p->n_pending;
    return GP_OK;
}

static int is_taken(const engine *e, const double *u)
{
    for (size_t i = 0; i < e->n_taken; i++) {
        const double *t = e->taken + i * e->D;
        double dist = 0.0;
        for (size_t j = 0; j < e->D; j++)
            dist = fmax(dist, fabs(t[j] - u[j]));
        if (dist <= SAME_POINT)
            return 1;
    }
    return 0;
}

/* Working copies of the models when anything is fantasised (pending
 * points, or a batch other than independent Thompson draws). */
static int setup_models(engine *e, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    int fantasise = p->n_pending > 0 || (p->q > 1 && p->acquisition != GP_ACQ_THOMPSON);
    e->ev.objective = p->objective;
    for (size_t c = 0; c < p->n_constraints; c++)
        e->con_view[c] = (gp_model *)p->constraints[c];
    if (!fantasise)
        return GP_OK;
    int rc = gp_bo_model_copy(p->objective, &e->obj_copy, err);
    for (size_t c = 0; rc == GP_OK && c < p->n_constraints; c++) {
        rc = gp_bo_model_copy(p->constraints[c], &e->con_copy[c], err);
        e->con_view[c] = e->con_copy[c];
    }
    if (rc != GP_OK)
        return rc;
    e->ev.objective = e->obj_copy;
    return GP_OK;
}

static int feasible(const gp_bo_problem *p, size_t i)
{
    for (size_t c = 0; c < p->n_constraints; c++)
        if (p->C == NULL || !(p->C[i + p->n * c] <= p->limits[c]))
            return 0;
    return 1;
}

/* Whether a is a better objective value than b for the goal. */
static int better(const gp_bo_problem *p, double a, double b)
{
    return p->maximize ? a > b : a < b;
}

/* What to maximise given the incumbent: log EI and PI need one; without
 * it they look for a feasible point (constraints), or (no constraints, no
 * observation) for the most uncertain one. */
static void apply_incumbent(engine *e)
{
    gp_acq_spec *s = &e->ev.spec;
    s->kind = e->p->acquisition;
    e->ev.feasibility_only = 0;
    if (e->have_best || (s->kind != GP_ACQ_LOG_EI && s->kind != GP_ACQ_PI))
        return;
    if (e->p->n_constraints > 0)
        e->ev.feasibility_only = 1;
    else
        s->kind = GP_ACQ_MAX_VARIANCE;
}

static void offer_incumbent(engine *e, double value)
{
    if (!e->have_best || better(e->p, value, e->ev.spec.best)) {
        e->ev.spec.best = value;
        e->have_best = 1;
    }
}

/* The incumbent from the observations (the best feasible value) and the
 * evaluator's settings. */
static void setup_acquisition(engine *e)
{
    const gp_bo_problem *p = e->p;
    gp_acq_spec *s = &e->ev.spec;
    s->maximize = p->maximize;
    s->beta = p->beta;
    s->var_floor = gp_bo_var_floor(p->objective);
    for (size_t i = 0; i < p->n; i++)
        if (feasible(p, i))
            offer_incumbent(e, p->y[i]);
    apply_incumbent(e);
    e->ev.D = e->D;
    e->ev.n_constraints = p->n_constraints;
    e->ev.constraints = e->con_view;
    e->ev.limits = p->limits;
}

/* Tell k points (D x k) to the working models at their posterior means
 * (kriging believer). The believer believes them: a believed value that is
 * feasible by the believed constraint values and better than the incumbent
 * becomes the incumbent, or a point whose mean beats the incumbent would keep
 * its expected improvement after its fantasy and the batch would pile onto
 * it. */
static int believe(engine *e, const double *U, size_t k, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    double yb[GP_BO_MAX_Q], cb[GP_BO_MAX_Q];
    unsigned char ok[GP_BO_MAX_Q];
    for (size_t done = 0; done < k; done += GP_BO_MAX_Q) {
        size_t m = k - done < GP_BO_MAX_Q ? k - done : GP_BO_MAX_Q;
        const double *V = U + done * e->D;
        int rc = gp_bo_observe_believed(e->obj_copy, V, m, yb, err);
        memset(ok, 1, sizeof ok);
        for (size_t c = 0; rc == GP_OK && c < p->n_constraints; c++) {
            rc = gp_bo_observe_believed(e->con_copy[c], V, m, cb, err);
            for (size_t i = 0; i < m; i++)
                ok[i] &= cb[i] <= p->limits[c];
        }
        if (rc != GP_OK)
            return rc;
        if (e->ts == NULL)
            for (size_t i = 0; i < m; i++)
                if (ok[i])
                    offer_incumbent(e, yb[i]);
    }
    apply_incumbent(e);
    return GP_OK;
}

/* Thompson's data: the observations and the pending points at the
 * objective's posterior mean (their fantasies). */
static int setup_thompson(engine *e, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    size_t n = p->n + p->n_pending, D = e->D;
    double *y = gp_alloc_doubles(n > 0 ? n : 1, err);
    if (y == NULL)
        return GP_ENOMEM;
    if (p->n > 0)
        memcpy(y, p->y, p->n * sizeof *y);
    int rc = gp_bo_posterior_means(p->objective, p->pending, p->n_pending, y + p->n, err);
    if (rc == GP_OK) /* e->taken holds X then pending, point-major, as the draw reads them */
        rc = gp_bo_thompson_new(p->objective, e->taken, y, n, p->n_features, p->seed ^ 0x7473ULL,
                                &e->ts, err);
    free(y);
    (void)D;
    e->ev.thompson = e->ts;
    return rc;
}

/* ---- one point ---- */

static double neg_value(void *ctx, const double *u, double *grad)
{
    engine *e = ctx;
    double v = gp_bo_eval_value(&e->ev, u, grad);
    if (!isfinite(v))
        return INFINITY;
    for (size_t j = 0; grad != NULL && j < e->D; j++)
        grad[j] = -grad[j];
    return -v;
}

/* Whether observation i ranks before k as a centre: feasible first, then
 * the better value, then the earlier trial. */
static int ranks_before(const gp_bo_problem *p, size_t i, size_t k)
{
    int fi = feasible(p, i), fk = feasible(p, k);
    if (fi != fk)
        return fi;
    if (p->y[i] != p->y[k])
        return better(p, p->y[i], p->y[k]);
    return i < k;
}

/* Indices of the up to LOCAL_CENTRES best observations (ranks_before). */
static size_t best_observations(const gp_bo_problem *p, size_t *idx)
{
    size_t k = 0;
    for (; k < LOCAL_CENTRES && k < p->n; k++) {
        size_t pick = p->n;
        for (size_t i = 0; i < p->n; i++) {
            int used = 0;
            for (size_t r = 0; r < k; r++)
                used |= idx[r] == i;
            if (!used && (pick == p->n || ranks_before(p, i, pick)))
                pick = i;
        }
        idx[k] = pick;
    }
    return k;
}

static int make_candidates(engine *e, size_t j, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    size_t D = e->D, n_sobol = p->n_raw > 0 ? p->n_raw : GP_BO_DEFAULT_RAW;
    gp_rng rng;
    gp_rng_derive(&rng, p->seed, 2 * (uint64_t)j);
    int rc = gp_sobol_points(D, gp_rng_next(&rng), 0, n_sobol, e->cand, err);
    if (rc != GP_OK)
        return rc;
    e->n_cand = n_sobol;
    size_t idx[LOCAL_CENTRES], k = best_observations(p, idx);
    gp_rng_derive(&rng, p->seed, 2 * (uint64_t)j + 1);
    for (size_t c = 0; c < k; c++)
        for (size_t r = 0; r < LOCAL_PER_CENTRE; r++, e->n_cand++)
            for (size_t d = 0; d < D; d++) {
                double v = p->X[idx[c] * D + d] + LOCAL_SD * gp_rng_normal(&rng);
                e->cand[e->n_cand * D + d] = fmin(1.0, fmax(0.0, v));
            }
    for (size_t i = 0; i < e->n_cand; i++) {
        gp_bo_snap(p->space, e->cand + i * D, e->cand + i * D);
        e->val[i] = gp_bo_eval_value(&e->ev, e->cand + i * D, NULL);
    }
    return e->ev.rc;
}

static int by_value(const void *a, const void *b)
{
    const gp_bo_ranked *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Candidates by value, best first (ties to the earlier candidate; a value
 * that is not finite last). */
static void sort_candidates(engine *e)
{
    for (size_t i = 0; i < e->n_cand; i++) {
        e->order[i].value = isfinite(e->val[i]) ? e->val[i] : -INFINITY;
        e->order[i].index = i;
    }
    qsort(e->order, e->n_cand, sizeof *e->order, by_value);
}

static int optimise_from(engine *e, const double *start, double *best_val, gp_error *err)
{
    size_t D = e->D;
    memcpy(e->x, start, D * sizeof *e->x);
    gp_lbfgs_options opt = {0};
    opt.max_iterations = START_ITERATIONS;
    opt.max_evaluations = START_EVALUATIONS;
    opt.grad_tol = START_GRAD_TOL;
    opt.rel_tol = START_REL_TOL;
    opt.cancel = e->p->cancel;
    gp_optim_result res;
    int rc = gp_lbfgs_minimize_box(neg_value, e, e->x, D, NULL, NULL, &opt, 0.0, &res, err);
    if (e->ev.rc != GP_OK)
        return e->ev.rc;
    if (rc == GP_ENOTPD) /* a start the models cannot score: skip it */
        return GP_OK;
    if (rc != GP_OK)
        return rc;
    gp_bo_snap(e->p->space, e->x, e->x);
    double v = gp_bo_eval_value(&e->ev, e->x, NULL);
    if (e->ev.rc != GP_OK)
        return e->ev.rc;
    if (isfinite(v) && v > *best_val && !is_taken(e, e->x)) {
        *best_val = v;
        memcpy(e->best, e->x, D * sizeof *e->x);
    }
    return GP_OK;
}

static int choose_point(engine *e, size_t j, double *out, double *value, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    size_t D = e->D, starts = p->n_starts > 0 ? p->n_starts : GP_BO_DEFAULT_STARTS;
    int rc = make_candidates(e, j, err);
    if (rc != GP_OK)
        return e->ev.rc != GP_OK ? gp_error_set(err, e->ev.rc, e->ev.err.field, "%s",
                                                e->ev.err.message)
                                 : rc;
    sort_candidates(e);
    double best_val = -INFINITY;
    size_t used = 0;
    for (size_t r = 0; r < e->n_cand && used < starts; r++) {
        const double *c = e->cand + e->order[r].index * D;
        if (!isfinite(e->order[r].value) || is_taken(e, c))
            continue;
        if (used == 0) { /* the best raw candidate is the floor */
            best_val = e->order[r].value;
            memcpy(e->best, c, D * sizeof *e->best);
        }
        used++;
        if (gp_cancel_requested(p->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        rc = optimise_from(e, c, &best_val, err);
        if (rc != GP_OK)
            return e->ev.rc != GP_OK ? gp_error_set(err, e->ev.rc, e->ev.err.field, "%s",
                                                    e->ev.err.message)
                                     : rc;
    }
    if (!isfinite(best_val))
        return gp_error_set(err, GP_EINVAL, "count",
                            "only %zu new distinct points were found in the search space", j);
    memcpy(out, e->best, D * sizeof *out);
    *value = best_val;
    return GP_OK;
}

/* ---- the batch ---- */

static int run(engine *e, double *out, gp_bo_report *rep, gp_error *err)
{
    const gp_bo_problem *p = e->p;
    int rc = engine_alloc(e, err);
    if (rc == GP_OK)
        rc = setup_models(e, err);
    if (rc != GP_OK)
        return rc;
    setup_acquisition(e);
    if (p->acquisition == GP_ACQ_THOMPSON && (rc = setup_thompson(e, err)) != GP_OK)
        return rc;
    if (p->n_pending > 0 && (rc = believe(e, p->pending, p->n_pending, err)) != GP_OK)
        return rc;
    for (size_t j = 0; j < p->q; j++) {
        double *u = out + j * e->D;
        if (e->ts != NULL)
            gp_bo_thompson_draw(e->ts, j);
        rc = choose_point(e, j, u, &rep->acquisition_value[j], err);
        if (rc != GP_OK)
            return rc;
        memcpy(e->taken + e->n_taken * e->D, u, e->D * sizeof *u);
        e->n_taken++;
        /* the next point sees this one as a fantasy */
        if (j + 1 < p->q && e->ts == NULL && (rc = believe(e, u, 1, err)) != GP_OK)
            return rc;
    }
    return GP_OK;
}

/* No model yet: the next points of the seed's Sobol sequence after the
 * trials already made (observed and pending), snapped. */
static int sobol_points(const gp_bo_problem *p, size_t D, double *out, gp_bo_report *rep,
                        gp_error *err)
{
    int rc = gp_sobol_points(D, p->seed, (uint64_t)(p->n + p->n_pending), p->q, out, err);
    for (size_t j = 0; rc == GP_OK && j < p->q; j++) {
        gp_bo_snap(p->space, out + j * D, out + j * D);
        rep->acquisition_value[j] = NAN;
    }
    rep->method = "sobol";
    return rc;
}

int gp_bo_suggest(const gp_bo_problem *p, double *out, gp_bo_report *rep, gp_error *err)
{
    gp_bo_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    size_t D = 0;
    int rc = check_problem(p, &D, err);
    if (rc != GP_OK)
        return rc;
    if (p->objective == NULL)
        return sobol_points(p, D, out, rep, err);
    engine e;
    memset(&e, 0, sizeof e);
    e.p = p;
    e.D = D;
    rc = run(&e, out, rep, err);
    rep->evaluations = e.ev.evaluations;
    rep->method = p->acquisition == GP_ACQ_THOMPSON ? "independent thompson draws"
                  : p->q > 1 || p->n_pending > 0 ? "kriging believer"
                                                  : "single point";
    engine_free(&e);
    return rc;
}
