/* gpserve: main(). Configuration, the api (store), the HTTP daemon, and the
 * signal wait: SIGTERM/SIGINT are blocked in every thread and taken by
 * sigwait here, then the server stops gracefully (server/http.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "api/api.h"
#include "core/base/blas_core.h"
#include "core/base/parallel.h"
#include "server/admin.h"
#include "server/config.h"
#include "server/http.h"
#include "server/util.h"

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* Every connection is a descriptor (gp_server_connection_sockets), besides the store's,
 * the poll sets and the listening socket; the usual soft limit (1024) is too
 * few for the default 1024 connections. Raise it to the hard limit. */
static void raise_fd_limit(long sockets)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return;
    }
    rlim_t want = (rlim_t)sockets + 64;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        gp_log("gpserve: warning: the descriptor limit (%llu) is below the connection sockets "
               "(--max-connections and a quarter more to answer refusals) + 64 (%llu): "
               "connections beyond it are refused",
               (unsigned long long)rl.rlim_cur, (unsigned long long)want);
}

/* SIGHUP: the keys file again (rotation); a bad file keeps the old keys. */
static void reload_keys(gp_keyring *keys, gp_server *srv)
{
    if (keys == NULL) {
        gp_log("gpserve: SIGHUP: authentication is off, no keys to reload");
        return;
    }
    size_t n = 0;
    int line = 0;
    char msg[512];
    char *names = calloc(1, GP_KEYS_FILE_MAX / 2); /* NULL: the reload still runs */
    if (gp_keyring_reload(keys, &n, names, names ? GP_KEYS_FILE_MAX / 2 : 0, &line, msg,
                          sizeof msg) != 0) {
        gp_log("gpserve: SIGHUP: reload refused, the old keys stay: %s", msg);
    } else {
        gp_log("gpserve: SIGHUP: keys reloaded: %zu keys", n);
        gp_server_keys_reloaded(srv, names, n); /* the rate limits of removed keys go */
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (gp_admin_is_command(argc, argv)) /* backup, restore: no daemon, no BLAS */
        return gp_admin_run(argc, argv, env_lookup, stdout, stderr);
    /* OpenBLAS's settings are read when it loads: start again with them. */
    if (gp_blas_restart_prepare())
        execv("/proc/self/exe", argv); /* on failure, go on as we are */

    gp_server_config cfg;
    int rc = gp_config_parse(&cfg, argc, argv, env_lookup, stdout, stderr);
    if (rc == GP_CONFIG_HELP)
        return 0;
    if (rc != GP_CONFIG_OK)
        return 2;

    gp_keyring *keys = NULL;
    if (cfg.api_key_file || cfg.keys_file) {
        char msg[512];
        keys = gp_keyring_open(cfg.keys_file, cfg.api_key_file, msg, sizeof msg);
        if (keys == NULL) {
            fprintf(stderr, "gpserve: %s\n", msg);
            return 2;
        }
    }
    gp_parallel_set_threads((int)cfg.compute_threads);
    /* All parallelism lives in the shared pool: OpenBLAS runs on the calling
     * thread (bench/results/blas_threads.md: concurrent callers of a threaded
     * OpenBLAS 0.3.21 oversubscribe the cores, and a request's BLAS call must
     * not spread while other requests run). Set before any thread starts. */
    gp_blas_set_threads(1);
    if (gp_pool_start() != 0)
        fprintf(stderr, "gpserve: warning: not every compute thread could be started\n");
    raise_fd_limit(gp_server_connection_sockets(&cfg));

    /* Signals: SIGTERM/SIGINT (stop) and SIGHUP (read the keys and the TLS
     * certificate again) go to sigwait below, in no other thread; threads
     * created from here on inherit the mask. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &stop_signals, NULL) != 0) {
        fprintf(stderr, "gpserve: cannot block SIGTERM/SIGINT/SIGHUP\n");
        gp_keyring_free(keys);
        return 1;
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, NULL);

    gp_api_config acfg;
    gp_api_default_config(&acfg);
    acfg.db_path = cfg.db;
    acfg.max_train_points = (size_t)cfg.max_train_points;
    acfg.max_input_dim = (size_t)cfg.max_input_dim;
    acfg.model_cache = (size_t)cfg.model_cache;
    acfg.snapshot_interval = (size_t)cfg.snapshot_interval;
    acfg.durability_normal = strcmp(cfg.durability, "normal") == 0;
    acfg.max_ranks = (int)cfg.mpi_max_ranks;
    acfg.dataset_quota_bytes = (uint64_t)cfg.dataset_quota_mb << 20;
    gp_api *api = NULL;
    gp_error err;
    gp_error_clear(&err);
    char db_shown[512]; /* a PostgreSQL URL without its password */
    gp_api_redact_db(cfg.db, db_shown, sizeof db_shown);
    if (gp_api_open(&acfg, &api, &err) != 0 || api == NULL) {
        gp_log("gpserve: cannot open the database '%s': %s", db_shown, err.message);
        gp_keyring_free(keys);
        return 1;
    }

    char msg[512];
    gp_server *srv = gp_server_start(&cfg, api, keys, msg, sizeof msg);
    if (srv == NULL) {
        gp_log("gpserve: %s", msg);
        gp_api_close(api);
        gp_keyring_free(keys);
        return 1;
    }
    const char *open_b = strchr(cfg.bind, ':') ? "[" : "";
    const char *close_b = strchr(cfg.bind, ':') ? "]" : "";
    gp_log("gpserve: db %s, %ld HTTP threads (0 = CPUs), %ld fit workers, queue %ld, "
           "body cap %ld MiB, timeout %ld s, request timeout %ld s, max connections %ld, "
           "auth %s, durability %s, %s",
           db_shown, cfg.threads, cfg.fit_workers, cfg.queue_size, cfg.max_body_mb, cfg.timeout,
           cfg.request_timeout, cfg.max_connections,
           cfg.keys_file ? "named keys" : keys ? "on" : "off", cfg.durability,
           !cfg.tls_cert ? "plain HTTP" : cfg.tls_client_ca ? "TLS with client certificates" : "TLS");
    char blas_line[256];
    gp_blas_core_seen seen = gp_blas_core_observe();
    gp_blas_core_describe(&seen, blas_line, sizeof blas_line);
    gp_log("gpserve: %s", blas_line);
    gp_log("gpserve listening on %s%s%s:%u", open_b, cfg.bind, close_b, gp_server_port(srv));

    int sig = 0;
    for (;;) {
        if (sigwait(&stop_signals, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        gp_log("gpserve: SIGHUP received, reloading");
        reload_keys(keys, srv);
        gp_server_reload(srv);
    }
    gp_log("gpserve: %s received, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    gp_server_stop(srv);
    gp_api_close(api);
    gp_keyring_free(keys);
    gp_log("gpserve: stopped");
    return 0;
}
