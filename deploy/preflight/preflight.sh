#!/bin/sh
# One preflight pod: `nccl-wrap doctor --json`, then the cross-node ring check
# (`nccl-wrap ping --ring`), each result wrapped in a JSON line that names this node and pod, so
# deploy/preflight/report.py can put the logs of every pod into one table:
#
#   {"node":N,"pod":P,"index":I,"source":"doctor","exit":E,"result":<doctor's JSON or null>}
#   {"node":N,"pod":P,"index":I,"source":"ping","result":<one line of ping's JSON>}   (per line)
#   {"node":N,"pod":P,"index":I,"source":"end","doctor_exit":E,"ping_exit":E}
#
# The "end" line is last, so a log that lacks it was cut short. Lines that are not JSON (nccl-wrap's
# warnings on stderr) pass through for people to read; the report ignores them.
#
# The pod exits 0 once it has reported, whatever the checks found: the Job has backoffLimit 0, and a
# failed pod would make the Job controller kill its peers mid-ring, losing their half of each pair.
# The report decides. It exits non-zero only when it could not run at all.
set -u
wrap=${NCCL_WRAP:-/opt/nccl-wrap/nccl-wrap}
node=${NODE_NAME:?NODE_NAME must come from the downward API (spec.nodeName)}
pod=${POD_NAME:?POD_NAME must come from the downward API (metadata.name)}
index=${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is set by an Indexed Job}
# ping reads its ring settings from the environment (NCCL_WRAP_PING_SIZE, _PEER_TEMPLATE, _PORT);
# checked here too, so that a pod spec without them says so before anything runs.
: "${NCCL_WRAP_PING_PEER_TEMPLATE:?NCCL_WRAP_PING_PEER_TEMPLATE: the host name of ring peers, with {index}}"
: "${NCCL_WRAP_PING_SIZE:?NCCL_WRAP_PING_SIZE: the number of preflight pods}"
case $index in *[!0-9]*|'') echo "preflight: JOB_COMPLETION_INDEX is not a number: $index" >&2; exit 2 ;; esac
# Kubernetes names (node and pod) hold only [a-z0-9.-], so they need no JSON escaping.
head='{"node":"'$node'","pod":"'$pod'","index":'$index

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

"$wrap" doctor --json >"$tmp/doctor"
doctor_exit=$?
# doctor prints one JSON object on one line; anything else is shown as it is and reported as null.
result=null
while IFS= read -r line || [ -n "$line" ]; do
  case $line in
    '{'*) [ "$result" = null ] && result=$line || printf '%s\n' "$line" ;;
    *) printf '%s\n' "$line" ;;
  esac
done <"$tmp/doctor"
printf '%s,"source":"doctor","exit":%d,"result":%s}\n' "$head" "$doctor_exit" "$result"

# Each pod listens on NCCL_WRAP_PING_PORT and tests its successor, index + 1 mod size.
"$wrap" ping --ring --json >"$tmp/ping"
ping_exit=$?
while IFS= read -r line || [ -n "$line" ]; do
  case $line in
    '{'*) printf '%s,"source":"ping","result":%s}\n' "$head" "$line" ;;
    *) printf '%s\n' "$line" ;;
  esac
done <"$tmp/ping"
printf '%s,"source":"end","doctor_exit":%d,"ping_exit":%d}\n' "$head" "$doctor_exit" "$ping_exit"
exit 0
