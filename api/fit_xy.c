/* Fit requests: the rows a fit takes (X and y of a JSON request, a CSV's
 * already parsed, a stored job's, or a data set's by "data"), the input
 * spec they are read with, and what is checked against them: the outputs,
 * the columns' names, the labels of the likelihood and noise.per_point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

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

int gp_fit_parse_xy(gp_api *api, json_t *obj, gp_fit_job *job, int have_data, gp_error *err)
{
    int rc = GP_OK;
    if (json_object_get(obj, "data"))
        rc = take_dataset(api, obj, job, err);
    else if (!have_data)
        rc = parse_data(api, obj, job, err);
    else
        rc = stored_input_spec(job, err);
    if (rc == GP_OK)
        rc = check_outputs(obj, job, err);
    if (rc == GP_OK)
        rc = check_names(obj, job, err);
    /* before the 202 of an async fit: labels that cannot be fitted never become a job */
    /* (a coregionalised fit's missing entries are NaN; core takes it gaussian only) */
    if (rc == GP_OK && !job_coreg(job) && job->data == NULL)
        rc = gp_likelihood_check_labels(job->likelihood, job->y, job->n, err);
    if (rc == GP_OK)
        rc = check_noise_pp(job, err);
    return rc;
}
