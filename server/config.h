/* gpserve server: configuration from flags and environment variables.
 *
 * One table lists every setting with its flag, environment variable, range
 * and default; the parser, the --help text and the tests all read it. Flags
 * override the environment; an empty environment variable counts as unset,
 * except GPSERVE_API_KEY_FILE: set but empty, it is an error (fail closed). */
#ifndef GP_SERVER_CONFIG_H
#define GP_SERVER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

typedef struct gp_server_config {
    const char *bind;         /* --bind, GPSERVE_BIND: IPv4 or IPv6 literal; default 127.0.0.1 */
    long port;                /* --port, GPSERVE_PORT: 0..65535 (0 = any free port); 8080 */
    const char *db;           /* --db, GPSERVE_DB; "./gpserve.db" */
    long threads;             /* --threads: HTTP threads; 0 = online CPUs */
    long fit_workers;         /* --fit-workers: 1 */
    long queue_size;          /* --queue-size: fit jobs waiting; 16 */
    long max_body_mb;         /* --max-body-mb: 64 */
    long dataset_quota_mb;    /* --dataset-quota-mb: every data set together; 0 = none; 10240 */
    long max_train_points;    /* --max-train-points: api default (20000) */
    long max_input_dim;       /* --max-input-dim: input columns of a fit; api default (1000) */
    long max_connections;     /* --max-connections: 1024 */
    long max_connections_per_ip; /* --max-connections-per-ip: 256; 0 = no limit (server/slots.h) */
    long rate_limit_rps;      /* --rate-limit-rps: default requests/s a principal; 0 = none */
    long rate_limit_fits_per_minute; /* --rate-limit-fits-per-minute: default; 0 = none
                                        (server/ratelimit.h; a key's rps=, fits_per_minute= win) */
    long timeout;             /* --timeout: idle seconds, 0 = none; 30 */
    long request_timeout;     /* --request-timeout: seconds to receive a request, 0 = none; 120 */
    long job_lease;           /* --job-lease: seconds a dead daemon's async job stays held; 15 */
    long job_attempts;        /* --job-attempts: runs an async job may start; 3 */
    long job_retention_hours; /* --job-retention-hours: ended jobs kept; 0 = for ever; 168 */
    long idempotency_hours;   /* --idempotency-hours: answers of Idempotency-Keys kept; 24 */
    long audit_retention_days; /* --audit-retention-days: audit entries kept; 90 (0: for ever) */
    const char *api_key_file; /* --api-key-file: one admin key "default" */
    const char *keys_file;    /* --keys-file: named keys with scopes (server/keys.h);
                                 neither: no authentication */
    const char *tls_cert;      /* --tls-cert: PEM chain; NULL = plain HTTP */
    const char *tls_key;       /* --tls-key: PEM key of tls_cert (both or neither) */
    const char *tls_client_ca; /* --tls-client-ca: PEM CAs a client cert must chain to; NULL */
    long model_cache;         /* --model-cache: api default (32) */
    long snapshot_interval;   /* --snapshot-interval: api default (10000) */
    long compute_threads;     /* --compute-threads: the shared compute pool; 0 = all CPUs */
    long batch_delay_us;      /* --batch-delay-us: longest wait for a batch; 0 = no batching; 300 */
    long batch_max_points;    /* --batch-max-points: points per batch; 64 */
    const char *durability;   /* --durability: "full" (writes answered once on disk) | "normal" */
    const char *access_log;   /* --access-log: a file, "-" (standard output), or NULL: none */
    /* Distributed fits (server/jobs_mpi.c, docs/design/scale-out.md): */
    const char *mpi_launcher; /* --mpi-launcher: the MPI launcher; "mpirun" */
    const char *mpi_hostfile; /* --mpi-hostfile: its hostfile; NULL: this machine */
    const char *mpi_args;     /* --mpi-args: extra launcher words (e.g. --oversubscribe); NULL */
    const char *fit_program;  /* --fit-program: NULL = gpserve-fit beside the daemon's binary */
    long mpi_max_ranks;       /* --mpi-max-ranks: the most processes a fit may ask; 16 */
} gp_server_config;

/* Result of gp_config_parse. */
enum {
    GP_CONFIG_OK = 0,
    GP_CONFIG_HELP = 1, /* --help printed: exit 0 */
    GP_CONFIG_ERROR = 2 /* message written: exit 2 */
};

typedef const char *(*gp_getenv_fn)(const char *name);

/* Defaults (the api's from gp_api_default_config). */
void gp_config_defaults(gp_server_config *cfg);

/* Fill cfg from defaults, then environment (getenv_fn; NULL = none), then
 * argv[1..argc). Strings point into argv or the environment. --help / -h
 * prints the usage to out. Errors are written to err. */
int gp_config_parse(gp_server_config *cfg, int argc, char *const argv[], gp_getenv_fn getenv_fn,
                    FILE *out, FILE *err);

/* The --help text. */
void gp_config_usage(FILE *out, const char *prog);

/* Parse a decimal integer in [min, max] (the whole string, optional sign, no
 * blanks). Returns 0 and sets *out, or -1. */
int gp_parse_long(const char *s, long min, long max, long *out);

/* The shortest API key the daemon starts with. */
#define GP_API_KEY_MIN_BYTES 16

/* Read an API key file: its content with trailing whitespace (newline) cut.
 * Returns a malloc'ed key, or NULL with a message in msg (unreadable, empty,
 * a NUL byte inside, or shorter than GP_API_KEY_MIN_BYTES). */
char *gp_read_api_key(const char *path, char *msg, size_t msg_size);

#endif
