/* gpserve api: studies (docs/design/api.md, "Studies"), the declarations the
 * study files share: the study's configuration (study_config.c), its trials
 * as the engine reads them (study_trials.c), the engine's models
 * (study_models.c) and the suggestion (study_suggest.c). */
#ifndef GP_API_STUDY_H
#define GP_API_STUDY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api/internal.h"
#include "core/bo/space.h"

/* A study's name leaves room for its models' names, "study.<name>" and
 * "study.<name>.c<i>", within a model name's 64 characters. */
#define GP_STUDY_NAME_MAX 54
#define GP_STUDY_MODEL_PREFIX "study."
#define GP_STUDY_MAX_PARAMS 64
#define GP_STUDY_MAX_VALUES 64      /* values of one categorical parameter */
#define GP_STUDY_MAX_CONSTRAINTS 8  /* models .c0 .. .c7 */
_Static_assert(GP_API_STUDY_REFITS == 1 + GP_STUDY_MAX_CONSTRAINTS, "a refit per model");
#define GP_STUDY_METRIC_MAX GP_OUTPUT_NAME_MAX
#define GP_STUDY_MAX_COUNT 64       /* trials of one suggestion (GP_BO_MAX_Q) */
#define GP_STUDY_MAX_DIM 256        /* the encoded dimension (one per double or integer,
                                       one per value of a categorical) */
#define GP_STUDY_DEFAULT_TIMEOUT 3600.0
/* A field's name as made here (gp_error keeps what fits of it). */
#define GP_STUDY_FIELD_BUF 192
#define GP_STUDY_DEFAULT_BETA 2.0
/* The refit schedule (docs/design/api.md, "Studies"): a refit at n =
 * initial_design, then whenever n >= ceil(ratio * n_last) or n - n_last >= gap. */
#define GP_STUDY_REFIT_RATIO 1.2
#define GP_STUDY_REFIT_GAP 50

/* The parameter types (the order of core/bo/space.h's gp_bo_type). */
enum { GP_STUDY_DOUBLE = 0, GP_STUDY_INTEGER = 1, GP_STUDY_CATEGORICAL = 2 };
/* The acquisitions (the order of core/bo/acquisition.h's gp_acq_kind). */
enum { GP_STUDY_LOG_EI = 0, GP_STUDY_UCB, GP_STUDY_PI, GP_STUDY_THOMPSON, GP_STUDY_MAX_VARIANCE };

typedef struct gp_study_param {
    char name[GP_STUDY_METRIC_MAX + 1];
    int type;           /* GP_STUDY_* */
    double lo, hi;      /* double and integer */
    int log_scale;      /* "scale": "log" */
    size_t n_values;    /* categorical */
    char **values;      /* owned: n_values strings */
} gp_study_param;

typedef struct gp_study_constraint {
    char name[GP_STUDY_METRIC_MAX + 1];
    double max; /* feasible when the metric <= max */
} gp_study_constraint;

typedef struct gp_study_config {
    size_t n_params;
    gp_study_param *params; /* owned */
    char objective[GP_STUDY_METRIC_MAX + 1];
    int maximize;
    size_t n_constraints;
    gp_study_constraint constraints[GP_STUDY_MAX_CONSTRAINTS];
    int acquisition; /* GP_STUDY_LOG_EI ... */
    double beta;     /* UCB's */
    json_t *model;   /* owned: {"method", "kernel", ...} with the defaults filled in */
    uint64_t initial_design;
    double refit_ratio;
    uint64_t refit_gap;
    double trial_timeout_s;
    uint64_t seed;
    uint64_t n_starts, n_raw; /* the optimiser's ("optimizer": {"starts", "candidates"}) */
} gp_study_config;

/* The acquisition's name ("log_ei", ...). */
const char *gp_study_acq_name(int acquisition);
/* The encoded dimension D of the space (1 a double or integer, n_values a categorical). */
size_t gp_study_dim(const gp_study_config *c);

/* Parse a POST /v1/studies body (its "name" checked by the caller) into c
 * (zeroed by the caller; gp_study_config_free also on failure): every error
 * names its field ("parameters[2].bounds", "objective.goal", ...). The model
 * settings are checked as a fit of them would be (api parses a stand-in fit
 * request of D inputs; its errors are named "model.<field>"). */
int gp_study_config_parse(gp_api *api, json_t *body, gp_study_config *c, gp_error *err);
/* The canonical JSON of c (every default written), which the store keeps:
 * gp_study_config_parse reads it back to the same c. */
json_t *gp_study_config_json(const gp_study_config *c);
/* c from the stored text (GP_EDATA when it does not read back). */
int gp_study_config_read(gp_api *api, const char *text, gp_study_config *c, gp_error *err);
void gp_study_config_free(gp_study_config *c);
/* The metric names of c: the objective, then each constraint. */
size_t gp_study_n_metrics(const gp_study_config *c);
const char *gp_study_metric_name(const gp_study_config *c, size_t i);

/* A trial's parameters as values (value[i]: a double, an integer as a
 * double, a categorical's index) from a JSON object {"x0": v, ...}: every
 * parameter present and in its bounds (or one of its values), no other key;
 * errors name prefix.<param>. */
int gp_study_values_from_json(const gp_study_config *c, json_t *obj, const char *prefix,
                              double *value, gp_error *err);
/* The JSON object of values (the inverse). */
json_t *gp_study_values_json(const gp_study_config *c, const double *value);

/* The space of c as core/bo takes it. */
typedef struct gp_study_space {
    gp_bo_param params[GP_STUDY_MAX_PARAMS];
    gp_bo_space space;
} gp_study_space;
void gp_study_space_of(const gp_study_config *c, gp_study_space *out);

/* The names of a study's models (GP_NAME_MAX + 1 bytes): constraint -1 the
 * objective's "study.<name>", else "study.<name>.c<i>". */
void gp_study_model_name(const char *study, int constraint, char *out);

/* ---- the history the engine reads (study_trials.c) ---- */
typedef struct gp_study_data {
    size_t D;
    size_t n;          /* completed, feasible trials, in seq order */
    double *X;         /* D x n encoded */
    double *y;         /* n: the objective as reported */
    double *C;         /* n x n_constraints (column-major, a column a constraint) */
    int64_t *ids;      /* n: the trials' ids */
    size_t n_pending;  /* active trials */
    double *pending;   /* D x n_pending encoded */
    size_t n_completed, n_infeasible, n_active, n_expired;
} gp_study_data;
/* The history of trials[0..n) (a snapshot) under c: completed trials by seq. */
int gp_study_data_build(const gp_study_config *c, const struct gp_trial_row *trials, size_t n,
                        gp_study_data *out, gp_error *err);
void gp_study_data_free(gp_study_data *d);
/* A trial as JSON: {"id", "state", "parameters", "metrics"?, "reason"?,
 * "client_id", "seq"?, "created", "updated", "expires_at"?}. */
json_t *gp_study_trial_json(const struct gp_trial_row *t);

/* ---- the engine's models (study_models.c) ---- */
/* Whether completion count n (feasible) is due a refit after last (0: none):
 * the schedule of GP_STUDY_REFIT_*. */
int gp_study_refit_due(const gp_study_config *c, uint64_t n, uint64_t last);
/* The fit request JSON of model `constraint` (-1: the objective) on the
 * first n trials of d: {"name", "method", "kernel", ..., "X", "y"}. */
json_t *gp_study_fit_request(const char *study, const gp_study_config *c,
                             const gp_study_data *d, size_t n, int constraint, int async);
/* The refits of the study's models (the objective's, then each
 * constraint's) on every trial of d, as async fit jobs into jobs[0..]
 * (GP_API_STUDY_REFITS slots); returns how many were made (one that cannot
 * be is logged and left out). */
size_t gp_study_refit_jobs(gp_api *api, const char *study, const gp_study_config *c,
                          const gp_study_data *d, gp_fit_job **jobs);

typedef struct gp_study_models gp_study_models;
/* The models of study id at d->n trials (objective, then constraints),
 * brought up to date: the latest stored versions' copies, with the trials
 * after them observed in seq order; no version yet: an in-memory fit of
 * the same request. The entry is locked until gp_study_models_release. */
int gp_study_models_acquire(gp_api *api, int64_t id, const char *study,
                            const gp_study_config *c, const gp_study_data *d,
                            gp_study_models **out, const gp_model *const **models,
                            gp_error *err);
void gp_study_models_release(gp_study_models *m);
/* Drop the entry of study id (deleted). */
void gp_study_models_forget(gp_api *api, int64_t id);


#endif
