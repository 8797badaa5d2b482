/* A child program in a process group of its own: see server/launch.h. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np (glibc 2.34) */
#include "server/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Keep the last GP_CHILD_TAIL - 1 bytes of what the child wrote. */
static void keep_tail(gp_child *c, const char *buf, size_t n)
{
    const size_t cap = GP_CHILD_TAIL - 1;
    if (n >= cap) {
        memcpy(c->tail, buf + n - cap, cap);
        c->tail_len = cap;
    } else {
        if (c->tail_len + n > cap) {
            size_t drop = c->tail_len + n - cap;
            memmove(c->tail, c->tail + drop, c->tail_len - drop);
            c->tail_len -= drop;
        }
        memcpy(c->tail + c->tail_len, buf, n);
        c->tail_len += n;
    }
    c->tail[c->tail_len] = '\0';
}

static int spawn_attrs(posix_spawnattr_t *at, posix_spawn_file_actions_t *fa, int err_w)
{
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE); /* ignored in the daemon */
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    int rc = posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(at, 0);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(at, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(at, &defaults);
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(fa, err_w, 2);
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
    return rc;
}

int gp_child_spawn(gp_child *c, char *const argv[], char *msg, size_t size)
{
    memset(c, 0, sizeof *c);
    c->err_fd = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(msg, size, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawnattr_t at;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_init(&fa);
    int rc = spawn_attrs(&at, &fa, fds[1]);
    if (rc == 0)
        rc = posix_spawnp(&c->pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        snprintf(msg, size, "cannot start '%s': %s", argv[0], strerror(rc));
        return -1;
    }
    c->err_fd = fds[0];
    fcntl(c->err_fd, F_SETFL, fcntl(c->err_fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

/* Read what is there; 1 at end of file (every writer gone). */
static int drain(gp_child *c)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(c->err_fd, buf, sizeof buf);
        if (n > 0) {
            keep_tail(c, buf, (size_t)n);
            continue;
        }
        if (n == 0)
            return 1;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : 1;
    }
}

int gp_child_wait(gp_child *c, int ms)
{
    if (c->err_fd >= 0) {
        struct pollfd p = {c->err_fd, POLLIN, 0};
        if (poll(&p, 1, ms) > 0 && drain(c)) {
            close(c->err_fd);
            c->err_fd = -1;
        }
    } else if (!c->exited && ms > 0) {
        poll(NULL, 0, ms);
    }
    if (!c->exited) {
        int st = 0;
        pid_t got = waitpid(c->pid, &st, WNOHANG);
        if (got == c->pid) {
            c->exited = 1;
            c->status = st;
        }
    }
    /* Exited: what it (or a grandchild that outlived it) wrote last. */
    if (c->exited && c->err_fd >= 0)
        drain(c);
    return c->exited;
}

void gp_child_signal(gp_child *c, int sig)
{
    if (!c->exited && c->pid > 0)
        kill(-c->pid, sig);
}

void gp_child_close(gp_child *c)
{
    if (c->err_fd >= 0)
        close(c->err_fd);
    c->err_fd = -1;
}

void gp_child_describe(const gp_child *c, char *out, size_t size)
{
    if (WIFEXITED(c->status))
        snprintf(out, size, "exit status %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(out, size, "signal %d (%s)", WTERMSIG(c->status), strsignal(WTERMSIG(c->status)));
    else
        snprintf(out, size, "status %d", c->status);
}
