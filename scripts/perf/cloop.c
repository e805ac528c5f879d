/* The reference the writer is measured against (scripts/perf-writer.sh): a plain C loop
 * of pwrite + fdatasync, O_DIRECT where the file system takes it, 4 KiB records written
 * sequentially over a preallocated file (written once before timing, so no block is
 * allocated inside the loop), wrapping at the end, for a fixed time. With BATCH > 1 it
 * writes BATCH records then flushes once (the pattern of `plugpull write --batch`).
 * With OFFSET it writes [OFFSET, OFFSET + SIZE_BYTES) of FILE instead of [0, SIZE_BYTES):
 * several loops can then share one file in disjoint shares, as the streams of
 * `plugpull write --streams` share one target.
 * Prints operations (records) per second on stdout, and "direct" or "buffered" on stderr.
 *
 * Usage: cloop FILE SIZE_BYTES SECONDS [BATCH [OFFSET]]
 * Build: cc -O2 -o cloop scripts/perf/cloop.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REC 4096

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s FILE SIZE_BYTES SECONDS [BATCH [OFFSET]]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    uint64_t size = strtoull(argv[2], NULL, 10) / REC * REC;
    double secs = atof(argv[3]);
    long batch = argc > 4 ? atol(argv[4]) : 1;
    uint64_t base = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    if (size < REC || batch < 1 || base % REC) {
        fprintf(stderr, "bad size, batch or offset (a multiple of 4096)\n");
        return 2;
    }
    int direct = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0) {
        direct = 0;
        fd = open(path, O_RDWR | O_CREAT, 0600);
    }
    if (fd < 0) {
        perror(path);
        return 1;
    }
    void *buf;
    if (posix_memalign(&buf, REC, REC)) {
        perror("posix_memalign");
        return 1;
    }
    memset(buf, 0xa5, REC);
    /* Preallocate and write once, then make it durable: the loop overwrites. */
    if (posix_fallocate(fd, base, size)) {
        perror("posix_fallocate");
        return 1;
    }
    for (uint64_t at = 0; at < size; at += REC) {
        if (pwrite(fd, buf, REC, base + at) != REC) {
            perror("pwrite");
            return 1;
        }
    }
    if (fdatasync(fd)) {
        perror("fdatasync");
        return 1;
    }
    uint64_t n = 0, at = 0;
    double t0 = now_s(), t;
    do {
        for (long i = 0; i < batch; i++) {
            ((uint64_t *)buf)[0] = n;
            if (pwrite(fd, buf, REC, base + at) != REC) {
                perror("pwrite");
                return 1;
            }
            n++;
            at += REC;
            if (at >= size)
                at = 0;
        }
        if (fdatasync(fd)) {
            perror("fdatasync");
            return 1;
        }
        t = now_s();
    } while (t - t0 < secs);
    printf("%.1f\n", n / (t - t0));
    fprintf(stderr, "%s\n", direct ? "direct" : "buffered");
    close(fd);
    return 0;
}
