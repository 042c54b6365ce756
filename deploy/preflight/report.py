#!/usr/bin/env python3
"""Turn the logs of the nccl-wrap preflight pods into one table: node, check, status, cause.

    kubectl logs -n training -l job-name=nccl-preflight --prefix --tail=-1 \\
        | python3 deploy/preflight/report.py --expect 4

Input: the logs of every preflight pod, from files or stdin, as plain lines or as
`kubectl logs --prefix` (and `--timestamps`) writes them. Each pod prints JSON lines made by
deploy/preflight/preflight.sh:

    {"node":N,"pod":P,"index":I,"source":"doctor","exit":E,"result":<doctor --json, or null>}
    {"node":N,"pod":P,"index":I,"source":"ping","result":<one line of ping --ring --json>}
    {"node":N,"pod":P,"index":I,"source":"end","doctor_exit":E,"ping_exit":E}

Lines that are not JSON (nccl-wrap's own messages, NCCL's, the shell's) are ignored. A line that
starts like JSON and does not parse (a log cut mid-line) is a failed row, and so is a pod whose log
lacks a result it should hold: its doctor result, its ping summary, its closing "end" line. With
--expect N, an index of 0..N-1 that printed nothing at all is a failed row too; a file named on
the command line that holds nothing is one.

Exit status: 1 when any row failed, 0 otherwise (warnings do not fail), 2 on a usage error or an
unreadable input. Only Python's standard library is used, so it runs wherever python3 does.
"""

import argparse
import json
import re
import sys

# `kubectl logs --prefix` writes "[pod/NAME/CONTAINER] "; `--timestamps` an RFC 3339 time and a
# space. Either or both may stand before the line (prefix first).
PREFIX = re.compile(r"^\[pod/(?P<pod>[^/\]]+)/(?P<container>[^\]]+)\] ")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ")

PASS, WARN, FAIL = "pass", "warn", "fail"
UNKNOWN_NODE = "?"


class Row:
    __slots__ = ("node", "index", "check", "status", "cause")

    def __init__(self, node, index, check, status, cause):
        self.node, self.index, self.check, self.status, self.cause = node, index, check, status, cause

    def as_dict(self):
        return {"node": self.node, "index": self.index, "check": self.check,
                "status": self.status, "cause": self.cause}


class Pod:
    """What one preflight pod reported."""

    def __init__(self, pod):
        self.pod = pod
        self.node = UNKNOWN_NODE
        self.index = None
        self.doctor = None      # the doctor record
        self.ping = []          # ping result objects, in order
        self.end = None         # the closing record
        self.malformed = []     # messages about lines of this pod's log that did not parse


def strip_log_prefixes(line):
    """Returns (pod name or None, the line without kubectl's prefix and timestamp)."""
    pod = None
    m = PREFIX.match(line)
    if m:
        pod = m.group("pod")
        line = line[m.end():]
    m = TIMESTAMP.match(line)
    if m:
        line = line[m.end():]
    return pod, line


# A line cut short still begins with the wrapper's head, so the node and index can be recovered.
HEAD_NODE = re.compile(r'"node":"([^"]*)"')
HEAD_POD = re.compile(r'"pod":"([^"]*)"')
HEAD_INDEX = re.compile(r'"index":(\d+)')


def read_records(name, lines):
    """Yields ("record", pod-from-prefix, dict) for each preflight record and
    ("malformed", pod-from-prefix, (message, text)) for each line that starts like JSON and is not."""
    for number, raw in enumerate(lines, 1):
        pod, line = strip_log_prefixes(raw.rstrip("\r\n"))
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            where = "stdin" if name == "-" else name
            yield "malformed", pod, (f"{where}:{number}: malformed or truncated JSON ({e.msg} at column {e.colno})", text)
            continue
        if isinstance(value, dict) and "source" in value and ("node" in value or "pod" in value):
            yield "record", pod, value
        # Any other JSON object is some other program's output: not ours to judge.


def text_of(value):
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def describe_cause(cause):
    if not isinstance(cause, dict):
        return text_of(cause) if cause is not None else ""
    parts = [str(cause.get("id") or "cause")]
    if cause.get("summary"):
        parts[0] += ": " + str(cause["summary"])
    if cause.get("hint"):
        parts.append("fix: " + str(cause["hint"]))
    return "; ".join(parts)


def check_name(check):
    """`doctor <id>` with the device and port it is about, if any."""
    name = "doctor " + str(check.get("id", "?"))
    evidence = check.get("evidence")
    if isinstance(evidence, dict):
        for key in ("device", "variable"):
            if isinstance(evidence.get(key), str):
                name += " " + evidence[key]
                break
        if isinstance(evidence.get("port"), int):
            name += f":{evidence['port']}"
    return name


def doctor_rows(p, show_pass):
    node, index = p.node, p.index
    rec = p.doctor
    if rec is None:
        return [Row(node, index, "doctor", FAIL, "no doctor result in the log (pod cut short, or logs lost)")]
    exit_code = rec.get("exit")
    result = rec.get("result")
    if result is None:
        return [Row(node, index, "doctor", FAIL,
                    f"doctor printed no JSON (exit {exit_code}); its messages are in the pod's log")]
    checks = result.get("checks") if isinstance(result, dict) else None
    if not isinstance(checks, list):
        return [Row(node, index, "doctor", FAIL, "doctor's JSON has no list of checks")]
    rows = []
    counts = {PASS: 0, WARN: 0, FAIL: 0}
    for check in checks:
        if not isinstance(check, dict):
            rows.append(Row(node, index, "doctor ?", FAIL, f"a check is not an object: {text_of(check)}"))
            counts[FAIL] += 1
            continue
        status = check.get("status")
        if status not in counts:
            rows.append(Row(node, index, check_name(check), FAIL, f"unknown status {text_of(status)}"))
            counts[FAIL] += 1
            continue
        counts[status] += 1
        if status == PASS and not show_pass:
            continue
        cause = str(check.get("summary") or "")
        if status != PASS and check.get("hint"):
            cause += "; fix: " + str(check["hint"])
        rows.append(Row(node, index, check_name(check), status, cause))
    summary = f"{counts[FAIL]} failed, {counts[WARN]} warned, {counts[PASS]} passed"
    if exit_code == 2:
        overall, summary = FAIL, f"doctor could not run (exit 2); {summary}"
    elif counts[FAIL] or exit_code not in (0, None):
        overall = FAIL
        if not counts[FAIL]:
            summary = f"doctor exited {exit_code}; {summary}"
    else:
        overall = PASS
    rows.append(Row(node, index, "doctor", overall, summary))
    return rows


def endpoint(side):
    if not isinstance(side, dict):
        return "?"
    name = str(side.get("device", "?"))
    if side.get("port") is not None:
        name += f":{side['port']}"
    return name


def measurement(pair):
    parts = []
    latency = pair.get("latency_us")
    if isinstance(latency, dict) and latency.get("median") is not None:
        parts.append(f"{latency['median']:g} us median")
        if latency.get("p99") is not None:
            parts[-1] += f", {latency['p99']:g} us p99"
    if pair.get("bandwidth_gbytes_per_s") is not None:
        parts.append(f"{pair['bandwidth_gbytes_per_s']:g} Gb/s")
    return ", ".join(parts)


def ping_rows(p, show_pass):
    node, index = p.node, p.index
    rows = []
    summary = None
    for result in p.ping:
        if not isinstance(result, dict):
            rows.append(Row(node, index, "ping", FAIL, f"ping line is not an object: {text_of(result)}"))
            continue
        kind = result.get("kind")
        if kind == "ping-pair":
            status = result.get("status")
            if status not in (PASS, WARN, FAIL):
                status, cause = FAIL, f"unknown status {text_of(status)}"
            elif status == PASS:
                if not show_pass:
                    continue
                cause = measurement(result)
            else:
                cause = describe_cause(result.get("cause")) or measurement(result)
            check = f"ping {endpoint(result.get('local'))} -> {result.get('peer', '?')}"
            remote = result.get("remote")
            if isinstance(remote, dict):
                check += f" ({endpoint(remote)})"
            rows.append(Row(node, index, check, status, cause))
        elif kind == "ping-summary":
            summary = result
        # Other kinds are progress or detail a later ping may add; the pairs and the summary decide.
    ping_exit = p.end.get("ping_exit") if p.end else None
    if summary is None:
        how = f"exit {ping_exit}" if ping_exit is not None else "log cut short"
        rows.append(Row(node, index, "ping", FAIL, f"ping printed no summary ({how})"))
    else:
        exit_code = summary.get("exit")
        pairs, failed = summary.get("pairs"), summary.get("failed")
        if exit_code == 0 and not failed:
            rows.append(Row(node, index, "ping", PASS, f"{pairs} pair(s) passed"))
        elif exit_code == 2:
            rows.append(Row(node, index, "ping", FAIL, "ping could not run (exit 2); its messages are in the pod's log"))
        else:
            rows.append(Row(node, index, "ping", FAIL, f"{failed} of {pairs} pair(s) failed (exit {exit_code})"))
    return rows


def build_rows(sources, expect, show_pass):
    """sources: (name, iterable of lines). Returns the rows, in index order."""
    pods = {}
    rows = []
    for name, lines in sources:
        seen = False
        for what, prefix_pod, value in read_records(name, lines):
            seen = True
            if what == "malformed":
                message, text = value
                m = HEAD_POD.search(text)
                key = (m.group(1) if m else None) or prefix_pod
                if key is None:
                    rows.append(Row(UNKNOWN_NODE, None, "log line", FAIL, message))
                    continue
                p = pods.setdefault(key, Pod(key))
                p.malformed.append(message)
                m = HEAD_NODE.search(text)
                if m and p.node == UNKNOWN_NODE:
                    p.node = m.group(1)
                m = HEAD_INDEX.search(text)
                if m and p.index is None:
                    p.index = int(m.group(1))
                continue
            key = value.get("pod") or prefix_pod or value.get("node")
            p = pods.setdefault(key, Pod(key))
            if isinstance(value.get("node"), str):
                p.node = value["node"]
            if isinstance(value.get("index"), int):
                p.index = value["index"]
            source = value.get("source")
            if source == "doctor":
                p.doctor = value
            elif source == "ping":
                p.ping.append(value.get("result"))
            elif source == "end":
                p.end = value
        if not seen and name != "-":
            rows.append(Row(UNKNOWN_NODE, None, "log", FAIL, f"{name}: no preflight output (pod did not run, or printed nothing)"))
    for p in pods.values():
        rows.extend(Row(p.node, p.index, "log line", FAIL, m) for m in p.malformed)
        rows.extend(doctor_rows(p, show_pass))
        rows.extend(ping_rows(p, show_pass))
        if p.end is None:
            rows.append(Row(p.node, p.index, "preflight", FAIL,
                            f"pod {p.pod}: log ends before the preflight finished (pod killed, or log truncated)"))
    if expect is not None:
        seen_indexes = {p.index for p in pods.values()}
        for i in range(expect):
            if i not in seen_indexes:
                rows.append(Row(UNKNOWN_NODE, i, "preflight", FAIL,
                                f"index {i}: no output (pod not scheduled, failed before printing, or its log is missing)"))
    # By index (rows without one last); the sort is stable, so within one pod the rows keep the
    # order the checks came in.
    rows.sort(key=lambda r: (r.index is None, r.index or 0, r.node))
    return rows


def render_table(rows):
    headers = ("NODE", "CHECK", "STATUS", "CAUSE")
    table = [(r.node if r.index is None else f"{r.node} [{r.index}]", r.check, r.status.upper(), r.cause)
             for r in rows]
    widths = [max([len(h)] + [len(t[i]) for t in table]) for i, h in enumerate(headers[:3])]
    lines = []
    for cells in [headers] + table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells[:3], widths)) + "  " + cells[3])
    return "\n".join(line.rstrip() for line in lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Turn the logs of the nccl-wrap preflight pods into one table.")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="pod logs (plain or `kubectl logs --prefix`); '-' or none: stdin")
    parser.add_argument("--expect", type=int, metavar="N",
                        help="the Job's completions: every index 0..N-1 must have reported")
    parser.add_argument("--all", action="store_true", help="list passing checks and pairs too")
    parser.add_argument("--json", action="store_true", help="one JSON object per row instead of the table")
    args = parser.parse_args(argv)
    if args.expect is not None and args.expect < 1:
        parser.error("--expect must be at least 1")

    files = args.files or ["-"]
    sources = []
    try:
        for name in files:
            if name == "-":
                sources.append(("-", sys.stdin.read().splitlines()))
            else:
                with open(name, encoding="utf-8", errors="replace") as f:
                    sources.append((name, f.read().splitlines()))
    except OSError as e:
        print(f"report: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2

    rows = build_rows(sources, args.expect, args.all)
    if not rows:
        print("report: no preflight output found in the input", file=sys.stderr)
        return 1
    if args.json:
        for r in rows:
            print(json.dumps(r.as_dict(), sort_keys=True))
    else:
        print(render_table(rows))
    failed = sum(r.status == FAIL for r in rows)
    warned = sum(r.status == WARN for r in rows)
    nodes = len({(r.node, r.index) for r in rows if r.node != UNKNOWN_NODE})
    print(f"\n{nodes} node(s): {failed} failed, {warned} warned", file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
