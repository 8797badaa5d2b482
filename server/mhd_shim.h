/* gpserve server: two libmicrohttpd functions wrapped so that the errors the
 * library answers by itself come out in the API's JSON error shape.
 *
 * libmicrohttpd 0.9.75 (Debian bookworm) answers a request it cannot parse
 * (a request line or headers beyond the connection's memory, a bad
 * Content-Length, a bad request line or HTTP version) with a built-in HTML
 * page, before our access handler sees the request, and offers no option or
 * callback to supply that body. It queues those pages through its exported
 * MHD_queue_response, and stores every header through its exported
 * MHD_set_connection_value_n, both called through the PLT, so the daemon
 * defines both (server/mhd_shim.c) and the dynamic linker binds the library's
 * own calls to these definitions:
 *
 *  - MHD_queue_response: a status >= 400 on a response without any header
 *    is the library's page (every response of ours carries X-Request-Id); it
 *    is replaced by the JSON of the error-page function the transport set
 *    (gp_mhd_shim_set_error_page; server/http.c).
 *  - MHD_set_connection_value_n: a Content-Length the library would refuse is
 *    stored as GP_MHD_BAD_CONTENT_LENGTH instead, so the request reaches our
 *    handler, which answers it (400, or 413 for a number beyond 64 bits). The
 *    library's own answer for it is broken in 0.9.75: it writes its header
 *    block twice, so even a replaced body would not reach the client intact.
 *
 * The originals are found with dlsym(RTLD_NEXT). gp_mhd_shim_check tells
 * whether the wrappers are the ones the process uses. */
#ifndef GP_SERVER_MHD_SHIM_H
#define GP_SERVER_MHD_SHIM_H

#include <microhttpd.h>

/* The header name a refused Content-Length is stored under. */
#define GP_MHD_BAD_CONTENT_LENGTH "X-Gpserve-Refused-Content-Length"

/* The JSON response that replaces the library's error page of *status on c,
 * with *status set to the status of the catalogue code chosen; NULL keeps the
 * library's page (out of memory). */
typedef struct MHD_Response *(*gp_mhd_error_page_fn)(struct MHD_Connection *c, unsigned *status);

/* Set the function that makes the error pages (process-wide; before the
 * daemon starts). The shim knows nothing of the transport, which calls it:
 * no link-level circle. Without one, the library's pages stay. */
void gp_mhd_shim_set_error_page(gp_mhd_error_page_fn fn);

/* 0 when both wrappers are in use; 1 (message in msg) when the library's own
 * calls bypass them (its error pages stay HTML); -1 (message in msg) when the
 * originals are missing: then no response can be queued at all. */
int gp_mhd_shim_check(char *msg, size_t msg_size);

#endif
