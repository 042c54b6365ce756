/* Per-operation costs of what an nccl-wrap start does, each in a loop: the address dumps
 * (getifaddrs against one RTM_GETADDR dump), the routing tables, stat and listings of the image
 * directories, and reads of a fixture node's sysfs attributes. BENCHMARKS.md, "Start-up on
 * real-sized GID tables", quotes it for the idle GPU host and this project's VM.
 *
 *   cc -O2 -static -o /tmp/ops bench/ops.c && /tmp/ops fixtures/nodes/h100-roce-sriov
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#define BENCH(name, N, body) do{double t0=now();for(int i=0;i<N;i++){body;}printf("%-40s %8.2f us\n",name,(now()-t0)/N);}while(0)
static void rd(const char*p){char b[16384];int fd=open(p,O_RDONLY|O_CLOEXEC);if(fd<0)return;while(read(fd,b,sizeof b)>0);close(fd);}
static void ls(const char*p){DIR*d=opendir(p);if(!d)return;while(readdir(d));closedir(d);}
static void nl(int type,int mask){int s=socket(AF_NETLINK,SOCK_RAW|SOCK_CLOEXEC,NETLINK_ROUTE);struct{struct nlmsghdr h;struct ifinfomsg i;struct rtattr a;unsigned m;}r={0};
 r.h.nlmsg_len=type==RTM_GETLINK&&mask?sizeof r:NLMSG_LENGTH(sizeof(struct ifinfomsg));r.h.nlmsg_type=type;r.h.nlmsg_flags=NLM_F_REQUEST|NLM_F_DUMP;r.h.nlmsg_seq=1;
 r.a.rta_type=IFLA_EXT_MASK;r.a.rta_len=RTA_LENGTH(4);r.m=mask;
 send(s,&r,r.h.nlmsg_len,0);char b[32768];for(;;){int n=recv(s,b,sizeof b,0);if(n<=0)break;struct nlmsghdr*h=(void*)b;int done=0;for(;NLMSG_OK(h,n);h=NLMSG_NEXT(h,n))if(h->nlmsg_type==NLMSG_DONE||h->nlmsg_type==NLMSG_ERROR)done=1;if(done)break;}close(s);}
int main(int c,char**v){
 const char*fx=v[1];char p[512];struct stat st;struct ifaddrs*ia;
 BENCH("getifaddrs",5000,{getifaddrs(&ia);freeifaddrs(ia);});
 BENCH("RTM_GETADDR dump",5000,nl(RTM_GETADDR,0));
 BENCH("RTM_GETLINK dump",5000,nl(RTM_GETLINK,0));
 BENCH("RTM_GETLINK dump skip stats",5000,nl(RTM_GETLINK,8));
 BENCH("read /proc/net/route",5000,rd("/proc/net/route"));
 BENCH("read /proc/net/ipv6_route",5000,rd("/proc/net/ipv6_route"));
 BENCH("statx ENOENT /usr/lib/x86_64-linux-gnu/libnccl.so.2",20000,stat("/usr/lib/x86_64-linux-gnu/libnccl.so.2",&st));
 BENCH("statx hit libibverbs.so.1",20000,stat("/lib/x86_64-linux-gnu/libibverbs.so.1",&st));
 BENCH("ls /usr/lib",5000,ls("/usr/lib"));
 BENCH("ls /usr/local/lib",5000,ls("/usr/local/lib"));
 BENCH("ls libibverbs dir",5000,ls("/lib/x86_64-linux-gnu/libibverbs"));
 snprintf(p,512,"%s/sys/class/infiniband/mlx5_6/device/net",fx);
 BENCH("ls fixture device/net",5000,ls(p));
 snprintf(p,512,"%s/sys/class/infiniband/mlx5_6/ports/1/gids/3",fx);
 BENCH("read fixture gid attr",20000,rd(p));
 snprintf(p,512,"%s/sys/class/infiniband/mlx5_6/device",fx);
 BENCH("readlink fixture device",20000,{char b[256];readlink(p,b,256);});
 BENCH("read /sys/class/net/lo/mtu (sysfs)",20000,rd("/sys/class/net/lo/mtu"));
 BENCH("read ld.so.cache",5000,rd("/etc/ld.so.cache"));
 return 0;}
