#!/usr/bin/env bash
# Where the bytes of the stripped static x86_64 binary go: links it once more with a linker map
# (rust-lld's, the default linker of x86_64-unknown-linux-gnu) and attributes every input section
# that lands in the file to its archive (glibc, each rdma-core library, libnl) or, for the Rust
# object that LTO makes of every crate, to a crate by its symbol (c++filt). rdma-core's archives
# are bundled into the crate's rlib, where several providers' objects share a name (verbs.c.o):
# those are told apart by the symbols they define (nm). Prints a markdown table and the size.
#
#   bash bench/size.sh                    # this tree
#   bash bench/size.sh OLD.map NEW.map    # two maps side by side (e.g. kept from two trees)
#
# Sections only: ELF headers and alignment are the difference to the file size (about 20 KB).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
lib=/usr/lib/x86_64-linux-gnu
for l in $(pkg-config --static --libs-only-l libibverbs | tr ' ' '\n' | sed -n 's/^-l//p' | sort -u); do
  [ -f "$lib/lib$l.a" ] && nm -A --defined-only "$lib/lib$l.a" 2>/dev/null |
    awk -v a="lib$l.a" '{split($1, p, ":"); print a, p[2], $NF}'
done >"$tmp/syms"
if [ $# -eq 2 ]; then
  maps=("$1" "$2")
else
  # Relink only (the crate is rebuilt when its sources changed); the map changes nothing else.
  cargo build --release -q
  touch src/main.rs
  cargo rustc --release -q --bin nccl-wrap -- -C link-arg=-Wl,-Map="$tmp/map" 2>/dev/null
  maps=("$tmp/map")
  echo "stripped: $(stat -c %s target/x86_64-unknown-linux-gnu/release/nccl-wrap) bytes"
fi
python3 - "$tmp/syms" "${maps[@]}" <<'PY'
import collections, re, subprocess, sys
syms_file, maps = sys.argv[1], sys.argv[2:]
line = re.compile(r'^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+) (\s*)(\S.*)$')
# Output sections that take bytes in the file (not .bss, not the symbol or string tables).
KEEP = {'.rodata', '.gcc_except_table', '.eh_frame', '.eh_frame_hdr', '.text', '.init', '.fini',
        '__libc_freeres_fn', '.tdata', '.fini_array', '.init_array', '.data.rel.ro', '.data',
        '__libc_subfreeres', '__libc_IO_vtables', '__libc_atexit', '.got', '.got.plt', '.rela.dyn',
        '.iplt', '.note.ABI-tag', '.note.gnu.build-id'}
members, defs = collections.defaultdict(set), collections.defaultdict(set)
for l in open(syms_file):
    a, m, s = l.split()
    members[m].add(a)
    defs[(m, s)].add(a)
PRINTER = {'gimli', 'addr2line', 'rustc_demangle', 'miniz_oxide', 'object', 'adler2'}

def bare(sec):
    n = re.sub(r'^\.(text|rodata|data\.rel\.ro|data|gcc_except_table|tdata)\.', '', sec)
    return re.sub(r'^(unlikely|cold|hot)\.', '', n)

def crates(names):
    out = {}
    dem = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
    for raw, d in zip(names, dem):
        d = re.sub(r'\[[0-9a-f]{16}\]', '', d)
        cs = re.findall(r'(?<![\w:])([a-z_][a-z0-9_]*)::', d)
        if 'nccl_wrap' in d:
            k = 'Rust: nccl-wrap (with generics for its types)'
        elif any(c in PRINTER for c in cs) or ('backtrace' in d and '__rust_begin_short_backtrace' not in d):
            k = "Rust: std's panic backtrace printer (gimli, addr2line, demangle, miniz)"
        elif not cs:
            k = 'Rust: anonymous constants and switch tables' if raw.startswith('.L') else 'Rust: std, core, alloc'
        elif cs[0] in ('std', 'core', 'alloc', 'std_detect', 'panic_abort'):
            k = 'Rust: std, core, alloc'
        elif cs[0].startswith('serde') or cs[0] in ('itoa', 'zmij', 'ryu', 'memchr'):
            k = 'Rust: serde, serde_json'
        elif cs[0] in ('env_logger', 'env_filter', 'log'):
            k = 'Rust: log, env_logger'
        else:
            k = 'Rust: nix, rustix, rdma-sys, thiserror'
        out[raw] = k
    return out

def table(path):
    entries, out = [], None
    for l in open(path):
        m = line.match(l)
        if not m:
            continue
        size, depth, text = int(m.group(3), 16), len(m.group(5)), m.group(6)
        if depth == 0:
            out = text
        elif depth == 8:
            mm = re.match(r'^(.*):\((.*)\)$', text)
            entries.append([out, mm.group(1), mm.group(2), size, []] if mm else None)
        elif depth == 16 and entries and entries[-1]:
            entries[-1][4].append(text)
    rust = crates([bare(e[2]) for e in entries if e and 'rcgu.o' in e[1] and e[0] in KEEP and e[0] != '.eh_frame'])
    by = collections.Counter()
    for e in entries:
        if not e or e[0] not in KEEP:
            continue
        out, f, sec, size, syms = e
        bundled = re.search(r'rlib\(([^)]*)\)$', f)
        archive = re.search(r'([^/()]+\.a)\((.*)\)$', f)
        if 'rcgu.o' in f:
            g = 'Rust: unwind tables (.eh_frame)' if out == '.eh_frame' else rust[bare(sec)]
        elif bundled:
            mem = bundled.group(1)
            cands = members.get(mem, set())
            g = next(iter(cands)) if len(cands) == 1 else next(
                (next(iter(defs[(mem, s)])) for s in syms if len(defs.get((mem, s), ())) == 1),
                'rdma-core providers: unwind tables of same-named objects')
            g = g.replace('-rdmav34', '')
            if g.startswith('lib') and g.endswith('.a'):
                g = {'libibverbs.a': 'rdma-core: libibverbs', 'libnl-3.a': 'libnl-3',
                     'libnl-route-3.a': 'libnl-route-3'}.get(g, 'rdma-core provider: ' + g[3:-2])
        elif archive and (archive.group(1) == 'libc.a' or archive.group(1).startswith('libm')):
            g = 'glibc (libc.a, libm.a)'
        elif f == '<internal>':
            g = 'linker-made: ' + ('.eh_frame_hdr' if out == '.eh_frame_hdr' else 'merged constants, GOT, relocations')
        else:
            g = 'libgcc, libgcc_eh, crt'
        by[g] += size
    return by

tables = [table(m) for m in maps]
keys = sorted(set().union(*tables), key=lambda k: -tables[0].get(k, 0))
print('| part | ' + ' | '.join('before' if i == 0 and len(maps) == 2 else 'after' if len(maps) == 2 else 'bytes' for i in range(len(maps))) + ' |')
print('|---|' + '---:|' * len(maps))
for k in keys:
    print(f'| {k} | ' + ' | '.join(f'{t.get(k, 0):,}' for t in tables) + ' |')
print('| (all sections) | ' + ' | '.join(f'{sum(t.values()):,}' for t in tables) + ' |')
PY
