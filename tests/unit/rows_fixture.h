/* Test fixture: gp_rows (core/model/rows.h) over arrays in memory, and p
 * shards of them fitted by p threads at once with a deterministic allreduce
 * (the sum in rank order, as gpserve-fit's is under MPI), so a unit test
 * checks a streaming method alone, in chunks and across shards without MPI.
 * Header-only: include it from one test program. */
#ifndef RF_ROWS_FIXTURE_H
#define RF_ROWS_FIXTURE_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/model/rows.h"

/* The whole data set (X n_all x d column-major, y n_all) a shard reads. */
typedef struct rf_source {
    const double *X, *y;
    size_t n_all, d, first;
    size_t reads; /* rows delivered, for tests of how much is read */
} rf_source;

static int rf_read(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    (void)err;
    rf_source *s = ctx;
    size_t at = s->first + i;
    for (size_t j = 0; j < s->d; j++)
        memcpy(X + j * count, s->X + j * s->n_all + at, count * sizeof *X);
    memcpy(y, s->y + at, count * sizeof *y);
    s->reads += count;
    return GP_OK;
}

/* rows = the shard [first, first + n) of the arrays, read chunk rows at a time
 * (alone: no allreduce; rf_run_sharded sets one). */
static void rf_rows_init(gp_rows *rows, rf_source *src, const double *X, const double *y,
                         size_t n_all, size_t d, size_t first, size_t n, size_t chunk)
{
    *src = (rf_source){X, y, n_all, d, first, 0};
    *rows = (gp_rows){.n = n, .first = first, .n_total = n_all, .d = d, .chunk = chunk,
                      .read = rf_read, .read_ctx = src};
}

/* ---- p shards on p threads ---- */

/* The ranks meet in each reduction under one lock: the last to arrive adds
 * every rank's buffer (in rank order) and opens the next generation. A rank
 * whose function has returned has left the fit: a reduction that waits for
 * it, or starts after it left, fails on every rank still in it (GP_EINTERNAL)
 * instead of waiting for ever, so a rank that ends alone fails its test
 * rather than hanging it. */
typedef struct rf_reducer {
    size_t p;
    pthread_mutex_t lock;
    pthread_cond_t turn;
    size_t arrived;    /* ranks in the current reduction */
    unsigned long gen; /* reductions completed */
    size_t left;       /* ranks whose function returned */
    double **bufs;     /* p: each rank's buffer during a reduction */
    size_t *lens;
    double *sum;
    size_t sum_cap;
    int failed; /* the last reduction's lengths differed (or no memory) */
    size_t reductions, doubles;
} rf_reducer;

typedef struct rf_rank {
    rf_reducer *red;
    size_t rank;
} rf_rank;

/* Every rank's buffer added in rank order (the first one's bits when p is 1),
 * into r->sum: run by the last rank to arrive, under the lock. */
static void rf_add(rf_reducer *r, size_t len)
{
    r->failed = 0;
    for (size_t k = 0; k < r->p; k++)
        r->failed |= r->lens[k] != len;
    if (!r->failed && len > r->sum_cap) {
        free(r->sum);
        r->sum = malloc(len * sizeof *r->sum);
        r->sum_cap = r->sum ? len : 0;
        r->failed = r->sum == NULL;
    }
    for (size_t j = 0; !r->failed && j < len; j++) {
        double s = r->bufs[0][j];
        for (size_t k = 1; k < r->p; k++)
            s += r->bufs[k][j];
        r->sum[j] = s;
    }
    r->reductions++;
    r->doubles += len;
}

/* The sum written back to every rank. A rank copies it before it can arrive
 * at the next reduction, and the next sum is made only once every rank has
 * arrived, so r->sum is not overwritten under a rank that still reads it. */
static int rf_allreduce(void *ctx, double *buf, size_t len, gp_error *err)
{
    rf_rank *me = ctx;
    rf_reducer *r = me->red;
    pthread_mutex_lock(&r->lock);
    int failed = 1, ended = 1; /* ended: a rank left before this sum was made */
    if (r->left == 0) {
        unsigned long gen = r->gen;
        r->bufs[me->rank] = buf;
        r->lens[me->rank] = len;
        if (++r->arrived == r->p) {
            rf_add(r, len);
            r->arrived = 0;
            r->gen++;
            pthread_cond_broadcast(&r->turn);
        }
        while (r->gen == gen && r->left == 0)
            pthread_cond_wait(&r->turn, &r->lock);
        if (r->gen != gen) { /* completed (a rank may have left since) */
            ended = 0;
            failed = r->failed;
            if (!failed)
                memcpy(buf, r->sum, len * sizeof *buf);
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (ended)
        return gp_error_set(err, GP_EINTERNAL, NULL,
                            "a rank ended its fit while the others reduced");
    return failed ? gp_error_set(err, GP_EINTERNAL, NULL, "ranks reduced different lengths")
                  : GP_OK;
}

/* A rank's function returned: it takes part in no more reductions. */
static void rf_leave(rf_reducer *r)
{
    pthread_mutex_lock(&r->lock);
    r->left++;
    pthread_cond_broadcast(&r->turn);
    pthread_mutex_unlock(&r->lock);
}

/* What one rank runs: fit (or evaluate) over its shard rows; rc per rank. */
typedef int (*rf_rank_fn)(const gp_rows *rows, size_t rank, void *arg);

typedef struct rf_thread {
    gp_rows rows;
    rf_source src;
    rf_rank me;
    rf_rank_fn fn;
    void *arg;
    int rc;
} rf_thread;

static void *rf_thread_main(void *ctx)
{
    rf_thread *t = ctx;
    t->rc = t->fn(&t->rows, t->me.rank, t->arg);
    rf_leave(t->me.red);
    return NULL;
}

/* Run fn on p threads, rank r holding rows [r n / p, (r + 1) n / p) read
 * chunk rows at a time, with rf_allreduce between them. Returns rank 0's rc,
 * or GP_EINTERNAL when the ranks disagree (they must fail together); a rank
 * that returns while the others still reduce makes their reductions fail
 * (rf_allreduce), so the run ends either way. red_out (may be NULL) receives
 * the reduction counts. */
static int rf_run_sharded(size_t p, const double *X, const double *y, size_t n, size_t d,
                          size_t chunk, rf_rank_fn fn, void *arg, rf_reducer *red_out)
{
    rf_reducer red = {.p = p};
    rf_thread *t = calloc(p, sizeof *t);
    red.bufs = calloc(p, sizeof *red.bufs);
    red.lens = calloc(p, sizeof *red.lens);
    if (!t || !red.bufs || !red.lens || pthread_mutex_init(&red.lock, NULL) ||
        pthread_cond_init(&red.turn, NULL)) {
        free(t);
        free(red.bufs);
        free(red.lens);
        return GP_ENOMEM;
    }
    pthread_t *ids = calloc(p, sizeof *ids);
    for (size_t r = 0; r < p; r++) {
        size_t lo = r * n / p, hi = (r + 1) * n / p;
        rf_rows_init(&t[r].rows, &t[r].src, X, y, n, d, lo, hi - lo, chunk);
        t[r].me = (rf_rank){&red, r};
        t[r].rows.allreduce = rf_allreduce;
        t[r].rows.reduce_ctx = &t[r].me;
        t[r].fn = fn;
        t[r].arg = arg;
        pthread_create(&ids[r], NULL, rf_thread_main, &t[r]);
    }
    for (size_t r = 0; r < p; r++)
        pthread_join(ids[r], NULL);
    int rc = t[0].rc;
    for (size_t r = 1; r < p; r++)
        if (t[r].rc != rc)
            rc = GP_EINTERNAL;
    pthread_cond_destroy(&red.turn);
    pthread_mutex_destroy(&red.lock);
    if (red_out) {
        red_out->reductions = red.reductions;
        red_out->doubles = red.doubles;
    }
    free(red.sum);
    free(red.bufs);
    free(red.lens);
    free(ids);
    free(t);
    return rc;
}

#endif
