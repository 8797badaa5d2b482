/* Fit requests: the fit of a parsed job, with its validation report (the
 * folds before the final fit when asked, after it by default) or, for
 * method auto, its candidates validated first (api/auto.c). The new version
 * is written by fit_save.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/dataset_rows.h"
#include "api/fit_job.h"
#include "core/model/rows.h"

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
