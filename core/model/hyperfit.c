/* The optimiser under a fit's priors and bounds (hyperfit.h). */
#include "core/model/hyperfit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* ---- the wrapped objective ---- */

/* One optimiser coordinate as the wrapper sees it. */
typedef struct hyper_coord {
    const gp_hyper_entry *e; /* NULL: a coordinate of the method's own */
    int noise;               /* the coordinate is gp_noise_param's x */
    int bounded;
    double lo, hi;           /* the method coordinate's interval when bounded */
} hyper_coord;

typedef struct hyper_problem {
    gp_objective_fn fn;
    void *ctx;
    size_t n;
    double noise_floor;
    hyper_coord *c;
    double *x, *gx;
} hyper_problem;

/* log p of coordinate j at method value x and d log p / dx. */
static double coord_log_prior(const hyper_problem *p, const hyper_coord *c, double x, double *dx)
{
    *dx = 0.0;
    if (c->e == NULL || c->e->prior.type == GP_PRIOR_NONE)
        return 0.0;
    if (!c->noise)
        return gp_prior_log_density(&c->e->prior, x, dx);
    /* the noise s = floor + e^x: d log s / dx = (s - floor) / s */
    double s = p->noise_floor + exp(x), dt;
    double lp = gp_prior_log_density(&c->e->prior, log(s), &dt);
    *dx = dt * (s - p->noise_floor) / s;
    return lp;
}

static double wrapped(void *ctx, const double *u, double *gu)
{
    hyper_problem *p = ctx;
    for (size_t j = 0; j < p->n; j++)
        p->x[j] = p->c[j].bounded ? gp_bound_to_t(u[j], p->c[j].lo, p->c[j].hi, NULL) : u[j];
    double f = p->fn(p->ctx, p->x, gu ? p->gx : NULL);
    if (!isfinite(f))
        return f;
    double lp = 0.0;
    for (size_t j = 0; j < p->n; j++) {
        double dlp, dxdu = 1.0;
        lp += coord_log_prior(p, &p->c[j], p->x[j], &dlp);
        if (p->c[j].bounded)
            gp_bound_to_t(u[j], p->c[j].lo, p->c[j].hi, &dxdu);
        if (gu)
            gu[j] = (p->gx[j] - dlp) * dxdu;
    }
    return isfinite(lp) ? f - lp : INFINITY;
}

/* The interval of coordinate j in the method's coordinates, from the entry's
 * natural bounds: log for a kernel parameter, log(s - floor) for the noise
 * (a lower bound at or below the floor leaves the floor as the lower end). */
static void coord_bounds(hyper_coord *c, double floor)
{
    double lo, hi;
    gp_hyper_entry_bounds(c->e, &lo, &hi);
    c->bounded = lo > 0.0 || hi < INFINITY;
    if (!c->bounded)
        return;
    if (c->noise) {
        lo = lo - floor > floor * 1e-6 ? lo - floor : floor * 1e-6;
        hi = hi - floor > lo ? hi - floor : lo * 2.0;
    }
    c->lo = lo > 0.0 ? log(lo) : -745.0; /* a one-sided bound: the smallest exp */
    c->hi = hi < INFINITY ? log(hi) : 709.0;
}

/* The coordinates, refusing a stated entry the method does not optimise. */
static int problem_coords(hyper_problem *p, const gp_hyper_spec *s, const gp_hyper_coords *hc,
                          const gp_kernel *k, gp_error *err)
{
    unsigned char *seen = calloc(s->n_kernel + 1, 1);
    if (seen == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < p->n; j++) {
        size_t i = hc->coord[j];
        hyper_coord *c = &p->c[j];
        if (i == GP_HYPER_OTHER || (i != GP_HYPER_NOISE && i >= s->n_kernel))
            continue;
        c->noise = i == GP_HYPER_NOISE;
        if (c->noise)
            i = s->n_kernel;
        c->e = &s->entry[i];
        seen[i] = 1;
        coord_bounds(c, p->noise_floor);
    }
    unsigned char *mask = malloc(s->n_kernel + 1);
    int rc = mask ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (mask)
        gp_hyper_free_mask(k, s, mask);
    for (size_t i = 0; rc == GP_OK && i <= s->n_kernel; i++) {
        int held = i < s->n_kernel ? !mask[i] : 0;
        if (seen[i] || held || !gp_hyper_entry_stated(&s->entry[i]))
            continue;
        if (i == s->n_kernel)
            continue; /* a held noise: its prior is a constant (the likelihood check is
                         gp_model_fit's) */
        char name[GP_ERROR_FIELD_LEN];
        gp_hyper_entry_name(k, i, name, sizeof name);
        rc = gp_error_set(err, GP_EUNSUPPORTED, "kernel.priors",
                          "%s is not fitted here (held, or not learned by this method), so "
                          "a prior or bound on it has no effect",
                          name);
    }
    free(mask);
    free(seen);
    return rc;
}

double gp_hyper_eval(const gp_hyper_spec *s, const gp_hyper_coords *hc, const gp_kernel *k,
                     gp_objective_fn fn, void *ctx, const double *x, double *g, gp_error *err)
{
    gp_hyper_walk *w = NULL;
    if (gp_hyper_walk_new(s, hc, k, &w, err))
        return NAN;
    double f = fn(ctx, x, g);
    if (isfinite(f))
        f -= gp_hyper_walk_prior(w, x, g);
    gp_hyper_walk_free(w);
    return f;
}

/* ---- a stepwise optimiser's view (Adam): the prior's gradient, and the
 * projection onto the bounds after each step ---- */

struct gp_hyper_walk {
    hyper_problem p;
};

int gp_hyper_walk_new(const gp_hyper_spec *s, const gp_hyper_coords *hc, const gp_kernel *k,
                      gp_hyper_walk **out, gp_error *err)
{
    *out = NULL;
    if (!gp_hyper_shapes_objective(s))
        return GP_OK;
    gp_hyper_walk *w = calloc(1, sizeof *w);
    hyper_coord *c = calloc(hc->n ? hc->n : 1, sizeof *c);
    if (w == NULL || c == NULL) {
        free(w);
        free(c);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    w->p.n = hc->n;
    w->p.noise_floor = hc->noise_floor;
    w->p.c = c;
    int rc = problem_coords(&w->p, s, hc, k, err);
    if (rc) {
        gp_hyper_walk_free(w);
        return rc;
    }
    *out = w;
    return GP_OK;
}

double gp_hyper_walk_prior(const gp_hyper_walk *w, const double *x, double *g)
{
    if (w == NULL)
        return 0.0;
    double lp = 0.0;
    for (size_t j = 0; j < w->p.n; j++) {
        double dlp;
        lp += coord_log_prior(&w->p, &w->p.c[j], x[j], &dlp);
        if (g)
            g[j] -= dlp;
    }
    return lp;
}

void gp_hyper_walk_project(const gp_hyper_walk *w, double *x)
{
    for (size_t j = 0; w && j < w->p.n; j++) {
        const hyper_coord *c = &w->p.c[j];
        if (c->bounded && x[j] < c->lo)
            x[j] = c->lo;
        else if (c->bounded && x[j] > c->hi)
            x[j] = c->hi;
    }
}

void gp_hyper_walk_free(gp_hyper_walk *w)
{
    if (w == NULL)
        return;
    free(w->p.c);
    free(w);
}

/* The value a bounded coordinate x stands for (e^x, or floor + e^x for the
 * noise) inside the entry's natural bounds: log and exp round, so x moves by
 * ulps until e^x itself is no less than lo and no more than hi. */
static double natural(const hyper_problem *p, const hyper_coord *c, double x)
{
    return c->noise ? p->noise_floor + exp(x) : exp(x);
}

static double settle(const hyper_problem *p, const hyper_coord *c, double x)
{
    double lo, hi;
    gp_hyper_entry_bounds(c->e, &lo, &hi);
    for (int i = 0; i < 64 && natural(p, c, x) < lo; i++)
        x = nextafter(x, INFINITY);
    for (int i = 0; i < 64 && natural(p, c, x) > hi; i++)
        x = nextafter(x, -INFINITY);
    return x;
}

int gp_hyper_minimize(const gp_hyper_spec *s, const gp_hyper_coords *hc, const gp_kernel *k,
                      gp_objective_fn fn, void *ctx, double *x, const gp_driver_options *opt,
                      gp_driver_result *res, gp_error *err)
{
    if (!gp_hyper_shapes_objective(s))
        return gp_driver_minimize(fn, ctx, x, hc->n, opt, res, err);
    hyper_problem p = {fn, ctx, hc->n, hc->noise_floor, NULL, NULL, NULL};
    p.c = calloc(hc->n ? hc->n : 1, sizeof *p.c);
    p.x = gp_alloc_doubles(hc->n ? hc->n : 1, err);
    p.gx = gp_alloc_doubles(hc->n ? hc->n : 1, err);
    double *u = gp_alloc_doubles(hc->n ? hc->n : 1, err);
    int rc = p.c && p.x && p.gx && u ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL,
                                                             "out of memory");
    if (rc == GP_OK)
        rc = problem_coords(&p, s, hc, k, err);
    if (rc == GP_OK) {
        for (size_t j = 0; j < hc->n; j++)
            u[j] = p.c[j].bounded ? gp_bound_to_u(x[j], p.c[j].lo, p.c[j].hi) : x[j];
        rc = gp_driver_minimize(wrapped, &p, u, hc->n, opt, res, err);
        for (size_t j = 0; j < hc->n; j++)
            x[j] = p.c[j].bounded ? settle(&p, &p.c[j],
                                           gp_bound_to_t(u[j], p.c[j].lo, p.c[j].hi, NULL))
                                  : u[j];
    }
    free(p.c);
    free(p.x);
    free(p.gx);
    free(u);
    return rc;
}

int gp_hyper_minimize_free(const gp_hyper_spec *s, const gp_kernel *k, const size_t *free_idx,
                           size_t n_free, int noise_learned, double noise_floor,
                           gp_objective_fn fn, void *ctx, double *x, size_t dim,
                           const gp_driver_options *opt, gp_driver_result *res, gp_error *err)
{
    if (s == NULL)
        return gp_driver_minimize(fn, ctx, x, dim, opt, res, err);
    size_t *coord = malloc((dim ? dim : 1) * sizeof *coord);
    if (coord == NULL) {
        memset(res, 0, sizeof *res);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t j = 0; j < dim; j++)
        coord[j] = j < n_free ? free_idx[j] : GP_HYPER_OTHER;
    if (noise_learned && n_free < dim)
        coord[n_free] = GP_HYPER_NOISE;
    gp_hyper_coords hc = {coord, dim, noise_floor};
    int rc = gp_hyper_minimize(s, &hc, k, fn, ctx, x, opt, res, err);
    free(coord);
    return rc;
}
