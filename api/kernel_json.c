/* Kernels in JSON (docs/design/api.md, "Kernels in JSON"), both ways:
 *   {"type": "rbf", "ard": true, "lengthscale": 1.0 | [..], "variance": 1.0,
 *    "alpha": 1.0 (rq), "period": 1.0 (periodic), "active_dims": [0, 2],
 *    "fixed": false | true | ["variance", "lengthscale", "alpha", "period"]}
 *   {"type": "sum" | "product", "terms": [kernel, ...]}
 * Values are positive finite numbers in the model's working units, stored in
 * log space. Every error names its field, e.g. "kernel.terms[1].lengthscale". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define KERNEL_JSON_MAX_DEPTH 16

static const char *const leaf_keys[] = {"type",   "ard",    "lengthscale", "variance",
                                        "alpha",  "period", "active_dims", "fixed",
                                        "priors", "bounds", NULL};
static const char *const composite_keys[] = {"type", "terms", "priors", "bounds", "fixed", NULL};

static int has_lengthscale(gp_kernel_type t)
{
    return t <= GP_KERNEL_PERIODIC;
}

static int has_ard(gp_kernel_type t)
{
    return t <= GP_KERNEL_RQ;
}

static unsigned applicable_fixed(gp_kernel_type t)
{
    unsigned bits = GP_FIX_VARIANCE;
    if (has_lengthscale(t))
        bits |= GP_FIX_LENGTHSCALE;
    if (t == GP_KERNEL_RQ)
        bits |= GP_FIX_ALPHA;
    if (t == GP_KERNEL_PERIODIC)
        bits |= GP_FIX_PERIOD;
    return bits;
}

static const char *const fix_names[] = {"variance", "lengthscale", "alpha", "period"};

static void sub(char *out, size_t len, const char *prefix, const char *key)
{
    gp_fieldf(out, len, "%s.%s", prefix, key);
}

static int type_accepted(const gp_method *m, gp_kernel_type t)
{
    return m == NULL || gp_method_accepts_kernel_type(m, t);
}

/* 422 unsupported naming the kernels the method accepts. */
static int unsupported(const gp_method *m, const char *field, const char *name, gp_error *err)
{
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; m->kernels && i < m->n_kernels && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         gp_kernel_type_name(m->kernels[i]));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (m->kernels == NULL)
        snprintf(list, sizeof list, "%s", "any kernel");
    return gp_error_set(err, GP_EUNSUPPORTED, field,
                        "method '%s' does not accept a '%s' kernel; it accepts %s%s", m->name, name,
                        m->composite_kernels ? "" : "a single kernel of type ", list);
}

/* Re-label an error of gp_kernel_leaf/composite (field "active_dims", ...)
 * with the JSON path of the kernel. */
static int relabel(gp_error *err, int rc, const char *prefix)
{
    if (err && err->code != GP_ENOMEM) {
        char field[GP_ERROR_FIELD_LEN];
        if (err->field[0])
            gp_fieldf(field, sizeof field, "%s.%s", prefix, err->field);
        else
            gp_fieldf(field, sizeof field, "%s", prefix);
        memcpy(err->field, field, sizeof field);
    }
    return rc;
}

static int parse_active_dims(json_t *v, const char *field, size_t input_dim, size_t **dims,
                             size_t *n, gp_error *err)
{
    *dims = NULL;
    *n = 0;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return gp_error_set(err, GP_EINVAL, field,
                            "%s must be a non-empty list of column indices", field);
    size_t len = json_array_size(v);
    if (len > input_dim)
        return gp_error_set(err, GP_EINVAL, field, "%s lists %zu columns; X has %zu", field, len,
                            input_dim);
    size_t *d = malloc(len * sizeof *d);
    if (d == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        double x = json_is_number(e) ? json_number_value(e) : -1.0;
        if (!(x >= 0.0) || x != floor(x) || x >= (double)input_dim) {
            char f[GP_ERROR_FIELD_LEN];
            gp_fieldf(f, sizeof f, "%s[%zu]", field, i);
            free(d);
            return gp_error_set(err, GP_EINVAL, f,
                                "%s must be a column index in [0, %zu) (X has %zu columns)", f,
                                input_dim, input_dim);
        }
        d[i] = (size_t)x;
        for (size_t j = 0; j < i; j++)
            if (d[j] == d[i]) {
                size_t col = d[i];
                free(d);
                return gp_error_set(err, GP_EINVAL, field, "%s repeats column %zu", field, col);
            }
    }
    *dims = d;
    *n = len;
    return GP_OK;
}

/* "lengthscale[i]" or "noise": held singly (the spec's, not a group bit). */
static int single_name(const char *s)
{
    return strcmp(s, "noise") == 0 || strncmp(s, "lengthscale[", 12) == 0;
}

static int parse_fixed(json_t *v, const char *field, gp_kernel_type t, unsigned *out,
                       gp_error *err)
{
    unsigned ok = applicable_fixed(t);
    if (json_is_boolean(v)) {
        *out = json_is_true(v) ? ok : 0;
        return GP_OK;
    }
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be true, false or a list of names",
                            field);
    unsigned bits = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        char f[GP_ERROR_FIELD_LEN];
        gp_fieldf(f, sizeof f, "%s[%zu]", field, i);
        const char *s = json_string_value(e);
        unsigned bit = 0;
        for (unsigned b = 0; s && b < 4; b++)
            if (strcmp(s, fix_names[b]) == 0)
                bit = 1u << b;
        if (s && bit == 0 && single_name(s))
            continue; /* one lengthscale, or the noise: kernel_priors.c */
        if (bit == 0 || !(bit & ok))
            return gp_error_set(err, GP_EINVAL, f,
                                "%s must name a hyperparameter of a '%s' kernel (%s%s%s%s, "
                                "lengthscale[i], noise)",
                                f,
                                gp_kernel_type_name(t), "variance",
                                (ok & GP_FIX_LENGTHSCALE) ? ", lengthscale" : "",
                                (ok & GP_FIX_ALPHA) ? ", alpha" : "",
                                (ok & GP_FIX_PERIOD) ? ", period" : "");
        bits |= bit;
    }
    *out = bits;
    return GP_OK;
}

/* `periodic` takes the Euclidean distance of its columns (core/kernel/kernel.h):
 * positive definite on one column, not in general on several (the Gram
 * matrix of random points in two dimensions has negative eigenvalues for most
 * periods and lengthscales), so an exact fit failed at its first Cholesky as
 * not_positive_definite, or went on with a matrix only the jitter made
 * factorisable. A product of one-column periodic kernels is positive
 * definite (a product of kernels). Refused here, where the kernel of every
 * fit is parsed (requests, CSV queries, studies, queued jobs), and not in
 * core: a stored model's kernel comes from its code (gp_kernel_decode) and
 * keeps loading, and core still computes what scikit-learn's ExpSineSquared
 * computes for the reference fixtures. */
static int check_periodic_columns(const gp_kernel *k, const char *prefix, int listed,
                                  gp_error *err)
{
    if (k->type != GP_KERNEL_PERIODIC || k->n_active <= 1)
        return GP_OK;
    char f[GP_ERROR_FIELD_LEN];
    if (listed)
        sub(f, sizeof f, prefix, "active_dims");
    else
        gp_fieldf(f, sizeof f, "%s", prefix);
    return gp_error_set(err, GP_EUNSUPPORTED, f,
                        "a periodic kernel over %zu input columns is not positive definite: "
                        "set its active_dims to one column, or multiply one-column periodic "
                        "kernels (a product with one periodic term per column)",
                        k->n_active);
}

static int parse_leaf(json_t *v, const char *prefix, gp_kernel_type t, size_t input_dim,
                      gp_kernel **out, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    int rc = gp_json_known_keys(v, leaf_keys, prefix, err);
    if (rc)
        return rc;
    int ard = 1;
    json_t *e = json_object_get(v, "ard");
    if (e) {
        sub(f, sizeof f, prefix, "ard");
        if ((rc = gp_json_get_bool(e, f, &ard, err)))
            return rc;
    }
    /* "ard" is accepted on every leaf (it changes nothing where there is at
     * most one lengthscale); a lengthscale is an error where there is none. */
    if (json_object_get(v, "lengthscale") && !has_lengthscale(t)) {
        sub(f, sizeof f, prefix, "lengthscale");
        return gp_error_set(err, GP_EINVAL, f, "a '%s' kernel has no lengthscale",
                            gp_kernel_type_name(t));
    }
    if (json_object_get(v, "alpha") && t != GP_KERNEL_RQ) {
        sub(f, sizeof f, prefix, "alpha");
        return gp_error_set(err, GP_EINVAL, f, "alpha applies to 'rq' kernels only");
    }
    if (json_object_get(v, "period") && t != GP_KERNEL_PERIODIC) {
        sub(f, sizeof f, prefix, "period");
        return gp_error_set(err, GP_EINVAL, f, "period applies to 'periodic' kernels only");
    }
    size_t *dims = NULL, n_dims = 0;
    if ((e = json_object_get(v, "active_dims"))) {
        sub(f, sizeof f, prefix, "active_dims");
        if ((rc = parse_active_dims(e, f, input_dim, &dims, &n_dims, err)))
            return rc;
    }
    gp_kernel *k = NULL;
    rc = gp_kernel_leaf(&k, t, input_dim, ard, dims, n_dims, err);
    free(dims);
    if (rc)
        return relabel(err, rc, prefix);
    if ((rc = check_periodic_columns(k, prefix, n_dims > 0, err)))
        goto fail;
    /* lengthscale: scalar (every lengthscale) or a list of exactly n_lengthscale */
    if ((e = json_object_get(v, "lengthscale"))) {
        sub(f, sizeof f, prefix, "lengthscale");
        if (json_is_array(e)) {
            if (json_array_size(e) != k->n_lengthscale) {
                rc = gp_error_set(err, GP_EINVAL, f,
                                  "%s has %zu entries; this kernel has %zu lengthscale%s (%s)",
                                  f, json_array_size(e), k->n_lengthscale,
                                  k->n_lengthscale == 1 ? "" : "s",
                                  k->ard ? "one per active dimension with ard"
                                         : "ard is false or the kernel has one");
                goto fail;
            }
            for (size_t i = 0; i < k->n_lengthscale; i++) {
                char fi[GP_ERROR_FIELD_LEN];
                double x;
                gp_fieldf(fi, sizeof fi, "%s[%zu]", f, i);
                if ((rc = gp_json_get_positive(json_array_get(e, i), fi, &x, err)))
                    goto fail;
                k->log_lengthscale[i] = log(x);
            }
        } else {
            double x;
            if ((rc = gp_json_get_positive(e, f, &x, err)))
                goto fail;
            for (size_t i = 0; i < k->n_lengthscale; i++)
                k->log_lengthscale[i] = log(x);
        }
    }
    static const char *const scalars[] = {"variance", "alpha", "period"};
    for (size_t i = 0; i < 3; i++) {
        if (!(e = json_object_get(v, scalars[i])))
            continue;
        double x;
        sub(f, sizeof f, prefix, scalars[i]);
        if ((rc = gp_json_get_positive(e, f, &x, err)))
            goto fail;
        if (i == 0)
            k->log_variance = log(x);
        else if (i == 1)
            k->log_alpha = log(x);
        else
            k->log_period = log(x);
    }
    if ((e = json_object_get(v, "fixed"))) {
        sub(f, sizeof f, prefix, "fixed");
        if ((rc = parse_fixed(e, f, t, &k->fixed, err)))
            goto fail;
    }
    *out = k;
    return GP_OK;
fail:
    gp_kernel_free(k);
    return rc;
}

static int parse_node(json_t *v, const char *prefix, size_t input_dim, const gp_method *m,
                      size_t depth, gp_kernel **out, gp_error *err)
{
    *out = NULL;
    char f[GP_ERROR_FIELD_LEN];
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, prefix, "%s must be a kernel object", prefix);
    if (depth > KERNEL_JSON_MAX_DEPTH)
        return gp_error_set(err, GP_EINVAL, prefix, "kernels nest deeper than %d levels",
                            KERNEL_JSON_MAX_DEPTH);
    json_t *type = json_object_get(v, "type");
    sub(f, sizeof f, prefix, "type");
    if (type == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is missing", f);
    const char *name = json_string_value(type);
    int t = name ? gp_kernel_type_from_name(name) : -1;
    if (t < 0)
        return gp_error_set(err, GP_EINVAL, f,
                            "%s must be one of rbf, matern12, matern32, matern52, rq, periodic, "
                            "linear, white, sum, product",
                            f);
    if (t != GP_KERNEL_SUM && t != GP_KERNEL_PRODUCT) {
        if (!type_accepted(m, (gp_kernel_type)t))
            return unsupported(m, f, name, err);
        return parse_leaf(v, prefix, (gp_kernel_type)t, input_dim, out, err);
    }
    if (!type_accepted(m, (gp_kernel_type)t))
        return unsupported(m, f, name, err);
    int rc = gp_json_known_keys(v, composite_keys, prefix, err);
    if (rc)
        return rc;
    json_t *terms = json_object_get(v, "terms");
    sub(f, sizeof f, prefix, "terms");
    if (!json_is_array(terms) || json_array_size(terms) == 0)
        return gp_error_set(err, GP_EINVAL, f, "%s must be a non-empty list of kernels", f);
    size_t n = json_array_size(terms);
    gp_kernel **ks = calloc(n, sizeof *ks);
    if (ks == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n && rc == GP_OK; i++) {
        char fi[GP_ERROR_FIELD_LEN];
        gp_fieldf(fi, sizeof fi, "%s.terms[%zu]", prefix, i);
        rc = parse_node(json_array_get(terms, i), fi, input_dim, m, depth + 1, &ks[i], err);
    }
    if (rc == GP_OK) {
        rc = gp_kernel_composite(out, (gp_kernel_type)t, ks, n, err);
        if (rc)
            relabel(err, rc, prefix);
    }
    if (rc)
        for (size_t i = 0; i < n; i++)
            gp_kernel_free(ks[i]);
    free(ks);
    return rc;
}

int gp_kernel_from_json(json_t *v, const char *prefix, size_t input_dim, const gp_method *method,
                        gp_kernel **out, gp_error *err)
{
    return parse_node(v, prefix, input_dim, method, 0, out, err);
}

int gp_kernel_default(size_t input_dim, gp_kernel **out, gp_error *err)
{
    return gp_kernel_leaf(out, GP_KERNEL_RBF, input_dim, 1, NULL, 0, err);
}

json_t *gp_kernel_to_json(const gp_kernel *k)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "type", json_string(gp_kernel_type_name(k->type)));
    if (k->type == GP_KERNEL_SUM || k->type == GP_KERNEL_PRODUCT) {
        json_t *terms = json_array();
        for (size_t i = 0; i < k->n_terms; i++)
            json_array_append_new(terms, gp_kernel_to_json(k->terms[i]));
        json_object_set_new(o, "terms", terms);
        return o;
    }
    if (has_ard(k->type))
        json_object_set_new(o, "ard", json_boolean(k->ard));
    if (k->n_lengthscale == 1 && !k->ard)
        json_object_set_new(o, "lengthscale", gp_json_real(exp(k->log_lengthscale[0])));
    else if (k->n_lengthscale) {
        json_t *ls = json_array();
        for (size_t i = 0; i < k->n_lengthscale; i++)
            json_array_append_new(ls, gp_json_real(exp(k->log_lengthscale[i])));
        json_object_set_new(o, "lengthscale", ls);
    }
    json_object_set_new(o, "variance", gp_json_real(exp(k->log_variance)));
    if (k->type == GP_KERNEL_RQ)
        json_object_set_new(o, "alpha", gp_json_real(exp(k->log_alpha)));
    if (k->type == GP_KERNEL_PERIODIC)
        json_object_set_new(o, "period", gp_json_real(exp(k->log_period)));
    if (k->active_dims) {
        json_t *ad = json_array();
        for (size_t i = 0; i < k->n_active; i++)
            json_array_append_new(ad, json_integer((json_int_t)k->active_dims[i]));
        json_object_set_new(o, "active_dims", ad);
    }
    unsigned ok = applicable_fixed(k->type), fixed = k->fixed & ok;
    if (fixed == 0 || fixed == ok)
        json_object_set_new(o, "fixed", json_boolean(fixed != 0));
    else {
        json_t *fl = json_array();
        for (unsigned b = 0; b < 4; b++)
            if (fixed & (1u << b))
                json_array_append_new(fl, json_string(fix_names[b]));
        json_object_set_new(o, "fixed", fl);
    }
    return o;
}
