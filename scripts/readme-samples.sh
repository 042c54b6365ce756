#!/usr/bin/env bash
# Prints the sample outputs README.md shows, each from the real binary on a fixture node: every
# root option points into the fixture (--sysfs-root, --proc-root, --dev-root, --annotations,
# --image-root), the environment holds only PATH and the node's device-plugin variables, and the
# process has a pod's usual limits (RLIMIT_MEMLOCK 8 MiB soft and hard, CAP_IPC_LOCK, no
# CAP_SYS_RESOURCE), so nothing of this machine shows. tests/readme_samples.rs runs this script
# with the binary cargo built and compares each sample with its block in README.md, between
# `<!-- sample: NAME -->` and `<!-- /sample -->`.
#
#   bash scripts/readme-samples.sh                 # every sample, each after a "== NAME" line
#   bash scripts/readme-samples.sh NAME...         # those samples' output alone
#   bash scripts/readme-samples.sh --update        # rewrite README.md's sample blocks
#   bash scripts/readme-samples.sh --list          # the samples' names
#
# The binary: --bin PATH, else NCCL_WRAP_BIN, else the newer of the release and debug builds under
# ${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu. Words in NCCL_WRAP_TEST_RUNNER (an
# emulator) go before it. Exit 77 when the pod's limits cannot be set up here (the reason on
# stderr): the samples would show this machine's memlock limit and capabilities instead.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${NCCL_WRAP_BIN:-}
update=0 list=0 names=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --bin=*) bin=${1#--bin=}; shift ;;
    --update) update=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "readme-samples: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done

all=(summary doctor refused)
if [ "$list" = 1 ]; then printf '%s\n' "${all[@]}"; exit 0; fi

if [ -z "$bin" ]; then
  dir=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu
  for b in "$dir/release/nccl-wrap" "$dir/debug/nccl-wrap"; do
    if [ -x "$b" ] && { [ -z "$bin" ] || [ "$b" -nt "$bin" ]; }; then bin=$b; fi
  done
  [ -n "$bin" ] || { echo "readme-samples: no binary under $dir: run cargo build first, or pass --bin" >&2; exit 2; }
fi
read -r -a runner <<<"${NCCL_WRAP_TEST_RUNNER:-}"

# A pod's limits, the field case README tells: memlock 8 MiB that cannot be raised, IPC_LOCK added.
pod=(prlimit --memlock=8388608:8388608 setpriv --bounding-set=-sys_resource --inh-caps=-sys_resource --)
cap_eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
why=
if ! command -v prlimit >/dev/null || ! command -v setpriv >/dev/null; then
  why="prlimit(1) and setpriv(1) (util-linux) are needed to give the samples a pod's limits"
elif [ $(( (16#${cap_eff:-0} >> 14) & 1 )) -ne 1 ]; then
  why="this process lacks CAP_IPC_LOCK, which a training pod adds (run as root)"
elif ! "${pod[@]}" true 2>/dev/null; then
  why="a memlock hard limit of 8 MiB without CAP_SYS_RESOURCE cannot be set here: $(ulimit -H -l) KiB, and setpriv must drop capabilities"
fi
if [ -n "$why" ]; then echo "readme-samples: $why" >&2; exit 77; fi

# run NODE ENV_FILE IMAGE EXPECTED_EXIT ARGS...: the binary's stdout, then its stderr.
run() {
  local node=fixtures/nodes/$1 envfile=$2 image=fixtures/images/$3 want=$4; shift 4
  local vars=(PATH=/usr/local/bin:/usr/bin:/bin)
  if [ -n "$envfile" ]; then
    while IFS= read -r line; do case $line in *=*) vars+=("$line") ;; esac; done <"$node/$envfile"
  fi
  local out err rc=0
  out=$(mktemp) err=$(mktemp)
  "${pod[@]}" env -i "${vars[@]}" "${runner[@]}" "$bin" \
    --sysfs-root "$node/sys" --proc-root "$node/proc" --dev-root "$node/dev" \
    --annotations "$node/podnetinfo/annotations" --image-root "$image" "$@" >"$out" 2>"$err" </dev/null || rc=$?
  cat "$out" "$err"
  rm -f "$out" "$err"
  if [ "$rc" != "$want" ]; then
    echo "readme-samples: $bin $* on $node exited $rc, the sample expects $want" >&2
    return 1
  fi
}

# The roots go first (before a subcommand, and before `--`, after which every word is the
# command's); each sample below adds what the user would type.
sample() {
  case $1 in
    # A start on an OpenShift H100 pod holding 4 of the node's 12 RDMA devices (SR-IOV VFs).
    summary) run h100-roce-sriov env full 0 -- true ;;
    # doctor on a node left in translated IOMMU mode: its FAIL lines and the tally.
    doctor) run translated-iommu env full 1 doctor | grep -E '^(FAIL |[0-9]+ fail, )' ;;
    # A pod whose image has no libibverbs: NCCL would fall back to TCP; --require-rdma refuses.
    refused) run h100-roce-sriov env no-verbs 125 -q --require-rdma -- true ;;
    *) echo "readme-samples: no sample $1 (--list names them)" >&2; return 2 ;;
  esac
}

if [ "$update" = 1 ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  for n in "${all[@]}"; do sample "$n" >"$tmp/$n"; done
  python3 - "$tmp" README.md <<'EOF'
import os, re, sys
tmp, readme = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
seen = []
def fill(m):
    name = m.group(1)
    seen.append(name)
    body = open(os.path.join(tmp, name), encoding="utf-8").read()
    return f"<!-- sample: {name} -->\n```\n{body}```\n<!-- /sample -->"
text = re.sub(r"<!-- sample: ([\w-]+) -->\n.*?<!-- /sample -->", fill, text, flags=re.S)
missing = sorted(set(os.listdir(tmp)) - set(seen))
if missing:
    sys.exit(f"readme-samples: README.md has no block for {', '.join(missing)}")
open(readme, "w", encoding="utf-8").write(text)
print(f"readme-samples: README.md: {len(seen)} sample blocks written")
EOF
  exit 0
fi

if [ ${#names[@]} -gt 0 ]; then
  for n in "${names[@]}"; do sample "$n"; done
else
  for n in "${all[@]}"; do echo "== $n"; sample "$n"; done
fi
