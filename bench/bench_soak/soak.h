/* bench_soak (bench/bench_soak/main.c: what it does and how to run it): what
 * its files share, the request kinds and their statistics, the shared state,
 * HTTP over one keep-alive connection, the loops and the /proc samples. One
 * program; nothing here is a public API. */
#ifndef GP_BENCH_SOAK_H
#define GP_BENCH_SOAK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#define BODY_CAP (64 * 1024)              /* request bodies the client writes */
#define NBUCKET 512                       /* latency histogram: 16 buckets per octave of µs */
#define NSTATUS 8                         /* distinct statuses counted per request kind */

/* ---- request kinds (rows of the report) ---------------------------------- */

enum {
    K_PREDICT,
    K_PREDICT_FULL,
    K_SAMPLE,
    K_LIST,
    K_GET_MODEL,
    K_GET_VERSION,
    K_OBSERVE,
    K_FIT_SYNC,
    K_FIT_ASYNC,
    K_JOB_POLL,
    K_JOB_CANCEL,
    K_PREDICT_FITTED,
    K_DELETE,
    K_GET_DELETED,
    K_METRICS,
    K_HEALTHZ,
    K_READYZ,
    K_METHODS,
    K_MISSING,
    K_BAD_JSON,
    K_COUNT
};


/* Expected statuses as bits; E422U: 422 only with the error code "unsupported". */
enum {
    E200 = 1 << 0,
    E201 = 1 << 1,
    E202 = 1 << 2,
    E204 = 1 << 3,
    E400 = 1 << 4,
    E404 = 1 << 5,
    E409 = 1 << 6,
    E422U = 1 << 7,
};

int status_bit(int status);

typedef struct kstats {
    int status[NSTATUS]; /* 0 = free slot; -1 = other statuses */
    long count[NSTATUS];
    long failures; /* no answer: connection failure or timeout */
    long n;
    long hist[NBUCKET];
    double max_ms;
} kstats;

void kstats_add(kstats *k, int status, double ms);
void kstats_merge(kstats *into, const kstats *k);
void print_requests(const kstats *total, double seconds, int loops);

/* ---- shared state (main.c) ----------------------------------------------- */

extern int g_port;
extern double g_think_ms;
extern atomic_int g_stop;
extern atomic_long g_requests;
extern atomic_long g_reconnects;

/* An error for the report (kept up to a bound) and stderr; counted. */
void note_error(const char *fmt, ...);

/* ---- HTTP/1.1 over one keep-alive connection (http.c) -------------------- */

typedef struct hconn {
    int fd;
    char *buf; /* the last answer: headers, body, a terminating NUL */
    size_t cap;
    size_t len;
} hconn;

typedef struct hresp {
    int status;
    const char *body; /* NUL-terminated, inside the connection's buffer */
    size_t body_len;
    char location[160];
} hresp;

void hconn_close(hconn *c);
/* One request and its answer. 0 with r filled; -1 on failure (why says what).
 * A reused keep-alive connection the daemon closed before answering is
 * reopened once (counted as a reconnect, not an error). */
int http_request(hconn *c, const char *method, const char *path, const char *body,
                 double max_s, hresp *r, char *why, size_t whylen);

/* ---- the loops (load.c) ------------------------------------------------- */

typedef struct worker {
    int id;
    unsigned long long rng;
    hconn conn;
    kstats stats[K_COUNT];
    long fits; /* throwaway models named soak-L<id>-<fits> */
    char body[BODY_CAP];
    char path[256];
    pthread_t thread;
} worker;

int fit_seeds(void);
void *worker_main(void *arg);

/* ---- the daemon, from /proc (proc.c) ------------------------------------- */

typedef struct sample {
    double t;
    long requests;
    long rss_kib;
    long anon_kib; /* RssAnon: the heap, stacks; RssFile: mapped files (code) */
    long file_kib;
    long hwm_kib;
    int threads;
    int fds;
    double cpu_s;
    double db_mib;
} sample;

int read_proc(pid_t pid, const char *db, sample *s);
/* The mean RSS of the samples in [from, to); the least-squares slope (report.c). */
double mean_rss(const sample *s, int n, double from, double to);
double rss_slope(const sample *s, int n, double from, int what, int *m);

#endif
