/* Fit requests: the fields of a request (JSON, or a CSV's query), checked in
 * order into a fit job (api/fit_job.h), each failure naming its field; what the
 * request leaves, less X and y, is the spec a stored job runs again. X and y
 * themselves are fit_xy.c's, a method's options fit_options.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

static const char *const fit_keys[] = {"name",  "method", "kernel", "likelihood", "noise",
                                       "options", "standardize", "seed", "async", "X", "y",
                                       "mean", "outputs", "feature_names", "target_names", "data",
                                       "distributed", "validation", "budget_s", NULL};
static const char *const mean_keys[] = {"type", NULL};
static const char *const noise_keys[] = {"variance", "fixed", "per_point", NULL};

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
                            "{\"fraction\": f}, or leave validation out (%d folds up to %d "
                            "rows, a hold-out of %g beyond)",
                            GP_API_VALIDATION_DEFAULT_FOLDS, GP_AUTO_HOLDOUT_MIN_ROWS,
                            GP_AUTO_HOLDOUT_FRACTION);
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

/* "name": a valid model name, not a reserved one. */
static int parse_name(json_t *obj, gp_fit_job *job, gp_error *err)
{
    json_t *e = json_object_get(obj, "name");
    if (e == NULL)
        return gp_error_set(err, GP_EINVAL, "name", "name is missing");
    if (!json_is_string(e) || !gp_api_valid_name(json_string_value(e)))
        return gp_error_set(err, GP_EINVAL, "name",
                            "name must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
    int rc = gp_api_refuse_reserved_name(json_string_value(e), err);
    if (rc != GP_OK)
        return rc;
    snprintf(job->name, sizeof job->name, "%s", json_string_value(e));
    return GP_OK;
}

/* "method" (exact when absent; "auto" a job by default, checked with its
 * stand-in's descriptor) and "budget_s", auto's alone. */
static int parse_method(json_t *obj, gp_fit_job *job, gp_error *err)
{
    int rc;
    json_t *e;
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
    return GP_OK;
}

/* The fields that say how to fit, in the order each may depend on the one
 * before: standardize, async, seed, options, likelihood, noise, mean,
 * distributed. */
static int parse_settings(gp_api *api, json_t *obj, gp_fit_job *job, gp_error *err)
{
    int rc;
    json_t *e;
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
    return GP_OK;
}

/* Once the rows are known: "validation" (auto's own rules first), auto's
 * budget and symmetry, and structured options that do not fit the data (a
 * dimension index >= d). */
static int settle(json_t *obj, gp_fit_job *job, gp_error *err)
{
    int rc;
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
    return gp_options_check_data(job->method, job->options, job->n_options, job->d, err);
}

/* "kernel" (the default for the inputs when absent) with its priors. */
static int parse_kernel(json_t *obj, gp_fit_job *job, gp_error *err)
{
    size_t kdim = gp_input_point_dim(&job->input);
    json_t *e = json_object_get(obj, "kernel");
    int rc = e ? gp_kernel_from_json(e, "kernel", kdim, job->method, &job->kernel, err)
               : gp_kernel_default(kdim, &job->kernel, err);
    if (rc == GP_OK)
        rc = parse_hyper(job, e, err);
    return rc;
}

/* obj without X and y, with what a stored job's run needs that the caller
 * did not send, as the job's spec. */
static int keep_spec(json_t *obj, gp_fit_job *job, gp_error *err)
{
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

int gp_fit_parse_fields(gp_api *api, json_t *obj, gp_fit_job *job, int have_data, gp_error *err)
{
    int rc = gp_json_known_keys(obj, fit_keys, NULL, err);
    if (rc == GP_OK)
        rc = parse_name(obj, job, err);
    if (rc == GP_OK)
        rc = parse_method(obj, job, err);
    if (rc == GP_OK)
        rc = parse_settings(api, obj, job, err);
    if (rc == GP_OK)
        rc = gp_fit_parse_xy(api, obj, job, have_data, err);
    if (rc == GP_OK)
        rc = settle(obj, job, err);
    if (rc == GP_OK)
        rc = parse_kernel(obj, job, err);
    if (rc == GP_OK)
        rc = keep_spec(obj, job, err);
    return rc;
}
