/* Priors, bounds and held parameters of a fit (hyperspec.h). */
#include "core/model/hyperspec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* ---- the spec ---- */

int gp_hyper_spec_new(gp_hyper_spec **out, const gp_kernel *k, gp_error *err)
{
    *out = NULL;
    gp_hyper_spec *s = calloc(1, sizeof *s);
    size_t n = gp_kernel_n_params(k);
    gp_hyper_entry *e = s ? calloc(n + 1, sizeof *e) : NULL;
    if (e == NULL) {
        free(s);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i <= n; i++)
        e[i].hi = INFINITY;
    s->n_kernel = n;
    s->entry = e;
    *out = s;
    return GP_OK;
}

int gp_hyper_spec_copy(gp_hyper_spec **out, const gp_hyper_spec *s, gp_error *err)
{
    *out = NULL;
    gp_hyper_spec *c = calloc(1, sizeof *c);
    gp_hyper_entry *e = c ? malloc((s->n_kernel + 1) * sizeof *e) : NULL;
    if (e == NULL) {
        free(c);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    memcpy(e, s->entry, (s->n_kernel + 1) * sizeof *e);
    *c = *s;
    c->entry = e;
    *out = c;
    return GP_OK;
}

void gp_hyper_spec_free(gp_hyper_spec *s)
{
    if (s == NULL)
        return;
    free(s->entry);
    free(s);
}

int gp_hyper_entry_stated(const gp_hyper_entry *e)
{
    return e->prior.type != GP_PRIOR_NONE || e->lo > 0.0 || e->hi < INFINITY;
}

int gp_hyper_shapes_objective(const gp_hyper_spec *s)
{
    if (s == NULL)
        return 0;
    for (size_t i = 0; i <= s->n_kernel; i++)
        if (gp_hyper_entry_stated(&s->entry[i]))
            return 1;
    return 0;
}

void gp_hyper_entry_bounds(const gp_hyper_entry *e, double *lo, double *hi)
{
    double plo, phi;
    gp_prior_support(&e->prior, &plo, &phi);
    *lo = e->lo > plo ? e->lo : plo;
    *hi = e->hi < phi ? e->hi : phi;
}

void gp_hyper_entry_name(const gp_kernel *k, size_t i, char *buf, size_t len)
{
    if (i >= gp_kernel_n_params(k))
        snprintf(buf, len, "noise");
    else
        gp_kernel_param_name(k, i, buf, len);
}

/* ---- the default preset ---- */

/* Visit the leaves in flat order, calling fn with the leaf and the flat
 * index of its first parameter. */
static size_t each_leaf(const gp_kernel *k, size_t at, void (*fn)(const gp_kernel *, size_t,
                                                                   void *),
                        void *ctx)
{
    if (k->type == GP_KERNEL_SUM || k->type == GP_KERNEL_PRODUCT) {
        for (size_t t = 0; t < k->n_terms; t++)
            at = each_leaf(k->terms[t], at, fn, ctx);
        return at;
    }
    fn(k, at, ctx);
    return at + 1 + k->n_lengthscale + (k->type == GP_KERNEL_RQ) +
           (k->type == GP_KERNEL_PERIODIC);
}

static gp_hyper_entry preset_prior(gp_hyper_entry e, gp_prior p)
{
    e.prior = p;
    e.preset = 1;
    return e;
}

static void default_leaf(const gp_kernel *leaf, size_t at, void *ctx)
{
    gp_hyper_spec *s = ctx;
    /* a weak prior on the variance: BoTorch's and GPyTorch's classic
     * outputscale prior gamma(2, 0.15) (mode 6.7, mean 13); it keeps a
     * classifier's amplitude from running off on few rows (sonar) */
    if (s->entry[at].prior.type == GP_PRIOR_NONE)
        s->entry[at] = preset_prior(s->entry[at], (gp_prior){GP_PRIOR_GAMMA, 2.0, 0.15});
    /* BoTorch's dimension-scaled prior: the typical lengthscale grows as
     * sqrt(d), so a point keeps neighbours as dimensions are added. BoTorch
     * states it for inputs in the unit cube, whose uniform spread has
     * standard deviation 1/sqrt(12); in standardised units a lengthscale is
     * sqrt(12) times its unit-cube value, hence log(12 d) / 2. */
    double loc = sqrt(2.0) + 0.5 * log(12.0 * (double)leaf->n_active);
    for (size_t i = 0; i < leaf->n_lengthscale; i++) {
        gp_hyper_entry *e = &s->entry[at + 1 + i];
        if (e->prior.type == GP_PRIOR_NONE)
            *e = preset_prior(*e, (gp_prior){GP_PRIOR_LOGNORMAL, loc, sqrt(3.0)});
    }
}

void gp_hyper_default_priors(gp_hyper_spec *s, const gp_kernel *k)
{
    each_leaf(k, 0, default_leaf, s);
    gp_hyper_entry *noise = &s->entry[s->n_kernel];
    if (noise->prior.type == GP_PRIOR_NONE)
        *noise = preset_prior(*noise, (gp_prior){GP_PRIOR_LOGNORMAL, -4.0, 1.0});
    s->preset = 1;
}

/* ---- checks ---- */

static int start_outside(const gp_kernel *k, size_t i, double v, double lo, double hi,
                         gp_error *err)
{
    char name[GP_ERROR_FIELD_LEN], field[GP_ERROR_FIELD_LEN + 8];
    gp_hyper_entry_name(k, i, name, sizeof name);
    if (i >= gp_kernel_n_params(k))
        snprintf(field, sizeof field, "noise.variance");
    else
        snprintf(field, sizeof field, "kernel.%s", name);
    field[GP_ERROR_FIELD_LEN - 1] = '\0';
    return gp_error_set(err, GP_EINVAL, field,
                        "the start of %s (%.17g) lies outside its bounds [%.17g, %.17g]", name,
                        v, lo, hi);
}

int gp_hyper_spec_check(const gp_hyper_spec *s, const gp_kernel *k, int noise_given,
                        double noise, gp_error *err)
{
    if (s == NULL)
        return GP_OK;
    size_t n = gp_kernel_n_params(k);
    if (s->n_kernel != n)
        return gp_error_set(err, GP_EINVAL, "kernel",
                            "the priors and bounds describe %zu kernel parameters; the kernel "
                            "has %zu",
                            s->n_kernel, n);
    double *theta = gp_alloc_doubles(n + 1, err);
    if (theta == NULL)
        return GP_ENOMEM;
    gp_kernel_get_params(k, theta);
    int rc = GP_OK;
    for (size_t i = 0; i <= n && rc == GP_OK; i++) {
        double lo, hi;
        gp_hyper_entry_bounds(&s->entry[i], &lo, &hi);
        if (!(lo < hi))
            rc = gp_error_set(err, GP_EINVAL, "kernel.bounds",
                              "the bounds of entry %zu leave no value (%g >= %g)", i, lo, hi);
        if (rc || (i == n && !noise_given))
            continue;
        double v = i < n ? exp(theta[i]) : noise;
        if (v < lo || v > hi)
            rc = start_outside(k, i, v, lo, hi, err);
    }
    free(theta);
    return rc;
}

void gp_hyper_free_mask(const gp_kernel *k, const gp_hyper_spec *s, unsigned char *free_mask)
{
    gp_kernel_free_mask(k, free_mask);
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n_kernel; i++)
        if (s->entry[i].fixed)
            free_mask[i] = 0;
}

double gp_hyper_log_prior(const gp_hyper_spec *s, const gp_kernel *k, double noise)
{
    if (s == NULL)
        return 0.0;
    size_t n = s->n_kernel;
    double lp = 0.0, *theta = malloc((n ? n : 1) * sizeof *theta);
    if (theta == NULL)
        return NAN;
    gp_kernel_get_params(k, theta);
    for (size_t i = 0; i < n; i++)
        if (s->entry[i].prior.type != GP_PRIOR_NONE)
            lp += gp_prior_log_density(&s->entry[i].prior, theta[i], NULL);
    free(theta);
    if (noise > 0.0 && s->entry[n].prior.type != GP_PRIOR_NONE)
        lp += gp_prior_log_density(&s->entry[n].prior, log(noise), NULL);
    return lp;
}

/* ---- warnings ---- */

const char *gp_warning_code_name(gp_warning_code code)
{
    return code == GP_WARN_AT_NOISE_FLOOR ? "at_noise_floor" : "at_bound";
}

static void add_warning(gp_fit_warnings *w, gp_warning_code code, size_t entry, int upper,
                        double value, double limit)
{
    if (w->n < GP_FIT_WARNINGS_MAX)
        w->w[w->n++] = (gp_fit_warning){code, entry, upper, value, limit};
}

/* A bound the value v sits on, in log space. */
static void check_entry(gp_fit_warnings *w, const gp_hyper_entry *e, size_t i, double v)
{
    double lo, hi;
    gp_hyper_entry_bounds(e, &lo, &hi);
    if (!(lo > 0.0 || hi < INFINITY) || !(v > 0.0))
        return;
    double width = lo > 0.0 && hi < INFINITY ? log(hi) - log(lo) : 10.0;
    double tol = GP_HYPER_BOUND_TOL * width < 1e-3 ? GP_HYPER_BOUND_TOL * width : 1e-3;
    if (lo > 0.0 && log(v) - log(lo) <= tol)
        add_warning(w, GP_WARN_AT_BOUND, i, 0, v, lo);
    else if (hi < INFINITY && log(hi) - log(v) <= tol)
        add_warning(w, GP_WARN_AT_BOUND, i, 1, v, hi);
}

void gp_hyper_find_warnings(const gp_hyper_spec *s, const gp_kernel *k, double noise,
                            double noise_floor, int noise_learned, gp_fit_warnings *w)
{
    memset(w, 0, sizeof *w);
    size_t n = gp_kernel_n_params(k);
    if (s && s->n_kernel == n) {
        double *theta = malloc((n ? n : 1) * sizeof *theta);
        if (theta == NULL)
            return;
        gp_kernel_get_params(k, theta);
        for (size_t i = 0; i < n; i++)
            check_entry(w, &s->entry[i], i, exp(theta[i]));
        free(theta);
        if (noise > 0.0 && noise_learned)
            check_entry(w, &s->entry[n], n, noise);
    }
    if (noise > 0.0 && noise_learned && noise_floor > 0.0 &&
        noise < GP_HYPER_FLOOR_TOL * noise_floor &&
        !(w->n && w->w[w->n - 1].entry == n))
        add_warning(w, GP_WARN_AT_NOISE_FLOOR, n, 0, noise, noise_floor);
}

/* ---- persistence ---- */

#define SPEC_COLS 6 /* prior type, a, b, lo, hi, fixed */

int gp_hyper_export(const gp_hyper_spec *s, gp_state *st, gp_error *err)
{
    if (s == NULL)
        return GP_OK;
    size_t rows = s->n_kernel + 1;
    double *a = gp_alloc_doubles(rows * SPEC_COLS, err);
    if (a == NULL)
        return GP_ENOMEM;
    for (size_t i = 0; i < rows; i++) {
        const gp_hyper_entry *e = &s->entry[i];
        double v[SPEC_COLS] = {(double)e->prior.type, e->prior.a, e->prior.b,
                               e->lo, e->hi < INFINITY ? e->hi : -1.0, (double)e->fixed};
        for (size_t c = 0; c < SPEC_COLS; c++)
            a[c * rows + i] = v[c];
    }
    int rc = gp_state_put_owned(st, "hyper_spec", rows, SPEC_COLS, a, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "hyper_preset", (double)s->preset, err);
    return rc;
}

int gp_hyper_import(const gp_state *st, const gp_kernel *k, gp_hyper_spec **out, gp_error *err)
{
    *out = NULL;
    if (gp_state_find(st, "hyper_spec") == NULL)
        return GP_OK;
    size_t rows = gp_kernel_n_params(k) + 1;
    const double *a;
    double preset = 0.0;
    int rc = gp_state_get(st, "hyper_spec", rows, SPEC_COLS, &a, err);
    if (rc == GP_OK && gp_state_find(st, "hyper_preset"))
        rc = gp_state_get_scalar(st, "hyper_preset", &preset, err);
    gp_hyper_spec *s = NULL;
    if (rc == GP_OK)
        rc = gp_hyper_spec_new(&s, k, err);
    for (size_t i = 0; rc == GP_OK && i < rows; i++) {
        gp_hyper_entry *e = &s->entry[i];
        double type = a[i];
        if (!(type >= 0 && type < GP_PRIOR_TYPE_COUNT && type == floor(type)))
            rc = gp_error_set(err, GP_EDATA, "hyper_spec", "corrupt prior type %g", type);
        e->prior = (gp_prior){(gp_prior_type)type, a[rows + i], a[2 * rows + i]};
        e->lo = a[3 * rows + i];
        e->hi = a[4 * rows + i] < 0 ? INFINITY : a[4 * rows + i];
        e->fixed = a[5 * rows + i] != 0.0;
        if (rc == GP_OK && e->prior.type != GP_PRIOR_NONE)
            rc = gp_prior_check(&e->prior, "hyper_spec", err);
        if (rc == GP_OK && !(e->lo >= 0.0 && e->lo < e->hi))
            rc = gp_error_set(err, GP_EDATA, "hyper_spec", "corrupt bounds");
    }
    if (rc == GP_OK) {
        s->preset = preset != 0.0;
        *out = s;
    } else
        gp_hyper_spec_free(s);
    return rc;
}
