/*
 * rc_probe: an RC ping-pong between two nodes with every connection knob on the command line,
 * for the fabric lab. ibv_rc_pingpong and perftest fix retry_cnt at 7, which rxe treats as
 * "retry for ever" (rxe_comp.c only counts retries below 7), so a path that drops RoCE hangs
 * them instead of ending in IBV_WC_RETRY_EXC_ERR; rc_probe sets timeout and retry_cnt.
 *
 *   rc_probe -d DEV [-g GIDX] [-p PORT] [-m MTU] [-t TIMEOUT] [-r RETRY] [-n ITERS] [-s SIZE] [SERVER]
 *
 * Exchanges QPN, PSN and GID over TCP (server: listens on PORT; client: connects to SERVER),
 * connects the QPs, then ITERS round trips of SIZE bytes (client sends first). Output is line
 * buffered: "local ...", "remote ...", then either "ok ITERS iters USEC us/iter" (exit 0) or
 * "completion error: status N (TEXT) opcode OP after S s" (exit 2); set-up errors exit 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    printf("error: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static enum ibv_mtu mtu_enum(int m)
{
    switch (m) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return IBV_MTU_1024;
    }
}

struct dest { unsigned qpn, psn; union ibv_gid gid; };

static void gid_str(const union ibv_gid *g, char *out)
{
    inet_ntop(AF_INET6, g->raw, out, INET6_ADDRSTRLEN);
}

static int oob_connect(const char *server, int port)
{
    char ps[16];
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
    int fd, one = 1;
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(server, ps, &hints, &res)) die("getaddrinfo");
    fd = socket(res->ai_family, res->ai_socktype, 0);
    if (fd < 0) die("socket");
    if (server) {
        if (connect(fd, res->ai_addr, res->ai_addrlen)) die("connect to server");
        return fd;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1)) die("listen");
    int c = accept(fd, NULL, NULL);
    if (c < 0) die("accept");
    close(fd);
    return c;
}

static void xfer(int fd, void *out, void *in, size_t n)
{
    if (write(fd, out, n) != (ssize_t)n) die("oob write");
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)in + got, n - got);
        if (r <= 0) die("oob read");
        got += r;
    }
}

int main(int argc, char **argv)
{
    const char *dev = NULL, *server = NULL;
    int gidx = 1, port = 18515, mtu = 1024, timeout = 14, retry = 7, iters = 5, size = 64, c;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((c = getopt(argc, argv, "d:g:p:m:t:r:n:s:")) != -1) {
        switch (c) {
        case 'd': dev = optarg; break;
        case 'g': gidx = atoi(optarg); break;
        case 'p': port = atoi(optarg); break;
        case 'm': mtu = atoi(optarg); break;
        case 't': timeout = atoi(optarg); break;
        case 'r': retry = atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s -d DEV [-g GIDX] [-p PORT] [-m MTU] [-t TIMEOUT] [-r RETRY] [-n ITERS] [-s SIZE] [SERVER]\n", argv[0]);
            return 1;
        }
    }
    if (optind < argc) server = argv[optind];
    if (!dev) { fprintf(stderr, "-d DEV is required\n"); return 1; }

    struct ibv_device **list = ibv_get_device_list(NULL), *d = NULL;
    for (int i = 0; list && list[i]; i++)
        if (!strcmp(ibv_get_device_name(list[i]), dev)) d = list[i];
    if (!d) { errno = ENODEV; die("device not found"); }
    struct ibv_context *ctx = ibv_open_device(d);
    if (!ctx) die("ibv_open_device");
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) die("ibv_alloc_pd");
    char *buf = calloc(2, size);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * size, IBV_ACCESS_LOCAL_WRITE);
    if (!mr) die("ibv_reg_mr");
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (!cq) die("ibv_create_cq");
    struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
    struct ibv_qp *qp = ibv_create_qp(pd, &qia);
    if (!qp) die("ibv_create_qp");

    struct dest me = { .qpn = qp->qp_num, .psn = (unsigned)(getpid() * 7919u) & 0xffffff }, peer;
    if (ibv_query_gid(ctx, 1, gidx, &me.gid)) die("ibv_query_gid");
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
        .qp_access_flags = 0 };
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify QP to INIT");
    struct ibv_sge rsge = { .addr = (uintptr_t)(buf + size), .length = size, .lkey = mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *brw;
    for (int i = 0; i < 2 && i < iters; i++)
        if (ibv_post_recv(qp, &rwr, &brw)) die("ibv_post_recv");

    int fd = oob_connect(server, port);
    xfer(fd, &me, &peer, sizeof me);
    char lg[INET6_ADDRSTRLEN], rg[INET6_ADDRSTRLEN];
    gid_str(&me.gid, lg);
    gid_str(&peer.gid, rg);
    printf("local  QPN 0x%06x PSN 0x%06x GID %s\n", me.qpn, me.psn, lg);
    printf("remote QPN 0x%06x PSN 0x%06x GID %s\n", peer.qpn, peer.psn, rg);
    printf("path_mtu %d timeout %d retry_cnt %d\n", mtu, timeout, retry);

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu_enum(mtu);
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.sgid_index = gidx;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify QP to RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry;
    a.rnr_retry = 7;
    a.sq_psn = me.psn;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify QP to RTS");
    char x = 'r', y;
    xfer(fd, &x, &y, 1);  /* both sides in RTS with receives posted */

    struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = size, .lkey = mr->lkey };
    struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED }, *bsw;
    double t0 = now(), op0 = t0;
    int recvs_posted = iters < 2 ? iters : 2;
    for (int i = 0; i < iters; i++) {
        /* client: send, then wait for its completion and the reply; server: the reverse. */
        int need_send = 1, need_recv = 1, sent = 0;
        if (server) {
            op0 = now();
            if (ibv_post_send(qp, &swr, &bsw)) die("ibv_post_send");
            sent = 1;
        }
        while (need_send || need_recv) {
            struct ibv_wc wc;
            int n = ibv_poll_cq(cq, 1, &wc);
            if (n < 0) die("ibv_poll_cq");
            if (n == 0) continue;
            if (wc.status != IBV_WC_SUCCESS) {
                printf("completion error: status %d (%s) opcode %s after %.3f s, iteration %d\n",
                       wc.status, ibv_wc_status_str(wc.status),
                       wc.opcode & IBV_WC_RECV ? "recv" : "send", now() - op0, i + 1);
                return 2;
            }
            if (i == 0)
                printf("iteration 1: %s completed after %.3f s\n", wc.wr_id == 2 ? "recv" : "send",
                       now() - t0);
            if (wc.wr_id == 2) {
                need_recv = 0;
                if (recvs_posted < iters) {
                    if (ibv_post_recv(qp, &rwr, &brw)) die("ibv_post_recv");
                    recvs_posted++;
                }
                if (!sent) {
                    op0 = now();
                    if (ibv_post_send(qp, &swr, &bsw)) die("ibv_post_send");
                    sent = 1;
                }
            } else {
                need_send = 0;
            }
        }
    }
    double el = now() - t0;
    printf("ok %d iters %.1f us/iter\n", iters, el * 1e6 / iters);
    return 0;
}
