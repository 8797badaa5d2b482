/* bench_soak: the load client of the soak test (bench/soak.sh, which starts the
 * daemon and writes bench/results/soak.md; issue 13). Not a benchmark of its
 * own: bench/run.sh runs it only through bench/soak.sh.
 *
 *   build/bench/bench_soak --port N --pid PID [--seconds S] [--loops L]
 *                          [--db PATH] [--think-ms MS] [--max-slope KIB_PER_MIN]
 *                          [--max-growth KIB]
 *
 * Talks HTTP/1.1 to 127.0.0.1:N only (keep-alive connections, plain sockets,
 * no library: the client stays cheap next to the daemon on a 2-core machine).
 * First fits one seed model per method (exact, ssgp, sgpr, msrfr, renyi; small
 * 1-D data), then runs L loops (default 4) for S seconds (default 600), each
 * drawing scenarios from a fixed mix: predict (plain, and with
 * full_covariance + quantiles, + components for msrfr), sample, list, get a
 * model and a version, observe, /metrics, /healthz, /readyz, /v1/methods, two
 * requests that must be refused (a missing model: 404, malformed JSON: 400),
 * and fits of throwaway models: synchronous (sometimes twice under one name,
 * then the second version is read), asynchronous (the job polled until it
 * ends), and asynchronous then cancelled at once (DELETE /v1/jobs/ID: 202 or,
 * if the job already ended, 409); every fit scenario predicts on its model,
 * deletes it (204) and checks it is gone (404). One request in ~20 starts on a
 * fresh connection. Every request is bounded (60 s; fits 120 s; job polls stop
 * after 120 s).
 *
 * Expected answers: each request names the statuses it may get; observe may
 * get any 2xx, or 422 whose error code is "unsupported" (what every method
 * answers today), so the soak exercises online updates once a method has them.
 * An error is any other status, a connection failure or timeout, an async job
 * that fails, or the daemon's death.
 *
 * Every 10 s the main thread samples the daemon (--pid) from /proc: VmRSS,
 * threads, open descriptors, CPU time, and the size of the database (--db).
 * Markdown tables go to stdout: requests by kind with statuses and latency
 * percentiles, the errors, the samples, and the verdict on RSS: after the
 * warm-up (the first quarter of the run), the least-squares slope of RSS must
 * stay under --max-slope KiB/min (default 256) and the mean of the last
 * quarter must not exceed the mean of the second quarter by more than
 * --max-growth KiB (default 1024); RSS is judged on runs of 300 s or more. Both thresholds are about 1 MiB over a
 * 10-minute run: a leak of a few bytes per request at ~1000 requests/s.
 * Exit status: 0 = no error and RSS flat; 1 = errors or RSS growth; 2 = the
 * set-up failed (bad arguments, seed fits refused, daemon not answering). */
#include "bench/bench_soak/soak.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/support/cli.h"
#include "bench/support/clock.h"

#define MAX_LOOPS 16
#define SAMPLE_EVERY 10                   /* seconds between RSS samples */
#define MAX_SAMPLES 4096                  /* 11 hours of samples */
#define MAX_ERRORS_KEPT 20                /* error messages kept for the report */
#define MIN_JUDGED 300                    /* seconds: shorter runs are not judged on RSS */

/* ---- shared state -------------------------------------------------------- */

int g_port;
static pid_t g_pid;
double g_think_ms = 0.0;
atomic_int g_stop;
atomic_long g_requests;
static atomic_long g_errors;
atomic_long g_reconnects;
static atomic_int g_daemon_dead;
static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_err_msg[MAX_ERRORS_KEPT][360];
static int g_err_kept;
static double g_t0;

void note_error(const char *fmt, ...)
{
    atomic_fetch_add(&g_errors, 1);
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* control characters of an answer would break the markdown table */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '|' || *p == '`')
            *p = ' ';
    pthread_mutex_lock(&g_err_lock);
    if (g_err_kept < MAX_ERRORS_KEPT) {
        snprintf(g_err_msg[g_err_kept], sizeof g_err_msg[0], "t=%.1fs %.300s",
                 gp_bench_seconds() - g_t0, msg);
        g_err_kept++;
    }
    pthread_mutex_unlock(&g_err_lock);
    fprintf(stderr, "bench_soak: error: %s\n", msg);
}

int main(int argc, char **argv)
{
    long port = 0, pid = 0, seconds = 600, loops = 4, think = 0, max_slope = 256,
         max_growth = 1024;
    const char *db = NULL;
    const gp_bench_cli_option opts[] = {
        {"port", GP_BENCH_CLI_LONG, &port, 1, 65535, "the daemon's port (required)"},
        {"pid", GP_BENCH_CLI_LONG, &pid, 1, 1L << 30, "the daemon's process id (required)"},
        {"seconds", GP_BENCH_CLI_LONG, &seconds, 10, 36000, "length of the run (default 600)"},
        {"loops", GP_BENCH_CLI_LONG, &loops, 1, MAX_LOOPS, "concurrent client loops (default 4)"},
        {"db", GP_BENCH_CLI_STRING, &db, 0, 0, "the store's file, its size sampled too"},
        {"think-ms", GP_BENCH_CLI_LONG, &think, 0, 10000, "pause between requests (default 0)"},
        {"max-slope", GP_BENCH_CLI_LONG, &max_slope, 0, 1L << 30,
         "fail above this RSS slope, KiB a minute (default 256)"},
        {"max-growth", GP_BENCH_CLI_LONG, &max_growth, 0, 1L << 30,
         "fail above this RSS growth, KiB (default 1024)"},
    };
    const char *usage = "--port N --pid PID [--seconds S] [--loops L] [--db PATH] [--think-ms MS] "
                        "[--max-slope KIB_PER_MIN] [--max-growth KIB]";
    size_t n_pos = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage, NULL, 0,
                                &n_pos);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (port == 0 || pid == 0) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    g_port = (int)port;
    g_pid = (pid_t)pid;
    g_think_ms = (double)think;
    signal(SIGPIPE, SIG_IGN);

    sample s0;
    if (read_proc(g_pid, db, &s0) != 0) {
        fprintf(stderr, "bench_soak: no process %ld\n", pid);
        return 2;
    }
    if (fit_seeds() != 0)
        return 2;

    static worker workers[MAX_LOOPS];
    static sample samples[MAX_SAMPLES];
    int ns = 0;
    for (int i = 0; i < loops; i++) {
        worker *w = &workers[i];
        w->id = i;
        w->rng = 0x9E3779B97F4A7C15ull * (unsigned long long)(i + 1);
        w->conn.fd = -1;
        w->conn.cap = 65536;
        w->conn.buf = malloc(w->conn.cap);
        if (w->conn.buf == NULL)
            return 2;
    }
    g_t0 = gp_bench_seconds();
    if (read_proc(g_pid, db, &samples[ns]) == 0) {
        samples[ns].t = 0.0;
        samples[ns].requests = 0;
        ns++;
    }
    fprintf(stderr, "bench_soak: %ld loops for %ld s on 127.0.0.1:%ld (daemon pid %ld)\n", loops,
            seconds, port, pid);
    int started = 0;
    for (int i = 0; i < loops; i++)
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0)
            started++;
    if (started < loops) {
        atomic_store(&g_stop, 1);
        note_error("could only start %d of %ld loops", started, loops);
    }
    /* Sample every SAMPLE_EVERY s until the end; watch the daemon in between. */
    long next = SAMPLE_EVERY;
    double end = g_t0 + (double)seconds;
    for (long tick = 0; tick < 100L * 36001 && gp_bench_seconds() < end + 0.05; tick++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double t = gp_bench_seconds() - g_t0;
        sample cur;
        if (read_proc(g_pid, db, &cur) != 0) {
            atomic_store(&g_daemon_dead, 1);
            note_error("the daemon (pid %ld) is gone at t=%.1f s", pid, t);
            break;
        }
        if (t + 1e-6 >= (double)next && ns < MAX_SAMPLES) {
            cur.t = (double)next;
            cur.requests = atomic_load(&g_requests);
            samples[ns++] = cur;
            fprintf(stderr, "bench_soak: t=%4.0f s  %8ld requests  RSS %.1f MiB  errors %ld\n",
                    cur.t, cur.requests, (double)cur.rss_kib / 1024.0, atomic_load(&g_errors));
            next += SAMPLE_EVERY;
        }
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    double run_s = gp_bench_seconds() - g_t0;
    sample last;
    int alive = atomic_load(&g_daemon_dead) == 0 && read_proc(g_pid, db, &last) == 0;
    if (!alive && atomic_load(&g_daemon_dead) == 0)
        note_error("the daemon (pid %ld) is gone after the run", pid);

    kstats total[K_COUNT];
    memset(total, 0, sizeof total);
    for (int i = 0; i < loops; i++) {
        for (int k = 0; k < K_COUNT; k++)
            kstats_merge(&total[k], &workers[i].stats[k]);
        free(workers[i].conn.buf);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double client_cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                        (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;

    print_requests(total, run_s, (int)loops);
    long errors = atomic_load(&g_errors);
    printf("## Errors\n\n");
    if (errors == 0) {
        printf("None: every request got one of the statuses it expects (no 5xx, no unexpected\n"
               "status, no connection failure or timeout, no failed job; the daemon stayed up).\n\n");
    } else {
        printf("**%ld errors** (the first %d):\n\n", errors, g_err_kept);
        for (int i = 0; i < g_err_kept; i++)
            printf("- %s\n", g_err_msg[i]);
        printf("\n");
    }

    printf("## Daemon every %d s\n\n", SAMPLE_EVERY);
    printf("CPU: daemon %.1f s, this client %.1f s (of %.0f s × 2 cores of wall time).\n\n",
           ns ? samples[ns - 1].cpu_s - samples[0].cpu_s : 0.0, client_cpu, run_s);
    printf("RSS = VmRSS of /proc/PID/status, the sum of RssAnon (heap, stacks) and RssFile (pages of\n"
           "mapped files: the binary and its libraries, touched as code paths are first run); db =\n"
           "the database with its WAL and shared-memory files.\n\n");
    printf("| t s | requests | req/s | RSS MiB | anon MiB | file MiB | peak RSS MiB | threads |"
           " open fds | CPU s | db MiB |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < ns; i++) {
        const sample *s = &samples[i];
        double rate = i ? (double)(s->requests - samples[i - 1].requests) / (s->t - samples[i - 1].t)
                        : 0.0;
        printf("| %.0f | %ld | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %d | %.1f | %.2f |\n", s->t,
               s->requests, rate, (double)s->rss_kib / 1024.0, (double)s->anon_kib / 1024.0,
               (double)s->file_kib / 1024.0, (double)s->hwm_kib / 1024.0, s->threads, s->fds,
               s->cpu_s, s->db_mib);
    }
    printf("\n");

    /* Verdict: warm-up = the first quarter; slope over the rest, second vs last quarter. */
    double D = ns ? samples[ns - 1].t : 0.0;
    double warm = D / 4.0;
    int m = 0;
    double slope = rss_slope(samples, ns, warm, 0, &m);
    double slope_anon = rss_slope(samples, ns, warm, 1, &m);
    double slope_file = rss_slope(samples, ns, warm, 2, &m);
    double q2 = mean_rss(samples, ns, D / 4.0, D / 2.0);
    double q4 = mean_rss(samples, ns, 3.0 * D / 4.0, D);
    int flat = m >= 2 && slope <= (double)max_slope && q4 - q2 <= (double)max_growth;
    int judged = D >= MIN_JUDGED;
    printf("## Verdict\n\n");
    int iw = 0;
    while (iw + 1 < ns && samples[iw].t + 0.5 < warm)
        iw++;
    printf("Warm-up: the first quarter (%.0f s). RSS is %.2f MiB at t = %.0f s and %.2f MiB at the\n",
           warm, ns ? (double)samples[iw].rss_kib / 1024.0 : 0.0, ns ? samples[iw].t : 0.0,
           ns ? (double)samples[ns - 1].rss_kib / 1024.0 : 0.0);
    printf("end. After the warm-up, over %d samples, RSS grows by\n", m);
    printf("**%.1f KiB/min** (least-squares slope; threshold %ld KiB/min); the mean RSS of the last\n",
           slope, max_slope);
    printf("quarter is %.2f MiB against %.2f MiB in the second quarter: **%+.0f KiB** (threshold\n",
           q4 / 1024.0, q2 / 1024.0, q4 - q2);
    if (judged)
        printf("%+ld KiB). RSS %s after warm-up; %ld errors.\n\n", max_growth,
               flat ? "is flat" : "is **not** flat", errors);
    else
        printf("%+ld KiB). A run shorter than %d s is mostly warm-up: RSS is not judged (only\n"
               "errors fail it); %ld errors.\n\n",
               max_growth, MIN_JUDGED, errors);
    flat = flat || !judged;
    printf("The two parts of RSS over the same samples: RssAnon %+.1f KiB/min, RssFile %+.1f KiB/min.\n\n",
           slope_anon, slope_file);
    fflush(stdout);
    return errors == 0 && flat && alive ? 0 : 1;
}
