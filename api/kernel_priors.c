/* What the caller knows of a kernel's hyperparameters, in the kernel JSON
 * (docs/design/api.md, "Priors, bounds and held hyperparameters"), both ways:
 *   "priors": {"lengthscale": {"type": "lognormal", "loc": 0, "scale": 1.7}
 *                             | [prior or null, one per lengthscale],
 *              "variance": {...}, "alpha": {...}, "period": {...},
 *              "noise": {...}}                    (noise: the root only)
 *            | "default" | "none"                 (the root only; "none": no
 *                                                   method's default priors either)
 *   "bounds": {"lengthscale": [lo, hi] | [[lo, hi], ...], "variance": [lo, hi],
 *              ..., "noise": [lo, hi]}
 *   "fixed": [..., "lengthscale[2]", "noise"]
 * on each leaf; a sum or product takes "priors"/"bounds" with "noise" only,
 * and "fixed": ["noise"], at the root. The kernel itself is parsed first
 * (gp_kernel_from_json); this second walk over the same JSON fills a
 * gp_hyper_spec in the kernel's flat parameter order. Values are in the
 * model's working units. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const param_keys[] = {"variance", "lengthscale", "alpha", "period", "noise",
                                         NULL};

typedef struct walk {
    const gp_kernel *root;
    gp_hyper_spec *s;
    size_t at; /* flat index of the current leaf's first parameter */
    int stated;
    int none; /* "priors": "none": a spec stating nothing (no method default) */
} walk;

static int is_composite(const gp_kernel *k)
{
    return k->type == GP_KERNEL_SUM || k->type == GP_KERNEL_PRODUCT;
}

/* The entries key names on leaf k (root: whether "noise" is allowed): first
 * entry and count, or GP_EINVAL naming field. */
static int key_entries(const walk *w, const gp_kernel *k, int root, const char *key,
                       const char *field, size_t *first, size_t *count, gp_error *err)
{
    *count = 1;
    if (strcmp(key, "noise") == 0) {
        if (!root)
            return gp_error_set(err, GP_EINVAL, field,
                                "%s: the noise is stated on the root kernel only", field);
        *first = w->s->n_kernel;
        return GP_OK;
    }
    if (is_composite(k))
        return gp_error_set(err, GP_EINVAL, field,
                            "%s: a %s states the priors and bounds of its terms in the terms "
                            "(only noise here)",
                            field, gp_kernel_type_name(k->type));
    const char *type = gp_kernel_type_name(k->type);
    if (strcmp(key, "variance") == 0) {
        *first = w->at;
        return GP_OK;
    }
    if (strcmp(key, "lengthscale") == 0) {
        if (k->n_lengthscale == 0)
            return gp_error_set(err, GP_EINVAL, field, "a '%s' kernel has no lengthscale", type);
        *first = w->at + 1;
        *count = k->n_lengthscale;
        return GP_OK;
    }
    size_t after = w->at + 1 + k->n_lengthscale;
    if (strcmp(key, "alpha") == 0 && k->type == GP_KERNEL_RQ) {
        *first = after;
        return GP_OK;
    }
    if (strcmp(key, "period") == 0 && k->type == GP_KERNEL_PERIODIC) {
        *first = after;
        return GP_OK;
    }
    return gp_error_set(err, GP_EINVAL, field, "a '%s' kernel has no %s", type, key);
}

/* {"type": ..., params}: one prior. */
static int parse_prior(json_t *v, const char *field, gp_prior *out, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, field,
                            "%s must be a prior object {\"type\": \"lognormal\" | \"gamma\" | "
                            "\"normal\" | \"halfcauchy\" | \"uniform\", ...}",
                            field);
    json_t *t = json_object_get(v, "type");
    int type = gp_prior_type_from_name(json_string_value(t));
    gp_fieldf(f, sizeof f, "%s.type", field);
    if (type < 0)
        return gp_error_set(err, GP_EINVAL, f,
                            "%s must be one of lognormal, gamma, normal, halfcauchy, uniform", f);
    const char *na, *nb;
    gp_prior_param_names((gp_prior_type)type, &na, &nb);
    const char *keys[] = {"type", na, nb, NULL};
    int rc = gp_json_known_keys(v, keys, field, err);
    if (rc)
        return rc;
    out->type = (gp_prior_type)type;
    out->b = 0.0;
    const char *names[2] = {na, nb};
    double *vals[2] = {&out->a, &out->b};
    for (size_t i = 0; i < 2 && names[i]; i++) {
        json_t *e = json_object_get(v, names[i]);
        gp_fieldf(f, sizeof f, "%s.%s", field, names[i]);
        if (!json_is_number(e))
            return gp_error_set(err, GP_EINVAL, f, "%s must be a number", f);
        *vals[i] = json_number_value(e);
    }
    return gp_prior_check(out, field, err);
}

/* [lo, hi]: 0 < lo < hi < inf. */
static int parse_pair(json_t *v, const char *field, double *lo, double *hi, gp_error *err)
{
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return gp_error_set(err, GP_EINVAL, field, "%s must be a pair [lo, hi] of numbers",
                            field);
    *lo = json_number_value(json_array_get(v, 0));
    *hi = json_number_value(json_array_get(v, 1));
    if (!(*lo > 0.0 && isfinite(*lo)) || !(*hi > 0.0 && isfinite(*hi)))
        return gp_error_set(err, GP_EINVAL, field, "%s must be positive finite numbers", field);
    if (!(*lo < *hi))
        return gp_error_set(err, GP_EINVAL, field, "%s: lo (%g) must be below hi (%g)", field,
                            *lo, *hi);
    return GP_OK;
}

/* A value for `count` entries: one for all, or a list of count (list_ok). */
static int each_value(json_t *v, const char *field, size_t count, int is_list,
                      int (*one)(json_t *, const char *, gp_hyper_entry *, gp_error *),
                      gp_hyper_entry *e, gp_error *err)
{
    if (!is_list) {
        for (size_t i = 0; i < count; i++) {
            int rc = one(v, field, &e[i], err);
            if (rc)
                return rc;
        }
        return GP_OK;
    }
    if (json_array_size(v) != count)
        return gp_error_set(err, GP_EINVAL, field,
                            "%s has %zu entries; the kernel has %zu lengthscales", field,
                            json_array_size(v), count);
    for (size_t i = 0; i < count; i++) {
        char f[GP_ERROR_FIELD_LEN];
        gp_fieldf(f, sizeof f, "%s[%zu]", field, i);
        json_t *x = json_array_get(v, i);
        int rc = json_is_null(x) ? GP_OK : one(x, f, &e[i], err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

static int one_prior(json_t *v, const char *field, gp_hyper_entry *e, gp_error *err)
{
    return parse_prior(v, field, &e->prior, err);
}

static int one_bound(json_t *v, const char *field, gp_hyper_entry *e, gp_error *err)
{
    return parse_pair(v, field, &e->lo, &e->hi, err);
}

/* "priors" or "bounds" of one node. */
static int parse_table(walk *w, const gp_kernel *k, int root, json_t *v, const char *field,
                       int bounds, gp_error *err)
{
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an object keyed by hyperparameter",
                            field);
    int rc = gp_json_known_keys(v, param_keys, field, err);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        if (rc)
            break;
        char f[GP_ERROR_FIELD_LEN];
        gp_fieldf(f, sizeof f, "%s.%s", field, key);
        size_t first = 0, count = 0;
        if ((rc = key_entries(w, k, root, key, f, &first, &count, err)))
            break;
        /* a list of lengthscale values: [prior, ...] or [[lo, hi], ...] */
        int is_list = strcmp(key, "lengthscale") == 0 && json_is_array(val) &&
                      (!bounds || (json_array_size(val) > 0 &&
                                   !json_is_number(json_array_get(val, 0))));
        rc = each_value(val, f, count, is_list, bounds ? one_bound : one_prior,
                        &w->s->entry[first], err);
        w->stated = 1;
    }
    return rc;
}

/* "fixed" entries naming a single lengthscale ("lengthscale[2]") or the
 * noise (the other names are the kernel's group bits, parsed already). */
static int parse_single_fixed(walk *w, const gp_kernel *k, int root, json_t *v,
                              const char *field, gp_error *err)
{
    if (is_composite(k) && !json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be [\"noise\"] on a %s", field,
                            gp_kernel_type_name(k->type));
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
        const char *s = json_string_value(json_array_get(v, i));
        char f[GP_ERROR_FIELD_LEN];
        gp_fieldf(f, sizeof f, "%s[%zu]", field, i);
        unsigned long j;
        int used = 0;
        if (s && strcmp(s, "noise") == 0) {
            if (!root)
                return gp_error_set(err, GP_EINVAL, f, "%s: the noise is held on the root only",
                                    f);
            w->s->entry[w->s->n_kernel].fixed = 1;
            w->stated = 1;
        } else if (is_composite(k)) {
            return gp_error_set(err, GP_EINVAL, f,
                                "%s: a %s holds only \"noise\" (its terms hold their own)", f,
                                gp_kernel_type_name(k->type));
        } else if (s && sscanf(s, "lengthscale[%lu]%n", &j, &used) == 1 && s[used] == '\0') {
            if (is_composite(k) || j >= k->n_lengthscale)
                return gp_error_set(err, GP_EINVAL, f, "%s: this kernel has %zu lengthscale%s",
                                    f, is_composite(k) ? 0 : k->n_lengthscale,
                                    !is_composite(k) && k->n_lengthscale == 1 ? "" : "s");
            w->s->entry[w->at + 1 + j].fixed = 1;
            w->stated = 1;
        }
    }
    return GP_OK;
}

static size_t leaf_params(const gp_kernel *k)
{
    return 1 + k->n_lengthscale + (k->type == GP_KERNEL_RQ) + (k->type == GP_KERNEL_PERIODIC);
}

static int walk_node(walk *w, json_t *v, const char *prefix, const gp_kernel *k, int root,
                     gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    int rc = GP_OK;
    json_t *e;
    if ((e = json_object_get(v, "priors"))) {
        gp_fieldf(f, sizeof f, "%s.priors", prefix);
        if (json_is_string(e) && root && strcmp(json_string_value(e), "default") == 0)
            w->s->preset = 1;
        else if (json_is_string(e) && root && strcmp(json_string_value(e), "none") == 0)
            w->none = 1;
        else if (json_is_string(e))
            return gp_error_set(err, GP_EINVAL, f,
                                "%s must be an object, or \"default\" or \"none\" on the root "
                                "kernel",
                                f);
        else if ((rc = parse_table(w, k, root, e, f, 0, err)))
            return rc;
    }
    if ((e = json_object_get(v, "bounds"))) {
        gp_fieldf(f, sizeof f, "%s.bounds", prefix);
        if ((rc = parse_table(w, k, root, e, f, 1, err)))
            return rc;
    }
    if ((e = json_object_get(v, "fixed"))) {
        gp_fieldf(f, sizeof f, "%s.fixed", prefix);
        if ((rc = parse_single_fixed(w, k, root, e, f, err)))
            return rc;
    }
    if (!is_composite(k)) {
        w->at += leaf_params(k);
        return GP_OK;
    }
    json_t *terms = json_object_get(v, "terms");
    for (size_t i = 0; i < k->n_terms && rc == GP_OK; i++) {
        gp_fieldf(f, sizeof f, "%s.terms[%zu]", prefix, i);
        rc = walk_node(w, json_array_get(terms, i), f, k->terms[i], 0, err);
    }
    return rc;
}

int gp_kernel_spec_from_json(json_t *v, const char *prefix, const gp_kernel *k,
                             gp_hyper_spec **out, gp_error *err)
{
    *out = NULL;
    walk w = {k, NULL, 0, 0, 0};
    int rc = gp_hyper_spec_new(&w.s, k, err);
    if (rc == GP_OK && v)
        rc = walk_node(&w, v, prefix, k, 1, err);
    if (rc == GP_OK && w.s->preset) {
        gp_hyper_default_priors(w.s, k);
        w.stated = 1;
    }
    if (rc || (!w.stated && !w.none)) { /* "none" alone: an empty spec, no default */
        gp_hyper_spec_free(w.s);
        return rc;
    }
    *out = w.s;
    return GP_OK;
}

/* ---- the other way: the spec written into the kernel's JSON ---- */

static json_t *prior_json(const gp_prior *p)
{
    const char *na, *nb;
    gp_prior_param_names(p->type, &na, &nb);
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(gp_prior_type_name(p->type)));
    json_object_set_new(o, na, gp_json_real(p->a));
    if (nb)
        json_object_set_new(o, nb, gp_json_real(p->b));
    return o;
}

static json_t *pair_json(const gp_hyper_entry *e)
{
    json_t *a = json_array();
    json_array_append_new(a, gp_json_real(e->lo));
    json_array_append_new(a, e->hi < INFINITY ? gp_json_real(e->hi) : json_null());
    return a;
}

static int has_bounds(const gp_hyper_entry *e)
{
    return e->lo > 0.0 || e->hi < INFINITY;
}

/* One key (count entries from first) into the node's priors and bounds. */
static void put_key(json_t *node, const char *key, const gp_hyper_entry *e, size_t count)
{
    json_t *pr = NULL, *bd = NULL;
    size_t n_pr = 0, n_bd = 0;
    for (size_t i = 0; i < count; i++) {
        n_pr += e[i].prior.type != GP_PRIOR_NONE;
        n_bd += has_bounds(&e[i]);
    }
    if (n_pr) {
        int same = 1;
        for (size_t i = 1; i < count; i++)
            same &= memcmp(&e[i].prior, &e[0].prior, sizeof e[0].prior) == 0;
        if (same)
            pr = prior_json(&e[0].prior);
        else {
            pr = json_array();
            for (size_t i = 0; i < count; i++)
                json_array_append_new(pr, e[i].prior.type ? prior_json(&e[i].prior)
                                                          : json_null());
        }
    }
    if (n_bd) {
        int same = n_bd == count;
        for (size_t i = 1; same && i < count; i++)
            same = e[i].lo == e[0].lo && e[i].hi == e[0].hi;
        if (same)
            bd = pair_json(&e[0]);
        else {
            bd = json_array();
            for (size_t i = 0; i < count; i++)
                json_array_append_new(bd, has_bounds(&e[i]) ? pair_json(&e[i]) : json_null());
        }
    }
    const char *tables[2] = {"priors", "bounds"};
    json_t *vals[2] = {pr, bd};
    for (size_t t = 0; t < 2; t++) {
        if (vals[t] == NULL)
            continue;
        json_t *tab = json_object_get(node, tables[t]);
        if (tab == NULL) {
            tab = json_object();
            json_object_set_new(node, tables[t], tab);
        }
        json_object_set_new(tab, key, vals[t]);
    }
}

/* "fixed" gains the single held lengthscales (and the noise on the root). */
static void put_fixed(json_t *node, const gp_hyper_entry *e, size_t n_ls)
{
    json_t *fx = json_object_get(node, "fixed"), *list = json_array();
    if (json_is_array(fx))
        json_array_extend(list, fx);
    else if (json_is_true(fx)) {
        json_decref(list);
        return; /* every group already held */
    }
    size_t before = json_array_size(list);
    for (size_t j = 0; j < n_ls; j++)
        if (e[1 + j].fixed) {
            char name[40];
            snprintf(name, sizeof name, "lengthscale[%zu]", j);
            json_array_append_new(list, json_string(name));
        }
    if (json_array_size(list) > before)
        json_object_set_new(node, "fixed", list);
    else
        json_decref(list);
}

static void decorate(json_t *node, const gp_kernel *k, const gp_hyper_spec *s, size_t *at)
{
    if (is_composite(k)) {
        json_t *terms = json_object_get(node, "terms");
        for (size_t i = 0; i < k->n_terms; i++)
            decorate(json_array_get(terms, i), k->terms[i], s, at);
        return;
    }
    const gp_hyper_entry *e = &s->entry[*at];
    put_key(node, "variance", e, 1);
    if (k->n_lengthscale)
        put_key(node, "lengthscale", e + 1, k->n_lengthscale);
    if (k->type == GP_KERNEL_RQ)
        put_key(node, "alpha", e + 1 + k->n_lengthscale, 1);
    if (k->type == GP_KERNEL_PERIODIC)
        put_key(node, "period", e + 1 + k->n_lengthscale, 1);
    put_fixed(node, e, k->n_lengthscale);
    *at += leaf_params(k);
}

json_t *gp_kernel_to_json_spec(const gp_kernel *k, const gp_hyper_spec *s)
{
    json_t *o = gp_kernel_to_json(k);
    if (o == NULL || s == NULL || s->n_kernel != gp_kernel_n_params(k))
        return o;
    size_t at = 0;
    decorate(o, k, s, &at);
    const gp_hyper_entry *noise = &s->entry[s->n_kernel];
    put_key(o, "noise", noise, 1);
    json_t *fx = json_object_get(o, "fixed");
    if (noise->fixed && !json_is_true(fx)) { /* fixed: true already holds it all */
        json_t *list = json_array();
        if (json_is_array(fx))
            json_array_extend(list, fx);
        json_array_append_new(list, json_string("noise"));
        json_object_set_new(o, "fixed", list);
    }
    return o;
}
