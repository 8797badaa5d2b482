/* gpserve server: counters and histograms for /metrics (Prometheus text
 * exposition format 0.0.4). Thread-safe: one mutex, taken briefly per update. */
#ifndef GP_SERVER_METRICS_H
#define GP_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "server/route.h"

typedef struct gp_metrics gp_metrics;

gp_metrics *gp_metrics_new(void);
void gp_metrics_free(gp_metrics *m);

/* One finished request: route pattern, HTTP method, status, duration. */
void gp_metrics_request(gp_metrics *m, gp_route_id route, const char *method, int status,
                        double seconds);
/* One finished fit: outcome "succeeded", "failed" or "cancelled". */
void gp_metrics_fit(gp_metrics *m, const char *method, const char *outcome, double seconds);

/* One request refused 429 by a rate limit: key name ("-" or NULL: a client
 * address, auth off) and GP_RATE_RPS or GP_RATE_FITS (server/ratelimit.h). */
void gp_metrics_rate_limited(gp_metrics *m, const char *key, int kind);

/* Figures that live elsewhere, sampled when /metrics is read. */
typedef struct gp_metrics_gauges {
    size_t jobs_queued, jobs_running;
    size_t models_loaded;
    uint64_t jitter_escalations, variance_clamps;
    uint64_t batches, batched_requests, batched_points, batch_max_requests;
    size_t models_not_finite; /* stored versions found non-finite (api/poisoned.c) */
    const size_t *thread_connections; /* open connections of each HTTP thread */
    size_t http_threads;
} gp_metrics_gauges;

/* The exposition text (malloc'ed, *len bytes), or NULL when out of memory. */
char *gp_metrics_render(gp_metrics *m, const gp_metrics_gauges *g, size_t *len);

#endif
