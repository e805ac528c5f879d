/* The read ceiling verify is measured against besides dd (scripts/perf-scale.sh): a plain
 * C loop reading FILE from start to end with O_DIRECT, CHUNK bytes at a time, one read in
 * flight, into one buffer mapped on its own, 2 MiB aligned and advised onto huge pages
 * before its first touch, as verify's read buffers are (src/device/aligned.rs). Why a
 * second reference: `dd iflag=direct bs=1M` reads into 4 KiB pages, and on a virtio disk
 * a request takes at most max_segments (254 here) pages, so dd's reads are split and
 * pinned page by page; this loop shows what the disk gives a reader that avoids that.
 * Prints the seconds taken and the bytes read.
 *
 * Usage: rawread FILE [CHUNK_BYTES]   (default 2097152)
 * Build: cc -O2 -o rawread scripts/perf/rawread.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define HUGE (2UL << 20)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [CHUNK_BYTES]\n", argv[0]);
        return 2;
    }
    size_t chunk = argc > 2 ? strtoull(argv[2], NULL, 10) : HUGE;
    if (chunk == 0 || chunk % 4096) {
        fprintf(stderr, "CHUNK_BYTES must be a positive multiple of 4096\n");
        return 2;
    }
    double t0 = now_s();
    int fd = open(argv[1], O_RDONLY | O_DIRECT);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    size_t size = (chunk + HUGE - 1) / HUGE * HUGE;
    uint8_t *raw = mmap(NULL, size + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    uint8_t *buf = (uint8_t *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    madvise(buf, size, MADV_HUGEPAGE); /* a hint, as in verify */
    uint64_t total = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, chunk, total);
        if (n < 0) {
            perror("pread");
            return 1;
        }
        if (n == 0)
            break;
        total += n;
        if ((size_t)n < chunk)
            break;
    }
    printf("%.3f %llu\n", now_s() - t0, (unsigned long long)total);
    return 0;
}
