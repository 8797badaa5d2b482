/* Predict: POST /v1/models/{name}/predict, and the point calls that answer
 * it, in dynamic batches (server/batcher.c) or at once. An Open Inference
 * Protocol infer (oip.c) is a point call too: the same model look-up and the
 * same batched prediction; only its answer is written by another writer
 * (gp_point_writer: one per protocol, so this file names none but v1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

#define MAX_QUANTILES 100

/* ---- predict ---- */

/* m values per output, p outputs one after the other (column-major m x p):
 * a list of m numbers for one output, m rows of p numbers for several. */
static void write_outputs(gp_buf *b, const double *v, size_t m, size_t p)
{
    if (p == 1) {
        gp_buf_json_array(b, v, m, 1);
        return;
    }
    gp_buf_put(b, "[", 1);
    for (size_t i = 0; i < m; i++) {
        if (i)
            gp_buf_put(b, ",", 1);
        gp_buf_json_array(b, v + i, p, m);
    }
    gp_buf_put(b, "]", 1);
}

/* The gate of a model whose method has one: "state", "ask_oracle" (m flags;
 * NULL: all true, in warm-up) and "oracle_threshold" (per output, original
 * units; null before known). */
static void write_gate(gp_buf *b, const gp_online_status *st, const unsigned char *flags,
                       size_t m, size_t p)
{
    gp_buf_printf(b, ",\"state\":\"%s\",\"ask_oracle\":[", st->warmup ? "warmup" : "online");
    for (size_t i = 0; i < m; i++)
        gp_buf_printf(b, "%s%s", i ? "," : "", !flags || flags[i] ? "true" : "false");
    gp_buf_puts(b, "],\"oracle_threshold\":");
    if (!st->has_threshold)
        gp_buf_puts(b, "null");
    else if (p == 1)
        gp_buf_json_number(b, st->threshold[0]);
    else
        gp_buf_json_array(b, st->threshold, p, 1);
}

static const char *const predict_keys[] = {"X", "rows", "version", "include_noise", "full_covariance",
                                           "quantiles", "components", "noise", NULL};

static int parse_quantiles(json_t *v, double *q, size_t *nq, gp_error *err)
{
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, "quantiles",
                            "quantiles must be a list of numbers in (0, 1)");
    size_t n = json_array_size(v);
    if (n > MAX_QUANTILES)
        return gp_error_set(err, GP_EINVAL, "quantiles", "at most %d quantiles", MAX_QUANTILES);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "quantiles[%zu]", i);
        if (!json_is_number(e) || !(json_number_value(e) > 0.0 && json_number_value(e) < 1.0))
            return gp_error_set(err, GP_EINVAL, f, "%s must be a number strictly between 0 and 1",
                                f);
        q[i] = json_number_value(e);
        for (size_t j = 0; j < i; j++)
            if (q[j] == q[i])
                return gp_error_set(err, GP_EINVAL, f, "%s repeats quantiles[%zu]", f, j);
    }
    *nq = n;
    return GP_OK;
}

/* "components": true is for mixture methods (K = their component count) and
 * additive ones (K = their part count, *parts set); others are 422. */
static int check_components(const gp_model *model, int comps, size_t *K, int *parts,
                            gp_error *err)
{
    *K = 0;
    *parts = 0;
    if (!comps)
        return GP_OK;
    size_t P = gp_model_parts(model);
    if (P > 0) {
        /* the parts are of the latent f; a non-Gaussian model's predict goes
         * through its likelihood, which does not split them */
        if (model->likelihood != GP_LIK_GAUSSIAN)
            return gp_error_set(err, GP_EUNSUPPORTED, "components",
                                "components: the parts of a %s model are not predicted",
                                gp_likelihood_name(model->likelihood));
        *K = P;
        *parts = 1;
        return GP_OK;
    }
    if (!gp_method_is_mixture(model->method))
        return gp_error_set(err, GP_EUNSUPPORTED, "components",
                            "components: method '%s' predicts with one Gaussian, not a mixture "
                            "or a sum of parts",
                            model->method->name);
    *K = gp_model_components(model);
    return GP_OK;
}

/* One block for every output the request asked for (owner: *mem); obs: the
 * six observation-level outputs of a non-Gaussian model, m x np each (np is
 * 1 for all but a softmax model, whose np = C classes). */
static int alloc_prediction(size_t m, size_t np, int full, int cross, size_t nq, size_t K,
                            int obs, double **mem, gp_prediction *pr, gp_error *err)
{
    /* np outputs: m np means and variances, np covariances, m nq np quantiles
     * (np is at most a few: the request's m is bounded, and np by the fit);
     * cross: the joint (m np)^2 covariance of a coregionalised model */
    size_t mp = full && cross ? m * np : 0;
    size_t total = 2 * m * np + (full ? m * m * np : 0) + mp * mp + nq * m * np + 2 * K * m +
                   (obs ? 6 * m * np : 0) + m; /* + m: the gate's flags */
    *mem = malloc(total * sizeof **mem);
    if (*mem == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu points", m);
    double *p = *mem;
    pr->mean = p;
    pr->variance = p + m * np;
    p += 2 * m * np;
    pr->covariance = full ? p : NULL;
    p += full ? m * m * np : 0;
    pr->cross_covariance = mp ? p : NULL;
    p += mp * mp;
    pr->quantiles = nq ? p : NULL;
    p += nq * m * np;
    pr->component_mean = K ? p : NULL;
    pr->component_variance = K ? p + K * m : NULL;
    p += 2 * K * m;
    double **outs[6] = {&pr->latent_mean, &pr->latent_variance, &pr->obs_mean,
                        &pr->obs_variance, &pr->rate_mean, &pr->rate_variance};
    for (int k = 0; k < 6; k++)
        *outs[k] = obs ? p + (size_t)k * m * np : NULL;
    p += obs ? 6 * m * np : 0;
    pr->ask_oracle = (unsigned char *)p;
    return GP_OK;
}

/* The observation-level lists of a non-Gaussian model's prediction, as
 * write_outputs lays out its p columns (a softmax model's: rows of C, one
 * value per class; its obs_variance p (1 - p) is "variance" already with
 * include_noise, and not repeated). */
static void write_observation_fields(gp_buf *b, gp_likelihood l, const gp_prediction *pr,
                                     size_t m, size_t p)
{
    const char *keys[6] = {"latent_mean", "latent_variance", NULL, NULL, NULL, NULL};
    const double *vals[6] = {pr->latent_mean, pr->latent_variance, pr->obs_mean,
                             pr->obs_variance, pr->rate_mean, pr->rate_variance};
    if (l == GP_LIK_BERNOULLI)
        keys[2] = "probability";
    else if (l == GP_LIK_SOFTMAX)
        keys[2] = "probabilities";
    else {
        keys[2] = "count_mean";
        keys[3] = "count_variance";
        keys[4] = "rate_mean";
        keys[5] = "rate_variance";
    }
    for (int k = 0; k < 6; k++) {
        if (keys[k] == NULL)
            continue;
        gp_buf_printf(b, ",\"%s\":", keys[k]);
        write_outputs(b, vals[k], m, p);
    }
}

/* "components": {"kind": "mixture" | "additive", "names": [K names] (additive),
 * "mean": [[m values] x K], "variance": [[m values] x K]} */
static void write_components(gp_buf *b, const gp_model *model, int parts,
                             const gp_prediction *pr, size_t m, size_t K)
{
    const char *names[2] = {"mean", "variance"};
    const double *src[2] = {pr->component_mean, pr->component_variance};
    gp_buf_printf(b, ",\"components\":{\"kind\":\"%s\"", parts ? "additive" : "mixture");
    if (parts) {
        gp_buf_puts(b, ",\"names\":[");
        for (size_t k = 0; k < K; k++) {
            char name[64];
            gp_model_part_name(model, k, name, sizeof name);
            if (name[0] == '\0')
                snprintf(name, sizeof name, "part%zu", k);
            if (k)
                gp_buf_put(b, ",", 1);
            gp_buf_json_string(b, name);
        }
        gp_buf_put(b, "]", 1);
    }
    for (int t = 0; t < 2; t++) {
        gp_buf_printf(b, ",\"%s\":[", names[t]);
        for (size_t k = 0; k < K; k++) {
            if (k)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, src[t] + k * m, m, 1);
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "}", 1);
}

/* quantiles: {"level": values} with each level's values as write_outputs. */
static void write_quantiles(gp_buf *b, const double *q, size_t nq, const double *Q, size_t m,
                            size_t p)
{
    gp_buf_puts(b, ",\"quantiles\":{");
    for (size_t k = 0; k < nq; k++) {
        char key[32];
        gp_format_shortest(q[k], key, sizeof key);
        if (k)
            gp_buf_put(b, ",", 1);
        gp_buf_json_string(b, key);
        gp_buf_put(b, ":", 1);
        if (p == 1) {
            gp_buf_json_array(b, Q + k * m, m, 1);
            continue;
        }
        gp_buf_put(b, "[", 1);
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, Q + k * m + i, p, nq * m); /* output j at (j nq + k) m + i */
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "}", 1);
}

/* covariance: m rows of m for one output; a list of p such matrices for several. */
static void write_covariance(gp_buf *b, const double *C, size_t m, size_t p)
{
    gp_buf_puts(b, ",\"covariance\":");
    if (p > 1)
        gp_buf_put(b, "[", 1);
    for (size_t j = 0; j < p; j++) {
        gp_buf_puts(b, j ? ",[" : "[");
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, C + j * m * m + i, m, m); /* row i (symmetric) */
        }
        gp_buf_put(b, "]", 1);
    }
    if (p > 1)
        gp_buf_put(b, "]", 1);
}

/* cross_covariance: (m p) rows of (m p), row and column i p + j the point
 * i's output j; core holds (i, j) at i + m j (output-major). */
static void write_cross_covariance(gp_buf *b, const double *C, size_t m, size_t p)
{
    size_t mp = m * p;
    gp_buf_puts(b, ",\"cross_covariance\":[");
    for (size_t r = 0; r < mp; r++) {
        size_t ri = (r / p) + m * (r % p); /* the row's index in core's layout */
        gp_buf_puts(b, r ? ",[" : "[");
        for (size_t c = 0; c < mp; c++) {
            size_t ci = (c / p) + m * (c % p);
            if (c)
                gp_buf_put(b, ",", 1);
            gp_buf_json_number(b, C[ci * mp + ri]);
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "]", 1);
}

/* A gate model in warm-up predicts nothing yet: every point asks the oracle. */
static void respond_warmup(gp_buf *b, const gp_online_status *st, size_t m, size_t p)
{
    gp_buf_puts(b, ",\"mean\":null,\"variance\":null");
    write_gate(b, st, NULL, m, p);
}

typedef struct predict_args {
    int include_noise, full, comps;
    double q[MAX_QUANTILES];
    size_t nq;
    double *noise; /* "noise": the points' known noise variances (owned; NULL: none) */
    size_t n_noise;
} predict_args;

static int parse_predict_args(gp_api *api, json_t *obj, predict_args *a, gp_error *err)
{
    json_t *e;
    int rc = GP_OK;
    if ((e = json_object_get(obj, "noise")))
        rc = gp_json_vector(e, "noise", api->cfg.max_points, &a->noise, &a->n_noise, err);
    if (rc == GP_OK && (e = json_object_get(obj, "full_covariance")))
        rc = gp_json_get_bool(e, "full_covariance", &a->full, err);
    if (rc == GP_OK && (e = json_object_get(obj, "components")))
        rc = gp_json_get_bool(e, "components", &a->comps, err);
    if (rc == GP_OK && (e = json_object_get(obj, "quantiles")))
        rc = parse_quantiles(e, a->q, &a->nq, err);
    return rc;
}

static void write_prediction(gp_buf *b, const gp_model *model, const predict_args *a,
                             const gp_prediction *pr, size_t m, size_t K, int parts)
{
    size_t p = model->n_outputs;
    gp_buf_puts(b, ",\"mean\":");
    write_outputs(b, pr->mean, m, p);
    gp_buf_puts(b, ",\"variance\":");
    write_outputs(b, pr->variance, m, p);
    if (model->likelihood != GP_LIK_GAUSSIAN)
        write_observation_fields(b, model->likelihood, pr, m, p);
    if (a->full)
        write_covariance(b, pr->covariance, m, p);
    if (a->full && pr->cross_covariance)
        write_cross_covariance(b, pr->cross_covariance, m, p);
    if (a->nq)
        write_quantiles(b, a->q, a->nq, pr->quantiles, m, p);
    if (a->comps)
        write_components(b, model, parts, pr, m, K);
    gp_predict_request asked = {.include_noise = a->include_noise, .noise = a->noise};
    if (a->include_noise && !gp_predict_noise_included(model, &asked))
        gp_buf_puts(b, ",\"noise_included\":false,\"noise_note\":\"the model was fitted with "
                       "known per-point noise: give \\\"noise\\\" (one variance per point) for "
                       "observation variances; these are the latent function's\"");
}

/* ---- predict and sample calls: parsed on the request thread, answered in
 * batches (server/batcher.c) or at once ---- */

struct gp_point_call {
    int kind;                /* GP_CALL_PREDICT or GP_CALL_SAMPLE */
    char name[GP_NAME_MAX + 1];
    int version;             /* 0: the latest */
    char alias[GP_ALIAS_MAX + 1]; /* the alias the body named the version by, or "" */
    json_t *obj;             /* the parsed body (owned); Xj points into it */
    json_t *Xj;
    json_t *rows;            /* named rows instead of X (into obj), or NULL */
    const json_t *features;  /* the model's feature_names while prepared (its entry's) */
    double *X;               /* rows of numbers, parsed early (owned); NULL for objects */
    size_t m, d;
    predict_args a;          /* predict */
    gp_sample_call s;        /* sample: its own parse (sample.c) */
    const gp_point_writer *writer; /* the protocol that answers it (v1_writer, oip.c's) */
    void *proto;             /* the writer's part of the call (owned), or NULL */
};

/* ---- the v1 writer: POST /v1/models/{name}/predict's answer ---- */

static int v1_prepare(gp_api *api, gp_point_call *c, const gp_model *model, const char *name,
                      const char *outputs, int warmup, gp_error *err)
{
    (void)outputs; /* written with the answer */
    (void)warmup; /* v1 answers a model in warm-up: "mean": null, every point asks */
    gp_x_names nm = {c->rows, c->features, NULL};
    int rc = gp_api_parse_x_late(api, model, name, c->Xj, &nm, &c->X, &c->m, &c->d, err);
    if (rc == GP_OK && c->a.noise && c->a.n_noise != c->m)
        rc = gp_error_set(err, GP_EDATA, "noise", "noise has %zu entries; X has %zu points",
                          c->a.n_noise, c->m);
    return rc;
}

static void v1_write(gp_buf *b, const gp_point_call *c, const gp_point_answer *a)
{
    size_t p = a->model->n_outputs;
    gp_api_write_head(b, a->name, a->version);
    gp_api_write_alias(b, c->alias);
    if (a->outputs)
        gp_buf_printf(b, ",\"outputs\":%s", a->outputs);
    if (a->ost->warmup)
        respond_warmup(b, a->ost, a->m, p);
    else
        write_prediction(b, a->model, &c->a, a->pr, a->m, a->K, a->parts);
    if (a->gate && !a->ost->warmup)
        write_gate(b, a->ost, a->pr->ask_oracle, a->m, p);
    gp_buf_put(b, "}", 1);
}

static const gp_point_writer v1_writer = {v1_prepare, v1_write, NULL};

void gp_api_point_call_free(gp_point_call *c)
{
    if (c == NULL)
        return;
    json_decref(c->obj);
    free(c->X);
    free(c->a.noise);
    gp_sample_call_free(&c->s);
    if (c->writer && c->writer->free)
        c->writer->free(c->proto);
    free(c);
}

int gp_point_call_from_points(const char *name, int version, double *X, size_t m, size_t d,
                              int include_noise, const gp_point_writer *w, void *proto,
                              gp_point_call **out, gp_error *err)
{
    *out = NULL;
    gp_point_call *c = calloc(1, sizeof *c);
    if (c == NULL) {
        free(X);
        if (w->free)
            w->free(proto);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    c->kind = GP_CALL_PREDICT;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->version = version;
    c->X = X;
    c->m = m;
    c->d = d;
    c->a.include_noise = include_noise;
    c->writer = w;
    c->proto = proto;
    *out = c;
    return GP_OK;
}

void *gp_point_call_proto(const gp_point_call *c)
{
    return c->proto;
}

static int parse_predict_call(gp_api *api, const gp_request *req, gp_point_call *c,
                              gp_error *err)
{
    c->a.include_noise = 1;
    int rc = gp_api_parse_point_request(api, c->name, req, predict_keys, &c->obj, &c->version,
                                        c->alias, &c->a.include_noise, err);
    if (rc == GP_OK)
        rc = parse_predict_args(api, c->obj, &c->a, err);
    if (rc == GP_OK)
        rc = gp_api_x_or_rows(c->obj, "the points to predict at", &c->Xj, &c->rows, err);
    if (rc == GP_OK && c->Xj)
        rc = gp_api_parse_x_early(api, c->Xj, &c->X, &c->m, &c->d, err);
    return rc;
}

int gp_api_point_call_parse(gp_api *api, int kind, const char *name, const gp_request *req,
                            gp_point_call **out, gp_response *res)
{
    gp_error err;
    gp_error_clear(&err);
    *out = NULL;
    gp_point_call *c = calloc(1, sizeof *c);
    int rc = c ? GP_OK : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        c->kind = kind;
        c->writer = &v1_writer;
        snprintf(c->name, sizeof c->name, "%s", name);
    }
    if (rc == GP_OK && kind == GP_CALL_PREDICT)
        rc = parse_predict_call(api, req, c, &err);
    else if (rc == GP_OK)
        rc = gp_sample_parse(api, name, req, &c->s, &c->version, &err);
    if (rc) {
        gp_api_point_call_free(c);
        gp_api_error(&err, res);
        return rc;
    }
    *out = c;
    return GP_OK;
}

size_t gp_api_point_call_points(const gp_point_call *c)
{
    return c->kind == GP_CALL_SAMPLE ? c->s.m : c->m;
}

int gp_api_batch_pays(gp_api *api, const char *name, int version)
{
    gp_model_meta meta;
    gp_error err;
    gp_error_clear(&err);
    if (gp_rows_meta(api, name, version, 0, &meta, &err) != GP_OK)
        return 0;
    const gp_method *m = gp_method_find(meta.method);
    gp_model_meta_free(&meta);
    return m != NULL && gp_method_batch_shares_work(m);
}

int gp_api_point_call_batchable(const gp_point_call *c)
{
    return c->kind == GP_CALL_SAMPLE || !c->a.full;
}

/* Samples of one model and version always join (each request's options are
 * its own in gp_model_sample_batch); predicts when their options agree. */
int gp_api_point_call_joinable(const gp_point_call *a, const gp_point_call *b)
{
    if (!gp_api_point_call_batchable(a) || !gp_api_point_call_batchable(b) ||
        a->kind != b->kind || strcmp(a->name, b->name) != 0 || a->version != b->version)
        return 0;
    if (a->kind == GP_CALL_SAMPLE)
        return 1;
    const predict_args *x = &a->a, *y = &b->a;
    return x->include_noise == y->include_noise && x->comps == y->comps && x->nq == y->nq &&
           (x->noise == NULL) == (y->noise == NULL) &&
           memcmp(x->q, y->q, x->nq * sizeof x->q[0]) == 0;
}

/* One predict call's state between its checks and its answer. */
typedef struct call_state {
    int rc;
    gp_error err;
    double *mem;
    gp_prediction pr;
    size_t K;
    int parts;
} call_state;

/* The checks of call c against the model, and its buffers (st->rc). */
static void predict_prepare(gp_api *api, const gp_cache_entry *entry, const gp_model *model,
                            gp_point_call *c, int gate, const gp_online_status *ost,
                            call_state *st)
{
    gp_error *err = &st->err;
    const predict_args *a = &c->a;
    c->features = entry->features;
    int rc = c->writer->prepare(api, c, model, c->name, entry->outputs, ost->warmup, err);
    if (rc == GP_OK && a->full && c->m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "a full covariance of %zu points is above the limit "
                          "max_covariance_points = %zu",
                          c->m, api->cfg.max_covariance_points);
    /* the joint covariance of a coregionalised model is (m p)^2 */
    int cross = model->coreg.type != GP_COREG_NONE;
    if (rc == GP_OK && a->full && cross && c->m * model->n_outputs > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "a full covariance of %zu points x %zu outputs is above the limit "
                          "max_covariance_points = %zu",
                          c->m, model->n_outputs, api->cfg.max_covariance_points);
    if (rc == GP_OK)
        rc = check_components(model, a->comps, &st->K, &st->parts, err);
    int obs = model->likelihood != GP_LIK_GAUSSIAN;
    if (rc == GP_OK && !ost->warmup)
        rc = alloc_prediction(c->m, model->n_outputs, a->full, cross, a->nq, st->K, obs,
                              &st->mem, &st->pr, err);
    if (rc == GP_OK && !gate)
        st->pr.ask_oracle = NULL;
    st->rc = rc;
}

static void predict_respond(gp_api *api, gp_cache_entry *entry, const gp_model *model,
                            const gp_point_call *c, int gate, const gp_online_status *ost,
                            call_state *st, gp_response *out)
{
    if (st->rc) {
        gp_api_error(&st->err, out);
        return;
    }
    size_t m = c->m;
    if (st->pr.clamped)
        atomic_fetch_add(&api->variance_clamps, (uint64_t)st->pr.clamped);
    gp_buf b;
    gp_buf_init(&b);
    /* entry's name/version are the row that was served */
    gp_point_answer a = {model,  c->name, entry->version, gate,          ost,
                         &st->pr, m,      st->K,          st->parts,     entry->outputs};
    c->writer->write(&b, c, &a);
    if (gate) /* in warm-up every point asks the oracle */
        gp_cache_gate_record(entry, ost->warmup ? NULL : st->pr.ask_oracle, m);
    gp_buf_respond(&b, 200, out);
}

/* Predict calls of one model and version: one look-up, one batched predict
 * (gp_model_predict_batch answers each as it would be answered alone). */
static void run_predicts(gp_api *api, gp_point_call **calls, size_t n, gp_response *res)
{
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    gp_error err;
    gp_error_clear(&err);
    call_state *st = calloc(n, sizeof *st);
    gp_predict_request *reqs = calloc(n, sizeof *reqs);
    gp_prediction *outs = calloc(n, sizeof *outs);
    int *rcs = calloc(n, sizeof *rcs);
    gp_error *errs = calloc(n, sizeof *errs);
    size_t *idx = calloc(n, sizeof *idx);
    int rc = st && reqs && outs && rcs && errs && idx
                 ? GP_OK
                 : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, calls[0]->name, calls[0]->version, &entry, &model, &err);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            gp_api_error(&err, &res[i]);
    } else {
        int gate = gp_method_has_gate(model->method);
        gp_online_status ost = {0};
        if (gate)
            gp_model_online_status(model, &ost);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            predict_prepare(api, entry, model, calls[i], gate, &ost, &st[i]);
            if (st[i].rc || ost.warmup)
                continue;
            const predict_args *a = &calls[i]->a;
            reqs[k] = (gp_predict_request){calls[i]->X, calls[i]->m, calls[i]->d,
                                           a->include_noise, a->full, a->q, a->nq, a->comps,
                                           a->noise};
            outs[k] = st[i].pr;
            idx[k++] = i;
        }
        if (k)
            gp_model_predict_batch(model, reqs, outs, rcs, errs, k);
        for (size_t j = 0; j < k; j++) {
            st[idx[j]].pr = outs[j];
            st[idx[j]].rc = rcs[j];
            if (rcs[j])
                st[idx[j]].err = errs[j];
        }
        for (size_t i = 0; i < n; i++)
            predict_respond(api, entry, model, calls[i], gate, &ost, &st[i], &res[i]);
    }
    gp_cache_release(api, entry);
    for (size_t i = 0; st && i < n; i++)
        free(st[i].mem);
    free(st);
    free(reqs);
    free(outs);
    free(rcs);
    free(errs);
    free(idx);
}

/* Sample calls of one model and version: gp_sample_run answers them together. */
static void run_samples(gp_api *api, gp_point_call **calls, size_t n, gp_response *res)
{
    gp_sample_call **sc = malloc(n * sizeof *sc);
    if (sc == NULL) {
        gp_error err;
        gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
        for (size_t i = 0; i < n; i++)
            gp_api_error(&err, &res[i]);
        return;
    }
    for (size_t i = 0; i < n; i++)
        sc[i] = &calls[i]->s;
    gp_sample_run(api, calls[0]->name, calls[0]->version, sc, n, res);
    free(sc);
}

void gp_api_point_calls_run(gp_api *api, gp_point_call **calls, size_t n, gp_response *res)
{
    if (n == 0)
        return;
    if (calls[0]->kind == GP_CALL_PREDICT)
        run_predicts(api, calls, n, res);
    else
        run_samples(api, calls, n, res);
    for (size_t i = 0; i < n; i++)
        gp_api_point_call_free(calls[i]);
}

static void run_one(gp_api *api, int kind, const char *name, const gp_request *req,
                    gp_response *out)
{
    gp_point_call *c = NULL;
    if (gp_api_point_call_parse(api, kind, name, req, &c, out) == GP_OK)
        gp_api_point_calls_run(api, &c, 1, out);
}

void gp_api_predict(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    run_one(api, GP_CALL_PREDICT, name, req, out);
}

void gp_api_sample(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    run_one(api, GP_CALL_SAMPLE, name, req, out);
}
