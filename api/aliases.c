/* Aliases: movable labels of a model's versions ("champion" -> 7), set,
 * listed and removed through /v1/models/{name}/aliases[/{alias}]
 * (docs/design/api.md, "Aliases"), and resolved wherever a version is taken:
 * the {v} of a path (the server resolves it once before any handler runs) and
 * the "version" of a predict, sample or observe body (gp_api_get_version).
 * The store keeps them (store.h, "aliases"): a label always names an existing
 * version, and every replica sees a change through the change generation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const put_keys[] = {"version", NULL};

static json_t *alias_json(const char *name, const gp_alias_row *row)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    if (name)
        json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "alias", json_string(row->alias));
    json_object_set_new(o, "version", json_integer(row->version));
    json_object_set_new(o, "updated_at", json_string(row->updated_at));
    json_object_set_new(o, "updated_by",
                        row->updated_by[0] ? json_string(row->updated_by) : json_null());
    /* the roll back's target: what the alias pointed at before its last move */
    json_object_set_new(o, "previous_version", row->previous_version
                                                   ? json_integer(row->previous_version)
                                                   : json_null());
    return o;
}

static void respond_alias(const char *name, const gp_alias_row *row, gp_response *out)
{
    json_t *o = alias_json(name, row);
    if (o == NULL)
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
    else
        gp_json_respond(o, 200, out);
}

/* The {alias} of a route, checked like the store checks it (the route's
 * own check makes this one unreachable through HTTP). */
static int check_alias(const char *name, const char *alias, gp_error *err)
{
    int rc = gp_api_check_name(name, err);
    if (rc == GP_OK && !gp_store_alias_valid(alias))
        rc = gp_error_set(err, GP_EINVAL, "alias",
                          "an alias must match [A-Za-z][A-Za-z0-9_.-]{0,63}");
    return rc;
}

json_t *gp_api_aliases_object(gp_api *api, const char *name, gp_error *err)
{
    gp_alias_row *rows = NULL;
    size_t n = 0;
    if (gp_rows_aliases(api, name, &rows, &n, err))
        return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        json_object_set_new(o, rows[i].alias, json_integer(rows[i].version));
    free(rows);
    if (o == NULL)
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return o;
}

void gp_api_list_aliases(gp_api *api, const char *name, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_alias_row *rows = NULL;
    size_t n = 0;
    int rc = gp_api_check_name(name, &err);
    if (rc == GP_OK)
        rc = gp_store_aliases(api->store, name, &rows, &n, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        json_array_append_new(list, alias_json(NULL, &rows[i]));
    free(rows);
    json_t *o = list ? json_pack("{s:s, s:o}", "name", name, "aliases", list) : NULL;
    if (o == NULL)
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
    else
        gp_json_respond(o, 200, out);
}

void gp_api_get_alias(gp_api *api, const char *name, const char *alias, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_alias_row row;
    int rc = check_alias(name, alias, &err);
    if (rc == GP_OK)
        rc = gp_store_alias_get(api->store, name, alias, &row, &err);
    if (rc)
        gp_api_error(&err, out);
    else
        respond_alias(name, &row, out);
}

/* {"version": N} or {"version": "other-alias"} (promote what another alias
 * points at); nothing else. */
static int parse_put(gp_api *api, const char *name, const gp_request *req, int *version,
                     gp_error *err)
{
    json_t *obj = NULL;
    char via[GP_ALIAS_MAX + 1];
    int rc = gp_api_check_json(req, err);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, &obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(obj, put_keys, NULL, err);
    if (rc == GP_OK && json_object_get(obj, "version") == NULL)
        rc = gp_error_set(err, GP_EINVAL, "version",
                          "version (the version the alias points at) is missing");
    if (rc == GP_OK)
        rc = gp_api_get_version(api, name, obj, version, via, err);
    json_decref(obj);
    return rc;
}

void gp_api_put_alias(gp_api *api, const char *name, const char *alias, const gp_request *req,
                      const char *by, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_alias_row row;
    int version = 0;
    int rc = check_alias(name, alias, &err);
    if (rc == GP_OK)
        rc = parse_put(api, name, req, &version, &err);
    gp_api_origin origin;
    gp_api_origin_of(req, &origin);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&origin, &audit, name, version, 200);
    if (rc == GP_OK)
        rc = gp_store_alias_set_audited(api->store, name, alias, version, by, a, &row, &err);
    if (rc)
        gp_api_error(&err, out);
    else
        respond_alias(name, &row, out);
}

void gp_api_delete_alias(gp_api *api, const char *name, const char *alias,
                         const gp_request *req, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_api_origin origin;
    gp_api_origin_of(req, &origin);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&origin, &audit, name, 0, 204);
    int rc = check_alias(name, alias, &err);
    if (rc == GP_OK)
        rc = gp_store_alias_delete_audited(api->store, name, alias, a, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    out->status = 204;
    out->content_type = "application/json";
}
