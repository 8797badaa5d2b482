/* gpserve core: projected L-BFGS on a box (see lbfgs_box.h). */
#include "core/bo/lbfgs_box.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARMIJO_C1 1e-4
#define BACKTRACK 0.5
#define MAX_BACKTRACKS 40
#define DEFAULT_MAX_STEP 0.25
#define CURVATURE_EPS 1e-10

typedef struct box_ws {
    gp_objective_fn fn;
    void *ctx;
    size_t n;
    const double *lo, *hi;
    double *g, *xt, *gt, *d, *q;
    double *s, *y, *rho, *alpha; /* ring of m pairs, oldest at first */
    unsigned char *held;
    int m, count, first, evals;
    double *block;
} box_ws;

static double lo_of(const box_ws *w, size_t j)
{
    return w->lo ? w->lo[j] : 0.0;
}

static double hi_of(const box_ws *w, size_t j)
{
    return w->hi ? w->hi[j] : 1.0;
}

static double clamp(const box_ws *w, size_t j, double v)
{
    return fmin(hi_of(w, j), fmax(lo_of(w, j), v));
}

static int ws_alloc(box_ws *w, size_t n, int m)
{
    size_t um = (size_t)m;
    if (n > (SIZE_MAX / sizeof(double) - 2 * um - 1) / (5 + 2 * um))
        return GP_ENOMEM;
    w->block = calloc((5 + 2 * um) * n + 2 * um + 1, sizeof(double));
    w->held = calloc(n > 0 ? n : 1, 1);
    if (w->block == NULL || w->held == NULL)
        return GP_ENOMEM;
    double *p = w->block;
    w->g = p, p += n;
    w->xt = p, p += n;
    w->gt = p, p += n;
    w->d = p, p += n;
    w->q = p, p += n;
    w->s = p, p += um * n;
    w->y = p, p += um * n;
    w->rho = p, p += um;
    w->alpha = p;
    w->m = m;
    return GP_OK;
}

static double eval(box_ws *w, const double *x, double *g)
{
    w->evals++;
    double f = w->fn(w->ctx, x, g);
    for (size_t j = 0; isfinite(f) && j < w->n; j++)
        if (!isfinite(g[j]))
            return INFINITY;
    return isfinite(f) ? f : INFINITY;
}

/* Held: at a bound with the gradient pushing outwards. Returns the
 * projected gradient's largest entry. */
static double mark_held(box_ws *w, const double *x)
{
    double pg = 0.0;
    for (size_t j = 0; j < w->n; j++) {
        w->held[j] = (x[j] <= lo_of(w, j) && w->g[j] > 0.0) || (x[j] >= hi_of(w, j) && w->g[j] < 0.0);
        pg = fmax(pg, fabs(clamp(w, j, x[j] - w->g[j]) - x[j]));
    }
    return pg;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* d = -H g on the free variables (Nocedal & Wright, Alg. 7.4), held ones 0;
 * steepest descent on the free ones when that is not a descent direction. */
static void direction(box_ws *w)
{
    const size_t n = w->n;
    for (size_t j = 0; j < n; j++)
        w->q[j] = w->held[j] ? 0.0 : -w->g[j];
    for (int k = w->count - 1; k >= 0; k--) {
        int i = (w->first + k) % w->m;
        const double *s = w->s + (size_t)i * n, *y = w->y + (size_t)i * n;
        w->alpha[i] = w->rho[i] * dot(s, w->q, n);
        for (size_t j = 0; j < n; j++)
            w->q[j] -= w->alpha[i] * y[j];
    }
    if (w->count > 0) {
        int i = (w->first + w->count - 1) % w->m;
        const double *s = w->s + (size_t)i * n, *y = w->y + (size_t)i * n;
        double gamma = dot(s, y, n) / dot(y, y, n);
        for (size_t j = 0; j < n; j++)
            w->q[j] *= gamma;
    }
    for (int k = 0; k < w->count; k++) {
        int i = (w->first + k) % w->m;
        const double *s = w->s + (size_t)i * n, *y = w->y + (size_t)i * n;
        double b = w->rho[i] * dot(y, w->q, n);
        for (size_t j = 0; j < n; j++)
            w->q[j] += (w->alpha[i] - b) * s[j];
    }
    for (size_t j = 0; j < n; j++)
        w->d[j] = w->held[j] ? 0.0 : w->q[j];
    double slope = dot(w->d, w->g, n);
    if (!(slope < 0.0 && isfinite(slope))) {
        w->count = 0;
        for (size_t j = 0; j < n; j++)
            w->d[j] = w->held[j] ? 0.0 : -w->g[j];
    }
}

static void store_pair(box_ws *w, const double *x)
{
    const size_t n = w->n;
    double sy = 0.0, ss = 0.0, yy = 0.0;
    for (size_t j = 0; j < n; j++) {
        double sj = w->xt[j] - x[j], yj = w->gt[j] - w->g[j];
        sy += sj * yj, ss += sj * sj, yy += yj * yj;
    }
    if (!(sy > CURVATURE_EPS * sqrt(ss) * sqrt(yy)))
        return;
    int slot = w->count < w->m ? (w->first + w->count) % w->m : w->first;
    for (size_t j = 0; j < n; j++) {
        w->s[(size_t)slot * n + j] = w->xt[j] - x[j];
        w->y[(size_t)slot * n + j] = w->gt[j] - w->g[j];
    }
    w->rho[slot] = 1.0 / sy;
    if (w->count < w->m)
        w->count++;
    else
        w->first = (w->first + 1) % w->m;
}

/* Backtracking along P(x + a d); on success xt/gt hold the accepted point
 * and *ft its value. */
static int search(box_ws *w, const double *x, double f, double max_step, int max_evals,
                  const gp_cancel *cancel, double *ft)
{
    double dmax = 0.0;
    for (size_t j = 0; j < w->n; j++)
        dmax = fmax(dmax, fabs(w->d[j]));
    if (dmax == 0.0)
        return 0;
    double a = fmin(1.0, max_step / dmax);
    for (int k = 0; k < MAX_BACKTRACKS && w->evals < max_evals; k++, a *= BACKTRACK) {
        double decrease = 0.0;
        int moved = 0;
        for (size_t j = 0; j < w->n; j++) {
            w->xt[j] = clamp(w, j, x[j] + a * w->d[j]);
            decrease += w->g[j] * (w->xt[j] - x[j]);
            moved |= w->xt[j] != x[j];
        }
        if (!moved)
            return 0;
        *ft = eval(w, w->xt, w->gt);
        if (gp_cancel_requested(cancel))
            return -1;
        if (*ft <= f + ARMIJO_C1 * decrease && *ft < INFINITY)
            return 1;
    }
    return 0;
}

static void finish(gp_optim_result *r, double f, int it, int evals, int converged,
                   const char *why)
{
    if (r == NULL)
        return;
    r->f = f;
    r->iterations = it;
    r->evaluations = evals;
    r->converged = converged;
    r->reason = why;
}

static int run(box_ws *w, double *x, const gp_lbfgs_options *o, double max_step,
               gp_optim_result *result, gp_error *err)
{
    for (size_t j = 0; j < w->n; j++)
        x[j] = clamp(w, j, isnan(x[j]) ? 0.5 * (lo_of(w, j) + hi_of(w, j)) : x[j]);
    double f = eval(w, x, w->g);
    if (!(f < INFINITY))
        return gp_error_set(err, GP_ENOTPD, NULL, "the objective is not finite at the start");
    int max_evals = o->max_evaluations > 0 ? o->max_evaluations : 20 * o->max_iterations;
    for (int it = 0; it < o->max_iterations; it++) {
        if (mark_held(w, x) <= o->grad_tol * fmax(1.0, fabs(f))) {
            finish(result, f, it, w->evals, 1, "gradient tolerance");
            return GP_OK;
        }
        direction(w);
        double ft = f;
        int ok = search(w, x, f, max_step, max_evals, o->cancel, &ft);
        if (ok < 0)
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        if (ok == 0) {
            finish(result, f, it, w->evals, 1, "no decrease along the projected path");
            return GP_OK;
        }
        store_pair(w, x);
        double fprev = f;
        f = ft;
        memcpy(x, w->xt, w->n * sizeof *x);
        memcpy(w->g, w->gt, w->n * sizeof *w->g);
        if (fabs(fprev - f) <= o->rel_tol * fmax(fmax(fabs(fprev), fabs(f)), 1.0)) {
            finish(result, f, it + 1, w->evals, 1, "relative tolerance");
            return GP_OK;
        }
        if (w->evals >= max_evals) {
            finish(result, f, it + 1, w->evals, 0, "max evaluations");
            return GP_OK;
        }
    }
    finish(result, f, o->max_iterations, w->evals, 0, "max iterations");
    return GP_OK;
}

int gp_lbfgs_minimize_box(gp_objective_fn fn, void *ctx, double *x, size_t n, const double *lo,
                          const double *hi, const gp_lbfgs_options *opt, double max_step,
                          gp_optim_result *result, gp_error *err)
{
    gp_lbfgs_options o;
    gp_lbfgs_default_options(&o);
    if (opt != NULL) {
        if (opt->max_iterations > 0)
            o.max_iterations = opt->max_iterations;
        if (opt->memory > 0)
            o.memory = opt->memory;
        if (opt->grad_tol > 0)
            o.grad_tol = opt->grad_tol;
        if (opt->rel_tol > 0)
            o.rel_tol = opt->rel_tol;
        o.max_evaluations = opt->max_evaluations > 0 ? opt->max_evaluations : 0;
        o.cancel = opt->cancel;
    } else {
        o.max_evaluations = 0;
    }
    box_ws w;
    memset(&w, 0, sizeof w);
    w.fn = fn, w.ctx = ctx, w.n = n, w.lo = lo, w.hi = hi;
    int rc = ws_alloc(&w, n, o.memory);
    if (rc != GP_OK) {
        free(w.block);
        free(w.held);
        return gp_error_set(err, GP_ENOMEM, NULL, "no memory for L-BFGS on %zu variables", n);
    }
    rc = run(&w, x, &o, max_step > 0.0 ? max_step : DEFAULT_MAX_STEP, result, err);
    free(w.block);
    free(w.held);
    return rc;
}
