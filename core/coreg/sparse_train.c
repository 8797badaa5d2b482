/* Minibatch training of a coregionalised svgp: core/coreg/sparse_train.h. */
#include "core/coreg/sparse_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/optim/optim.h"

typedef struct trainer {
    gp_coreg_sparse_impl *im;
    const gp_coreg_sparse_data *data;
    const gp_coreg_adam_settings *st;
    double *mq, *Lq;
    size_t h;                 /* Adam's coordinates: the packing, then Z */
    size_t *row_start;        /* n + 1: row i's entries are [row_start[i], row_start[i + 1]) */
    size_t *perm;             /* n */
    double *Xb, *yb;          /* d x batch, batch p */
    size_t *rowb, *outb;      /* batch p */
    double *x, *g, *gk, *gA, *gs, *gz, *gB;
} trainer;

static void trainer_free(trainer *t)
{
    free(t->row_start);
    free(t->perm);
    free(t->Xb);
    free(t->yb);
    free(t->rowb);
    free(t->outb);
    free(t->x);
    free(t->g);
    free(t->gk);
    free(t->gA);
    free(t->gs);
    free(t->gz);
    free(t->gB);
}

static int trainer_alloc(trainer *t, gp_error *err)
{
    const gp_coreg_sparse_impl *im = t->im;
    size_t n = t->data->n, b = t->st->batch, p = im->cp.p, q = im->cp.q;
    t->h = gp_coreg_params_dim(&im->cp) + (t->st->optimize_z ? im->d * im->m : 0);
    t->row_start = calloc(n + 1, sizeof *t->row_start);
    t->perm = malloc(n * sizeof *t->perm);
    t->rowb = malloc(b * p * sizeof *t->rowb);
    t->outb = malloc(b * p * sizeof *t->outb);
    t->Xb = gp_alloc_doubles(b * im->d, err);
    t->yb = gp_alloc_doubles(b * p, err);
    t->x = gp_alloc_doubles(t->h + 1, err);
    t->g = gp_alloc_doubles(t->h + 1, err);
    t->gk = gp_alloc_doubles(q * im->cp.n_kparams + 1, err);
    t->gA = gp_alloc_doubles(p * q * im->per_q, err);
    t->gs = gp_alloc_doubles(p, err);
    t->gz = gp_alloc_doubles(im->d * im->m, err);
    t->gB = gp_alloc_doubles(q * p * p, err);
    if (!t->row_start || !t->perm || !t->rowb || !t->outb || !t->Xb || !t->yb || !t->x ||
        !t->g || !t->gk || !t->gA || !t->gs || !t->gz || !t->gB)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t a = 0; a < t->data->M; a++)
        t->row_start[t->data->row[a] + 1]++;
    for (size_t i = 0; i < n; i++) {
        t->row_start[i + 1] += t->row_start[i];
        t->perm[i] = i;
    }
    return GP_OK;
}

static void pack(const trainer *t)
{
    gp_coreg_params_pack(&t->im->cp, t->x);
    if (t->st->optimize_z)
        memcpy(t->x + gp_coreg_params_dim(&t->im->cp), t->im->Z,
               t->im->d * t->im->m * sizeof *t->x);
}

static void apply(trainer *t)
{
    gp_coreg_sparse_impl *im = t->im;
    gp_coreg_params_unpack(&im->cp, t->x);
    gp_coreg_sparse_build_A(&im->cp, im->A);
    if (t->st->optimize_z)
        memcpy(im->Z, t->x + gp_coreg_params_dim(&im->cp), im->d * im->m * sizeof *im->Z);
}

/* The rows perm[s .. s + nb) and their entries, rows renumbered 0 .. nb. */
static gp_coreg_sparse_data gather(trainer *t, size_t s, size_t nb)
{
    const gp_coreg_sparse_data *D = t->data;
    size_t d = D->d, Mb = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t r = t->perm[s + i];
        memcpy(t->Xb + i * d, D->X + r * d, d * sizeof *t->Xb);
        for (size_t a = t->row_start[r]; a < t->row_start[r + 1]; a++) {
            t->rowb[Mb] = i;
            t->outb[Mb] = D->out[a];
            t->yb[Mb++] = D->y[a];
        }
    }
    gp_coreg_sparse_data b = {t->Xb, nb, d, Mb, t->rowb, t->outb, t->yb,
                              (double)D->n / (double)nb};
    return b;
}

/* One minibatch: the natural-gradient step on q, then Adam on x. */
static int batch_step(trainer *t, gp_adam *adam, size_t s, size_t nb, double *est, gp_error *err)
{
    gp_coreg_sparse_impl *im = t->im;
    gp_coreg_sparse_data b = gather(t, s, nb);
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    gp_error e2; /* a step that would leave q improper is skipped (the next batch retries) */
    int rc = gp_coreg_svgp_natgrad(&at, &b, t->st->natgrad_step, t->mq, t->Lq, &e2);
    if (rc != GP_OK && rc != GP_ENOTPD)
        return gp_error_set(err, rc, NULL, "%s", e2.message);
    gp_coreg_sparse_grad gr = {t->gk, t->gA, t->gs, t->st->optimize_z ? t->gz : NULL, NULL,
                               NULL};
    if ((rc = gp_coreg_svgp_elbo(&at, &b, t->mq, t->Lq, est, NULL, &gr, err)) != GP_OK)
        return rc;
    gp_coreg_sparse_chain(&im->cp, t->gk, t->gA, t->gs, t->gB, t->g);
    size_t o = gp_coreg_params_dim(&im->cp);
    for (size_t i = 0; t->st->optimize_z && i < im->d * im->m; i++)
        t->g[o + i] = t->gz[i];
    for (size_t i = 0; i < t->h; i++)
        t->g[i] = -t->g[i];
    gp_adam_step(adam, t->x, t->g);
    apply(t);
    return GP_OK;
}

static int epoch(trainer *t, gp_adam *adam, gp_rng *rng, const gp_cancel *cancel, double *mean,
                 gp_error *err)
{
    size_t n = t->data->n, b = t->st->batch, batches = 0;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gp_rng_below(rng, i), tmp = t->perm[i - 1];
        t->perm[i - 1] = t->perm[j];
        t->perm[j] = tmp;
    }
    double sum = 0.0;
    for (size_t s = 0; s < n; s += b) {
        double est;
        int rc = batch_step(t, adam, s, n - s < b ? n - s : b, &est, err);
        if (rc)
            return rc;
        if (gp_cancel_requested(cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        sum += est;
        batches++;
    }
    *mean = sum / (double)batches;
    return GP_OK;
}

int gp_coreg_svgp_train_adam(gp_coreg_sparse_impl *im, const gp_coreg_sparse_data *data,
                             const gp_coreg_adam_settings *st, double *mq, double *Lq,
                             const gp_fit_request *req, gp_diagnostics *diag, double *elbo,
                             gp_error *err)
{
    trainer t = {.im = im, .data = data, .st = st, .mq = mq, .Lq = Lq};
    gp_adam adam = {0};
    int rc = trainer_alloc(&t, err);
    if (rc == GP_OK)
        rc = gp_adam_init(&adam, t.h, st->lr, err);
    if (rc == GP_OK)
        pack(&t);
    gp_rng rng;
    gp_rng_seed(&rng, req->seed);
    size_t per_epoch = (data->n + st->batch - 1) / st->batch;
    for (int ep = 1; rc == GP_OK && ep <= st->epochs; ep++) {
        rc = epoch(&t, &adam, &rng, &req->cancel, elbo, err);
        diag->iterations = ep;
        diag->evaluations += (int)per_epoch;
        long it = ((long)ep * st->budget + st->epochs - 1) / st->epochs;
        if (rc == GP_OK && req->progress &&
            req->progress(req->progress_ctx, (int)it, st->budget, *elbo + st->offset))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
    }
    diag->converged = 0; /* a fixed number of epochs */
    if (adam.m)
        gp_adam_free(&adam);
    trainer_free(&t);
    return rc;
}
