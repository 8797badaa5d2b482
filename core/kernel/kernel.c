/* gpserve core: covariance kernels (formulas and conventions in kernel.h).
 *
 * Layout of this file:
 *   construction (leaf, composite, copy, free)
 *   the flat parameter vector (get/set, free mask, names)
 *   leaf mathematics: one function of a pair statistic q per kernel type
 *   single-pair evaluation through the tree
 *   Gram blocks and the gradient contraction on pre-scaled points
 *   the flat encoding
 *   spectral densities
 *
 * One rule keeps the paths consistent: a leaf's scaled coordinate is always
 * x_i / l_i with l_i = exp(log l_i), whether it is computed per pair
 * (gp_kernel_eval) or once per point (gp_kernel_gram), and r^2 is always the
 * sum of squared differences of those coordinates in the same order. So a
 * Gram entry equals the pairwise gp_kernel_eval bit for bit, and r^2 never
 * goes through |x|^2 + |z|^2 - 2 x^T z, which cancels digits for close points. */
#include "core/base/parallel.h"
#include "core/kernel/kernel.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* Every walk over a kernel recurses; trees deeper than this are refused so
 * that neither a request nor a corrupt code can exhaust the stack. */
#define KERNEL_MAX_DEPTH 32
/* Sanity bound on input_dim, far above any real data set's width; it keeps
 * a corrupt code from asking for absurd allocations. */
#define KERNEL_MAX_DIM ((size_t)1 << 24)

/* Encoding: header [magic, version, total length], then the root node. */
#define CODE_MAGIC 1196444494.0 /* "GPKN" as a 32-bit integer */
#define CODE_VERSION 1.0
#define CODE_HEADER 3
/* Fixed-size fields of one node (type .. n_terms without the arrays). */
#define CODE_MIN_NODE 10

#define KPI 3.14159265358979323846
#define SQRT3 1.73205080756887729353
#define SQRT5 2.23606797749978969641
#define LOG_2PI 1.83787706640934548356
#define LOG_PI 1.14472988584940017414

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

static int is_leaf_type(int type)
{
    return type >= 0 && type < GP_KERNEL_SUM;
}

static int is_composite(const gp_kernel *k)
{
    return k->type == GP_KERNEL_SUM || k->type == GP_KERNEL_PRODUCT;
}

/* The kernels whose r^2 is taken over lengthscale-scaled coordinates; the only
 * ones for which ARD means anything. */
static int is_scaled_type(gp_kernel_type type)
{
    return (unsigned)type <= GP_KERNEL_RQ;
}

static size_t expected_n_lengthscale(gp_kernel_type type, int ard, size_t n_active)
{
    if (is_scaled_type(type))
        return ard ? n_active : 1;
    return type == GP_KERNEL_PERIODIC ? 1 : 0;
}

static size_t leaf_n_params(const gp_kernel *k)
{
    return 1 + k->n_lengthscale + (k->type == GP_KERNEL_RQ) + (k->type == GP_KERNEL_PERIODIC);
}

static const char *name_or_unknown(int type)
{
    const char *s = gp_kernel_type_name((gp_kernel_type)type);
    return s ? s : "unknown";
}

/* ------------------------------------------------------------------------ */
/* construction                                                               */

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int check_active_dims(const size_t *dims, size_t n, size_t input_dim, gp_error *err)
{
    if (dims == NULL)
        return gp_error_set(err, GP_EINVAL, "active_dims", "active_dims is missing (%zu expected)",
                            n);
    if (n > input_dim)
        return gp_error_set(err, GP_EINVAL, "active_dims",
                            "%zu active dimensions for an input dimension of %zu", n, input_dim);
    for (size_t i = 0; i < n; i++)
        if (dims[i] >= input_dim)
            return gp_error_set(err, GP_EINVAL, "active_dims",
                                "active_dims[%zu] = %zu is not below the input dimension %zu", i,
                                dims[i], input_dim);
    /* Sorted copy: finds repeats in n log n, whatever the size. */
    size_t *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    memcpy(sorted, dims, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_size);
    int rc = GP_OK;
    for (size_t i = 1; i < n && rc == GP_OK; i++)
        if (sorted[i] == sorted[i - 1])
            rc = gp_error_set(err, GP_EINVAL, "active_dims", "active_dims repeats dimension %zu",
                              sorted[i]);
    free(sorted);
    return rc;
}

static int check_leaf_args(gp_kernel_type type, size_t input_dim, const size_t *active_dims,
                           size_t n_active, gp_error *err)
{
    if (!is_leaf_type((int)type))
        return gp_error_set(err, GP_EINVAL, "type", "'%s' is not a leaf kernel type",
                            name_or_unknown((int)type));
    if (input_dim < 1 || input_dim > KERNEL_MAX_DIM)
        return gp_error_set(err, GP_EINVAL, "input_dim",
                            "input dimension %zu is not in [1, %zu]", input_dim, KERNEL_MAX_DIM);
    return n_active ? check_active_dims(active_dims, n_active, input_dim, err) : GP_OK;
}

int gp_kernel_leaf(gp_kernel **out, gp_kernel_type type, size_t input_dim, int ard,
                   const size_t *active_dims, size_t n_active, gp_error *err)
{
    *out = NULL;
    int rc = check_leaf_args(type, input_dim, active_dims, n_active, err);
    if (rc)
        return rc;
    gp_kernel *k = calloc(1, sizeof *k);
    if (k == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    k->type = type;
    k->input_dim = input_dim;
    k->n_active = n_active ? n_active : input_dim;
    /* ard is kept only where it changes the lengthscales, so k->ard always
     * means "one lengthscale per seen dimension". */
    k->ard = ard && is_scaled_type(type);
    k->n_lengthscale = expected_n_lengthscale(type, k->ard, k->n_active);
    if (n_active) {
        k->active_dims = malloc(n_active * sizeof *k->active_dims);
        if (k->active_dims)
            memcpy(k->active_dims, active_dims, n_active * sizeof *k->active_dims);
    }
    if (k->n_lengthscale)
        k->log_lengthscale = calloc(k->n_lengthscale, sizeof *k->log_lengthscale);
    if ((n_active && k->active_dims == NULL) || (k->n_lengthscale && k->log_lengthscale == NULL)) {
        gp_kernel_free(k);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    *out = k;
    return GP_OK;
}

static size_t kernel_depth(const gp_kernel *k)
{
    size_t deepest = 0;
    for (size_t t = 0; t < k->n_terms; t++) {
        size_t d = kernel_depth(k->terms[t]);
        deepest = d > deepest ? d : deepest;
    }
    return 1 + deepest;
}

static int check_terms(gp_kernel *const *terms, size_t n_terms, gp_error *err)
{
    if (terms == NULL || n_terms == 0)
        return gp_error_set(err, GP_EINVAL, "terms", "a sum or product needs at least one term");
    for (size_t t = 0; t < n_terms; t++) {
        if (terms[t] == NULL)
            return gp_error_set(err, GP_EINVAL, "terms", "terms[%zu] is missing", t);
        if (terms[t]->input_dim != terms[0]->input_dim)
            return gp_error_set(err, GP_EINVAL, "terms",
                                "terms[%zu] has input dimension %zu, terms[0] has %zu", t,
                                terms[t]->input_dim, terms[0]->input_dim);
        /* The composite frees its terms: one kernel twice would be freed twice. */
        for (size_t u = 0; u < t; u++)
            if (terms[u] == terms[t])
                return gp_error_set(err, GP_EINVAL, "terms", "terms[%zu] and terms[%zu] are the "
                                    "same kernel object", u, t);
        if (kernel_depth(terms[t]) >= KERNEL_MAX_DEPTH)
            return gp_error_set(err, GP_EINVAL, "terms", "kernel nests deeper than %d levels",
                                KERNEL_MAX_DEPTH);
    }
    return GP_OK;
}

int gp_kernel_composite(gp_kernel **out, gp_kernel_type type, gp_kernel **terms, size_t n_terms,
                        gp_error *err)
{
    *out = NULL;
    if (type != GP_KERNEL_SUM && type != GP_KERNEL_PRODUCT)
        return gp_error_set(err, GP_EINVAL, "type", "'%s' is not sum or product",
                            name_or_unknown((int)type));
    int rc = check_terms(terms, n_terms, err);
    if (rc)
        return rc;
    gp_kernel *k = calloc(1, sizeof *k);
    gp_kernel **own = malloc(n_terms * sizeof *own);
    if (k == NULL || own == NULL) {
        free(k);
        free(own);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    memcpy(own, terms, n_terms * sizeof *own);
    k->type = type;
    k->input_dim = terms[0]->input_dim;
    k->n_active = k->input_dim;
    k->terms = own;
    k->n_terms = n_terms;
    *out = k;
    return GP_OK;
}

void gp_kernel_free(gp_kernel *k)
{
    if (k == NULL)
        return;
    for (size_t t = 0; t < k->n_terms; t++)
        gp_kernel_free(k->terms ? k->terms[t] : NULL);
    free(k->terms);
    free(k->active_dims);
    free(k->log_lengthscale);
    free(k);
}

static void *dup_array(const void *src, size_t count, size_t size, int *failed)
{
    if (count == 0 || src == NULL)
        return NULL;
    void *p = malloc(count * size);
    if (p == NULL)
        *failed = 1;
    else
        memcpy(p, src, count * size);
    return p;
}

int gp_kernel_copy(gp_kernel **out, const gp_kernel *k, gp_error *err)
{
    *out = NULL;
    gp_kernel *c = malloc(sizeof *c);
    if (c == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    *c = *k;
    int failed = 0;
    c->active_dims = dup_array(k->active_dims, k->n_active, sizeof *k->active_dims, &failed);
    c->log_lengthscale =
        dup_array(k->log_lengthscale, k->n_lengthscale, sizeof *k->log_lengthscale, &failed);
    c->terms = k->n_terms ? calloc(k->n_terms, sizeof *c->terms) : NULL;
    failed |= k->n_terms && c->terms == NULL;
    if (c->terms == NULL)
        c->n_terms = 0; /* so that gp_kernel_free never reads a missing array */
    for (size_t t = 0; t < c->n_terms && !failed; t++)
        failed = gp_kernel_copy(&c->terms[t], k->terms[t], err) != GP_OK;
    if (failed) {
        gp_kernel_free(c);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    *out = c;
    return GP_OK;
}

/* ------------------------------------------------------------------------ */
/* the flat parameter vector                                                 */

size_t gp_kernel_n_params(const gp_kernel *k)
{
    if (!is_composite(k))
        return leaf_n_params(k);
    size_t n = 0;
    for (size_t t = 0; t < k->n_terms; t++)
        n += gp_kernel_n_params(k->terms[t]);
    return n;
}

/* The walks below return the number of entries they consumed. */
static size_t get_rec(const gp_kernel *k, double *theta)
{
    size_t n = 0;
    if (is_composite(k)) {
        for (size_t t = 0; t < k->n_terms; t++)
            n += get_rec(k->terms[t], theta + n);
        return n;
    }
    theta[n++] = k->log_variance;
    for (size_t i = 0; i < k->n_lengthscale; i++)
        theta[n++] = k->log_lengthscale[i];
    if (k->type == GP_KERNEL_RQ)
        theta[n++] = k->log_alpha;
    if (k->type == GP_KERNEL_PERIODIC)
        theta[n++] = k->log_period;
    return n;
}

static size_t set_rec(gp_kernel *k, const double *theta)
{
    size_t n = 0;
    if (is_composite(k)) {
        for (size_t t = 0; t < k->n_terms; t++)
            n += set_rec(k->terms[t], theta + n);
        return n;
    }
    k->log_variance = theta[n++];
    for (size_t i = 0; i < k->n_lengthscale; i++)
        k->log_lengthscale[i] = theta[n++];
    if (k->type == GP_KERNEL_RQ)
        k->log_alpha = theta[n++];
    if (k->type == GP_KERNEL_PERIODIC)
        k->log_period = theta[n++];
    return n;
}

static size_t mask_rec(const gp_kernel *k, unsigned char *m)
{
    size_t n = 0;
    if (is_composite(k)) {
        for (size_t t = 0; t < k->n_terms; t++)
            n += mask_rec(k->terms[t], m + n);
        return n;
    }
    m[n++] = !(k->fixed & GP_FIX_VARIANCE);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        m[n++] = !(k->fixed & GP_FIX_LENGTHSCALE);
    if (k->type == GP_KERNEL_RQ)
        m[n++] = !(k->fixed & GP_FIX_ALPHA);
    if (k->type == GP_KERNEL_PERIODIC)
        m[n++] = !(k->fixed & GP_FIX_PERIOD);
    return n;
}

void gp_kernel_get_params(const gp_kernel *k, double *theta)
{
    get_rec(k, theta);
}

void gp_kernel_set_params(gp_kernel *k, const double *theta)
{
    set_rec(k, theta);
}

void gp_kernel_free_mask(const gp_kernel *k, unsigned char *free_mask)
{
    mask_rec(k, free_mask);
}

/* Append to buf at *pos, keeping *pos at the terminating NUL when truncated. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (w > 0)
        *pos = *pos + (size_t)w < len ? *pos + (size_t)w : len - 1;
}

static int leaf_param_name(const gp_kernel *k, size_t i, char *buf, size_t len, size_t *pos)
{
    if (i == 0) {
        append(buf, len, pos, "variance");
        return 1;
    }
    i -= 1;
    if (i < k->n_lengthscale) {
        if (k->ard)
            append(buf, len, pos, "lengthscale[%zu]", i);
        else
            append(buf, len, pos, "lengthscale");
        return 1;
    }
    i -= k->n_lengthscale;
    if (i == 0 && (k->type == GP_KERNEL_RQ || k->type == GP_KERNEL_PERIODIC)) {
        append(buf, len, pos, "%s", k->type == GP_KERNEL_RQ ? "alpha" : "period");
        return 1;
    }
    return 0;
}

void gp_kernel_param_name(const gp_kernel *k, size_t i, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    size_t pos = 0;
    /* Walk down: at each composite pick the term that holds parameter i. */
    while (is_composite(k)) {
        size_t t = 0, np = 0;
        for (; t < k->n_terms; t++, i -= np) {
            np = gp_kernel_n_params(k->terms[t]);
            if (i < np)
                break;
        }
        if (t == k->n_terms) {
            buf[0] = '\0';
            return;
        }
        append(buf, len, &pos, "terms[%zu].", t);
        k = k->terms[t];
    }
    if (!leaf_param_name(k, i, buf, len, &pos))
        buf[0] = '\0';
}

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

static leaf_par leaf_par_of(const gp_kernel *k)
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

/* Each *_terms function returns k from the pair statistic q and, when c is
 * non-NULL, writes the derivative pieces: c[0] is the factor with
 * dk/dlog l_i = c[0] r_i^2 for the stationary kernels (dk/dlog l itself for
 * periodic), c[1] is dk/dlog alpha (rq) or dk/dlog p (periodic). Their forms
 * follow scikit-learn's so that values agree to rounding. */

static inline double rbf_terms(const leaf_par *p, double r2, double *c)
{
    double k = p->var * exp(-0.5 * r2);
    if (c)
        c[0] = k;
    return k;
}

static inline double matern12_terms(const leaf_par *p, double r2, double *c)
{
    double r = sqrt(r2);
    double k = p->var * exp(-r);
    /* dk/dlog l_i = k r_i^2 / r; as r_i^2 <= r^2 it tends to 0 with r. */
    if (c)
        c[0] = r > 0.0 ? k / r : 0.0;
    return k;
}

static inline double matern32_terms(const leaf_par *p, double r2, double *c)
{
    double s = SQRT3 * sqrt(r2);
    double e = exp(-s);
    if (c)
        c[0] = 3.0 * p->var * e;
    return p->var * ((1.0 + s) * e);
}

static inline double matern52_terms(const leaf_par *p, double r2, double *c)
{
    double s = SQRT5 * sqrt(r2);
    double e = exp(-s);
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

/* Writes a leaf's gradient (leaf_n_params entries) except the per-dimension
 * ARD entries, which need the coordinates: those are *c0 times the squared
 * scaled difference. Returns k. */
static double leaf_grad_common(const gp_kernel *k, const leaf_par *p, double q, int same,
                               double *g, double *c0)
{
    double c[2] = {0.0, 0.0};
    double v = leaf_terms(p, q, same, c);
    g[0] = v;
    *c0 = c[0];
    if (is_scaled_type(k->type)) {
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

/* Scale of seen coordinate c: its lengthscale for the scaled kernels, else 1. */
static double scale_of(const gp_kernel *k, size_t c)
{
    if (!is_scaled_type(k->type))
        return 1.0;
    return exp(k->log_lengthscale[k->ard ? c : 0]);
}

static size_t dim_of(const gp_kernel *k, size_t c)
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

/* ------------------------------------------------------------------------ */
/* single pairs: the tree walk, with the leaf supplied by a callback          */

/* Value of one leaf, and with g non-NULL its gradient (leaf_n_params entries). */
typedef double (*leaf_fn)(void *ctx, const gp_kernel *leaf, int same, double *g);

static double tree_value(const gp_kernel *k, leaf_fn fn, void *ctx, int same)
{
    if (!is_composite(k))
        return fn(ctx, k, same, NULL);
    int sum = k->type == GP_KERNEL_SUM;
    double acc = sum ? 0.0 : 1.0;
    for (size_t t = 0; t < k->n_terms; t++) {
        double v = tree_value(k->terms[t], fn, ctx, same);
        acc = sum ? acc + v : acc * v;
    }
    return acc;
}

static void scale_slice(double *g, size_t n, double f)
{
    for (size_t i = 0; i < n; i++)
        g[i] *= f;
}

/* Value and gradient; *used is set to the number of gradient entries written. */
static double tree_grad(const gp_kernel *k, leaf_fn fn, void *ctx, int same, double *g,
                        size_t *used)
{
    if (!is_composite(k)) {
        *used = leaf_n_params(k);
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

typedef struct raw_ctx {
    const double *x, *z;
} raw_ctx;

static double raw_diff(const gp_kernel *k, const double *x, const double *z, size_t c)
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
    leaf_par p = leaf_par_of(k);
    double q = raw_q(k, rc->x, rc->z);
    if (g == NULL)
        return leaf_terms(&p, q, same, NULL);
    double c0;
    double v = leaf_grad_common(k, &p, q, same, g, &c0);
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

/* ------------------------------------------------------------------------ */
/* many pairs: every leaf's view of the points is scaled once                 */

typedef struct prep_leaf {
    const gp_kernel *k;
    leaf_par p;
    size_t na;       /* coordinates per point (0 for white, which reads none) */
    const double *a; /* na x n: the leaf's scaled view of X */
    const double *b; /* na x m: of Z (the same buffer as a for a Gram matrix) */
} prep_leaf;

typedef struct prep {
    prep_leaf *leaf; /* depth-first order, as tree_value meets them */
    size_t n_leaves;
    double *buf;   /* every leaf's points, then `extra` doubles */
    double *extra; /* scratch asked for by the caller */
} prep;

static size_t count_leaves(const gp_kernel *k)
{
    if (!is_composite(k))
        return 1;
    size_t n = 0;
    for (size_t t = 0; t < k->n_terms; t++)
        n += count_leaves(k->terms[t]);
    return n;
}

static size_t prep_na(const gp_kernel *k)
{
    return k->type == GP_KERNEL_WHITE ? 0 : k->n_active;
}

/* out (na x n) = the leaf's scaled coordinates of the columns of X. */
static void scale_points(const gp_kernel *k, const double *X, size_t n, double *out)
{
    size_t na = prep_na(k), dim = k->input_dim;
    for (size_t c = 0; c < na; c++) {
        double s = scale_of(k, c);
        size_t i = dim_of(k, c);
        for (size_t j = 0; j < n; j++)
            out[c + j * na] = X[i + j * dim] / s;
    }
}

typedef struct prep_args {
    const double *X, *Z;
    size_t n, m;
} prep_args;

static void prep_fill(const gp_kernel *k, prep *pr, size_t *li, double **cursor,
                      const prep_args *pa)
{
    if (is_composite(k)) {
        for (size_t t = 0; t < k->n_terms; t++)
            prep_fill(k->terms[t], pr, li, cursor, pa);
        return;
    }
    prep_leaf *L = &pr->leaf[(*li)++];
    L->k = k;
    L->p = leaf_par_of(k);
    L->na = prep_na(k);
    double *a = *cursor;
    scale_points(k, pa->X, pa->n, a);
    *cursor += L->na * pa->n;
    L->a = L->b = a;
    if (pa->Z) {
        scale_points(k, pa->Z, pa->m, *cursor);
        L->b = *cursor;
        *cursor += L->na * pa->m;
    }
}

/* Doubles for every leaf's scaled points of `points` points; nonzero when that
 * is beyond the allocation limit. */
static int prep_size(const gp_kernel *k, size_t points, size_t *size)
{
    if (!is_composite(k)) {
        size_t na = prep_na(k);
        if (na && points > GP_MAX_ELEMENTS / na)
            return -1;
        *size = na * points;
        return 0;
    }
    size_t total = 0;
    for (size_t t = 0; t < k->n_terms; t++) {
        size_t s;
        if (prep_size(k->terms[t], points, &s) || s > GP_MAX_ELEMENTS - total)
            return -1;
        total += s;
    }
    *size = total;
    return 0;
}

/* Z == NULL: a Gram matrix of X. Returns nonzero when out of memory; pr is
 * then empty (prep_free on it is harmless). */
static int prep_build(prep *pr, const gp_kernel *k, const prep_args *pa, size_t extra)
{
    memset(pr, 0, sizeof *pr);
    size_t size;
    if (prep_size(k, pa->n + (pa->Z ? pa->m : 0), &size) || extra > GP_MAX_ELEMENTS - size)
        return -1;
    pr->n_leaves = count_leaves(k);
    pr->leaf = malloc(pr->n_leaves * sizeof *pr->leaf);
    pr->buf = malloc((size + extra + 1) * sizeof *pr->buf);
    if (pr->leaf == NULL || pr->buf == NULL) {
        free(pr->leaf);
        free(pr->buf);
        memset(pr, 0, sizeof *pr);
        return -1;
    }
    size_t li = 0;
    double *cursor = pr->buf;
    prep_fill(k, pr, &li, &cursor, pa);
    pr->extra = cursor;
    return 0;
}

static void prep_free(prep *pr)
{
    free(pr->leaf);
    free(pr->buf);
}

/* Leaf value or gradient for the pair (X_i, Z_j) from the scaled points. */
static inline double prep_pair(const prep_leaf *L, size_t i, size_t j, int same, double *g)
{
    const double *a = L->a + i * L->na, *b = L->b + j * L->na;
    double q = vec_q(L->p.type, a, b, L->na);
    if (g == NULL)
        return leaf_terms(&L->p, q, same, NULL);
    double c0;
    double v = leaf_grad_common(L->k, &L->p, q, same, g, &c0);
    if (L->k->ard)
        for (size_t c = 0; c < L->na; c++) {
            double d = a[c] - b[c];
            g[1 + c] = c0 * (d * d);
        }
    return v;
}

typedef struct prep_ctx {
    const prep_leaf *next; /* the leaf tree_value meets next */
    size_t i, j;
} prep_ctx;

static double prep_leaf_fn(void *ctx, const gp_kernel *k, int same, double *g)
{
    (void)k;
    prep_ctx *pc = ctx;
    return prep_pair(pc->next++, pc->i, pc->j, same, g);
}

static double prep_value(const gp_kernel *k, const prep *pr, size_t i, size_t j, int same)
{
    if (!is_composite(k))
        return prep_pair(&pr->leaf[0], i, j, same, NULL);
    prep_ctx ctx = {pr->leaf, i, j};
    return tree_value(k, prep_leaf_fn, &ctx, same);
}

static double prep_grad(const gp_kernel *k, const prep *pr, size_t i, size_t j, int same,
                        double *g)
{
    if (!is_composite(k))
        return prep_pair(&pr->leaf[0], i, j, same, g);
    prep_ctx ctx = {pr->leaf, i, j};
    size_t used;
    return tree_grad(k, prep_leaf_fn, &ctx, same, g, &used);
}

/* Copy the strict lower triangle onto the upper one, in tiles so that the
 * transposed writes stay in cache; polls the token every band of columns (a
 * second of copying at n = 20000). */
static int mirror_lower(double *K, size_t n, size_t ld, const gp_cancel *cancel)
{
    enum { TILE = 64 };
    for (size_t jb = 0; jb < n; jb += TILE) {
        if (jb % (4 * TILE) == 0 && gp_cancel_requested(cancel))
            return GP_ECANCELLED;
        size_t je = jb + TILE < n ? jb + TILE : n;
        for (size_t ib = jb; ib < n; ib += TILE) {
            size_t ie = ib + TILE < n ? ib + TILE : n;
            for (size_t j = jb; j < je; j++)
                for (size_t i = ib > j + 1 ? ib : j + 1; i < ie; i++)
                    K[j + i * ld] = K[i + j * ld];
        }
    }
    return GP_OK;
}

/* Pair loops run as tasks over column ranges (core/base/parallel.h). The ranges
 * depend only on the sizes, so sums come out the same for any thread count. */
#define PAIR_PARTS 32
#define PARALLEL_MIN_PAIRS 32768.0

static size_t triangle_parts(size_t n, size_t *bounds)
{
    double pairs = 0.5 * (double)n * (double)(n + 1);
    return gp_triangle_partition(n, pairs >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1, bounds);
}

/* Equal column ranges of an n x m block. */
static size_t block_parts(size_t n, size_t m, size_t *bounds)
{
    size_t parts = (double)n * (double)m >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1;
    if (parts > m)
        parts = m;
    for (size_t k = 0; k <= parts; k++)
        bounds[k] = m * k / parts;
    return parts;
}

typedef struct pair_task {
    const gp_kernel *k;
    const prep *pr;
    size_t n;
    const size_t *bounds;
    double *K;
    size_t ldk;
    const double *W;     /* contraction only */
    size_t ldw, np;
    double *partials;    /* contraction: parts x np results, then scratch */
    const gp_cancel *cancel; /* polled before every column (Gram, contraction) */
    atomic_int stopped;      /* a task saw the token set and left its columns unfinished */
} pair_task;

/* Before column j of a task: 1 (and the task's stop recorded) when the token
 * asks to stop. A column is at most n pairs, a millisecond at n = 20000. */
static int task_cancelled(pair_task *pt)
{
    if (!gp_cancel_requested(pt->cancel))
        return 0;
    atomic_store(&pt->stopped, 1);
    return 1;
}

/* Lower triangle of the Gram matrix, columns [bounds[t], bounds[t+1]). */
static void gram_task(void *ctx, size_t t)
{
    pair_task *pt = ctx;
    int leaf = !is_composite(pt->k);
    const prep_leaf *L = &pt->pr->leaf[0];
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++) {
        if (task_cancelled(pt))
            return;
        double *col = pt->K + j * pt->ldk;
        if (leaf) { /* a leaf at the root: no tree walk and no callback per pair */
            const double *b = L->a + j * L->na;
            for (size_t i = j; i < pt->n; i++)
                col[i] = leaf_terms(&L->p, vec_q(L->p.type, L->a + i * L->na, b, L->na), i == j,
                                    NULL);
        } else {
            for (size_t i = j; i < pt->n; i++)
                col[i] = prep_value(pt->k, pt->pr, i, j, i == j);
        }
    }
}

void gp_kernel_gram(const gp_kernel *k, const double *X, size_t n, double *K, size_t ldk)
{
    gp_kernel_gram_cancellable(k, X, n, K, ldk, NULL); /* GP_ECANCELLED needs a token */
}

int gp_kernel_gram_cancellable(const gp_kernel *k, const double *X, size_t n, double *K,
                               size_t ldk, const gp_cancel *cancel)
{
    if (n == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, NULL, n, 0};
    int rc = GP_OK;
    if (prep_build(&pr, k, &pa, 0) != 0) {
        /* Out of memory for the scaled points: the slow path needs none. */
        for (size_t j = 0; j < n && rc == GP_OK; j++) {
            if (gp_cancel_requested(cancel))
                rc = GP_ECANCELLED;
            for (size_t i = j; i < n && rc == GP_OK; i++)
                K[i + j * ldk] = gp_kernel_eval(k, X + i * k->input_dim, X + j * k->input_dim,
                                                i == j);
        }
    } else {
        size_t bounds[PAIR_PARTS + 1];
        size_t parts = triangle_parts(n, bounds);
        pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .K = K, .ldk = ldk,
                        .cancel = cancel};
        atomic_init(&pt.stopped, 0);
        gp_parallel_for(parts, gram_task, &pt);
        if (atomic_load(&pt.stopped))
            rc = GP_ECANCELLED;
    }
    prep_free(&pr);
    return rc ? rc : mirror_lower(K, n, ldk, cancel);
}

/* Cross block, columns [bounds[t], bounds[t+1]) (n rows each). */
static void cross_task(void *ctx, size_t t)
{
    const pair_task *pt = ctx;
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++)
        for (size_t i = 0; i < pt->n; i++)
            pt->K[i + j * pt->ldk] = prep_value(pt->k, pt->pr, i, j, 0);
}

void gp_kernel_cross(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                     double *K, size_t ldk)
{
    if (n == 0 || m == 0)
        return;
    prep pr;
    prep_args pa = {X, Z, n, m};
    if (prep_build(&pr, k, &pa, 0) != 0) {
        for (size_t j = 0; j < m; j++)
            for (size_t i = 0; i < n; i++)
                K[i + j * ldk] =
                    gp_kernel_eval(k, X + i * k->input_dim, Z + j * k->input_dim, 0);
        return;
    }
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .K = K, .ldk = ldk};
    gp_parallel_for(parts, cross_task, &pt);
    prep_free(&pr);
}

struct gp_kernel_points {
    prep pr;         /* each leaf's scaled view of X */
    const double *X; /* borrowed: for the allocation-free fallback */
    size_t n;
};

int gp_kernel_points_new(const gp_kernel *k, const double *X, size_t n, gp_kernel_points **out,
                         gp_error *err)
{
    gp_kernel_points *p = calloc(1, sizeof *p);
    prep_args pa = {X, NULL, n, 0};
    if (p == NULL || prep_build(&p->pr, k, &pa, 0) != 0) {
        free(p);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory preparing %zu points", n);
    }
    p->X = X;
    p->n = n;
    *out = p;
    return GP_OK;
}

void gp_kernel_points_free(gp_kernel_points *p)
{
    if (p == NULL)
        return;
    prep_free(&p->pr);
    free(p);
}

void gp_kernel_cross_points(const gp_kernel *k, const gp_kernel_points *Xp, const double *Z,
                            size_t m, double *K, size_t ldk)
{
    size_t n = Xp->n;
    if (n == 0 || m == 0)
        return;
    prep pz;
    prep_args pa = {Z, NULL, m, 0};
    if (prep_build(&pz, k, &pa, 0) != 0) {
        gp_kernel_cross(k, Xp->X, n, Z, m, K, ldk); /* it has its own fallback */
        return;
    }
    /* Pair the prepared rows (X) with the freshly scaled columns (Z). */
    for (size_t i = 0; i < pz.n_leaves; i++) {
        pz.leaf[i].b = pz.leaf[i].a;
        pz.leaf[i].a = Xp->pr.leaf[i].a;
    }
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    pair_task pt = {.k = k, .pr = &pz, .n = n, .bounds = bounds, .K = K, .ldk = ldk};
    gp_parallel_for(parts, cross_task, &pt);
    prep_free(&pz);
}

/* One column's lower part: col[p] = sum_{i >= j} w_ij dk(X_i, X_j)/dtheta_p,
 * off-diagonal pairs counted twice (W is symmetric and only its lower triangle
 * is read). g is per-pair scratch. */
static void contract_column(const gp_kernel *k, const prep *pr, size_t n, size_t j,
                            const double *wcol, size_t np, double *g, double *col)
{
    memset(col, 0, np * sizeof *col);
    for (size_t i = j; i < n; i++) {
        double w = i == j ? wcol[i] : 2.0 * wcol[i];
        prep_grad(k, pr, i, j, i == j, g);
        for (size_t p = 0; p < np; p++)
            col[p] += w * g[p];
    }
}

/* Columns [bounds[t], bounds[t+1]): column sums first, then their running
 * total (shorter running sums, fewer rounding errors over n^2/2 pairs). */
static void contract_task(void *ctx, size_t t)
{
    pair_task *pt = ctx;
    size_t np = pt->np;
    double *sum = pt->partials + t * 3 * np, *g = sum + np, *col = g + np;
    memset(sum, 0, np * sizeof *sum);
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++) {
        if (task_cancelled(pt))
            return;
        contract_column(pt->k, pt->pr, pt->n, j, pt->W + j * pt->ldw, np, g, col);
        for (size_t p = 0; p < np; p++)
            sum[p] += col[p];
    }
}

void gp_kernel_gram_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *W,
                                  size_t ldw, double *grad)
{
    gp_kernel_gram_grad_contract_cancellable(k, X, n, W, ldw, grad, NULL);
}

int gp_kernel_gram_grad_contract_cancellable(const gp_kernel *k, const double *X, size_t n,
                                             const double *W, size_t ldw, double *grad,
                                             const gp_cancel *cancel)
{
    size_t np = gp_kernel_n_params(k);
    memset(grad, 0, np * sizeof *grad);
    if (n == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, NULL, n, 0};
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = triangle_parts(n, bounds);
    if (prep_build(&pr, k, &pa, parts * 3 * np) != 0) {
        /* The API has no error return here: NaN makes the caller's objective
         * fail loudly instead of stepping on a wrong gradient. */
        for (size_t p = 0; p < np; p++)
            grad[p] = NAN;
        return GP_OK;
    }
    pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .W = W, .ldw = ldw,
                    .np = np, .partials = pr.extra, .cancel = cancel};
    atomic_init(&pt.stopped, 0);
    gp_parallel_for(parts, contract_task, &pt);
    for (size_t t = 0; t < parts; t++) /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * 3 * np + p];
    prep_free(&pr);
    return atomic_load(&pt.stopped) ? GP_ECANCELLED : GP_OK;
}

/* ---- the cross contraction of the inducing-point bounds ---- */

typedef struct cross_contract_task {
    const prep_leaf *L;
    size_t n, np, input_dim;
    const size_t *bounds;
    const double *W;
    size_t ldw;
    const double *inv_ls; /* 1 / lengthscale of each seen coordinate */
    double *partials;     /* parts x np */
    double *gz;           /* input_dim x m, or NULL */
} cross_contract_task;

/* Columns [bounds[t], bounds[t+1]) of W: theta sums into partials[t], each
 * column's Z-gradient into its own gz column (no two tasks share one). With
 * r^2 over scaled differences d_c = (x - z)_c / l_c, the leaf terms give
 * dk/dlog l_c = c0 d_c^2 and hence dk/dz_c = c0 d_c / l_c. */
static void cross_contract_task_run(void *ctx, size_t t)
{
    const cross_contract_task *ct = ctx;
    const prep_leaf *L = ct->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, nl = k->n_lengthscale;
    double *g = ct->partials + t * ct->np;
    memset(g, 0, ct->np * sizeof *g);
    for (size_t j = ct->bounds[t]; j < ct->bounds[t + 1]; j++) {
        const double *b = L->b + j * na, *wcol = ct->W + j * ct->ldw;
        double *gzj = ct->gz ? ct->gz + j * ct->input_dim : NULL;
        for (size_t i = 0; i < ct->n; i++) {
            double w = wcol[i];
            if (w == 0.0)
                continue;
            const double *a = L->a + i * na;
            double q = vec_q(L->p.type, a, b, na), c[2] = {0.0, 0.0};
            double v = leaf_terms(&L->p, q, 0, c), wc0 = w * c[0];
            g[0] += w * v;
            if (!k->ard && nl)
                g[1] += wc0 * q;
            if (k->type == GP_KERNEL_RQ)
                g[1 + nl] += w * c[1];
            for (size_t cc = 0; cc < na; cc++) {
                double d = a[cc] - b[cc];
                if (k->ard)
                    g[1 + cc] += wc0 * (d * d);
                if (gzj)
                    gzj[dim_of(k, cc)] += wc0 * d * ct->inv_ls[cc];
            }
        }
    }
}

int gp_kernel_cross_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *Z,
                                  size_t m, const double *W, size_t ldw, double *grad,
                                  double *gz, gp_error *err)
{
    if (is_composite(k) || !is_scaled_type(k->type))
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type",
                            "the cross contraction takes one stationary leaf "
                            "(rbf, matern12, matern32, matern52, rq), not %s",
                            name_or_unknown((int)k->type));
    size_t np = gp_kernel_n_params(k), na = prep_na(k);
    memset(grad, 0, np * sizeof *grad);
    if (gz)
        memset(gz, 0, k->input_dim * m * sizeof *gz);
    if (n == 0 || m == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, Z, n, m};
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    if (prep_build(&pr, k, &pa, parts * np + na) != 0)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory contracting %zu x %zu pairs",
                            n, m);
    double *inv_ls = pr.extra + parts * np;
    for (size_t c = 0; c < na; c++)
        inv_ls[c] = 1.0 / scale_of(k, c);
    cross_contract_task ct = {.L = &pr.leaf[0], .n = n, .np = np, .input_dim = k->input_dim,
                              .bounds = bounds, .W = W, .ldw = ldw, .inv_ls = inv_ls,
                              .partials = pr.extra, .gz = gz};
    gp_parallel_for(parts, cross_contract_task_run, &ct);
    for (size_t t = 0; t < parts; t++) /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * np + p];
    prep_free(&pr);
    return GP_OK;
}

/* ---- the same contraction from known kernel values ---- */

/* The derivative factors of leaf_terms (c[0], and c[1] for rq) from the
 * value kv = k at r^2 = q, without the exp. */
static inline void leaf_factors_from_value(const leaf_par *p, double q, double kv, double *c)
{
    switch (p->type) {
    case GP_KERNEL_RBF: c[0] = kv; break;
    case GP_KERNEL_MATERN12: {
        double r = sqrt(q);
        c[0] = r > 0.0 ? kv / r : 0.0;
        break;
    }
    case GP_KERNEL_MATERN32: c[0] = 3.0 * kv / (1.0 + SQRT3 * sqrt(q)); break;
    case GP_KERNEL_MATERN52: {
        double s = SQRT5 * sqrt(q);
        c[0] = (5.0 / 3.0) * (1.0 + s) * kv / (1.0 + s + 5.0 * q / 3.0);
        break;
    }
    case GP_KERNEL_RQ: {
        double u = q / (2.0 * p->alpha);
        c[0] = kv / (1.0 + u);
        c[1] = kv * p->alpha * (u / (1.0 + u) - log1p(u));
        break;
    }
    default: c[0] = NAN; break;
    }
}

typedef struct known_task {
    const prep_leaf *L;
    size_t m, np, input_dim;
    const size_t *bounds;
    const double *K, *W;
    size_t ldk, ldw;
    const double *inv_ls;
    double *partials; /* parts x np */
    double *gzs;      /* parts x (input_dim x m), or NULL */
} known_task;

/* Points X_i, i in [bounds[t], bounds[t+1]), against every Z_j. */
static void known_task_run(void *ctx, size_t t)
{
    const known_task *kt = ctx;
    const prep_leaf *L = kt->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, nl = k->n_lengthscale, m = kt->m;
    double *g = kt->partials + t * kt->np;
    double *gz = kt->gzs ? kt->gzs + t * kt->input_dim * m : NULL;
    memset(g, 0, kt->np * sizeof *g);
    if (gz)
        memset(gz, 0, kt->input_dim * m * sizeof *gz);
    for (size_t i = kt->bounds[t]; i < kt->bounds[t + 1]; i++) {
        const double *a = L->a + i * na, *kcol = kt->K + i * kt->ldk, *wcol = kt->W + i * kt->ldw;
        for (size_t j = 0; j < m; j++) {
            double w = wcol[j];
            if (w == 0.0)
                continue;
            const double *b = L->b + j * na;
            double q = vec_q(L->p.type, a, b, na), c[2] = {0.0, 0.0};
            leaf_factors_from_value(&L->p, q, kcol[j], c);
            double wc0 = w * c[0];
            g[0] += w * kcol[j];
            if (!k->ard && nl)
                g[1] += wc0 * q;
            if (k->type == GP_KERNEL_RQ)
                g[1 + nl] += w * c[1];
            for (size_t cc = 0; k->ard && cc < na; cc++) {
                double dc = a[cc] - b[cc];
                g[1 + cc] += wc0 * (dc * dc);
            }
            if (gz) {
                double *gzj = gz + j * kt->input_dim;
                for (size_t cc = 0; cc < na; cc++)
                    gzj[dim_of(k, cc)] += wc0 * (a[cc] - b[cc]) * kt->inv_ls[cc];
            }
        }
    }
}

int gp_kernel_cross_grad_contract_known(const gp_kernel *k, const double *X, size_t n,
                                        const double *Z, size_t m, const double *K, size_t ldk,
                                        const double *W, size_t ldw, double *grad, double *gz,
                                        gp_error *err)
{
    if (is_composite(k) || !is_scaled_type(k->type))
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type",
                            "the cross contraction takes one stationary leaf "
                            "(rbf, matern12, matern32, matern52, rq), not %s",
                            name_or_unknown((int)k->type));
    size_t np = gp_kernel_n_params(k), na = prep_na(k), dm = k->input_dim * m;
    memset(grad, 0, np * sizeof *grad);
    if (gz)
        memset(gz, 0, dm * sizeof *gz);
    if (n == 0 || m == 0)
        return GP_OK;
    /* Ranges of X, the same for any thread count. */
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = (double)n * (double)m >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1;
    if (parts > n)
        parts = n;
    for (size_t t = 0; t <= parts; t++)
        bounds[t] = n * t / parts;
    size_t extra = parts * np + na + (gz ? parts * dm : 0);
    prep pr;
    prep_args pa = {X, Z, n, m};
    if (prep_build(&pr, k, &pa, extra) != 0)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory contracting %zu x %zu pairs",
                            n, m);
    double *inv_ls = pr.extra + parts * np;
    for (size_t c = 0; c < na; c++)
        inv_ls[c] = 1.0 / scale_of(k, c);
    known_task kt = {.L = &pr.leaf[0], .m = m, .np = np, .input_dim = k->input_dim,
                     .bounds = bounds, .K = K, .W = W, .ldk = ldk, .ldw = ldw, .inv_ls = inv_ls,
                     .partials = pr.extra, .gzs = gz ? inv_ls + na : NULL};
    gp_parallel_for(parts, known_task_run, &kt);
    for (size_t t = 0; t < parts; t++) { /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * np + p];
        for (size_t i = 0; gz && i < dm; i++)
            gz[i] += kt.gzs[t * dm + i];
    }
    prep_free(&pr);
    return GP_OK;
}

/* ------------------------------------------------------------------------ */
/* the flat encoding                                                          */

/* Node: type, input_dim, n_active_dims (0 = all), active_dims..., ard, fixed,
 * log_variance, log_alpha, log_period, n_lengthscale, log_lengthscale...,
 * n_terms, terms... Every field is written, used or not, so that decoding
 * reproduces the struct exactly. */
typedef struct writer {
    double *out;
    size_t pos;
} writer;

static void put(writer *w, double v)
{
    if (w->out)
        w->out[w->pos] = v;
    w->pos++;
}

static void encode_node(const gp_kernel *k, writer *w)
{
    put(w, (double)k->type);
    put(w, (double)k->input_dim);
    size_t n_act = k->active_dims ? k->n_active : 0;
    put(w, (double)n_act);
    for (size_t i = 0; i < n_act; i++)
        put(w, (double)k->active_dims[i]);
    put(w, k->ard ? 1.0 : 0.0);
    put(w, (double)k->fixed);
    put(w, k->log_variance);
    put(w, k->log_alpha);
    put(w, k->log_period);
    put(w, (double)k->n_lengthscale);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        put(w, k->log_lengthscale[i]);
    put(w, (double)k->n_terms);
    for (size_t t = 0; t < k->n_terms; t++)
        encode_node(k->terms[t], w);
}

size_t gp_kernel_encode(const gp_kernel *k, double *out)
{
    writer w = {out, CODE_HEADER};
    encode_node(k, &w);
    if (out) {
        out[0] = CODE_MAGIC;
        out[1] = CODE_VERSION;
        out[2] = (double)w.pos;
    }
    return w.pos;
}

typedef struct reader {
    const double *code;
    size_t len; /* the declared total length (never more than the caller's) */
    size_t pos;
    gp_error *err;
} reader;

static int take(reader *r, double *v, const char *what)
{
    if (r->pos >= r->len)
        return gp_error_set(r->err, GP_EDATA, "kernel",
                            "kernel code truncated: %s missing at position %zu", what, r->pos);
    *v = r->code[r->pos++];
    return GP_OK;
}

static int take_count(reader *r, size_t max, size_t *out, const char *what)
{
    double v = 0.0;
    int rc = take(r, &v, what);
    if (rc)
        return rc;
    /* The negated test also rejects NaN. */
    if (!(v >= 0.0 && v <= (double)max && v == floor(v)))
        return gp_error_set(r->err, GP_EDATA, "kernel",
                            "kernel code: %s = %g at position %zu is not an integer in [0, %zu]",
                            what, v, r->pos - 1, max);
    *out = (size_t)v;
    return GP_OK;
}

static int take_real(reader *r, double *out, const char *what)
{
    int rc = take(r, out, what);
    if (rc == GP_OK && !isfinite(*out))
        rc = gp_error_set(r->err, GP_EDATA, "kernel",
                          "kernel code: %s at position %zu is not finite", what, r->pos - 1);
    return rc;
}

static size_t remaining(const reader *r)
{
    return r->len - r->pos;
}

typedef struct node_fields {
    size_t type, input_dim, n_act, ard, fixed, n_ls, n_terms;
    double log_variance, log_alpha, log_period;
    size_t *dims; /* n_act entries, owned */
    double *ls;   /* n_ls entries, owned */
} node_fields;

static int take_dims(reader *r, node_fields *f)
{
    int rc = take_count(r, f->input_dim, &f->n_act, "active dimension count");
    if (rc == GP_OK && f->n_act > remaining(r))
        rc = gp_error_set(r->err, GP_EDATA, "kernel", "kernel code truncated: %zu active "
                          "dimensions announced, %zu values left", f->n_act, remaining(r));
    if (rc || f->n_act == 0)
        return rc;
    f->dims = malloc(f->n_act * sizeof *f->dims);
    if (f->dims == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < f->n_act && rc == GP_OK; i++)
        rc = take_count(r, f->input_dim - 1, &f->dims[i], "active dimension");
    return rc;
}

static int take_lengthscales(reader *r, node_fields *f)
{
    int rc = take_count(r, remaining(r), &f->n_ls, "lengthscale count");
    if (rc || f->n_ls == 0)
        return rc;
    f->ls = malloc(f->n_ls * sizeof *f->ls);
    if (f->ls == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < f->n_ls && rc == GP_OK; i++)
        rc = take_real(r, &f->ls[i], "log lengthscale");
    return rc;
}

static int take_fields(reader *r, node_fields *f)
{
    int rc = take_count(r, GP_KERNEL_TYPE_COUNT - 1, &f->type, "type");
    if (rc == GP_OK)
        rc = take_count(r, KERNEL_MAX_DIM, &f->input_dim, "input dimension");
    if (rc == GP_OK && f->input_dim < 1)
        rc = gp_error_set(r->err, GP_EDATA, "kernel", "kernel code: input dimension 0");
    if (rc == GP_OK)
        rc = take_dims(r, f);
    if (rc == GP_OK)
        rc = take_count(r, 1, &f->ard, "ard");
    if (rc == GP_OK)
        rc = take_count(r, GP_FIX_ALL, &f->fixed, "fixed bits");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_variance, "log variance");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_alpha, "log alpha");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_period, "log period");
    if (rc == GP_OK)
        rc = take_lengthscales(r, f);
    if (rc == GP_OK)
        rc = take_count(r, remaining(r) / CODE_MIN_NODE, &f->n_terms, "term count");
    return rc;
}

static int corrupt(reader *r, const char *what, const gp_error *sub)
{
    return gp_error_set(r->err, GP_EDATA, "kernel", "kernel code: %s%s%s", what,
                        sub ? ": " : "", sub ? sub->message : "");
}

static int build_leaf(reader *r, const node_fields *f, gp_kernel **out)
{
    gp_error sub;
    gp_error_clear(&sub);
    if (f->n_terms != 0)
        return corrupt(r, "a leaf with terms", NULL);
    int rc = gp_kernel_leaf(out, (gp_kernel_type)f->type, f->input_dim, (int)f->ard, f->dims,
                            f->n_act, &sub);
    if (rc)
        return rc == GP_ENOMEM ? gp_error_set(r->err, rc, NULL, "out of memory")
                               : corrupt(r, "invalid leaf", &sub);
    gp_kernel *k = *out;
    if ((size_t)k->ard != f->ard || k->n_lengthscale != f->n_ls) {
        gp_kernel_free(k);
        *out = NULL;
        return corrupt(r, "leaf lengthscales do not match its type, ard and dimensions", NULL);
    }
    if (f->n_ls)
        memcpy(k->log_lengthscale, f->ls, f->n_ls * sizeof *f->ls);
    return GP_OK;
}

static int decode_node(reader *r, size_t depth, gp_kernel **out);

static int build_composite(reader *r, const node_fields *f, size_t depth, gp_kernel **out)
{
    if (f->n_act || f->ard || f->n_ls || f->n_terms == 0)
        return corrupt(r, "a sum or product with leaf fields or no terms", NULL);
    gp_kernel **terms = calloc(f->n_terms, sizeof *terms);
    if (terms == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    int rc = GP_OK;
    for (size_t t = 0; t < f->n_terms && rc == GP_OK; t++) {
        rc = decode_node(r, depth + 1, &terms[t]);
        if (rc == GP_OK && terms[t]->input_dim != f->input_dim)
            rc = corrupt(r, "a term's input dimension differs from its parent's", NULL);
    }
    gp_error sub;
    gp_error_clear(&sub);
    if (rc == GP_OK) {
        rc = gp_kernel_composite(out, (gp_kernel_type)f->type, terms, f->n_terms, &sub);
        if (rc)
            rc = corrupt(r, "invalid sum or product", &sub);
    }
    if (rc)
        for (size_t t = 0; t < f->n_terms; t++)
            gp_kernel_free(terms[t]);
    free(terms);
    return rc;
}

static int decode_node(reader *r, size_t depth, gp_kernel **out)
{
    *out = NULL;
    if (depth > KERNEL_MAX_DEPTH)
        return corrupt(r, "the tree nests too deep", NULL);
    node_fields f;
    memset(&f, 0, sizeof f);
    int rc = take_fields(r, &f);
    if (rc == GP_OK)
        rc = is_leaf_type((int)f.type) ? build_leaf(r, &f, out)
                                       : build_composite(r, &f, depth, out);
    if (rc == GP_OK) {
        (*out)->fixed = (unsigned)f.fixed;
        (*out)->log_variance = f.log_variance;
        (*out)->log_alpha = f.log_alpha;
        (*out)->log_period = f.log_period;
    }
    free(f.dims);
    free(f.ls);
    return rc;
}

int gp_kernel_decode(const double *code, size_t len, gp_kernel **out, gp_error *err)
{
    *out = NULL;
    if (code == NULL || len < CODE_HEADER)
        return gp_error_set(err, GP_EDATA, "kernel", "kernel code too short (%zu values)", len);
    if (code[0] != CODE_MAGIC)
        return gp_error_set(err, GP_EDATA, "kernel", "not a kernel code (bad magic number)");
    if (code[1] != CODE_VERSION)
        return gp_error_set(err, GP_EDATA, "kernel", "unsupported kernel code version %g",
                            code[1]);
    /* The code's own length, so that it may sit at the start of a longer array. */
    double total = code[2];
    if (!(total >= CODE_HEADER + CODE_MIN_NODE && total <= (double)len && total == floor(total)))
        return gp_error_set(err, GP_EDATA, "kernel",
                            "kernel code length %g does not fit the %zu values given", total, len);
    reader r = {code, (size_t)total, CODE_HEADER, err};
    int rc = decode_node(&r, 1, out);
    if (rc == GP_OK && r.pos != r.len) {
        gp_kernel_free(*out);
        *out = NULL;
        rc = gp_error_set(err, GP_EDATA, "kernel", "kernel code has %zu values past its end",
                          r.len - r.pos);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* spectral densities                                                         */

int gp_kernel_spectral(gp_kernel_type type, gp_spectral *out, gp_error *err)
{
    out->family = GP_SPECTRAL_NONE;
    out->nu = 0.0;
    if (type == GP_KERNEL_RBF) {
        out->family = GP_SPECTRAL_GAUSSIAN;
        return GP_OK;
    }
    if (type >= GP_KERNEL_MATERN12 && type <= GP_KERNEL_MATERN52) {
        out->family = GP_SPECTRAL_STUDENT_T;
        out->nu = 0.5 + (double)(type - GP_KERNEL_MATERN12); /* 1/2, 3/2, 5/2 */
        return GP_OK;
    }
    return gp_error_set(err, GP_EUNSUPPORTED, "kernel",
                        "kernel '%s' has no spectral density; only rbf, matern12, matern32 and "
                        "matern52 have one",
                        name_or_unknown((int)type));
}

/* A family the functions below can use (a Student-t needs nu > 0). */
static int spectral_ok(const gp_spectral *s)
{
    return s->family == GP_SPECTRAL_GAUSSIAN ||
           (s->family == GP_SPECTRAL_STUDENT_T && s->nu > 0.0 && isfinite(s->nu));
}

static void student_scale(const gp_spectral *s, size_t d, gp_rng *rng, double *row, size_t step)
{
    /* One chi-square per draw, shared by all coordinates: that is what makes
     * the draw multivariate t rather than d independent t's. */
    double u;
    do
        u = gp_rng_chisq(rng, 2.0 * s->nu);
    while (!(u > 0.0));
    double f = sqrt(2.0 * s->nu / u);
    for (size_t c = 0; c < d; c++)
        row[c * step] *= f;
}

void gp_spectral_sample(const gp_spectral *s, size_t d, size_t count, gp_rng *rng, double *out)
{
    int ok = spectral_ok(s);
    for (size_t i = 0; i < count; i++) {
        for (size_t c = 0; c < d; c++)
            out[i + c * count] = ok ? gp_rng_normal(rng) : NAN;
        if (ok && s->family == GP_SPECTRAL_STUDENT_T)
            student_scale(s, d, rng, out + i, count);
    }
}

/* lgamma(b + 1/2) - lgamma(b) for b > 0. When 2b is an integer, as for every
 * Matern spectral density, by the exact recurrence from b = 1/2 or 1 rather
 * than lgamma, which writes the global signgam (not thread-safe in POSIX). */
static double log_gamma_half_ratio(double b)
{
    if (!(2.0 * b == floor(2.0 * b) && b <= 1e6))
        return lgamma(b + 0.5) - lgamma(b);
    double x = b == floor(b) ? 1.0 : 0.5;
    double acc = x == 1.0 ? 0.5 * LOG_PI - log(2.0) : -0.5 * LOG_PI;
    for (; x < b; x += 1.0)
        acc += log(x + 0.5) - log(x);
    return acc;
}

/* lgamma(a + m/2) - lgamma(a) for a > 0 and an integer m >= 0. */
static double log_gamma_shift(double a, size_t m)
{
    double acc = 0.0;
    size_t whole = m / 2;
    for (size_t k = 0; k < whole; k++)
        acc += log(a + (double)k);
    if (m % 2)
        acc += log_gamma_half_ratio(a + (double)whole);
    return acc;
}

static double sum_sq(const double *v, size_t d)
{
    double s = 0.0;
    for (size_t c = 0; c < d; c++)
        s += v[c] * v[c];
    return s;
}

double gp_spectral_log_density(const gp_spectral *s, size_t d, const double *omega)
{
    double w2 = sum_sq(omega, d), dd = (double)d;
    if (s->family == GP_SPECTRAL_GAUSSIAN)
        return -0.5 * dd * LOG_2PI - 0.5 * w2;
    if (!spectral_ok(s))
        return NAN;
    double dof = 2.0 * s->nu;
    return log_gamma_shift(0.5 * dof, d) - 0.5 * dd * (log(dof) + LOG_PI) -
           0.5 * (dof + dd) * log1p(w2 / dof);
}

void gp_spectral_score(const gp_spectral *s, size_t d, const double *omega, double *score)
{
    double f = NAN;
    if (s->family == GP_SPECTRAL_GAUSSIAN)
        f = -1.0;
    else if (spectral_ok(s))
        f = -(2.0 * s->nu + (double)d) / (2.0 * s->nu + sum_sq(omega, d));
    for (size_t c = 0; c < d; c++)
        score[c] = f * omega[c];
}
