#!/usr/bin/env bash
# Folds what fuzz/run.sh found (fuzz/work/<target>) into the committed corpus. libFuzzer's
# -set_cover_merge=1 with -use_counters=0 -use_cmp=0 keeps a small set of inputs that together
# reach every edge the corpus and the run reached, so the corpus grows by a few files, not by a
# run's worth (a plain -merge=1 keeps an input per hit-count bucket: megabytes).
# Run after fuzz/run.sh has built the targets.
#
#   bash fuzz/merge.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
bin=target/x86_64-unknown-linux-gnu/release
targets=${*:-sriov annotations nccl_list gid cli ping_wire ras}
for t in $targets; do
  [ -x "$bin/$t" ] || { echo "merge: $bin/$t not built: run fuzz/run.sh first" >&2; exit 2; }
  mkdir -p "work/$t"
  before=$(ls "corpus/$t" | wc -l)
  "$bin/$t" -set_cover_merge=1 -use_counters=0 -use_cmp=0 -max_len=4096 -timeout=5 -rss_limit_mb=1024 \
    "corpus/$t" "work/$t" >"work/$t.merge.log" 2>&1 || { echo "merge: $t failed; see fuzz/work/$t.merge.log" >&2; exit 1; }
  echo "$t: $before -> $(ls "corpus/$t" | wc -l) inputs, $(du -sb "corpus/$t" | cut -f1) bytes"
done
