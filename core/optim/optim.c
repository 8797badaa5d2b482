/* gpserve core: L-BFGS and Adam minimisers (see optim.h).
 *
 * Both keep the caller's x at the best point evaluated so far (lowest finite
 * objective with a finite gradient), so whatever stops them - a tolerance, a
 * limit, a failed line search or a cancelling callback - x is never worse than
 * the start and never a point the objective could not evaluate. */
#include "core/optim/optim.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LBFGS_DEFAULT_MAX_ITER 200
#define LBFGS_DEFAULT_MEMORY 10
#define LBFGS_DEFAULT_GRAD_TOL 1e-6
#define LBFGS_DEFAULT_REL_TOL 1e-10
#define LBFGS_DEFAULT_EVALS_PER_ITER 20

/* Strong Wolfe constants: c1 small so any reasonable decrease counts, c2 = 0.9
 * as usual for quasi-Newton methods (loose curvature, few evaluations). */
#define WOLFE_C1 1e-4
#define WOLFE_C2 0.9
/* Trial budgets per line search: the bracketing phase grows the step 4x per
 * trial (or shrinks it 10x after a non-finite value), and zoom shrinks the
 * bracket by at least 10% per trial, so these are generous. */
#define LS_MAX_BRACKET 40
#define LS_MAX_ZOOM 40
#define LS_EXTRAPOLATE 4.0
#define LS_NONFINITE_SHRINK 0.1
/* Cubic trial steps closer than this fraction of the bracket to an end are
 * replaced by bisection, so the bracket keeps shrinking. */
#define ZOOM_SAFEGUARD 0.1
/* Skip a curvature pair unless s'y > this * |s| |y|: it keeps the implicit
 * inverse Hessian safely positive definite. */
#define CURVATURE_EPS 1e-10

/* Adam reuses the L-BFGS gradient tolerance as an early stop. */
#define ADAM_GRAD_TOL LBFGS_DEFAULT_GRAD_TOL
#define ADAM_NONFINITE_LR_SHRINK 0.1

void gp_lbfgs_default_options(gp_lbfgs_options *opt)
{
    opt->max_iterations = LBFGS_DEFAULT_MAX_ITER;
    opt->memory = LBFGS_DEFAULT_MEMORY;
    opt->grad_tol = LBFGS_DEFAULT_GRAD_TOL;
    opt->rel_tol = LBFGS_DEFAULT_REL_TOL;
    opt->max_evaluations = LBFGS_DEFAULT_EVALS_PER_ITER * LBFGS_DEFAULT_MAX_ITER;
    opt->cancel = NULL;
}

/* Zero, negative (or NaN) fields mean "use the default", so callers can set
 * only what they care about in a zero-initialised struct. */
static gp_lbfgs_options resolve_options(const gp_lbfgs_options *in)
{
    gp_lbfgs_options o;
    gp_lbfgs_default_options(&o);
    if (in == NULL)
        return o;
    if (in->max_iterations > 0)
        o.max_iterations = in->max_iterations;
    if (in->memory > 0)
        o.memory = in->memory;
    if (in->grad_tol > 0)
        o.grad_tol = in->grad_tol;
    if (in->rel_tol > 0)
        o.rel_tol = in->rel_tol;
    o.cancel = in->cancel;
    /* The evaluation default follows the (possibly overridden) iteration cap. */
    if (in->max_evaluations > 0)
        o.max_evaluations = in->max_evaluations;
    else if (o.max_iterations <= INT_MAX / LBFGS_DEFAULT_EVALS_PER_ITER)
        o.max_evaluations = LBFGS_DEFAULT_EVALS_PER_ITER * o.max_iterations;
    else
        o.max_evaluations = INT_MAX;
    return o;
}

/* ---- small vector helpers ----------------------------------------------- */

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double max_abs(const double *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* Euclidean norm, scaled by the largest entry so huge gradients do not
 * overflow to inf (which would make a zero first step). */
static double norm2(const double *a, size_t n)
{
    double m = max_abs(a, n);
    if (m == 0.0 || !isfinite(m))
        return m;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (a[i] / m) * (a[i] / m);
    return m * sqrt(s);
}

static int all_finite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

static void copy(double *dst, const double *src, size_t n)
{
    if (n > 0)
        memcpy(dst, src, n * sizeof *dst);
}

static int grad_converged(const double *g, size_t n, double f, double tol)
{
    return max_abs(g, n) <= tol * fmax(1.0, fabs(f));
}

static void set_result(gp_optim_result *res, double f, int iterations, int evaluations,
                       int converged, const char *reason)
{
    res->f = f;
    res->iterations = iterations;
    res->evaluations = evaluations;
    res->converged = converged;
    res->reason = reason;
}

/* ---- L-BFGS workspace ----------------------------------------------------- */

typedef struct lbfgs_ws {
    gp_objective_fn fn;
    void *ctx;
    size_t n;
    int max_evals, evals;
    /* best point: x is the caller's array; gbest its gradient */
    double *xbest, *gbest, fbest;
    /* current iterate, trial point, search direction */
    double *xc, *gc, fc;
    double *xt, *gt, ft;
    double *d;
    /* curvature pairs, a ring of `m` slots; oldest at `first` */
    double *s, *y, *rho, *alpha;
    int m, count, first;
    double *block; /* the single allocation behind all arrays above */
    const gp_cancel *cancel; /* polled after every evaluation */
    int cancelled;           /* it asked to stop: the search ends at once */
} lbfgs_ws;

static int ws_alloc(lbfgs_ws *w, size_t n, int m)
{
    /* 6 n-vectors, m pairs of n-vectors, 2 m-vectors; n = 0 still gets a
     * non-empty block so every pointer is valid. */
    size_t um = (size_t)m;
    const size_t max_doubles = SIZE_MAX / sizeof(double);
    if (um > max_doubles / 4 || n > (max_doubles - 2 * um - 1) / (6 + 2 * um))
        return GP_ENOMEM;
    size_t total = (6 + 2 * um) * n + 2 * um + 1;
    w->block = calloc(total, sizeof(double));
    if (w->block == NULL)
        return GP_ENOMEM;
    double *p = w->block;
    w->gbest = p, p += n;
    w->xc = p, p += n;
    w->gc = p, p += n;
    w->xt = p, p += n;
    w->gt = p, p += n;
    w->d = p, p += n;
    w->s = p, p += um * n;
    w->y = p, p += um * n;
    w->rho = p, p += um;
    w->alpha = p;
    w->m = m;
    w->count = 0;
    w->first = 0;
    return GP_OK;
}

/* Evaluates the trial point xc + a d into xt/gt/ft. A non-finite value or
 * gradient makes the point unusable (ft = +inf, returns 0); a usable point
 * better than the best so far becomes the new best. */
static int eval_trial(lbfgs_ws *w, double a)
{
    for (size_t i = 0; i < w->n; i++)
        w->xt[i] = w->xc[i] + a * w->d[i];
    w->ft = w->fn(w->ctx, w->xt, w->gt);
    w->evals++;
    /* A cancelled objective returns early with +inf; the point is not used. */
    if (gp_cancel_requested(w->cancel))
        w->cancelled = 1;
    if (w->cancelled || !isfinite(w->ft) || !all_finite(w->gt, w->n)) {
        w->ft = INFINITY;
        return 0;
    }
    if (w->ft < w->fbest) {
        w->fbest = w->ft;
        copy(w->xbest, w->xt, w->n);
        copy(w->gbest, w->gt, w->n);
    }
    return 1;
}

/* ---- two-loop recursion --------------------------------------------------- */

static int ring_index(const lbfgs_ws *w, int k) /* k-th oldest stored pair */
{
    return (w->first + k) % w->m;
}

/* d = -H g with the stored pairs and H0 = gamma I, gamma = s'y / y'y of the
 * newest pair (Nocedal & Wright, Alg. 7.4 with eq. 7.20). */
static void two_loop(lbfgs_ws *w)
{
    const size_t n = w->n;
    double *q = w->d;
    for (size_t i = 0; i < n; i++)
        q[i] = -w->gc[i];
    for (int k = w->count - 1; k >= 0; k--) {
        int j = ring_index(w, k);
        const double *s = w->s + (size_t)j * n, *y = w->y + (size_t)j * n;
        w->alpha[j] = w->rho[j] * dot(s, q, n);
        for (size_t i = 0; i < n; i++)
            q[i] -= w->alpha[j] * y[i];
    }
    int newest = ring_index(w, w->count - 1);
    const double *sn = w->s + (size_t)newest * n, *yn = w->y + (size_t)newest * n;
    double gamma = dot(sn, yn, n) / dot(yn, yn, n);
    for (size_t i = 0; i < n; i++)
        q[i] *= gamma;
    for (int k = 0; k < w->count; k++) {
        int j = ring_index(w, k);
        const double *s = w->s + (size_t)j * n, *y = w->y + (size_t)j * n;
        double beta = w->rho[j] * dot(y, q, n);
        for (size_t i = 0; i < n; i++)
            q[i] += (w->alpha[j] - beta) * s[i];
    }
}

/* Sets the search direction; returns 1 when it is steepest descent (no
 * history, or the quasi-Newton direction was not a descent direction, which
 * rounding can cause and which resets the history). */
static int choose_direction(lbfgs_ws *w)
{
    if (w->count > 0) {
        two_loop(w);
        double slope = dot(w->d, w->gc, w->n);
        if (slope < 0.0 && isfinite(slope))
            return 0;
        w->count = 0;
    }
    for (size_t i = 0; i < w->n; i++)
        w->d[i] = -w->gc[i];
    return 1;
}

/* Stores s = xt - xc, y = gt - gc unless the curvature s'y is too small
 * relative to |s||y| to keep the update positive definite. The test runs
 * before anything is written, as a full ring's next slot still holds the
 * oldest pair in use. */
static void store_pair(lbfgs_ws *w)
{
    const size_t n = w->n;
    double sy = 0.0, ss = 0.0, yy = 0.0;
    for (size_t i = 0; i < n; i++) {
        double si = w->xt[i] - w->xc[i], yi = w->gt[i] - w->gc[i];
        sy += si * yi, ss += si * si, yy += yi * yi;
    }
    if (!(sy > CURVATURE_EPS * sqrt(ss) * sqrt(yy)))
        return;
    int slot = w->count < w->m ? ring_index(w, w->count) : w->first;
    double *s = w->s + (size_t)slot * n, *y = w->y + (size_t)slot * n;
    for (size_t i = 0; i < n; i++) {
        s[i] = w->xt[i] - w->xc[i];
        y[i] = w->gt[i] - w->gc[i];
    }
    w->rho[slot] = 1.0 / sy;
    if (w->count < w->m)
        w->count++;
    else
        w->first = (w->first + 1) % w->m;
}

/* ---- strong Wolfe line search (Nocedal & Wright, Alg. 3.5 / 3.6) --------- */

enum ls_status { LS_OK, LS_FAIL, LS_MAXEVAL, LS_CANCEL };

typedef struct ls_point {
    double a, f, dphi; /* step, objective, directional derivative */
} ls_point;

/* Minimiser of the cubic matching f and f' at both ends (N&W eq. 3.59),
 * replaced by bisection when it is undefined or too close to either end. */
static double zoom_trial(ls_point lo, ls_point hi)
{
    /* A non-finite upper end: shrink towards the good end by 10x. */
    if (!isfinite(hi.f))
        return lo.a + LS_NONFINITE_SHRINK * (hi.a - lo.a);
    double d1 = lo.dphi + hi.dphi - 3.0 * (lo.f - hi.f) / (lo.a - hi.a);
    double disc = d1 * d1 - lo.dphi * hi.dphi;
    double mid = 0.5 * (lo.a + hi.a);
    if (!(disc >= 0.0))
        return mid;
    double d2 = copysign(sqrt(disc), hi.a - lo.a);
    double a = hi.a - (hi.a - lo.a) * (hi.dphi + d2 - d1) / (hi.dphi - lo.dphi + 2.0 * d2);
    double left = fmin(lo.a, hi.a), width = fabs(hi.a - lo.a);
    if (!(a >= left + ZOOM_SAFEGUARD * width && a <= left + (1 - ZOOM_SAFEGUARD) * width))
        return mid;
    return a;
}

static int strong_wolfe(double f, double dphi, double a, double f0, double dphi0)
{
    return f <= f0 + WOLFE_C1 * a * dphi0 && fabs(dphi) <= -WOLFE_C2 * dphi0;
}

/* lo satisfies sufficient decrease with the lowest f so far; the bracket
 * [lo, hi] (either order) contains strong Wolfe steps. */
static int zoom(lbfgs_ws *w, ls_point lo, ls_point hi, double f0, double dphi0)
{
    for (int j = 0; j < LS_MAX_ZOOM; j++) {
        /* Steps that no longer change x cannot make progress. */
        if (fabs(hi.a - lo.a) <= 1e-15 * fmax(fabs(lo.a), fabs(hi.a)))
            return LS_FAIL;
        if (w->evals >= w->max_evals)
            return LS_MAXEVAL;
        ls_point t = {zoom_trial(lo, hi), INFINITY, 0.0};
        if (!eval_trial(w, t.a)) {
            if (w->cancelled)
                return LS_CANCEL;
            hi = t; /* non-finite: the next trial is 10x closer to lo */
            continue;
        }
        t.f = w->ft;
        t.dphi = dot(w->gt, w->d, w->n);
        if (t.f > f0 + WOLFE_C1 * t.a * dphi0 || t.f >= lo.f) {
            hi = t;
            continue;
        }
        if (strong_wolfe(t.f, t.dphi, t.a, f0, dphi0))
            return LS_OK;
        if (t.dphi * (hi.a - lo.a) >= 0.0)
            hi = lo;
        lo = t;
    }
    return LS_FAIL;
}

/* On LS_OK the accepted point is in xt/gt/ft (it is always the last one
 * evaluated). */
static int line_search(lbfgs_ws *w, double a, double dphi0)
{
    const double f0 = w->fc;
    ls_point prev = {0.0, f0, dphi0};
    for (int i = 0; i < LS_MAX_BRACKET; i++) {
        if (w->evals >= w->max_evals)
            return LS_MAXEVAL;
        if (!eval_trial(w, a)) {
            if (w->cancelled)
                return LS_CANCEL;
            /* Overstepped into a region the objective cannot evaluate. */
            a = prev.a + LS_NONFINITE_SHRINK * (a - prev.a);
            continue;
        }
        ls_point t = {a, w->ft, dot(w->gt, w->d, w->n)};
        if (t.f > f0 + WOLFE_C1 * a * dphi0 || (prev.a > 0.0 && t.f >= prev.f))
            return zoom(w, prev, t, f0, dphi0);
        if (strong_wolfe(t.f, t.dphi, a, f0, dphi0))
            return LS_OK;
        if (t.dphi >= 0.0)
            return zoom(w, t, prev, f0, dphi0);
        prev = t;
        a *= LS_EXTRAPOLATE;
    }
    return LS_FAIL;
}

/* ---- main loop --------------------------------------------------------------- */

/* Moves the iterate to the best point if that is better; returns 1 if it moved. */
static int move_to_best(lbfgs_ws *w)
{
    if (!(w->fbest < w->fc))
        return 0;
    copy(w->xc, w->xbest, w->n);
    copy(w->gc, w->gbest, w->n);
    w->fc = w->fbest;
    return 1;
}

static void accept_trial(lbfgs_ws *w)
{
    store_pair(w);
    copy(w->xc, w->xt, w->n);
    copy(w->gc, w->gt, w->n);
    w->fc = w->ft;
}

static int rel_converged(double f_prev, double f, double tol)
{
    return fabs(f_prev - f) <= tol * fmax(fmax(fabs(f_prev), fabs(f)), 1.0);
}

/* One quasi-Newton step. Returns LS_OK after an accepted step, LS_MAXEVAL when
 * the evaluation budget ran out, LS_FAIL when no acceptable step was found
 * even after the steepest-descent retry. */
static int lbfgs_step(lbfgs_ws *w)
{
    for (int retried = 0;; retried = 1) {
        int steepest = choose_direction(w);
        double dphi0 = dot(w->gc, w->d, w->n);
        /* Quasi-Newton steps are scaled (H0 = gamma I), so try 1; a bare
         * gradient step starts at unit length in x. */
        double a0 = steepest ? 1.0 / norm2(w->d, w->n) : 1.0;
        int ls = line_search(w, a0, dphi0);
        if (ls == LS_OK) {
            accept_trial(w);
            return LS_OK;
        }
        if (ls == LS_CANCEL)
            return LS_CANCEL;
        int moved = move_to_best(w);
        if (ls == LS_MAXEVAL)
            return LS_MAXEVAL;
        /* Retry once from scratch with steepest descent, unless that would
         * only repeat the search that just failed. */
        if (retried || (steepest && !moved))
            return LS_FAIL;
        w->count = 0;
    }
}

typedef struct lbfgs_run_args {
    gp_iter_fn on_iter;
    void *iter_ctx;
    gp_optim_result *res;
    gp_error *err;
} lbfgs_run_args;

static int lbfgs_stop(lbfgs_ws *w, const lbfgs_run_args *r, int iters, int converged,
                      const char *reason)
{
    set_result(r->res, w->fbest, iters, w->evals, converged, reason);
    return GP_OK;
}

/* The objective was cancelled in the middle of an evaluation. */
static int lbfgs_cancelled(lbfgs_ws *w, const lbfgs_run_args *r, int iters)
{
    set_result(r->res, w->fbest, iters, w->evals, 0, "cancelled");
    return gp_error_set(r->err, GP_ECANCELLED, NULL,
                        "optimisation cancelled during an evaluation after %d iterations",
                        iters);
}

static int lbfgs_run(lbfgs_ws *w, const gp_lbfgs_options *o, const lbfgs_run_args *r)
{
    copy(w->xc, w->xbest, w->n);
    w->fc = w->fn(w->ctx, w->xc, w->gc);
    w->evals = 1;
    if (gp_cancel_requested(w->cancel)) {
        w->fbest = INFINITY;
        return lbfgs_cancelled(w, r, 0);
    }
    if (!isfinite(w->fc) || !all_finite(w->gc, w->n)) {
        set_result(r->res, w->fc, 0, 1, 0, "objective not finite at the start");
        return gp_error_set(r->err, GP_ENOTPD, NULL,
                            "objective or its gradient is not finite at the starting "
                            "point (f = %g)",
                            w->fc);
    }
    w->fbest = w->fc;
    copy(w->gbest, w->gc, w->n);
    for (int iter = 0;;) {
        if (grad_converged(w->gc, w->n, w->fc, o->grad_tol))
            return lbfgs_stop(w, r, iter, 1, "gradient tolerance");
        if (iter >= o->max_iterations)
            return lbfgs_stop(w, r, iter, 0, "max iterations");
        if (w->evals >= w->max_evals)
            return lbfgs_stop(w, r, iter, 0, "max evaluations");
        double f_prev = w->fc;
        int st = lbfgs_step(w);
        if (st == LS_CANCEL)
            return lbfgs_cancelled(w, r, iter);
        if (st == LS_MAXEVAL)
            return lbfgs_stop(w, r, iter, 0, "max evaluations");
        if (st == LS_FAIL)
            return lbfgs_stop(w, r, iter, 0, "line search failed");
        iter++;
        if (r->on_iter != NULL && r->on_iter(r->iter_ctx, iter, w->fc) != 0) {
            set_result(r->res, w->fbest, iter, w->evals, 0, "cancelled");
            return gp_error_set(r->err, GP_ECANCELLED, NULL,
                                "optimisation cancelled by the progress callback after "
                                "%d iterations",
                                iter);
        }
        if (grad_converged(w->gc, w->n, w->fc, o->grad_tol))
            return lbfgs_stop(w, r, iter, 1, "gradient tolerance");
        if (rel_converged(f_prev, w->fc, o->rel_tol))
            return lbfgs_stop(w, r, iter, 1, "relative tolerance");
    }
}

/* Arguments every minimiser checks first; res says "invalid argument" until a run fills it. */
static int check_minimize_args(gp_objective_fn fn, const double *x, size_t n,
                               gp_optim_result *res, gp_error *err)
{
    set_result(res, NAN, 0, 0, 0, "invalid argument");
    if (fn == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "objective function is NULL");
    if (x == NULL && n > 0)
        return gp_error_set(err, GP_EINVAL, NULL, "starting point is NULL");
    return GP_OK;
}

int gp_lbfgs_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n,
                      const gp_lbfgs_options *opt, gp_iter_fn on_iter, void *iter_ctx,
                      gp_optim_result *result, gp_error *err)
{
    gp_optim_result local = {0};
    gp_optim_result *res = result != NULL ? result : &local;
    int arg_rc = check_minimize_args(fn, x, n, res, err);
    if (arg_rc != GP_OK)
        return arg_rc;
    gp_lbfgs_options o = resolve_options(opt);
    lbfgs_ws w = {.fn = fn, .ctx = ctx, .n = n, .max_evals = o.max_evaluations, .xbest = x,
                  .cancel = o.cancel};
    if (ws_alloc(&w, n, o.memory) != GP_OK) {
        set_result(res, NAN, 0, 0, 0, "out of memory");
        return gp_error_set(err, GP_ENOMEM, NULL,
                            "cannot allocate L-BFGS workspace (n = %zu, memory = %d)", n,
                            o.memory);
    }
    lbfgs_run_args args = {on_iter, iter_ctx, res, err};
    int rc = lbfgs_run(&w, &o, &args);
    free(w.block);
    return rc;
}

/* ---- Adam ------------------------------------------------------------------ */

int gp_adam_init(gp_adam *adam, size_t n, double lr, gp_error *err)
{
    memset(adam, 0, sizeof *adam);
    if (!(lr > 0.0) || !isfinite(lr))
        return gp_error_set(err, GP_EINVAL, "lr", "learning rate must be > 0, got %g", lr);
    /* n = 0 still allocates one slot so m and v are valid pointers. */
    adam->m = calloc(n > 0 ? n : 1, sizeof(double));
    adam->v = calloc(n > 0 ? n : 1, sizeof(double));
    if (adam->m == NULL || adam->v == NULL) {
        gp_adam_free(adam);
        return gp_error_set(err, GP_ENOMEM, NULL, "cannot allocate Adam state (n = %zu)", n);
    }
    adam->n = n;
    adam->lr = lr;
    adam->beta1 = 0.9;
    adam->beta2 = 0.999;
    adam->eps = 1e-8;
    adam->t = 0;
    return GP_OK;
}

void gp_adam_step_lr(gp_adam *adam, double *x, const double *grad, double lr)
{
    adam->t++;
    /* Bias corrections for the zero-initialised moment estimates. */
    double c1 = 1.0 - pow(adam->beta1, (double)adam->t);
    double c2 = 1.0 - pow(adam->beta2, (double)adam->t);
    for (size_t i = 0; i < adam->n; i++) {
        /* A non-finite entry would poison the moments for good; treat as 0. */
        double g = isfinite(grad[i]) ? grad[i] : 0.0;
        adam->m[i] = adam->beta1 * adam->m[i] + (1.0 - adam->beta1) * g;
        adam->v[i] = adam->beta2 * adam->v[i] + (1.0 - adam->beta2) * g * g;
        double mhat = adam->m[i] / c1, vhat = adam->v[i] / c2;
        x[i] -= lr * mhat / (sqrt(vhat) + adam->eps);
    }
}

void gp_adam_step(gp_adam *adam, double *x, const double *grad)
{
    gp_adam_step_lr(adam, x, grad, adam->lr);
}

void gp_adam_free(gp_adam *adam)
{
    if (adam == NULL)
        return;
    free(adam->m);
    free(adam->v);
    adam->m = NULL;
    adam->v = NULL;
    adam->n = 0;
}

/* Max |g_i| over the finite entries (Adam ignores the others). */
static double max_abs_finite(const double *g, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(g[i]))
            m = fmax(m, fabs(g[i]));
    return m;
}

typedef struct adam_ws {
    gp_objective_fn fn;
    void *ctx;
    size_t n;
    double *x;        /* caller's array: the best point */
    double *xc, *gc;  /* current iterate and its gradient */
    double *gbest;    /* gradient at the best point */
    double fbest;
    int evals;
} adam_ws;

/* Evaluates at xc; returns 1 for a finite objective (tracking the best). */
static int adam_eval(adam_ws *w, double *f)
{
    *f = w->fn(w->ctx, w->xc, w->gc);
    w->evals++;
    if (!isfinite(*f))
        return 0;
    if (*f < w->fbest) {
        w->fbest = *f;
        copy(w->x, w->xc, w->n);
        copy(w->gbest, w->gc, w->n);
    }
    return 1;
}

typedef struct adam_run_args {
    double lr;
    int max_iterations;
    gp_iter_fn on_iter;
    void *iter_ctx;
    gp_optim_result *res;
    gp_error *err;
} adam_run_args;

/* Iteration numbers count every Adam step, including one that hit a
 * non-finite objective and was undone; on_iter is called only for the others,
 * so after a back-off it skips a number. */
static int adam_run(adam_ws *w, gp_adam *adam, const adam_run_args *a)
{
    double f;
    copy(w->xc, w->x, w->n);
    w->fbest = INFINITY;
    if (!adam_eval(w, &f)) {
        set_result(a->res, f, 0, w->evals, 0, "objective not finite at the start");
        return gp_error_set(a->err, GP_ENOTPD, NULL,
                            "objective is not finite at the starting point (f = %g)", f);
    }
    double lr = a->lr;
    for (int iter = 0; iter < a->max_iterations;) {
        if (max_abs_finite(w->gc, w->n) <= ADAM_GRAD_TOL * fmax(1.0, fabs(f))) {
            set_result(a->res, w->fbest, iter, w->evals, 1, "gradient tolerance");
            return GP_OK;
        }
        gp_adam_step_lr(adam, w->xc, w->gc, lr);
        iter++;
        if (!adam_eval(w, &f)) {
            /* Back off: resume from the best point with a 10x smaller rate
             * (the step count still advances, so this cannot loop forever). */
            copy(w->xc, w->x, w->n);
            copy(w->gc, w->gbest, w->n);
            f = w->fbest;
            lr *= ADAM_NONFINITE_LR_SHRINK;
            continue;
        }
        if (a->on_iter != NULL && a->on_iter(a->iter_ctx, iter, f) != 0) {
            set_result(a->res, w->fbest, iter, w->evals, 0, "cancelled");
            return gp_error_set(a->err, GP_ECANCELLED, NULL,
                                "optimisation cancelled by the progress callback after "
                                "%d iterations",
                                iter);
        }
    }
    set_result(a->res, w->fbest, a->max_iterations, w->evals, 0, "max iterations");
    return GP_OK;
}

int gp_adam_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n, double lr,
                     int max_iterations, gp_iter_fn on_iter, void *iter_ctx,
                     gp_optim_result *result, gp_error *err)
{
    gp_optim_result local = {0};
    gp_optim_result *res = result != NULL ? result : &local;
    int arg_rc = check_minimize_args(fn, x, n, res, err);
    if (arg_rc != GP_OK)
        return arg_rc;
    if (max_iterations < 0)
        return gp_error_set(err, GP_EINVAL, "max_iterations",
                            "max_iterations must be >= 0, got %d", max_iterations);
    gp_adam adam;
    int rc = gp_adam_init(&adam, n, lr, err);
    if (rc != GP_OK)
        return rc;
    if (n > SIZE_MAX / (3 * sizeof(double))) {
        gp_adam_free(&adam);
        return gp_error_set(err, GP_ENOMEM, NULL, "Adam workspace too large (n = %zu)", n);
    }
    double *block = calloc(3 * n + 1, sizeof(double));
    if (block == NULL) {
        gp_adam_free(&adam);
        return gp_error_set(err, GP_ENOMEM, NULL, "cannot allocate Adam workspace (n = %zu)", n);
    }
    adam_ws w = {.fn = fn, .ctx = ctx, .n = n, .x = x,
                 .xc = block, .gc = block + n, .gbest = block + 2 * n};
    adam_run_args args = {lr, max_iterations, on_iter, iter_ctx, res, err};
    rc = adam_run(&w, &adam, &args);
    free(block);
    gp_adam_free(&adam);
    return rc;
}
