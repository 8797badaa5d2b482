/* gpserve server: dynamic batching of predict and sample requests.
 *
 * Only requests to models whose method shares work across a batch come here
 * (gp_api_batch_pays, decided at the request's first call: exact, msrfr);
 * the others are answered on their request threads.
 *
 * A predict or sample body is parsed on its request thread (api's
 * gp_point_call), then queued here while its connection is suspended.
 * Runner tasks on the shared compute pool (core/base/parallel.h,
 * gp_pool_run) take the oldest queued call together with every queued call
 * that may join it (gp_api_point_call_joinable: the same model, version and
 * options), up to max_points points, and answer them with one
 * gp_api_point_calls_run: one model look-up and one batched prediction
 * whose answers are bit for bit those of the calls alone.
 *
 * Waiting: a runner whose batch is not full waits for more calls, at most
 * delay_us after the oldest one was queued, but only while other predict or
 * sample requests are arriving (gp_batcher_begin/_end count them from their
 * first byte to their parse): a lone request never waits. At most as many runners as the
 * pool has workers run at once, so request work and fits share the cores
 * instead of each request starting threads of its own. */
#ifndef GP_SERVER_BATCHER_H
#define GP_SERVER_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"

typedef struct gp_batcher gp_batcher;

/* Called once per queued call with its response (ownership moves to the
 * callee), on a pool worker. */
typedef void (*gp_batch_done_fn)(void *cookie, gp_response *res);

/* delay_us > 0 (batching off is the server's business: it then answers on
 * the request thread); max_points >= 1. NULL when out of memory. */
gp_batcher *gp_batcher_new(gp_api *api, long delay_us, size_t max_points);

/* A predict or sample request began arriving / was parsed (queued, answered
 * or refused): the count that decides whether waiting can pay. */
void gp_batcher_begin(gp_batcher *b);
void gp_batcher_end(gp_batcher *b);

/* A request (parsed, so no longer counted as arriving) with no company: no
 * other predict or sample request arriving, none queued or being answered. Then it is answered on its own thread (a
 * hand-off to the pool would only add latency) and counted as being answered
 * until gp_batcher_alone_done: a request arriving meanwhile is queued. Returns
 * 1 (call gp_batcher_alone_done afterwards) or 0 (submit it). */
int gp_batcher_try_alone(gp_batcher *b);
void gp_batcher_alone_done(gp_batcher *b);

/* Queue c (owned by the batcher from now on); done(cookie, res) follows.
 * Returns 0, or -1 when stopping (c is then not taken). */
int gp_batcher_submit(gp_batcher *b, gp_point_call *c, gp_batch_done_fn done, void *cookie);

typedef struct gp_batcher_stats {
    uint64_t batches;   /* runs of gp_api_point_calls_run */
    uint64_t calls;     /* calls answered */
    uint64_t points;    /* points predicted in batches */
    uint64_t max_calls; /* the largest batch, in calls */
} gp_batcher_stats;
void gp_batcher_get_stats(gp_batcher *b, gp_batcher_stats *st);

/* Refuse new calls (submit then returns -1), answer the queued ones and wait
 * for running batches; begin/end stay usable. NULL: nothing. */
void gp_batcher_stop(gp_batcher *b);
/* gp_batcher_stop, then free. */
void gp_batcher_free(gp_batcher *b);

#endif
