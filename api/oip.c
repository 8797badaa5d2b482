/* The Open Inference Protocol V2 (KServe / Triton REST "v2"): server and
 * model metadata, readiness, and inference as a predict call
 * (docs/design/api.md, "Open Inference Protocol V2").
 *
 * An infer request is parsed here into an ordinary predict call of predict.c
 * (gp_point_call): the same model look-up, the same batched prediction and
 * the same number writer as POST /v1/models/{name}/predict, so its numbers
 * are those of v1 bit for bit, and it joins v1 predicts in a dynamic batch.
 * Only the request's tensors (here) and the response's shape
 * (oip_writer, a gp_point_writer) differ.
 *
 * Errors are made in the catalogue's shape like every other route; the
 * server turns each answer on a /v2 path into the protocol's
 * {"error": "<message>"} (gp_api_oip_error), keeping its status. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

/* The server's version in the server metadata: the API's, as the OpenAPI
 * document's info.version states it. */
#define SERVER_VERSION "1"
/* The name the model metadata gives the one input tensor (any name is taken). */
#define INPUT_NAME "X"
/* Shape entries are integers; JSON numbers are read as doubles, exact up to 2^53. */
#define MAX_DIM 9007199254740992.0

/* ---- the outputs a model has ---- */

enum {
    OUT_MEAN,
    OUT_VARIANCE,
    OUT_LATENT_MEAN,
    OUT_LATENT_VARIANCE,
    OUT_PROBABILITY,
    OUT_PROBABILITIES,
    OUT_COUNT_MEAN,
    OUT_COUNT_VARIANCE,
    OUT_RATE_MEAN,
    OUT_RATE_VARIANCE,
    OUT_ASK_ORACLE,
    OUT_COUNT
};

/* The names v1 predict gives the same values (docs/design/api.md, "Predict"). */
static const char *const out_names[OUT_COUNT] = {
    "mean",       "variance",       "latent_mean", "latent_variance", "probability",
    "probabilities", "count_mean",  "count_variance", "rate_mean",    "rate_variance",
    "ask_oracle"};

/* Whether a model's prediction carries output k, as its v1 predict answer does. */
static int model_has_output(const gp_model *model, int k)
{
    gp_likelihood l = model->likelihood;
    switch (k) {
    case OUT_MEAN:
    case OUT_VARIANCE:
        return 1;
    case OUT_LATENT_MEAN:
    case OUT_LATENT_VARIANCE:
        return l != GP_LIK_GAUSSIAN;
    case OUT_PROBABILITY:
        return l == GP_LIK_BERNOULLI;
    case OUT_PROBABILITIES:
        return l == GP_LIK_SOFTMAX;
    case OUT_COUNT_MEAN:
    case OUT_COUNT_VARIANCE:
    case OUT_RATE_MEAN:
    case OUT_RATE_VARIANCE:
        return l == GP_LIK_POISSON || l == GP_LIK_POISSON_SQ;
    case OUT_ASK_ORACLE:
        return gp_method_has_gate(model->method);
    default:
        return 0;
    }
}

/* A coregionalised model's outputs also have one tensor each for mean and
 * variance, named by the output ("mean_Cd", "variance_Cd"): the code of
 * output j's is OUT_COUNT + 2 j (+1 for the variance). */
#define OUT_PER_PREFIX_MEAN "mean_"
#define OUT_PER_PREFIX_VARIANCE "variance_"
#define OUT_MAX (OUT_COUNT + 2 * GP_COREG_MAX_OUTPUTS)

static int has_output_tensors(const gp_model *model)
{
    return model->coreg.type != GP_COREG_NONE && model->n_outputs <= GP_COREG_MAX_OUTPUTS;
}

/* The tensor name of code k >= OUT_COUNT, from the outputs' names. */
static void per_output_name(json_t *names, int k, char *out, size_t len)
{
    size_t j = (size_t)(k - OUT_COUNT) / 2;
    const char *s = json_string_value(json_array_get(names, j));
    snprintf(out, len, "%s%s", (k - OUT_COUNT) % 2 ? OUT_PER_PREFIX_VARIANCE : OUT_PER_PREFIX_MEAN,
             s ? s : "?");
}

/* Columns of output k per point: the model's outputs for mean and variance,
 * and a softmax model's classes for its latents and probabilities too (every
 * other non-Gaussian model has one output). */
static size_t output_columns(const gp_model *model, int k)
{
    return k == OUT_ASK_ORACLE ? 1 : model->n_outputs;
}

/* "mean, variance, ..." : the outputs of model (NULL: every name) into out. */
static void list_outputs(const gp_model *model, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int k = 0; k < OUT_COUNT && o < len; k++) {
        if (model && !model_has_output(model, k))
            continue;
        int n = snprintf(out + o, len - o, "%s%s", o ? ", " : "", out_names[k]);
        o += n > 0 ? (size_t)n : 0;
    }
}

/* {"name": ..., "datatype": ..., "shape": [-1] or [-1, cols]}: cols 0 for a
 * vector (one value per point), else a matrix of cols columns. */
static void write_tensor_meta(gp_buf *b, const char *name, const char *datatype, size_t cols)
{
    gp_buf_puts(b, "{\"name\":");
    gp_buf_json_string(b, name);
    gp_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":", datatype);
    if (cols > 0)
        gp_buf_printf(b, "[-1,%zu]}", cols);
    else
        gp_buf_puts(b, "[-1]}");
}

/* ---- the error shape ---- */

void gp_api_oip_error(gp_response *res)
{
    if (res->status < 400 || res->body == NULL)
        return;
    json_t *root = json_loadb(res->body, res->body_len, 0, NULL);
    json_t *e = json_object_get(root, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *field = json_string_value(json_object_get(e, "field"));
    if (msg == NULL) { /* not the catalogue's shape: left as it is */
        json_decref(root);
        return;
    }
    gp_buf b;
    gp_buf_init(&b);
    /* The field is kept in the message, where the message does not start with it. */
    size_t fl = field ? strlen(field) : 0;
    int named = fl == 0 || (strncmp(msg, field, fl) == 0 && msg[fl] != '_' &&
                            !(msg[fl] >= 'a' && msg[fl] <= 'z'));
    char text[GP_ERROR_FIELD_LEN + GP_ERROR_MESSAGE_LEN + 4];
    snprintf(text, sizeof text, "%s%s%s", named ? "" : field, named ? "" : ": ", msg);
    gp_buf_puts(&b, "{\"error\":");
    gp_buf_json_string(&b, text);
    gp_buf_puts(&b, "}");
    json_decref(root);
    if (b.failed) {
        gp_buf_free(&b);
        return; /* out of memory: the catalogue's body is still an answer */
    }
    free(res->body);
    res->body = b.data;
    res->body_len = b.len;
}

/* ---- health and server metadata ---- */

void gp_api_oip_server_metadata(gp_response *out)
{
    gp_api_respond_text(out, 200,
                    "{\"name\":\"gpserve\",\"version\":\"" SERVER_VERSION "\",\"extensions\":[]}");
}

void gp_api_oip_live(gp_response *out)
{
    gp_api_respond_text(out, 200, "{\"live\":true}");
}

void gp_api_oip_ready(gp_api *api, gp_response *out)
{
    gp_api_respond_ready(api, out, "{\"ready\":true}");
}

/* ---- model metadata and readiness ---- */

/* Whether a model with an uncertainty gate is still warming up (it predicts
 * nothing until it holds its warmup rows). */
static int warming_up(const gp_model *model)
{
    if (!gp_method_has_gate(model->method))
        return 0;
    gp_online_status st;
    gp_model_online_status(model, &st);
    return st.warmup;
}

static void write_metadata(gp_buf *b, const char *name, const int *versions, size_t nv,
                           const gp_model *model, const char *outputs, const json_t *features)
{
    gp_buf_puts(b, "{\"name\":");
    gp_buf_json_string(b, name);
    gp_buf_puts(b, ",\"versions\":[");
    for (size_t i = 0; i < nv; i++)
        gp_buf_printf(b, "%s\"%d\"", i ? "," : "", versions[i]);
    gp_buf_puts(b, "],\"platform\":\"gpserve\",\"inputs\":[");
    /* Inputs that are distributions (rfgp's gaussian, samples, messages) are
     * no tensor of numbers: such a model lists none, and infer refuses it. */
    if (model->input.kind == GP_INPUT_POINT && features) {
        /* the tensor stays "X" (infer takes one tensor of rows); its columns'
         * names, the model's feature_names, ride in its parameters */
        char *names = json_dumps(features, GP_JSON_FLAGS);
        gp_buf_puts(b, "{\"name\":\"" INPUT_NAME "\",\"datatype\":\"FP64\",");
        gp_buf_printf(b, "\"shape\":[-1,%zu],\"parameters\":{\"feature_names\":%s}}",
                      model->input_dim, names ? names : "[]");
        free(names);
    } else if (model->input.kind == GP_INPUT_POINT)
        write_tensor_meta(b, INPUT_NAME, "FP64", model->input_dim);
    gp_buf_puts(b, "],\"outputs\":[");
    int first = 1;
    for (int k = 0; k < OUT_COUNT; k++) {
        if (!model_has_output(model, k))
            continue;
        if (!first)
            gp_buf_put(b, ",", 1);
        first = 0;
        size_t cols = output_columns(model, k);
        write_tensor_meta(b, out_names[k], k == OUT_ASK_ORACLE ? "BOOL" : "FP64",
                          cols > 1 ? cols : 0);
    }
    json_error_t je;
    json_t *names = has_output_tensors(model) && outputs ? json_loads(outputs, 0, &je) : NULL;
    for (int k = OUT_COUNT; names && k < OUT_COUNT + 2 * (int)model->n_outputs; k++) {
        char tn[GP_OUTPUT_NAME_MAX + 16];
        per_output_name(names, k, tn, sizeof tn);
        gp_buf_put(b, ",", 1);
        write_tensor_meta(b, tn, "FP64", 0);
    }
    json_decref(names);
    gp_buf_puts(b, "]}");
}

void gp_api_oip_model_metadata(gp_api *api, const char *name, int version, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    int *versions = NULL;
    size_t nv = 0;
    int rc = gp_cache_acquire(api, name, version, &entry, &model, &err);
    /* the versioned path names its version alone, as Triton does */
    if (rc == GP_OK && version == 0)
        rc = gp_store_versions(api->store, name, &versions, &nv, &err);
    if (rc) {
        gp_cache_release(api, entry);
        free(versions);
        gp_api_error(&err, out);
        return;
    }
    gp_buf b;
    gp_buf_init(&b);
    write_metadata(&b, name, version ? &version : versions, version ? 1 : nv, model,
                   entry->outputs, entry->features);
    gp_cache_release(api, entry);
    free(versions);
    gp_buf_respond(&b, 200, out);
}

void gp_api_oip_model_ready(gp_api *api, const char *name, int version, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    int rc = gp_cache_acquire(api, name, version, &entry, &model, &err);
    int warming = rc == GP_OK && warming_up(model);
    gp_cache_release(api, entry);
    /* Not ready is a 4xx in the protocol (200 true, 4xx false), and not the
     * server's fault: 409, as v1 answers samples of a model in warm-up. */
    if (warming)
        rc = gp_error_set(&err, GP_ECONFLICT, NULL,
                          "model '%s' is warming up: it predicts once it holds its warmup rows",
                          name);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "{\"name\":");
    gp_buf_json_string(&b, name);
    gp_buf_puts(&b, ",\"ready\":true}");
    gp_buf_respond(&b, 200, out);
}

/* ---- infer: the request ---- */

typedef struct gp_oip_call {
    char *id;          /* the request's "id" (echoed), or NULL */
    size_t d;          /* the shape's second entry */
    int asked[OUT_MAX];   /* outputs asked, in request order (n_asked of them); -1: a
                           * per-output name (pending[j]) resolved against the model */
    char *pending[OUT_MAX];
    size_t n_asked;       /* 0: every output of the model */
    json_t *names;        /* the model's outputs' names (per-output tensors) */
} gp_oip_call;

static void oip_call_free(void *proto)
{
    gp_oip_call *o = proto;
    if (o == NULL)
        return;
    free(o->id);
    for (size_t j = 0; j < o->n_asked; j++)
        free(o->pending[j]);
    json_decref(o->names);
    free(o);
}

static const char *const infer_keys[] = {"id", "parameters", "inputs", "outputs", NULL};
static const char *const input_keys[] = {"name", "shape", "datatype", "parameters", "data", NULL};
static const char *const output_keys[] = {"name", "parameters", NULL};

/* The protocol's tensor data types (all but FP64 are refused, naming it). */
static int protocol_datatype(const char *t)
{
    static const char *const types[] = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64",
                                        "INT8",  "INT16", "INT32",  "INT64",  "FP16",
                                        "FP32",  "FP64",  "BYTES",  NULL};
    for (size_t i = 0; types[i]; i++)
        if (strcmp(types[i], t) == 0)
            return 1;
    return 0;
}

static int parse_datatype(json_t *v, gp_error *err)
{
    const char *f = "inputs[0].datatype";
    const char *t = json_string_value(v);
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is missing: send \"FP64\"", f);
    if (t == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s must be a string: \"FP64\"", f);
    if (strcmp(t, "FP64") == 0)
        return GP_OK;
    if (protocol_datatype(t))
        return gp_error_set(err, GP_EINVAL, f,
                            "%s is %s; gpserve models take FP64 inputs only: send \"FP64\" "
                            "(the values are the same JSON numbers)",
                            f, t);
    return gp_error_set(err, GP_EINVAL, f,
                        "%s '%.32s' is not a data type of the protocol; send \"FP64\"", f, t);
}

/* One entry of the shape: an integer >= 0. */
static int shape_entry(json_t *v, size_t i, double *out, gp_error *err)
{
    double x = json_is_number(v) ? json_number_value(v) : -1.0;
    if (!(x >= 0.0 && x <= MAX_DIM && x == floor(x)))
        return gp_error_set(err, GP_EINVAL, "inputs[0].shape",
                            "inputs[0].shape[%zu] must be an integer >= 0", i);
    *out = x;
    return GP_OK;
}

/* "shape": [n, d] with n rows (1 .. max_points) of d >= 1 columns. */
static int parse_shape(gp_api *api, json_t *v, size_t *n, size_t *d, gp_error *err)
{
    const char *f = "inputs[0].shape";
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is missing: [n, d] for n points of d inputs",
                            f);
    if (!json_is_array(v) || json_array_size(v) != 2)
        return gp_error_set(err, GP_EINVAL, f,
                            "%s must be [n, d]: n points (rows) of d inputs (columns)", f);
    double rows = 0, cols = 0;
    int rc = shape_entry(json_array_get(v, 0), 0, &rows, err);
    if (rc == GP_OK)
        rc = shape_entry(json_array_get(v, 1), 1, &cols, err);
    if (rc)
        return rc;
    if (rows < 1 || cols < 1)
        return gp_error_set(err, GP_EINVAL, f, "%s is [%.0f, %.0f]: give at least one point "
                            "of at least one input", f, rows, cols);
    if (rows > (double)api->cfg.max_points)
        return gp_error_set(err, GP_ETOOBIG, f,
                            "%s has %.0f rows; the limit is max_points = %zu", f, rows,
                            api->cfg.max_points);
    *n = (size_t)rows;
    *d = (size_t)cols;
    return GP_OK;
}

/* "data": n x d numbers in row-major order, flat ([x00, x01, x10, ...]) or
 * as n rows of d; into X, column-major n x d (malloc'ed). */
static int parse_data(json_t *v, size_t n, size_t d, double **X, gp_error *err)
{
    const char *f = "inputs[0].data";
    char path[GP_ERROR_FIELD_LEN];
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is missing: n x d numbers in row-major order",
                            f);
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, f, "%s must be an array of numbers (row-major)", f);
    size_t len = json_array_size(v);
    int nested = len > 0 && json_is_array(json_array_get(v, 0));
    if (nested && len != n)
        return gp_error_set(err, GP_EINVAL, f, "%s has %zu rows; shape [%zu, %zu] has %zu", f,
                            len, n, d, n);
    if (!nested && (double)len != (double)n * (double)d)
        return gp_error_set(err, GP_EINVAL, f,
                            "%s has %zu values; shape [%zu, %zu] needs n x d = %.0f", f, len, n,
                            d, (double)n * (double)d);
    /* Every row checked before anything is allocated: n x d values are then
     * in the body (as flat data are), whatever the shape claimed. */
    for (size_t i = 0; nested && i < n; i++) {
        json_t *row = json_array_get(v, i);
        if (!json_is_array(row) || json_array_size(row) != d) {
            snprintf(path, sizeof path, "%s[%zu]", f, i);
            return gp_error_set(err, GP_EINVAL, path,
                                "%s must be a row of %zu numbers (shape [%zu, %zu])", path, d, n,
                                d);
        }
    }
    double *M = malloc(n * d * sizeof *M);
    if (M == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu x %zu values", n, d);
    int rc = GP_OK;
    for (size_t i = 0; i < n && rc == GP_OK; i++) {
        json_t *row = nested ? json_array_get(v, i) : NULL;
        for (size_t j = 0; j < d && rc == GP_OK; j++) {
            json_t *c = nested ? json_array_get(row, j) : json_array_get(v, i * d + j);
            if (json_is_number(c)) {
                M[j * n + i] = json_number_value(c);
                continue;
            }
            if (nested)
                snprintf(path, sizeof path, "%s[%zu][%zu]", f, i, j);
            else
                snprintf(path, sizeof path, "%s[%zu]", f, i * d + j);
            rc = gp_json_get_number(c, path, &M[j * n + i], err); /* says what it is instead */
        }
    }
    if (rc) {
        free(M);
        return rc;
    }
    *X = M;
    return GP_OK;
}

/* "parameters" of the request: include_noise (boolean); any other is refused. */
static int parse_parameters(json_t *v, int *include_noise, gp_error *err)
{
    if (v == NULL)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "parameters",
                            "parameters must be an object of key/value pairs");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "include_noise") == 0) {
            int rc = gp_json_get_bool(val, "parameters.include_noise", include_noise, err);
            if (rc)
                return rc;
            continue;
        }
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "parameters.%.40s", key);
        return gp_error_set(err, GP_EINVAL, f,
                            "%s is not a parameter gpserve takes (parameters: include_noise)", f);
    }
    return GP_OK;
}

/* An input's or output's "parameters": none are taken, but the binary data
 * extension's "binary_data": false (what Triton's client sends for JSON). */
static int parse_tensor_parameters(json_t *v, const char *field, gp_error *err)
{
    if (v == NULL)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an object", field);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "%s.%.32s", field, key);
        if (strcmp(key, "binary_data") == 0 && json_is_false(val))
            continue;
        if (strcmp(key, "binary_data") == 0 || strcmp(key, "binary_data_size") == 0)
            return gp_error_set(err, GP_EINVAL, f,
                                "%s: the binary tensor data extension is not supported; tensors "
                                "are JSON (\"binary_data\": false)",
                                f);
        return gp_error_set(err, GP_EINVAL, f, "%s is not a parameter gpserve takes", f);
    }
    return GP_OK;
}

/* "outputs": [{"name": ...}, ...]: the catalogue indices, in request order
 * (whether this model has them is checked once the model is known). */
static int parse_outputs(json_t *v, gp_oip_call *o, gp_error *err)
{
    if (v == NULL)
        return GP_OK;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return gp_error_set(err, GP_EINVAL, "outputs",
                            "outputs must be a non-empty array of {\"name\": ...}; leave it out "
                            "for every output");
    size_t n = json_array_size(v);
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        snprintf(f, sizeof f, "outputs[%zu]", i);
        if (!json_is_object(e))
            return gp_error_set(err, GP_EINVAL, f, "%s must be an object {\"name\": ...}", f);
        int rc = gp_json_known_keys(e, output_keys, f, err);
        char pf[GP_ERROR_FIELD_LEN];
        gp_fieldf(pf, sizeof pf, "outputs[%zu].parameters", i);
        if (rc == GP_OK)
            rc = parse_tensor_parameters(json_object_get(e, "parameters"), pf, err);
        if (rc)
            return rc;
        snprintf(f, sizeof f, "outputs[%zu].name", i);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name == NULL)
            return gp_error_set(err, GP_EINVAL, f, "%s must be the name of an output", f);
        int k = 0;
        while (k < OUT_COUNT && strcmp(out_names[k], name) != 0)
            k++;
        int per = k == OUT_COUNT &&
                  (strncmp(name, OUT_PER_PREFIX_MEAN, strlen(OUT_PER_PREFIX_MEAN)) == 0 ||
                   strncmp(name, OUT_PER_PREFIX_VARIANCE, strlen(OUT_PER_PREFIX_VARIANCE)) == 0);
        if (per) { /* an output's own tensor: the model says whether it has it */
            for (size_t j = 0; j < o->n_asked; j++)
                if (o->pending[j] && strcmp(o->pending[j], name) == 0)
                    return gp_error_set(err, GP_EINVAL, f, "%s repeats outputs[%zu].name", f, j);
            if (o->n_asked == OUT_MAX)
                return gp_error_set(err, GP_EINVAL, "outputs", "outputs lists more than %d "
                                    "tensors", OUT_MAX);
            if ((o->pending[o->n_asked] = strdup(name)) == NULL)
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
            o->asked[o->n_asked++] = -1;
            continue;
        }
        if (k == OUT_COUNT) {
            char all[256];
            list_outputs(NULL, all, sizeof all);
            return gp_error_set(err, GP_EINVAL, f,
                                "%s '%.40s' is no output of a gpserve model (outputs: %s; "
                                "GET /v2/models/NAME lists a model's)",
                                f, name, all);
        }
        for (size_t j = 0; j < o->n_asked; j++)
            if (o->asked[j] == k)
                return gp_error_set(err, GP_EINVAL, f, "%s repeats outputs[%zu].name", f, j);
        o->asked[o->n_asked++] = k;
    }
    return GP_OK;
}

/* "inputs": exactly one tensor, FP64 of shape [n, d] (any name). */
static int parse_input(gp_api *api, json_t *v, double **X, size_t *n, size_t *d, gp_error *err)
{
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, "inputs",
                            "inputs is missing: one tensor {\"name\": \"" INPUT_NAME
                            "\", \"datatype\": \"FP64\", \"shape\": [n, d], \"data\": [...]}");
    if (!json_is_array(v) || json_array_size(v) != 1)
        return gp_error_set(err, GP_EINVAL, "inputs",
                            "inputs must hold exactly one tensor (the points, shape [n, d]); "
                            "got %zu",
                            json_is_array(v) ? json_array_size(v) : (size_t)0);
    json_t *in = json_array_get(v, 0);
    if (!json_is_object(in))
        return gp_error_set(err, GP_EINVAL, "inputs[0]", "inputs[0] must be an object");
    int rc = gp_json_known_keys(in, input_keys, "inputs[0]", err);
    if (rc == GP_OK && json_string_value(json_object_get(in, "name")) == NULL)
        rc = gp_error_set(err, GP_EINVAL, "inputs[0].name",
                          "inputs[0].name must be a string (any name; the model's is \"" INPUT_NAME
                          "\")");
    if (rc == GP_OK)
        rc = parse_datatype(json_object_get(in, "datatype"), err);
    if (rc == GP_OK)
        rc = parse_tensor_parameters(json_object_get(in, "parameters"), "inputs[0].parameters",
                                     err);
    if (rc == GP_OK)
        rc = parse_shape(api, json_object_get(in, "shape"), n, d, err);
    if (rc == GP_OK)
        rc = parse_data(json_object_get(in, "data"), *n, *d, X, err);
    return rc;
}

/* The whole request into *o, X (column-major n x d) and include_noise. */
static int parse_infer(gp_api *api, const gp_request *req, gp_oip_call *o, double **X,
                       size_t *n, int *include_noise, gp_error *err)
{
    json_t *obj = NULL, *e;
    int rc = gp_media_type(req->content_type) == 1
                 ? GP_OK
                 : gp_error_set(err, GP_EMEDIATYPE, NULL,
                                "Content-Type must be application/json, not '%.60s'",
                                req->content_type);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, &obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(obj, infer_keys, NULL, err);
    if (rc == GP_OK && (e = json_object_get(obj, "id"))) {
        if (!json_is_string(e))
            rc = gp_error_set(err, GP_EINVAL, "id", "id must be a string");
        else if ((o->id = strdup(json_string_value(e))) == NULL)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    if (rc == GP_OK)
        rc = parse_parameters(json_object_get(obj, "parameters"), include_noise, err);
    if (rc == GP_OK)
        rc = parse_outputs(json_object_get(obj, "outputs"), o, err);
    if (rc == GP_OK)
        rc = parse_input(api, json_object_get(obj, "inputs"), X, n, &o->d, err);
    json_decref(obj);
    return rc;
}

static const gp_point_writer oip_writer;

int gp_api_oip_infer_parse(gp_api *api, const char *name, int version, const gp_request *req,
                           gp_point_call **out, gp_response *res)
{
    gp_error err;
    gp_error_clear(&err);
    *out = NULL;
    gp_oip_call *o = calloc(1, sizeof *o);
    double *X = NULL;
    size_t n = 0;
    int include_noise = 1;
    int rc = o ? parse_infer(api, req, o, &X, &n, &include_noise, &err)
               : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) /* takes X and o, also on failure */
        rc = gp_point_call_from_points(name, version, X, n, o->d, include_noise, &oip_writer, o,
                                       out, &err);
    else {
        free(X);
        oip_call_free(o);
    }
    if (rc)
        gp_api_error(&err, res);
    return rc;
}

void gp_api_oip_infer(gp_api *api, const char *name, int version, const gp_request *req,
                      gp_response *out)
{
    gp_point_call *c = NULL;
    if (gp_api_oip_infer_parse(api, name, version, req, &c, out) == GP_OK)
        gp_api_point_calls_run(api, &c, 1, out);
}

/* ---- infer: against the model, and the response ---- */

/* The checks of an infer that need its model (inputs of points, the shape's
 * d, the outputs asked; warmup: a gate model in warm-up, 409); fixes the
 * outputs to answer (every output of the model when none were asked). */
/* The per-output tensors asked (pending names) against the model's outputs. */
static int resolve_per_output(gp_oip_call *o, const gp_model *model, const char *name,
                              const char *outputs, gp_error *err)
{
    json_error_t je;
    if (has_output_tensors(model) && outputs && o->names == NULL)
        o->names = json_loads(outputs, 0, &je);
    for (size_t j = 0; j < o->n_asked; j++) {
        if (o->asked[j] != -1)
            continue;
        for (int k = OUT_COUNT; o->names && k < OUT_COUNT + 2 * (int)model->n_outputs; k++) {
            char tn[GP_OUTPUT_NAME_MAX + 16];
            per_output_name(o->names, k, tn, sizeof tn);
            if (strcmp(tn, o->pending[j]) == 0)
                o->asked[j] = k;
        }
        if (o->asked[j] != -1)
            continue;
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "outputs[%zu].name", j);
        return gp_error_set(err, GP_EINVAL, f,
                            "%s: model '%s' has no output '%.40s' (GET /v2/models/%s lists its "
                            "outputs)",
                            f, name, o->pending[j], name);
    }
    return GP_OK;
}

static int oip_prepare(gp_api *api, gp_point_call *c, const gp_model *model, const char *name,
                       const char *outputs, int warmup, gp_error *err)
{
    (void)api;
    gp_oip_call *o = gp_point_call_proto(c);
    int rc = resolve_per_output(o, model, name, outputs, err);
    if (rc)
        return rc;
    if (model->input.kind != GP_INPUT_POINT)
        return gp_error_set(err, GP_EUNSUPPORTED, "inputs[0]",
                            "inputs[0]: model '%s' takes %s inputs, which are no tensor of "
                            "numbers; use POST /v1/models/%s/predict",
                            name, gp_input_kind_name(model->input.kind), name);
    if (o->d != model->input_dim)
        return gp_error_set(err, GP_EINVAL, "inputs[0].shape",
                            "inputs[0].shape has %zu columns; model '%s' takes %zu "
                            "(shape [n, %zu])",
                            o->d, name, model->input_dim, model->input_dim);
    for (size_t j = 0; j < o->n_asked; j++) {
        if (o->asked[j] >= OUT_COUNT || model_has_output(model, o->asked[j]))
            continue;
        char mine[256], f[GP_ERROR_FIELD_LEN];
        list_outputs(model, mine, sizeof mine);
        snprintf(f, sizeof f, "outputs[%zu].name", j);
        return gp_error_set(err, GP_EINVAL, f,
                            "%s: model '%s' has no output '%s' (its outputs: %s)",
                            f, name, out_names[o->asked[j]], mine);
    }
    if (o->n_asked == 0) {
        for (int k = 0; k < OUT_COUNT; k++)
            if (model_has_output(model, k))
                o->asked[o->n_asked++] = k;
        for (int k = OUT_COUNT; o->names && k < OUT_COUNT + 2 * (int)model->n_outputs; k++)
            o->asked[o->n_asked++] = k;
    }
    if (warmup)
        return gp_error_set(err, GP_ECONFLICT, NULL,
                            "model '%s' is warming up: it predicts once it holds its warmup "
                            "rows (GET /v2/models/%s/ready answers 200 then)",
                            name, name);
    return GP_OK;
}

/* m x cols values (column-major, as core fills them) as row-major JSON. */
static void write_row_major(gp_buf *b, const double *v, size_t m, size_t cols)
{
    if (cols == 1) {
        gp_buf_json_array(b, v, m, 1);
        return;
    }
    gp_buf_put(b, "[", 1);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < cols; j++) {
            if (i || j)
                gp_buf_put(b, ",", 1);
            gp_buf_json_number(b, v[j * m + i]);
        }
    gp_buf_put(b, "]", 1);
}

static const double *output_values(const gp_prediction *pr, int k)
{
    switch (k) {
    case OUT_MEAN:
        return pr->mean;
    case OUT_VARIANCE:
        return pr->variance;
    case OUT_LATENT_MEAN:
        return pr->latent_mean;
    case OUT_LATENT_VARIANCE:
        return pr->latent_variance;
    case OUT_PROBABILITY:
    case OUT_PROBABILITIES:
    case OUT_COUNT_MEAN:
        return pr->obs_mean;
    case OUT_COUNT_VARIANCE:
        return pr->obs_variance;
    case OUT_RATE_MEAN:
        return pr->rate_mean;
    case OUT_RATE_VARIANCE:
        return pr->rate_variance;
    default:
        return NULL;
    }
}

/* The inference response of a->m points (never in warm-up: oip_prepare). */
static void oip_write(gp_buf *b, const gp_point_call *c, const gp_point_answer *a)
{
    const gp_oip_call *o = gp_point_call_proto(c);
    const gp_model *model = a->model;
    const gp_prediction *pr = a->pr;
    const char *name = a->name;
    int version = a->version;
    size_t m = a->m;
    gp_buf_puts(b, "{\"model_name\":");
    gp_buf_json_string(b, name);
    gp_buf_printf(b, ",\"model_version\":\"%d\"", version);
    if (o->id) {
        gp_buf_puts(b, ",\"id\":");
        gp_buf_json_string(b, o->id);
    }
    gp_buf_puts(b, ",\"outputs\":[");
    for (size_t j = 0; j < o->n_asked; j++) {
        int k = o->asked[j];
        if (k >= OUT_COUNT) { /* output (k - OUT_COUNT) / 2's own mean or variance */
            char tn[GP_OUTPUT_NAME_MAX + 16];
            size_t out = (size_t)(k - OUT_COUNT) / 2;
            per_output_name(o->names, k, tn, sizeof tn);
            gp_buf_puts(b, j ? ",{\"name\":" : "{\"name\":");
            gp_buf_json_string(b, tn);
            gp_buf_printf(b, ",\"datatype\":\"FP64\",\"shape\":[%zu],\"data\":", m);
            gp_buf_json_array(b, ((k - OUT_COUNT) % 2 ? pr->variance : pr->mean) + out * m, m, 1);
            gp_buf_put(b, "}", 1);
            continue;
        }
        size_t cols = output_columns(model, k);
        gp_buf_puts(b, j ? ",{\"name\":\"" : "{\"name\":\"");
        gp_buf_puts(b, out_names[k]);
        gp_buf_printf(b, "\",\"datatype\":\"%s\",\"shape\":",
                      k == OUT_ASK_ORACLE ? "BOOL" : "FP64");
        if (cols > 1)
            gp_buf_printf(b, "[%zu,%zu],\"data\":", m, cols);
        else
            gp_buf_printf(b, "[%zu],\"data\":", m);
        if (k == OUT_ASK_ORACLE) {
            gp_buf_put(b, "[", 1);
            for (size_t i = 0; i < m; i++)
                gp_buf_puts(b, i ? (pr->ask_oracle[i] ? ",true" : ",false")
                                 : (pr->ask_oracle[i] ? "true" : "false"));
            gp_buf_put(b, "]", 1);
        } else
            write_row_major(b, output_values(pr, k), m, cols);
        gp_buf_put(b, "}", 1);
    }
    gp_buf_puts(b, "]}");
}

static const gp_point_writer oip_writer = {oip_prepare, oip_write, oip_call_free};
