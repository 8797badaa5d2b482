/* gpserve-fit: one rank of a fit sharded over MPI (docs/design/scale-out.md,
 * "Fits beyond one machine"). Every rank runs
 *
 *   mpirun -np P gpserve-fit --db DB (--job ID --owner TOKEN | --request FILE.json)
 *          [--out FILE] [--chunk ROWS] [--threads N] [--stats]
 *
 * opens the store (a SQLite file on a filesystem every rank sees, or
 * PostgreSQL), rebuilds the fit (the durable job's stored request, held by
 * the daemon whose owner token is given, or a request file), reads its shard
 * of the rows (rank r of P: rows [r N / P, (r + 1) N / P)) and fits with the
 * sums over every shard (mpi/rank.h, mpi/reduce.h): every rank takes the same
 * optimiser steps. The ranks then agree on the outcome (mpi/agree.h) and
 * rank 0 acts on it: it saves the version (for a job in the transaction that
 * ends the job succeeded; with --out it also writes the model file), or
 * writes the job's end (cancelled, failed). A failure is also written to
 * stderr as one JSON line {"error": {"code", "message", "field", "rank"}}.
 * With --stats rank 0 ends its standard output with one JSON line of what
 * the run spent (mpi/stats.h).
 *
 * Exit status (every rank's, once rank 0 has written the outcome): 0 saved;
 * 1 failed; 2 bad arguments; 3 cancelled; 4 the job is no longer held by the
 * owner (another daemon took it over): nothing written. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/base/parallel.h"
#include "core/model/rows.h"
#include "mpi/agree.h"
#include "mpi/rank.h"
#include "mpi/stats.h"

enum { EXIT_SAVED = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_CANCELLED = 3, EXIT_LOST = 4 };

/* A rank whose failure the others did not see waits this long for them. */
#define LONELY_DEADLINE_SECONDS 30.0

typedef struct args {
    const char *db, *job, *owner, *request, *out;
    long chunk, threads;
    int stats;
} args;

typedef struct run {
    args a;
    int rank, size;
    MPI_Comm ctl; /* the agreement's communicator */
    gp_api *api;
    gp_fit_job *fj;
    gp_job_info info;
    gp_fit_shard *shard;
    gp_mpi_rank mr;
    int mr_ready;
    /* For --stats. */
    double started, fit_seconds;
    int evaluations, iterations;
} run;

static const char usage[] =
    "Usage: mpirun -np P gpserve-fit --db DB (--job ID --owner TOKEN | --request FILE.json)\n"
    "                   [--out FILE] [--chunk ROWS] [--threads N] [--stats]\n"
    "One rank of a fit sharded over MPI: rank r of P fits over rows [r N / P, (r + 1) N / P)\n"
    "with the sums over every rank; rank 0 saves the version in DB.\n"
    "  --db DB          SQLite file every rank can open, or a postgresql:// URL\n"
    "  --job ID         the durable job to run (its daemon launches gpserve-fit)\n"
    "  --owner TOKEN    the holder of the job (the daemon's owner token)\n"
    "  --request FILE   a fit request (JSON) to run instead of a job\n"
    "  --out FILE       also write the saved version's model file there\n"
    "  --chunk ROWS     rows one read of a request's X and y delivers (default 4096;\n"
    "                   a data set is read in its parts of 4096)\n"
    "  --threads N      compute threads of each rank (default 1)\n"
    "  --stats          rank 0 ends its output with one JSON line: rows, evaluations,\n"
    "                   seconds, reductions and their bytes and seconds, peak RSS\n"
    "Exit status: 0 saved, 1 failed, 2 bad arguments, 3 cancelled, 4 job taken over.\n";

/* ---- reporting ---- */

/* The error as one JSON line on stderr (what the daemon reads back). */
static void report(const gp_error *err, int code, int rank)
{
    json_t *e = json_pack("{s:s,s:s,s:i}", "code", gp_status_name(code), "message",
                          err->message, "rank", rank);
    if (e && err->field[0])
        json_object_set_new(e, "field", json_string(err->field));
    json_t *o = e ? json_pack("{s:o}", "error", e) : NULL;
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    fprintf(stderr, "%s\n", text ? text : "{\"error\":{\"code\":\"internal\"}}");
    free(text);
    json_decref(o);
}

/* ---- arguments ---- */

static int parse_args(int argc, char **argv, args *a, char *msg, size_t size)
{
    memset(a, 0, sizeof *a);
    a->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0)
            return 1;
        if (strcmp(k, "--stats") == 0) {
            a->stats = 1;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(msg, size, "%s needs a value", k);
            return -1;
        }
        const char *v = argv[++i];
        char *end = NULL;
        if (strcmp(k, "--db") == 0)
            a->db = v;
        else if (strcmp(k, "--job") == 0)
            a->job = v;
        else if (strcmp(k, "--owner") == 0)
            a->owner = v;
        else if (strcmp(k, "--request") == 0)
            a->request = v;
        else if (strcmp(k, "--out") == 0)
            a->out = v;
        else if (strcmp(k, "--chunk") == 0 && (a->chunk = strtol(v, &end, 10)) > 0 && !*end)
            ;
        else if (strcmp(k, "--threads") == 0 && (a->threads = strtol(v, &end, 10)) > 0 &&
                 a->threads <= 1024 && !*end)
            ;
        else {
            snprintf(msg, size, "unknown option or bad value: %s %s", k, v);
            return -1;
        }
    }
    if (a->db == NULL)
        snprintf(msg, size, "--db is required");
    else if ((a->job == NULL) == (a->request == NULL))
        snprintf(msg, size, "give --job ID (with --owner) or --request FILE, one of them");
    else if ((a->job == NULL) != (a->owner == NULL))
        snprintf(msg, size, "--job and --owner go together");
    else
        return 0;
    return -1;
}

/* ---- set-up ---- */

static int read_file(const char *path, char **out, size_t *len, gp_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return gp_error_set(err, GP_EINVAL, "request", "cannot open '%s'", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad) {
        free(buf);
        return gp_error_set(err, bad ? GP_EINVAL : GP_ENOMEM, "request", "cannot read '%s'",
                            path);
    }
    *out = buf;
    *len = n;
    return GP_OK;
}

static int load_fit(run *r, gp_error *err)
{
    if (r->a.job)
        return gp_api_job_open(r->api, r->a.job, r->a.owner, &r->fj, &r->info, err);
    char *body = NULL;
    size_t len = 0;
    int rc = read_file(r->a.request, &body, &len, err);
    if (rc)
        return rc;
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = body;
    req.body_len = len;
    rc = gp_api_parse_fit(r->api, &req, &r->fj, err);
    free(body);
    if (rc == GP_OK)
        snprintf(r->info.model_name, sizeof r->info.model_name, "%s", gp_fit_job_name(r->fj));
    return rc;
}

static int set_up(run *r, gp_error *err)
{
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = r->a.db;
    int rc = gp_api_open(&cfg, &r->api, err);
    if (rc == GP_OK)
        rc = load_fit(r, err);
    if (rc == GP_OK)
        rc = gp_api_fit_shard_open(r->api, r->fj, r->rank, r->size, (size_t)r->a.chunk,
                                   &r->shard, err);
    if (rc == GP_OK)
        rc = gp_mpi_rank_init(&r->mr, MPI_COMM_WORLD, gp_fit_shard_rows(r->shard), r->api,
                              r->a.job, r->a.owner, &r->info, err);
    r->mr_ready = rc == GP_OK;
    return rc;
}

static void tear_down(run *r)
{
    if (r->mr_ready)
        gp_mpi_rank_free(&r->mr);
    gp_fit_shard_close(r->shard);
    gp_fit_job_free(r->fj);
    gp_job_info_free(&r->info);
    gp_api_close(r->api);
}

/* ---- rank 0's acts ---- */

/* The job's end (cancelled, or failed with err), by rank 0 of a job. */
static void end_job(run *r, const char *status, const gp_error *err)
{
    if (r->a.job == NULL || r->api == NULL)
        return;
    r->info.status = status;
    gp_error_clear(&r->info.error);
    if (err)
        r->info.error = *err;
    gp_error werr;
    gp_error_clear(&werr);
    gp_api_job_finish(r->api, &r->info, r->a.owner, &werr);
}

/* The model file of the version res names (its Location) into path. */
static int write_model_file(run *r, const gp_response *res, gp_error *err)
{
    const char *loc = NULL;
    for (size_t i = 0; i < res->n_headers; i++)
        if (strcmp(res->headers[i].name, "Location") == 0)
            loc = res->headers[i].value;
    const char *slash = loc ? strrchr(loc, '/') : NULL;
    int version = slash ? atoi(slash + 1) : 0;
    if (version <= 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "the saved version is not known");
    gp_response file;
    memset(&file, 0, sizeof file);
    gp_api_export_model(r->api, gp_fit_job_name(r->fj), version, &file);
    FILE *f = file.status == 200 ? fopen(r->a.out, "wb") : NULL;
    int ok = f && fwrite(file.body, 1, file.body_len, f) == file.body_len;
    if (f && fclose(f) != 0)
        ok = 0;
    gp_response_free(&file);
    return ok ? GP_OK : gp_error_set(err, GP_EINVAL, "out", "cannot write '%s'", r->a.out);
}

/* Rank 0 after an agreed success: save (the model is taken). */
static int save(run *r, gp_model *model)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    int rc = gp_api_save_fit(r->api, r->fj, model, &res, NULL);
    gp_error err;
    gp_error_clear(&err);
    if (rc == GP_OK) {
        printf("%.*s\n", (int)res.body_len, res.body ? res.body : "");
        fflush(stdout);
        if (r->a.out)
            rc = write_model_file(r, &res, &err);
    } else {
        gp_error_set(&err, rc, NULL, "the fitted model was not saved (%s)", gp_status_name(rc));
    }
    gp_response_free(&res);
    if (rc == GP_ECONFLICT)
        return EXIT_LOST; /* another daemon holds the job: it writes the outcome */
    if (rc) {
        end_job(r, "failed", &err);
        report(&err, rc, 0);
        return EXIT_FAILED;
    }
    return EXIT_SAVED;
}

/* Rank 0 after an agreed failure or cancel. */
static int act_on(run *r, const gp_mpi_outcome *o)
{
    if (o->code == GP_ECANCELLED) {
        if (o->stop == GP_MPI_LOST)
            return EXIT_LOST;
        end_job(r, "cancelled", NULL);
        return EXIT_CANCELLED;
    }
    gp_error err = o->error;
    if (r->size > 1) /* name the rank: its shard, its machine */
        snprintf(err.message, sizeof err.message, "rank %d of %d: %.200s", o->rank, r->size,
                 o->error.message);
    end_job(r, "failed", &err);
    report(&err, o->code, o->rank);
    return EXIT_FAILED;
}

/* ---- the run ---- */

/* Agree on a step's end; a rank left alone aborts every rank. */
static void agree(run *r, int rc, const gp_error *err, gp_mpi_outcome *o)
{
    int together = r->mr_ready && gp_mpi_rank_ended_together(&r->mr);
    int remote = r->mr_ready && r->mr.remote && r->mr.local.code == GP_OK;
    const gp_error *why = r->mr_ready && r->mr.local.code != GP_OK ? &r->mr.local : err;
    int code = r->mr_ready && r->mr.local.code != GP_OK ? r->mr.local.code : rc;
    if (gp_mpi_agree(r->ctl, code, why, r->mr_ready ? r->mr.stop : 0, remote, together,
                     LONELY_DEADLINE_SECONDS, o) != GP_OK) {
        gp_error e = *why;
        snprintf(e.message, sizeof e.message, "rank %d of %d: %.180s (the other ranks did not "
                 "stop: the job is aborted)", r->rank, r->size, why->message);
        if (r->rank == 0)
            end_job(r, "failed", &e);
        report(&e, code, r->rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILED);
    }
}

static int fit_and_save(run *r)
{
    gp_error err;
    gp_error_clear(&err);
    gp_mpi_outcome o;
    int rc = set_up(r, &err);
    agree(r, rc, &err, &o);
    if (o.code != GP_OK)
        return r->rank == 0 ? act_on(r, &o) : (o.code == GP_ECANCELLED ? EXIT_CANCELLED
                                                                        : EXIT_FAILED);
    if (r->rank == 0 && r->a.job) { /* the job's row shows a run from here */
        gp_mpi_rank_progress(&r->mr, 0, r->info.max_iterations, NAN);
        gp_mpi_rank_flush_progress(&r->mr);
    }
    gp_model *model = NULL;
    gp_error_clear(&err);
    double t0 = MPI_Wtime();
    rc = gp_api_fit_model(r->api, r->fj, gp_mpi_rank_rows(&r->mr), gp_mpi_rank_progress, &r->mr,
                          &model, &err);
    r->fit_seconds = MPI_Wtime() - t0;
    if (model) {
        r->evaluations = model->diag.evaluations;
        r->iterations = model->diag.iterations;
    }
    agree(r, rc, &err, &o);
    if (o.code != GP_OK) {
        gp_model_free(model);
        return r->rank == 0 ? act_on(r, &o) : (o.code == GP_ECANCELLED ? EXIT_CANCELLED
                                                                        : EXIT_FAILED);
    }
    if (r->rank != 0) {
        gp_model_free(model);
        return EXIT_SAVED;
    }
    gp_mpi_rank_flush_progress(&r->mr); /* the last iteration; the save keeps it */
    return save(r, model);
}

/* --stats: one collective over every rank, rank 0 prints. */
static void report_stats(run *r, int status)
{
    static const char *const names[] = {"saved", "failed", "usage", "cancelled", "lost"};
    gp_mpi_stats s = {.method = r->fj ? gp_fit_job_method(r->fj) : NULL,
                      .status = status >= 0 && status <= EXIT_LOST ? names[status] : "failed",
                      .started = r->started, .fit_seconds = r->fit_seconds,
                      .evaluations = r->evaluations, .iterations = r->iterations,
                      .rank = r->mr_ready ? &r->mr : NULL};
    if (r->shard) {
        const gp_rows *rows = gp_fit_shard_rows(r->shard);
        s.rows = rows->n;
        s.rows_total = rows->n_total;
        s.chunk = rows->chunk;
    }
    gp_mpi_stats_report(r->ctl, &s);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    run r;
    memset(&r, 0, sizeof r);
    r.started = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.size);
    char msg[256] = "";
    int parsed = parse_args(argc, argv, &r.a, msg, sizeof msg);
    if (parsed != 0) { /* the same on every rank: each leaves alike */
        if (r.rank == 0)
            fprintf(parsed > 0 ? stdout : stderr, "%s%s%s", parsed > 0 ? "" : "gpserve-fit: ",
                    parsed > 0 ? "" : msg, parsed > 0 ? usage : "\n");
        MPI_Finalize();
        return parsed > 0 ? 0 : EXIT_USAGE;
    }
    /* Every rank's BLAS on one thread: ranks share a machine's cores. */
    gp_parallel_set_threads((int)r.a.threads);
    gp_blas_set_threads(1);
    MPI_Comm_dup(MPI_COMM_WORLD, &r.ctl);
    int status = fit_and_save(&r);
    /* Every rank leaves with rank 0's status once rank 0 has written the
     * outcome: mpirun stops the other processes at the first non-zero exit,
     * which must not come before rank 0's writes. */
    MPI_Bcast(&status, 1, MPI_INT, 0, r.ctl);
    if (r.a.stats)
        report_stats(&r, status);
    tear_down(&r);
    MPI_Comm_free(&r.ctl);
    MPI_Finalize();
    return status;
}
