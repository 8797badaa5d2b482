/* gpserve server: what the files of the fit queue share (server/jobs.c:
 * set-up, submitting, reading, cancelling and stopping; server/jobs_table.c:
 * the jobs' lists, lifetime and store writes; server/jobs_run.c: the fit
 * workers; server/jobs_keeper.c: the keeper thread that renews, claims,
 * expires and prunes durable jobs). Not for use outside them. */
#ifndef GP_SERVER_JOBS_INTERNAL_H
#define GP_SERVER_JOBS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server/jobs.h"


/* Finished async jobs kept in memory (older ones are answered from the store). */
#define MAX_FINISHED 1024
#define DEFAULT_LEASE_SECONDS 15.0
#define DEFAULT_MAX_ATTEMPTS 3
#define DEFAULT_RETENTION_SECONDS (7 * 24 * 3600.0)
#define DEFAULT_KEY_RETENTION_SECONDS (24 * 3600.0)
#define PRUNE_PERIOD_SECONDS 60.0
/* An async fit whose model found the disk full (insufficient_storage) runs
 * again this long after, while the disk stays full for up to
 * STORAGE_MAX_WAITS such waits (an hour); then it fails for good. */
#define STORAGE_RETRY_SECONDS 10.0
#define STORAGE_MAX_WAITS 360

/* Why a job's fit is being stopped (job.cancel). */
enum {
    STOP_NONE = 0,
    STOP_USER,     /* DELETE: the job ends cancelled */
    STOP_SHUTDOWN, /* a graceful stop: the job is handed back to the store */
    STOP_LOST,     /* another daemon took the job over: write nothing */
    STOP_GONE      /* a synchronous fit's client went away: answer nothing */
};

typedef struct job job;

/* Links of one intrusive doubly linked list. */
typedef struct job_link {
    job *prev, *next;
} job_link;

struct job {
    gp_jobs *owner;
    int async;
    gp_fit_job *fit; /* owned until the fit has run (or the job is cancelled) */
    char method[32];
    atomic_int cancel; /* STOP_* */

    /* Async: guarded by owner->lock. */
    gp_job_info info;
    uint64_t seq;      /* bumped on every change worth writing */
    int refs;          /* table + workers/requests holding the job */
    int in_table;
    int queued;        /* on the queue list (not yet taken by a worker) */
    int waiting;       /* on the waiting list: its model found the disk full */
    int storage_waits; /* times it did */
    double retry_at;   /* monotonic seconds: back on the queue (waiting) */
    int creating;      /* being written to the store by its submitter */
    int answered;      /* sync: done() is being called (its cookie may be gone) */
    int finished;      /* counted in owner->n_finished */
    double started;    /* monotonic seconds when the fit began */
    double last_save;  /* monotonic seconds of the last progress write */
    job_link tlink; /* table (creation order) */

    /* Progress writes: one at a time, newest last. */
    pthread_mutex_t save_lock;
    uint64_t saved_seq;

    /* Sync. */
    gp_job_done_fn done;
    gp_job_alive_fn alive; /* may be NULL */
    void *cookie;

    /* Queue / running list (guarded by owner->lock). */
    job_link qlink;
};

typedef struct job_list {
    job *head, *tail;
} job_list;

struct gp_jobs {
    gp_api *api;
    gp_metrics *metrics;
    gp_fit_ops ops;
    size_t queue_size, n_workers, n_started;
    pthread_t *threads;
    /* Durability: set before start, read-only after. */
    char owner[128];
    char host_prefix[80]; /* "host:" (this host's daemons) */
    double lease;
    int max_attempts;
    double retention;  /* seconds ended jobs are kept; 0 = for ever */
    double key_retention; /* seconds idempotency keys' answers are kept; 0 = for ever */
    double audit_retention; /* seconds audit entries are kept; 0 = for ever */
    double last_prune; /* monotonic seconds (keeper thread only) */
    gp_jobs_mpi mpi;   /* distributed fits' launcher (set before start) */
    char fit_program[4096]; /* gpserve-fit beside our binary, when mpi.program is NULL */
    pthread_t keeper;
    int keeper_started;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t keeper_wake;
    int stopping;
    int keeper_stop;
    job_list queue;   /* queued, FIFO */
    job_list running; /* being fitted */
    job_list waiting; /* async, queued again once space may be back (keeper) */
    size_t n_queued, n_running;
    job_list table;   /* async jobs, linked through tlink */
    size_t n_finished;            /* async jobs in the table in a terminal state */
};

/* The files, each calling only those listed after it (no circle):
 * jobs.c -> {jobs_keeper.c, jobs_run.c} -> jobs_mpi.c -> jobs_table.c. */

/* server/jobs_table.c: the lists, a job's lifetime and its store writes. */
void gp_jobs_list_push(job_list *l, job *j);
void gp_jobs_list_remove(job_list *l, job *j);
/* Whether a job status is final (succeeded, failed, cancelled). */
int gp_jobs_terminal(const char *status);
job *gp_jobs_job_new(gp_jobs *js, gp_fit_job *fj, int async);
void gp_jobs_job_destroy(job *j);
/* Caller holds js->lock. Returns 1 when the last reference went. */
int gp_jobs_job_unref_locked(job *j);
void gp_jobs_job_unref(gp_jobs *js, job *j);
job *gp_jobs_table_find_locked(gp_jobs *js, const char *id);
void gp_jobs_table_add_locked(gp_jobs *js, job *j);
/* Out of the table (lock held); the caller drops the table's reference. */
void gp_jobs_table_remove_locked(gp_jobs *js, job *j);
/* A job reached a terminal state (lock held): count it and evict the oldest
 * finished jobs beyond MAX_FINISHED. Evicted jobs whose last reference went
 * are appended to *dead for the caller to destroy outside the lock. */
void gp_jobs_finished_locked(gp_jobs *js, job *done, job_list *dead);
void gp_jobs_destroy_list(job_list *dead);
/* Mark a change (lock held). */
void gp_jobs_touch_locked(job *j);
/* Write j's status (queued | running) and progress unless a newer state was
 * written already; started counts a run. GP_ECONFLICT: another daemon has
 * taken the job over. */
int gp_jobs_job_write(gp_jobs *js, job *j, int started);
/* Write j's end (failed or cancelled: a success is written with its model). */
void gp_jobs_job_end_write(gp_jobs *js, job *j);
/* Hand a job back to the store (graceful stop). */
void gp_jobs_job_release_write(gp_jobs *js, const char *id);

/* server/jobs_run.c: the fit workers. */
/* The answer of a synchronous fit stopped by a graceful stop. */
void gp_jobs_respond_shutdown(gp_response *res);
/* A fit worker's thread (arg: the gp_jobs). */
void *gp_jobs_worker_main(void *arg);

/* server/jobs_mpi.c: a distributed fit's run (the launcher under mpirun,
 * watched until it ends): its rc, and res as ops.run fills it. */
int gp_jobs_run_distributed(gp_jobs *js, job *j, gp_response *res);

/* server/jobs_keeper.c: the keeper thread. */
/* At start-up: expire the leases of jobs held by dead daemons of this host
 * (their pid is gone, or is ours: a previous life of this process id, as in
 * a container restarted with the same hostname), so the first keeper round
 * takes them over at once instead of a lease later. */
void gp_jobs_expire_dead_local(gp_jobs *js);
/* The keeper's thread (arg: the gp_jobs). */
void *gp_jobs_keeper_main(void *arg);
/* Off the queue, or off the waiting list. */
gp_fit_job *gp_jobs_unqueue_locked(gp_jobs *js, job *j);

#endif
