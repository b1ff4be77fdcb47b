/* tcp suite, competitor c-syscalls: the floor. Plain Linux syscalls, no library beyond libc.
 *
 *   bind            socket, setsockopt(SO_REUSEADDR), bind(127.0.0.1:0), listen, close
 *   bind_concurrent the same, 100 pthreads each doing 1/100 of the ops
 *   accept_connect  one blocking listener; per op: connect, accept, close the server end,
 *                   read EOF on the client end, close it (one thread, sequential)
 *   pingpong        one connection (TCP_NODELAY both ends), 64-byte echo, both ends
 *                   non-blocking in one thread driven by one epoll loop
 *   idle_conns      N connections, each server end registered (EPOLLIN) with one epoll fd
 *
 * Usage: tcp [--quick] [--case NAME]
 *
 * Two knobs for experiments, off in the tournament (docs/perf/tcp.md, "What tcp pingpong
 * costs against the floor"): they give the floor the shape of a runtime's process.
 *   TCP_FLOOR_IDLE_THREAD=1  start one idle thread first: the process is multi-threaded, so
 *                            glibc brackets each socket call for cancellation and the kernel
 *                            counts file references (a runtime always has worker threads)
 *   TCP_FLOOR_RECVMSG_INQ=1  pingpong reads with recvmsg and a TCP_INQ control message, as
 *                            spindle reads once a socket has made a full read
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define CONC_UNITS 100
#define FD_RESERVE 100

static const char *COMPETITOR = "c-syscalls";

static void die(const char *what) {
    perror(what);
    exit(1);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void emit(const char *cas, const char *metric, double value, const char *unit) {
    printf("{\"suite\":\"tcp\",\"case\":\"%s\",\"competitor\":\"%s\",\"metric\":\"%s\","
           "\"value\":%.1f,\"unit\":\"%s\"}\n",
           cas, COMPETITOR, metric, value, unit);
    fflush(stdout);
}

static struct sockaddr_in loopback_any(void) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    return a;
}

/* What a listener is: socket, SO_REUSEADDR, bind, listen. */
static int make_listener(int backlog) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) die("setsockopt");
    struct sockaddr_in a = loopback_any();
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(fd, backlog) < 0) die("listen");
    return fd;
}

static struct sockaddr_in local_addr(int fd) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0) die("getsockname");
    return a;
}

static int connect_to(const struct sockaddr_in *a) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) < 0) die("connect");
    return fd;
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
}

static void nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die("fcntl");
}

/* ---- bind ---- */

static void bind_loop(long n) {
    for (long i = 0; i < n; i++) close(make_listener(SOMAXCONN));
}

static void case_bind(long warm, long n) {
    bind_loop(warm);
    double t0 = now_ns();
    bind_loop(n);
    emit("bind", "ns_per_op", (now_ns() - t0) / (double)n, "ns");
}

/* ---- bind_concurrent ---- */

static void *bind_worker(void *arg) {
    bind_loop((long)(intptr_t)arg);
    return NULL;
}

static void bind_threads(long total) {
    pthread_t th[CONC_UNITS];
    long share = total / CONC_UNITS;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int i = 0; i < CONC_UNITS; i++)
        if (pthread_create(&th[i], &attr, bind_worker, (void *)(intptr_t)share) != 0) die("pthread_create");
    for (int i = 0; i < CONC_UNITS; i++) pthread_join(th[i], NULL);
    pthread_attr_destroy(&attr);
}

static void case_bind_concurrent(long warm, long n) {
    n = n / CONC_UNITS * CONC_UNITS;
    bind_threads(warm);
    double t0 = now_ns();
    bind_threads(n);
    emit("bind_concurrent", "ns_per_op", (now_ns() - t0) / (double)n, "ns");
}

/* ---- accept_connect ---- */

static void accept_connect_loop(int lfd, const struct sockaddr_in *a, long n) {
    char b;
    for (long i = 0; i < n; i++) {
        int c = connect_to(a);
        int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0) die("accept");
        close(s);
        if (read(c, &b, 1) != 0) die("expected EOF");
        close(c);
    }
}

static void case_accept_connect(long warm, long n) {
    int lfd = make_listener(SOMAXCONN);
    struct sockaddr_in a = local_addr(lfd);
    accept_connect_loop(lfd, &a, warm);
    double t0 = now_ns();
    accept_connect_loop(lfd, &a, n);
    emit("accept_connect", "ns_per_op", (now_ns() - t0) / (double)n, "ns");
    close(lfd);
}

/* ---- pingpong: one thread, one epoll loop, both ends non-blocking ---- */

struct end {
    int fd;
    char buf[MSG];
    int have; /* bytes of the current message read so far */
};

static int recvmsg_inq; /* TCP_FLOOR_RECVMSG_INQ */

/* One read of up to `len` bytes: read(2), or recvmsg(2) with room for the TCP_INQ message. */
static ssize_t read_some(int fd, char *buf, size_t len) {
    if (!recvmsg_inq) return read(fd, buf, len);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    char control[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                        .msg_controllen = sizeof control};
    return recvmsg(fd, &mh, 0);
}

static void pingpong_loop(int ep, struct end *cli, struct end *srv, long n) {
    struct epoll_event evs[4];
    long done = 0;
    static const char msg[MSG] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    if (write(cli->fd, msg, MSG) != MSG) die("client write");
    while (done < n) {
        int k = epoll_wait(ep, evs, 4, -1);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < k; i++) {
            struct end *e = evs[i].data.ptr;
            for (;;) {
                ssize_t r = read_some(e->fd, e->buf + e->have, MSG - e->have);
                if (r < 0) {
                    if (errno == EAGAIN) break;
                    die("read");
                }
                if (r == 0) die("unexpected EOF");
                e->have += (int)r;
                if (e->have < MSG) continue;
                e->have = 0;
                if (e == srv) {
                    if (write(srv->fd, srv->buf, MSG) != MSG) die("server write");
                } else {
                    done++;
                    if (done < n && write(cli->fd, msg, MSG) != MSG) die("client write");
                }
                break;
            }
        }
    }
}

static void case_pingpong(long warm, long n) {
    int lfd = make_listener(SOMAXCONN);
    struct sockaddr_in a = local_addr(lfd);
    static struct end cli, srv;
    cli.fd = connect_to(&a);
    srv.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (srv.fd < 0) die("accept");
    nodelay(cli.fd);
    nodelay(srv.fd);
    nonblock(cli.fd);
    nonblock(srv.fd);
    recvmsg_inq = getenv("TCP_FLOOR_RECVMSG_INQ") != NULL;
    if (recvmsg_inq) {
        int one = 1;
        if (setsockopt(cli.fd, IPPROTO_TCP, TCP_INQ, &one, sizeof one) < 0) die("TCP_INQ");
        if (setsockopt(srv.fd, IPPROTO_TCP, TCP_INQ, &one, sizeof one) < 0) die("TCP_INQ");
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cli};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, cli.fd, &ev) < 0) die("epoll_ctl");
    ev.data.ptr = &srv;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, srv.fd, &ev) < 0) die("epoll_ctl");
    pingpong_loop(ep, &cli, &srv, warm);
    double t0 = now_ns();
    pingpong_loop(ep, &cli, &srv, n);
    emit("pingpong", "ns_per_op", (now_ns() - t0) / (double)n, "ns");
    close(ep);
    close(cli.fd);
    close(srv.fd);
    close(lfd);
}

/* ---- idle_conns ---- */

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) die("/proc/self/statm");
    long size = 0, resident = 0;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) die("statm");
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static long fd_limit;

static void case_idle_conns(long want) {
    long n = want;
    if (2 * n + FD_RESERVE > fd_limit) {
        n = (fd_limit - FD_RESERVE) / 2;
        fprintf(stderr, "idle_conns: RLIMIT_NOFILE is %ld, using %ld connections instead of %ld\n",
                fd_limit, n, want);
    }
    int lfd = make_listener(SOMAXCONN);
    struct sockaddr_in a = local_addr(lfd);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    long before = rss_bytes();
    int *fds = malloc(sizeof(int) * 2 * (size_t)n); /* client, server, client, server, ... */
    if (!fds) die("malloc");
    for (long i = 0; i < n; i++) {
        fds[2 * i] = connect_to(&a);
        int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (s < 0) die("accept");
        fds[2 * i + 1] = s;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0) die("epoll_ctl");
    }
    struct epoll_event evs[8];
    if (epoll_wait(ep, evs, 8, 100) != 0) die("an idle connection became readable");
    long after = rss_bytes();
    emit("idle_conns", "bytes_per_conn", (double)(after - before) / (double)n, "bytes");
    for (long i = 0; i < 2 * n; i++) close(fds[i]);
    free(fds);
    close(ep);
    close(lfd);
}

static void *idle_thread(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv) {
    if (getenv("TCP_FLOOR_IDLE_THREAD")) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle_thread, NULL) != 0) die("pthread_create");
    }
    int quick = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--case NAME]\n", argv[0]);
            return 2;
        }
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) die("getrlimit");
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) die("setrlimit");
    fd_limit = (long)rl.rlim_cur;

#define WANT(name) (!only || !strcmp(only, name))
    /* idle_conns first, so that its resident-set baseline is the fresh process. */
    if (WANT("idle_conns")) case_idle_conns(quick ? 1000 : 10000);
    if (WANT("bind")) case_bind(quick ? 100 : 1000, quick ? 2000 : 20000);
    if (WANT("bind_concurrent")) case_bind_concurrent(quick ? 1000 : 2000, quick ? 2000 : 20000);
    if (WANT("accept_connect")) case_accept_connect(quick ? 50 : 500, quick ? 500 : 5000);
    if (WANT("pingpong")) case_pingpong(quick ? 100 : 1000, quick ? 2000 : 20000);
    return 0;
}
