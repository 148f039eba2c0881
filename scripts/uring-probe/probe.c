/*
 * uring-probe: a minimal raw FUSE server (no libfuse, no fuser) that serves one read-only
 * file, /data (64 MiB of deterministic bytes, from memory, opened FOPEN_DIRECT_IO), over
 * either transport:
 *   classic: N threads reading /dev/fuse (cloned fds, as b2fs's fuser session does);
 *   uring:   FUSE over io_uring (Linux 6.14+): one ring per CPU, qid = CPU, each on a thread
 *            pinned to that CPU, entries registered with FUSE_IO_URING_CMD_REGISTER and
 *            answered with FUSE_IO_URING_CMD_COMMIT_AND_FETCH (IORING_OP_URING_CMD, SQE128).
 *            A /dev/fuse thread stays for what the kernel still sends there (INIT, FORGET,
 *            INTERRUPT, and every request until all queues are registered).
 * A research probe for b2fs issue 25 (BENCHMARKS.md "Session 21"); not part of the product.
 *
 * usage: probe MOUNTPOINT [--uring] [--threads N] [--depth D] [--size MIB] [--defer]
 *              [--pin-dev CPU] [--handoff] [--work US]
 * --defer: rings with SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN (the default is plain SQE128,
 * as libfuse 3.18's, which found those flags slower); --pin-dev: pin the /dev/fuse thread(s);
 * --handoff: each queue thread passes requests to an unpinned worker that answers and commits;
 * --work US: every READ spins US microseconds before its answer (a stand-in for a decode).
 * Prints "ready <transport>" on stdout once the mount serves requests over the chosen
 * transport (for --uring: once every queue has registered its entries); runs until unmounted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ABI 7.42+ pieces the Debian 12 header (7.38) lacks: include/uapi/linux/fuse.h. */
#define P_FUSE_OVER_IO_URING_FLAGS2 (1u << (41 - 32))
#define P_FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2 (1u << (36 - 32))
#define P_URING_HDR_SZ 128
#define P_URING_OP_SZ 128
enum { P_URING_CMD_REGISTER = 1, P_URING_CMD_COMMIT_AND_FETCH = 2 };
struct p_uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};
struct p_uring_req_header {
    char in_out[P_URING_HDR_SZ];
    char op_in[P_URING_OP_SZ];
    struct p_uring_ent_in_out ring_ent_in_out;
};
struct p_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

#define MAX_IO (1u << 20)                  /* max_write / max_pages * 4 KiB */
#define DEV_BUF (MAX_IO + 4096)            /* a /dev/fuse read buffer */
#define FILE_INO 2
#define MAX_CPUS 64

static int g_devfd = -1;
static int g_uring = 0;
static int g_threads = 2;
static int g_depth = 4;
static int g_pin_dev = -1;
static long g_work_ns; /* --work US: spin this long in every READ (a decode's stand-in) */
static uint64_t g_size = 64ull << 20;
static unsigned char *g_data;
static int g_ncpu;
static atomic_int g_init_done;
static atomic_int g_uring_offered;
static atomic_int g_queues_registered;
static atomic_ulong g_reqs_dev, g_reqs_ring;

static void die(const char *what, int err)
{
    fprintf(stderr, "probe: %s: %s (errno %d)\n", what, strerror(err), err);
    exit(1);
}

static void fill_attr(struct fuse_attr *a, uint64_t ino)
{
    memset(a, 0, sizeof(*a));
    a->ino = ino;
    a->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
    a->mode = ino == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0444);
    a->size = ino == FUSE_ROOT_ID ? 0 : g_size;
    a->blocks = (a->size + 511) / 512;
    a->blksize = 4096;
}

/*
 * One request, transport-neutral: `op` points at the opcode's fixed in-struct, `payload` at
 * what follows it (the name of a LOOKUP or GETXATTR). The reply goes into `out` (up to
 * `out_cap` bytes) or, for READ, is pointed at in g_data via data and data_len (no copy).
 * Returns the error (0 or -errno) for the out header; *out_len is the reply's arg size;
 * returns 1 for requests that take no reply (FORGET, BATCH_FORGET).
 */
static int handle(const struct fuse_in_header *h, const void *op, const char *payload,
                  size_t payload_len, void *out, size_t *out_len, const void **data,
                  size_t *data_len)
{
    *out_len = 0;
    *data = NULL;
    *data_len = 0;
    switch (h->opcode) {
    case FUSE_INIT: {
        const struct fuse_init_in *in = op;
        struct fuse_init_out *o = out;
        uint32_t flags2 = (in->flags & FUSE_INIT_EXT) ? in->flags2 : 0;
        memset(o, 0, sizeof(*o));
        o->major = FUSE_KERNEL_VERSION;
        o->minor = in->minor < 45 ? in->minor : 45;
        o->max_readahead = in->max_readahead;
        o->flags = in->flags & (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES |
                                FUSE_INIT_EXT | FUSE_PARALLEL_DIROPS);
        o->max_background = 64;
        o->congestion_threshold = 48;
        o->max_write = MAX_IO;
        o->time_gran = 1;
        o->max_pages = MAX_IO / 4096;
        atomic_store(&g_uring_offered, !!(flags2 & P_FUSE_OVER_IO_URING_FLAGS2));
        o->flags2 = flags2 & P_FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2; /* mmap of direct-I/O files */
        if (g_uring && (flags2 & P_FUSE_OVER_IO_URING_FLAGS2))
            o->flags2 |= P_FUSE_OVER_IO_URING_FLAGS2;
        fprintf(stderr, "probe: INIT kernel %u.%u flags %#x flags2 %#x; uring offered %d\n",
                in->major, in->minor, in->flags, flags2,
                !!(flags2 & P_FUSE_OVER_IO_URING_FLAGS2));
        *out_len = sizeof(*o);
        return 0;
    }
    case FUSE_LOOKUP: {
        struct fuse_entry_out *o = out;
        if (h->nodeid != FUSE_ROOT_ID || payload_len < 4 || memcmp(payload, "data", 5) != 0)
            return -ENOENT;
        memset(o, 0, sizeof(*o));
        o->nodeid = FILE_INO;
        o->generation = 1;
        o->entry_valid = 3600;
        o->attr_valid = 3600;
        fill_attr(&o->attr, FILE_INO);
        *out_len = sizeof(*o);
        return 0;
    }
    case FUSE_GETATTR: {
        struct fuse_attr_out *o = out;
        if (h->nodeid != FUSE_ROOT_ID && h->nodeid != FILE_INO)
            return -ENOENT;
        memset(o, 0, sizeof(*o));
        o->attr_valid = 3600;
        fill_attr(&o->attr, h->nodeid);
        *out_len = sizeof(*o);
        return 0;
    }
    case FUSE_OPEN:
    case FUSE_OPENDIR: {
        const struct fuse_open_in *in = op;
        struct fuse_open_out *o = out;
        if ((in->flags & O_ACCMODE) != O_RDONLY)
            return -EROFS;
        memset(o, 0, sizeof(*o));
        o->fh = 1;
        o->open_flags = h->opcode == FUSE_OPEN ? FOPEN_DIRECT_IO : 0;
        *out_len = sizeof(*o);
        return 0;
    }
    case FUSE_READ: {
        const struct fuse_read_in *in = op;
        if (h->nodeid != FILE_INO)
            return -EISDIR;
        if (g_work_ns > 0) {
            struct timespec t0, t;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do
                clock_gettime(CLOCK_MONOTONIC, &t);
            while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < g_work_ns);
        }
        if (in->offset < g_size) {
            uint64_t n = g_size - in->offset;
            *data = g_data + in->offset;
            *data_len = n < in->size ? n : in->size;
        }
        return 0;
    }
    case FUSE_READDIR:
        return 0; /* an empty listing: the probe is reached by name */
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FLUSH:
        return 0;
    case FUSE_STATFS: {
        struct fuse_statfs_out *o = out;
        memset(o, 0, sizeof(*o));
        o->st.bsize = 4096;
        o->st.frsize = 4096;
        o->st.blocks = g_size / 4096;
        o->st.files = 2;
        o->st.namelen = 255;
        *out_len = sizeof(*o);
        return 0;
    }
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT:
        return 1;
    case FUSE_DESTROY:
        return 0;
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
    default:
        return -ENOSYS;
    }
}

/* Size of the opcode's fixed in-struct in a /dev/fuse request (what io_uring puts in op_in). */
static size_t op_size(uint32_t opcode)
{
    switch (opcode) {
    case FUSE_INIT: return sizeof(struct fuse_init_in);
    case FUSE_GETATTR: return sizeof(struct fuse_getattr_in);
    case FUSE_OPEN:
    case FUSE_OPENDIR: return sizeof(struct fuse_open_in);
    case FUSE_READ:
    case FUSE_READDIR: return sizeof(struct fuse_read_in);
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR: return sizeof(struct fuse_release_in);
    case FUSE_FLUSH: return sizeof(struct fuse_flush_in);
    case FUSE_GETXATTR: return sizeof(struct fuse_getxattr_in);
    case FUSE_FORGET: return sizeof(struct fuse_forget_in);
    default: return 0; /* LOOKUP, STATFS, DESTROY: the name (if any) follows the header */
    }
}

/* Classic transport: one thread per /dev/fuse descriptor, read a request, writev the reply. */
static void *dev_loop(void *arg)
{
    int fd = (int)(intptr_t)arg;
    if (g_pin_dev >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(g_pin_dev, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
            die("pin /dev/fuse thread", errno);
    }
    unsigned char *buf = aligned_alloc(4096, DEV_BUF);
    uint64_t out[64];
    if (!buf)
        die("alloc", ENOMEM);
    for (;;) {
        ssize_t n = read(fd, buf, DEV_BUF);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
                continue;
            if (errno == ENODEV)
                break; /* unmounted */
            die("read /dev/fuse", errno);
        }
        if ((size_t)n < sizeof(struct fuse_in_header))
            continue;
        const struct fuse_in_header *h = (const void *)buf;
        size_t osz = op_size(h->opcode);
        if ((size_t)n < sizeof(*h) + osz)
            osz = n - sizeof(*h);
        size_t out_len, data_len;
        const void *data;
        atomic_fetch_add_explicit(&g_reqs_dev, 1, memory_order_relaxed);
        int rc = handle(h, buf + sizeof(*h), (const char *)buf + sizeof(*h) + osz,
                        n - sizeof(*h) - osz, out, &out_len, &data, &data_len);
        if (rc == 1)
            continue;
        struct fuse_out_header oh = {
            .len = sizeof(oh) + out_len + data_len, .error = rc, .unique = h->unique};
        struct iovec iov[3] = {{&oh, sizeof(oh)}, {out, out_len}, {(void *)data, data_len}};
        if (writev(fd, iov, 3) < 0 && errno != ENOENT)
            fprintf(stderr, "probe: writev: %s\n", strerror(errno));
        if (h->opcode == FUSE_INIT)
            atomic_store(&g_init_done, 1);
    }
    free(buf);
    return NULL;
}

/* io_uring transport: one ring per CPU. */
struct ent {
    struct p_uring_req_header *hdr;
    unsigned char *payload;
    struct iovec iov[2];
};

static void prep_cmd(struct io_uring *ring, int qid, int i, struct ent *e, uint32_t cmd_op,
                     uint64_t commit_id)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        die("io_uring_get_sqe", EBUSY);
    memset(sqe, 0, 128); /* SQE128: 64-byte base + 64 more of command area */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = g_devfd;
    sqe->cmd_op = cmd_op;
    sqe->addr = (uint64_t)(uintptr_t)e->iov;
    sqe->len = 2;
    sqe->user_data = i;
    struct p_uring_cmd_req *req = (void *)sqe->cmd;
    req->qid = qid;
    req->commit_id = commit_id;
}

static int g_ring_flags;
static atomic_int g_ring_error;

/* Answers the request in entry e in place (reply header in in_out, reply args in the payload);
 * returns the commit id to send with COMMIT_AND_FETCH. */
static uint64_t answer_entry(struct ent *e)
{
    uint64_t out[64];
    struct fuse_in_header h;
    memcpy(&h, e->hdr->in_out, sizeof(h));
    uint64_t commit_id = e->hdr->ring_ent_in_out.commit_id;
    uint32_t plen = e->hdr->ring_ent_in_out.payload_sz;
    size_t out_len, data_len;
    const void *data;
    atomic_fetch_add_explicit(&g_reqs_ring, 1, memory_order_relaxed);
    int rc = handle(&h, e->hdr->op_in, (const char *)e->payload, plen < MAX_IO ? plen : MAX_IO,
                    out, &out_len, &data, &data_len);
    if (rc == 1)
        rc = 0; /* nothing without a reply travels on the ring */
    if (out_len)
        memcpy(e->payload, out, out_len);
    if (data_len)
        memcpy(e->payload + out_len, data, data_len);
    struct fuse_out_header oh = {
        .len = sizeof(oh) + out_len + data_len, .error = rc, .unique = h.unique};
    memset(e->hdr->in_out, 0, sizeof(e->hdr->in_out));
    memcpy(e->hdr->in_out, &oh, sizeof(oh));
    e->hdr->ring_ent_in_out.payload_sz = out_len + data_len;
    return commit_id;
}

/*
 * --handoff: the queue thread passes each request to a worker thread (unpinned, one per
 * queue), which answers it and submits the COMMIT_AND_FETCH itself under the queue's lock:
 * the shape of a daemon whose replies come from other threads (b2fs's workers, page stores).
 */
struct queue {
    int qid;
    struct io_uring ring;
    struct ent *ents;
    pthread_mutex_t sq_lock;
    pthread_mutex_t job_lock;
    pthread_cond_t job_cond;
    int jobs[256];
    int njobs;
};

static void *handoff_worker(void *arg)
{
    struct queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->job_lock);
        while (q->njobs == 0)
            pthread_cond_wait(&q->job_cond, &q->job_lock);
        int i = q->jobs[--q->njobs];
        pthread_mutex_unlock(&q->job_lock);
        uint64_t commit_id = answer_entry(&q->ents[i]);
        pthread_mutex_lock(&q->sq_lock);
        prep_cmd(&q->ring, q->qid, i, &q->ents[i], P_URING_CMD_COMMIT_AND_FETCH, commit_id);
        io_uring_submit(&q->ring);
        pthread_mutex_unlock(&q->sq_lock);
    }
    return NULL;
}

static int g_handoff;

static void *ring_loop(void *arg)
{
    int qid = (int)(intptr_t)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(qid, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
        die("pin ring thread", errno);
    struct io_uring ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_SQE128 | g_ring_flags;
    int r = io_uring_queue_init_params(g_depth * 2, &ring, &p);
    if (r < 0)
        die("io_uring_queue_init_params", -r);
    struct ent *ents = calloc(g_depth, sizeof(*ents));
    for (int i = 0; i < g_depth; i++) {
        ents[i].hdr = aligned_alloc(4096, 4096);
        ents[i].payload = aligned_alloc(4096, MAX_IO);
        if (!ents[i].hdr || !ents[i].payload)
            die("alloc", ENOMEM);
        memset(ents[i].hdr, 0, 4096);
        memset(ents[i].payload, 0, MAX_IO); /* touch it now, not on the first reply */
        ents[i].iov[0] = (struct iovec){ents[i].hdr, sizeof(struct p_uring_req_header)};
        ents[i].iov[1] = (struct iovec){ents[i].payload, MAX_IO};
        prep_cmd(&ring, qid, i, &ents[i], P_URING_CMD_REGISTER, 0);
    }
    r = io_uring_submit(&ring);
    if (r != g_depth) {
        fprintf(stderr, "probe: q%d: REGISTER submit returned %d\n", qid, r);
        atomic_store(&g_ring_error, r < 0 ? r : -EIO);
        return NULL;
    }
    atomic_fetch_add(&g_queues_registered, 1);
    int live = g_depth;
    struct queue *hq = NULL;
    if (g_handoff) {
        /* the worker submits on this ring: it must be the same struct io_uring */
        hq = calloc(1, sizeof(*hq));
        hq->qid = qid;
        hq->ents = ents;
        memcpy(&hq->ring, &ring, sizeof(ring));
        pthread_mutex_init(&hq->sq_lock, NULL);
        pthread_mutex_init(&hq->job_lock, NULL);
        pthread_cond_init(&hq->job_cond, NULL);
        pthread_t w;
        pthread_create(&w, NULL, handoff_worker, hq);
    }
    struct io_uring *rp = hq ? &hq->ring : &ring;
    while (live > 0) {
        if (hq) {
            struct io_uring_cqe *c;
            r = io_uring_wait_cqe(rp, &c);
        } else {
            r = io_uring_submit_and_wait(rp, 1);
        }
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
            die("io_uring_submit_and_wait", -r);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(rp, head, cqe)
        {
            seen++;
            int i = (int)cqe->user_data;
            if (cqe->res < 0) {
                if (cqe->res != -ENOTCONN && cqe->res != -ECANCELED) {
                    fprintf(stderr, "probe: q%d ent %d: cqe error %d (%s)\n", qid, i,
                            cqe->res, strerror(-cqe->res));
                    atomic_store(&g_ring_error, cqe->res);
                }
                live--;
                continue;
            }
            struct ent *e = &ents[i];
            if (hq) {
                pthread_mutex_lock(&hq->job_lock);
                hq->jobs[hq->njobs++] = i;
                pthread_cond_signal(&hq->job_cond);
                pthread_mutex_unlock(&hq->job_lock);
                continue;
            }
            prep_cmd(&ring, qid, i, e, P_URING_CMD_COMMIT_AND_FETCH, answer_entry(e));
        }
        io_uring_cq_advance(rp, seen);
    }
    io_uring_queue_exit(rp);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: probe MOUNTPOINT [--uring] [--threads N] [--depth D] "
                        "[--size MIB] [--defer] [--pin-dev CPU] [--handoff] [--work US]\n");
        return 2;
    }
    const char *mnt = argv[1];
    g_ring_flags = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--uring"))
            g_uring = 1;
        else if (!strcmp(argv[i], "--work") && i + 1 < argc)
            g_work_ns = atol(argv[++i]) * 1000;
        else if (!strcmp(argv[i], "--handoff"))
            g_handoff = 1;
        else if (!strcmp(argv[i], "--defer"))
            g_ring_flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                           IORING_SETUP_COOP_TASKRUN;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            g_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pin-dev") && i + 1 < argc)
            g_pin_dev = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
            g_depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            g_size = (uint64_t)atoi(argv[++i]) << 20;
        else {
            fprintf(stderr, "probe: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (g_handoff && g_ring_flags)
        die("--handoff needs a ring without --defer (SINGLE_ISSUER)", EINVAL);
    if (g_threads < 1 || g_threads > 64 || g_depth < 1 || g_depth > 64 || g_size == 0)
        die("arguments", EINVAL);
    g_ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
    if (g_ncpu < 1 || g_ncpu > MAX_CPUS)
        die("cpu count", EINVAL);
    g_data = aligned_alloc(4096, g_size);
    if (!g_data)
        die("alloc data", ENOMEM);
    for (uint64_t i = 0; i < g_size / 8; i++) /* deterministic: a Weyl sequence, mixed */
        ((uint64_t *)g_data)[i] = (i * 0x9E3779B97F4A7C15ull) ^ (i >> 3);

    g_devfd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (g_devfd < 0)
        die("open /dev/fuse", errno);
    char opts[256];
    snprintf(opts, sizeof(opts),
             "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions",
             g_devfd);
    if (mount("uring-probe", mnt, "fuse.uringprobe", MS_NOSUID | MS_NODEV | MS_RDONLY, opts))
        die("mount", errno);

    int ndev = g_uring ? 1 : g_threads;
    pthread_t dev[64];
    for (int t = 0; t < ndev; t++) {
        int fd = g_devfd;
        if (t > 0) {
            fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
            if (fd < 0 || ioctl(fd, FUSE_DEV_IOC_CLONE, &g_devfd))
                die("clone /dev/fuse", errno);
        }
        pthread_create(&dev[t], NULL, dev_loop, (void *)(intptr_t)fd);
    }
    /* The kernel sends INIT when the mount is made; wait for our reply to it. */
    while (!atomic_load(&g_init_done))
        usleep(1000);
    if (g_uring) {
        if (!atomic_load(&g_uring_offered)) {
            fprintf(stderr, "probe: the kernel did not offer FUSE_OVER_IO_URING "
                            "(/sys/module/fuse/parameters/enable_uring)\n");
            umount2(mnt, MNT_DETACH);
            return 3;
        }
        pthread_t q[MAX_CPUS];
        for (int c = 0; c < g_ncpu; c++)
            pthread_create(&q[c], NULL, ring_loop, (void *)(intptr_t)c);
        while (atomic_load(&g_queues_registered) < g_ncpu && !atomic_load(&g_ring_error))
            usleep(1000);
        usleep(20000); /* a REGISTER refused at issue shows up as a CQE error */
        if (atomic_load(&g_ring_error)) {
            fprintf(stderr, "probe: io_uring registration failed: %d\n",
                    atomic_load(&g_ring_error));
            umount2(mnt, MNT_DETACH);
            return 4;
        }
    }
    printf("ready %s\n", g_uring ? "uring" : "classic");
    fflush(stdout);
    for (int t = 0; t < ndev; t++)
        pthread_join(dev[t], NULL);
    fprintf(stderr, "probe: done: %lu requests over /dev/fuse, %lu over io_uring\n",
            atomic_load(&g_reqs_dev), atomic_load(&g_reqs_ring));
    return atomic_load(&g_ring_error) ? 5 : 0;
}
