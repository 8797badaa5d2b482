/* Moving a model between daemons: GET /v1/models/{name}/versions/{v}/export
 * answers the portable model file (model_file.c) of a version as it serves
 * it now (an online model with every observation applied); POST
 * /v1/models/import stores such a file as a new version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

/* The state and row of (name, version) as served: exported under the entry's
 * read lock, so no observation is half applied. */
static int export_state(gp_api *api, const char *name, int version, gp_state *st,
                        gp_model_file_source *src, gp_model_meta *meta, gp_error *err)
{
    gp_cache_entry *e = NULL;
    const gp_model *model = NULL;
    int rc = gp_cache_acquire(api, name, version, &e, &model, err);
    if (rc)
        return rc;
    rc = gp_model_export(model, st, err);
    src->n_train = model->n_train; /* the fitted rows and those observed since */
    src->obs_seq = e->seq;
    int v = e->version;
    gp_cache_release(api, e);
    if (rc == GP_OK)
        rc = gp_store_meta(api->store, name, v, meta, err);
    /* the row's width of a request's rows (a distributional input's model
     * works on its encoded width) */
    src->input_dim = meta->input_dim;
    return rc;
}

void gp_api_export_model(gp_api *api, const char *name, int version, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_state st;
    gp_state_init(&st);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_model_file_source src = {0, 0, 0};
    gp_buf b;
    gp_buf_init(&b);
    int rc = export_state(api, name, version, &st, &src, &meta, &err);
    if (rc == GP_OK)
        rc = gp_model_file_write(&meta, &src, &st, &b, &err);
    gp_state_free(&st);
    if (rc) {
        gp_buf_free(&b);
        gp_model_meta_free(&meta);
        gp_api_error(&err, out);
        return;
    }
    char disp[160];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s-v%d.gpmodel\"", meta.name,
             meta.version);
    gp_model_meta_free(&meta);
    gp_buf_respond(&b, 200, out);
    if (out->status == 200) {
        out->content_type = GP_MODEL_FILE_MEDIA_TYPE;
        gp_response_header(out, "Content-Disposition", disp);
    }
}

/* ?name= of the import, or the source's name. */
static int import_name(const gp_request *req, const gp_model_file *f, const char **name,
                       gp_error *err)
{
    *name = f->source_name;
    for (size_t i = 0; i < req->n_query; i++) {
        if (strcmp(req->query[i].key, "name") == 0)
            *name = req->query[i].value;
        else
            return gp_error_set(err, GP_EINVAL, req->query[i].key,
                                "unknown query parameter (import takes only \"name\")");
    }
    if (!gp_api_valid_name(*name))
        return gp_error_set(err, GP_EINVAL, "name", "must match [A-Za-z0-9._-]{1,64}");
    return gp_api_refuse_reserved_name(*name, err);
}

/* The model the file's arrays make, or GP_EDATA saying why not (a file
 * whose checksum holds was written so, but may come from a build whose
 * method reads its state differently). */
static int build_model(const gp_model_file *f, gp_model **model, gp_error *err)
{
    gp_error why;
    gp_error_clear(&why);
    if (gp_model_import(f->method, &f->state, model, &why) == GP_OK)
        return GP_OK;
    return gp_error_set(err, GP_EDATA, why.field[0] ? why.field : "arrays",
                        "the file's arrays do not make a '%s' model of this build: %s",
                        f->method->name, why.message);
}

/* The new version's created_by is the importing key's (absent when auth is
 * off), not the name the exporting daemon recorded: who put it here. */
static int set_created_by(gp_model_file *f, const char *key_name, gp_error *err)
{
    json_error_t je;
    json_t *o = f->info ? json_loads(f->info, 0, &je) : json_object();
    if (!json_is_object(o)) {
        json_decref(o);
        return gp_error_set(err, GP_EDATA, "model", "the file's info is not a JSON object");
    }
    json_object_del(o, "created_by");
    if (key_name)
        json_object_set_new(o, "created_by", json_string(key_name));
    char *text = json_dumps(o, GP_JSON_FLAGS);
    json_decref(o);
    if (text == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    free(f->info);
    f->info = text;
    return GP_OK;
}

void gp_api_import_model(gp_api *api, const gp_request *req, char *body, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_model *model = NULL;
    const char *name = NULL;
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    /* An Idempotency-Key makes a retried upload (a dropped connection after
     * the 201) answer the first import instead of storing the file twice;
     * its fingerprint hashes the body, so it is taken before the body goes. */
    gp_api_idem key;
    int rc = gp_api_idem_parse(req, "import", "", &key, &err);
    if (rc == GP_OK && gp_api_idem_replay(api, &key, out)) {
        free(body);
        return;
    }
    gp_model_file f;
    memset(&f, 0, sizeof f);
    gp_state_init(&f.state);
    if (rc == GP_OK)
        rc = gp_model_file_read(body, req->body_len, &f, &err);
    free(body); /* the arrays are copied out: peak memory is theirs and the model's */
    if (rc == GP_OK)
        rc = import_name(req, &f, &name, &err);
    if (rc == GP_OK)
        rc = set_created_by(&f, req->key_name, &err);
    if (rc == GP_OK)
        rc = build_model(&f, &model, &err);
    gp_idem_put idem = gp_api_idem_put(&key, 201, NULL, gp_api_fit_body, NULL);
    gp_api_origin origin;
    gp_api_origin_of(req, &origin);
    gp_audit_put audit; /* version 0: the store records the one it made */
    const gp_audit_put *a = gp_api_audit_put(&origin, &audit, name, 0, 201);
    if (rc == GP_OK)
        rc = gp_store_save_audited(api->store, name, f.method->name, f.spec, f.info, f.n_train,
                                   f.input_dim, &f.state, NULL, key.present ? &idem : NULL, a,
                                   &meta, &err);
    gp_model_file_free(&f);
    if (rc) {
        gp_model_free(model);
        /* a retry with the key ran beside this one and stored first: its answer */
        if (key.present && gp_api_key_taken(&err) && gp_api_idem_replay(api, &key, out))
            return;
        gp_api_error(&err, out);
        return;
    }
    gp_cache_insert(api, &meta, model); /* the cache owns the model from here */
    json_t *res = gp_api_model_json(&meta, NULL, 0, &err);
    char loc[160];
    snprintf(loc, sizeof loc, "/v1/models/%s/versions/%d", meta.name, meta.version);
    gp_model_meta_free(&meta);
    if (res == NULL) {
        gp_api_error(&err, out);
        return;
    }
    gp_json_respond(res, 201, out);
    if (out->status == 201)
        gp_response_header(out, "Location", loc);
}
