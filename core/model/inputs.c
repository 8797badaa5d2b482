/* What one input of a model is: core/model/inputs.h. */
#include "core/model/inputs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[GP_INPUT_KIND_COUNT] = {"point", "gaussian", "samples",
                                                            "messages"};
static const char *const message_names[GP_MESSAGE_TYPE_COUNT] = {"normal", "beta", "gamma"};
/* The two parameters of each message type, as the JSON input names them. */
static const char *const message_params[GP_MESSAGE_TYPE_COUNT][2] = {
    {"mean", "var"}, {"a", "b"}, {"shape", "rate"}};

const char gp_input_spec_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"kind\"], "
    "\"properties\": {\"kind\": {\"type\": \"string\", \"enum\": [\"point\", \"gaussian\", "
    "\"samples\", \"messages\"]}, \"dim\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": 1000}, \"covariance\": {\"type\": \"string\", \"enum\": [\"diag\", "
    "\"full\"]}, \"samples\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10000}, "
    "\"messages\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 16, "
    "\"items\": {\"type\": \"string\", \"enum\": [\"normal\", \"beta\", \"gamma\"]}}}}";

const char *gp_input_kind_name(gp_input_kind k)
{
    return k >= 0 && k < GP_INPUT_KIND_COUNT ? kind_names[k] : "unknown";
}

const char *gp_message_type_name(gp_message_type t)
{
    return t >= 0 && t < GP_MESSAGE_TYPE_COUNT ? message_names[t] : "unknown";
}

int gp_message_type_from_name(const char *name, gp_message_type *t)
{
    for (int k = 0; k < GP_MESSAGE_TYPE_COUNT; k++)
        if (name && strcmp(name, message_names[k]) == 0) {
            *t = (gp_message_type)k;
            return 1;
        }
    return 0;
}

void gp_input_spec_points(gp_input_spec *s, size_t d)
{
    memset(s, 0, sizeof *s);
    s->kind = GP_INPUT_POINT;
    s->dim = d;
}

size_t gp_input_width(const gp_input_spec *s)
{
    switch (s->kind) {
    case GP_INPUT_POINT:
        return s->dim;
    case GP_INPUT_GAUSSIAN:
        return s->full_covariance ? s->dim + s->dim * s->dim : 2 * s->dim;
    case GP_INPUT_SAMPLES:
        return s->samples * s->dim;
    case GP_INPUT_MESSAGES:
        return 2 * s->arity;
    default:
        return 0;
    }
}

size_t gp_input_point_dim(const gp_input_spec *s)
{
    return s->kind == GP_INPUT_MESSAGES ? s->arity : s->dim;
}

/* ---- parsing the option ---- */

static int member_count(const gp_value *v, const char *key, const char *field, double lo,
                        double hi, size_t *out, gp_error *err)
{
    const gp_value *m = gp_value_get(v, key);
    if (m == NULL)
        return GP_OK;
    char f[160];
    snprintf(f, sizeof f, "%s.%s", field, key);
    if (m->type != GP_VALUE_NUMBER || m->number != floor(m->number) || m->number < lo ||
        m->number > hi)
        return gp_error_set(err, GP_EINVAL, f, "%s must be an integer in [%g, %g]", f, lo, hi);
    *out = (size_t)m->number;
    return GP_OK;
}

static int parse_messages(const gp_value *v, const char *field, gp_input_spec *s, gp_error *err)
{
    const gp_value *m = gp_value_get(v, "messages");
    char f[160];
    snprintf(f, sizeof f, "%s.messages", field);
    if (m == NULL)
        return gp_error_set(err, GP_EINVAL, f,
                            "%s is required for kind messages: a list of normal, beta, gamma", f);
    if (m->type != GP_VALUE_ARRAY || m->n == 0 || m->n > GP_INPUT_MAX_MESSAGES)
        return gp_error_set(err, GP_EINVAL, f, "%s must be a list of 1 to %d message types", f,
                            GP_INPUT_MAX_MESSAGES);
    for (size_t i = 0; i < m->n; i++) {
        const gp_value *t = &m->items[i];
        if (t->type != GP_VALUE_STRING || !gp_message_type_from_name(t->string, &s->messages[i])) {
            snprintf(f, sizeof f, "%s.messages[%zu]", field, i);
            return gp_error_set(err, GP_EINVAL, f, "%s must be one of normal, beta, gamma", f);
        }
    }
    s->arity = m->n;
    return GP_OK;
}

static int reject_member(const gp_value *v, const char *key, const char *field, const char *kind,
                         gp_error *err)
{
    if (gp_value_get(v, key) == NULL)
        return GP_OK;
    char f[160];
    snprintf(f, sizeof f, "%s.%s", field, key);
    return gp_error_set(err, GP_EINVAL, f, "%s does not apply to kind %s", f, kind);
}

static int known_members(const gp_value *v, const char *field, gp_error *err)
{
    static const char *const keys[] = {"kind", "dim", "covariance", "samples", "messages"};
    for (size_t i = 0; i < v->n; i++) {
        int known = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(v->keys[i], keys[k]) == 0;
        if (!known) {
            char f[160];
            snprintf(f, sizeof f, "%s.%s", field, v->keys[i]);
            return gp_error_set(err, GP_EINVAL, f,
                                "%s: unknown member (kind, dim, covariance, samples, messages)",
                                f);
        }
    }
    return GP_OK;
}

static int parse_kind(const gp_value *v, const char *field, gp_input_kind *kind, gp_error *err)
{
    const gp_value *k = gp_value_get(v, "kind");
    char f[160];
    snprintf(f, sizeof f, "%s.kind", field);
    for (int i = 0; k && k->type == GP_VALUE_STRING && i < GP_INPUT_KIND_COUNT; i++)
        if (strcmp(k->string, kind_names[i]) == 0) {
            *kind = (gp_input_kind)i;
            return GP_OK;
        }
    return gp_error_set(err, GP_EINVAL, f, "%s must be one of point, gaussian, samples, messages",
                        f);
}

static int parse_covariance(const gp_value *v, const char *field, gp_input_spec *s, gp_error *err)
{
    const gp_value *c = gp_value_get(v, "covariance");
    if (c == NULL)
        return GP_OK;
    char f[160];
    snprintf(f, sizeof f, "%s.covariance", field);
    if (c->type == GP_VALUE_STRING && strcmp(c->string, "diag") == 0)
        return GP_OK;
    if (c->type == GP_VALUE_STRING && strcmp(c->string, "full") == 0) {
        s->full_covariance = 1;
        return GP_OK;
    }
    return gp_error_set(err, GP_EINVAL, f, "%s must be diag or full", f);
}

int gp_input_spec_parse(const gp_value *v, const char *field, gp_input_spec *out, gp_error *err)
{
    gp_input_spec s;
    gp_input_spec_points(&s, 0);
    if (v == NULL) {
        *out = s;
        return GP_OK;
    }
    if (v->type != GP_VALUE_OBJECT)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an object", field);
    int rc = known_members(v, field, err);
    if (rc == GP_OK)
        rc = parse_kind(v, field, &s.kind, err);
    if (rc == GP_OK)
        rc = member_count(v, "dim", field, 1, GP_INPUT_MAX_DIM, &s.dim, err);
    if (rc)
        return rc;
    const char *kind = kind_names[s.kind];
    char f[160];
    snprintf(f, sizeof f, "%s.dim", field);
    if (s.kind == GP_INPUT_MESSAGES) {
        rc = reject_member(v, "dim", field, kind, err);
        if (rc == GP_OK)
            rc = parse_messages(v, field, &s, err);
    } else {
        rc = reject_member(v, "messages", field, kind, err);
        if (rc == GP_OK && s.dim == 0 && s.kind != GP_INPUT_POINT)
            rc = gp_error_set(err, GP_EINVAL, f, "%s is required for kind %s", f, kind);
    }
    if (rc == GP_OK && s.kind == GP_INPUT_GAUSSIAN)
        rc = parse_covariance(v, field, &s, err);
    else if (rc == GP_OK)
        rc = reject_member(v, "covariance", field, kind, err);
    if (rc == GP_OK && s.kind == GP_INPUT_SAMPLES) {
        rc = member_count(v, "samples", field, 1, GP_INPUT_MAX_SAMPLES, &s.samples, err);
        snprintf(f, sizeof f, "%s.samples", field);
        if (rc == GP_OK && s.samples == 0)
            rc = gp_error_set(err, GP_EINVAL, f, "%s (points per input) is required", f);
    } else if (rc == GP_OK)
        rc = reject_member(v, "samples", field, kind, err);
    if (rc == GP_OK && s.kind == GP_INPUT_GAUSSIAN && s.full_covariance &&
        s.dim > 100)
        rc = gp_error_set(err, GP_EINVAL, f, "%s: a full covariance is taken up to dim 100", f);
    if (rc == GP_OK && gp_input_width(&s) > 1000000)
        rc = gp_error_set(err, GP_EINVAL, field, "%s: an input of %zu numbers is too large",
                          field, gp_input_width(&s));
    if (rc == GP_OK)
        *out = s;
    return rc;
}

/* ---- checking encoded rows ---- */

#define AT(j) X[(size_t)(j) * n + i]

static int check_finite_row(const gp_input_spec *s, const double *X, size_t n, size_t i,
                            const char *prefix, gp_error *err)
{
    size_t w = gp_input_width(s), d = s->dim;
    for (size_t j = 0; j < w; j++) {
        if (isfinite(AT(j)))
            continue;
        char f[160];
        switch (s->kind) {
        case GP_INPUT_GAUSSIAN:
            if (j < d)
                snprintf(f, sizeof f, "%s[%zu].gaussian.mean[%zu]", prefix, i, j);
            else if (!s->full_covariance)
                snprintf(f, sizeof f, "%s[%zu].gaussian.var[%zu]", prefix, i, j - d);
            else
                snprintf(f, sizeof f, "%s[%zu].gaussian.cov[%zu][%zu]", prefix, i, (j - d) % d,
                         (j - d) / d);
            break;
        case GP_INPUT_SAMPLES:
            snprintf(f, sizeof f, "%s[%zu].samples[%zu][%zu]", prefix, i, j / d, j % d);
            break;
        case GP_INPUT_MESSAGES:
            snprintf(f, sizeof f, "%s[%zu].messages[%zu].%s.%s", prefix, i, j / 2,
                     message_names[s->messages[j / 2]], message_params[s->messages[j / 2]][j % 2]);
            break;
        default:
            snprintf(f, sizeof f, "%s[%zu][%zu]", prefix, i, j);
        }
        return gp_error_set(err, GP_EDATA, f, "%s is not a finite number", f);
    }
    return GP_OK;
}

/* A full covariance: symmetric to round-off, and positive semi-definite (a
 * Cholesky factorisation of C + tiny I succeeds). */
static int check_covariance(const gp_input_spec *s, const double *X, size_t n, size_t i,
                            const char *prefix, gp_error *err)
{
    size_t d = s->dim;
    char f[160];
    snprintf(f, sizeof f, "%s[%zu].gaussian.cov", prefix, i);
    double scale = 0.0;
    for (size_t a = 0; a < d; a++)
        scale = fmax(scale, fabs(AT(d + a * d + a)));
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < a; b++)
            if (fabs(AT(d + a * d + b) - AT(d + b * d + a)) > 1e-9 * (scale + 1e-300))
                return gp_error_set(err, GP_EDATA, f, "%s is not symmetric ([%zu][%zu] != [%zu][%zu])",
                                    f, a, b, b, a);
    /* d <= 100 (gp_input_spec_parse): the packed factor fits on the stack (40 KB) */
    double L[100 * 101 / 2];
    size_t at = 0;
    for (size_t a = 0; a < d; a++) {
        for (size_t b = 0; b <= a; b++) {
            double v = AT(d + b * d + a);
            for (size_t k = 0; k < b; k++)
                v -= L[a * (a + 1) / 2 + k] * L[b * (b + 1) / 2 + k];
            if (b < a)
                L[at++] = L[b * (b + 1) / 2 + b] > 0 ? v / L[b * (b + 1) / 2 + b] : 0.0;
            else {
                if (v < -1e-9 * (scale + 1e-300))
                    return gp_error_set(err, GP_EDATA, f,
                                        "%s is not positive semi-definite", f);
                L[at++] = v > 0 ? sqrt(v) : 0.0;
            }
        }
    }
    return GP_OK;
}

static int check_positive(const double *X, size_t n, size_t i, size_t j, const char *f,
                          gp_error *err)
{
    if (AT(j) > 0.0)
        return GP_OK;
    return gp_error_set(err, GP_EDATA, f, "%s must be positive", f);
}

static int check_row(const gp_input_spec *s, const double *X, size_t n, size_t i,
                     const char *prefix, gp_error *err)
{
    int rc = check_finite_row(s, X, n, i, prefix, err);
    if (rc)
        return rc;
    char f[160];
    size_t d = s->dim;
    switch (s->kind) {
    case GP_INPUT_GAUSSIAN:
        if (s->full_covariance)
            return check_covariance(s, X, n, i, prefix, err);
        for (size_t j = 0; j < d; j++)
            if (AT(d + j) < 0.0) {
                snprintf(f, sizeof f, "%s[%zu].gaussian.var[%zu]", prefix, i, j);
                return gp_error_set(err, GP_EDATA, f, "%s must not be negative", f);
            }
        return GP_OK;
    case GP_INPUT_MESSAGES:
        for (size_t k = 0; k < s->arity; k++) {
            gp_message_type t = s->messages[k];
            for (size_t p = (t == GP_MESSAGE_NORMAL); p < 2; p++) {
                snprintf(f, sizeof f, "%s[%zu].messages[%zu].%s.%s", prefix, i, k,
                         message_names[t], message_params[t][p]);
                if (t == GP_MESSAGE_NORMAL && AT(2 * k + p) < 0.0)
                    return gp_error_set(err, GP_EDATA, f, "%s must not be negative", f);
                if (t != GP_MESSAGE_NORMAL && (rc = check_positive(X, n, i, 2 * k + p, f, err)))
                    return rc;
            }
        }
        return GP_OK;
    default:
        return GP_OK;
    }
}

int gp_input_check(const gp_input_spec *s, const double *X, size_t n, const char *prefix,
                   gp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = check_row(s, X, n, i, prefix ? prefix : "X", err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

void gp_input_message_moments(const gp_input_spec *s, const double *X, size_t n, size_t i,
                              double *mean, double *var)
{
    for (size_t k = 0; k < s->arity; k++) {
        double p0 = AT(2 * k), p1 = AT(2 * k + 1);
        switch (s->messages[k]) {
        case GP_MESSAGE_BETA: {
            double t = p0 + p1;
            mean[k] = p0 / t;
            var[k] = p0 * p1 / (t * t * (t + 1.0));
            break;
        }
        case GP_MESSAGE_GAMMA: /* shape, rate */
            mean[k] = p0 / p1;
            var[k] = p0 / (p1 * p1);
            break;
        default:
            mean[k] = p0;
            var[k] = p1;
        }
    }
}

#undef AT

/* ---- as numbers ---- */

void gp_input_spec_encode(const gp_input_spec *s, double *code)
{
    memset(code, 0, GP_INPUT_CODE_LEN * sizeof *code);
    code[0] = (double)s->kind;
    code[1] = (double)s->dim;
    code[2] = (double)s->full_covariance;
    code[3] = (double)s->samples;
    code[4] = (double)s->arity;
    for (size_t k = 0; k < s->arity && k < GP_INPUT_MAX_MESSAGES; k++)
        code[5 + k] = (double)s->messages[k];
}

static int is_index(double v, double below)
{
    return isfinite(v) && v >= 0.0 && v == floor(v) && v < below;
}

int gp_input_spec_decode(const double *code, size_t len, gp_input_spec *s, gp_error *err)
{
    if (len != GP_INPUT_CODE_LEN || !is_index(code[0], GP_INPUT_KIND_COUNT) ||
        !is_index(code[1], GP_INPUT_MAX_DIM + 1) || !is_index(code[2], 2) ||
        !is_index(code[3], GP_INPUT_MAX_SAMPLES + 1) ||
        !is_index(code[4], GP_INPUT_MAX_MESSAGES + 1))
        return gp_error_set(err, GP_EDATA, "input_spec", "corrupt input spec");
    memset(s, 0, sizeof *s);
    s->kind = (gp_input_kind)code[0];
    s->dim = (size_t)code[1];
    s->full_covariance = (int)code[2];
    s->samples = (size_t)code[3];
    s->arity = (size_t)code[4];
    for (size_t k = 0; k < s->arity; k++) {
        if (!is_index(code[5 + k], GP_MESSAGE_TYPE_COUNT))
            return gp_error_set(err, GP_EDATA, "input_spec", "corrupt input spec");
        s->messages[k] = (gp_message_type)code[5 + k];
    }
    return GP_OK;
}
