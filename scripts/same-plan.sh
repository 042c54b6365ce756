#!/usr/bin/env bash
# The x86_64 and aarch64 binaries must make the same plan: runs `env --json` and `env` of both on
# every fixture node (each of its device-plugin env files, and none), with the fixture's sysfs,
# proc, dev and annotation roots, and on this machine itself, and fails on any difference. The
# aarch64 binary runs under qemu-user (qemu-aarch64-static) unless binfmt_misc can run it.
#
#   bash scripts/same-plan.sh [X86_64_BINARY [AARCH64_BINARY]]
set -euo pipefail
cd "$(dirname "$0")/.."
x86=${1:-target/x86_64-unknown-linux-gnu/release/nccl-wrap}
arm=${2:-target/aarch64-unknown-linux-gnu/release/nccl-wrap}
for b in "$x86" "$arm"; do [ -x "$b" ] || { echo "same-plan: no binary $b: build it first" >&2; exit 2; }; done
emu=(qemu-aarch64-static)
command -v qemu-aarch64-static >/dev/null || { echo "same-plan: qemu-aarch64-static missing (apt-get install qemu-user-static)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/image"

# run NODE_DIR|"" ENV_FILE|"" OUT BINARY...: one run with a clean environment.
run() {
    local node=$1 envfile=$2 out=$3; shift 3
    # An empty image root: what the image holds is each architecture's own libraries (a cache
    # entry of the other architecture is rightly not taken), so the image is left out of the
    # comparison; tests/userspace.rs covers the image check.
    local vars=(PATH=/usr/local/bin:/usr/bin:/bin "NCCL_WRAP_IMAGE_ROOT=$tmp/image")
    if [ -n "$node" ]; then
        vars+=("NCCL_WRAP_SYSFS_ROOT=$node/sys" "NCCL_WRAP_PROC_ROOT=$node/proc" "NCCL_WRAP_DEV_ROOT=$node/dev"
               "NCCL_WRAP_ANNOTATIONS=$node/podnetinfo/annotations")
    fi
    if [ -n "$envfile" ]; then
        while IFS= read -r line; do case $line in *=*) vars+=("$line") ;; esac; done <"$envfile"
    fi
    local rc=0
    env -i "${vars[@]}" "$@" env --json >"$out.json" 2>"$out.json.err" || rc=$?
    echo "exit $rc" >>"$out.json"
    rc=0
    env -i "${vars[@]}" "$@" env >"$out.sh" 2>"$out.sh.err" || rc=$?
    echo "exit $rc" >>"$out.sh"
}

cases=0 differ=0
compare() {  # compare LABEL NODE_DIR ENV_FILE
    local label=$1
    run "$2" "$3" "$tmp/x86" "$x86"
    run "$2" "$3" "$tmp/arm" "${emu[@]}" "$arm"
    cases=$((cases + 1))
    local f
    for f in json json.err sh sh.err; do
        if ! cmp -s "$tmp/x86.$f" "$tmp/arm.$f"; then
            echo "DIFFER $label ($f):"
            diff -u "$tmp/x86.$f" "$tmp/arm.$f" | head -n 20
            differ=$((differ + 1))
            return
        fi
    done
    echo "same   $label: $(head -c 70 "$tmp/x86.json")..."
}

for node in fixtures/nodes/*/; do
    node=${node%/}
    name=$(basename "$node")
    compare "$name" "$node" ""
    for envfile in "$node"/env*; do
        [ -f "$envfile" ] || continue
        compare "$name+$(basename "$envfile")" "$node" "$envfile"
    done
done
compare "this machine" "" ""
echo "$cases cases, $differ differ"
[ "$differ" -eq 0 ]
