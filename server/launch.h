/* gpserve server: a child program in a process group of its own, its
 * standard error kept (the end of it), for the launcher of distributed fits
 * (server/jobs_mpi.c runs mpirun with gpserve-fit).
 *
 * The child starts from posix_spawn (safe in a threaded process): standard
 * input and output on /dev/null, standard error on a pipe read here, every
 * other descriptor of the daemon closed (a listening socket held by an
 * orphaned mpirun would keep a restarted daemon from binding), the signals
 * the daemon blocks or ignores set back to their defaults, and a new process
 * group, so that one kill reaches mpirun and the ranks it started here. */
#ifndef GP_SERVER_LAUNCH_H
#define GP_SERVER_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#define GP_CHILD_TAIL 4096

typedef struct gp_child {
    pid_t pid;     /* also its process group */
    int err_fd;    /* read end of its standard error; -1 once closed */
    int exited;    /* 1 once reaped */
    int status;    /* waitpid's status once exited */
    char tail[GP_CHILD_TAIL]; /* the last bytes of its standard error, NUL-terminated */
    size_t tail_len;
} gp_child;

/* Start argv[0] (looked up in PATH) with argv. 0, or -1 with why in msg. */
int gp_child_spawn(gp_child *c, char *const argv[], char *msg, size_t size);
/* Read its standard error for up to ms milliseconds, then reap it if it has
 * ended: 1 when it has exited (and everything it wrote is read), else 0. */
int gp_child_wait(gp_child *c, int ms);
/* Send sig to its whole process group (nothing once it has exited). */
void gp_child_signal(gp_child *c, int sig);
/* Close the pipe; the child must have exited (gp_child_wait returned 1). */
void gp_child_close(gp_child *c);
/* Its end as words into out: "exit status N" or "signal N (name)". */
void gp_child_describe(const gp_child *c, char *out, size_t size);

#endif
