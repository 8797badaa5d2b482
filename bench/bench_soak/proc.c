/* bench_soak: samples of the daemon read from /proc (RSS, threads, open
 * descriptors, CPU time) and the size of its database. */

#include "bench/bench_soak/soak.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the daemon, from /proc ---------------------------------------------- */

/* 0 and the figures if the daemon lives; -1 if it is gone (or a zombie). */
int read_proc(pid_t pid, const char *db, sample *s)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    s->rss_kib = -1;
    s->anon_kib = 0;
    s->file_kib = 0;
    s->hwm_kib = 0;
    s->threads = 0;
    int zombie = 0;
    for (int i = 0; i < 200 && fgets(line, sizeof line, f); i++) {
        char st;
        if (sscanf(line, "State: %c", &st) == 1 && (st == 'Z' || st == 'X'))
            zombie = 1;
        sscanf(line, "VmRSS: %ld", &s->rss_kib);
        sscanf(line, "VmHWM: %ld", &s->hwm_kib);
        sscanf(line, "RssAnon: %ld", &s->anon_kib);
        sscanf(line, "RssFile: %ld", &s->file_kib);
        sscanf(line, "Threads: %d", &s->threads);
    }
    fclose(f);
    if (zombie || s->rss_kib < 0)
        return -1;
    s->fds = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        for (int i = 0; i < 1000000 && (e = readdir(d)) != NULL; i++)
            s->fds += e->d_name[0] != '.';
        closedir(d);
    }
    s->cpu_s = 0.0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        const char *p = strrchr(buf, ')'); /* the name may hold spaces */
        unsigned long long ut = 0, stt = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &stt) == 2)
            s->cpu_s = (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
    }
    s->db_mib = 0.0;
    if (db) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char p2[1100];
            struct stat stt;
            snprintf(p2, sizeof p2, "%s%s", db, suffix[i]);
            if (stat(p2, &stt) == 0)
                s->db_mib += (double)stt.st_size / 1048576.0;
        }
    }
    return 0;
}
