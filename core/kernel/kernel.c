/* gpserve core: covariance kernels (formulas and conventions in kernel.h).
 *
 * The files of core/kernel: this one (construction, the flat parameter
 * vector and its names); kernel_formula.c (leaf mathematics, one function of
 * a pair statistic q per kernel type, and single-pair evaluation through the
 * tree); kernel_gram.c (Gram and cross blocks and the gradient contractions on
 * pre-scaled points); kernel_codec.c (the flat encoding); kernel_spectral.c
 * (spectral densities); lml.c (the exact marginal likelihood).
 *
 * One rule keeps the paths consistent: a leaf's scaled coordinate is always
 * x_i / l_i with l_i = exp(log l_i), whether it is computed per pair
 * (gp_kernel_eval) or once per point (gp_kernel_gram), and r^2 is always the
 * sum of squared differences of those coordinates in the same order. So a
 * Gram entry equals the pairwise gp_kernel_eval bit for bit, and r^2 never
 * goes through |x|^2 + |z|^2 - 2 x^T z, which cancels digits for close points. */
#include "core/kernel/kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel/kernel_formula.h"

static size_t expected_n_lengthscale(gp_kernel_type type, int ard, size_t n_active)
{
    if (gp_kernel_is_scaled_type(type))
        return ard ? n_active : 1;
    return type == GP_KERNEL_PERIODIC ? 1 : 0;
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
    if (!gp_kernel_is_leaf_type((int)type))
        return gp_error_set(err, GP_EINVAL, "type", "'%s' is not a leaf kernel type",
                            gp_kernel_name_or_unknown((int)type));
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
    k->ard = ard && gp_kernel_is_scaled_type(type);
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
                            gp_kernel_name_or_unknown((int)type));
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
    if (!gp_kernel_is_composite(k))
        return gp_kernel_leaf_n_params(k);
    size_t n = 0;
    for (size_t t = 0; t < k->n_terms; t++)
        n += gp_kernel_n_params(k->terms[t]);
    return n;
}

/* The walks below return the number of entries they consumed. */
static size_t get_rec(const gp_kernel *k, double *theta)
{
    size_t n = 0;
    if (gp_kernel_is_composite(k)) {
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
    if (gp_kernel_is_composite(k)) {
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
    if (gp_kernel_is_composite(k)) {
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
    while (gp_kernel_is_composite(k)) {
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
