/* Data sets as resources (docs/design/api.md, "Data sets"): the upload of
 * PUT /v1/datasets/{name}, streamed into the store as its body arrives (the
 * parser of api/dataset_ingest.h fills a part of GP_STORE_DATASET_PART_ROWS
 * rows at a time, each written at once; the body is never whole in memory),
 * and the GET, list and DELETE routes. An upload that does not end well
 * (a refused row, the quota, a dropped connection) deletes what it wrote:
 * nothing of it is ever seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/dataset_ingest.h"
#include "api/internal.h"
#include "core/model/rows.h"

_Static_assert(GP_STORE_DATASET_PART_ROWS == GP_ROWS_DEFAULT_CHUNK,
               "a part of a data set is one chunk of a fit's reader");

/* An upload in progress tells the store it is alive this often (its parts
 * do too): one untouched for GP_API_UPLOAD_STALE_SECONDS is abandoned. */
#define TOUCH_SECONDS 30.0

struct gp_dataset_upload {
    gp_api *api;
    char name[GP_NAME_MAX + 1];
    char created_by[GP_NAME_MAX + 1];
    gp_api_origin origin; /* the audit row of its end */
    gp_ingest *in;
    int64_t id;           /* its row once the header is read (0 before) */
    uint64_t part;        /* the next part's number */
    gp_sha256 sha;
    uint64_t bytes;       /* of the body so far */
    double touched;       /* when the store last heard of it (wall seconds) */
};

double gp_api_wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the columns' description: [{"name", "count", "mean", "sd", "min", "max"}] ---- */

static json_t *columns_json(const char *const *names, size_t n, const gp_ingest_stats *st)
{
    json_t *a = json_array();
    for (size_t j = 0; a && j < n; j++) {
        json_t *c = json_object();
        if (c == NULL || json_array_append_new(a, c) != 0) {
            json_decref(a);
            return NULL;
        }
        json_object_set_new(c, "name", json_string(names[j]));
        if (st == NULL)
            continue;
        json_object_set_new(c, "count", json_integer((json_int_t)st[j].count));
        json_object_set_new(c, "mean", gp_json_real(st[j].mean));
        json_object_set_new(c, "sd", gp_json_real(st[j].count ? sqrt(st[j].m2 / (double)st[j].count)
                                                              : 0.0));
        json_object_set_new(c, "min", gp_json_real(st[j].min));
        json_object_set_new(c, "max", gp_json_real(st[j].max));
    }
    return a;
}

static char *columns_text(const char *const *names, size_t n, const gp_ingest_stats *st)
{
    json_t *a = columns_json(names, n, st);
    char *text = a ? json_dumps(a, GP_JSON_FLAGS) : NULL;
    json_decref(a);
    return text;
}

/* ---- the upload ---- */

static int on_header(void *ctx, const char *const *names, size_t n, gp_error *err)
{
    gp_dataset_upload *up = ctx;
    char *cols = columns_text(names, n, NULL);
    if (cols == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    up->touched = gp_api_wall_seconds();
    int rc = gp_store_dataset_begin(up->api->store, up->name, n, cols, up->created_by,
                                    up->touched, &up->id, err);
    free(cols);
    return rc;
}

static int on_chunk(void *ctx, uint64_t first, size_t rows, size_t cols, const double *data,
                    gp_error *err)
{
    gp_dataset_upload *up = ctx;
    (void)first; /* part k starts at row k * GP_STORE_DATASET_PART_ROWS: the store checks */
    up->touched = gp_api_wall_seconds();
    return gp_store_dataset_put_part(up->api->store, up->id, up->part++, rows, cols, data,
                                     up->api->cfg.dataset_quota_bytes, up->touched, err);
}

void gp_api_dataset_upload_abort(gp_dataset_upload *up)
{
    if (up == NULL)
        return;
    if (up->id > 0) {
        gp_error err;
        gp_error_clear(&err);
        /* A store that cannot delete it now: the prune will (GP_API_UPLOAD_STALE_SECONDS). */
        (void)gp_store_dataset_abort(up->api->store, up->id, &err);
    }
    gp_ingest_free(up->in);
    free(up);
}

/* The answer of an upload refused for err: the quota's in the flag's terms. */
static void refusal(const gp_api *api, const gp_error *err, gp_response *res)
{
    if (err->code == GP_ESTORAGE && strcmp(err->field, "dataset") == 0) {
        gp_api_fail(res, GP_ESTORAGE, "dataset",
                    "the data sets would pass their quota of %llu MiB (--dataset-quota-mb): "
                    "delete data sets, or ask for a larger quota; nothing of this upload is kept",
                    (unsigned long long)(api->cfg.dataset_quota_bytes >> 20));
        return;
    }
    gp_api_error(err, res);
}

/* The parser a Content-Type asks for (parameters such as charset= aside),
 * 0 for none. */
static int upload_format(const char *ct)
{
    if (ct == NULL)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == strlen("text/csv") && strncasecmp(ct, "text/csv", n) == 0)
        return GP_INGEST_CSV;
    if (n == strlen("application/x-ndjson") && strncasecmp(ct, "application/x-ndjson", n) == 0)
        return GP_INGEST_NDJSON;
    return 0;
}

int gp_api_dataset_upload_begin(gp_api *api, const char *name, const gp_request *req,
                                gp_dataset_upload **out, gp_response *res)
{
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    int format = upload_format(req->content_type);
    if (format == 0) {
        gp_api_fail(res, GP_EMEDIATYPE, NULL,
                    "Content-Type must be text/csv or application/x-ndjson (got %.60s)",
                    req->content_type ? req->content_type : "none");
        return GP_EMEDIATYPE;
    }
    int rc = gp_api_check_name(name, &err);
    /* a replace of a data set in use is refused before its body is sent (and
     * again, for good, by the transaction that would replace it) */
    if (rc == GP_OK)
        rc = gp_store_dataset_check_unused(api->store, name, gp_api_wall_seconds(), 1, &err);
    gp_dataset_upload *up = rc ? NULL : calloc(1, sizeof *up);
    if (rc == GP_OK && up == NULL)
        rc = gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        up->api = api;
        snprintf(up->name, sizeof up->name, "%s", name);
        if (req->key_name && gp_api_valid_name(req->key_name))
            snprintf(up->created_by, sizeof up->created_by, "%s", req->key_name);
        gp_api_origin_of(req, &up->origin);
        gp_sha256_init(&up->sha);
        rc = gp_ingest_new((enum gp_ingest_format)format, GP_STORE_DATASET_PART_ROWS,
                           api->cfg.max_input_dim + 1, on_header, on_chunk, up, &up->in, &err);
    }
    if (rc) {
        gp_api_dataset_upload_abort(up);
        gp_api_error(&err, res);
        return rc;
    }
    *out = up;
    return GP_OK;
}

int gp_api_dataset_upload_feed(gp_dataset_upload *up, const char *data, size_t n,
                               gp_response *res)
{
    gp_error err;
    gp_error_clear(&err);
    gp_sha256_update(&up->sha, data, n);
    up->bytes += n;
    int rc = gp_ingest_feed(up->in, data, n, &err);
    double now = rc == GP_OK && up->id > 0 ? gp_api_wall_seconds() : 0.0;
    if (rc == GP_OK && up->id > 0 && now - up->touched > TOUCH_SECONDS) {
        up->touched = now;
        rc = gp_store_dataset_touch(up->api->store, up->id, now, &err);
    }
    if (rc == GP_OK)
        return GP_OK;
    /* refused: what was written goes now, the answer waits for the body's end */
    if (up->id > 0 && gp_store_dataset_abort(up->api->store, up->id, NULL) == GP_OK)
        up->id = 0;
    refusal(up->api, &err, res);
    return rc;
}

/* The data set's JSON: full with the columns' statistics, else their names. */
static json_t *dataset_json(const gp_dataset_row *row, int full)
{
    json_t *o = json_object(), *cols = json_loads(row->columns, 0, NULL);
    if (o == NULL || !json_is_array(cols)) {
        json_decref(o);
        json_decref(cols);
        return NULL;
    }
    json_object_set_new(o, "name", json_string(row->name));
    json_object_set_new(o, "id", json_integer(row->id));
    json_object_set_new(o, "rows", json_integer((json_int_t)row->n_rows));
    if (!full) {
        json_t *names = json_array();
        size_t j;
        json_t *c;
        json_array_foreach(cols, j, c) json_array_append(names, json_object_get(c, "name"));
        json_decref(cols);
        cols = names;
    }
    json_object_set_new(o, "columns", cols);
    json_object_set_new(o, "sha256", json_string(row->sha256));
    json_object_set_new(o, "bytes", json_integer((json_int_t)row->bytes));
    json_object_set_new(o, "bytes_received", json_integer((json_int_t)row->bytes_received));
    json_object_set_new(o, "created_at", json_string(row->created_at));
    json_object_set_new(o, "created_by",
                        row->created_by[0] ? json_string(row->created_by) : json_null());
    return o;
}

static void respond_dataset(const gp_dataset_row *row, int status, gp_response *out)
{
    json_t *o = dataset_json(row, 1);
    if (o == NULL) {
        gp_api_fail(out, GP_EINTERNAL, "name", "data set '%s' has a corrupt description",
                    row->name);
        return;
    }
    gp_json_respond(o, status, out);
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/datasets/%s", row->name);
    if (out->status == status)
        gp_response_header(out, "Location", loc);
}

/* The end of the body: the last part, then the upload made ready. */
static int finish_upload(gp_dataset_upload *up, gp_dataset_row *row, int *replaced,
                         gp_error *err)
{
    int rc = gp_ingest_finish(up->in, err);
    if (rc)
        return rc;
    char *cols = columns_text(gp_ingest_names(up->in), gp_ingest_columns(up->in),
                              gp_ingest_column_stats(up->in));
    if (cols == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    char sha[65];
    gp_sha256_hex(&up->sha, sha);
    gp_dataset_done done = {gp_ingest_rows(up->in), cols, sha, up->bytes};
    /* the audit row's status, as the replace is likely to be (known for
     * sure only inside the transaction, which records the row) */
    gp_dataset_row had;
    int existed = gp_store_dataset_get(up->api->store, up->name, &had, NULL) == GP_OK;
    gp_dataset_row_free(&had);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&up->origin, &audit, up->name, 0,
                                             existed ? 200 : 201);
    rc = gp_store_dataset_finish(up->api->store, up->id, &done, gp_api_wall_seconds(), a,
                                 replaced, row, err);
    free(cols);
    return rc;
}

void gp_api_dataset_upload_finish(gp_dataset_upload *up, gp_response *res)
{
    gp_error err;
    gp_error_clear(&err);
    gp_dataset_row row;
    memset(&row, 0, sizeof row);
    int replaced = 0;
    int rc = finish_upload(up, &row, &replaced, &err);
    if (rc == GP_OK) {
        up->id = 0; /* ready: no longer the upload's to delete */
        respond_dataset(&row, replaced ? 200 : 201, res);
    } else {
        refusal(up->api, &err, res);
    }
    gp_dataset_row_free(&row);
    gp_api_dataset_upload_abort(up);
}

/* ---- GET, list, DELETE ---- */

void gp_api_get_dataset(gp_api *api, const char *name, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_dataset_row row;
    if (gp_store_dataset_get(api->store, name, &row, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    respond_dataset(&row, 200, out);
    gp_dataset_row_free(&row);
}

void gp_api_list_datasets(gp_api *api, gp_model_visible_fn visible, const void *ctx,
                          gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_dataset_row *rows = NULL;
    size_t n = 0;
    if (gp_store_dataset_list(api->store, &rows, &n, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    json_t *list = json_array(), *o = json_object();
    for (size_t i = 0; list && i < n; i++)
        if (visible == NULL || visible(rows[i].name, ctx))
            json_array_append_new(list, dataset_json(&rows[i], 0));
    gp_dataset_row_free_array(rows, n);
    if (o == NULL || list == NULL) {
        json_decref(o);
        json_decref(list);
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    json_object_set_new(o, "datasets", list);
    gp_json_respond(o, 200, out);
}

void gp_api_delete_dataset(gp_api *api, const char *name, const gp_request *req,
                           gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&o, &audit, name, 0, 204);
    if (gp_store_dataset_delete(api->store, name, gp_api_wall_seconds(), a, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    out->status = 204;
    out->content_type = NULL;
}

int gp_api_dataset_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err)
{
    return gp_store_dataset_prune(api->store, gp_api_wall_seconds() - age_seconds, deleted, err);
}
