/* gpserve store: the group commit (store_internal.h, gp_store_sync;
 * docs/design/storage.md, "Acknowledged means on disk").
 *
 * SQLite commits in WAL mode with synchronous = NORMAL: a commit is written
 * to the WAL (it survives a crash of the process) but not fsynced. FULL
 * would fsync inside every commit, under the write lock, one commit per
 * fsync (about 700 observes/s on the test machine). Here a write, once its
 * commit returned and the writer's mutex is released (so the next writers
 * commit meanwhile), waits for a sync of the WAL that started after its
 * commit: the first waiter that finds no sync running starts one covering
 * every commit returned so far; the others wait for it, and the commits that
 * return while it runs are covered by the next one. No write returns before
 * the sync covering its commit has finished. */
#include "store/store_internal.h"

#include <stdio.h>

int gp_store_sync_init(gp_store *s, gp_error *err)
{
    gp_store_sync *y = &s->sync;
    if (pthread_mutex_init(&y->mu, NULL) != 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot create the store's sync mutex");
    if (pthread_cond_init(&y->done, NULL) != 0) {
        pthread_mutex_destroy(&y->mu);
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot create the store's sync condition");
    }
    y->ready = 1;
    y->full = 1;
    return GP_OK;
}

void gp_store_sync_destroy(gp_store *s)
{
    gp_store_sync *y = &s->sync;
    if (!y->ready)
        return;
    pthread_cond_destroy(&y->done);
    pthread_mutex_destroy(&y->mu);
    y->ready = 0;
}

void gp_store_set_durability(gp_store *store, enum gp_store_durability durability)
{
    pthread_mutex_lock(&store->sync.mu);
    store->sync.full = durability == GP_STORE_DURABILITY_FULL;
    pthread_mutex_unlock(&store->sync.mu);
}

uint64_t gp_store_sync_ticket(gp_store *s)
{
    pthread_mutex_lock(&s->sync.mu);
    uint64_t ticket = ++s->sync.committed;
    pthread_mutex_unlock(&s->sync.mu);
    return ticket;
}

/* One sync of the database (no lock held). */
static int sync_once(gp_store *s, gp_error *err)
{
    char msg[512] = "";
    int rc = s->drv->sync(s->w->db, msg, sizeof msg);
    if (rc == GP_DB_OK)
        return GP_OK;
    const int code = rc == GP_DB_EFULL    ? GP_ESTORAGE
                     : rc == GP_DB_ENOMEM ? GP_ENOMEM
                                          : GP_EINTERNAL;
    return gp_error_set(err, code, NULL,
                        "the write was committed but syncing it to disk failed (it may not "
                        "survive a power loss): %s",
                        msg);
}

int gp_store_sync_wait(gp_store *s, uint64_t ticket, gp_error *err)
{
    gp_store_sync *y = &s->sync;
    if (s->drv->sync == NULL)
        return GP_OK; /* the back end's commit is durable by itself */
    int rc = GP_OK;
    pthread_mutex_lock(&y->mu);
    while (y->full && y->synced < ticket) {
        if (y->syncing) {
            pthread_cond_wait(&y->done, &y->mu);
            continue;
        }
        /* Every commit numbered so far has returned: its frames are in the
         * WAL file, which the sync below flushes. */
        const uint64_t covers = y->committed;
        y->syncing = 1;
        pthread_mutex_unlock(&y->mu);
        rc = sync_once(s, err);
        pthread_mutex_lock(&y->mu);
        y->syncing = 0;
        if (rc == GP_OK && covers > y->synced)
            y->synced = covers;
        pthread_cond_broadcast(&y->done);
        if (rc != GP_OK)
            break; /* the others waiting try a sync of their own */
    }
    pthread_mutex_unlock(&y->mu);
    return rc;
}
