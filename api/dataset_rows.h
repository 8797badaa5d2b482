/* gpserve api: a data set's rows as a fit reads them (core/model/rows.h), for
 * the daemon's fits that name a data set and for any other program on the
 * same store (gpserve-fit under MPI: each rank opens its shard and sets the
 * reduction of the returned gp_rows).
 *
 * A reference names the data set, the target column and the input columns
 * (by name), and the rows: every row, or a seeded subsample of k of them
 * (gp_rows_sample_indices: the same k rows for the same seed wherever it is
 * drawn). Those rows in order form the row sequence; a reader delivers the
 * shard [first, first + count) of it, in chunks of GP_ROWS_DEFAULT_CHUNK
 * rows (one part of the store for every row; the parts that hold them for a
 * subsample), each read in a statement of its own: no lock or snapshot is
 * held across the fit, and writers go on meanwhile.
 *
 * While open, a reader holds a lease on its data set (the store's reader
 * leases, renewed as it reads): a DELETE or a replace of the data set is
 * refused 409 naming the label, on every daemon of the database; a reader
 * whose process dies stops renewing, and its lease lapses within
 * GP_DATASET_LEASE_SECONDS. Errors name the fields of a fit's "data":
 * data.dataset (404 not_found: no such data set, or the one pinned was
 * deleted or replaced), data.target and data.columns[i] (422 invalid_data,
 * the message listing the columns there are), data.rows.sample. */
#ifndef GP_API_DATASET_ROWS_H
#define GP_API_DATASET_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/rows.h"
#include "store/store.h"

/* How long a reader's lease lasts without a read that renews it. */
#define GP_DATASET_LEASE_SECONDS 60.0

typedef struct gp_dataset_ref {
    const char *name;
    int64_t id;                  /* 0: the ready data set of name now; else that row, which
                                    must still be ready and of that name */
    const char *target;          /* the column of y */
    const char *const *columns;  /* the columns of X in order; NULL: every column but the
                                    target, in the data set's order */
    size_t n_columns;
    uint64_t sample;             /* 0: every row; else that many rows drawn with seed (every
                                    row when it is at least the data set's) */
    uint64_t seed;
} gp_dataset_ref;

/* What a reference resolves to. */
typedef struct gp_dataset_resolved {
    int64_t id;
    char sha256[65];
    uint64_t rows; /* of the data set */
    size_t n;      /* of the row sequence: rows, or the subsample's */
    size_t d;      /* input columns */
} gp_dataset_resolved;

/* Check ref against the store without reading rows or taking a lease (a
 * fit's request, before it is queued). */
int gp_dataset_resolve(gp_store *store, const gp_dataset_ref *ref, gp_dataset_resolved *out,
                       gp_error *err);

typedef struct gp_dataset_rows gp_dataset_rows;

/* A reader of the shard [first, first + count) of ref's row sequence
 * (count SIZE_MAX: to its end), holding a lease labelled label ("the fit of
 * model 'm'"). The gp_rows it fills has n = count, first, n_total = the
 * sequence's length, d, chunk = GP_ROWS_DEFAULT_CHUNK and read set;
 * allreduce NULL for the caller to set (a process alone leaves it). */
int gp_dataset_rows_open(gp_store *store, const gp_dataset_ref *ref, size_t first, size_t count,
                         const char *label, gp_dataset_rows **out, gp_error *err);
gp_rows *gp_dataset_rows_get(gp_dataset_rows *r);
/* The data set read (id, sha256, rows) and the sequence (n, d). */
const gp_dataset_resolved *gp_dataset_rows_resolved(const gp_dataset_rows *r);
/* Drop the lease and free (NULL is ignored). */
void gp_dataset_rows_close(gp_dataset_rows *r);

#endif
