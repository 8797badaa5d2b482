/* The study routes of server/routes.def (docs/design/api.md, "Studies"):
 * each answered by api/ on the request thread; a completion that makes a
 * refit due hands its fit jobs here, queued as ordinary async jobs. */
#include "server/http_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

/* A refit a completion made due: ordinary async fit jobs (durable, GET
 * /v1/jobs/{id}), whose ids the completion's answer lists ("refit_jobs").
 * Refused (a full queue): the engine keeps observing into the last
 * version, and the next refit of the schedule comes later. */
static void queue_refits(conn_ctx *ctx, gp_fit_job **fj, size_t n, gp_response *res)
{
    char ids[GP_API_STUDY_REFITS * (GP_ROUTE_ID_MAX + 3) + 32] = "";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char id[GP_ROUTE_ID_MAX];
        gp_error err;
        gp_error_clear(&err);
        if (gp_jobs_submit_async(ctx->srv->jobs, fj[i], id, sizeof id, &err) != 0) {
            gp_log("gpserve: the refit of model '%s' was not queued: %s", gp_fit_job_name(fj[i]),
                   err.message[0] ? err.message : "the fit queue is full or stopping");
            gp_fit_job_free(fj[i]);
            continue;
        }
        o += (size_t)snprintf(ids + o, sizeof ids - o, "%s\"%s\"", o ? "," : "", id);
    }
    /* the answer is a JSON object: the ids go in before its closing brace */
    if (o == 0 || (res->status != 200 && res->status != 201) || res->body == NULL ||
        res->body_len < 2 || res->body[res->body_len - 1] != '}')
        return;
    size_t add = o + 32;
    char *b = realloc(res->body, res->body_len + add);
    if (b == NULL)
        return;
    res->body = b;
    res->body_len--; /* the brace */
    res->body_len += (size_t)snprintf(b + res->body_len, add, ",\"refit_jobs\":[%s]}", ids);
}

static int key_sees_study(const char *name, const void *key)
{
    return gp_key_allows_model(key, name);
}

/* A key limited to some model names is held to the same patterns for
 * study names (the request checks do it for {name}; a new study's name is
 * in its body), and lists only those. */
static void studies(conn_ctx *ctx, const gp_request *req, gp_response *res)
{
    const gp_key *key = &ctx->key;
    gp_model_visible_fn visible = key->name[0] && key->n_models ? key_sees_study : NULL;
    if (ctx->verb == GP_VERB_POST)
        gp_api_create_study(ctx->srv->api, req, visible, key, res);
    else
        gp_api_list_studies(ctx->srv->api, visible, key, res);
}

/* A completion or an attach, and the refits it made due. */
static void complete(conn_ctx *ctx, const gp_request *req, gp_response *res)
{
    const gp_route_match *m = &ctx->match;
    gp_fit_job *refits[GP_API_STUDY_REFITS];
    size_t n = 0;
    if (m->route == GP_ROUTE_STUDY_TRIAL)
        gp_api_study_complete(ctx->srv->api, m->name, (int64_t)m->trial, req, res, refits, &n);
    else
        gp_api_study_attach(ctx->srv->api, m->name, req, res, refits, &n);
    queue_refits(ctx, refits, n, res);
}

void gp_http_study_route(conn_ctx *ctx, const gp_request *req, gp_response *res)
{
    gp_api *api = ctx->srv->api;
    const gp_route_match *m = &ctx->match;
    const int post = ctx->verb == GP_VERB_POST;
    switch (m->route) {
    case GP_ROUTE_STUDIES:
        studies(ctx, req, res);
        break;
    case GP_ROUTE_STUDY:
        if (ctx->verb == GP_VERB_DELETE)
            gp_api_delete_study(api, m->name, req, res);
        else
            gp_api_get_study(api, m->name, res);
        break;
    case GP_ROUTE_STUDY_SUGGEST:
        gp_api_study_suggest(api, m->name, req, res);
        break;
    case GP_ROUTE_STUDY_TRIALS:
        if (post)
            complete(ctx, req, res);
        else
            gp_api_study_trials(api, m->name, req, res);
        break;
    case GP_ROUTE_STUDY_TRIAL:
        if (post)
            complete(ctx, req, res);
        else
            gp_api_study_trial(api, m->name, (int64_t)m->trial, res);
        break;
    default:
        gp_api_fail(res, GP_EINTERNAL, NULL, "not a study route");
        break;
    }
}
