/* Symmetry groups of harmonic kernel decomposition: see core/methods/hkd/group.h. */
#include "core/methods/hkd/group.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"

#define TWO_PI 6.283185307179586476925
#define CHECK_TOL 1e-9
#define CHECK_PAIRS 200
#define WORK_DIMS (GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS)

static const char *const type_names[GP_SYM_TYPE_COUNT] = {"negate", "negate_pca", "translate",
                                                          "rotate2d", "cycle_dims"};

const char *gp_sym_type_name(gp_sym_type t)
{
    return (unsigned)t < GP_SYM_TYPE_COUNT ? type_names[t] : "unknown";
}

/* ---- parsing the option ---- */

static int known_keys(const gp_value *v, const char *const *keys, const char *field,
                      gp_error *err)
{
    for (size_t i = 0; i < v->n; i++) {
        int ok = 0;
        for (size_t k = 0; keys[k] && !ok; k++)
            ok = strcmp(v->keys[i], keys[k]) == 0;
        if (!ok) {
            char f[GP_ERROR_FIELD_LEN];
            snprintf(f, sizeof f, "%.40s.%.20s", field, v->keys[i]);
            return gp_error_set(err, GP_EINVAL, f, "%s has no member '%.40s'", field,
                                v->keys[i]);
        }
    }
    return GP_OK;
}

/* A whole number in [lo, hi] at member key of obj (required). */
static int get_count(const gp_value *obj, const char *key, size_t lo, size_t hi,
                     const char *gfield, size_t *out, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "%.40s.%.8s", gfield, key);
    const gp_value *v = gp_value_get(obj, key);
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing", field);
    if (v->type != GP_VALUE_NUMBER || v->number != floor(v->number) || v->number < (double)lo ||
        v->number > (double)hi)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an integer in [%zu, %zu]", field,
                            lo, hi);
    *out = (size_t)v->number;
    return GP_OK;
}

/* Input indices at member key: distinct, each < d when d is known. */
static int get_dims(const gp_value *obj, const char *key, size_t min_n, size_t max_n, size_t d,
                    const char *gfield, gp_sym_generator *g, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "%.40s.%.8s", gfield, key);
    const gp_value *v = gp_value_get(obj, key);
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing", field);
    if (v->type != GP_VALUE_ARRAY || v->n < min_n || v->n > max_n)
        return gp_error_set(err, GP_EINVAL, field,
                            min_n == max_n ? "%s must be an array of %zu input indices"
                                           : "%s must be an array of %zu to %zu input indices",
                            field, min_n, max_n);
    for (size_t i = 0; i < v->n; i++) {
        const gp_value *e = &v->items[i];
        snprintf(field, sizeof field, "%.32s.%.8s[%zu]", gfield, key, i);
        if (e->type != GP_VALUE_NUMBER || e->number != floor(e->number) || e->number < 0 ||
            e->number >= GP_SYM_MAX_DIMS)
            return gp_error_set(err, GP_EINVAL, field,
                                "%s must be an input index (an integer from 0 to %d)", field,
                                GP_SYM_MAX_DIMS - 1);
        size_t j = (size_t)e->number;
        if (d && j >= d)
            return gp_error_set(err, GP_EINVAL, field,
                                "%s = %zu but X has %zu columns (indices 0 to %zu)", field, j, d,
                                d - 1);
        for (size_t k = 0; k < i; k++)
            if (g->dims[k] == j)
                return gp_error_set(err, GP_EINVAL, field, "%s repeats input %zu", field, j);
        g->dims[i] = j;
    }
    g->n_dims = v->n;
    return GP_OK;
}

static size_t gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The order of one generator (negate_pca: of all its ways together). */
static size_t generator_size(const gp_sym_generator *g)
{
    switch (g->type) {
    case GP_SYM_NEGATE:
        return 2;
    case GP_SYM_NEGATE_PCA:
        return (size_t)1 << g->ways;
    default:
        return g->order;
    }
}

static int parse_typed(const gp_value *v, gp_sym_type type, size_t d, const char *gfield,
                       gp_sym_generator *g, gp_error *err)
{
    static const char *const keys[GP_SYM_TYPE_COUNT][5] = {
        {"type", "dims", NULL},
        {"type", "ways", NULL},
        {"type", "dim", "period", "order", NULL},
        {"type", "dims", "order", NULL},
        {"type", "dims", "shift", NULL}};
    int rc = known_keys(v, keys[type], gfield, err);
    if (rc)
        return rc;
    g->type = type;
    switch (type) {
    case GP_SYM_NEGATE:
        return get_dims(v, "dims", 1, GP_SYM_MAX_DIMS, d, gfield, g, err);
    case GP_SYM_NEGATE_PCA:
        rc = get_count(v, "ways", 1, 8, gfield, &g->ways, err);
        if (rc == GP_OK && d && g->ways > d) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "%.40s.ways", gfield);
            rc = gp_error_set(err, GP_EINVAL, field,
                              "%s = %zu needs at least as many inputs; X has %zu columns", field,
                              g->ways, d);
        }
        return rc;
    case GP_SYM_TRANSLATE: {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "%.40s.period", gfield);
        const gp_value *p = gp_value_get(v, "period");
        if (p == NULL || p->type != GP_VALUE_NUMBER || !isfinite(p->number) || !(p->number > 0))
            return gp_error_set(err, GP_EINVAL, field, "%s must be a positive number", field);
        g->period = p->number;
        rc = get_count(v, "dim", 0, GP_SYM_MAX_DIMS - 1, gfield, &g->dims[0], err);
        if (rc == GP_OK && d && g->dims[0] >= d) {
            snprintf(field, sizeof field, "%.40s.dim", gfield);
            return gp_error_set(err, GP_EINVAL, field, "%s = %zu but X has %zu columns", field,
                                g->dims[0], d);
        }
        g->n_dims = 1;
        return rc ? rc : get_count(v, "order", 2, GP_SYM_MAX_ORDER, gfield, &g->order, err);
    }
    case GP_SYM_ROTATE2D:
        rc = get_dims(v, "dims", 2, 2, d, gfield, g, err);
        return rc ? rc : get_count(v, "order", 2, GP_SYM_MAX_ORDER, gfield, &g->order, err);
    case GP_SYM_CYCLE_DIMS:
        rc = get_dims(v, "dims", 2, GP_SYM_MAX_DIMS, d, gfield, g, err);
        g->shift = 1;
        if (rc == GP_OK && gp_value_get(v, "shift"))
            rc = get_count(v, "shift", 1, GP_SYM_MAX_DIMS, gfield, &g->shift, err);
        if (rc == GP_OK && g->shift % g->n_dims == 0) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "%.40s.shift", gfield);
            return gp_error_set(err, GP_EINVAL, field,
                                "%s = %zu moves nothing among %zu inputs", field, g->shift,
                                g->n_dims);
        }
        if (rc == GP_OK)
            g->order = g->n_dims / gcd(g->n_dims, g->shift % g->n_dims);
        return rc;
    default:
        return GP_EINTERNAL;
    }
}

static int parse_generator(const gp_value *v, size_t d, const char *gfield, gp_sym_generator *g,
                           gp_error *err)
{
    memset(g, 0, sizeof *g);
    if (v->type != GP_VALUE_OBJECT)
        return gp_error_set(err, GP_EINVAL, gfield, "%s must be an object with a \"type\"",
                            gfield);
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "%.40s.type", gfield);
    const gp_value *t = gp_value_get(v, "type");
    if (t == NULL || t->type != GP_VALUE_STRING)
        return gp_error_set(err, GP_EINVAL, field,
                            "%s must be one of negate, negate_pca, translate, rotate2d, "
                            "cycle_dims", field);
    for (int k = 0; k < GP_SYM_TYPE_COUNT; k++)
        if (strcmp(t->string, type_names[k]) == 0)
            return parse_typed(v, (gp_sym_type)k, d, gfield, g, err);
    return gp_error_set(err, GP_EINVAL, field,
                        "%s '%.32s' is not one of negate, negate_pca, translate, rotate2d, "
                        "cycle_dims", field, t->string);
}

static int parse_flags(const gp_value *v, const char *field, gp_symmetry *out, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    const gp_value *e;
    if ((e = gp_value_get(v, "resolve")) &&
        (e->type != GP_VALUE_STRING || strcmp(e->string, "per_axis_real") != 0)) {
        snprintf(f, sizeof f, "%.40s.resolve", field);
        return gp_error_set(err, GP_EINVAL, f,
                            "%s must be \"per_axis_real\" (each cyclic axis resolved into real "
                            "blocks separately, note §1)", f);
    }
    if ((e = gp_value_get(v, "center"))) {
        snprintf(f, sizeof f, "%.40s.center", field);
        if (e->type != GP_VALUE_STRING ||
            (strcmp(e->string, "mean") != 0 && strcmp(e->string, "origin") != 0))
            return gp_error_set(err, GP_EINVAL, f,
                                "%s must be \"mean\" (the group acts about the training "
                                "inputs' mean) or \"origin\" (about 0 in the caller's units)",
                                f);
        out->center_origin = strcmp(e->string, "origin") == 0;
    }
    if ((e = gp_value_get(v, "validate"))) {
        snprintf(f, sizeof f, "%.40s.validate", field);
        if (e->type != GP_VALUE_BOOL)
            return gp_error_set(err, GP_EINVAL, f, "%s must be true or false", f);
        out->validate = e->number != 0.0;
    }
    if ((e = gp_value_get(v, "share_inducing"))) {
        snprintf(f, sizeof f, "%.40s.share_inducing", field);
        if (e->type != GP_VALUE_BOOL)
            return gp_error_set(err, GP_EINVAL, f, "%s must be true or false", f);
        out->per_block = e->number == 0.0;
    }
    return GP_OK;
}

int gp_symmetry_check_per_block(const gp_symmetry *s, const char *field, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%.40s.share_inducing", field);
    for (size_t g = 0; s->per_block && g < s->n_gen; g++)
        if (s->gen[g].type == GP_SYM_TRANSLATE)
            return gp_error_set(err, GP_EUNSUPPORTED, f,
                                "%s: false needs the inducing inputs optimised, which hkd does "
                                "not do with a translate generator (its input lives on a "
                                "circle); use the shared Z", f);
    return GP_OK;
}

/* Checks across generators: the group's size, and negate_pca (a rotation of
 * every input) alone. */
static int check_whole(const gp_symmetry *s, const char *field, gp_error *err)
{
    size_t size = 1;
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < s->n_gen; i++) {
        size *= generator_size(&s->gen[i]);
        snprintf(f, sizeof f, "%.30s.generators[%zu]", field, i);
        if (size > GP_SYM_MAX_SIZE)
            return gp_error_set(err, GP_EINVAL, f,
                                "the group reaches more than %d elements at %s; each block "
                                "costs a kernel evaluation per element",
                                GP_SYM_MAX_SIZE, f);
        if (s->gen[i].type == GP_SYM_NEGATE_PCA && s->n_gen > 1)
            return gp_error_set(err, GP_EINVAL, f,
                                "%s: negate_pca rotates every input into the PCA basis, so it "
                                "cannot be combined with other generators", f);
    }
    return GP_OK;
}

static void default_symmetry(size_t d, gp_symmetry *out)
{
    out->n_gen = 1;
    out->gen[0].type = GP_SYM_NEGATE;
    out->gen[0].n_dims = d ? d : 1;
    for (size_t i = 0; i < out->gen[0].n_dims; i++)
        out->gen[0].dims[i] = i;
}

int gp_symmetry_parse(const gp_value *v, size_t d, const char *field, gp_symmetry *out,
                      gp_error *err)
{
    static const char *const keys[] = {"generators", "resolve", "share_inducing", "validate",
                                       "center", NULL};
    memset(out, 0, sizeof *out);
    out->validate = 1;
    if (d > GP_SYM_MAX_DIMS)
        return gp_error_set(err, GP_EUNSUPPORTED, "X",
                            "hkd takes at most %d input columns; X has %zu", GP_SYM_MAX_DIMS, d);
    if (v == NULL) {
        default_symmetry(d, out);
        return GP_OK;
    }
    if (v->type != GP_VALUE_OBJECT)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an object", field);
    int rc = known_keys(v, keys, field, err);
    if (rc == GP_OK)
        rc = parse_flags(v, field, out, err);
    if (rc)
        return rc;
    const gp_value *gens = gp_value_get(v, "generators");
    if (gens == NULL) {
        default_symmetry(d, out);
        return GP_OK;
    }
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%.40s.generators", field);
    if (gens->type != GP_VALUE_ARRAY || gens->n > GP_SYM_MAX_GENERATORS)
        return gp_error_set(err, GP_EINVAL, f, "%s must be an array of at most %d generators", f,
                            GP_SYM_MAX_GENERATORS);
    for (size_t i = 0; i < gens->n; i++) {
        snprintf(f, sizeof f, "%.30s.generators[%zu]", field, i);
        if ((rc = parse_generator(&gens->items[i], d, f, &out->gen[i], err)) != GP_OK)
            return rc;
        out->n_gen = i + 1;
    }
    return check_whole(out, field, err);
}

void gp_sym_describe(const gp_symmetry *s, size_t g, char *buf, size_t len)
{
    const gp_sym_generator *G = &s->gen[g];
    int pos = snprintf(buf, len, "generator %zu (%s", g, gp_sym_type_name(G->type));
    if (G->type == GP_SYM_NEGATE_PCA && pos > 0 && (size_t)pos < len)
        pos += snprintf(buf + pos, len - (size_t)pos, ", %zu ways", G->ways);
    for (size_t i = 0; i < G->n_dims && pos > 0 && (size_t)pos < len; i++)
        pos += snprintf(buf + pos, len - (size_t)pos, "%s%zu", i ? ", " : " on inputs ",
                        G->dims[i]);
    if (pos > 0 && (size_t)pos < len)
        snprintf(buf + pos, len - (size_t)pos, ")");
}

void gp_symmetry_counts(const gp_symmetry *s, size_t *size, size_t *blocks)
{
    *size = 1;
    *blocks = 1;
    for (size_t i = 0; i < s->n_gen; i++) {
        const gp_sym_generator *g = &s->gen[i];
        *size *= generator_size(g);
        *blocks *= g->type == GP_SYM_NEGATE ? 2
                   : g->type == GP_SYM_NEGATE_PCA ? ((size_t)1 << g->ways)
                                                  : g->order / 2 + 1;
    }
}

/* ---- encoding ---- */

size_t gp_symmetry_encode(const gp_symmetry *s, double *out)
{
    size_t pos = 0;
#define PUT(x)                                                                                   \
    do {                                                                                         \
        if (out)                                                                                 \
            out[pos] = (double)(x);                                                              \
        pos++;                                                                                   \
    } while (0)
    PUT(s->n_gen);
    PUT(s->validate + 2 * s->center_origin);
    for (size_t i = 0; i < s->n_gen; i++) {
        const gp_sym_generator *g = &s->gen[i];
        PUT(g->type);
        PUT(g->n_dims);
        for (size_t j = 0; j < g->n_dims; j++)
            PUT(g->dims[j]);
        PUT(g->ways);
        PUT(g->order);
        PUT(g->shift);
        PUT(g->period);
    }
#undef PUT
    return pos;
}

static int bad_code(gp_error *err)
{
    return gp_error_set(err, GP_EDATA, "symmetry", "the stored symmetry is malformed");
}

static int code_count(const double *code, size_t len, size_t *pos, size_t max, size_t *out)
{
    if (*pos >= len)
        return -1;
    double v = code[(*pos)++];
    if (!(v >= 0 && v <= (double)max && v == floor(v)))
        return -1;
    *out = (size_t)v;
    return 0;
}

int gp_symmetry_decode(const double *code, size_t len, size_t d, gp_symmetry *out,
                       gp_error *err)
{
    memset(out, 0, sizeof *out);
    size_t pos = 0, n, validate, type;
    if (code_count(code, len, &pos, GP_SYM_MAX_GENERATORS, &n) ||
        code_count(code, len, &pos, 3, &validate))
        return bad_code(err);
    out->n_gen = n;
    out->validate = (int)(validate & 1);
    out->center_origin = (int)(validate >> 1);
    for (size_t i = 0; i < n; i++) {
        gp_sym_generator *g = &out->gen[i];
        if (code_count(code, len, &pos, GP_SYM_TYPE_COUNT - 1, &type) ||
            code_count(code, len, &pos, GP_SYM_MAX_DIMS, &g->n_dims))
            return bad_code(err);
        g->type = (gp_sym_type)type;
        for (size_t j = 0; j < g->n_dims; j++)
            if (code_count(code, len, &pos, d ? d - 1 : 0, &g->dims[j]))
                return bad_code(err);
        if (code_count(code, len, &pos, 8, &g->ways) ||
            code_count(code, len, &pos, GP_SYM_MAX_DIMS, &g->order) ||
            code_count(code, len, &pos, GP_SYM_MAX_DIMS, &g->shift) || pos >= len)
            return bad_code(err);
        g->period = code[pos++];
        if (g->type == GP_SYM_TRANSLATE && !(isfinite(g->period) && g->period > 0))
            return bad_code(err);
        if (g->type != GP_SYM_NEGATE && g->type != GP_SYM_NEGATE_PCA && g->order < 2)
            return bad_code(err);
    }
    gp_error scratch;
    if (pos != len || check_whole(out, "symmetry", &scratch) != GP_OK)
        return bad_code(err);
    return GP_OK;
}

/* ---- working coordinates ---- */

void gp_hkd_frame_free(gp_hkd_frame *f)
{
    if (f == NULL)
        return;
    free(f->U);
    f->U = NULL;
}

void gp_hkd_frame_apply(const gp_hkd_frame *f, const double *X, size_t n, double *W)
{
    size_t d = f->d, dw = f->dw;
    for (size_t i = 0; i < n; i++) {
        const double *x = X + i * d;
        double *w = W + i * dw;
        if (f->U)
            for (size_t j = 0; j < d; j++) {
                double s = 0.0;
                for (size_t k = 0; k < d; k++)
                    s += f->U[k + j * d] * x[k];
                w[j] = s;
            }
        else
            memcpy(w, x, d * sizeof *x);
        for (size_t k = 0; k < f->n_trans; k++) {
            double a = f->trans_omega[k] * x[f->trans_dim[k]];
            w[f->trans_dim[k]] = f->trans_radius[k] * cos(a);
            w[d + k] = f->trans_radius[k] * sin(a);
        }
    }
}

/* ---- the group ---- */

static void add_axis(gp_group *g, gp_axis_kind kind, size_t order, size_t gen, const size_t *dims,
                     size_t n_dims, size_t shift)
{
    gp_group_axis *a = &g->axis[g->n_axes++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->order = order;
    a->gen = gen;
    a->n_dims = n_dims;
    memcpy(a->dims, dims, n_dims * sizeof *dims);
    a->shift = shift;
}

static void add_generator(gp_group *g, const gp_sym_generator *G, size_t gen,
                          const gp_hkd_frame *f, size_t *trans_k)
{
    size_t dims[GP_SYM_MAX_DIMS];
    switch (G->type) {
    case GP_SYM_NEGATE:
        add_axis(g, GP_AXIS_FLIP, 2, gen, G->dims, G->n_dims, 0);
        break;
    case GP_SYM_NEGATE_PCA: /* subset j: directions j, j + J, ... (descending variance) */
        for (size_t j = 0; j < G->ways; j++) {
            size_t n = 0;
            for (size_t i = j; i < f->d; i += G->ways)
                dims[n++] = i;
            add_axis(g, GP_AXIS_FLIP, 2, gen, dims, n, 0);
        }
        break;
    case GP_SYM_TRANSLATE:
        dims[0] = G->dims[0];
        dims[1] = f->d + (*trans_k)++;
        add_axis(g, GP_AXIS_ROTATE, G->order, gen, dims, 2, 0);
        break;
    case GP_SYM_ROTATE2D:
        add_axis(g, GP_AXIS_ROTATE, G->order, gen, G->dims, 2, 0);
        break;
    case GP_SYM_CYCLE_DIMS:
        add_axis(g, GP_AXIS_CYCLE, G->order, gen, G->dims, G->n_dims, G->shift);
        break;
    default:
        break;
    }
}

/* w_r(s) of one cyclic axis of order T (per-axis real resolution, pitfall 2:
 * the paired frequencies carry the factor 2). */
static double axis_weight(size_t T, size_t r, size_t s)
{
    if (r == 0)
        return 1.0 / (double)T;
    if (2 * r == T)
        return (s % 2 ? -1.0 : 1.0) / (double)T;
    return 2.0 * cos(TWO_PI * (double)((r * s) % T) / (double)T) / (double)T;
}

static void fill_weights(gp_group *g)
{
    size_t r[GP_SYM_MAX_AXES];
    for (size_t t = 0; t < g->blocks; t++) {
        gp_group_block_freqs(g, t, r);
        for (size_t s = 0; s < g->size; s++) {
            double w = 1.0;
            size_t rest = s;
            for (size_t j = 0; j < g->n_axes; j++) {
                size_t T = g->axis[j].order;
                w *= axis_weight(T, r[j], rest % T);
                rest /= T;
            }
            g->W[t + s * g->blocks] = w;
        }
    }
}

int gp_group_build(const gp_symmetry *s, const gp_hkd_frame *f, gp_group *g, gp_error *err)
{
    memset(g, 0, sizeof *g);
    g->dw = f->dw;
    size_t trans_k = 0, axes = 0;
    for (size_t i = 0; i < s->n_gen; i++)
        axes += s->gen[i].type == GP_SYM_NEGATE_PCA ? s->gen[i].ways : 1;
    if (axes > GP_SYM_MAX_AXES)
        return gp_error_set(err, GP_EINVAL, "options.symmetry", "more than %d group axes",
                            GP_SYM_MAX_AXES);
    for (size_t i = 0; i < s->n_gen; i++)
        add_generator(g, &s->gen[i], i, f, &trans_k);
    g->size = 1;
    g->blocks = 1;
    for (size_t j = 0; j < g->n_axes; j++) {
        g->size *= g->axis[j].order;
        g->blocks *= g->axis[j].order / 2 + 1;
    }
    g->W = gp_alloc_doubles(g->blocks * g->size, err);
    if (g->W == NULL)
        return GP_ENOMEM;
    fill_weights(g);
    return GP_OK;
}

void gp_group_free(gp_group *g)
{
    if (g == NULL)
        return;
    free(g->W);
    g->W = NULL;
}

void gp_group_axis_apply(const gp_group_axis *a, size_t power, const double *x, size_t dw,
                         double *out)
{
    memcpy(out, x, dw * sizeof *x);
    power %= a->order;
    if (power == 0)
        return;
    switch (a->kind) {
    case GP_AXIS_FLIP:
        for (size_t i = 0; i < a->n_dims; i++)
            out[a->dims[i]] = -x[a->dims[i]];
        break;
    case GP_AXIS_ROTATE: {
        double ang = TWO_PI * (double)power / (double)a->order;
        double c = cos(ang), s = sin(ang), u = x[a->dims[0]], v = x[a->dims[1]];
        out[a->dims[0]] = c * u - s * v;
        out[a->dims[1]] = s * u + c * v;
        break;
    }
    case GP_AXIS_CYCLE: {
        size_t L = a->n_dims, step = (power * a->shift) % L;
        for (size_t l = 0; l < L; l++)
            out[a->dims[(l + step) % L]] = x[a->dims[l]];
        break;
    }
    }
}

/* out = G^s x, or G^-s x with inverse: each axis's power, or its complement. */
static void apply_element(const gp_group *g, size_t s, const double *x, double *out, int inverse)
{
    double tmp[WORK_DIMS];
    memcpy(out, x, g->dw * sizeof *x);
    for (size_t j = 0; j < g->n_axes; j++) {
        size_t T = g->axis[j].order, p = s % T;
        s /= T;
        if (p == 0)
            continue;
        memcpy(tmp, out, g->dw * sizeof *out);
        gp_group_axis_apply(&g->axis[j], inverse ? T - p : p, tmp, g->dw, out);
    }
}

void gp_group_apply(const gp_group *g, size_t s, const double *x, double *out)
{
    apply_element(g, s, x, out, 0);
}

void gp_group_apply_transpose(const gp_group *g, size_t s, const double *v, double *out)
{
    apply_element(g, s, v, out, 1);
}

void gp_group_block_freqs(const gp_group *g, size_t t, size_t *r)
{
    for (size_t j = 0; j < g->n_axes; j++) {
        size_t R = g->axis[j].order / 2 + 1;
        r[j] = t % R;
        t /= R;
    }
}

void gp_group_block_name(const gp_group *g, size_t t, char *buf, size_t len)
{
    size_t r[GP_SYM_MAX_AXES];
    gp_group_block_freqs(g, t, r);
    if (g->n_axes == 0) {
        snprintf(buf, len, "all");
        return;
    }
    if (g->n_axes == 1 && g->axis[0].order == 2) {
        snprintf(buf, len, "%s", r[0] ? "antisymmetric" : "symmetric");
        return;
    }
    int pos = snprintf(buf, len, "r=(");
    for (size_t j = 0; j < g->n_axes && pos > 0 && (size_t)pos < len; j++)
        pos += snprintf(buf + pos, len - (size_t)pos, "%s%zu", j ? "," : "", r[j]);
    if (pos > 0 && (size_t)pos < len)
        snprintf(buf + pos, len - (size_t)pos, ")");
}

/* A fixed direction with distinct positive entries: no group element other
 * than the identity fixes it, so the argmax below picks one orbit point. */
static double fold_direction(size_t i, size_t dw)
{
    return 1.0 + 0.6180339887498949 * (double)i / (double)dw;
}

void gp_group_fold(const gp_group *g, const double *x, double *out, double *scratch)
{
    double best = -INFINITY;
    memcpy(out, x, g->dw * sizeof *x);
    for (size_t s = 0; s < g->size; s++) {
        gp_group_apply(g, s, x, scratch);
        double v = 0.0;
        for (size_t i = 0; i < g->dw; i++)
            v += fold_direction(i, g->dw) * scratch[i];
        if (v > best + 1e-12 * fabs(best)) {
            best = v;
            memcpy(out, scratch, g->dw * sizeof *out);
        }
    }
}

/* ---- validation ---- */

static double dist(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s);
}

static double norm(const double *a, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * a[i];
    return sqrt(s);
}

static int fail(const gp_symmetry *s, size_t gen, const char *field, const char *what,
                double value, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN], desc[160];
    snprintf(f, sizeof f, "%.30s.generators[%zu]", field, gen);
    gp_sym_describe(s, gen, desc, sizeof desc);
    return gp_error_set(err, GP_EUNSUPPORTED, f, "%s: %s (%.3g against a tolerance of %g)", desc,
                        what, value, CHECK_TOL);
}

/* Cyclicity and commutation at point x. */
static int check_algebra(const gp_group *g, const gp_symmetry *s, const double *x,
                         const char *field, gp_error *err)
{
    size_t dw = g->dw;
    double a[WORK_DIMS], b[WORK_DIMS], c[WORK_DIMS], scale = 1.0 + norm(x, dw);
    for (size_t j = 0; j < g->n_axes; j++) {
        const gp_group_axis *A = &g->axis[j];
        memcpy(a, x, dw * sizeof *x);
        for (size_t p = 0; p < A->order; p++) { /* G applied T times, one step at a time */
            gp_group_axis_apply(A, 1, a, dw, b);
            memcpy(a, b, dw * sizeof *b);
        }
        double e = dist(a, x, dw) / scale;
        if (e > CHECK_TOL)
            return fail(s, A->gen, field, "cyclicity fails: G^order x differs from x", e, err);
        for (size_t i = 0; i < j; i++) {
            gp_group_axis_apply(A, 1, x, dw, a);
            gp_group_axis_apply(&g->axis[i], 1, a, dw, b);
            gp_group_axis_apply(&g->axis[i], 1, x, dw, a);
            gp_group_axis_apply(A, 1, a, dw, c);
            e = dist(b, c, dw) / scale;
            if (e > CHECK_TOL)
                return fail(s, A->gen, field, "commutation fails: it does not commute with an "
                                              "earlier generator", e, err);
        }
    }
    return GP_OK;
}

/* Kernel invariance under every axis and sum_t k_t = k at the pair (x, z). */
static int check_kernel(const gp_group *g, const gp_symmetry *s, const gp_kernel *k,
                        const double *x, const double *z, const char *field, gp_error *err)
{
    size_t dw = g->dw;
    double gx[WORK_DIMS], gz[WORK_DIMS], var = gp_kernel_diag(k, x);
    double kxz = gp_kernel_eval(k, x, z, 0);
    for (size_t j = 0; j < g->n_axes; j++) {
        gp_group_axis_apply(&g->axis[j], 1, x, dw, gx);
        gp_group_axis_apply(&g->axis[j], 1, z, dw, gz);
        double e = fabs(gp_kernel_eval(k, gx, gz, 0) - kxz) / var;
        if (e > CHECK_TOL)
            return fail(s, g->axis[j].gen, field,
                        "kernel invariance fails: k(Gx, Gx') differs from k(x, x') for this "
                        "kernel family (ARD lengthscales that differ across the inputs a "
                        "rotation or cycle mixes break it; use an isotropic kernel)",
                        e, err);
    }
    double sum = 0.0;
    for (size_t sidx = 0; sidx < g->size; sidx++) {
        gp_group_apply(g, sidx, z, gz);
        double ks = gp_kernel_eval(k, x, gz, 0), w = 0.0;
        for (size_t t = 0; t < g->blocks; t++)
            w += g->W[t + sidx * g->blocks];
        sum += w * ks;
    }
    double e = fabs(sum - kxz) / var;
    if (e > CHECK_TOL)
        return fail(s, g->n_axes ? g->axis[0].gen : 0, field,
                    "the decomposition fails: sum_t k_t(x, x') differs from k(x, x')", e, err);
    return GP_OK;
}

int gp_group_validate(const gp_group *g, const gp_symmetry *s, const gp_kernel *const *kernels,
                      size_t n_kernels, const double *P, size_t n, uint64_t seed,
                      const char *field, gp_error *err)
{
    if (n == 0 || g->n_axes == 0)
        return GP_OK;
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x68b6d5a1c3e2f407ULL);
    int rc = GP_OK;
    for (size_t p = 0; p < CHECK_PAIRS && rc == GP_OK; p++) {
        const double *x = P + gp_rng_below(&rng, n) * g->dw;
        const double *z = P + gp_rng_below(&rng, n) * g->dw;
        rc = check_algebra(g, s, x, field, err);
        for (size_t k = 0; k < n_kernels && rc == GP_OK; k++)
            rc = check_kernel(g, s, kernels[k], x, z, field, err);
    }
    return rc;
}
