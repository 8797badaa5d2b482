/* The route handlers of the HTTP transport: one per row of the route table
 * (server/routes.def, its handler column), and the dispatch that calls it
 * once the whole request is in; fits go to the fit workers (server/jobs.h),
 * batched routes to the batcher (server/batcher.h), observes wait for the
 * disk (server/syncer.h). */
#include "server/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/util.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- query parameters ---- */
typedef struct query_list {
    gp_query_param *items;
    size_t n, cap;
} query_list;

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    query_list *q = cls;
    if (q->n < q->cap && key) {
        q->items[q->n].key = key;
        q->items[q->n].value = value ? value : "";
        q->n++;
    }
    return MHD_YES;
}

static int get_query(struct MHD_Connection *conn, query_list *q)
{
    q->items = NULL;
    q->n = 0;
    int count = MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, NULL, NULL);
    q->cap = count > 0 ? (size_t)count : 0;
    if (q->cap == 0)
        return 0;
    q->items = calloc(q->cap, sizeof *q->items);
    if (q->items == NULL)
        return -1;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, q);
    return 0;
}

/* ---- fits ---- */
/* The answer when the fit queue refuses a job (async or sync). */
static enum MHD_Result queue_failure(conn_ctx *ctx, int rc)
{
    if (rc == GP_EOVERLOADED)
        return gp_http_fail(ctx, rc, NULL, "the fit queue is full (%ld jobs); retry later",
                    ctx->srv->cfg.queue_size);
    if (rc == GP_ENOTREADY)
        return gp_http_fail(ctx, rc, NULL, "the server is shutting down");
    return gp_http_fail(ctx, GP_EINTERNAL, NULL, "cannot queue the fit");
}

static void fit_before_queue(void *cookie)
{
    conn_ctx *ctx = cookie;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(ctx->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    ctx->fd = ci ? ci->connect_fd : -1;
    MHD_suspend_connection(ctx->conn);
}

/* Whether the client of a suspended synchronous fit still waits: a peek at its
 * socket (libmicrohttpd does not watch a suspended connection) sees an
 * orderly close (0) or a reset. Pipelined bytes or nothing yet: still there. */
static int fit_client_alive(void *cookie)
{
    const conn_ctx *ctx = cookie;
    if (ctx->fd < 0)
        return 1;
    char c;
    ssize_t r = recv(ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0)
        return 0;
    return !(r < 0 && (errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE));
}

static void fit_done(void *cookie, gp_response *res)
{
    conn_ctx *ctx = cookie;
    struct MHD_Connection *conn = ctx->conn;
    ctx->fit_res = *res;
    memset(res, 0, sizeof *res);
    /* From here on the request thread owns ctx again. */
    MHD_resume_connection(conn);
}

static enum MHD_Result handle_fit(conn_ctx *ctx, const gp_request *req)
{
    gp_server *srv = ctx->srv;
    if (atomic_load(&srv->stopping))
        return gp_http_fail(ctx, GP_ENOTREADY, NULL, "the server is shutting down");
    gp_fit_job *fj = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_parse_fit(srv->api, req, &fj, &err) != 0 || fj == NULL) {
        gp_response res;
        memset(&res, 0, sizeof res);
        if (err.code == GP_OK)
            gp_error_set(&err, GP_EINTERNAL, NULL, "the fit request could not be parsed");
        gp_api_error(&err, &res);
        return gp_http_answer(ctx, &res);
    }
    gp_response res;
    memset(&res, 0, sizeof res);
    /* the model's name is in the body: a key limited to some names is held
     * to them here, once it is parsed */
    if (ctx->key.name[0] && !gp_key_allows_model(&ctx->key, gp_fit_job_name(fj))) {
        gp_error_set(&err, GP_EFORBIDDEN, "name",
                     "key '%s' may not name model '%s' (its models= patterns)", ctx->key.name,
                     gp_fit_job_name(fj));
        gp_fit_job_free(fj);
        gp_api_error(&err, &res);
        return gp_http_answer(ctx, &res);
    }
    /* A retry of a keyed fit: the first answer again, nothing fitted. */
    if (gp_api_fit_replay(srv->api, fj, &res)) {
        gp_fit_job_free(fj);
        return gp_http_answer(ctx, &res);
    }
    if (gp_fit_job_async(fj)) {
        char id[GP_ROUTE_ID_MAX];
        int rc = gp_jobs_submit_async(srv->jobs, fj, id, sizeof id, &err);
        if (rc != 0) {
            /* A retry that ran beside this one stored its job first. */
            int replayed = gp_api_key_taken(&err) && gp_api_fit_replay(srv->api, fj, &res);
            gp_fit_job_free(fj);
            if (replayed)
                return gp_http_answer(ctx, &res);
            if (rc == GP_EOVERLOADED || rc == GP_ENOTREADY)
                return queue_failure(ctx, rc);
            gp_api_error(&err, &res); /* the store's answer, e.g. 507 for a full disk */
            return gp_http_answer(ctx, &res);
        }
        gp_api_fit_accepted(id, &res);
        return gp_http_answer(ctx, &res);
    }
    /* Synchronous: count it first, so that shutdown waits for the answer. */
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    int rc = gp_jobs_submit_sync_watched(srv->jobs, fj, fit_before_queue, fit_done,
                                         fit_client_alive, ctx);
    if (rc != 0) {
        ctx->fit_pending = 0;
        atomic_fetch_sub(&srv->sync_pending, 1);
        ctx->state = CS_BODY;
        gp_fit_job_free(fj);
        return queue_failure(ctx, rc);
    }
    return MHD_YES; /* suspended; fit_done resumes us */
}

/* ---- predict and sample: batched on the shared pool (server/batcher.h) ---- */

/* A predict or sample request is no longer arriving (parsed: queued, answered
 * here or refused; or ended some other way), for the batcher's count. */
void gp_http_arrived(conn_ctx *ctx)
{
    if (ctx->batch_counted) {
        ctx->batch_counted = 0;
        gp_batcher_end(ctx->srv->batcher);
    }
}


/* kind: GP_CALL_PREDICT or GP_CALL_SAMPLE; infer: an infer of the V2
 * protocol (a predict). */
static enum MHD_Result handle_point(conn_ctx *ctx, int kind, int infer, const gp_request *req)
{
    gp_server *srv = ctx->srv;
    const gp_route_match *m = &ctx->match;
    gp_point_call *c = NULL;
    gp_response res;
    memset(&res, 0, sizeof res);
    int rc = infer
                 ? gp_api_oip_infer_parse(srv->api, m->name, m->version, req, &c, &res)
                 : gp_api_point_call_parse(srv->api, kind, m->name, req, &c, &res);
    gp_http_arrived(ctx);
    if (rc != 0)
        return gp_http_answer(ctx, &res);
    if (gp_batcher_try_alone(srv->batcher)) {
        gp_api_point_calls_run(srv->api, &c, 1, &res);
        gp_batcher_alone_done(srv->batcher);
        return gp_http_answer(ctx, &res);
    }
    /* Suspended before it is queued: fit_done (a batch answers like a fit)
     * may resume it at once. */
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    MHD_suspend_connection(ctx->conn);
    if (gp_batcher_submit(srv->batcher, c, fit_done, ctx) != 0) {
        gp_api_point_calls_run(srv->api, &c, 1, &res); /* shutting down: answer here */
        fit_done(ctx, &res);
    }
    return MHD_YES;
}

/* ---- answers that wait for the disk (server/syncer.h) ---- */

/* The answer res once commit ticket is on disk: the connection suspended
 * and answered by the syncer (fit_done resumes it, as a fit's answer), so
 * that the request thread serves others meanwhile and every write in flight
 * shares one sync. Waited for here when the syncer is stopping. */
static enum MHD_Result answer_when_durable(conn_ctx *ctx, uint64_t ticket, gp_response *res)
{
    gp_server *srv = ctx->srv;
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    MHD_suspend_connection(ctx->conn);
    if (srv->syncer == NULL || gp_syncer_submit(srv->syncer, ticket, res, fit_done, ctx) != 0) {
        gp_error err;
        gp_error_clear(&err);
        if (gp_api_wait_durable(srv->api, ticket, &err) != 0) {
            gp_response_free(res);
            memset(res, 0, sizeof *res);
            gp_api_error(&err, res);
        }
        fit_done(ctx, res);
    }
    return MHD_YES;
}

/* ---- metrics ---- */
static void handle_metrics(gp_server *srv, gp_response *res)
{
    gp_metrics_gauges g;
    memset(&g, 0, sizeof g);
    gp_jobs_counts(srv->jobs, &g.jobs_queued, &g.jobs_running);
    gp_api_stats st;
    memset(&st, 0, sizeof st);
    gp_api_get_stats(srv->api, &st);
    g.models_loaded = st.models_loaded;
    g.models_not_finite = st.models_not_finite;
    g.jitter_escalations = st.jitter_escalations;
    g.variance_clamps = st.variance_clamps;
    if (srv->batcher) {
        gp_batcher_stats bs;
        gp_batcher_get_stats(srv->batcher, &bs);
        g.batches = bs.batches;
        g.batched_requests = bs.calls;
        g.batched_points = bs.points;
        g.batch_max_requests = bs.max_calls;
    }
    size_t *per_thread = calloc(srv->n_daemons ? srv->n_daemons : 1, sizeof *per_thread);
    if (per_thread && srv->acceptor) {
        gp_acceptor_counts(srv->acceptor, per_thread, srv->n_daemons);
        g.thread_connections = per_thread;
        g.http_threads = srv->n_daemons;
    }
    size_t len = 0;
    char *text = gp_metrics_render(srv->metrics, &g, &len);
    free(per_thread);
    if (text == NULL) {
        gp_api_fail(res, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    res->status = 200;
    res->content_type = METRICS_CONTENT_TYPE;
    res->body = text;
    res->body_len = len;
}

/* ---- the handlers of server/routes.def ----
 *
 * A handler answers a complete request: it fills res (answered by the
 * dispatch), or answers itself (a fit, a batched call, an observe waiting for
 * the disk) and says so with took_over. */
typedef struct route_call {
    conn_ctx *ctx;
    const gp_route_match *m;
    const gp_request *req;
    gp_response *res;
    int answered;          /* the handler answered (or suspended) itself */
    enum MHD_Result ret;   /* then its result */
} route_call;

typedef void (*route_handler)(route_call *c);

static void took_over(route_call *c, enum MHD_Result ret)
{
    c->answered = 1;
    c->ret = ret;
}

static gp_api *api_of(const route_call *c)
{
    return c->ctx->srv->api;
}

static void route_healthz(route_call *c)
{
    gp_api_health(c->res);
}

/* The readiness routes answer 503 while the server stops, whatever the api says. */
static int stopping(route_call *c)
{
    if (!atomic_load(&c->ctx->srv->stopping))
        return 0;
    gp_api_fail(c->res, GP_ENOTREADY, NULL, "the server is shutting down");
    return 1;
}

static void route_readyz(route_call *c)
{
    if (!stopping(c))
        gp_api_readiness(api_of(c), c->res);
}

static void route_metrics(route_call *c)
{
    handle_metrics(c->ctx->srv, c->res);
}

static void route_openapi(route_call *c)
{
    gp_api_openapi(c->res);
}

static void route_methods(route_call *c)
{
    gp_api_methods(api_of(c), c->res);
}

static int key_sees_model(const char *name, const void *key)
{
    return gp_key_allows_model(key, name);
}

static void route_models(route_call *c)
{
    if (c->ctx->verb == GP_VERB_POST) {
        took_over(c, handle_fit(c->ctx, c->req));
        return;
    }
    /* a key limited to some model names lists only those */
    const gp_key *key = &c->ctx->key;
    gp_api_list_models(api_of(c), key->name[0] && key->n_models ? key_sees_model : NULL, key,
                       c->res);
}

static void route_model(route_call *c)
{
    if (c->ctx->verb == GP_VERB_DELETE)
        gp_api_delete_model(api_of(c), c->m->name, c->req, c->res);
    else
        gp_api_get_model(api_of(c), c->m->name, 0, c->res);
}

static void route_aliases(route_call *c)
{
    gp_api_list_aliases(api_of(c), c->m->name, c->res);
}

static void route_alias(route_call *c)
{
    if (c->ctx->verb == GP_VERB_PUT)
        gp_api_put_alias(api_of(c), c->m->name, c->m->alias, c->req, c->req->key_name, c->res);
    else if (c->ctx->verb == GP_VERB_DELETE)
        gp_api_delete_alias(api_of(c), c->m->name, c->m->alias, c->req, c->res);
    else
        gp_api_get_alias(api_of(c), c->m->name, c->m->alias, c->res);
}

static void route_model_version(route_call *c)
{
    if (c->ctx->verb == GP_VERB_DELETE)
        gp_api_delete_version(api_of(c), c->m->name, c->m->version, c->req, c->res);
    else
        gp_api_get_model(api_of(c), c->m->name, c->m->version, c->res);
}

static void route_model_export(route_call *c)
{
    gp_api_export_model(api_of(c), c->m->name, c->m->version, c->res);
}

/* Import stores a version as a fit does: it runs on the request thread
 * (decoding and one save, no optimiser) under the same key. */
static void route_model_import(route_call *c)
{
    /* the import takes the body (a model file can be gigabytes: it frees it
     * once read, so the arrays and the model are not held beside it) */
    char *body = c->ctx->body;
    c->ctx->body = NULL;
    c->ctx->cap = 0;
    gp_api_import_model(api_of(c), c->req, body, c->res);
}

/* A route of the batcher (GP_BATCHED) goes through it when batching is on
 * and the model's method shares work across a batch (first_call decided). */
static int batching(const route_call *c)
{
    return c->ctx->batched;
}

static void route_predict(route_call *c)
{
    if (batching(c))
        took_over(c, handle_point(c->ctx, GP_CALL_PREDICT, 0, c->req));
    else
        gp_api_predict(api_of(c), c->m->name, c->req, c->res);
}

static void route_sample(route_call *c)
{
    if (batching(c))
        took_over(c, handle_point(c->ctx, GP_CALL_SAMPLE, 0, c->req));
    else
        gp_api_sample(api_of(c), c->m->name, c->req, c->res);
}

static void route_observe(route_call *c)
{
    uint64_t ticket = 0;
    gp_api_observe_deferred(api_of(c), c->m->name, c->req, c->res, &ticket);
    if (ticket != 0)
        took_over(c, answer_when_durable(c->ctx, ticket, c->res));
}

static void route_job(route_call *c)
{
    /* a key limited to some model names sees only those models' jobs: another
     * model's job answers as no job at all (its id tells nothing) */
    const gp_key *key = &c->ctx->key;
    char model[GP_KEY_NAME_MAX];
    if (key->name[0] && key->n_models &&
        (gp_jobs_model_name(c->ctx->srv->jobs, c->m->id, model, sizeof model) != 0 ||
         !gp_key_allows_model(key, model))) {
        gp_api_fail(c->res, GP_ENOTFOUND, "id", "no job '%s'", c->m->id);
        return;
    }
    if (c->ctx->verb == GP_VERB_DELETE)
        gp_jobs_cancel(c->ctx->srv->jobs, c->m->id, c->res);
    else
        gp_jobs_get(c->ctx->srv->jobs, c->m->id, c->res);
}

/* The data sets a key sees: a key limited to some model names is held to
 * the same patterns for data set names. */
static void route_datasets(route_call *c)
{
    const gp_key *key = &c->ctx->key;
    gp_api_list_datasets(api_of(c), key->name[0] && key->n_models ? key_sees_model : NULL, key,
                         c->res);
}

/* PUT reaches here once its body has all been fed to the upload
 * (server/request.c, "uploads"): the upload's last step. */
static void route_dataset(route_call *c)
{
    conn_ctx *ctx = c->ctx;
    if (ctx->verb == GP_VERB_PUT) {
        if (ctx->upload == NULL) {
            gp_api_fail(c->res, GP_EINTERNAL, NULL, "the upload was lost");
            return;
        }
        gp_api_dataset_upload_finish(ctx->upload, c->res);
        ctx->upload = NULL;
    } else if (ctx->verb == GP_VERB_DELETE) {
        gp_api_delete_dataset(api_of(c), c->m->name, c->req, c->res);
    } else {
        gp_api_get_dataset(api_of(c), c->m->name, c->res);
    }
}

/* ---- studies ---- */

/* A key limited to some model names uses the studies whose models it may
 * name (study.<name>): a study's trials are its models' data. */
static int key_refuses_study(route_call *c)
{
    const gp_key *key = &c->ctx->key;
    char model[GP_ROUTE_NAME_MAX + 8];
    snprintf(model, sizeof model, "study.%s", c->m->name);
    if (!key->name[0] || !key->n_models || gp_key_allows_model(key, model))
        return 0;
    gp_api_fail(c->res, GP_EFORBIDDEN, "name",
                "key '%s' may not name model '%s' (its models= patterns), nor its study",
                key->name, model);
    return 1;
}

/* A refit a completion made due: an ordinary async fit job (durable, in
 * GET /v1/jobs). Refused (a full queue): the engine keeps observing into the
 * last version, and the next refit of the schedule comes later. */
static void queue_refits(route_call *c, gp_fit_job **fj, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char id[GP_ROUTE_ID_MAX];
        gp_error err;
        gp_error_clear(&err);
        if (gp_jobs_submit_async(c->ctx->srv->jobs, fj[i], id, sizeof id, &err) != 0) {
            gp_log("gpserve: the refit of model '%s' was not queued: %s", gp_fit_job_name(fj[i]),
                   err.message[0] ? err.message : "the fit queue is full or stopping");
            gp_fit_job_free(fj[i]);
        }
    }
}

static void route_studies(route_call *c)
{
    if (c->ctx->verb == GP_VERB_POST)
        gp_api_create_study(api_of(c), c->req, c->res);
    else
        gp_api_list_studies(api_of(c), c->res);
}

static void route_study(route_call *c)
{
    if (key_refuses_study(c))
        return;
    if (c->ctx->verb == GP_VERB_DELETE)
        gp_api_delete_study(api_of(c), c->m->name, c->req, c->res);
    else
        gp_api_get_study(api_of(c), c->m->name, c->res);
}

static void route_study_suggest(route_call *c)
{
    if (!key_refuses_study(c))
        gp_api_study_suggest(api_of(c), c->m->name, c->req, c->res);
}

static void route_study_trials(route_call *c)
{
    if (key_refuses_study(c))
        return;
    if (c->ctx->verb == GP_VERB_POST) {
        gp_fit_job *refits[GP_API_STUDY_REFITS];
        size_t n = 0;
        gp_api_study_attach(api_of(c), c->m->name, c->req, c->res, refits, &n);
        queue_refits(c, refits, n);
    } else {
        gp_api_study_trials(api_of(c), c->m->name, c->req, c->res);
    }
}

static void route_study_trial(route_call *c)
{
    if (key_refuses_study(c))
        return;
    if (c->ctx->verb == GP_VERB_POST) {
        gp_fit_job *refits[GP_API_STUDY_REFITS];
        size_t n = 0;
        gp_api_study_complete(api_of(c), c->m->name, (int64_t)c->m->trial, c->req, c->res,
                              refits, &n);
        queue_refits(c, refits, n);
    } else {
        gp_api_study_trial(api_of(c), c->m->name, (int64_t)c->m->trial, c->res);
    }
}

/* {"keys": N, "names": [...]}: key names are [A-Za-z0-9._-], nothing to escape. */
static void reload_answer(size_t n, const char *names, gp_response *res)
{
    size_t cap = 64 + n * (GP_KEY_NAME_MAX + 3);
    char *b = malloc(cap);
    if (b == NULL) {
        gp_api_fail(res, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    size_t o = (size_t)snprintf(b, cap, "{\"keys\":%zu,\"names\":[", n);
    const char *p = names;
    for (size_t i = 0; i < n && *p; i++, p += strlen(p) + 1)
        o += (size_t)snprintf(b + o, cap - o, "%s\"%s\"", i ? "," : "", p);
    o += (size_t)snprintf(b + o, cap - o, "]}");
    res->status = 200;
    res->content_type = "application/json";
    res->body = b;
    res->body_len = o;
}

/* POST /v1/admin/reload: the keys file again, as SIGHUP reads it. */
static void route_admin_reload(route_call *c)
{
    gp_keyring *kr = c->ctx->srv->keys;
    if (kr == NULL) {
        gp_api_fail(c->res, GP_ECONFLICT, NULL,
                    "authentication is off (no --keys-file or --api-key-file): nothing to reload");
        return;
    }
    size_t n = 0;
    int line = 0;
    char msg[512];
    char *names = calloc(1, GP_KEYS_FILE_MAX / 2);
    if (names == NULL) {
        gp_api_fail(c->res, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    int rc = gp_keyring_reload(kr, &n, names, GP_KEYS_FILE_MAX / 2, &line, msg, sizeof msg);
    if (rc) {
        gp_log("gpserve: reload refused, the old keys stay: %s", msg);
        gp_api_fail(c->res, rc == GP_EDATA ? GP_EDATA : GP_EINTERNAL, "keys_file",
                    "%s; the old keys stay", msg);
    } else {
        gp_log("gpserve: keys reloaded by key '%s': %zu keys", c->ctx->key.name, n);
        if (c->ctx->srv->rate) /* the rate limits of removed keys go */
            gp_ratelimit_retain(c->ctx->srv->rate, names, n);
        reload_answer(n, names, c->res);
    }
    free(names);
}

static void route_audit(route_call *c)
{
    gp_api_audit(api_of(c), c->req, c->res);
}

static void route_v2_server(route_call *c)
{
    gp_api_oip_server_metadata(c->res);
}

static void route_v2_live(route_call *c)
{
    gp_api_oip_live(c->res);
}

static void route_v2_ready(route_call *c)
{
    if (!stopping(c))
        gp_api_oip_ready(api_of(c), c->res);
}

/* /v2/models/{name}[/versions/{v}] (version 0: the latest). */
static void route_v2_model(route_call *c)
{
    gp_api_oip_model_metadata(api_of(c), c->m->name, c->m->version, c->res);
}

static void route_v2_model_ready(route_call *c)
{
    if (!stopping(c))
        gp_api_oip_model_ready(api_of(c), c->m->name, c->m->version, c->res);
}

static void route_v2_infer(route_call *c)
{
    if (batching(c))
        took_over(c, handle_point(c->ctx, GP_CALL_PREDICT, 1, c->req));
    else
        gp_api_oip_infer(api_of(c), c->m->name, c->m->version, c->req, c->res);
}

static void ui_file(route_call *c, const char *file)
{
    gp_api_ui_asset(file,
                    MHD_lookup_connection_value(c->ctx->conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_IF_NONE_MATCH),
                    c->res);
}

static void route_ui_index(route_call *c)
{
    ui_file(c, "index.html");
}

static void route_ui_asset(route_call *c)
{
    ui_file(c, c->m->asset);
}

static const route_handler handlers[GP_ROUTE_COUNT] = {
#define ROUTE(id, pattern, verbs, auth, scopes, batch, shape, body, handler) [GP_ROUTE_##id] = handler,
#include "server/routes.def"
#undef ROUTE
};

/* ---- dispatch of a complete request ---- */
enum MHD_Result gp_http_dispatch(conn_ctx *ctx)
{
    const gp_route_match *m = &ctx->match;
    query_list q;
    if (get_query(ctx->conn, &q) != 0)
        return gp_http_fail(ctx, GP_ENOMEM, NULL, "out of memory");
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type =
        MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req.body = ctx->body;
    req.body_len = ctx->len;
    req.query = q.items;
    req.n_query = q.n;
    req.idempotency_key = MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND,
                                                      "Idempotency-Key");
    req.key_name = ctx->key.name[0] ? ctx->key.name : NULL;
    /* Who and what, for the audit trail of a write */
    char route[64] = "";
    if (ctx->audit_write) /* formatted only for a write: snprintf costs ~500 instructions */
        gp_http_route_text(ctx, route, sizeof route);
    req.request_id = ctx->rid;
    req.route = ctx->audit_write ? route : NULL;
    gp_response res;
    memset(&res, 0, sizeof res);
    route_call c = {.ctx = ctx, .m = m, .req = &req, .res = &res};
    if (m->route >= 0 && m->route < GP_ROUTE_COUNT)
        handlers[m->route](&c);
    else
        gp_api_fail(&res, GP_ENOTFOUND, NULL, "no route %s %s", ctx->method, ctx->path);
    free(q.items);
    if (c.answered)
        return c.ret;
    if (res.status == 0)
        gp_api_fail(&res, GP_EINTERNAL, NULL, "the handler produced no response");
    return gp_http_answer(ctx, &res);
}
