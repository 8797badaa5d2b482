/* gpserve server: answers that wait for the disk, off the request threads.
 *
 * An observe is committed on its request thread, but acknowledged only once
 * its commit is on disk (--durability full, docs/design/storage.md). Were the
 * request thread to wait for that sync, a daemon would have only --threads
 * writes in flight to share one fsync. Instead the connection is suspended
 * and its answer handed here: one thread waits for the newest commit of
 * everything handed in meanwhile (one group sync covers them all), then
 * answers each, in the order they came. */
#ifndef GP_SERVER_SYNCER_H
#define GP_SERVER_SYNCER_H

#include <stdint.h>

#include "api/api.h"

typedef struct gp_syncer gp_syncer;

/* Called from the syncer's thread with the answer (its error instead when
 * the sync failed); ownership of res's contents passes to the callee. */
typedef void (*gp_syncer_done)(void *cookie, gp_response *res);

/* NULL when out of memory or the thread cannot start. */
gp_syncer *gp_syncer_new(gp_api *api);
/* Hand res (taken: *res is zeroed) over to be answered once commit ticket
 * is on disk. 0, or -1 when the syncer is stopping (res is left with the
 * caller, who then waits itself). */
int gp_syncer_submit(gp_syncer *s, uint64_t ticket, gp_response *res, gp_syncer_done done,
                     void *cookie);
/* Answer everything handed in, then end the thread (no submit succeeds after). */
void gp_syncer_stop(gp_syncer *s);
void gp_syncer_free(gp_syncer *s); /* stops it first; NULL is fine */

#endif
