#include "server/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

enum opt_kind { OPT_LONG, OPT_STRING, OPT_ADDRESS, OPT_CHOICE };

typedef struct opt_def {
    const char *flag; /* without the leading "--" */
    const char *env;
    enum opt_kind kind;
    size_t offset;
    long min, max;
    const char *help;
} opt_def;

/* The values an OPT_CHOICE option allows, NULL-terminated (choices_of). */
static const char *const durability_choices[] = {"full", "normal", NULL};

#define OFF(f) offsetof(gp_server_config, f)

static const opt_def options[] = {
    {"bind", "GPSERVE_BIND", OPT_ADDRESS, OFF(bind), 0, 0,
     "address to listen on (IPv4 or IPv6 literal; 0.0.0.0 in the container)"},
    {"port", "GPSERVE_PORT", OPT_LONG, OFF(port), 0, 65535,
     "TCP port; 0 picks a free port (the start-up line shows it)"},
    {"db", "GPSERVE_DB", OPT_STRING, OFF(db), 0, 0, "SQLite database file, or a postgresql:// URL"},
    {"threads", "GPSERVE_THREADS", OPT_LONG, OFF(threads), 0, 1024,
     "HTTP request threads; 0 = online CPUs"},
    {"fit-workers", "GPSERVE_FIT_WORKERS", OPT_LONG, OFF(fit_workers), 1, 256,
     "threads that run fits (fits never run on request threads)"},
    {"queue-size", "GPSERVE_QUEUE_SIZE", OPT_LONG, OFF(queue_size), 1, 1000000,
     "fit jobs waiting for a worker; beyond it 429 overloaded"},
    {"max-body-mb", "GPSERVE_MAX_BODY_MB", OPT_LONG, OFF(max_body_mb), 1, 65536,
     "largest request body in MiB; beyond it 413 payload_too_large"},
    {"dataset-quota-mb", "GPSERVE_DATASET_QUOTA_MB", OPT_LONG, OFF(dataset_quota_mb), 0,
     1L << 30,
     "MiB every data set together may take in the database (PUT /v1/datasets/{name}, whose "
     "bodies --max-body-mb does not bound); an upload that would pass it is refused 507 "
     "insufficient_storage and nothing of it kept; 0 = no quota"},
    {"max-train-points", "GPSERVE_MAX_TRAIN_POINTS", OPT_LONG, OFF(max_train_points), 1,
     100000000, "largest N of methods that build N x N matrices"},
    {"max-input-dim", "GPSERVE_MAX_INPUT_DIM", OPT_LONG, OFF(max_input_dim), 1, 1000000,
     "largest number of input columns of a fit; beyond it 413"},
    {"max-connections", "GPSERVE_MAX_CONNECTIONS", OPT_LONG, OFF(max_connections), 1, 1000000,
     "concurrent HTTP connections; a quarter of them is kept for client addresses holding "
     "fewer than 8; beyond, 429 overloaded"},
    {"max-connections-per-ip", "GPSERVE_MAX_CONNECTIONS_PER_IP", OPT_LONG,
     OFF(max_connections_per_ip), 0, 1000000,
     "concurrent connections from one client address (an IPv6 one by its /64; one client "
     "holding many slow connections cannot take every slot); beyond, 429 overloaded; 0 = no "
     "limit and no reserved quarter"},
    {"rate-limit-rps", "GPSERVE_RATE_LIMIT_RPS", OPT_LONG, OFF(rate_limit_rps), 0, 1000000000,
     "requests a second of each key without its own rps= (each client address when "
     "authentication is off) on the /v1 and /v2 routes but health and readiness; burst "
     "max(1, N); beyond, 429 overloaded with Retry-After; 0 = no limit"},
    {"rate-limit-fits-per-minute", "GPSERVE_RATE_LIMIT_FITS_PER_MINUTE", OPT_LONG,
     OFF(rate_limit_fits_per_minute), 0, 1000000000,
     "fits (POST /v1/models, sync and async) a minute of each key without its own "
     "fits_per_minute= (each client address when authentication is off); burst N; beyond, "
     "429 overloaded with Retry-After; 0 = no limit"},
    {"timeout", "GPSERVE_TIMEOUT", OPT_LONG, OFF(timeout), 0, 86400,
     "seconds an idle connection is kept; 0 = never closed"},
    {"request-timeout", "GPSERVE_REQUEST_TIMEOUT", OPT_LONG, OFF(request_timeout), 0, 86400,
     "seconds to receive a whole request (headers and body) from the moment the connection "
     "is ready for it, however slowly the bytes trickle in; then 408 or closed; 0 = no "
     "deadline (120 s lets a 64 MiB body through at 4.5 Mbit/s); a data set's upload gets one "
     "more for every 8 MiB it has received"},
    {"job-lease", "GPSERVE_JOB_LEASE", OPT_LONG, OFF(job_lease), 2, 86400,
     "seconds an async job stays held by a daemon that stops renewing it (it died); then "
     "another daemon on the database runs it again from its stored request"},
    {"job-attempts", "GPSERVE_JOB_ATTEMPTS", OPT_LONG, OFF(job_attempts), 1, 100,
     "runs an async job may start before its daemons' deaths fail it as 'interrupted'"},
    {"job-retention-hours", "GPSERVE_JOB_RETENTION_HOURS", OPT_LONG, OFF(job_retention_hours), 0,
     876000, "hours an ended async job stays readable in the database; 0 = for ever"},
    {"idempotency-hours", "GPSERVE_IDEMPOTENCY_HOURS", OPT_LONG, OFF(idempotency_hours), 0,
     876000,
     "hours the answer of a fit or observe sent with an Idempotency-Key is kept: a retry "
     "with the key within them is answered it again and writes nothing; 0 = for ever"},
    {"audit-retention-days", "GPSERVE_AUDIT_RETENTION_DAYS", OPT_LONG, OFF(audit_retention_days),
     0, 36500,
     "days an entry of the audit trail (GET /v1/audit: every write, who, when, outcome) is "
     "kept; 0 = for ever"},
    {"api-key-file", "GPSERVE_API_KEY_FILE", OPT_STRING, OFF(api_key_file), 0, 0,
     "file holding the API key (16 bytes or more); then every route but /healthz, /readyz, "
     "/metrics and /v2/health/{live,ready} needs 'Authorization: Bearer KEY', or KEY as the "
     "password of HTTP Basic auth (what a browser sends for the browser view at /); set but "
     "empty is an error (the daemon does not start without authentication by mistake); the "
     "key is an admin key named 'default'; not together with --keys-file"},
    {"keys-file", "GPSERVE_KEYS_FILE", OPT_STRING, OFF(keys_file), 0, 0,
     "file of named API keys with scopes, one 'NAME SCOPES SECRET' a line (README, \"Keys and "
     "scopes\"); routes then need a key as with --api-key-file, and the key's scope (read, "
     "write, admin); SIGHUP or POST /v1/admin/reload reads it again; set but empty is an "
     "error"},
    {"tls-cert", "GPSERVE_TLS_CERT", OPT_STRING, OFF(tls_cert), 0, 0,
     "PEM certificate (chain, leaf first) to serve HTTPS with, TLS 1.2 and 1.3 only; needs "
     "--tls-key; then plain HTTP on the port is refused. Re-read with the key on SIGHUP "
     "(connections kept; a bad new pair keeps the old one and logs why)"},
    {"tls-key", "GPSERVE_TLS_KEY", OPT_STRING, OFF(tls_key), 0, 0,
     "PEM private key of --tls-cert (unencrypted)"},
    {"tls-client-ca", "GPSERVE_TLS_CLIENT_CA", OPT_STRING, OFF(tls_client_ca), 0, 0,
     "PEM CA certificate(s): with --tls-cert, every client must present a certificate "
     "signed by one of them (mutual TLS); a client without one, or with another CA's, is "
     "refused in the handshake"},
    {"model-cache", "GPSERVE_MODEL_CACHE", OPT_LONG, OFF(model_cache), 1, 1000000,
     "fitted models kept in memory (LRU)"},
    {"snapshot-interval", "GPSERVE_SNAPSHOT_INTERVAL", OPT_LONG, OFF(snapshot_interval), 1,
     100000000,
     "observe log entries between snapshots of an online model (a restart replays at most "
     "this many)"},
    {"compute-threads", "GPSERVE_COMPUTE_THREADS", OPT_LONG, OFF(compute_threads), 0, 1024,
     "threads of the shared compute pool (fits' loops, batched predictions); 0 = all CPUs"},
    {"batch-delay-us", "GPSERVE_BATCH_DELAY_US", OPT_LONG, OFF(batch_delay_us), 0, 1000000,
     "dynamic batching (models whose method shares work across a batch: exact, msrfr): "
     "the longest a predict or sample waits for others to the same model to join it, in "
     "microseconds (only while other requests are in progress); 0 = no batching: each "
     "request is answered on its own thread"},
    {"batch-max-points", "GPSERVE_BATCH_MAX_POINTS", OPT_LONG, OFF(batch_max_points), 1,
     1000000, "dynamic batching: the most points one batched prediction takes"},
    {"durability", "GPSERVE_DURABILITY", OPT_CHOICE, OFF(durability), 0, 0,
     "full: a write (fit, observe, delete, async job) is answered once it is on disk and "
     "survives a power loss (SQLite: one fsync for the writes that arrived meanwhile); "
     "normal: once committed (survives a crash of the daemon, but a power loss may lose the "
     "last writes; faster on slow disks). PostgreSQL syncs every commit either way"},
    {"access-log", "GPSERVE_ACCESS_LOG", OPT_STRING, OFF(access_log), 0, 0,
     "file the access log is appended to, one JSON line per request (time, request_id, "
     "client, key, method, route, model, version, status, bytes, duration_us), written "
     "off the request threads; '-' = standard output; none by default"},
    {"mpi-launcher", "GPSERVE_MPI_LAUNCHER", OPT_STRING, OFF(mpi_launcher), 0, 0,
     "the MPI launcher a distributed fit (\"distributed\": {\"ranks\": N}) runs as LAUNCHER "
     "[--mpi-args] [--hostfile H] -np N FIT-PROGRAM --db DB --job ID --owner OWNER on the "
     "daemon holding the job (Open MPI's mpirun refuses root without "
     "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)"},
    {"mpi-hostfile", "GPSERVE_MPI_HOSTFILE", OPT_STRING, OFF(mpi_hostfile), 0, 0,
     "the launcher's hostfile (the machines of the ranks; each must reach --db: PostgreSQL, "
     "or a SQLite file on a filesystem they share); none: every rank on this machine"},
    {"mpi-args", "GPSERVE_MPI_ARGS", OPT_STRING, OFF(mpi_args), 0, 0,
     "extra words for the launcher, split at blanks (e.g. '--oversubscribe' for more ranks "
     "than cores, or '--mca btl_tcp_if_include eth0')"},
    {"fit-program", "GPSERVE_FIT_PROGRAM", OPT_STRING, OFF(fit_program), 0, 0,
     "the program every rank of a distributed fit runs (the same path on every machine of "
     "the hostfile); default: gpserve-fit beside this binary"},
    {"mpi-max-ranks", "GPSERVE_MPI_MAX_RANKS", OPT_LONG, OFF(mpi_max_ranks), 1, 4096,
     "the most processes a distributed fit may ask for (distributed.ranks); beyond, 400"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

/* Whether def, set but empty in the environment, is an error rather than
 * unset: a setting whose absence turns a protection off fails closed (an
 * empty GPSERVE_API_KEY_FILE from a template or a missing secret must not
 * start a daemon without authentication). */
static int empty_env_refused(const opt_def *def)
{
    return def->offset == OFF(api_key_file) || def->offset == OFF(keys_file) ||
           def->offset == OFF(tls_cert) || def->offset == OFF(tls_key) ||
           def->offset == OFF(tls_client_ca);
}

/* The TLS options go together: a key without its certificate, or a client CA
 * without TLS, would silently serve plain HTTP. */
static int tls_options_consistent(const gp_server_config *cfg, FILE *err)
{
    if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
        fprintf(err, "gpserve: --tls-cert and --tls-key go together: name both files\n");
        return -1;
    }
    if (cfg->tls_client_ca != NULL && cfg->tls_cert == NULL) {
        fprintf(err, "gpserve: --tls-client-ca needs --tls-cert and --tls-key\n");
        return -1;
    }
    return 0;
}

static const char *const *choices_of(const opt_def *def)
{
    static const char *const none[] = {NULL};
    return strcmp(def->flag, "durability") == 0 ? durability_choices : none;
}

void gp_config_defaults(gp_server_config *cfg)
{
    gp_api_config api;
    gp_api_default_config(&api);
    memset(cfg, 0, sizeof *cfg);
    cfg->bind = "127.0.0.1";
    cfg->port = 8080;
    cfg->db = api.db_path ? api.db_path : "./gpserve.db";
    cfg->threads = 0;
    cfg->fit_workers = 1;
    cfg->queue_size = 16;
    cfg->max_body_mb = 64;
    cfg->dataset_quota_mb = (long)(api.dataset_quota_bytes >> 20);
    cfg->max_train_points = api.max_train_points > 0 && api.max_train_points <= 100000000
                                ? (long)api.max_train_points
                                : 20000;
    cfg->max_input_dim = api.max_input_dim > 0 && api.max_input_dim <= 1000000
                             ? (long)api.max_input_dim
                             : 1000;
    cfg->max_connections = 1024;
    cfg->max_connections_per_ip = 256;
    cfg->timeout = 30;
    /* What a real upload needs, not more: a slot held by a slow client is a
     * slot another client waits for. The default body cap (64 MiB) arrives in
     * 120 s at 4.5 Mbit/s; a fit of 20000 points x 10 inputs (~4 MB of JSON)
     * at 270 kbit/s. Raise it with --max-body-mb for slow links. */
    cfg->request_timeout = 120;
    cfg->job_lease = 15;
    cfg->job_attempts = 3;
    cfg->job_retention_hours = 168;
    cfg->idempotency_hours = 24;
    cfg->audit_retention_days = 90;
    cfg->api_key_file = NULL;
    cfg->keys_file = NULL;
    cfg->model_cache = api.model_cache > 0 && api.model_cache <= 1000000 ? (long)api.model_cache
                                                                         : 32;
    cfg->compute_threads = 0;
    cfg->batch_delay_us = 300;
    cfg->batch_max_points = 64;
    cfg->durability = "full";
    cfg->mpi_launcher = "mpirun";
    cfg->mpi_max_ranks = api.max_ranks > 0 && api.max_ranks <= 4096 ? api.max_ranks : 16;
    cfg->snapshot_interval = api.snapshot_interval > 0 && api.snapshot_interval <= 100000000
                                 ? (long)api.snapshot_interval
                                 : 10000;
}

int gp_parse_long(const char *s, long min, long max, long *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int valid_address(const char *s)
{
    struct in_addr a4;
    struct in6_addr a6;
    return inet_pton(AF_INET, s, &a4) == 1 || inet_pton(AF_INET6, s, &a6) == 1;
}

/* Store value into the field of def; source names it in messages. */
static int apply(gp_server_config *cfg, const opt_def *def, const char *value,
                 const char *source, FILE *err)
{
    char *base = (char *)cfg;
    switch (def->kind) {
    case OPT_LONG: {
        long v;
        if (gp_parse_long(value, def->min, def->max, &v) != 0) {
            fprintf(err, "gpserve: %s: '%s' is not an integer in %ld..%ld\n", source, value,
                    def->min, def->max);
            return -1;
        }
        memcpy(base + def->offset, &v, sizeof v);
        return 0;
    }
    case OPT_CHOICE: {
        const char *const *choices = choices_of(def);
        size_t k = 0;
        while (choices[k] && strcmp(choices[k], value) != 0)
            k++;
        if (choices[k] == NULL) {
            fprintf(err, "gpserve: %s: '%s' is not one of", source, value);
            for (size_t c = 0; choices[c]; c++)
                fprintf(err, "%s %s", c ? "," : "", choices[c]);
            fprintf(err, "\n");
            return -1;
        }
        memcpy(base + def->offset, &choices[k], sizeof choices[k]);
        return 0;
    }
    case OPT_ADDRESS:
        if (!valid_address(value)) {
            fprintf(err, "gpserve: %s: '%s' is not an IPv4 or IPv6 address\n", source, value);
            return -1;
        }
        /* fall through */
    case OPT_STRING:
        if (*value == '\0') {
            fprintf(err, "gpserve: %s: empty value\n", source);
            return -1;
        }
        memcpy(base + def->offset, &value, sizeof value);
        return 0;
    }
    return -1;
}

static const opt_def *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].flag) == len && memcmp(options[i].flag, name, len) == 0)
            return &options[i];
    return NULL;
}

int gp_config_parse(gp_server_config *cfg, int argc, char *const argv[], gp_getenv_fn getenv_fn,
                    FILE *out, FILE *err)
{
    gp_config_defaults(cfg);
    const char *prog = argc > 0 && argv[0] ? argv[0] : "gpserve";
    /* --help wins over everything, even bad values elsewhere. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            gp_config_usage(out, prog);
            return GP_CONFIG_HELP;
        }
    }
    if (getenv_fn) {
        for (size_t i = 0; i < N_OPTIONS; i++) {
            const char *v = getenv_fn(options[i].env);
            if (v != NULL && *v == '\0' && empty_env_refused(&options[i])) {
                fprintf(err,
                        "gpserve: %s is set but empty: name the file, or unset it to run "
                        "without it\n",
                        options[i].env);
                return GP_CONFIG_ERROR;
            }
            if (v == NULL || *v == '\0')
                continue;
            if (apply(cfg, &options[i], v, options[i].env, err) != 0)
                return GP_CONFIG_ERROR;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            fprintf(err, "gpserve: unexpected argument '%s' (see --help)\n", a);
            return GP_CONFIG_ERROR;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *def = find_flag(name, len);
        if (def == NULL) {
            fprintf(err, "gpserve: unknown option '--%.*s' (see --help)\n", (int)len, name);
            return GP_CONFIG_ERROR;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) {
                fprintf(err, "gpserve: option '--%s' needs a value\n", def->flag);
                return GP_CONFIG_ERROR;
            }
            value = argv[++i];
        }
        char source[64];
        snprintf(source, sizeof source, "--%s", def->flag);
        if (apply(cfg, def, value, source, err) != 0)
            return GP_CONFIG_ERROR;
    }
    if (cfg->api_key_file && cfg->keys_file) {
        /* two sources of keys: which wins would be a guess, so neither does */
        fprintf(err, "gpserve: --api-key-file and --keys-file are both set: give one (a keys "
                     "file holds the old key as a line 'default admin KEY')\n");
        return GP_CONFIG_ERROR;
    }
    return tls_options_consistent(cfg, err) == 0 ? GP_CONFIG_OK : GP_CONFIG_ERROR;
}

static void default_text(const gp_server_config *d, const opt_def *def, char *buf, size_t size)
{
    const char *base = (const char *)d;
    if (def->kind == OPT_LONG) {
        long v;
        memcpy(&v, base + def->offset, sizeof v);
        if (v == 0 && (strcmp(def->flag, "threads") == 0 ||
                       strcmp(def->flag, "compute-threads") == 0)) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            snprintf(buf, size, "0 (online CPUs, here %ld)", cpus > 0 ? cpus : 1);
        } else {
            snprintf(buf, size, "%ld", v);
        }
    } else {
        const char *s;
        memcpy(&s, base + def->offset, sizeof s);
        snprintf(buf, size, "%s", s ? s : "none");
    }
}

void gp_config_usage(FILE *out, const char *prog)
{
    gp_server_config d;
    gp_config_defaults(&d);
    fprintf(out,
            "Usage: %s [--option VALUE | --option=VALUE]...\n"
            "gpserve: Gaussian-process models fitted and served over HTTP/JSON.\n"
            "Every option can also be set by its environment variable; flags win.\n\n",
            prog);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *def = &options[i];
        char flag[48], dflt[64], range[64] = "";
        snprintf(flag, sizeof flag, "--%s %s", def->flag,
                 def->kind == OPT_LONG      ? "N"
                 : def->kind == OPT_ADDRESS ? "ADDR"
                 : def->kind == OPT_CHOICE  ? "MODE"
                                            : "PATH");
        default_text(&d, def, dflt, sizeof dflt);
        if (def->kind == OPT_LONG)
            snprintf(range, sizeof range, ", %ld..%ld", def->min, def->max);
        fprintf(out, "  %-26s %s\n  %-26s env %s, default %s%s\n", flag, def->help, "",
                def->env, dflt, range);
    }
    fprintf(out, "  %-26s %s\n", "--help, -h", "print this help and exit");
}

char *gp_read_api_key(const char *path, char *msg, size_t msg_size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "cannot open API key file '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 256, len = 0;
    char *key = malloc(cap);
    int failed = key == NULL;
    while (!failed) {
        if (len + 1 >= cap) {
            if (cap >= (size_t)1 << 20) {
                snprintf(msg, msg_size, "API key file '%s' is larger than 1 MiB", path);
                failed = 1;
                break;
            }
            char *bigger = realloc(key, cap * 2);
            if (bigger == NULL) {
                failed = 1;
                snprintf(msg, msg_size, "out of memory reading '%s'", path);
                break;
            }
            key = bigger;
            cap *= 2;
        }
        size_t got = fread(key + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                snprintf(msg, msg_size, "cannot read API key file '%s'", path);
                failed = 1;
            }
            break;
        }
    }
    fclose(f);
    if (failed) {
        free(key);
        return NULL;
    }
    while (len > 0 && (key[len - 1] == '\n' || key[len - 1] == '\r' || key[len - 1] == ' ' ||
                       key[len - 1] == '\t'))
        len--;
    key[len] = '\0';
    if (len == 0) {
        snprintf(msg, msg_size, "API key file '%s' is empty", path);
        free(key);
        return NULL;
    }
    if (memchr(key, '\0', len) != NULL) {
        snprintf(msg, msg_size, "API key file '%s' holds a NUL byte", path);
        free(key);
        return NULL;
    }
    if (len < GP_API_KEY_MIN_BYTES) {
        /* A short key can be guessed; refuse to start rather than serve with it. */
        snprintf(msg, msg_size,
                 "API key in '%s' has %zu bytes; at least %d are required (e.g. the output of "
                 "'head -c 32 /dev/urandom | base64')",
                 path, len, GP_API_KEY_MIN_BYTES);
        free(key);
        return NULL;
    }
    return key;
}
