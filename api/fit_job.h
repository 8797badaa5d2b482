/* gpserve api: a fit job, what the fit files share (not the interface of
 * api.h or internal.h): the job a request becomes, and the steps of its
 * parsing that live apart.
 *   fit.c          the entry points: a request (JSON or CSV) or a stored job's spec into a job
 *   fit_parse.c    the request's fields, checked in order, into the job and its stored spec
 *   fit_xy.c       X and y: the request's, a CSV's, a stored job's or a data set's, with
 *                  their outputs, names, labels and per-point noise
 *   fit_csv.c      a CSV body, the other fields from the query
 *   fit_options.c  a method's "options" object
 *   fit_job.c      the job as the job runner and the store see it
 *   fit_run.c      the fit: validation before or after it, method auto's candidates
 *   fit_save.c     the new version written, and the 201
 *   fit_dataset.c  "data": a fit over a stored data set (declared in internal.h) */
#ifndef GP_API_FIT_JOB_H
#define GP_API_FIT_JOB_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api/internal.h"

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

/* The fields of a fit request in obj; X and y are taken from obj unless given
 * (have_data: CSV, a stored job's). On success obj loses X and y and becomes
 * the stored spec (job->spec). fit_parse.c */
int gp_fit_parse_fields(gp_api *api, json_t *obj, gp_fit_job *job, int have_data, gp_error *err);

/* The rows of the fit, after the method, likelihood, noise and options are
 * parsed: a data set's ("data"), X and y of obj (have_data 0), or those
 * already in the job (have_data 1); then the outputs, the columns' names,
 * the labels for the likelihood and noise.per_point checked against them.
 * fit_xy.c */
int gp_fit_parse_xy(gp_api *api, json_t *obj, gp_fit_job *job, int have_data, gp_error *err);

/* A CSV fit (req's body, the other fields from its query) into job: its
 * rows, then gp_fit_parse_fields. fit_csv.c */
int gp_fit_parse_csv(gp_api *api, const gp_request *req, gp_fit_job *job, gp_error *err);

#endif
