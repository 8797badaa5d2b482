/* Fit requests: the fit job (api/fit_job.h) as the job runner, the store and a
 * sharded fit see it: what it asks, who asked, its budget of iterations, the
 * durable job it runs for, its cancel flag; and its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

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
