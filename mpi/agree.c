/* The ranks agree on how a step ended: see mpi/agree.h. */
#include "mpi/agree.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* What each rank sends: fixed size, plain bytes (every rank runs this build). */
typedef struct record {
    int32_t code, stop, remote;
    char field[GP_ERROR_FIELD_LEN];
    char message[GP_ERROR_MESSAGE_LEN];
} record;

static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait for the exchange; past deadline seconds (when > 0) cancel nothing and
 * say so: the caller aborts. */
static int wait_for(MPI_Request *req, double deadline)
{
    if (deadline <= 0)
        return MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS ? GP_OK : GP_EINTERNAL;
    double end = MPI_Wtime() + deadline;
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return GP_EINTERNAL;
        if (done)
            return GP_OK;
        if (MPI_Wtime() > end)
            return GP_ETIMEOUT;
        pause_ms(5);
    }
}

/* The outcome of the records of p ranks (rank order decides among equals). */
static void decide(const record *all, int p, gp_mpi_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->rank = -1;
    int cancelled = -1, remote = -1;
    for (int k = 0; k < p; k++) {
        const record *rec = &all[k];
        if (rec->code == GP_OK)
            continue;
        if (rec->code == GP_ECANCELLED) {
            if (cancelled < 0)
                cancelled = k;
        } else if (rec->remote) {
            if (remote < 0)
                remote = k;
        } else {
            /* The first rank with an error of its own: the cause. */
            out->code = rec->code;
            out->rank = k;
            gp_error_set(&out->error, rec->code, rec->field[0] ? rec->field : NULL, "%s",
                         rec->message);
            return;
        }
    }
    if (cancelled >= 0) {
        out->code = GP_ECANCELLED;
        out->stop = all[cancelled].stop;
        out->rank = cancelled;
    } else if (remote >= 0) {
        out->code = GP_EINTERNAL;
        out->rank = remote;
        gp_error_set(&out->error, GP_EINTERNAL, NULL, "a rank of the fit failed and none "
                     "said why");
    }
}

int gp_mpi_agree(MPI_Comm ctl, int code, const gp_error *err, int stop, int remote,
                 int together, double deadline, gp_mpi_outcome *out)
{
    int p = 1;
    MPI_Comm_size(ctl, &p);
    record mine;
    memset(&mine, 0, sizeof mine);
    mine.code = code;
    mine.stop = stop;
    mine.remote = remote;
    if (code != GP_OK && err) {
        memcpy(mine.field, err->field, sizeof mine.field);
        memcpy(mine.message, err->message, sizeof mine.message);
        mine.field[sizeof mine.field - 1] = mine.message[sizeof mine.message - 1] = '\0';
    }
    record *all = calloc((size_t)p, sizeof *all);
    if (all == NULL)
        return GP_ENOMEM;
    MPI_Request req;
    if (MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, ctl,
                       &req) != MPI_SUCCESS) {
        free(all);
        return GP_EINTERNAL;
    }
    /* Only a rank that failed alone may wait for ranks that never come. */
    int lonely = code != GP_OK && code != GP_ECANCELLED && !together;
    int rc = wait_for(&req, lonely ? deadline : 0);
    if (rc == GP_OK)
        decide(all, p, out);
    if (rc != GP_ETIMEOUT) /* a pending exchange's buffer stays until the abort */
        free(all);
    return rc;
}
