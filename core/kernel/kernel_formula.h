/* The kernels' formulas (kernel_formula.c), shared by the files of core/kernel
 * and by nothing else: the rules of the tree (its depth and dimension), a
 * leaf's parameters, value and gradient factors as a function of its squared
 * distance (inline here, so that the Gram loops of kernel_gram.c compile
 * them into their pair loops as the single-pair evaluation does), and the
 * walk over the tree with the leaf supplied by a callback. */
#ifndef GP_KERNEL_FORMULA_H
#define GP_KERNEL_FORMULA_H

#include <math.h>
#include <stddef.h>

#include "core/kernel/kernel.h"
#include "core/linalg/fastmath.h"

/* Every walk over a kernel recurses; trees deeper than this are refused so
 * that neither a request nor a corrupt code can exhaust the stack. */
#define KERNEL_MAX_DEPTH 32

/* Sanity bound on input_dim, far above any real data set's width; it keeps
 * a corrupt code from asking for absurd allocations. */
#define KERNEL_MAX_DIM ((size_t)1 << 24)
#define KPI 3.14159265358979323846
#define SQRT3 1.73205080756887729353
#define SQRT5 2.23606797749978969641

/* ------------------------------------------------------------------------ */
/* leaf mathematics                                                           */

/* A leaf's hyperparameters in natural units, computed once per call. */
typedef struct leaf_par {
    gp_kernel_type type;
    double var;    /* sigma^2 */
    double alpha;  /* rq */
    double period; /* periodic */
    double ell;    /* periodic lengthscale */
} leaf_par;

/* Each *_terms function returns k from the pair statistic q and, when c is
 * non-NULL, writes the derivative pieces: c[0] is the factor with
 * dk/dlog l_i = c[0] r_i^2 for the stationary kernels (dk/dlog l itself for
 * periodic), c[1] is dk/dlog alpha (rq) or dk/dlog p (periodic). Their forms
 * follow scikit-learn's so that values agree to rounding. */

/* Value of one leaf, and with g non-NULL its gradient (leaf_n_params entries). */
typedef double (*leaf_fn)(void *ctx, const gp_kernel *leaf, int same, double *g);

int gp_kernel_is_leaf_type(int type);
/* The kernels whose r^2 is taken over lengthscale-scaled coordinates; the only
 * ones for which ARD means anything. */
int gp_kernel_is_scaled_type(gp_kernel_type type);
size_t gp_kernel_leaf_n_params(const gp_kernel *k);
const char *gp_kernel_name_or_unknown(int type);
leaf_par gp_kernel_leaf_par_of(const gp_kernel *k);
/* Writes a leaf's gradient (leaf_n_params entries) except the per-dimension
 * ARD entries, which need the coordinates: those are *c0 times the squared
 * scaled difference. Returns k. */
double gp_kernel_leaf_grad_common(const gp_kernel *k, const leaf_par *p, double q, int same,
                                  double *g, double *c0);

static inline double rbf_terms(const leaf_par *p, double r2, double *c)
{
    double k = p->var * gp_exp(-0.5 * r2);
    if (c)
        c[0] = k;
    return k;
}

static inline double matern12_terms(const leaf_par *p, double r2, double *c)
{
    double r = sqrt(r2);
    double k = p->var * gp_exp(-r);
    /* dk/dlog l_i = k r_i^2 / r; as r_i^2 <= r^2 it tends to 0 with r. */
    if (c)
        c[0] = r > 0.0 ? k / r : 0.0;
    return k;
}

static inline double matern32_terms(const leaf_par *p, double r2, double *c)
{
    double s = SQRT3 * sqrt(r2);
    double e = gp_exp(-s);
    if (c)
        c[0] = 3.0 * p->var * e;
    return p->var * ((1.0 + s) * e);
}

static inline double matern52_terms(const leaf_par *p, double r2, double *c)
{
    double s = SQRT5 * sqrt(r2);
    double e = gp_exp(-s);
    if (c)
        c[0] = (5.0 / 3.0) * p->var * (1.0 + s) * e;
    return p->var * ((1.0 + s + 5.0 * r2 / 3.0) * e);
}

static inline double rq_terms(const leaf_par *p, double r2, double *c)
{
    double u = r2 / (2.0 * p->alpha);
    double lg = log1p(u); /* log1p: accurate for the small u of close points */
    double k = p->var * exp(-p->alpha * lg);
    if (c) {
        c[0] = k / (1.0 + u);
        c[1] = k * p->alpha * (u / (1.0 + u) - lg);
    }
    return k;
}

static inline double periodic_terms(const leaf_par *p, double d2, double *c)
{
    double arg = KPI * sqrt(d2) / p->period;
    double s = sin(arg);
    double t = s / p->ell;
    double k = p->var * exp(-2.0 * t * t);
    if (c) {
        c[0] = 4.0 * k * t * t;
        c[1] = 4.0 * k * arg * s * cos(arg) / (p->ell * p->ell);
    }
    return k;
}

/* q is r^2 (stationary), d^2 (periodic) or x^T z (linear); white uses `same`. */
static inline double leaf_terms(const leaf_par *p, double q, int same, double *c)
{
    switch (p->type) {
    case GP_KERNEL_RBF: return rbf_terms(p, q, c);
    case GP_KERNEL_MATERN12: return matern12_terms(p, q, c);
    case GP_KERNEL_MATERN32: return matern32_terms(p, q, c);
    case GP_KERNEL_MATERN52: return matern52_terms(p, q, c);
    case GP_KERNEL_RQ: return rq_terms(p, q, c);
    case GP_KERNEL_PERIODIC: return periodic_terms(p, q, c);
    case GP_KERNEL_LINEAR: return p->var * q;
    case GP_KERNEL_WHITE: return same ? p->var : 0.0;
    default: return NAN;
    }
}

/* Scale of seen coordinate c: its lengthscale for the scaled kernels, else 1. */
static inline double scale_of(const gp_kernel *k, size_t c)
{
    if (!gp_kernel_is_scaled_type(k->type))
        return 1.0;
    return exp(k->log_lengthscale[k->ard ? c : 0]);
}

static inline size_t dim_of(const gp_kernel *k, size_t c)
{
    return k->active_dims ? k->active_dims[c] : c;
}

/* The pair statistic on two scaled coordinate vectors of length na. */
static inline double vec_q(gp_kernel_type type, const double *a, const double *b, size_t na)
{
    double q = 0.0;
    if (type == GP_KERNEL_LINEAR) {
        for (size_t c = 0; c < na; c++)
            q += a[c] * b[c];
        return q;
    }
    for (size_t c = 0; c < na; c++) {
        double d = a[c] - b[c];
        q += d * d;
    }
    return q;
}

/* The walk over the tree with the leaf supplied by a callback: local to each
 * file (inline), so that GCC compiles the single-pair and the Gram paths as
 * it did when they shared one file. */
static inline int gp_kernel_is_composite(const gp_kernel *k)
{
    return k->type == GP_KERNEL_SUM || k->type == GP_KERNEL_PRODUCT;
}

static inline double tree_value(const gp_kernel *k, leaf_fn fn, void *ctx, int same)
{
    if (!gp_kernel_is_composite(k))
        return fn(ctx, k, same, NULL);
    int sum = k->type == GP_KERNEL_SUM;
    double acc = sum ? 0.0 : 1.0;
    for (size_t t = 0; t < k->n_terms; t++) {
        double v = tree_value(k->terms[t], fn, ctx, same);
        acc = sum ? acc + v : acc * v;
    }
    return acc;
}


static inline void scale_slice(double *g, size_t n, double f)
{
    for (size_t i = 0; i < n; i++)
        g[i] *= f;
}

/* Value and gradient; *used is set to the number of gradient entries written. */
static inline double tree_grad(const gp_kernel *k, leaf_fn fn, void *ctx, int same, double *g,
                               size_t *used)
{
    if (!gp_kernel_is_composite(k)) {
        *used = gp_kernel_leaf_n_params(k);
        return fn(ctx, k, same, g);
    }
    int sum = k->type == GP_KERNEL_SUM;
    double acc = sum ? 0.0 : 1.0;
    size_t n = 0;
    for (size_t t = 0; t < k->n_terms; t++) {
        size_t u;
        double v = tree_grad(k->terms[t], fn, ctx, same, g + n, &u);
        if (sum) {
            acc += v;
        } else {
            /* Product rule without dividing by values that may be 0: earlier
             * slices get this term's value, this slice the earlier product. */
            scale_slice(g, n, v);
            scale_slice(g + n, u, acc);
            acc *= v;
        }
        n += u;
    }
    *used = n;
    return acc;
}

#endif
