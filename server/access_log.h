/* gpserve server: the access log (--access-log FILE|-): one JSON line per
 * answered request, written off the request threads.
 *
 * A request thread formats its line and appends it to a memory buffer under
 * a mutex (a copy, no system call); a writer thread swaps the buffer out and
 * writes it every GP_ACCESS_LOG_FLUSH_MS, sooner once it holds
 * GP_ACCESS_LOG_WAKE_BYTES, and at close. A disk slower than the requests
 * never blocks a request thread: past GP_ACCESS_LOG_MAX_BYTES waiting, lines
 * are dropped and counted, and the count is written as a line of its own. */
#ifndef GP_SERVER_ACCESS_LOG_H
#define GP_SERVER_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#define GP_ACCESS_LOG_FLUSH_MS 200
#define GP_ACCESS_LOG_WAKE_BYTES ((size_t)64 << 10)
#define GP_ACCESS_LOG_MAX_BYTES ((size_t)16 << 20)

/* The longest X-Request-Id taken from a request, and the buffer of one. */
#define GP_REQUEST_ID_MAX 128
#define GP_REQUEST_ID_SIZE (GP_REQUEST_ID_MAX + 1)

typedef struct gp_access_log gp_access_log;

/* Open path ("-": standard output) for appending and start the writer.
 * NULL with a message in msg. */
gp_access_log *gp_access_log_open(const char *path, char *msg, size_t msg_size);
/* Write what is buffered, stop the writer, close. NULL is a no-op. */
void gp_access_log_close(gp_access_log *log);

/* One request's entry. Strings may be NULL (written as null). */
typedef struct gp_access_entry {
    const char *request_id;
    const char *client;   /* the client's address */
    const char *key_name; /* NULL until API keys have names */
    const char *method;
    const char *route;    /* the ROUTE id of server/routes.def */
    const char *model;
    int version;          /* 0: none */
    int status;
    size_t bytes;
    uint64_t duration_us;
} gp_access_entry;

/* Format e as one JSON line (the time is now) and queue it. */
void gp_access_log_write(gp_access_log *log, const gp_access_entry *e);

/* Format the line of e at wall-clock time (Unix seconds, milliseconds) into
 * out; its length (without the NUL), truncated to size - 1. */
size_t gp_access_log_format(const gp_access_entry *e, long long sec, int ms, char *out,
                            size_t size);

/* The request id of a request: its X-Request-Id header (header, NULL when
 * absent) when it is 1..GP_REQUEST_ID_MAX printable ASCII characters without
 * quotes or backslashes, else 16 random hex digits. */
void gp_request_id_choose(const char *header, char out[GP_REQUEST_ID_SIZE]);

#endif
