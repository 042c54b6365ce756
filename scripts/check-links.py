#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown files: each `[text](target)` that is not a
URL must name a file or directory that exists, and a `#fragment` must name a heading of its file
(GitHub's anchor rule: lower case, punctuation but `-` and `_` dropped, spaces to `-`).

    python3 scripts/check-links.py [FILE.md ...]     # default: every tracked *.md

Exits 1 naming each broken link (file:line, target, why), else 0.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Files linked before they exist (none now).
PENDING: set[str] = set()

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, counts, fenced = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(1))
                    n = counts.get(base, 0)
                    counts[base] = n + 1
                    found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def links(path):
    """Yields (line, target) for every link outside code, a link's text may span lines."""
    kept, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
                kept.append("\n")
            else:
                kept.append("\n" if fenced else line)
    text = "".join(kept)
    # Code spans are not links; blanked with their newlines kept, so line numbers hold.
    text = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for m in LINK.finditer(text):
        yield text.count("\n", 0, m.start(1)) + 1, m.group(1)


def check(md):
    bad = []
    for no, target in links(md):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(md), file)) if file else md
        rel = os.path.relpath(dest, ROOT)
        if file and not os.path.exists(dest):
            if rel not in PENDING:
                bad.append((no, target, f"no such file {rel}"))
            continue
        if frag and dest.endswith(".md") and frag not in anchors(dest):
            bad.append((no, target, f"no heading #{frag} in {rel}"))
    return bad


def main():
    os.chdir(ROOT)
    files = sys.argv[1:] or subprocess.run(
        ["git", "ls-files", "*.md"], capture_output=True, text=True, check=True
    ).stdout.split()
    broken = 0
    for md in files:
        for no, target, why in check(os.path.abspath(md)):
            print(f"{md}:{no}: {target}: {why}")
            broken += 1
    print(f"check-links: {len(files)} files, {broken} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
