/* gpserve store: the change generation (store.h, gp_store_generation), so
 * that a caller may keep what it read from the store (the api's resolved
 * rows) and ask the store again only when something may have changed.
 *
 * The generation is a counter bumped after every write of this handle that
 * changes a model row, a save, a delete or a log append (gp_store_notify;
 * store_conn.c bumps it under the writer's mutex after the COMMIT: a read
 * that starts after the bump sees the write), and by a watch thread when another
 * connection committed: another daemon on the same database, or an operator's
 * SQL. The thread owns a connection of its own (docs/design/storage.md, "The
 * change generation"): SQLite's PRAGMA data_version, polled every
 * GP_STORE_WATCH_MS, changes when another connection commits to the file;
 * PostgreSQL delivers the NOTIFY that every save, delete and log append sends
 * in its transaction (GPS_NOTIFY) to the watch's LISTEN as it commits. While
 * the watch is down (not started, its connection lost, the server
 * restarting) gp_store_generation answers 0: the caller asks the store every
 * time. When the watch is up again the generation is bumped before it is
 * trusted, so nothing read before is kept (a notification missed while down
 * is covered). */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void gp_store_generation_bump(gp_store *s)
{
    atomic_fetch_add(&s->generation, 1);
}

uint64_t gp_store_generation(gp_store *store)
{
    /* watch_ok is set after the bump that follows a watch coming up (both
     * sequentially consistent): a caller that sees it sees that bump. */
    if (!atomic_load(&store->watch_ok))
        return 0;
    return (uint64_t)atomic_load(&store->generation);
}

static void watch_down(gp_store *s)
{
    atomic_store(&s->watch_ok, 0);
    if (s->watch_db)
        s->drv->close(s->watch_db);
    s->watch_db = NULL;
}

static void *watch_main(void *arg)
{
    gp_store *s = arg;
    while (!atomic_load(&s->watch_stop)) {
        if (s->watch_db == NULL) {
            gp_error err;
            gp_error_clear(&err);
            if (s->drv->open(s->watch_target, GP_DB_READER, &s->watch_db, &err) != GP_OK) {
                watch_down(s);
                pause_ms(GP_STORE_WATCH_RETRY_MS);
                continue;
            }
        }
        int changed = 0;
        if (s->drv->watch(s->watch_db, GP_STORE_WATCH_MS, &changed) != GP_DB_OK) {
            watch_down(s);
            pause_ms(GP_STORE_WATCH_RETRY_MS);
            continue;
        }
        if (changed)
            gp_store_generation_bump(s);
        atomic_store(&s->watch_ok, 1);
    }
    return NULL;
}

int gp_store_watch_start(gp_store *store, gp_error *err)
{
    if (store->watch_started || atomic_load(&store->watch_ok))
        return GP_OK;
    if (store->drv->private_db(store->w->db)) {
        /* An in-memory database has no other connection: this handle's own
         * writes are all there is to see. */
        atomic_store(&store->watch_ok, 1);
        return GP_OK;
    }
    if (store->drv->watch == NULL || store->watch_target == NULL)
        return gp_error_set(err, GP_EINTERNAL, NULL, "the %s store cannot watch for changes",
                            store->drv->name);
    atomic_store(&store->watch_stop, 0);
    if (pthread_create(&store->watch_thread, NULL, watch_main, store) != 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot start the store's change watch");
    store->watch_started = 1;
    return GP_OK;
}

void gp_store_watch_stop(gp_store *s)
{
    if (s->watch_started) {
        atomic_store(&s->watch_stop, 1);
        pthread_join(s->watch_thread, NULL);
        s->watch_started = 0;
    }
    watch_down(s);
    free(s->watch_target);
    s->watch_target = NULL;
}
