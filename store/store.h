/* gpserve store: SQLite persistence of fitted models (as named arrays) and jobs.
 *
 * SQLite in WAL mode, foreign_keys=ON, a busy timeout, prepared statements
 * only, schema version in PRAGMA user_version with forward migrations. One
 * gp_store is safe to use from many threads (calls are serialised on one
 * connection by a mutex); several processes may open the same file (WAL), and
 * each sees the models the others wrote.
 *
 * Schema (DESIGN.md, with one departure: an array larger than one SQLite blob
 * can hold (1e9 bytes by default) is stored in several rows, `part` 0, 1, ...):
 *   models(id INTEGER PRIMARY KEY, name TEXT NOT NULL, version INTEGER NOT NULL,
 *          method TEXT NOT NULL, spec TEXT NOT NULL, info TEXT NOT NULL,
 *          n_train INTEGER, input_dim INTEGER, created_at TEXT, UNIQUE(name, version))
 *   arrays(model_id INTEGER REFERENCES models(id) ON DELETE CASCADE, key TEXT,
 *          part INTEGER NOT NULL DEFAULT 0, rows INTEGER, cols INTEGER,
 *          data BLOB,  -- little-endian float64, column-major
 *          PRIMARY KEY(model_id, key, part))
 *   jobs(id TEXT PRIMARY KEY, model_name TEXT, status TEXT, progress TEXT,
 *        error TEXT, result TEXT, created_at TEXT, updated_at TEXT)
 *
 * Every function returns 0 or a negative GP_E* code (core/error.h) and fills
 * err: GP_ENOTFOUND for an unknown model/version/job (field "name", "version"
 * or "id"), GP_ENOTREADY when the database cannot be used, GP_EINTERNAL for
 * other SQLite failures (with SQLite's message). */
#ifndef GP_STORE_H
#define GP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/state.h"

#define GP_NAME_MAX 64
#define GP_METHOD_NAME_MAX 31
#define GP_TIME_LEN 32
#define GP_JOB_ID_LEN 40

typedef struct gp_store gp_store;

/* Open (creating if needed) and migrate the database at path. */
int gp_store_open(const char *path, gp_store **out, gp_error *err);
void gp_store_close(gp_store *store);

/* One row of `models` (what a model is, without its arrays). */
typedef struct gp_model_meta {
    int64_t id;
    char name[GP_NAME_MAX + 1];
    int version;
    char method[GP_METHOD_NAME_MAX + 1];
    char *spec; /* owned JSON text */
    char *info; /* owned JSON text */
    size_t n_train, input_dim;
    char created_at[GP_TIME_LEN]; /* ISO 8601 UTC, e.g. 2026-11-21T06:12:20Z */
} gp_model_meta;

void gp_model_meta_free(gp_model_meta *meta);          /* frees spec/info, not meta itself */
void gp_model_meta_free_array(gp_model_meta *metas, size_t count); /* and the array */

/* Save a new version of model `name` in one transaction (the version is one
 * more than the largest existing one, 1 for a new name; concurrent savers of
 * the same name from several processes each get their own version). meta
 * receives the stored row (id, version, created_at, copies of the texts). */
int gp_store_save(gp_store *store, const char *name, const char *method, const char *spec,
                  const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                  gp_model_meta *meta, gp_error *err);

/* Row of version `version` of `name` (version 0: the latest). */
int gp_store_meta(gp_store *store, const char *name, int version, gp_model_meta *meta,
                  gp_error *err);
/* Every version of `name`, ascending; *versions is malloc'ed (caller frees). */
int gp_store_versions(gp_store *store, const char *name, int **versions, size_t *count,
                      gp_error *err);
/* Latest version of every model, ordered by name; free with gp_model_meta_free_array. */
int gp_store_list(gp_store *store, gp_model_meta **metas, size_t *count, gp_error *err);
/* All arrays of model row `model_id` into state (initialised by the caller). */
int gp_store_load_state(gp_store *store, int64_t model_id, gp_state *state, gp_error *err);
/* Delete every version of `name` and their arrays (one transaction). */
int gp_store_delete(gp_store *store, const char *name, gp_error *err);

/* Jobs. Texts are JSON (progress, error, result: the fitted model's
 * metadata) or NULL. */
typedef struct gp_job_row {
    char id[GP_JOB_ID_LEN];
    char model_name[GP_NAME_MAX + 1];
    char status[16]; /* queued | running | succeeded | failed | cancelled */
    char *progress;  /* owned, may be NULL */
    char *error;     /* owned, may be NULL */
    char *result;    /* owned, may be NULL */
    char created_at[GP_TIME_LEN];
    char updated_at[GP_TIME_LEN];
} gp_job_row;

void gp_job_row_free(gp_job_row *job); /* frees the texts */
/* Insert or replace the job row (updated_at set to now; created_at kept if the
 * row exists, else now). */
int gp_store_job_put(gp_store *store, const gp_job_row *job, gp_error *err);
int gp_store_job_get(gp_store *store, const char *id, gp_job_row *job, gp_error *err);

/* Current UTC time as ISO 8601 with seconds ("2026-11-21T06:12:20Z"). */
void gp_store_now(char out[GP_TIME_LEN]);

#endif
