/* A distributed fit's run (docs/design/scale-out.md, "Fits beyond one
 * machine"): the job's holder starts the launcher (mpirun) with gpserve-fit
 * on --job ID --owner OWNER, so that every write of rank 0 (progress, the
 * version with the job's end) carries this daemon's ownership, and watches
 * it on the fit worker that took the job, while the keeper goes on renewing
 * the lease:
 *   - progress: rank 0 writes it into the job; this daemon reads it back
 *     about twice a second into memory (GET answers from there), never
 *     writing it again (the store has it);
 *   - cancel (DELETE here, or a request from another daemon the keeper
 *     brought): written to the job as a cancel request, which rank 0 polls
 *     and every rank obeys at the same step; if the ranks have not ended
 *     CANCEL_GRACE_SECONDS later, SIGTERM to the process group, then SIGKILL;
 *   - a graceful stop (SIGTERM of the daemon) or a job taken over: SIGTERM to
 *     the process group at once (the job is handed back or is another's).
 *     The keeper cannot tell a job taken over from one that rank 0 has just
 *     ended (both leave the store's list of jobs we hold), so the job is
 *     read first: ended, its ranks are leaving on their own and get
 *     ENDED_GRACE_SECONDS to do so (a signal would hit mpirun inside its own
 *     ending, where Open MPI 4.1 crashes, and cut the ranks' finalize);
 *   - the end: the job as the store has it. Rank 0 wrote a success (with its
 *     version), a cancel or a failure; a launcher that ended without an
 *     outcome (a rank died: Open MPI then stops every rank) fails the job
 *     with the code interrupted, naming what mpirun said of the rank and its
 *     exit status. It is not run again: a rank's death is the fit's (memory,
 *     a lost machine), not a daemon's, which --job-attempts is for. */
#include "server/jobs_internal.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/launch.h"
#include "server/util.h"

#define CANCEL_GRACE_SECONDS 10.0
#define ENDED_GRACE_SECONDS 10.0
#define KILL_GRACE_SECONDS 3.0
#define MIRROR_SECONDS 0.5
#define MAX_WORDS 64

/* ---- the command ---- */

typedef struct command {
    char *argv[MAX_WORDS + 1];
    char *words; /* the --mpi-args copy the argv points into */
    char np[16];
} command;

static int build_command(const gp_jobs *js, const job *j, int ranks, command *cmd)
{
    memset(cmd, 0, sizeof *cmd);
    size_t n = 0;
    cmd->argv[n++] = (char *)js->mpi.launcher;
    if (js->mpi.args && (cmd->words = strdup(js->mpi.args)) == NULL)
        return -1;
    for (char *save = NULL, *w = cmd->words ? strtok_r(cmd->words, " \t", &save) : NULL;
         w && n < MAX_WORDS - 14; w = strtok_r(NULL, " \t", &save))
        cmd->argv[n++] = w;
    if (js->mpi.hostfile) {
        cmd->argv[n++] = "--hostfile";
        cmd->argv[n++] = (char *)js->mpi.hostfile;
    }
    snprintf(cmd->np, sizeof cmd->np, "%d", ranks);
    cmd->argv[n++] = "-np";
    cmd->argv[n++] = cmd->np;
    cmd->argv[n++] = (char *)js->mpi.program;
    cmd->argv[n++] = "--db";
    cmd->argv[n++] = (char *)(js->mpi.db ? js->mpi.db : "./gpserve.db");
    cmd->argv[n++] = "--job";
    cmd->argv[n++] = (char *)j->info.id;
    cmd->argv[n++] = "--owner";
    cmd->argv[n++] = (char *)js->owner;
    cmd->argv[n] = NULL;
    return 0;
}

/* ---- while it runs ---- */

/* The job's progress as rank 0 wrote it, into memory (not written again). */
static void mirror_progress(gp_jobs *js, job *j)
{
    if (js->ops.load == NULL)
        return;
    gp_job_info stored;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.load(js->api, j->info.id, &stored, &err) != GP_OK)
        return;
    pthread_mutex_lock(&js->lock);
    if (stored.iteration > j->info.iteration || stored.has_objective) {
        j->info.iteration = stored.iteration;
        if (stored.max_iterations > 0)
            j->info.max_iterations = stored.max_iterations;
        j->info.has_objective = stored.has_objective;
        j->info.objective = stored.objective;
        j->info.elapsed_seconds = gp_monotonic_seconds() - j->started;
    }
    pthread_mutex_unlock(&js->lock);
    gp_job_info_free(&stored);
}

/* Ask rank 0 to stop: the job's cancel request in the store. */
static void request_cancel(gp_jobs *js, job *j)
{
    if (js->ops.cancel_stored == NULL)
        return;
    gp_response r;
    memset(&r, 0, sizeof r);
    js->ops.cancel_stored(js->api, j->info.id, gp_wall_seconds(), &r);
    gp_response_free(&r);
}

typedef struct watch {
    double cancel_at, term_at, kill_at; /* monotonic seconds; 0: not yet */
    double ended_at; /* when the store showed the job ended by rank 0 */
    int lost_checked; /* the store was read after the keeper found the job gone */
    double mirror_at;
} watch;

/* Has the job ended in the store (rank 0 wrote its outcome)? */
static int ended_in_store(gp_jobs *js, job *j)
{
    if (js->ops.load == NULL)
        return 0;
    gp_job_info stored;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.load(js->api, j->info.id, &stored, &err) != GP_OK)
        return 0;
    int ended = stored.status && gp_jobs_terminal(stored.status);
    gp_job_info_free(&stored);
    return ended;
}

/* One look at the job's stop flag: a cancel is asked of the ranks first;
 * a stop or a take-over ends the process group, unless rank 0 ended the job
 * (the ranks are leaving: they get ENDED_GRACE_SECONDS). */
static void enforce_stop(gp_jobs *js, job *j, gp_child *c, watch *w, double now)
{
    int why = atomic_load(&j->cancel);
    if (why == STOP_USER && w->cancel_at == 0) {
        w->cancel_at = now;
        request_cancel(js, j);
    }
    if (why == STOP_LOST && !w->lost_checked) {
        w->lost_checked = 1;
        if (ended_in_store(js, j))
            w->ended_at = now;
    }
    int end_now = why != STOP_NONE && why != STOP_USER && w->ended_at == 0;
    int overdue = (w->cancel_at > 0 && now - w->cancel_at > CANCEL_GRACE_SECONDS) ||
                  (w->ended_at > 0 && now - w->ended_at > ENDED_GRACE_SECONDS);
    if ((end_now || overdue) && w->term_at == 0) {
        w->term_at = now;
        gp_child_signal(c, SIGTERM);
    }
    if (w->term_at > 0 && w->kill_at == 0 && now - w->term_at > KILL_GRACE_SECONDS) {
        w->kill_at = now;
        gp_child_signal(c, SIGKILL);
    }
}

/* ---- the end ---- */

/* The line of the launcher's standard error that says why (gpserve-fit's
 * JSON error, else Open MPI's line naming the rank), into out. */
static void why_line(const char *tail, char *out, size_t size)
{
    out[0] = '\0';
    /* Open MPI's refusal of root is a page of advice: say what to set. */
    if (strstr(tail, "attempt to run as root")) {
        snprintf(out, size, "mpirun refuses to run as root: give the daemon "
                 "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in its "
                 "environment, or --mpi-args --allow-run-as-root");
        return;
    }
    const char *keys[] = {"{\"error\":", "process rank", "exited on signal", NULL};
    for (size_t k = 0; keys[k] && !out[0]; k++) {
        const char *at = NULL, *p = tail;
        while ((p = strstr(p, keys[k])) != NULL)
            at = p++;
        if (at == NULL)
            continue;
        const char *start = at;
        while (start > tail && start[-1] != '\n')
            start--;
        size_t len = strcspn(start, "\n");
        snprintf(out, size, "%.*s", (int)len, start);
    }
}

/* rc and res of a run whose launcher ended (status in words), from the job
 * as the store has it now. */
static int outcome(gp_jobs *js, job *j, const gp_child *c, const char *status, gp_response *res)
{
    gp_job_info stored;
    gp_error err;
    gp_error_clear(&err);
    int rc = js->ops.load ? js->ops.load(js->api, j->info.id, &stored, &err)
                          : gp_error_set(&err, GP_EINTERNAL, NULL, "no store");
    if (rc != GP_OK) {
        gp_api_error(&err, res);
        return rc;
    }
    int why = atomic_load(&j->cancel);
    if (strcmp(stored.status, "succeeded") == 0 && stored.model_json) {
        res->status = 201; /* the body finish_async keeps as the job's model */
        res->content_type = "application/json";
        res->body = stored.model_json;
        res->body_len = strlen(stored.model_json);
        stored.model_json = NULL;
        rc = GP_OK;
    } else if (strcmp(stored.status, "cancelled") == 0) {
        if (why == STOP_NONE) /* the ranks saw a cancel the keeper has not brought yet */
            atomic_store(&j->cancel, STOP_USER);
        rc = GP_ECANCELLED;
    } else if (strcmp(stored.status, "failed") == 0) {
        gp_api_error(&stored.error, res);
        rc = stored.error.code ? stored.error.code : GP_EINTERNAL;
    } else if (why != STOP_NONE) {
        rc = GP_ECANCELLED; /* stopped here: cancelled, handed back, or another's */
    } else {
        char line[512];
        why_line(c->tail, line, sizeof line);
        rc = GP_EINTERRUPTED;
        gp_api_fail(res, rc, "distributed", "the distributed fit ended without an outcome "
                    "(%s: %s)%s%.400s", js->mpi.launcher, status, line[0] ? ": " : "", line);
    }
    gp_job_info_free(&stored);
    return rc;
}

int gp_jobs_run_distributed(gp_jobs *js, job *j, gp_response *res)
{
    int ranks = js->ops.ranks(j->fit);
    command cmd;
    gp_child c;
    char msg[256];
    if (build_command(js, j, ranks, &cmd) != 0 ||
        gp_child_spawn(&c, cmd.argv, msg, sizeof msg) != 0) {
        if (cmd.argv[0] == NULL)
            snprintf(msg, sizeof msg, "out of memory");
        free(cmd.words);
        gp_api_fail(res, GP_EINTERNAL, "distributed", "the distributed fit could not start: %s "
                    "(--mpi-launcher %s)", msg, js->mpi.launcher);
        return GP_EINTERNAL;
    }
    gp_log("gpserve: job %s: %s -np %d %s (pid %ld)", j->info.id, js->mpi.launcher, ranks,
           js->mpi.program, (long)c.pid);
    free(cmd.words);
    watch w = {0, 0, 0, 0, 0, 0};
    while (!gp_child_wait(&c, 250)) {
        double now = gp_monotonic_seconds();
        enforce_stop(js, j, &c, &w, now);
        if (now - w.mirror_at >= MIRROR_SECONDS) {
            w.mirror_at = now;
            mirror_progress(js, j);
        }
    }
    gp_child_close(&c);
    mirror_progress(js, j); /* rank 0's last write, before its save */
    char status[96];
    gp_child_describe(&c, status, sizeof status);
    int rc = outcome(js, j, &c, status, res);
    gp_log("gpserve: job %s: %s ended (%s): %s", j->info.id, js->mpi.launcher, status,
           rc == GP_OK ? "saved" : gp_status_name(rc));
    return rc;
}
