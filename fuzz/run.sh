#!/usr/bin/env bash
# Runs every fuzz target for a bounded time; fails on any crash, hang, timeout or OOM.
#
#   bash fuzz/run.sh [SECONDS_PER_TARGET]      # default 30; from the repository root
#   TARGETS="gid cli" bash fuzz/run.sh 60       # a subset
#   FUZZ_JOBS=1 bash fuzz/run.sh                # one target at a time (default: one per CPU)
#
# Coverage-guided libFuzzer on the stable toolchain: libfuzzer-sys builds libFuzzer itself (C++),
# and the flags below ask rustc for the same SanitizerCoverage instrumentation cargo-fuzz would
# (`cargo fuzz build -s none`). `-Cpasses` and `-Cllvm-args` are stable codegen options, so no
# nightly, no RUSTC_BOOTSTRAP and no cargo-fuzz install are needed. No sanitizer: the code under
# test is safe Rust, and every panic, overflow or debug assertion aborts the run as a crash.
#
# Each target reads its committed corpus (fuzz/corpus/<target>, seeded by fuzz/seed.sh) and
# writes what it finds to fuzz/work/<target>; crashes go to fuzz/artifacts/<target>. Both are
# gitignored. `fuzz/merge.sh` folds a run's finds into the committed corpus, minimized.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-30}
targets=${TARGETS:-sriov annotations nccl_list gid cli ping_wire netlink_links ifaddr driver ldcache route ras allow gid_table nldev dra_metadata sriov_dra vpd}
triple=x86_64-unknown-linux-gnu

command -v cargo >/dev/null || { echo "fuzz: cargo not found: install Rust with rustup" >&2; exit 2; }
# The crate under test links rdma-core (build.rs); libFuzzer needs a C++ compiler.
command -v pkg-config >/dev/null && pkg-config --exists libibverbs && command -v c++ >/dev/null \
  || bash ../scripts/setup.sh || exit 2

# Naming the target keeps these flags off build scripts and proc-macros; RUSTFLAGS also replaces
# the main crate's `+crt-static` (.cargo/config.toml), which libFuzzer's C++ runtime cannot use.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares \
-Cdebug-assertions -Coverflow-checks -Cforce-frame-pointers"
echo "== build"
cargo build --release --locked --target "$triple" --bins || { echo "fuzz: build failed" >&2; exit 2; }
bin=target/$triple/release

# One target: its libFuzzer run, then one line of result in work/<target>.result
# ("ok RUNS LINE" or "failed RUNS LINE").
one() {
  local t=$1 dict=() log="work/$1.log" rc runs rate cov
  mkdir -p "work/$t" "artifacts/$t"
  [ -f "dict/$t.dict" ] && dict=(-dict="dict/$t.dict")
  # -timeout: one input running 5 s is a hang; the outer timeout catches a stuck libFuzzer.
  timeout --kill-after=10 $((secs + 60)) "$bin/$t" "work/$t" "corpus/$t" "${dict[@]}" \
    -max_total_time="$secs" -timeout=5 -rss_limit_mb=1024 -malloc_limit_mb=1024 -max_len=8192 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/cov \1 ft \2/p')
  if [ $rc -eq 0 ]; then
    echo "ok ${runs:-0} $t: ok, ${runs:-?} executions, ${rate:-?} exec/s, ${cov:-}" >"work/$t.result"
  else
    echo "failed ${runs:-0} $t: FAILED (exit $rc), ${runs:-?} executions; log $PWD/$log" >"work/$t.result"
  fi
}

# The targets run side by side, one per CPU (FUZZ_JOBS): each is one single-threaded process.
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
echo "== ${secs}s each, $jobs at a time: $targets"
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  rm -f "work/$t.result"
  one "$t" &
done
wait

passed=0 failed=0 total=0
for t in $targets; do
  read -r status runs line <"work/$t.result" 2>/dev/null || { status=failed runs=0 line="$t: no result"; }
  total=$((total + runs))
  if [ "$status" = ok ]; then
    passed=$((passed + 1))
    echo "$line"
  else
    failed=$((failed + 1))
    echo "$line; artifacts:" >&2
    ls "artifacts/$t" >&2
    grep -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written' "work/$t.log" | head -20 >&2
  fi
done
echo "total executions: $total"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
