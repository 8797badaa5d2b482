/* gpserve server: the HTTP daemon (libmicrohttpd): routing, body limits,
 * authentication, responses, request logs, metrics, and the hand-off of fits
 * to the fit workers (server/jobs.h). */
#ifndef GP_SERVER_HTTP_H
#define GP_SERVER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "server/config.h"
#include "server/keys.h"

typedef struct gp_server gp_server;

/* Start listening with cfg (copied; its strings must outlive the server).
 * keys NULL: no authentication; else the caller's keyring (it outlives the
 * server; reloading it is the caller's, on SIGHUP, and the reload route's).
 * Returns NULL with a message in msg. */
gp_server *gp_server_start(const gp_server_config *cfg, gp_api *api, gp_keyring *keys,
                           char *msg, size_t msg_size);
/* The sockets libmicrohttpd may hold: --max-connections admitted ones, and
 * room to accept (and answer 429) those the slot policy refuses. */
long gp_server_connection_sockets(const gp_server_config *cfg);
/* The port actually bound (useful with --port 0). */
unsigned gp_server_port(const gp_server *srv);
/* SIGHUP: re-read what can change without a restart (the TLS certificate and
 * key); a failure is logged and keeps what is in use. */
void gp_server_reload(gp_server *srv);
/* The keyring was reloaded and holds names (n NUL-separated): the rate
 * limits' buckets of the keys no longer there are dropped. */
void gp_server_keys_reloaded(gp_server *srv, const char *names, size_t n);
/* Graceful stop: stop accepting, cancel queued fits, ask running fits to
 * stop, wait for the fit workers, answer suspended requests, stop the
 * daemon, free everything (the api stays open: the caller closes it). */

void gp_server_stop(gp_server *srv);

#endif
