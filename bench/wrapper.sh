#!/bin/sh
# The shell entrypoint nccl-wrap replaces, for bench/tables.sh: what a hand-written wrapper does
# on a RoCE node (the pattern of Mellanox's show_gids and of entrypoints seen in the field): walk
# every RDMA device's ports, keep the ACTIVE ones, take each port's first RoCE v2 IPv4 GID index,
# export NCCL_IB_HCA and NCCL_IB_GID_INDEX, raise memlock, exec the command. Shell builtins only
# (no fork per file), so it is as cheap as such a script gets. Not shipped; a baseline only.
#   wrapper.sh SYSFS_ROOT COMMAND [ARGS]...
root=$1; shift
hcas=""; index=""
for dev in "$root"/class/infiniband/*; do
  name=${dev##*/}
  for port in "$dev"/ports/*; do
    read -r state < "$port/state"
    [ "$state" = "4: ACTIVE" ] || continue
    i=0
    while [ -e "$port/gids/$i" ]; do
      read -r gid < "$port/gids/$i"
      case $gid in
        0000:0000:0000:0000:0000:ffff:*)
          type=""; read -r type < "$port/gid_attrs/types/$i" 2>/dev/null
          if [ "$type" = "RoCE v2" ]; then
            index=$i; hcas="$hcas${hcas:+,}$name:${port##*/}"; break
          fi ;;
      esac
      i=$((i + 1))
    done
  done
done
export NCCL_IB_HCA="=$hcas" NCCL_IB_GID_INDEX="$index"
ulimit -l unlimited 2>/dev/null
exec "$@"
