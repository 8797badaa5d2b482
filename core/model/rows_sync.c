/* Passes over streamed rows that every process ends together: see
 * core/model/rows_sync.h. */
#include "core/model/rows_sync.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* The slots after a buffer: failures, the sum of their codes, cancellations. */
enum { SLOT_FAILED, SLOT_CODES, SLOT_CANCELLED };

/* The error text carried from the one failing process to the others: each
 * byte of the field then of the message as a double (the others add zeros,
 * so the sum holds the bytes exactly). */
#define TEXT_LEN (GP_ERROR_FIELD_LEN + GP_ERROR_MESSAGE_LEN)

int gp_rows_sync_init(gp_rows_sync *s, const gp_rows *rows, const gp_fit_request *req,
                      gp_error *err)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    atomic_init(&s->stop, 0);
    s->agreed.flag = &s->stop;
    s->ranks = 1;
    if (req) {
        s->cancel = &req->cancel;
        s->progress = req->progress;
        s->progress_ctx = req->progress_ctx;
    }
    int rc = gp_rows_check(rows, err);
    if (rc)
        return rc;
    size_t count = 0;
    gp_error local;
    gp_error_clear(&local);
    rc = gp_checked_size(rows->chunk, rows->d + 1, &count, &local);
    if (rc == GP_OK && (s->X = gp_alloc_doubles(count, &local)) == NULL)
        rc = local.code;
    if (rc == GP_OK)
        s->y = s->X + rows->chunk * rows->d;
    gp_rows_sync_pend(s, rc, &local); /* this process's alone: agreed at the first sum */
    return GP_OK;
}

void gp_rows_sync_free(gp_rows_sync *s)
{
    free(s->X);
    s->X = s->y = NULL;
}

/* The fit's progress with a stop deferred: the callback's answer is kept for
 * the next sum, which every process reaches, instead of ending the driver
 * on this process alone. */
static int deferred_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    gp_rows_sync *s = ctx;
    if (s->progress && s->progress(s->progress_ctx, iteration, max_iterations, objective))
        s->stop_asked = 1;
    return 0;
}

void gp_rows_sync_request(gp_rows_sync *s, const gp_fit_request *req, gp_fit_request *out)
{
    *out = *req;
    out->cancel = s->agreed;
    out->progress = deferred_progress;
    out->progress_ctx = s;
}

void gp_rows_sync_pend(gp_rows_sync *s, int rc, const gp_error *local)
{
    if (rc == GP_OK || s->pending)
        return; /* the first failure is the one reported */
    s->pending = rc;
    if (local && local->code == rc)
        s->pending_err = *local;
    else
        gp_error_set(&s->pending_err, rc, NULL, "%s", gp_status_meaning(rc));
}

int gp_rows_sync_skip(gp_rows_sync *s)
{
    if (!s->pending && !s->failed && gp_cancel_requested(s->cancel)) {
        gp_error c;
        gp_error_set(&c, GP_ECANCELLED, NULL, "fit cancelled");
        gp_rows_sync_pend(s, GP_ECANCELLED, &c);
    }
    return s->pending || s->failed;
}

int gp_rows_sync_read(gp_rows_sync *s, size_t i, size_t count)
{
    if (gp_rows_sync_skip(s))
        return s->failed ? s->failed : s->pending;
    const gp_rows *rows = s->rows;
    gp_error local;
    gp_error_clear(&local);
    gp_rows_sync_pend(s, rows->read(rows->read_ctx, i, count, s->X, s->y, &local), &local);
    return s->pending;
}

int gp_rows_sync_each_chunk(gp_rows_sync *s, gp_rows_chunk_fn fn, void *ctx)
{
    const gp_rows *rows = s->rows;
    for (size_t i = 0; i < rows->n && !gp_rows_sync_skip(s); i += rows->chunk) {
        size_t b = rows->n - i < rows->chunk ? rows->n - i : rows->chunk;
        if (gp_rows_sync_read(s, i, b) == GP_OK) {
            gp_error local;
            gp_error_clear(&local);
            gp_rows_sync_pend(s, fn(ctx, i, b, s->X, s->y, &local), &local);
        }
    }
    return s->failed ? s->failed : s->pending;
}

/* The bytes of e into t (TEXT_LEN doubles), or zeros. */
static void text_put(const gp_error *e, double *t)
{
    memset(t, 0, TEXT_LEN * sizeof *t);
    if (e == NULL)
        return;
    for (size_t i = 0; i < GP_ERROR_FIELD_LEN && e->field[i]; i++)
        t[i] = (double)(unsigned char)e->field[i];
    for (size_t i = 0; i < GP_ERROR_MESSAGE_LEN && e->message[i]; i++)
        t[GP_ERROR_FIELD_LEN + i] = (double)(unsigned char)e->message[i];
}

static void text_get(const double *t, gp_error *e)
{
    for (size_t i = 0; i < GP_ERROR_FIELD_LEN; i++)
        e->field[i] = (char)(unsigned char)t[i];
    for (size_t i = 0; i < GP_ERROR_MESSAGE_LEN; i++)
        e->message[i] = (char)(unsigned char)t[GP_ERROR_FIELD_LEN + i];
    e->field[GP_ERROR_FIELD_LEN - 1] = '\0';
    e->message[GP_ERROR_MESSAGE_LEN - 1] = '\0';
}

/* Make the agreed failure sticky and stop the optimiser everywhere. */
static int fail(gp_rows_sync *s, const gp_error *e, gp_error *err)
{
    s->failed = e->code;
    s->error = *e;
    atomic_store(&s->stop, 1);
    if (err)
        *err = *e;
    return s->failed;
}

/* This process's failure, if it has one (a cancel is counted apart). */
static int own_failure(const gp_rows_sync *s)
{
    return s->pending != GP_ECANCELLED ? s->pending : GP_OK;
}

/* One process failed: its code, and its field and message on every process
 * (one more reduction, of the bytes: the others add zeros). */
static int shared_words(gp_rows_sync *s, double code, gp_error *e)
{
    double text[TEXT_LEN];
    text_put(own_failure(s) ? &s->pending_err : NULL, text);
    int rc = gp_rows_sum(s->rows, text, TEXT_LEN, e);
    if (rc)
        return rc;
    text_get(text, e);
    e->code = code == floor(code) && code < 0.0 && code >= -(double)GP_ERROR_CODE_COUNT
                  ? (int)code
                  : GP_EINTERNAL;
    return GP_OK;
}

/* Several processes failed: the most common of their codes (the first in
 * the catalogue on a tie), from one more reduction of a count per code. */
static int common_code(gp_rows_sync *s, double failed, gp_error *e)
{
    double count[GP_ERROR_CODE_COUNT];
    memset(count, 0, sizeof count);
    int own = own_failure(s);
    if (own < 0 && own >= -GP_ERROR_CODE_COUNT)
        count[-own - 1] = 1.0;
    int rc = gp_rows_sum(s->rows, count, GP_ERROR_CODE_COUNT, e);
    if (rc)
        return rc;
    size_t best = 0;
    for (size_t c = 1; c < GP_ERROR_CODE_COUNT; c++)
        if (count[c] > count[best])
            best = c;
    int code = count[best] > 0.0 ? -(int)best - 1 : GP_EINTERNAL;
    gp_error_set(e, code, NULL, "%.0f processes of the fit failed reading or summing their "
                 "rows (%s)", failed, gp_status_name(code));
    return GP_OK;
}

/* What every process learns from the slots: a failure, with the same code
 * on every process (a failing process keeps its own words), else a
 * cancellation. */
static int agreed_failure(gp_rows_sync *s, const double *slots, gp_error *err)
{
    double failed = slots[SLOT_FAILED];
    gp_error e;
    gp_error_clear(&e);
    if (failed == 0.0) {
        gp_error_set(&e, GP_ECANCELLED, NULL, "fit cancelled");
        return fail(s, &e, err);
    }
    /* every process makes the same reductions here: the slots told them
     * all the same */
    int rc = failed == 1.0 ? shared_words(s, slots[SLOT_CODES], &e) : common_code(s, failed, &e);
    if (rc) {
        gp_error_set(&e, rc, NULL, "the reduction over the processes failed");
        return fail(s, &e, err);
    }
    if (own_failure(s)) {
        int code = e.code;
        e = s->pending_err;
        e.code = code;
    }
    return fail(s, &e, err);
}

int gp_rows_sync_sum(gp_rows_sync *s, double *buf, size_t len, gp_error *err)
{
    if (s->failed) {
        if (err)
            *err = s->error;
        return s->failed;
    }
    gp_rows_sync_skip(s); /* a cancel seen now is carried by this sum */
    double *slots = buf + len;
    int cancelled = s->pending == GP_ECANCELLED || (!s->pending && s->stop_asked);
    slots[SLOT_FAILED] = s->pending && !cancelled ? 1.0 : 0.0;
    slots[SLOT_CODES] = s->pending && !cancelled ? (double)s->pending : 0.0;
    slots[SLOT_CANCELLED] = cancelled ? 1.0 : 0.0;
    gp_error e;
    gp_error_clear(&e);
    int rc = gp_rows_sum(s->rows, buf, len + GP_ROWS_SYNC_SLOTS, &e);
    s->sums++;
    s->summed += len + GP_ROWS_SYNC_SLOTS;
    if (rc) { /* the reduction failed on every process at once (rows.h) */
        if (e.code != rc)
            gp_error_set(&e, rc, NULL, "the reduction over the processes failed");
        return fail(s, &e, err);
    }
    if (slots[SLOT_FAILED] > 0.0 || slots[SLOT_CANCELLED] > 0.0)
        return agreed_failure(s, slots, err);
    return GP_OK;
}

int gp_rows_sync_agree(gp_rows_sync *s, int rc, const gp_error *local, gp_error *err)
{
    double buf[1 + GP_ROWS_SYNC_SLOTS];
    gp_rows_sync_pend(s, rc, local);
    buf[0] = 1.0; /* one process: the sum counts them */
    rc = gp_rows_sync_sum(s, buf, 1, err);
    if (rc == GP_OK)
        s->ranks = (size_t)buf[0];
    return rc;
}

int gp_rows_sync_result(const gp_rows_sync *s, int rc, gp_error *err)
{
    if (!s->failed)
        return rc;
    if (err)
        *err = s->error;
    return s->failed;
}
