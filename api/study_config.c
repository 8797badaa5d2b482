/* A study's configuration (docs/design/api.md, "Studies"): the body of
 * POST /v1/studies parsed and checked, every error naming its field, and
 * written back as the canonical JSON the store keeps (every default
 * filled in), which reads back to the same configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"
#include "core/kernel/kernel_spectral.h"

static const char *const study_keys[] = {"name",  "parameters", "objective", "constraints",
                                         "acquisition", "model", "initial_design", "refit",
                                         "trial_timeout_s", "seed", "optimizer", NULL};
static const char *const param_keys[] = {"name", "type", "bounds", "scale", "values", NULL};
static const char *const objective_keys[] = {"name", "goal", NULL};
static const char *const constraint_keys[] = {"name", "max", NULL};
static const char *const acq_keys[] = {"type", "beta", NULL};
static const char *const model_keys[] = {"method", "kernel", "options", "noise", "mean",
                                         "standardize", NULL};
static const char *const refit_keys[] = {"ratio", "gap", NULL};
static const char *const optimizer_keys[] = {"starts", "candidates", NULL};

static const char *const acq_names[] = {"log_ei", "ucb", "pi", "thompson", "max_variance"};
static const char *const type_names[] = {"double", "integer", "categorical"};
#define N_ACQ (sizeof acq_names / sizeof acq_names[0])
#define N_TYPES (sizeof type_names / sizeof type_names[0])

const char *gp_study_acq_name(int acquisition)
{
    return acquisition >= 0 && (size_t)acquisition < N_ACQ ? acq_names[acquisition] : "?";
}

void gp_study_config_free(gp_study_config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; c->params && i < c->n_params; i++) {
        for (size_t j = 0; c->params[i].values && j < c->params[i].n_values; j++)
            free(c->params[i].values[j]);
        free(c->params[i].values);
    }
    free(c->params);
    json_decref(c->model);
    memset(c, 0, sizeof *c);
}

size_t gp_study_dim(const gp_study_config *c)
{
    size_t D = 0;
    for (size_t i = 0; i < c->n_params; i++)
        D += c->params[i].type == GP_STUDY_CATEGORICAL ? c->params[i].n_values : 1;
    return D;
}

size_t gp_study_n_metrics(const gp_study_config *c)
{
    return 1 + c->n_constraints;
}

const char *gp_study_metric_name(const gp_study_config *c, size_t i)
{
    return i == 0 ? c->objective : c->constraints[i - 1].name;
}

void gp_study_model_name(const char *study, int constraint, char *out)
{
    if (constraint < 0)
        snprintf(out, GP_NAME_MAX + 1, GP_STUDY_MODEL_PREFIX "%.54s", study);
    else
        snprintf(out, GP_NAME_MAX + 1, GP_STUDY_MODEL_PREFIX "%.54s.c%u", study,
                 (unsigned)constraint & 7u); /* < GP_STUDY_MAX_CONSTRAINTS */
}

/* ---- names ---- */

/* A parameter's or metric's name: a non-empty string of at most
 * GP_STUDY_METRIC_MAX bytes without control characters. */
static int take_name(json_t *v, const char *field, char *out, gp_error *err)
{
    const char *s = json_string_value(v);
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing", field);
    size_t n = s ? strlen(s) : 0;
    int ok = s && n > 0 && n <= GP_STUDY_METRIC_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s[i] >= 0x20 && s[i] != 0x7f;
    if (!ok)
        return gp_error_set(err, GP_EINVAL, field,
                            "%s must be 1 to %d characters with no control character", field,
                            GP_STUDY_METRIC_MAX);
    memcpy(out, s, n + 1);
    return GP_OK;
}

/* ---- parameters ---- */

static int parse_bounds(json_t *v, const char *field, gp_study_param *p, gp_error *err)
{
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing: [lo, hi]", field);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return gp_error_set(err, GP_EINVAL, field, "%s must be [lo, hi], two numbers", field);
    p->lo = json_number_value(json_array_get(v, 0));
    p->hi = json_number_value(json_array_get(v, 1));
    if (!isfinite(p->lo) || !isfinite(p->hi) || fabs(p->lo) > 1e300 || fabs(p->hi) > 1e300)
        return gp_error_set(err, GP_EINVAL, field, "%s must be finite", field);
    if (!(p->lo < p->hi))
        return gp_error_set(err, GP_EINVAL, field, "%s: lo (%g) must be below hi (%g)", field,
                            p->lo, p->hi);
    if (p->type == GP_STUDY_INTEGER &&
        (p->lo != floor(p->lo) || p->hi != floor(p->hi) || fabs(p->lo) > 9007199254740992.0 ||
         fabs(p->hi) > 9007199254740992.0))
        return gp_error_set(err, GP_EINVAL, field, "%s of an integer parameter must be integers",
                            field);
    return GP_OK;
}

static int parse_scale(json_t *v, const char *field, gp_study_param *p, gp_error *err)
{
    const char *s = json_string_value(v);
    if (s && strcmp(s, "linear") == 0)
        return GP_OK;
    if (s == NULL || strcmp(s, "log") != 0)
        return gp_error_set(err, GP_EINVAL, field, "%s must be \"linear\" or \"log\"", field);
    if (p->type == GP_STUDY_CATEGORICAL)
        return gp_error_set(err, GP_EINVAL, field, "a categorical parameter has no scale");
    p->log_scale = 1;
    return GP_OK;
}

static int parse_values(json_t *v, const char *field, gp_study_param *p, gp_error *err)
{
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing: a list of strings", field);
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 2 || n > GP_STUDY_MAX_VALUES)
        return gp_error_set(err, GP_EINVAL, field, "%s must be a list of 2 to %d strings", field,
                            GP_STUDY_MAX_VALUES);
    p->values = calloc(n, sizeof *p->values);
    if (p->values == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < n; j++) {
        char f[GP_STUDY_FIELD_BUF], name[GP_STUDY_METRIC_MAX + 1];
        snprintf(f, sizeof f, "%.160s[%zu]", field, j);
        int rc = take_name(json_array_get(v, j), f, name, err);
        if (rc)
            return rc;
        for (size_t k = 0; k < j; k++)
            if (strcmp(p->values[k], name) == 0)
                return gp_error_set(err, GP_EINVAL, f, "%s repeats the value '%s'", f, name);
        if ((p->values[j] = strdup(name)) == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        p->n_values = j + 1;
    }
    return GP_OK;
}

static int parse_type(json_t *v, const char *field, int *type, gp_error *err)
{
    const char *s = json_string_value(v);
    for (size_t t = 0; s && t < N_TYPES; t++)
        if (strcmp(s, type_names[t]) == 0) {
            *type = (int)t;
            return GP_OK;
        }
    return gp_error_set(err, GP_EINVAL, field,
                        "%s must be \"double\", \"integer\" or \"categorical\"", field);
}

static int parse_param(json_t *v, size_t i, gp_study_param *p, gp_error *err)
{
    char pre[32], f[GP_STUDY_FIELD_BUF];
    snprintf(pre, sizeof pre, "parameters[%zu]", i);
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, pre, "%s must be an object", pre);
    int rc = gp_json_known_keys(v, param_keys, pre, err);
    snprintf(f, sizeof f, "%s.name", pre);
    if (rc == GP_OK)
        rc = take_name(json_object_get(v, "name"), f, p->name, err);
    snprintf(f, sizeof f, "%s.type", pre);
    if (rc == GP_OK)
        rc = parse_type(json_object_get(v, "type"), f, &p->type, err);
    if (rc)
        return rc;
    const int cat = p->type == GP_STUDY_CATEGORICAL;
    snprintf(f, sizeof f, "%s.%s", pre, cat ? "bounds" : "values");
    if (json_object_get(v, cat ? "bounds" : "values"))
        return gp_error_set(err, GP_EINVAL, f, "a %s parameter takes %s, not %s",
                            type_names[p->type], cat ? "values" : "bounds",
                            cat ? "bounds" : "values");
    snprintf(f, sizeof f, "%s.%s", pre, cat ? "values" : "bounds");
    rc = cat ? parse_values(json_object_get(v, "values"), f, p, err)
             : parse_bounds(json_object_get(v, "bounds"), f, p, err);
    snprintf(f, sizeof f, "%s.scale", pre);
    if (rc == GP_OK && json_object_get(v, "scale"))
        rc = parse_scale(json_object_get(v, "scale"), f, p, err);
    snprintf(f, sizeof f, "%s.bounds", pre);
    if (rc == GP_OK && p->log_scale && !(p->lo > 0.0))
        return gp_error_set(err, GP_EINVAL, f, "a log-scaled parameter needs lo > 0 (not %g)",
                            p->lo);
    return rc;
}

static int parse_params(json_t *v, gp_study_config *c, gp_error *err)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, "parameters", "parameters is missing");
    if (n < 1 || n > GP_STUDY_MAX_PARAMS)
        return gp_error_set(err, GP_EINVAL, "parameters",
                            "parameters must be a list of 1 to %d parameters",
                            GP_STUDY_MAX_PARAMS);
    if ((c->params = calloc(n, sizeof *c->params)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        c->n_params = i + 1;
        int rc = parse_param(json_array_get(v, i), i, &c->params[i], err);
        if (rc)
            return rc;
        for (size_t k = 0; k < i; k++)
            if (strcmp(c->params[k].name, c->params[i].name) == 0) {
                char f[32];
                snprintf(f, sizeof f, "parameters[%zu].name", i);
                return gp_error_set(err, GP_EINVAL, f, "%s repeats the name '%s'", f,
                                    c->params[i].name);
            }
    }
    if (gp_study_dim(c) > GP_STUDY_MAX_DIM)
        return gp_error_set(err, GP_EINVAL, "parameters",
                            "the space encodes into %zu dimensions, above %d (a categorical "
                            "parameter takes one per value)",
                            gp_study_dim(c), GP_STUDY_MAX_DIM);
    return GP_OK;
}

/* ---- objective and constraints ---- */

static int parse_objective(json_t *v, gp_study_config *c, gp_error *err)
{
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, "objective", "objective is missing");
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "objective",
                            "objective must be {\"name\": ..., \"goal\": ...}");
    int rc = gp_json_known_keys(v, objective_keys, "objective", err);
    if (rc == GP_OK)
        rc = take_name(json_object_get(v, "name"), "objective.name", c->objective, err);
    if (rc)
        return rc;
    const char *g = json_string_value(json_object_get(v, "goal"));
    if (g && (strcmp(g, "minimize") == 0 || strcmp(g, "maximize") == 0)) {
        c->maximize = g[1] == 'a';
        return GP_OK;
    }
    return gp_error_set(err, GP_EINVAL, "objective.goal",
                        "objective.goal must be \"minimize\" or \"maximize\"");
}

static int metric_taken(const gp_study_config *c, size_t upto, const char *name)
{
    if (strcmp(c->objective, name) == 0)
        return 1;
    for (size_t k = 0; k < upto; k++)
        if (strcmp(c->constraints[k].name, name) == 0)
            return 1;
    return 0;
}

static int parse_constraint(json_t *v, size_t i, gp_study_config *c, gp_error *err)
{
    char pre[32], f[GP_STUDY_FIELD_BUF];
    snprintf(pre, sizeof pre, "constraints[%zu]", i);
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, pre, "%s must be {\"name\": ..., \"max\": ...}", pre);
    gp_study_constraint *k = &c->constraints[i];
    int rc = gp_json_known_keys(v, constraint_keys, pre, err);
    snprintf(f, sizeof f, "%s.name", pre);
    if (rc == GP_OK)
        rc = take_name(json_object_get(v, "name"), f, k->name, err);
    if (rc)
        return rc;
    if (metric_taken(c, i, k->name))
        return gp_error_set(err, GP_EINVAL, f, "%s repeats the metric '%s'", f, k->name);
    snprintf(f, sizeof f, "%s.max", pre);
    json_t *m = json_object_get(v, "max");
    if (m == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is missing: the constraint is metric <= max",
                            f);
    if (!json_is_number(m) || !isfinite(json_number_value(m)))
        return gp_error_set(err, GP_EINVAL, f, "%s must be a finite number", f);
    k->max = json_number_value(m);
    return GP_OK;
}

static int parse_constraints(json_t *v, gp_study_config *c, gp_error *err)
{
    if (v == NULL)
        return GP_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_array(v) || n > GP_STUDY_MAX_CONSTRAINTS)
        return gp_error_set(err, GP_EINVAL, "constraints",
                            "constraints must be a list of at most %d constraints",
                            GP_STUDY_MAX_CONSTRAINTS);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_constraint(json_array_get(v, i), i, c, err);
        if (rc)
            return rc;
        c->n_constraints = i + 1;
    }
    return GP_OK;
}

/* ---- acquisition, design, schedule ---- */

static int parse_acquisition(json_t *v, gp_study_config *c, gp_error *err)
{
    c->acquisition = GP_STUDY_LOG_EI;
    c->beta = GP_STUDY_DEFAULT_BETA;
    if (v == NULL)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "acquisition",
                            "acquisition must be {\"type\": ..., \"beta\": ...}");
    int rc = gp_json_known_keys(v, acq_keys, "acquisition", err);
    if (rc)
        return rc;
    json_t *t = json_object_get(v, "type");
    if (t) {
        const char *s = json_string_value(t);
        size_t a = 0;
        while (s && a < N_ACQ && strcmp(s, acq_names[a]) != 0)
            a++;
        if (s == NULL || a == N_ACQ)
            return gp_error_set(err, GP_EINVAL, "acquisition.type",
                                "acquisition.type must be one of: log_ei, ucb, pi, thompson, "
                                "max_variance");
        c->acquisition = (int)a;
    }
    json_t *b = json_object_get(v, "beta");
    if (b && (rc = gp_json_get_positive(b, "acquisition.beta", &c->beta, err)))
        return rc;
    if (b && c->acquisition != GP_STUDY_UCB)
        return gp_error_set(err, GP_EINVAL, "acquisition.beta", "beta is UCB's (type \"ucb\")");
    return GP_OK;
}

static int parse_count(json_t *obj, const char *key, const char *field, uint64_t lo, double hi,
                       uint64_t *out, gp_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return GP_OK;
    int rc = gp_json_get_uint(v, field, hi, out, err);
    if (rc == GP_OK && *out < lo)
        rc = gp_error_set(err, GP_EINVAL, field, "%s must be at least %llu", field,
                          (unsigned long long)lo);
    return rc;
}

static int parse_refit(json_t *v, gp_study_config *c, gp_error *err)
{
    c->refit_ratio = GP_STUDY_REFIT_RATIO;
    c->refit_gap = GP_STUDY_REFIT_GAP;
    if (v == NULL)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "refit", "refit must be {\"ratio\", \"gap\"}");
    int rc = gp_json_known_keys(v, refit_keys, "refit", err);
    json_t *r = json_object_get(v, "ratio");
    if (rc == GP_OK && r) {
        rc = gp_json_get_positive(r, "refit.ratio", &c->refit_ratio, err);
        if (rc == GP_OK && !(c->refit_ratio > 1.0 && c->refit_ratio <= 100.0))
            rc = gp_error_set(err, GP_EINVAL, "refit.ratio",
                              "refit.ratio must be above 1 and at most 100");
    }
    if (rc == GP_OK)
        rc = parse_count(v, "gap", "refit.gap", 1, 1e9, &c->refit_gap, err);
    return rc;
}

static int parse_optimizer(json_t *v, gp_study_config *c, gp_error *err)
{
    c->n_starts = 10;
    c->n_raw = 512;
    if (v == NULL)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "optimizer",
                            "optimizer must be {\"starts\", \"candidates\"}");
    int rc = gp_json_known_keys(v, optimizer_keys, "optimizer", err);
    if (rc == GP_OK)
        rc = parse_count(v, "starts", "optimizer.starts", 1, 256, &c->n_starts, err);
    if (rc == GP_OK)
        rc = parse_count(v, "candidates", "optimizer.candidates", 1, 65536, &c->n_raw, err);
    if (rc == GP_OK && c->n_raw < c->n_starts)
        rc = gp_error_set(err, GP_EINVAL, "optimizer.candidates",
                          "optimizer.candidates must be at least optimizer.starts");
    return rc;
}

static int parse_schedule(json_t *body, gp_study_config *c, gp_error *err)
{
    c->initial_design = 2 * ((uint64_t)gp_study_dim(c) + 1);
    c->trial_timeout_s = GP_STUDY_DEFAULT_TIMEOUT;
    int rc = parse_count(body, "initial_design", "initial_design", 1, 100000, &c->initial_design,
                         err);
    json_t *t = json_object_get(body, "trial_timeout_s");
    if (rc == GP_OK && t) {
        rc = gp_json_get_positive(t, "trial_timeout_s", &c->trial_timeout_s, err);
        if (rc == GP_OK && !(c->trial_timeout_s >= 1.0 && c->trial_timeout_s <= 3.2e7))
            rc = gp_error_set(err, GP_EINVAL, "trial_timeout_s",
                              "trial_timeout_s must be at least 1 and at most a year (3.2e7)");
    }
    json_t *s = json_object_get(body, "seed");
    if (rc == GP_OK && s)
        rc = gp_json_get_uint(s, "seed", GP_JSON_UINT_MAX, &c->seed, err);
    if (rc == GP_OK)
        rc = parse_refit(json_object_get(body, "refit"), c, err);
    if (rc == GP_OK)
        rc = parse_optimizer(json_object_get(body, "optimizer"), c, err);
    return rc;
}

/* ---- the model settings, checked as a fit of them is ---- */

/* A fit request of the model settings over D inputs and n stand-in rows,
 * parsed by the fit's own parser: what it refuses, a refit would. */
static int check_model_as_fit(gp_api *api, const gp_study_config *c, gp_error *err)
{
    size_t D = gp_study_dim(c), n = 4;
    json_t *fit = json_deep_copy(c->model), *X = json_array(), *y = json_array();
    for (size_t i = 0; X && y && i < n; i++) {
        json_t *row = json_array();
        for (size_t j = 0; row && j < D; j++)
            json_array_append_new(row, json_real((double)((i * 7 + j * 3) % 5) / 4.0));
        json_array_append_new(X, row);
        json_array_append_new(y, json_real((double)i));
    }
    char *text = NULL;
    if (fit && X && y) {
        json_object_set_new(fit, "name", json_string("study.check"));
        json_object_set(fit, "X", X);
        json_object_set(fit, "y", y);
        text = json_dumps(fit, GP_JSON_FLAGS);
    }
    json_decref(fit);
    json_decref(X);
    json_decref(y);
    if (text == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_request req = {.content_type = "application/json", .body = text, .body_len = strlen(text)};
    gp_fit_job *job = NULL;
    int rc = gp_api_parse_fit(api, &req, &job, err);
    free(text);
    gp_fit_job_free(job);
    if (rc && err) { /* the fit's field, as the study names it */
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "model%s%.*s", err->field[0] ? "." : "",
                 (int)(sizeof f - 8), err->field);
        memcpy(err->field, f, sizeof err->field < sizeof f ? sizeof err->field : sizeof f);
        err->field[sizeof err->field - 1] = '\0';
    }
    return rc;
}

/* Thompson draws from random-feature posteriors: the kernel needs a
 * spectral density (a stationary leaf). */
static int check_thompson(const gp_study_config *c, gp_error *err)
{
    if (c->acquisition != GP_STUDY_THOMPSON)
        return GP_OK;
    json_t *kj = json_object_get(c->model, "kernel");
    const char *t = json_string_value(json_object_get(kj, "type"));
    int type = t ? gp_kernel_type_from_name(t) : -1;
    gp_spectral sp;
    gp_error ignored;
    if (type < 0 || gp_kernel_spectral((gp_kernel_type)type, &sp, &ignored) != GP_OK)
        return gp_error_set(err, GP_EUNSUPPORTED, "model.kernel",
                            "acquisition thompson draws random features from the kernel's "
                            "spectral density: kernel '%s' has none (rbf, matern12, matern32, "
                            "matern52 have)",
                            t ? t : "?");
    return GP_OK;
}

static int parse_model(gp_api *api, json_t *v, gp_study_config *c, int check, gp_error *err)
{
    if (v && !json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "model", "model must be an object");
    int rc = v ? gp_json_known_keys(v, model_keys, "model", err) : GP_OK;
    if (rc)
        return rc;
    c->model = v ? json_deep_copy(v) : json_object();
    if (c->model == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    json_t *m = json_object_get(c->model, "method");
    if (m == NULL)
        json_object_set_new(c->model, "method", json_string("exact"));
    else if (!json_is_string(m) || (strcmp(json_string_value(m), "exact") != 0 &&
                                    strcmp(json_string_value(m), "sgpr") != 0))
        return gp_error_set(err, GP_EINVAL, "model.method",
                            "model.method must be \"exact\" or \"sgpr\" (the methods whose "
                            "models give the input gradients the acquisition needs)");
    if (json_object_get(c->model, "kernel") == NULL) {
        json_t *k = json_pack("{s:s, s:b}", "type", "matern52", "ard", 1);
        if (k == NULL || json_object_set_new(c->model, "kernel", k) != 0)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    rc = check_thompson(c, err);
    return rc || !check ? rc : check_model_as_fit(api, c, err);
}

/* check: the model settings checked as a fit (a new study; a stored one was). */
static int parse_config(gp_api *api, json_t *body, gp_study_config *c, int check, gp_error *err)
{
    if (!json_is_object(body))
        return gp_error_set(err, GP_EINVAL, NULL, "the body must be a JSON object");
    int rc = gp_json_known_keys(body, study_keys, NULL, err);
    if (rc == GP_OK)
        rc = parse_params(json_object_get(body, "parameters"), c, err);
    if (rc == GP_OK)
        rc = parse_objective(json_object_get(body, "objective"), c, err);
    if (rc == GP_OK)
        rc = parse_constraints(json_object_get(body, "constraints"), c, err);
    if (rc == GP_OK)
        rc = parse_acquisition(json_object_get(body, "acquisition"), c, err);
    if (rc == GP_OK)
        rc = parse_schedule(body, c, err);
    if (rc == GP_OK)
        rc = parse_model(api, json_object_get(body, "model"), c, check, err);
    return rc;
}

int gp_study_config_parse(gp_api *api, json_t *body, gp_study_config *c, gp_error *err)
{
    return parse_config(api, body, c, 1, err);
}

/* ---- the canonical JSON ---- */

static json_t *param_json(const gp_study_param *p)
{
    json_t *o = json_pack("{s:s, s:s}", "name", p->name, "type", type_names[p->type]);
    if (o && p->type == GP_STUDY_CATEGORICAL) {
        json_t *vals = json_array();
        for (size_t j = 0; vals && j < p->n_values; j++)
            json_array_append_new(vals, json_string(p->values[j]));
        json_object_set_new(o, "values", vals);
    } else if (o) {
        json_object_set_new(o, "bounds", json_pack("[f, f]", p->lo, p->hi));
        json_object_set_new(o, "scale", json_string(p->log_scale ? "log" : "linear"));
    }
    return o;
}

json_t *gp_study_config_json(const gp_study_config *c)
{
    json_t *o = json_object(), *params = json_array(), *cons = json_array();
    for (size_t i = 0; params && i < c->n_params; i++)
        json_array_append_new(params, param_json(&c->params[i]));
    for (size_t i = 0; cons && i < c->n_constraints; i++)
        json_array_append_new(cons, json_pack("{s:s, s:f}", "name", c->constraints[i].name,
                                              "max", c->constraints[i].max));
    if (o == NULL || params == NULL || cons == NULL) {
        json_decref(o);
        json_decref(params);
        json_decref(cons);
        return NULL;
    }
    json_object_set_new(o, "parameters", params);
    json_object_set_new(o, "objective", json_pack("{s:s, s:s}", "name", c->objective, "goal",
                                                  c->maximize ? "maximize" : "minimize"));
    json_object_set_new(o, "constraints", cons);
    json_t *acq = json_pack("{s:s}", "type", gp_study_acq_name(c->acquisition));
    if (acq && c->acquisition == GP_STUDY_UCB)
        json_object_set_new(acq, "beta", json_real(c->beta));
    json_object_set_new(o, "acquisition", acq);
    json_object_set(o, "model", c->model);
    json_object_set_new(o, "initial_design", json_integer((json_int_t)c->initial_design));
    json_object_set_new(o, "refit", json_pack("{s:f, s:I}", "ratio", c->refit_ratio, "gap",
                                              (json_int_t)c->refit_gap));
    json_object_set_new(o, "trial_timeout_s", json_real(c->trial_timeout_s));
    json_object_set_new(o, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(o, "optimizer", json_pack("{s:I, s:I}", "starts",
                                                  (json_int_t)c->n_starts, "candidates",
                                                  (json_int_t)c->n_raw));
    return o;
}

int gp_study_config_read(gp_api *api, const char *text, gp_study_config *c, gp_error *err)
{
    json_error_t je;
    json_t *o = text ? json_loads(text, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    if (o == NULL)
        return gp_error_set(err, GP_EDATA, NULL, "the stored study is not JSON");
    int rc = parse_config(api, o, c, 0, err);
    json_decref(o);
    if (rc)
        gp_error_set(err, GP_EDATA, NULL, "the stored study does not read back: %s",
                     err ? err->message : "");
    return rc;
}

/* ---- a trial's values ---- */

static int value_of(const gp_study_param *p, json_t *v, const char *field, double *out,
                    gp_error *err)
{
    if (p->type == GP_STUDY_CATEGORICAL) {
        const char *s = json_string_value(v);
        for (size_t j = 0; s && j < p->n_values; j++)
            if (strcmp(s, p->values[j]) == 0) {
                *out = (double)j;
                return GP_OK;
            }
        return gp_error_set(err, GP_EINVAL, field, "%s must be one of the parameter's values",
                            field);
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || x < p->lo || x > p->hi)
        return gp_error_set(err, GP_EINVAL, field, "%s must be a number in [%g, %g]", field,
                            p->lo, p->hi);
    if (p->type == GP_STUDY_INTEGER && x != floor(x))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an integer", field);
    *out = x;
    return GP_OK;
}

int gp_study_values_from_json(const gp_study_config *c, json_t *obj, const char *prefix,
                              double *value, gp_error *err)
{
    if (!json_is_object(obj))
        return gp_error_set(err, GP_EINVAL, prefix, "%s must be an object of the parameters",
                            prefix);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (i < c->n_params && strcmp(c->params[i].name, key) != 0)
            i++;
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "%s.%.*s", prefix, GP_STUDY_METRIC_MAX, key);
        if (i == c->n_params)
            return gp_error_set(err, GP_EINVAL, f, "%s is not a parameter of the study", f);
    }
    for (size_t i = 0; i < c->n_params; i++) {
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "%s.%s", prefix, c->params[i].name);
        json_t *x = json_object_get(obj, c->params[i].name);
        if (x == NULL)
            return gp_error_set(err, GP_EINVAL, f, "%s is missing", f);
        int rc = value_of(&c->params[i], x, f, &value[i], err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

json_t *gp_study_values_json(const gp_study_config *c, const double *value)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < c->n_params; i++) {
        const gp_study_param *p = &c->params[i];
        json_t *v;
        if (p->type == GP_STUDY_CATEGORICAL) {
            size_t j = value[i] >= 0.0 ? (size_t)value[i] : 0;
            v = json_string(p->values[j < p->n_values ? j : p->n_values - 1]);
        } else if (p->type == GP_STUDY_INTEGER) {
            v = json_integer((json_int_t)value[i]);
        } else {
            v = json_real(value[i]);
        }
        if (v == NULL || json_object_set_new(o, p->name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
