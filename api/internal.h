/* gpserve api: declarations shared by the api/ source files (not part of the
 * interface the server uses; that is api.h). */
#ifndef GP_API_INTERNAL_H
#define GP_API_INTERNAL_H

#include <jansson.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"
#include "core/model/auto.h"
#include "core/model/model.h"
#include "core/model/validation.h"
#include "store/store.h"

/* ---- the api object ---- */
typedef struct gp_cache_entry gp_cache_entry;
typedef struct gp_poisoned gp_poisoned;
typedef struct gp_row_slot gp_row_slot;
struct gp_study_engine;

struct gp_api {
    gp_api_config cfg;
    char *db_path; /* owned copy of cfg.db_path */
    gp_store *store;
    /* model cache */
    pthread_mutex_t cache_lock;
    gp_cache_entry **cache; /* cfg.model_cache slots, NULL when free */
    size_t cache_count;
    uint64_t cache_clock;
    /* stored versions found non-finite when loaded (poisoned.c), under cache_lock */
    gp_poisoned *poisoned; /* GP_POISONED_MAX slots */
    size_t n_poisoned;
    /* rows resolved from the store, kept while its generation stands (rows.c) */
    pthread_mutex_t rows_lock;
    gp_row_slot *rows; /* n_rows slots, a power of two */
    size_t n_rows;
    uint64_t rows_clock;
    /* the studies' models, per study (study_models.c) */
    struct gp_study_engine *studies;
    /* stats */
    _Atomic uint64_t variance_clamps;
    _Atomic uint64_t jitter_escalations;
};

/* The table of the studies' models (api->studies, study_models.c): made by
 * gp_api_open, freed by gp_api_close (destroy takes a NULL table too). */
int gp_study_engine_init(gp_api *api);
void gp_study_engine_destroy(gp_api *api);

/* ---- rows resolved from the store (rows.c) ----
 * The row of (name, version; 0 = the latest), brief (spec and info NULL) or
 * full, and a name's version list, as the store answers them; kept and
 * answered again without asking the store while its change generation
 * (gp_store_generation) stands. The same errors as gp_store_meta /
 * gp_store_versions. init: 0 or a GP_E* code. */
int gp_rows_init(gp_api *api);
void gp_rows_destroy(gp_api *api);
int gp_rows_meta(gp_api *api, const char *name, int version, int full, gp_model_meta *meta,
                 gp_error *err);
/* Every alias of name (gp_store_aliases), kept like the version list; *rows
 * malloc'ed (caller frees), NULL when none. */
int gp_rows_aliases(gp_api *api, const char *name, gp_alias_row **rows, size_t *count,
                    gp_error *err);
int gp_rows_versions(gp_api *api, const char *name, int **versions, size_t *count,
                     gp_error *err);
/* The GET /v1/models/{name} body of (name, version) rendered at generation
 * gen (models.c: text is head, NUL, tail, NUL, cut around n_train's value),
 * with the row it shows (brief); 1 when kept (text malloc'ed), else 0. */
int gp_rows_body(gp_api *api, const char *name, int version, uint64_t gen, gp_model_meta *meta,
                 char **text, size_t *head_len);
void gp_rows_body_keep(gp_api *api, const char *name, int version, uint64_t gen,
                       const gp_model_meta *meta, const char *text, size_t head_len,
                       size_t text_len);

/* ---- model cache (cache.c; its entries: cache.h) ---- */
/* Find or load the model row (name, version; 0 = latest) and return a
 * reference: *model stays valid until gp_cache_release(entry). The row's id,
 * version and obs_seq come from gp_rows_meta: the store is asked only when
 * its generation moved. */
int gp_cache_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                     const gp_model **model, gp_error *err);
void gp_cache_release(gp_api *api, gp_cache_entry *entry);
/* Insert a freshly fitted model (ownership passes to the cache, even on failure). */
void gp_cache_insert(gp_api *api, const gp_model_meta *meta, gp_model *model);
/* Evict every cached version of name. */
void gp_cache_evict_name(gp_api *api, const char *name);
void gp_cache_destroy(gp_api *api);
size_t gp_cache_size(gp_api *api);
/* Rows as the store keeps them (a job's request, an observation log entry,
 * which the cache replays): a state of two borrowed arrays, "X" (n x d) and
 * "y" (n x p), in arrays[2]; never gp_state_free it. */
void gp_api_xy_state(const double *X, const double *y, size_t n, size_t d, size_t p,
                     gp_named_array arrays[2], gp_state *st);
/* An observe's known per-point noise (n) as a third borrowed array "noise"
 * (n x 1) in slot, the element right after st's last (arrays[2]). */
void gp_api_noise_array(const double *noise, size_t n, gp_named_array *slot, gp_state *st);

/* ---- poisoned versions (poisoned.c) ----
 * A stored version whose arrays, or whose observation log replayed, hold a
 * non-finite number (written before this daemon checked what enters a
 * model) is not served: its requests answer GP_ENONFINITE, and it is listed
 * by /readyz, /metrics and its GET until deleted. The table remembers the
 * last GP_POISONED_MAX found, so a request for one does not load it again. */
#define GP_POISONED_MAX 64
/* GP_ENONFINITE with the reason recorded for the row meta, or GP_OK. */
int gp_poisoned_check(gp_api *api, const gp_model_meta *meta, gp_error *err);
/* Record meta as poisoned for the reason in err (its message). */
void gp_poisoned_add(gp_api *api, const gp_model_meta *meta, const gp_error *err);
/* Forget every version of name (deleted). */
void gp_poisoned_forget(gp_api *api, const char *name);
/* The poisoned versions as a JSON array of {"name", "version", "message"}. */
json_t *gp_poisoned_json(gp_api *api);
size_t gp_poisoned_count(gp_api *api);

/* "distributed" of a fit request (api/distributed.c): {"ranks": N}, N in
 * 1 .. cfg.max_ranks, for a fit whose "data" names a data set with a method
 * that streams its rows (descriptor streams_rows), run as a job ("async"
 * true or absent). *ranks = N, or an error naming the field. */
int gp_api_parse_distributed(gp_api *api, json_t *fit, json_t *v, const gp_method *m,
                             int *ranks, gp_error *err);
/* The wall clock in Unix seconds (datasets.c): the data sets' leases and
 * uploads' signs of life, compared across daemons as the jobs' leases are. */
double gp_api_wall_seconds(void);

/* ---- fit jobs (fit.c; options fit_options.c, the job fit_job.c and api/fit_job.h) ---- */
/* The "options" object of a fit request for method m, each option checked by
 * type and by gp_options_validate (OBJECT options: converted by
 * gp_json_to_value and checked by the method with d = 0). *opts (n entries)
 * is freed by gp_api_free_options, also on failure. */
int gp_api_parse_options(const gp_method *m, json_t *v, gp_option_value **opts, size_t *n,
                         gp_error *err);
void gp_api_free_options(gp_option_value *opts, size_t n);
/* The validated request of a fit job (borrowed): spec JSON and X (n x d),
 * y (n x p). n may be 0 (an empty fit of a method that starts empty). */
int gp_fit_job_request(const gp_fit_job *job, const char **spec, const double **X,
                       const double **y, size_t *n, size_t *d, size_t *p);
/* The data set a fit reads (its id, pinned when the request was parsed), or
 * 0 for a fit of X and y: a durable job records it (jobs.dataset_id). */
int64_t gp_fit_job_dataset_id(const gp_fit_job *job);
/* A fit job rebuilt from a stored request (X and y are taken, even on failure). */
int gp_fit_job_from_request(gp_api *api, const char *spec, double *X, double *y, size_t n,
                            size_t d, size_t p, gp_fit_job **out, gp_error *err);


/* ---- a fit over a data set (fit_dataset.c) ---- */
typedef struct gp_fit_data gp_fit_data;
struct gp_dataset_rows;
/* obj's "data" for a fit by method m: its shape (400 naming data...), the
 * data set and columns it names (404 data.dataset, 422 data.target or
 * data.columns[i]), X or y beside it (400 naming data), and a method that
 * needs its rows in memory (422 unsupported naming data.dataset). pinned:
 * the data set's id a stored job was accepted with (0: the ready one now). */
int gp_fit_data_parse(gp_api *api, json_t *obj, const gp_method *m, int64_t pinned,
                      gp_fit_data **out, gp_error *err);
size_t gp_fit_data_rows(const gp_fit_data *fd);   /* rows the fit takes */
size_t gp_fit_data_inputs(const gp_fit_data *fd); /* input columns */
int64_t gp_fit_data_id(const gp_fit_data *fd);    /* the data set's id, pinned */
/* The reader of a run (api/dataset_rows.h) over the shard [first, first +
 * count) of the fit's rows (0, SIZE_MAX: every row; a process of a sharded
 * fit its own range), holding a lease labelled label. */
int gp_fit_data_open(gp_api *api, const gp_fit_data *fd, size_t first, size_t count,
                     const char *label, struct gp_dataset_rows **rows, gp_error *err);
/* The data set of a fit job (NULL: a fit of X and y). */
const gp_fit_data *gp_fit_job_data(const gp_fit_job *job);
/* What the version records: {"name", "id", "sha256", "target", "columns"
 * (null: every column but the target), "rows", "dataset_rows", "sample"?}. */
json_t *gp_fit_data_json(const gp_fit_data *fd);
void gp_fit_data_free(gp_fit_data *fd);

/* ---- a growing output buffer and a small JSON writer (jsonw.c) ---- */
typedef struct gp_buf {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: the content is incomplete */
} gp_buf;

void gp_buf_init(gp_buf *b);
void gp_buf_free(gp_buf *b);
int gp_buf_reserve(gp_buf *b, size_t extra);
void gp_buf_put(gp_buf *b, const char *s, size_t n);
void gp_buf_puts(gp_buf *b, const char *s);
void gp_buf_printf(gp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal (quoted and escaped). */
void gp_buf_json_string(gp_buf *b, const char *s);
/* A number with 17 significant digits ("null" for NaN/Inf, which never occur
 * in a valid response). */
void gp_buf_json_number(gp_buf *b, double v);
/* [v0, v1, ...] with stride between consecutive values. */
void gp_buf_json_array(gp_buf *b, const double *v, size_t n, size_t stride);
/* A JSON answer whose body is a copy of text (out of memory: the catalogue's 500). */
void gp_api_respond_text(gp_response *out, int status, const char *text);
/* 200 with ready_body when the store answers, else 503 not_ready. */
void gp_api_respond_ready(gp_api *api, gp_response *out, const char *ready_body);
/* Shortest "%.*g" text of v that reads back as v (e.g. "0.05"). */
void gp_format_shortest(double v, char *out, size_t len);

/* ---- jansson helpers (json.c) ---- */
#define GP_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

/* Parse a request body as a JSON object (malformed_json / invalid_argument). */
int gp_json_parse_body(const gp_request *req, json_t **out, gp_error *err);
/* Content type check: 1 JSON, 2 CSV, 0 other (NULL counts as JSON). */
int gp_media_type(const char *content_type);
/* Reject keys of obj not in the NULL-terminated list (invalid_argument,
 * field prefix + key). */
int gp_json_known_keys(json_t *obj, const char *const *keys, const char *prefix, gp_error *err);
/* Typed getters: a missing key leaves *out untouched and returns 0 (optional)
 * unless required. field is the name used in errors. */
int gp_json_get_bool(json_t *v, const char *field, int *out, gp_error *err);
int gp_json_get_number(json_t *v, const char *field, double *out, gp_error *err);
int gp_json_get_positive(json_t *v, const char *field, double *out, gp_error *err);
/* 2^53: the largest bound of gp_json_get_uint (seeds, counts): every integer
 * up to it is exact in a JSON number (a double). */
#define GP_JSON_UINT_MAX 9007199254740992.0
int gp_json_get_uint(json_t *v, const char *field, double max, uint64_t *out, gp_error *err);
/* A numeric matrix: rows of d numbers, or a flat list (d = 1). X is
 * column-major n x d (malloc'ed). max_rows: 413 above it. */
int gp_json_matrix(json_t *v, const char *field, size_t max_rows, double **X, size_t *n,
                   size_t *d, gp_error *err);
/* Inputs of a model of spec s (core/model/inputs.h) as JSON rows of that
 * kind ({"gaussian": ...}, {"samples": ...}, {"messages": [...]}), encoded
 * into X (column-major n x gp_input_width(s), malloc'ed). */
int gp_json_inputs(json_t *v, const gp_input_spec *s, const char *field, size_t max_rows,
                   double **X, size_t *n, gp_error *err);
/* Points (gp_json_matrix) or, for other kinds, gp_json_inputs; *d gets the
 * encoded width. */
int gp_json_model_inputs(json_t *v, const gp_input_spec *s, const char *field, size_t max_rows,
                         double **y, size_t *n, size_t *d, gp_error *err);
/* Targets: a list of numbers (p = 1) or, when several is set, rows of p
 * numbers (column-major n x p); rows given to a one-output method are 422. */
int gp_json_targets(json_t *v, const char *field, size_t max_rows, int several, double **y,
                    size_t *n, size_t *p, gp_error *err);
/* ---- several outputs (targets.c, docs/design/multioutput.md) ---- */
#define GP_OUTPUT_NAME_MAX 64
/* y of a coregionalised fit or observe: a list (p = 1) or rows of p values
 * (several: rows allowed), where null is a missing entry (NaN). Rows of
 * another length than y[0] are 422 naming y[i], p above
 * GP_COREG_MAX_OUTPUTS 422 naming y. */
int gp_json_targets_missing(json_t *v, size_t max_rows, int several, double **y, size_t *n,
                            size_t *p, gp_error *err);
/* The first null entry of y (a fit or observe without coregionalisation):
 * 422 naming y[i] or y[i][j], saying missing values need the option. */
int gp_json_targets_null(json_t *v, gp_error *err);
/* That refusal, naming field. */
int gp_api_missing_refused(const char *field, gp_error *err);
/* y (n x p, NaN missing) against the rules of docs/design/multioutput.md:
 * without coreg no entry may be missing (y[i] / y[i][j]); a row with every
 * output missing is 422 naming y[i]; unless rows_only (an observe), an
 * output never observed is 422 naming y (and the output, names may be NULL). */
int gp_api_check_targets(const double *y, size_t n, size_t p, int coreg, int rows_only,
                         json_t *names, gp_error *err);
/* The body's "outputs" (v; NULL: absent -> y0, y1, ...) for p outputs:
 * p unique non-empty strings, else 400 naming outputs or outputs[i]. *out
 * a new reference. */
int gp_api_parse_outputs(json_t *v, size_t p, json_t **out, gp_error *err);
/* The names kept in a model's info JSON (its "outputs"), or the defaults,
 * as JSON text (malloc'ed; NULL when out of memory). */
char *gp_api_outputs_text(const char *info, size_t p);
/* Name i of the list `names` (the field's name, e.g. "outputs"): a non-empty
 * string of at most GP_OUTPUT_NAME_MAX bytes, no control character, unlike
 * the names before it; GP_EINVAL naming "field[i]" otherwise. */
int gp_api_check_name_at(json_t *names, const char *field, size_t i, gp_error *err);
/* Whether model's n_outputs are named outputs (several, and not a softmax
 * model's classes, which are the column indices 0..C-1 and carry no names). */
int gp_api_named_outputs(const gp_model *model);
/* Columns of y a fit or an observe gives model: its outputs, or one column
 * of labels for a softmax model (whose n_outputs are its classes). */
size_t gp_api_target_columns(const gp_model *model);

/* One number of the data (X, y): 422 invalid_data naming field for anything
 * else (a string such as "NaN", null, an array, a non-finite value). */
int gp_json_cell(json_t *v, const char *field, double *out, gp_error *err);
/* A numeric vector of n entries. */
int gp_json_vector(json_t *v, const char *field, size_t max_len, double **y, size_t *n,
                   gp_error *err);
/* snprintf for field names (truncation is acceptable: fields are bounded). */
void gp_fieldf(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A structured option value (GP_OPTION_OBJECT) as core reads it: the JSON
 * value v converted to a gp_value tree (*out malloc'ed, caller
 * gp_value_free). Hostile input is bounded: nesting deeper than
 * GP_VALUE_MAX_DEPTH levels (v itself is level 1) or more than
 * GP_VALUE_MAX_NODES values in all is 400 invalid_argument naming field, as
 * is a number that does not fit a double (naming its member, e.g.
 * "options.symmetry.generators[0].period"). */
#define GP_VALUE_MAX_DEPTH 16
#define GP_VALUE_MAX_NODES 10000
int gp_json_to_value(json_t *v, const char *field, gp_value **out, gp_error *err);
/* Respond with a jansson value (takes the reference). */
void gp_json_respond(json_t *v, int status, gp_response *out);
/* json_real that never fails on NaN/Inf (those become null). */
json_t *gp_json_real(double v);

/* ---- the fitted model's metadata (model_info.c) ---- */
/* The model JSON a fit stores with its version: kernel (with its priors,
 * bounds, held parameters), noise, hyperparameters, diagnostics, warnings,
 * method_info, mean, standardisation (new reference; NULL when out of
 * memory). */
json_t *gp_api_model_info_json(const gp_model *m);

/* ---- a fit's validation report (validation.c; docs/design/api.md, "Validation") ----
 * Absent from a request: GP_API_VALIDATION_DEFAULT_FOLDS folds when the fit
 * of exact, sgpr, ssgp, svgp or pls holds GP_API_VALIDATION_DEFAULT_MIN_ROWS
 * to _MAX_ROWS rows in memory and the labels allow the split, else none;
 * false: none. */
#define GP_API_VALIDATION_DEFAULT_FOLDS 5
#define GP_API_VALIDATION_DEFAULT_MIN_ROWS 10
#define GP_API_VALIDATION_DEFAULT_MAX_ROWS 500
typedef struct gp_api_validation {
    int on;    /* 1: validate; 0: not; -1: the default, decided by gp_api_settle_validation */
    int asked; /* the request gave it (its errors are the caller's) */
    gp_validation_spec spec;
    json_t *report; /* after the run (owned) */
} gp_api_validation;
/* The request's "validation" (v, NULL when absent); the seed defaults to the fit's. */
int gp_api_parse_validation(json_t *v, uint64_t fit_seed, gp_api_validation *out, gp_error *err);
/* Once the rows are known: the default decided, an asked validation
 * checked against them (422 naming "validation" for a data set's streamed
 * rows or a distributed fit; 400 naming validation.folds or .fraction when
 * they cannot split n rows). */
int gp_api_settle_validation(gp_api_validation *v, const gp_method *m, gp_likelihood lik,
                             const double *y, size_t n, int streamed, int distributed,
                             gp_error *err);
/* Validate (the fits of v->spec, progress counting them and one final fit)
 * and keep the report's JSON in v->report. */
int gp_api_run_validation(const gp_method *m, const gp_fit_request *fr, gp_api_validation *v,
                          gp_error *err);
json_t *gp_api_validation_json(const gp_validation_report *r, int asked);

/* ---- method "auto" (auto.c; docs/design/api.md, "Auto") ---- */
#define GP_API_AUTO_MAX_BUDGET_S 86400.0
#define GP_API_AUTO_PROGRESS_MAX 1000 /* the job's progress: per-mille of the stages */
typedef struct gp_api_auto {
    int on;              /* "method": "auto" */
    double budget_s;     /* "budget_s" (GP_AUTO_DEFAULT_BUDGET_S when absent) */
    int symmetry;        /* options.symmetry given: hkd is a candidate */
    json_t *symmetry_json; /* borrowed from the spec while parsing; kept (owned) */
    gp_option_value *hkd_options; /* options.symmetry parsed for hkd (owned) */
    size_t n_hkd_options;
    json_t *leaderboard;  /* the entries so far (owned) */
    char *progress_text;  /* the leaderboard's compact JSON for job progress (owned) */
    int default_validation; /* the request gave no "validation": auto's own (folds or hold-out) */
    double seconds;       /* the whole job: candidates and final fit (gp_api_auto_final) */
    const char *final_fit; /* how the version was fitted (static text) */
} gp_api_auto;
/* A candidate's fits' progress as the job's: stage of stages (the
 * candidates, then the final fit) in per-mille; stops a candidate running
 * past stop_at seconds (budget_s less the final fit reserved) once another
 * is done, and the final fit past budget_s. */
typedef struct gp_api_auto_stage {
    gp_progress_fn fn;
    void *ctx;
    size_t stage, stages;
    double start, stop_at; /* monotonic seconds; stop_at counted from start */
    int may_stop, over_budget;
} gp_api_auto_stage;
typedef struct gp_api_auto_result {
    const gp_method *winner;
    json_t *report;      /* the winner's validation report (owned) */
    int hkd_options;     /* the winner takes gp_api_auto.hkd_options */
    double seconds;      /* the candidates' validations */
    gp_model *fallback;  /* the winner's last validation model (owned; gp_api_auto_final) */
    double final_estimate; /* the winner's final fit, estimated from its validation */
    int skip_final;      /* that estimate is past budget_s: the fallback without trying */
    gp_api_auto_stage progress; /* pass to gp_api_auto_progress for the final fit */
} gp_api_auto_result;
/* Frees the leaderboard and texts (not hkd_options: the fit job does). */
void gp_api_auto_free(gp_api_auto *a);
/* "budget_s": > 0 and <= GP_API_AUTO_MAX_BUDGET_S seconds (400 naming it). */
int gp_api_auto_parse_budget(json_t *v, gp_api_auto *a, gp_error *err);
void gp_api_auto_problem(const gp_api_auto *a, size_t n, size_t d, gp_likelihood lik,
                         size_t outputs, const gp_validation_spec *spec, gp_auto_problem *p);
/* Before the 202: a candidate exists and one fits the budget (422 naming
 * method or budget_s). */
int gp_api_auto_check(const gp_api_auto *a, size_t n, size_t d, gp_likelihood lik,
                      size_t outputs, const gp_validation_spec *spec, gp_error *err);
/* Validate the candidates on base's rows (base: the request, kernel and
 * cancel flag; its options are the candidates' own); a->leaderboard and
 * a->progress_text grow as they end. GP_ECANCELLED on the caller's cancel. */
int gp_api_auto_run(gp_api_auto *a, const gp_fit_request *base, const gp_validation_spec *spec,
                    gp_progress_fn progress, void *ctx, gp_api_auto_result *res, gp_error *err);
/* The final fit's progress (ctx: &res.progress): stops it past budget_s. */
int gp_api_auto_progress(void *ctx, int iteration, int max_iterations, double objective);
/* The request gave no "validation": auto's default for n rows in *spec
 * (core/model/auto.h: folds up to GP_AUTO_HOLDOUT_MIN_ROWS, a hold-out
 * beyond), noted in a for method_info. */
void gp_api_auto_default_validation(gp_api_auto *a, size_t n, gp_validation_spec *spec);
/* After the final fit (its rc; *model its model; not tried, rc
 * GP_ECANCELLED, when res->skip_final): stopped at budget_s, the winner's
 * validation model (res->fallback) becomes *model and rc GP_OK;
 * a->seconds and a->final_fit say which. Frees what res still owns. */
int gp_api_auto_final(gp_api_auto *a, gp_api_auto_result *res, int rc, gp_model **model,
                      gp_error *err);
/* method_info.auto's keys of the run (o: that object): the validation, the
 * seconds against the budget, the final fit. */
void gp_api_auto_info(json_t *o, const gp_api_auto *a);

/* A coregionalised model's "coregionalization" block (coreg_json.c): type,
 * rank, latents, per latent its kernel, W, kappa and B (working units), the
 * outputs' correlation at distance 0 (sum of the B_q at unit diagonal), the
 * noise per output in original units, n_observed, kronecker (new
 * reference; NULL when out of memory). */
json_t *gp_api_coreg_json(const gp_model *m);

/* ---- kernels (kernel_json.c) ---- */
/* Parse a kernel JSON object for input_dim columns; field prefix e.g. "kernel".
 * method may be NULL (no restriction on kernel types). */
int gp_kernel_from_json(json_t *v, const char *prefix, size_t input_dim, const gp_method *method,
                        gp_kernel **out, gp_error *err);
/* The kernel as JSON (the shape gp_kernel_from_json accepts). */
json_t *gp_kernel_to_json(const gp_kernel *k);
/* The priors, bounds and single held parameters stated in the kernel JSON v
 * of the parsed kernel k (kernel_priors.c): *out NULL when it states none.
 * 400 naming the field for a hyperparameter k does not have, lo >= hi, ... */
int gp_kernel_spec_from_json(json_t *v, const char *prefix, const gp_kernel *k,
                             gp_hyper_spec **out, gp_error *err);
/* gp_kernel_to_json with the spec's priors, bounds and held lengthscales
 * (s may be NULL). */
json_t *gp_kernel_to_json_spec(const gp_kernel *k, const gp_hyper_spec *s);
/* Default: {"type": "rbf", "ard": true}. */
int gp_kernel_default(size_t input_dim, gp_kernel **out, gp_error *err);

/* ---- CSV (csv.c) ---- */
/* ---- decimal numbers (decimal.c) ---- */
/* s[0..len) (not NUL-terminated) as a decimal number, [+-] digits [. digits]
 * [e [+-] digits] with a digit before or after the point, into *v exactly as
 * strtod reads it (+-inf when it overflows): 0, or -1 for any other text
 * (hexadecimal, inf, nan, blanks, anything trailing). */
int gp_decimal_parse(const char *s, size_t len, double *v);

/* Parse a CSV body (RFC 4180): header row, then rows of numbers. target:
 * column name or 0-based index, NULL for the last column. X column-major
 * n x (cols-1). More than max_rows rows, or more than max_inputs input
 * columns, is GP_ETOOBIG before anything of that size is allocated. */
int gp_csv_parse(const char *body, size_t len, const char *target, size_t max_rows,
                 size_t max_inputs, double **X, double **y, size_t *n, size_t *d, gp_error *err);
/* The same where the column named noise_column (NULL: none; by name, not the
 * target) holds the rows' known noise variances, into *noise (n; the caller
 * frees it): that column is not an input. A bad cell there names
 * noise.per_point[row]; an unknown name is GP_EINVAL naming noise_column. */
int gp_csv_parse_noise(const char *body, size_t len, const char *target,
                       const char *noise_column, size_t max_rows, size_t max_inputs, double **X,
                       double **y, double **noise, size_t *n, size_t *d, gp_error *err);

/* A CSV fit's choice of columns: target (one, by name or index; NULL: the
 * last column) or targets (several, "A,B,C" by header name: an empty cell
 * of theirs is a missing entry, NaN), and the noise column (NULL: none). */
typedef struct gp_csv_request {
    const char *target, *targets, *noise_column;
    size_t max_rows, max_inputs;
    /* JSON lists (NULL: not wanted) that get the input columns' names, in
     * X's order, and the target columns', in y's */
    json_t *feature_names, *target_names;
} gp_csv_request;
/* gp_csv_parse_noise for either: y column-major n x p; names (a JSON array,
 * may be NULL without targets) gets the targets' names. An unknown or
 * repeated name of targets is GP_EINVAL naming targets. */
int gp_csv_parse_request(const char *body, size_t len, const gp_csv_request *q, double **X,
                         double **y, double **noise, size_t *n, size_t *d, size_t *p,
                         json_t *names, gp_error *err);

/* A text/csv predict, sample or observe body: a header of names, then rows
 * of numbers, as a JSON list of records ({"name": value}); errors name
 * X[i][j] and the column, as a fit's CSV. */
int gp_csv_records(const char *body, size_t len, size_t max_rows, size_t max_cols,
                   json_t **rows, gp_error *err);

/* ---- named columns (columns.c) ---- */
/* Named rows of a body (columns.c): rows the body's "rows" (records, or a
 * text/csv body's rows; NULL: X is positional), features the model's
 * feature_names (NULL: fitted without), targets names a row may also carry
 * (an observe's targets; NULL otherwise). */
typedef struct gp_x_names {
    json_t *rows;
    const json_t *features, *targets;
} gp_x_names;
/* A list of want distinct names (non-empty strings of at most
 * GP_OUTPUT_NAME_MAX bytes, no control character), named field in errors. */
int gp_api_check_names(json_t *v, const char *field, size_t want, gp_error *err);
/* The list key ("feature_names", "target_names") of a version's info text
 * (a new reference), or NULL. */
json_t *gp_api_info_names(const char *info, const char *key);
/* nm->rows matched by name to nm->features into X (column-major m x d):
 * a missing, unknown (not a feature nor a target) or non-numeric column is
 * 422 naming rows[i].column; a model without names is 422 naming rows. */
int gp_api_records(const gp_x_names *nm, const char *name, size_t max_rows, double **X,
                   size_t *m, size_t *d, gp_error *err);
/* The targets' values of each record (column-major n x p; p = the list's). */
int gp_api_record_targets(json_t *rows, const json_t *targets, double **y, size_t *p,
                          gp_error *err);

/* ---- errors (errors.c) ---- */
/* The GP_E* code of a catalogue name ("invalid_argument" -> GP_EINVAL). */
int gp_api_code_from_name(const char *name);
/* {"code", "message", "field"?} as a jansson object. */
json_t *gp_api_error_json(const gp_error *err);
/* Hand the buffer to a response (status, application/json); on allocation
 * failure the response becomes the catalogue's 500. */
void gp_buf_respond(gp_buf *b, int status, gp_response *out);
/* A model name as a route takes it (gp_api_valid_name), else 400 naming "name". */
int gp_api_check_name(const char *name, gp_error *err);
/* 1 for a name a /v1/models/... route spells literally ("import"): a model
 * so named would be shadowed; a fit or an import refuses it (422 naming
 * "name", gp_api_refuse_reserved_name). */
int gp_api_reserved_name(const char *name);
int gp_api_refuse_reserved_name(const char *name, gp_error *err);

/* ---- model metadata (models.c) ---- */
/* The model JSON of a store row: name, version, method, status, n_train,
 * input_dim, the info fields, created_at (and versions when given). */
json_t *gp_api_model_json(const gp_model_meta *meta, const int *versions, size_t n_versions,
                          gp_error *err);

/* ---- the body of a model route (body.c) ---- */
/* 415 unless the request's body is JSON. */
int gp_api_check_json(const gp_request *req, gp_error *err);
/* The body's optional "version": 0 when absent, an integer >= 1, or an
 * alias of model name (a string), resolved here to its version (alias
 * receives it, GP_ALIAS_MAX + 1 bytes; "" when none was given). An unknown
 * alias: 404 field "version". */
int gp_api_get_version(gp_api *api, const char *name, json_t *obj, int *version, char *alias,
                       gp_error *err);
/* What a version field or {v} takes (the message of a 400 "version"). */
#define GP_API_VERSION_RULE                                                                   \
    "a version must be an integer >= 1 or an alias ([A-Za-z][A-Za-z0-9_.-]{0,63})"
/* The aliases of model name as a JSON object {"alias": version, ...}
 * (aliases.c), for the model JSON; NULL on failure (err says why). */
json_t *gp_api_aliases_object(gp_api *api, const char *name, gp_error *err);
/* X of a predict, sample or observe body, in two steps: rows of numbers are
 * parsed before the model is looked up (a malformed X is a 400 whatever the
 * model), rows that are objects (distributional inputs) once the model's
 * input spec is known (*X NULL after the early step). */
int gp_api_parse_x_early(gp_api *api, json_t *Xj, double **X, size_t *m, size_t *d,
                         gp_error *err);
int gp_api_parse_x_late(gp_api *api, const gp_model *model, const char *name, json_t *Xj,
                        const gp_x_names *nm, double **X, size_t *m, size_t *d, gp_error *err);
/* The body's X, or its "rows" (records): both is 400 naming rows, neither
 * 400 naming X (what: the points' role, for the message). */
int gp_api_x_or_rows(json_t *obj, const char *what, json_t **Xj, json_t **rows,
                     gp_error *err);
/* What predict and sample bodies share: a JSON object of known keys, an
 * optional "version" and "include_noise" (*include_noise keeps its default
 * when absent). */
int gp_api_parse_point_request(gp_api *api, const char *name, const gp_request *req,
                               const char *const *keys, json_t **obj, int *version, char *alias,
                               int *include_noise, gp_error *err);
/* A predict, sample or observe body as a JSON object: the JSON body, or a
 * text/csv body's rows as "rows" with the query's parameters beside them
 * (415 for other media types). */
int gp_api_body_object(gp_api *api, const gp_request *req, json_t **obj, gp_error *err);
/* {"name": name, "version": version (the answer goes on). */
void gp_api_write_head(gp_buf *b, const char *name, int version);
/* ,"alias": alias when the request named the version by an alias (else nothing). */
void gp_api_write_alias(gp_buf *b, const char *alias);

/* ---- point calls (predict.c): one answer writer per protocol ----
 * A predict call is parsed on the request thread and answered in a batch
 * with others of the same model (server/batcher.c); v1 predict and the Open
 * Inference Protocol's infer (oip.c) are point calls alike, and differ only
 * in their writer: what they check against the model, and how they write the
 * answer. */
typedef struct gp_point_answer {
    const gp_model *model;
    const char *name;
    int version;                 /* the version served */
    int gate;                    /* the model's method has an uncertainty gate */
    const gp_online_status *ost; /* its status (zero when no gate) */
    const gp_prediction *pr;     /* unset in warm-up (ost->warmup) */
    size_t m;                    /* points */
    size_t K;                    /* components asked (0: none) */
    int parts;                   /* they are an additive model's parts */
    const char *outputs;         /* the outputs' names, JSON text (p > 1; else NULL) */
} gp_point_answer;

typedef struct gp_point_writer {
    /* The checks of call c that need its model (outputs: its outputs' names
     * as JSON text, NULL for one output; warmup: a gate model in warm-up; a
     * writer that cannot answer then fails here). */
    int (*prepare)(gp_api *api, gp_point_call *c, const gp_model *model, const char *name,
                   const char *outputs, int warmup, gp_error *err);
    /* The 200 answer's body. */
    void (*write)(gp_buf *b, const gp_point_call *c, const gp_point_answer *a);
    /* Free the protocol's part of a call (may be NULL). */
    void (*free)(void *proto);
} gp_point_writer;

/* A predict call of points already parsed, answered by writer w: X
 * (column-major m x d) and proto (w's part of the call) are taken, also on
 * failure. */
int gp_point_call_from_points(const char *name, int version, double *X, size_t m, size_t d,
                              int include_noise, const gp_point_writer *w, void *proto,
                              gp_point_call **out, gp_error *err);
/* The protocol's part of a call made by gp_point_call_from_points. */
void *gp_point_call_proto(const gp_point_call *c);

/* ---- sample (sample.c) ---- */
/* A sample request's options. */
typedef struct gp_sample_args {
    int include_noise, observations;
    uint64_t n_samples, seed;
} gp_sample_args;
/* A sample call between its parse and its answer (owned fields: free with
 * gp_sample_call_free). */
typedef struct gp_sample_call {
    json_t *obj;    /* the parsed body; Xj points into it */
    json_t *Xj;
    json_t *rows;   /* named rows instead of X (into obj), or NULL */
    double *X;      /* column-major m x d, original units (parsed early, or late for objects) */
    size_t m, d;
    gp_sample_args a;
    double *S;      /* the draws (and the observation draws after them) */
    char alias[GP_ALIAS_MAX + 1]; /* the alias the body named the version by, or "" */
} gp_sample_call;
/* Parse a sample body into c (zeroed by the caller) and *version: the same
 * checks, in the same order, as the answer alone makes before it looks the
 * model up. */
int gp_sample_parse(gp_api *api, const char *name, const gp_request *req, gp_sample_call *c,
                    int *version, gp_error *err);
/* Answer calls[0..n) of model name and version into res[0..n): one look-up,
 * each call's checks, one gp_model_sample_batch for those that pass (each
 * answered exactly as alone). The calls stay the caller's to free. */
void gp_sample_run(gp_api *api, const char *name, int version, gp_sample_call **calls,
                   size_t n, gp_response *res);
void gp_sample_call_free(gp_sample_call *c);

/* SHA-256 (api/sha256.c, nettle's): init, update with any bytes, then the
 * digest as 64 lowercase hex digits (which also resets it). */
typedef struct gp_sha256 {
    struct sha256_ctx ctx;
} gp_sha256;
void gp_sha256_init(gp_sha256 *s);
void gp_sha256_update(gp_sha256 *s, const void *data, size_t n);
void gp_sha256_hex(gp_sha256 *s, char out[65]);

/* A write's Idempotency-Key (api/idempotency.c, docs/design/api.md
 * "Idempotent writes"): the key, what it is scoped to (the route and the
 * model name: "fit:NAME", "observe:NAME") and the request's fingerprint. */
#define GP_IDEM_HEADER "Idempotency-Key"
typedef struct gp_api_idem {
    int present; /* 0: the request has no key (nothing below is set) */
    char key[GP_IDEM_KEY_MAX + 1];
    char scope[GP_IDEM_SCOPE_MAX + 1];
    char fingerprint[65];
} gp_api_idem;

/* Read req's key: none -> present 0; 1..GP_IDEM_KEY_MAX visible ASCII
 * characters (a structured-field string "..." is taken without its quotes)
 * -> present 1 with scope "<route>:<name>" and the SHA-256 of the content
 * type, query parameters and body; anything else -> GP_EINVAL naming the
 * header. */
int gp_api_idem_parse(const gp_request *req, const char *route, const char *name,
                      gp_api_idem *k, gp_error *err);
/* The row a keyed write records: answer status and body (NULL with
 * make_body for a save, whose answer is made from the new row). */
gp_idem_put gp_api_idem_put(const gp_api_idem *k, int status, const char *body,
                            gp_job_result_fn make_body, void *ctx);
/* When the key's answer is recorded: 1 and out is that answer again (with
 * Idempotent-Replayed: true), or 409 conflict when it was recorded for a
 * different request, or the store's error; 0 (out untouched) when none is. */
int gp_api_idem_replay(gp_api *api, const gp_api_idem *k, gp_response *out);
/* The key of a parsed fit (present 0 for none). */
const gp_api_idem *gp_fit_job_idem(const gp_fit_job *job);
/* The fit response's body for a saved row (the text a keyed fit records). */
char *gp_api_fit_body(const gp_model_meta *meta, void *ctx);

/* ---- the audit trail (audit.c) ----
 * Who asked for a write, copied from its request (a fit keeps it until its
 * save, on a fit worker). present 0: nothing is recorded. */
typedef struct gp_api_origin {
    int present;
    int has_key;
    char key_name[GP_NAME_MAX + 1];
    char route[GP_AUDIT_ROUTE_MAX + 1];
    char request_id[GP_AUDIT_REQUEST_ID_MAX + 1];
} gp_api_origin;
void gp_api_origin_of(const gp_request *req, gp_api_origin *o);
/* buf filled as the audit row of o's write (NULL when o is not present). */
const gp_audit_put *gp_api_audit_put(const gp_api_origin *o, gp_audit_put *buf,
                                     const char *model, int version, int status);
/* The route of a fit, recorded for a durable job's outcome. */
#define GP_API_FIT_ROUTE "POST /v1/models"
/* Who asked for the fit (present 0 for a job read back from the store). */
const gp_api_origin *gp_fit_job_origin(const gp_fit_job *job);
/* An RFC 3339 date-time as the store's UTC text; GP_EINVAL when it is not one. */
int gp_api_rfc3339_utc(const char *text, char out[GP_TIME_LEN]);

/* ---- the portable model file (model_file.c, docs/design/model-file.md) ---- */
#define GP_MODEL_FILE_FORMAT "gpserve-model"
#define GP_MODEL_FILE_VERSION 1
/* the export's Content-Type (an import also takes application/octet-stream) */
#define GP_MODEL_FILE_MEDIA_TYPE "application/vnd.gpserve.model"

/* What the exporting daemon's model holds beside its row: the rows it was
 * fitted on plus those observed since, and its observation log position. */
typedef struct gp_model_file_source {
    size_t n_train, input_dim;
    uint64_t obs_seq;
} gp_model_file_source;

/* A file read back and checked. */
typedef struct gp_model_file {
    const gp_method *method;           /* of this build's registry */
    char source_name[GP_NAME_MAX + 1]; /* the exporting model's name */
    char *spec;                        /* owned: the fit request as stored (JSON text) */
    char *info;                        /* owned: the model JSON's fitted metadata */
    size_t n_train, input_dim;
    uint64_t obs_seq;                  /* the source's observation log position (0: none) */
    gp_state state;                    /* the arrays, bit for bit as exported */
} gp_model_file;

void gp_model_file_free(gp_model_file *f);
/* Append the file of the stored row meta (its spec and info), with the
 * model's state st, to b: one reservation of the file's exact size. */
int gp_model_file_write(const gp_model_meta *meta, const gp_model_file_source *src,
                        const gp_state *st, gp_buf *b, gp_error *err);
/* Read and check body[0..len) (model_file_read.c): GP_EDATA (422) naming the
 * field for a file that is corrupt, truncated, altered (checksum), of a
 * newer format, whose header length or array ranges are impossible or whose
 * arrays are damaged; GP_EUNSUPPORTED (field "method") for a method this
 * build lacks. On failure f holds nothing. */
int gp_model_file_read(const char *body, size_t len, gp_model_file *f, gp_error *err);

/* The UTC time age_seconds ago as "YYYY-MM-DDTHH:MM:SSZ" (audit.c): the
 * cut-off of a retention prune (idempotency keys, audit entries); what names
 * the retention in the error of an age out of range. */
int gp_api_retention_cutoff(double age_seconds, const char *what, char before[GP_TIME_LEN],
                            gp_error *err);

#endif
