/* Gradients of a kernel with respect to its first input: see
 * core/kernel/kernel_dx.h. One pair at a time through the tree (a leaf's
 * value and gradient, then the sums and products by the product rule), with
 * the values computed as kernel_formula.c's single-pair path computes them
 * (the same scaled differences in the same order, the same leaf_terms), so
 * a value here is gp_kernel_eval's, bit for bit. */
#include "core/kernel/kernel_dx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel/kernel_formula.h"
#include "core/linalg/linalg.h"

/* One pair: the two points and whether it is k(x, x) (both arguments are x,
 * `same` for white). */
typedef struct dx_pair {
    const double *x, *z;
    int diag;
} dx_pair;

/* sin(a) / a, 1 at 0: the periodic kernel's gradient at d -> 0. */
static double sinc(double a)
{
    return a == 0.0 ? 1.0 : sin(a) / a;
}

static double linear_dx(const gp_kernel *k, const leaf_par *p, const dx_pair *pp, double *g)
{
    double q = 0.0;
    for (size_t c = 0; c < k->n_active; c++) {
        size_t i = dim_of(k, c);
        q += pp->x[i] * pp->z[i];
        g[i] = p->var * (pp->diag ? 2.0 * pp->x[i] : pp->z[i]);
    }
    return p->var * q;
}

/* Stationary and periodic leaves: r^2 (or d^2) as kernel_formula.c's raw_q
 * forms it, then the chain rule through q. */
static double distance_dx(const gp_kernel *k, const leaf_par *p, const dx_pair *pp, double *g)
{
    double q = 0.0, c[2] = {0.0, 0.0};
    for (size_t j = 0; j < k->n_active; j++) {
        double s = scale_of(k, j);
        size_t i = dim_of(k, j);
        double d = pp->x[i] / s - pp->z[i] / s;
        q += d * d;
    }
    double v = leaf_terms(p, q, pp->diag, c);
    if (pp->diag) /* k(x, x) of a stationary leaf does not depend on x */
        return v;
    double f;
    if (k->type == GP_KERNEL_PERIODIC) {
        /* dk/dd (x_i - z_i) / d with sin(arg) / d = (pi / p) sinc(arg) */
        double w = KPI / p->period, arg = w * sqrt(q);
        f = -4.0 * v * cos(arg) * w * w * sinc(arg) / (p->ell * p->ell);
        for (size_t j = 0; j < k->n_active; j++) {
            size_t i = dim_of(k, j);
            g[i] = f * (pp->x[i] - pp->z[i]);
        }
        return v;
    }
    /* leaf_terms' c[0] is dk/dlog l_i / r_i^2 = -2 dk/dr^2 (kernel_formula.h),
     * so dk/dx_i = 2 dk/dr^2 (x_i - z_i) / l_i^2 = -c[0] r_i / l_i; matern12's
     * c[0] is 0 at r = 0 (the header's convention). */
    for (size_t j = 0; j < k->n_active; j++) {
        double s = scale_of(k, j);
        size_t i = dim_of(k, j);
        g[i] = -c[0] * (pp->x[i] / s - pp->z[i] / s) / s;
    }
    return v;
}

/* A leaf's value and gradient (g: input_dim entries, written in full). */
static double leaf_dx(const gp_kernel *k, const dx_pair *pp, double *g)
{
    memset(g, 0, k->input_dim * sizeof *g);
    leaf_par p = gp_kernel_leaf_par_of(k);
    switch (k->type) {
    case GP_KERNEL_WHITE: return pp->diag ? p.var : 0.0;
    case GP_KERNEL_LINEAR: return linear_dx(k, &p, pp, g);
    default: return distance_dx(k, &p, pp, g);
    }
}

/* Value and gradient of a node; scratch holds input_dim doubles per level
 * below it. Sums and products in term order, as tree_value forms the value;
 * the product rule without dividing by a value that may be 0. */
static double node_dx(const gp_kernel *k, const dx_pair *pp, double *g, double *scratch)
{
    if (!gp_kernel_is_composite(k))
        return leaf_dx(k, pp, g);
    size_t D = k->input_dim;
    int sum = k->type == GP_KERNEL_SUM;
    double acc = sum ? 0.0 : 1.0, *gt = scratch;
    memset(g, 0, D * sizeof *g);
    for (size_t t = 0; t < k->n_terms; t++) {
        double v = node_dx(k->terms[t], pp, gt, scratch + D);
        for (size_t j = 0; j < D; j++)
            g[j] = sum ? g[j] + gt[j] : g[j] * v + acc * gt[j];
        acc = sum ? acc + v : acc * v;
    }
    return acc;
}

static size_t tree_depth(const gp_kernel *k)
{
    size_t deepest = 0;
    for (size_t t = 0; t < k->n_terms; t++) {
        size_t d = tree_depth(k->terms[t]);
        deepest = d > deepest ? d : deepest;
    }
    return 1 + deepest;
}

/* A pair's gradient buffer followed by the tree's scratch (caller frees). */
static int dx_buffers(const gp_kernel *k, double **out, gp_error *err)
{
    size_t count = 0;
    int rc = gp_checked_size(tree_depth(k) + 1, k->input_dim, &count, err);
    if (rc)
        return rc;
    *out = malloc(count * sizeof **out);
    if (*out == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a kernel gradient");
    return GP_OK;
}

int gp_kernel_cross_dx(const gp_kernel *k, const double *x, const double *Z, size_t n,
                       double *kx, double *dk, size_t lddk, gp_error *err)
{
    size_t D = k->input_dim;
    double *g = NULL;
    int rc = dx_buffers(k, &g, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        dx_pair pp = {x, Z + i * D, 0};
        double v = node_dx(k, &pp, g, g + D);
        if (kx)
            kx[i] = v;
        for (size_t j = 0; j < D; j++)
            dk[i + j * lddk] = g[j];
    }
    free(g);
    return GP_OK;
}

int gp_kernel_cross_dx_contract(const gp_kernel *k, const double *x, const double *Z, size_t n,
                                const double *W, size_t ldw, size_t c, double *G,
                                gp_error *err)
{
    size_t D = k->input_dim;
    double *g = NULL;
    int rc = dx_buffers(k, &g, err);
    if (rc)
        return rc;
    memset(G, 0, D * c * sizeof *G);
    for (size_t i = 0; i < n; i++) {
        dx_pair pp = {x, Z + i * D, 0};
        node_dx(k, &pp, g, g + D);
        for (size_t r = 0; r < c; r++) {
            double w = W[i + r * ldw];
            double *Gr = G + r * D;
            for (size_t j = 0; j < D; j++)
                Gr[j] += w * g[j];
        }
    }
    free(g);
    return GP_OK;
}

int gp_kernel_diag_dx(const gp_kernel *k, const double *x, double *kxx, double *g,
                      gp_error *err)
{
    size_t D = k->input_dim;
    double *b = NULL;
    int rc = dx_buffers(k, &b, err);
    if (rc)
        return rc;
    dx_pair pp = {x, x, 1};
    double v = node_dx(k, &pp, b, b + D);
    if (kxx)
        *kxx = v;
    memcpy(g, b, D * sizeof *g);
    free(b);
    return GP_OK;
}
