/* Fit requests: parse and validate (JSON body, or CSV body with the other
 * fields as query parameters), run the fit, persist the new version, answer
 * with the model's metadata. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/dataset_rows.h"
#include "api/internal.h"
#include "core/model/rows.h"


struct gp_fit_job {
    char name[GP_NAME_MAX + 1];
    const gp_method *method;
    gp_kernel *kernel;
    gp_hyper_spec *hyper; /* priors, bounds, single held parameters (NULL: none) */
    int noise_given, noise_fixed;
    double noise_variance;
    double *noise_pp; /* noise.per_point: n known variances (NULL: none) */
    size_t n_noise_pp;
    gp_option_value *options;
    size_t n_options;
    int standardize;
    gp_likelihood likelihood;
    uint64_t seed;
    int async;
    double *X, *y;
    size_t n, d, p;     /* p: outputs (columns of y) */
    gp_input_spec input; /* what a row of X is */
    gp_mean_type mean;   /* "mean": {"type": ...} (zero when absent) */
    json_t *outputs;     /* the outputs' names (p > 1, or given; NULL otherwise) */
    json_t *features;    /* the inputs' names (given, or a CSV header's; NULL otherwise) */
    json_t *targets;     /* the targets' names (given, the outputs', or a CSV header's) */
    char *spec;
    /* The name of the key that asked for the fit ("" when auth is off): kept
     * in the spec a durable job stores, and in the version's model JSON. */
    char created_by[GP_NAME_MAX + 1];
    /* A durable job's run (gp_fit_job_hold): saved together with the job's end. */
    char hold_id[40];
    char *hold_owner;
    const atomic_int *cancel; /* the owner's flag, polled inside the fit (NULL: none) */
    int ranks; /* "distributed": {"ranks": N}: processes of gpserve-fit (0: not distributed) */
    gp_api_idem idem; /* the request's Idempotency-Key, if any */
    gp_api_origin origin; /* who asked (the audit row of the save and of the job) */
    /* "data": the fit reads a data set (X and y NULL); dataset_id: the one a
     * stored job was accepted with (0: a new request) */
    gp_fit_data *data;
    int64_t dataset_id;
    gp_api_validation validation; /* "validation": the report made before the final fit */
    gp_api_auto autom; /* "method": "auto": its budget, candidates' options, leaderboard */
};

static const char *const fit_keys[] = {"name",  "method", "kernel", "likelihood", "noise",
                                       "options", "standardize", "seed", "async", "X", "y",
                                       "mean", "outputs", "feature_names", "target_names", "data",
                                       "distributed", "validation", "budget_s", NULL};
static const char *const mean_keys[] = {"type", NULL};
static const char *const noise_keys[] = {"variance", "fixed", "per_point", NULL};

void gp_fit_job_free(gp_fit_job *job)
{
    if (job == NULL)
        return;
    gp_kernel_free(job->kernel);
    gp_hyper_spec_free(job->hyper);
    gp_api_free_options(job->options, job->n_options);
    free(job->X);
    free(job->y);
    free(job->noise_pp);
    free(job->spec);
    free(job->hold_owner);
    json_decref(job->outputs);
    json_decref(job->features);
    json_decref(job->targets);
    gp_fit_data_free(job->data);
    json_decref(job->validation.report);
    gp_api_free_options(job->autom.hkd_options, job->autom.n_hkd_options);
    gp_api_auto_free(&job->autom);
    free(job);
}

const gp_api_origin *gp_fit_job_origin(const gp_fit_job *job)
{
    return &job->origin;
}

/* The audit row of a fit's save: the request's (201, the version the store
 * makes); a durable job's run is its outcome, recorded even when the run is
 * another daemon's take-over, which knows the job but not who submitted it. */
static const gp_audit_put *fit_audit(const gp_fit_job *job, gp_audit_put *buf)
{
    const gp_audit_put *a = gp_api_audit_put(&job->origin, buf, job->name, 0, 201);
    if (job->hold_owner == NULL)
        return a;
    if (a == NULL) {
        memset(buf, 0, sizeof *buf);
        buf->route = GP_API_FIT_ROUTE;
        buf->model = job->name;
        buf->status = 201;
    }
    buf->job_id = job->hold_id;
    return buf;
}

int gp_fit_job_hold(gp_fit_job *job, const char *id, const char *owner)
{
    if (owner == NULL || id == NULL || strlen(id) >= sizeof job->hold_id)
        return GP_EINVAL;
    char *o = strdup(owner);
    if (o == NULL)
        return GP_ENOMEM;
    free(job->hold_owner);
    job->hold_owner = o;
    snprintf(job->hold_id, sizeof job->hold_id, "%s", id);
    return GP_OK;
}

int gp_fit_job_request(const gp_fit_job *job, const char **spec, const double **X,
                       const double **y, size_t *n, size_t *d, size_t *p)
{
    *spec = job->spec;
    *X = job->X;
    *y = job->y;
    *n = job->n;
    *d = job->d;
    *p = job->p ? job->p : 1;
    return job->spec ? GP_OK : GP_EINVAL;
}

const gp_fit_data *gp_fit_job_data(const gp_fit_job *job)
{
    return job->data;
}

int64_t gp_fit_job_dataset_id(const gp_fit_job *job)
{
    return job->data ? gp_fit_data_id(job->data) : 0;
}

const gp_api_idem *gp_fit_job_idem(const gp_fit_job *job)
{
    return &job->idem;
}

int gp_api_fit_replay(gp_api *api, const gp_fit_job *job, gp_response *out)
{
    return gp_api_idem_replay(api, &job->idem, out);
}

int gp_fit_job_async(const gp_fit_job *job)
{
    return job->async;
}

const char *gp_fit_job_name(const gp_fit_job *job)
{
    return job->name;
}

const char *gp_fit_job_method(const gp_fit_job *job)
{
    return job->autom.on ? "auto" : job->method->name;
}

const char *gp_fit_job_leaderboard(const gp_fit_job *job)
{
    return job->autom.on ? job->autom.progress_text : NULL;
}

int gp_fit_job_ranks(const gp_fit_job *job)
{
    return job->ranks;
}

static void fill_request(const gp_fit_job *job, gp_fit_request *fr)
{
    memset(fr, 0, sizeof *fr);
    fr->X = job->X;
    fr->y = job->y;
    fr->n = job->n;
    fr->d = job->d;
    fr->kernel = job->kernel;
    fr->hyper = job->hyper;
    fr->noise_given = job->noise_given;
    fr->noise_variance = job->noise_variance;
    fr->noise_fixed = job->noise_fixed;
    fr->noise_per_point = job->noise_pp;
    fr->standardize = job->standardize;
    fr->likelihood = job->likelihood;
    fr->seed = job->seed;
    fr->options = job->options;
    fr->n_options = job->n_options;
    fr->cancel.flag = job->cancel;
    fr->n_outputs = job->p ? job->p : 1;
    fr->input = job->input;
    fr->mean = job->mean;
}

void gp_fit_job_set_cancel(gp_fit_job *job, const atomic_int *flag)
{
    job->cancel = flag;
}

int gp_fit_job_max_iterations(const gp_fit_job *job)
{
    if (job->autom.on) /* per-mille of its stages (api/auto.c) */
        return GP_API_AUTO_PROGRESS_MAX;
    int budget = gp_method_max_iterations(job->method, job->options, job->n_options);
    /* An asked validation is its folds' fits and the final one; the default
     * report runs after the final fit, its progress held at the fit's end,
     * so a job's budget stays the method's (docs/design/api.md, "Validation"). */
    if (job->validation.on != 1 || !job->validation.asked)
        return budget;
    double total = (double)budget * (double)(gp_validation_fits(&job->validation.spec) + 1);
    return total < 2e9 ? (int)total : 2000000000;
}

/* The names of the registered methods, comma separated; only those that fit
 * likelihood `only` when it is not negative, those that take priors
 * (gp_method.hyper_priors) when it is -2. */
static void method_names(int only, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < gp_method_count() && pos < len; i++) {
        const gp_method *m = gp_method_at(i);
        if (only >= 0 && !gp_method_accepts_likelihood(m, (gp_likelihood)only))
            continue;
        if (only == -2 && !m->hyper_priors)
            continue;
        int w = snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "", m->name);
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}

void gp_api_free_options(gp_option_value *opts, size_t n)
{
    for (size_t i = 0; opts && i < n; i++) {
        free((char *)opts[i].string);
        gp_value_free((gp_value *)opts[i].object);
    }
    free(opts);
}

/* One option's value by its spec's type (o->name set by the caller). */
static int parse_option(const gp_option_spec *s, json_t *val, const char *field,
                        gp_option_value *o, gp_error *err)
{
    switch (s->type) {
    case GP_OPTION_INT:
        if (!json_is_number(val) || !isfinite(json_number_value(val)) ||
            json_number_value(val) != floor(json_number_value(val)))
            return gp_error_set(err, GP_EINVAL, field, "%s must be an integer", field);
        o->number = json_number_value(val);
        return GP_OK;
    case GP_OPTION_NUMBER:
        if (json_is_string(val) && s->choices) { /* a keyword such as "auto" */
            o->number = NAN;
            if ((o->string = strdup(json_string_value(val))) == NULL)
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
            return GP_OK;
        }
        if (!json_is_number(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be a number%s%s", field,
                                s->choices ? " or one of " : "", s->choices ? s->choices : "");
        o->number = json_number_value(val);
        return GP_OK;
    case GP_OPTION_BOOL:
        if (!json_is_boolean(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be true or false", field);
        o->number = json_is_true(val) ? 1.0 : 0.0;
        return GP_OK;
    case GP_OPTION_ENUM:
        if (!json_is_string(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be one of %s", field,
                                s->choices ? s->choices : "");
        if ((o->string = strdup(json_string_value(val))) == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return GP_OK;
    case GP_OPTION_OBJECT: {
        /* a JSON object, converted for core (bounded in depth and size); the
         * method's check_option runs in gp_options_validate */
        if (!json_is_object(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be a JSON object", field);
        gp_value *tree = NULL;
        int rc = gp_json_to_value(val, field, &tree, err);
        o->object = tree;
        return rc;
    }
    }
    return gp_error_set(err, GP_EINTERNAL, field, "option '%s' has an unknown type", s->name);
}

int gp_api_parse_options(const gp_method *m, json_t *v, gp_option_value **opts, size_t *n,
                         gp_error *err)
{
    *opts = NULL;
    *n = 0;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "options", "options must be an object");
    size_t size = json_object_size(v);
    if (size == 0)
        return GP_OK;
    if ((*opts = calloc(size, sizeof **opts)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "options.%.48s", key);
        const gp_option_spec *s = gp_method_option_spec(m, key);
        if (s == NULL) {
            char names[256] = "";
            size_t pos = 0;
            for (size_t i = 0; i < m->n_options && pos < sizeof names; i++) {
                int w = snprintf(names + pos, sizeof names - pos, "%s%s", i ? ", " : "",
                                 m->options[i].name);
                if (w > 0)
                    pos += (size_t)w;
            }
            return gp_error_set(err, GP_EINVAL, field, "method '%s' has no option '%.48s' (it has: %s)",
                                m->name, key, names[0] ? names : "none");
        }
        gp_option_value *o = &(*opts)[*n];
        o->name = s->name;
        (*n)++; /* counted before parsing, so that what it allocated is freed on failure */
        int rc = parse_option(s, val, field, o, err);
        if (rc)
            return rc;
    }
    return gp_options_validate(m, *opts, *n, err);
}

/* "options" of an auto fit: only symmetry, parsed as hkd's (422 naming
 * options.KEY for any other). */
static int auto_parse_options(json_t *v, gp_api_auto *a, gp_error *err)
{
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "options", "options must be an object");
    const char *k;
    json_t *val;
    static const char *const auto_keys[] = {"symmetry", NULL};
    json_object_foreach(v, k, val)
    {
        int known = 0;
        for (size_t i = 0; auto_keys[i]; i++)
            known |= strcmp(k, auto_keys[i]) == 0;
        if (!known) {
            char field[96];
            snprintf(field, sizeof field, "options.%.80s", k);
            return gp_error_set(err, GP_EUNSUPPORTED, field,
                                "method auto takes only options.symmetry (given to hkd, which "
                                "becomes a candidate); for '%.40s' fit the method it belongs to",
                                k);
        }
    }
    const gp_method *hkd = gp_method_find("hkd");
    if (hkd == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "options.symmetry",
                            "options.symmetry is hkd's, and hkd is not registered");
    int rc = gp_api_parse_options(hkd, v, &a->hkd_options, &a->n_hkd_options, err);
    a->symmetry = rc == GP_OK && a->n_hkd_options > 0;
    if (a->symmetry)
        a->symmetry_json = json_incref(json_object_get(v, "symmetry"));
    return rc;
}

static int parse_options(gp_fit_job *job, json_t *v, gp_error *err)
{
    if (job->autom.on)
        return auto_parse_options(v, &job->autom, err);
    return gp_api_parse_options(job->method, v, &job->options, &job->n_options, err);
}

/* The catalogue's likelihood names, comma separated. */
static void likelihood_names(char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (int l = 0; l < GP_LIK_COUNT && pos < len; l++) {
        int w = snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "",
                         gp_likelihood_name((gp_likelihood)l));
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}

/* The method whose descriptor checks an auto fit's kernel, noise, mean and
 * priors before its candidates run (each candidate checks them again and
 * is skipped with the reason when they are not its own): exact for the
 * gaussian likelihood (it takes every kernel), svgp or pls otherwise. */
static const gp_method *auto_stand_in(gp_likelihood lik)
{
    static const char *const order[] = {"exact", "svgp", "pls", NULL};
    for (size_t i = 0; order[i]; i++) {
        const gp_method *m = gp_method_find(order[i]);
        if (m && gp_method_accepts_likelihood(m, lik))
            return m;
    }
    return NULL;
}

/* "likelihood": a name of the catalogue the method fits (422 unsupported
 * naming the methods that fit it otherwise). */
static int parse_likelihood(gp_fit_job *job, json_t *v, gp_error *err)
{
    const char *name = json_string_value(v);
    int l = name ? gp_likelihood_from_name(name) : -1;
    char names[256];
    if (l < 0) {
        likelihood_names(names, sizeof names);
        return gp_error_set(err, GP_EINVAL, "likelihood", "likelihood must be one of %s", names);
    }
    job->likelihood = (gp_likelihood)l;
    if (job->autom.on) /* the descriptor the fields are checked with: one that fits it */
        job->method = auto_stand_in(job->likelihood);
    if (job->method && gp_method_accepts_likelihood(job->method, job->likelihood))
        return GP_OK;
    if (job->autom.on)
        return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                            "method auto has no candidate for the %s likelihood", name);
    method_names((int)job->likelihood, names, sizeof names);
    return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                        "method '%s' does not fit the %s likelihood; %s fit%s it",
                        job->method->name, name, names[0] ? names : "no method",
                        strchr(names, ',') || !names[0] ? "" : "s");
}

/* The methods that take a constant or linear mean, from their descriptors. */
static void mean_methods(char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0, used = 0; gp_method_at(i) && used < len; i++)
        if (gp_method_at(i)->mean_functions)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                                     gp_method_at(i)->name);
}

/* "mean": {"type": "zero" | "constant" | "linear"}, after the method and
 * the likelihood: a mean other than zero needs a method that learns one and
 * the gaussian likelihood (refused here, before an async fit becomes a job). */
static int parse_mean(gp_fit_job *job, json_t *v, gp_error *err)
{
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "mean",
                            "mean must be an object {\"type\": \"zero\" | \"constant\" | "
                            "\"linear\"}");
    int rc = gp_json_known_keys(v, mean_keys, "mean", err);
    if (rc)
        return rc;
    const char *t = json_string_value(json_object_get(v, "type"));
    if (t == NULL || gp_mean_from_name(t, &job->mean) != 0)
        return gp_error_set(err, GP_EINVAL, "mean.type",
                            "mean.type must be one of zero, constant, linear");
    if (job->mean == GP_MEAN_ZERO)
        return GP_OK;
    if (!job->method->mean_functions) {
        char names[256];
        mean_methods(names, sizeof names);
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: method '%s' fits a zero mean only; %s take a constant or "
                            "linear mean", job->method->name, names);
    }
    /* a method that takes a mean takes it with every likelihood it fits:
     * with a non-Gaussian one it is the latent f's (core/model/model.c) */
    return GP_OK;
}

/* The methods that take known per-point noise, from their descriptors. */
static void per_point_methods(char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0, used = 0; gp_method_at(i) && used < len; i++)
        if (gp_method_at(i)->per_point_noise)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                                     gp_method_at(i)->name);
}

/* noise.per_point against the data and the method: one finite variance >= 0
 * per row, for a method that takes them. */
static int check_noise_pp(const gp_fit_job *job, gp_error *err)
{
    if (job->noise_pp == NULL)
        return GP_OK;
    if (!job->method->per_point_noise) {
        char names[256];
        per_point_methods(names, sizeof names);
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.per_point",
                            "noise.per_point: method '%s' does not take known per-point noise; "
                            "%s do", job->method->name, names);
    }
    if (job->n_noise_pp != job->n)
        return gp_error_set(err, GP_EDATA, "noise.per_point",
                            "noise.per_point has %zu entries; X has %zu rows", job->n_noise_pp,
                            job->n);
    return gp_check_noise_values(job->noise_pp, job->n, "noise.per_point", err);
}

static int parse_noise(gp_api *api, gp_fit_job *job, json_t *v, gp_error *err)
{
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "noise",
                            "noise must be an object {\"variance\": ..., \"fixed\": ...}");
    int rc = gp_json_known_keys(v, noise_keys, "noise", err);
    json_t *e;
    if (rc == GP_OK && (e = json_object_get(v, "per_point")))
        rc = gp_json_vector(e, "noise.per_point", api->cfg.max_points, &job->noise_pp,
                            &job->n_noise_pp, err);
    if (rc == GP_OK && (e = json_object_get(v, "fixed")))
        rc = gp_json_get_bool(e, "noise.fixed", &job->noise_fixed, err);
    /* 0 is a value only for a fixed noise beside known per-point noise */
    if (rc == GP_OK && (e = json_object_get(v, "variance"))) {
        rc = job->noise_pp && job->noise_fixed
                 ? gp_json_get_number(e, "noise.variance", &job->noise_variance, err)
                 : gp_json_get_positive(e, "noise.variance", &job->noise_variance, err);
        if (rc == GP_OK && !(job->noise_variance >= 0.0))
            rc = gp_error_set(err, GP_EINVAL, "noise.variance",
                              "noise.variance must be a finite number >= 0");
        job->noise_given = 1;
    }
    if (rc == GP_OK && job->noise_fixed && !job->noise_given)
        rc = gp_error_set(err, GP_EINVAL, "noise.variance",
                          "noise.fixed needs noise.variance (the value to hold)");
    return rc;
}

/* The input spec of the job's method and options (points of d columns for
 * most methods) for rows already parsed (CSV, a stored job's request). */
static int stored_input_spec(gp_fit_job *job, gp_error *err)
{
    int rc = gp_method_input_spec(job->method, job->options, job->n_options, job->d,
                                  &job->input, err);
    if (rc == GP_OK && job->input.kind == GP_INPUT_POINT)
        job->input.dim = job->d;
    if (rc == GP_OK && job->n == 0 && job->d == 0)
        job->d = gp_input_width(&job->input);
    if (rc == GP_OK && job->d != gp_input_width(&job->input))
        rc = gp_error_set(err, GP_EDATA, "X", "the rows have %zu numbers; %s inputs of "
                          "options.input have %zu", job->d,
                          gp_input_kind_name(job->input.kind), gp_input_width(&job->input));
    if (rc == GP_OK && job->p == 0)
        job->p = 1;
    return rc;
}

/* An empty fit (methods that start empty, e.g. rfgp): no X and y, the
 * dimensions from the options (input.dim, outputs). */
static int empty_data(gp_fit_job *job, gp_error *err)
{
    if (!job->method->starts_empty)
        return gp_error_set(err, GP_EINVAL, "X", "X (the training inputs) is missing");
    if (job->input.kind == GP_INPUT_POINT && job->input.dim == 0)
        return gp_error_set(err, GP_EINVAL, "options.input.dim",
                            "an empty %s model needs options.input (its dim) to know its inputs",
                            job->method->name);
    job->d = gp_input_width(&job->input);
    job->p = gp_method_declared_outputs(job->method, job->options, job->n_options);
    job->n = 0;
    return GP_OK;
}

/* 1 when the fit gives options.coregionalization (several outputs modelled
 * jointly, y's missing entries allowed). */
static int job_coreg(const gp_fit_job *job)
{
    for (size_t i = 0; i < job->n_options; i++)
        if (strcmp(job->options[i].name, "coregionalization") == 0)
            return 1;
    return 0;
}

/* y of a JSON fit: rows of p values with null for a missing one when the fit
 * is coregionalised; else numbers only (a null says what it needs), rows for
 * multi-output methods only (a method that takes coregionalisation says so). */
static int parse_targets(gp_api *api, json_t *y, gp_fit_job *job, size_t *ny, gp_error *err)
{
    if (job_coreg(job))
        return gp_json_targets_missing(y, api->cfg.max_points, 1, &job->y, ny, &job->p, err);
    int rc = gp_json_targets_null(y, err);
    if (rc == GP_OK && job->method->coregionalization && json_is_array(json_array_get(y, 0)))
        return gp_error_set(err, GP_EUNSUPPORTED, "y",
                            "y has rows of several outputs: method '%s' models them jointly "
                            "with options.coregionalization ({\"type\": \"icm\"} or "
                            "{\"type\": \"lmc\"}); without it, give a list of numbers",
                            job->method->name);
    if (rc == GP_OK)
        rc = gp_json_targets(y, "y", api->cfg.max_points, job->method->multi_output, &job->y,
                             ny, &job->p, err);
    return rc;
}

/* The outputs against y (after it is parsed, JSON or CSV or a stored job's):
 * missing entries, all-missing rows and outputs, and the names, kept for
 * p > 1 or when given. */
static int check_outputs(json_t *obj, gp_fit_job *job, gp_error *err)
{
    size_t p = job->p ? job->p : 1;
    json_t *given = json_object_get(obj, "outputs");
    int rc = GP_OK;
    if (given || p > 1)
        rc = gp_api_parse_outputs(given, p, &job->outputs, err);
    if (rc == GP_OK && job->y && job->n)
        rc = gp_api_check_targets(job->y, job->n, p, job_coreg(job), 0, job->outputs, err);
    return rc;
}

/* The columns' names, a model signature (columns.c): feature_names, one a
 * column of X (points only), and target_names, one an output (the outputs'
 * names when not given). */
static int check_names(json_t *obj, gp_fit_job *job, gp_error *err)
{
    json_t *f = json_object_get(obj, "feature_names"), *t = json_object_get(obj, "target_names");
    size_t p = job->p ? job->p : 1;
    int rc = GP_OK;
    if (f && job->input.kind != GP_INPUT_POINT)
        return gp_error_set(err, GP_EUNSUPPORTED, "feature_names",
                            "feature_names names columns of numbers; this model's inputs are "
                            "%s rows", gp_input_kind_name(job->input.kind));
    if (f && (rc = gp_api_check_names(f, "feature_names", job->d, err)) == GP_OK)
        job->features = json_incref(f);
    if (rc == GP_OK && t && (rc = gp_api_check_names(t, "target_names", p, err)) == GP_OK)
        job->targets = json_incref(t);
    else if (rc == GP_OK && t == NULL && job->outputs)
        job->targets = json_incref(job->outputs);
    return rc;
}

/* X and y of a JSON fit: rows of numbers, or the input kind of options.input;
 * y a list, or rows of outputs for multi-output methods. */
static int parse_data(gp_api *api, json_t *obj, gp_fit_job *job, gp_error *err)
{
    json_t *X = json_object_get(obj, "X"), *y = json_object_get(obj, "y");
    int rc = gp_method_input_spec(job->method, job->options, job->n_options, 0, &job->input, err);
    if (rc)
        return rc;
    if (X == NULL && y == NULL)
        return empty_data(job, err);
    if (X == NULL)
        return gp_error_set(err, GP_EINVAL, "X", "X (the training inputs) is missing");
    if (y == NULL)
        return gp_error_set(err, GP_EINVAL, "y", "y (the training targets) is missing");
    if (job->input.kind == GP_INPUT_POINT) {
        size_t want = job->input.dim;
        if ((rc = gp_json_matrix(X, "X", api->cfg.max_points, &job->X, &job->n, &job->d, err)))
            return rc;
        if (want && want != job->d)
            return gp_error_set(err, GP_EDATA, "X", "X has %zu columns; options.input.dim is %zu",
                                job->d, want);
        job->input.dim = job->d;
    } else if ((rc = gp_json_inputs(X, &job->input, "X", api->cfg.max_points, &job->X, &job->n,
                                    err)))
        return rc;
    else
        job->d = gp_input_width(&job->input);
    if (job->d > api->cfg.max_input_dim && job->input.kind == GP_INPUT_POINT)
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "X has %zu input columns; the limit is max_input_dim = %zu "
                            "(--max-input-dim)",
                            job->d, api->cfg.max_input_dim);
    size_t ny = 0;
    if ((rc = parse_targets(api, y, job, &ny, err)))
        return rc;
    if (ny != job->n)
        return gp_error_set(err, GP_EDATA, "y", "y has %zu entries; X has %zu rows", ny, job->n);
    return GP_OK;
}

/* "data": the rows come from a data set (fit_dataset.c), read in chunks by
 * the run; the fit has one Gaussian output of points and no per-point noise. */
static int take_dataset(gp_api *api, json_t *obj, gp_fit_job *job, gp_error *err)
{
    if (job->noise_pp)
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.per_point",
                            "noise.per_point is for X and y sent with the fit, not a data set");
    if (job->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                            "a fit over a data set has the gaussian likelihood");
    int rc = gp_fit_data_parse(api, obj, job->method, job->dataset_id, &job->data, err);
    if (rc == GP_OK)
        rc = gp_method_input_spec(job->method, job->options, job->n_options, 0, &job->input, err);
    if (rc == GP_OK && job->input.kind != GP_INPUT_POINT)
        rc = gp_error_set(err, GP_EUNSUPPORTED, "options.input",
                          "a data set's rows are points; %s inputs need X sent with the fit",
                          gp_input_kind_name(job->input.kind));
    if (rc)
        return rc;
    job->n = gp_fit_data_rows(job->data);
    job->d = gp_fit_data_inputs(job->data);
    job->p = 1;
    job->input.dim = job->d;
    return GP_OK;
}

/* The priors, bounds and single held parameters of the kernel JSON (e may
 * be NULL: the default kernel); the noise held there is held as
 * noise.fixed holds it. Checked against the method and the kernel's starts
 * here, before an async fit becomes a job. */
static int parse_hyper(gp_fit_job *job, json_t *e, gp_error *err)
{
    int rc = gp_kernel_spec_from_json(e, "kernel", job->kernel, &job->hyper, err);
    if (rc || job->hyper == NULL)
        return rc;
    const gp_hyper_entry *noise = &job->hyper->entry[job->hyper->n_kernel];
    if (noise->fixed) {
        if (!job->noise_given)
            return gp_error_set(err, GP_EINVAL, "noise.variance",
                                "kernel.fixed holds the noise: give its value in "
                                "noise.variance");
        job->noise_fixed = 1;
    }
    if (!job->method->hyper_priors) {
        char names[256];
        method_names(-2, names, sizeof names);
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.priors",
                            "method '%s' does not take priors, bounds or single held "
                            "hyperparameters; these do: %s",
                            job->method->name, names);
    }
    return gp_hyper_spec_check(job->hyper, job->kernel, job->noise_given, job->noise_variance,
                               err);
}

/* An auto fit validates its candidates on the rows in the request: its
 * validation is on (the default folds when absent); false, a data set's
 * streamed rows and a distributed fit are refused naming the field. */
static int auto_fields(gp_fit_job *job, gp_error *err)
{
    if (job->data)
        return gp_error_set(err, GP_EUNSUPPORTED, "data",
                            "method auto validates its candidates on rows held in memory; give "
                            "X and y (or a CSV body), or fit a method by name over the data set");
    if (job->ranks > 0)
        return gp_error_set(err, GP_EUNSUPPORTED, "distributed",
                            "method auto does not run distributed; fit a method by name");
    if (job->validation.on == 0)
        return gp_error_set(err, GP_EINVAL, "validation",
                            "method auto picks by validation: give {\"folds\": k} or "
                            "{\"fraction\": f}, or leave validation out (%d folds)",
                            GP_API_VALIDATION_DEFAULT_FOLDS);
    if (job->validation.on == -1) /* absent: auto's default for these rows */
        gp_api_auto_default_validation(&job->autom, job->n, &job->validation.spec);
    job->validation.on = 1;
    job->validation.asked = 1;
    return GP_OK;
}

/* Once the split is known: a candidate fits the budget, and hkd's
 * symmetry fits the inputs. */
static int auto_settle(gp_fit_job *job, gp_error *err)
{
    int rc = gp_api_auto_check(&job->autom, job->n, job->d, job->likelihood, job->p,
                               &job->validation.spec, err);
    if (rc == GP_OK && job->autom.symmetry)
        rc = gp_options_check_data(gp_method_find("hkd"), job->autom.hkd_options,
                                   job->autom.n_hkd_options, job->d, err);
    return rc;
}

/* The fields of a fit request in obj; X and y are taken from obj unless given
 * (CSV). On success obj loses X and y and becomes the stored spec. */
static int parse_fields(gp_api *api, json_t *obj, gp_fit_job *job, int have_data, gp_error *err)
{
    int rc = gp_json_known_keys(obj, fit_keys, NULL, err);
    if (rc)
        return rc;
    json_t *e = json_object_get(obj, "name");
    if (e == NULL)
        return gp_error_set(err, GP_EINVAL, "name", "name is missing");
    if (!json_is_string(e) || !gp_api_valid_name(json_string_value(e)))
        return gp_error_set(err, GP_EINVAL, "name",
                            "name must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
    if ((rc = gp_api_refuse_reserved_name(json_string_value(e), err)) != GP_OK)
        return rc;
    snprintf(job->name, sizeof job->name, "%s", json_string_value(e));
    job->method = gp_method_find("exact");
    if ((e = json_object_get(obj, "method"))) {
        const char *m = json_string_value(e);
        job->autom.on = m && strcmp(m, "auto") == 0;
        job->method = m ? gp_method_find(m) : NULL;
        if (job->autom.on) {
            job->method = auto_stand_in(GP_LIK_GAUSSIAN);
            job->async = 1; /* a job unless "async": false asks to wait for it */
        } else if (job->method == NULL) {
            char names[256];
            method_names(-1, names, sizeof names);
            return gp_error_set(err, GP_EINVAL, "method", "method must be one of: %s, auto",
                                names);
        }
    }
    if ((e = json_object_get(obj, "budget_s")) && !job->autom.on)
        return gp_error_set(err, GP_EUNSUPPORTED, "budget_s",
                            "budget_s is the time of method auto; method '%s' takes none",
                            job->method ? job->method->name : "?");
    if (job->autom.on && (rc = gp_api_auto_parse_budget(e, &job->autom, err)))
        return rc;
    if (job->method == NULL)
        return gp_error_set(err, GP_EINTERNAL, NULL, "no default method registered");
    job->standardize = 1;
    if ((e = json_object_get(obj, "standardize")) &&
        (rc = gp_json_get_bool(e, "standardize", &job->standardize, err)))
        return rc;
    if ((e = json_object_get(obj, "async")) &&
        (rc = gp_json_get_bool(e, "async", &job->async, err)))
        return rc;
    if ((e = json_object_get(obj, "seed")) &&
        (rc = gp_json_get_uint(e, "seed", GP_JSON_UINT_MAX, &job->seed, err)))
        return rc;
    if ((e = json_object_get(obj, "options")) && (rc = parse_options(job, e, err)))
        return rc;
    if ((e = json_object_get(obj, "likelihood")) && (rc = parse_likelihood(job, e, err)))
        return rc;
    if ((e = json_object_get(obj, "noise")) && (rc = parse_noise(api, job, e, err)))
        return rc;
    if (job->likelihood != GP_LIK_GAUSSIAN && json_object_get(obj, "noise"))
        return gp_error_set(err, GP_EINVAL, "noise",
                            "noise is for the gaussian likelihood; a %s model has none",
                            gp_likelihood_name(job->likelihood));
    if ((e = json_object_get(obj, "mean")) && (rc = parse_mean(job, e, err)))
        return rc;
    if ((e = json_object_get(obj, "distributed")) &&
        (rc = gp_api_parse_distributed(api, obj, e, job->method, &job->ranks, err)))
        return rc;
    if (job->ranks > 0)
        job->async = 1; /* a distributed fit is a job (gp_api_parse_distributed) */
    if (json_object_get(obj, "data")) {
        if ((rc = take_dataset(api, obj, job, err)))
            return rc;
    } else if (!have_data && (rc = parse_data(api, obj, job, err))) {
        return rc;
    } else if (have_data && (rc = stored_input_spec(job, err))) {
        return rc;
    }
    if ((rc = check_outputs(obj, job, err)))
        return rc;
    if ((rc = check_names(obj, job, err)))
        return rc;
    /* before the 202 of an async fit: labels that cannot be fitted never become a job */
    /* (a coregionalised fit's missing entries are NaN; core takes it gaussian only) */
    if (!job_coreg(job) && job->data == NULL &&
        (rc = gp_likelihood_check_labels(job->likelihood, job->y, job->n, err)))
        return rc;
    if ((rc = check_noise_pp(job, err)))
        return rc;
    if ((rc = gp_api_parse_validation(json_object_get(obj, "validation"), job->seed,
                                      &job->validation, err)))
        return rc;
    if (job->autom.on && (rc = auto_fields(job, err)))
        return rc;
    if ((rc = gp_api_settle_validation(&job->validation, job->method, job->likelihood, job->y,
                                       job->n, job->data != NULL, job->ranks > 0, err)))
        return rc;
    if (job->autom.on && (rc = auto_settle(job, err)))
        return rc;
    /* nor structured options that do not fit the data (a dimension index >= d) */
    if ((rc = gp_options_check_data(job->method, job->options, job->n_options, job->d, err)))
        return rc;
    size_t kdim = gp_input_point_dim(&job->input);
    if ((e = json_object_get(obj, "kernel")))
        rc = gp_kernel_from_json(e, "kernel", kdim, job->method, &job->kernel, err);
    else
        rc = gp_kernel_default(kdim, &job->kernel, err);
    if (rc == GP_OK)
        rc = parse_hyper(job, e, err);
    if (rc)
        return rc;
    json_object_del(obj, "X");
    json_object_del(obj, "y");
    if (job->created_by[0])
        json_object_set_new(obj, "created_by", json_string(job->created_by));
    if (job->data) /* the data set as resolved now: a stored job's run reads this one */
        json_object_set_new(obj, "dataset_id", json_integer(gp_fit_data_id(job->data)));
    job->spec = json_dumps(obj, GP_JSON_FLAGS);
    if (job->spec == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return GP_OK;
}

/* ---- CSV: the other fields come from the query ---- */

static json_t *query_scalar(const char *v)
{
    if (strcmp(v, "true") == 0)
        return json_true();
    if (strcmp(v, "false") == 0)
        return json_false();
    /* decimal only, as in CSV cells: "0x10" stays a string (and is refused) */
    double x;
    if (gp_decimal_parse(v, strlen(v), &x) == 0 && isfinite(x))
        return json_real(x);
    json_t *s = json_string(v);
    return s ? s : json_string("?");
}

static int csv_fields(const gp_request *req, json_t **out, gp_csv_request *q, gp_error *err)
{
    const char **target = &q->target, **noise_column = &q->noise_column;
    *target = NULL;
    *noise_column = NULL;
    q->targets = NULL;
    json_t *obj = json_object(), *noise = json_object();
    if (obj == NULL || noise == NULL) {
        json_decref(obj);
        json_decref(noise);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    int rc = GP_OK;
    for (size_t i = 0; i < req->n_query && rc == GP_OK; i++) {
        const char *k = req->query[i].key, *v = req->query[i].value ? req->query[i].value : "";
        if (k == NULL)
            continue;
        if (json_object_get(obj, k) ||
            (strncmp(k, "noise_", 6) == 0 && json_object_get(noise, k + 6)) ||
            (strcmp(k, "target") == 0 && *target) ||
            (strcmp(k, "targets") == 0 && q->targets) ||
            (strcmp(k, "noise_column") == 0 && *noise_column)) {
            rc = gp_error_set(err, GP_EINVAL, k, "query parameter '%.40s' given twice", k);
        } else if (strcmp(k, "target") == 0) {
            *target = v;
        } else if (strcmp(k, "targets") == 0) {
            q->targets = v;
        } else if (strcmp(k, "noise_column") == 0) {
            *noise_column = v;
        } else if (strcmp(k, "name") == 0 || strcmp(k, "method") == 0 ||
                   strcmp(k, "likelihood") == 0) {
            json_t *s = json_string(v);
            if (s == NULL)
                rc = gp_error_set(err, GP_EINVAL, k, "%s is not valid UTF-8", k);
            else
                json_object_set_new(obj, k, s);
        } else if (strcmp(k, "kernel") == 0 || strcmp(k, "options") == 0 ||
                   strcmp(k, "mean") == 0 || strcmp(k, "validation") == 0) {
            json_error_t je;
            /* validation may be true or false too */
            size_t any = strcmp(k, "validation") == 0 ? JSON_DECODE_ANY : 0;
            json_t *j =
                json_loads(v, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | any, &je);
            if (j == NULL)
                rc = gp_error_set(err, GP_EINVAL, k, "query parameter %s is not valid JSON: %s",
                                  k, je.text);
            else
                json_object_set_new(obj, k, j);
        } else if (strcmp(k, "standardize") == 0 || strcmp(k, "seed") == 0 ||
                   strcmp(k, "async") == 0 || strcmp(k, "budget_s") == 0) {
            json_object_set_new(obj, k, query_scalar(v));
        } else if (strcmp(k, "noise_variance") == 0 || strcmp(k, "noise_fixed") == 0) {
            json_object_set_new(noise, k + 6, query_scalar(v));
        } else {
            rc = gp_error_set(err, GP_EINVAL, k,
                              "unknown query parameter '%.40s' (a CSV fit takes name, method, "
                              "target, targets, kernel, likelihood, options, mean, noise_variance, "
                              "noise_fixed, noise_column, standardize, seed, async, validation, "
                              "budget_s)",
                              k);
        }
    }
    if (rc == GP_OK && json_object_size(noise))
        json_object_set(obj, "noise", noise);
    json_decref(noise);
    if (rc) {
        json_decref(obj);
        return rc;
    }
    *out = obj;
    return GP_OK;
}

/* A CSV header's names as the fit's feature_names and target_names (kept in
 * its spec, so a stored job's run keeps them too); names that could not be a
 * signature (an empty one, one over GP_OUTPUT_NAME_MAX bytes or with a control
 * character) leave the model without one, as before names were kept: the CSV
 * itself is valid. */
static void keep_header_names(json_t *obj, const gp_csv_request *q, const gp_fit_job *job)
{
    gp_error ignored;
    if (json_object_get(obj, "feature_names") == NULL &&
        gp_api_check_names(q->feature_names, "feature_names", job->d, &ignored) == GP_OK)
        json_object_set(obj, "feature_names", q->feature_names);
    if (json_object_get(obj, "target_names") == NULL &&
        gp_api_check_names(q->target_names, "target_names", job->p ? job->p : 1, &ignored) ==
            GP_OK)
        json_object_set(obj, "target_names", q->target_names);
}

int gp_api_parse_fit(gp_api *api, const gp_request *req, gp_fit_job **out, gp_error *err)
{
    *out = NULL;
    int media = gp_media_type(req->content_type);
    if (media == 0)
        return gp_error_set(err, GP_EMEDIATYPE, NULL,
                            "Content-Type must be application/json or text/csv, not '%.60s'",
                            req->content_type);
    gp_fit_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (req->key_name && gp_api_valid_name(req->key_name))
        snprintf(job->created_by, sizeof job->created_by, "%s", req->key_name);
    /* The key first: its scope gets the model's name once it is parsed. */
    gp_api_origin_of(req, &job->origin);
    int rc = gp_api_idem_parse(req, "fit", "", &job->idem, err);
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    json_t *obj = NULL;
    if (media == 1) {
        rc = gp_json_parse_body(req, &obj, err);
        if (rc == GP_OK)
            rc = parse_fields(api, obj, job, 0, err);
    } else {
        gp_csv_request q = {.max_rows = api->cfg.max_points,
                            .max_inputs = api->cfg.max_input_dim};
        rc = csv_fields(req, &obj, &q, err);
        /* name first, so that a CSV without ?name= says so before parsing the data */
        if (rc == GP_OK && json_object_get(obj, "name") == NULL)
            rc = gp_error_set(err, GP_EINVAL, "name",
                              "name is missing (a CSV fit takes it as ?name=)");
        json_t *names = rc == GP_OK && q.targets ? json_array() : NULL;
        q.feature_names = json_array();
        q.target_names = json_array();
        if (rc == GP_OK && (q.feature_names == NULL || q.target_names == NULL))
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        if (rc == GP_OK)
            rc = gp_csv_parse_request(req->body, req->body_len, &q, &job->X, &job->y,
                                      &job->noise_pp, &job->n, &job->d, &job->p, names, err);
        /* the target columns' names are the outputs' (kept in the spec) */
        if (rc == GP_OK && names)
            json_object_set(obj, "outputs", names);
        /* the header's names are the model's signature; names the request
         * also gives in the query are checked against the data instead */
        if (rc == GP_OK)
            keep_header_names(obj, &q, job);
        json_decref(q.feature_names);
        json_decref(q.target_names);
        json_decref(names);
        if (rc == GP_OK && job->noise_pp) /* checked with the rest by parse_fields */
            job->n_noise_pp = job->n;
        if (rc == GP_OK)
            rc = parse_fields(api, obj, job, 1, err);
    }
    json_decref(obj);
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    if (job->idem.present)
        snprintf(job->idem.scope, sizeof job->idem.scope, "fit:%s", job->name);
    *out = job;
    return GP_OK;
}

/* A stored spec's "created_by" and "dataset_id" (written by parse_fields,
 * never a caller's fields: a request naming one is refused as an unknown
 * field) into the job. */
static void take_created_by(json_t *obj, gp_fit_job *job)
{
    const char *by = json_string_value(json_object_get(obj, "created_by"));
    if (by && gp_api_valid_name(by))
        snprintf(job->created_by, sizeof job->created_by, "%s", by);
    json_t *ds = json_object_get(obj, "dataset_id"); /* written by parse_fields too */
    if (json_is_number(ds) && json_number_value(ds) >= 1)
        job->dataset_id = (int64_t)json_number_value(ds);
    if (json_is_object(obj)) {
        json_object_del(obj, "created_by");
        json_object_del(obj, "dataset_id");
    }
}

int gp_fit_job_from_request(gp_api *api, const char *spec, double *X, double *y, size_t n,
                            size_t d, size_t p, gp_fit_job **out, gp_error *err)
{
    *out = NULL;
    gp_fit_job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        free(X);
        free(y);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    job->X = X;
    job->y = y;
    job->n = n;
    job->d = d;
    job->p = p;
    json_error_t je;
    json_t *obj = spec ? json_loads(spec, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    take_created_by(obj, job);
    int rc = json_is_object(obj) ? parse_fields(api, obj, job, 1, err)
                                 : gp_error_set(err, GP_EDATA, NULL,
                                                "the stored request is not a JSON object");
    json_decref(obj);
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    *out = job;
    return GP_OK;
}

/* The fit response's body for the new row: a durable job's result, and the
 * answer a keyed fit records. */
char *gp_api_fit_body(const gp_model_meta *meta, void *ctx)
{
    (void)ctx;
    json_t *res = gp_api_model_json(meta, NULL, 0, NULL);
    char *text = res ? json_dumps(res, GP_JSON_FLAGS) : NULL;
    json_decref(res);
    return text;
}

int gp_api_fit_model(gp_api *api, gp_fit_job *job, const gp_rows *rows, gp_progress_fn progress,
                     void *ctx, gp_model **out, gp_error *err)
{
    gp_fit_request fr;
    fill_request(job, &fr);
    fr.max_train_points = api->cfg.max_train_points;
    fr.progress = progress;
    fr.progress_ctx = ctx;
    if (rows) { /* the rows come in chunks: none of the request's own */
        fr.rows = rows;
        fr.X = fr.y = NULL;
        fr.noise_per_point = NULL;
        fr.n = rows->n_total;
        fr.d = rows->d;
    }
    return gp_model_fit(job->method, &fr, out, err);
}

/* The reader of a fit over a data set, its lease labelled with the fit (a
 * DELETE of the data set names it in its 409). */
static int open_rows(gp_api *api, const gp_fit_job *job, gp_dataset_rows **rows, gp_error *err)
{
    char label[160];
    if (job->hold_owner)
        snprintf(label, sizeof label, "async job '%s' (a fit of model '%s')", job->hold_id,
                 job->name);
    else
        snprintf(label, sizeof label, "a fit of model '%s'", job->name);
    return gp_fit_data_open(api, job->data, 0, SIZE_MAX, label, rows, err);
}

/* The validation report of the job's rows (job->validation.report). */
static int validate(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                    gp_error *err)
{
    gp_fit_request fr;
    fill_request(job, &fr);
    fr.max_train_points = api->cfg.max_train_points;
    fr.progress = progress;
    fr.progress_ctx = ctx;
    return gp_api_run_validation(job->method, &fr, &job->validation, err);
}

/* The progress of the default report's folds, run after the final fit: the
 * job's count stays at the fit's end (iteration = max) while the callback
 * still polls the job's cancel. */
typedef struct held_progress {
    gp_progress_fn fn;
    void *ctx;
    int max_iterations;
    double objective; /* the final fit's */
} held_progress;

static int held_progress_fn(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration;
    (void)max_iterations;
    (void)objective;
    const held_progress *h = ctx;
    return h->fn ? h->fn(h->ctx, h->max_iterations, h->max_iterations, h->objective) : 0;
}

/* The default report (not asked): made after the final fit, dropped when a
 * fold fails (its rows alone did not fit); a cancel still cancels. */
static int validate_after(gp_api *api, gp_fit_job *job, const gp_model *model,
                          gp_progress_fn progress, void *ctx, gp_error *err)
{
    int budget = gp_fit_job_max_iterations(job);
    held_progress h = {progress, ctx, budget > 0 ? budget : 1, model->diag.objective};
    int rc = validate(api, job, held_progress_fn, &h, err);
    if (rc != GP_OK && rc != GP_ECANCELLED) {
        json_decref(job->validation.report);
        job->validation.report = NULL;
        gp_error_clear(err);
        rc = GP_OK;
    }
    return rc;
}

/* Method auto: its candidates validated (api/auto.c), then the winner is
 * the job's method, fitted on every row and saved with its report. */
static int run_auto(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                    gp_response *out, double *fit_seconds)
{
    gp_error err;
    gp_error_clear(&err);
    gp_fit_request fr;
    fill_request(job, &fr);
    fr.max_train_points = api->cfg.max_train_points;
    gp_api_auto_result res;
    int rc = gp_api_auto_run(&job->autom, &fr, &job->validation.spec, progress, ctx, &res, &err);
    if (rc) {
        gp_api_error(&err, out);
        return rc;
    }
    job->method = res.winner;
    if (res.hkd_options) { /* the options the winner was validated with */
        gp_api_free_options(job->options, job->n_options);
        job->options = job->autom.hkd_options;
        job->n_options = job->autom.n_hkd_options;
        job->autom.hkd_options = NULL;
        job->autom.n_hkd_options = 0;
    }
    json_decref(job->validation.report);
    job->validation.report = res.report;
    gp_model *model = NULL;
    rc = res.skip_final ? GP_ECANCELLED /* the fallback: gp_api_auto_final */
                        : gp_api_fit_model(api, job, NULL, gp_api_auto_progress, &res.progress,
                                           &model, &err);
    rc = gp_api_auto_final(&job->autom, &res, rc, &model, &err); /* its deadline: budget_s */
    if (rc) {
        gp_api_error(&err, out);
        return rc;
    }
    return gp_api_save_fit(api, job, model, out, fit_seconds);
}

int gp_api_run_fit(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                   gp_response *out, double *fit_seconds)
{
    if (job->autom.on)
        return run_auto(api, job, progress, ctx, out, fit_seconds);

    gp_error err;
    gp_error_clear(&err);
    if (fit_seconds)
        *fit_seconds = 0.0;
    gp_model *model = NULL;
    gp_dataset_rows *rows = NULL;
    int rc = job->data ? open_rows(api, job, &rows, &err) : GP_OK;
    /* asked: the folds' fits first, then the final fit counts on from them */
    size_t fits = job->validation.on == 1 && job->validation.asked
                      ? gp_validation_fits(&job->validation.spec)
                      : 0;
    gp_validation_progress after = {progress, ctx, fits, fits + 1};
    if (rc == GP_OK && fits)
        rc = validate(api, job, progress, ctx, &err);
    if (rc == GP_OK)
        rc = gp_api_fit_model(api, job, rows ? gp_dataset_rows_get(rows) : NULL,
                              fits ? gp_validation_progress_fn : progress, fits ? &after : ctx,
                              &model, &err);
    gp_dataset_rows_close(rows); /* the rows are read: the data set may go */
    if (rc == GP_OK && job->validation.on == 1 && !job->validation.asked)
        rc = validate_after(api, job, model, progress, ctx, &err);
    if (rc) {
        gp_model_free(model);
        gp_api_error(&err, out);
        return rc;
    }
    return gp_api_save_fit(api, job, model, out, fit_seconds);
}

/* method_info.leaderboard (every candidate) and method_info.auto (the
 * budget and the rule it picked by) of an auto fit's version. */
static void auto_method_info(json_t *ij, const gp_api_auto *a)
{
    json_t *mi = json_object_get(ij, "method_info");
    if (!json_is_object(mi)) {
        mi = json_object();
        json_object_set_new(ij, "method_info", mi);
    }
    json_object_set(mi, "leaderboard", a->leaderboard);
    json_t *o = json_object();
    json_object_set_new(o, "budget_s", gp_json_real(a->budget_s));
    json_object_set_new(o, "criterion", json_string("lowest mean held-out nlpd (log loss for "
                                                    "bernoulli and softmax)"));
    json_object_set_new(o, "tie", json_string("within one standard error of the best mean, the "
                                              "earliest in the rule table's order (exact first)"));
    gp_api_auto_info(o, a);
    json_object_set_new(mi, "auto", o);
}

int gp_api_save_fit(gp_api *api, gp_fit_job *job, gp_model *model, gp_response *out,
                    double *fit_seconds)
{
    gp_error err;
    gp_error_clear(&err);
    if (fit_seconds)
        *fit_seconds = 0.0;
    int rc = GP_OK;
    gp_state st;
    gp_state_init(&st);
    char *info = NULL;
    json_t *ij = gp_api_model_info_json(model);
    if (ij && job->outputs) /* kept with the version: GET, predict, OIP and observe read it */
        json_object_set(ij, "outputs", job->outputs);
    if (ij && job->features) /* the model's signature: records are matched by these */
        json_object_set(ij, "feature_names", job->features);
    if (ij && job->targets)
        json_object_set(ij, "target_names", job->targets);
    if (ij && job->created_by[0]) /* absent when auth is off */
        json_object_set_new(ij, "created_by", json_string(job->created_by));
    if (ij && job->data) /* which data set, and which of its rows */
        json_object_set_new(ij, "dataset", gp_fit_data_json(job->data));
    if (ij && job->validation.report) /* the report of the folds, kept with the version */
        json_object_set(ij, "validation", job->validation.report);
    if (ij && job->autom.on && job->autom.leaderboard) /* how auto chose the method */
        auto_method_info(ij, &job->autom);
    if (ij)
        info = json_dumps(ij, GP_JSON_FLAGS);
    json_decref(ij);
    rc = info ? gp_model_export(model, &st, &err)
              : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    /* nothing non-finite is stored: a fit that came out so is refused */
    gp_error bad;
    if (rc == GP_OK && gp_state_check_finite(&st, &bad) != GP_OK)
        rc = gp_error_set(&err, GP_EDATA, NULL,
                          "the fitted model holds a non-finite number (%s): the data is beyond "
                          "what float64 arithmetic can fit; rescale it",
                          bad.message);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_job_done done = {.id = job->hold_id, .owner = job->hold_owner, .progress = NULL,
                        .result = gp_api_fit_body, .ctx = NULL};
    gp_idem_put idem = gp_api_idem_put(&job->idem, 201, NULL, gp_api_fit_body, NULL);
    /* An async fit's key was recorded with its job (the 202); its run saves
     * like any other. */
    const int keyed = job->idem.present && !job->async && job->hold_owner == NULL;
    gp_audit_put audit;
    const gp_audit_put *a = fit_audit(job, &audit);
    if (rc == GP_OK)
        rc = gp_store_save_audited(api->store, job->name, job->method->name, job->spec, info,
                                   job->n, job->d, &st, job->hold_owner ? &done : NULL,
                                   keyed ? &idem : NULL, a, &meta, &err);
    gp_state_free(&st);
    free(info);
    if (rc) {
        gp_model_free(model);
        /* A retry with the key ran beside this one and saved first: its answer. */
        if (keyed && gp_api_key_taken(&err) && gp_api_idem_replay(api, &job->idem, out))
            return out->status < 400 ? GP_OK : GP_ECONFLICT;
        gp_api_error(&err, out);
        return rc;
    }
    if (model->diag.jitter > 0.0)
        atomic_fetch_add(&api->jitter_escalations, 1);
    if (fit_seconds)
        *fit_seconds = model->diag.fit_seconds;
    gp_cache_insert(api, &meta, model); /* the cache owns the model from here */
    json_t *res = gp_api_model_json(&meta, NULL, 0, &err);
    if (res == NULL) {
        gp_model_meta_free(&meta);
        gp_api_error(&err, out);
        return err.code;
    }
    char loc[160];
    snprintf(loc, sizeof loc, "/v1/models/%s/versions/%d", meta.name, meta.version);
    gp_model_meta_free(&meta);
    gp_json_respond(res, 201, out);
    if (out->status == 201)
        gp_response_header(out, "Location", loc);
    return out->status == 201 ? GP_OK : GP_ENOMEM;
}
