/* Sums that every process of a fit over rows ends together: see
 * core/methods/svgp/sync.h. */
#include "core/methods/svgp/sync.h"

#include <math.h>
#include <string.h>

enum { SLOT_FAILED, SLOT_CODES, SLOT_CANCELLED };

void svgp_sync_init(svgp_sync *s, const gp_rows *rows, const gp_cancel *cancel)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->cancel = cancel;
}

void svgp_sync_pend(svgp_sync *s, int rc, const gp_error *local)
{
    if (s->pending || rc == GP_OK)
        return;
    s->pending = rc;
    if (local && local->code == rc)
        s->pending_err = *local;
    else
        gp_error_set(&s->pending_err, rc, NULL, "%s", gp_status_meaning(rc));
}

int svgp_sync_skip(const svgp_sync *s)
{
    return s->pending || s->failed || gp_cancel_requested(s->cancel);
}

/* Make the agreed failure e sticky. */
static int fail(svgp_sync *s, const gp_error *e, gp_error *err)
{
    s->failed = e->code;
    s->error = *e;
    if (err)
        *err = *e;
    return s->failed;
}

/* What every process learns from the slots: a failure (its code when the
 * failing processes agree on one: the mean of their codes is then a code),
 * else a stop. */
static int agreed_failure(svgp_sync *s, const double *slots, gp_error *err)
{
    gp_error e;
    gp_error_clear(&e);
    double failed = slots[SLOT_FAILED];
    if (failed > 0.0) {
        double code = slots[SLOT_CODES] / failed;
        int c = code == floor(code) && code < 0.0 && code >= -(double)GP_ERROR_CODE_COUNT
                    ? (int)code
                    : GP_EINTERNAL;
        if (s->pending && s->pending != GP_ECANCELLED)
            e = s->pending_err;
        else
            gp_error_set(&e, c, NULL,
                         "%.0f process(es) of the fit failed reading or summing their rows "
                         "(%s): every process stops",
                         failed, gp_status_name(c));
        e.code = c;
        return fail(s, &e, err);
    }
    gp_error_set(&e, GP_ECANCELLED, NULL, "fit cancelled");
    return fail(s, &e, err);
}

int svgp_sync_sum(svgp_sync *s, double *buf, size_t len, gp_error *err)
{
    if (s->failed) {
        if (err)
            *err = s->error;
        return s->failed;
    }
    int cancelled = s->pending == GP_ECANCELLED || s->stop_asked ||
                    (!s->pending && gp_cancel_requested(s->cancel));
    int failed = s->pending && s->pending != GP_ECANCELLED;
    double *slots = buf + len;
    slots[SLOT_FAILED] = failed ? 1.0 : 0.0;
    slots[SLOT_CODES] = failed ? (double)s->pending : 0.0;
    slots[SLOT_CANCELLED] = cancelled ? 1.0 : 0.0;
    gp_error e;
    gp_error_clear(&e);
    int rc = gp_rows_sum(s->rows, buf, len + SVGP_SYNC_SLOTS, &e);
    if (rc) { /* the reduction failed on every process at once (rows.h) */
        if (e.code != rc)
            gp_error_set(&e, rc, NULL, "the reduction over the processes failed");
        return fail(s, &e, err);
    }
    if (slots[SLOT_FAILED] > 0.0 || slots[SLOT_CANCELLED] > 0.0)
        return agreed_failure(s, slots, err);
    s->pending = 0;
    return GP_OK;
}
