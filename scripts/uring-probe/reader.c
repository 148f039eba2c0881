/*
 * reader: the measured side of the uring-probe (BENCHMARKS.md "Session 21").
 *   reader rand FILE SECONDS CPU SEED   warm random aligned 4 KiB preads for SECONDS after a
 *                                       0.2 s warm-up; CPU -1 = unpinned; prints "ops/s"
 *   reader seq FILE BS CPU              pread the whole file BS bytes at a time; prints MB/s
 *   reader mmap FILE TOUCHES CPU SEED   a fresh MAP_SHARED mapping with MADV_RANDOM (a fault
 *                                       reads one page), TOUCHES random pages; prints
 *                                       "touches/s faults" (faults: minor + major)
 *   reader pingpong CPU_A CPU_B SECONDS two processes bounce a byte over two pipes (the floor
 *                                       of any round trip that puts the caller to sleep: two
 *                                       wake-ups); prints round trips/s
 * Exits non-zero when a read fails or comes back short.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof(s), &s)) {
        perror("sched_setaffinity");
        exit(1);
    }
}

static int pingpong(int a, int b, double secs)
{
    int p1[2], p2[2];
    char c = 0;
    if (pipe(p1) || pipe(p2))
        return 1;
    pid_t kid = fork();
    if (kid == 0) {
        pin(b);
        while (read(p1[0], &c, 1) == 1 && c)
            if (write(p2[1], &c, 1) != 1)
                break;
        _exit(0);
    }
    pin(a);
    c = 1;
    for (int i = 0; i < 2000; i++) /* warm-up */
        if (write(p1[1], &c, 1) != 1 || read(p2[0], &c, 1) != 1)
            return 1;
    uint64_t n = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 256; i++)
            if (write(p1[1], &c, 1) != 1 || read(p2[0], &c, 1) != 1)
                return 1;
        n += 256;
        t = now();
    } while (t - t0 < secs);
    c = 0;
    if (write(p1[1], &c, 1) != 1)
        return 1;
    printf("%.0f\n", n / (t - t0));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "pingpong"))
        return pingpong(atoi(argv[2]), atoi(argv[3]), atof(argv[4]));
    if (argc < 5) {
        fprintf(stderr, "usage: reader rand FILE SECONDS CPU SEED | reader seq FILE BS CPU\n");
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    struct stat st;
    fstat(fd, &st);
    pin(atoi(argv[4]));
    if (!strcmp(argv[1], "rand")) {
        double secs = atof(argv[3]);
        uint64_t x = argc > 5 ? strtoull(argv[5], 0, 10) : 1, pages = st.st_size / 4096;
        char *buf = aligned_alloc(4096, 4096);
        uint64_t ops = 0;
        double t0 = now(), start = 0, end = t0 + 0.2 + secs;
        for (;;) {
            for (int k = 0; k < 64; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                if (pread(fd, buf, 4096, (off_t)(x % pages) * 4096) != 4096) {
                    perror("pread");
                    return 1;
                }
            }
            ops += 64;
            double t = now();
            if (start == 0 && t >= t0 + 0.2)
                start = t, ops = 0;
            if (t >= end) {
                printf("%.0f\n", ops / (t - start));
                return 0;
            }
        }
    }
    if (!strcmp(argv[1], "mmap")) {
        long touches = atol(argv[3]);
        uint64_t x = argc > 5 ? strtoull(argv[5], 0, 10) : 1, pages = st.st_size / 4096;
        const volatile unsigned char *m = mmap(0, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED || madvise((void *)m, st.st_size, MADV_RANDOM)) {
            perror("mmap");
            return 1;
        }
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        double t0 = now();
        unsigned sum = 0;
        for (long i = 0; i < touches; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sum += m[(x % pages) * 4096];
        }
        double t = now() - t0;
        getrusage(RUSAGE_SELF, &r1);
        printf("%.0f %ld\n", touches / t,
               (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt) + (sum & 0));
        return 0;
    }
    size_t bs = strtoull(argv[3], 0, 10);
    char *buf = aligned_alloc(4096, bs);
    double t0 = now();
    off_t off = 0;
    while (off < st.st_size) {
        ssize_t n = pread(fd, buf, bs, off);
        if (n <= 0) {
            perror("pread");
            return 1;
        }
        off += n;
    }
    printf("%.1f\n", st.st_size / (now() - t0) / 1e6);
    return 0;
}
