/* The kernels' formulas: the types' names, the leaves' values and gradients,
 * the walk over the tree, one pair at a time (core/kernel/kernel.h), and the
 * helpers on the tree's nodes the other files of core/kernel share. The
 * bottom of core/kernel: it calls none of the other files. */
#include "core/kernel/kernel_formula.h"

#include <math.h>
#include <string.h>

#include "core/kernel/kernel.h"

static const char *const type_names[GP_KERNEL_TYPE_COUNT] = {
    "rbf",      "matern12", "matern32", "matern52", "rq",
    "periodic", "linear",   "white",    "sum",      "product",
};

int gp_kernel_type_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++)
        if (strcmp(name, type_names[t]) == 0)
            return t;
    return -1;
}

const char *gp_kernel_type_name(gp_kernel_type type)
{
    return (unsigned)type < GP_KERNEL_TYPE_COUNT ? type_names[type] : NULL;
}

int gp_kernel_is_leaf_type(int type)
{
    return type >= 0 && type < GP_KERNEL_SUM;
}

/* The kernels whose r^2 is taken over lengthscale-scaled coordinates; the only
 * ones for which ARD means anything. */
int gp_kernel_is_scaled_type(gp_kernel_type type)
{
    return (unsigned)type <= GP_KERNEL_RQ;
}

size_t gp_kernel_leaf_n_params(const gp_kernel *k)
{
    return 1 + k->n_lengthscale + (k->type == GP_KERNEL_RQ) + (k->type == GP_KERNEL_PERIODIC);
}

const char *gp_kernel_name_or_unknown(int type)
{
    const char *s = gp_kernel_type_name((gp_kernel_type)type);
    return s ? s : "unknown";
}

leaf_par gp_kernel_leaf_par_of(const gp_kernel *k)
{
    leaf_par p = {k->type, exp(k->log_variance), 1.0, 1.0, 1.0};
    if (k->type == GP_KERNEL_RQ)
        p.alpha = exp(k->log_alpha);
    if (k->type == GP_KERNEL_PERIODIC) {
        p.period = exp(k->log_period);
        p.ell = exp(k->log_lengthscale[0]);
    }
    return p;
}

/* Writes a leaf's gradient (leaf_n_params entries) except the per-dimension
 * ARD entries, which need the coordinates: those are *c0 times the squared
 * scaled difference. Returns k. */
double gp_kernel_leaf_grad_common(const gp_kernel *k, const leaf_par *p, double q, int same,
                                  double *g, double *c0)
{
    double c[2] = {0.0, 0.0};
    double v = leaf_terms(p, q, same, c);
    g[0] = v;
    *c0 = c[0];
    if (gp_kernel_is_scaled_type(k->type)) {
        if (!k->ard)
            g[1] = c[0] * q;
        if (k->type == GP_KERNEL_RQ)
            g[1 + k->n_lengthscale] = c[1];
    } else if (k->type == GP_KERNEL_PERIODIC) {
        g[1] = c[0];
        g[2] = c[1];
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* single pairs: the tree walk, with the leaf supplied by a callback          */

typedef struct raw_ctx {
    const double *x, *z;
} raw_ctx;

/* inline: as a local of one file, GCC no longer inlines it on its own */
static inline double raw_diff(const gp_kernel *k, const double *x, const double *z, size_t c)
{
    double s = scale_of(k, c);
    size_t i = dim_of(k, c);
    return x[i] / s - z[i] / s;
}

static double raw_q(const gp_kernel *k, const double *x, const double *z)
{
    double q = 0.0;
    if (k->type == GP_KERNEL_WHITE)
        return q;
    for (size_t c = 0; c < k->n_active; c++) {
        size_t i = dim_of(k, c);
        if (k->type == GP_KERNEL_LINEAR) {
            q += x[i] * z[i];
        } else {
            double d = raw_diff(k, x, z, c);
            q += d * d;
        }
    }
    return q;
}

static double raw_leaf(void *ctx, const gp_kernel *k, int same, double *g)
{
    const raw_ctx *rc = ctx;
    leaf_par p = gp_kernel_leaf_par_of(k);
    double q = raw_q(k, rc->x, rc->z);
    if (g == NULL)
        return leaf_terms(&p, q, same, NULL);
    double c0;
    double v = gp_kernel_leaf_grad_common(k, &p, q, same, g, &c0);
    for (size_t c = 0; k->ard && c < k->n_lengthscale; c++) {
        double d = raw_diff(k, rc->x, rc->z, c);
        g[1 + c] = c0 * (d * d);
    }
    return v;
}

double gp_kernel_eval(const gp_kernel *k, const double *x, const double *z, int same)
{
    raw_ctx ctx = {x, z};
    return tree_value(k, raw_leaf, &ctx, same);
}

double gp_kernel_eval_grad(const gp_kernel *k, const double *x, const double *z, int same,
                           double *grad)
{
    raw_ctx ctx = {x, z};
    size_t used;
    return tree_grad(k, raw_leaf, &ctx, same, grad, &used);
}

double gp_kernel_diag(const gp_kernel *k, const double *x)
{
    return gp_kernel_eval(k, x, x, 1);
}
