/*
dev/trainer/host.h: the small host utilities both trainers use: a clock, main.log's lines, and
files written under a temporary name and renamed (a checkpoint is never half-written).
*/
#ifndef DEV_TRAINER_HOST_H
#define DEV_TRAINER_HOST_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

// ----------------------------------------------------------------------------
// small host utilities

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void logf_line(FILE* logf, const char* line) {
    if (logf != NULL) {
        fprintf(logf, "%s\n", line);
        fflush(logf);
    }
}

static int make_dir(const char* dir) {
    struct stat st;
    if (stat(dir, &st) == 0) { return S_ISDIR(st.st_mode); }
    return mkdir(dir, 0755) == 0;
}

static int file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// temp name + rename, so that a crash never leaves a half-written file under the real name
static FILE* open_tmp_for(const char* path, char* tmp, size_t tmp_size) { // tmp_size > strlen(path) + 4
    snprintf(tmp, tmp_size, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL) {
        fprintf(stderr, "error: %s: cannot write (%s)\n", tmp, strerror(errno));
        exit(EXIT_FAILURE);
    }
    return f;
}
// The file's bytes reach the disk before the rename and the rename before we go on: without the
// first fsync a power loss after the rename can leave PATH empty or short (ext4 and xfs may commit
// the rename first); without the folder's fsync the new name itself may be lost, and -y 1 would
// resume an older checkpoint than the log says was written.
static void close_and_rename(FILE* f, const char* tmp, const char* path) {
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0 || fclose(f) != 0) {
        fprintf(stderr, "error: %s: write failed (%s) (HINT: disk full?)\n", tmp, strerror(errno));
        exit(EXIT_FAILURE);
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "error: cannot rename %s to %s (%s)\n", tmp, path, strerror(errno));
        exit(EXIT_FAILURE);
    }
    char dir[4096];
    const char* slash = strrchr(path, '/');
    if (slash == NULL) { snprintf(dir, sizeof(dir), "."); }
    else { snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path); }
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        fprintf(stderr, "error: %s: cannot sync the folder after renaming %s into it (%s)\n", dir, path, strerror(errno));
        exit(EXIT_FAILURE);
    }
    close(fd);
}
static void fwrite_or_die(const void* p, size_t size, size_t n, FILE* f, const char* path) {
    if (fwrite(p, size, n, f) != n) {
        fprintf(stderr, "error: %s: write failed (%s) (HINT: disk full?)\n", path, strerror(errno));
        exit(EXIT_FAILURE);
    }
}

#endif // DEV_TRAINER_HOST_H
