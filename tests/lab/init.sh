#!/bin/sh
# /init of the lab guest: bring up a minimal system, load the Soft-RoCE modules, run every scenario
# once in a clean RDMA/network state, print one LAB-RESULT line per scenario on the serial console,
# then power off. The host side (run.sh) only trusts LAB-* lines; everything else is for people.
# With LAB_NODE on the kernel command line the guest is one node of a fabric run (fabric.sh):
# after the common start it runs /lab/fabric/node.sh instead of the single-guest scenarios.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /tmp /run /var/run/netns
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# Keep kernel chatter (rxe link events) off the console so result lines stay whole.
echo 1 >/proc/sys/kernel/printk
ip_=/usr/sbin/ip
$ip_ link set lo up

# The firmware leaves a partial line on the console; start ours on a fresh one.
echo
uptime_s() { cut -d' ' -f1 /proc/uptime; }
echo "LAB-TIME boot $(uptime_s)"

modfail=
for m in $(cat /lab/modules.order); do
    if ! out=$(insmod "/lib/modules/lab/$m.ko" 2>&1); then
        echo "lab: insmod $m failed: $out"
        modfail="$modfail $m"
    fi
done
if [ -n "$modfail" ]; then
    echo "LAB-RESULT modules FAIL insmod failed:$modfail"
else
    echo "lab: modules loaded: $(tr '\n' ' ' </lab/modules.order)"
fi

if [ -n "${LAB_NODE:-}" ]; then
    . /lab/fabric/node.sh
    sync
    poweroff -f
fi

. /lab/scenarios/lib.sh
mkdir -p /tmp/lab-results
for name in $(cat /lab/scenarios.list); do
    lab_reset >/dev/null 2>&1
    echo "LAB-START $name $(uptime_s)"
    t0=$(uptime_s)
    LAB_SCENARIO=$name timeout "${LAB_SCENARIO_TIMEOUT:-90}" sh "/lab/scenarios/$name.sh" </dev/null 2>&1
    rc=$?
    if [ ! -e "/tmp/lab-results/$name" ]; then
        echo "LAB-RESULT $name FAIL scenario ended without a result (exit $rc)"
    fi
    echo "LAB-TIME $name $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN{printf "%.2f", b-a}')"
done
lab_reset >/dev/null 2>&1
echo "LAB-DONE $(uptime_s)"
sync
poweroff -f
