/* gpserve api: the model cache's entries (cache.c), for the routes that lock
 * an entry themselves (observe.c) or report its counters (models.c,
 * predict.c). The cache's own calls are in internal.h. */
#ifndef GP_API_CACHE_H
#define GP_API_CACHE_H

#include <pthread.h>
#include <stdint.h>

#include "api/internal.h"

/* Predicted points over which GET reports a gate model's oracle rate. */
#define GP_ORACLE_WINDOW 1000
/* Tries of a request whose entry went stale under it, or of an observe that
 * another daemon's append overtook (each catches up). */
#define GP_CACHE_TRIES 3

struct gp_cache_entry {
    char name[GP_NAME_MAX + 1];
    int version;
    int64_t id;
    char created_at[GP_TIME_LEN];
    gp_model *model;
    /* the outputs' names as JSON text (models of several outputs; NULL
     * otherwise), from the version's info: predict, sample and OIP name them */
    char *outputs;
    /* the inputs' names (the version's info "feature_names", a JSON list;
     * NULL: fitted without): predict, sample and observe match rows by them */
    json_t *features;
    json_t *targets; /* the targets' names ("target_names"), or NULL: an observe's rows may carry them */
    int refs;
    int detached; /* out of the table; freed by the last release */
    uint64_t stamp;
    /* Online models. Readers (predict, sample, get) hold `lock` shared while
     * they use the model; an observe applies its batch holding it exclusive.
     * `write_lock` serialises the writers of this entry (observes, and the
     * catch-up that replays log entries written by another daemon). */
    pthread_rwlock_t lock;
    pthread_mutex_t write_lock;
    uint64_t seq;          /* log entries applied (written under lock, exclusive) */
    int stale;             /* the model differs from the store: never serve it again */
    size_t since_snapshot; /* entries logged since the last snapshot (write_lock) */
    size_t logged_bytes;   /* their bytes */
    size_t state_bytes;    /* bytes of the model's last exported state, 0 unknown */
    double apply_seconds;  /* time spent applying them: about what replaying them costs */
    /* the gate's rolling oracle rate over the last GP_ORACLE_WINDOW predicted points */
    pthread_mutex_t gate_lock;
    unsigned char ring[GP_ORACLE_WINDOW];
    size_t ring_pos, ring_filled, ring_ones;
};

/* The entry of (name, version), referenced and caught up with the store's
 * log, but not locked; *meta_out (may be NULL) gets the row. Released with
 * gp_cache_entry_unref. */
int gp_cache_entry_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                           gp_model_meta *meta_out, gp_error *err);
void gp_cache_entry_unref(gp_api *api, gp_cache_entry *e);
/* Take e out of the table (if still there) and mark it stale: its model no
 * longer equals the store's, so the next request loads the version again. */
void gp_cache_entry_discard(gp_api *api, gp_cache_entry *e);
/* The bytes of a state's arrays (what a snapshot of it weighs). */
size_t gp_cache_state_bytes(const gp_state *st);
/* A monotonic clock in seconds (what applying observations cost). */
double gp_cache_seconds_now(void);
/* The gate's oracle rate: record the flags of m predicted points (NULL: all
 * asked, a model in warm-up; only the last GP_ORACLE_WINDOW count), and read
 * the rate over the window (NaN when empty). */
void gp_cache_gate_record(gp_cache_entry *e, const unsigned char *flags, size_t m);
void gp_cache_gate_rate(gp_cache_entry *e, size_t *window, double *rate);

#endif
