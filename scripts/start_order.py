#!/usr/bin/env python3
"""Writes link/start.ld: the sections of the code a start runs, gathered at the front of the image.

A start runs about 300 KB of the binary's 2.4 MB of code, spread over nearly every 64 KiB of it;
each first touch of a 64 KiB window is a page fault (the kernel maps page-cache pages around the
fault), and `execve` of the command unmaps every page mapped. Gathered, the start's code spans a
few windows.

    python3 scripts/start_order.py MAP CALLGRIND_OUT... > link/start.ld

MAP is LLD's link map of a release build (`-Wl,-Map`), CALLGRIND_OUT the outputs of callgrind
runs of that build (`--demangle=no --compress-strings=no`) over the start path: every function a
start ran. scripts/start-order.sh runs both.

The script names sections, not symbols, and names them by patterns that survive a rebuild:
- Rust functions (one section each, `.text.<mangled name>`): the legacy mangling's hash
  (`17h<16 hex>E`) and the v0 mangling's crate disambiguators (`Cs<base62>_`) change with the
  toolchain, the dependencies and the profile, so both become `*`. A pattern may then take every
  instantiation of a generic function; that costs a few KB, not a fault.
- C functions (glibc, libgcc, rdma-core: one `.text` section per archive member) by member:
  `*/libc.a:malloc.o(.text)`, found in the map; a versioned or hashed archive (`libm-2.36.a`,
  the crate's rlib holding rdma-core's objects) matches any version (`*/libm-*.a`).
They are listed in the order the linker lays the sections out without the script.
A function renamed or added since the script last ran is simply left where the linker puts it:
the binary stays correct, only that function's first call may fault.
"""
import re
import sys

RUST_HASH = re.compile(r"17h[0-9a-f]{16}E$")
V0_CRATE = re.compile(r"Cs[0-9A-Za-z]+_")
# An input section line of LLD's map: "<vma> <lma> <size> <align>         FILE:(SECTION)".
INPUT = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+[0-9a-f]+\s+\d+ {9}(\S.*):\((\S+)\)$")
# A symbol line under it (demangled: a Rust function is found by its section instead).
SYMBOL = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+\d+ {17}(\S+)$")
# A glibc string function's CPU variant: `memmove-avx-unaligned-erms.o`, `strchr-evex.o`.
ISA_VARIANT = re.compile(r"^([a-z0-9_]+)-(?:sse2|sse4|ssse3|avx|avx2|evex|evex512|avx512)[a-z0-9_-]*\.o$")
# What a start runs that callgrind cannot see: the command's `execve` (the runs are dumped just
# before it), and glibc's set-up of the vDSO, which valgrind does not map into its guest
# (`setup_vdso` in `_dl_non_dynamic_init`: `_dl_new_object`, `_dl_setup_hash`, and
# `_dl_lookup_direct` for each vDSO function).
UNSEEN = ["execve", "_dl_new_object", "_dl_setup_hash", "_dl_lookup_direct"]
# Section prefixes a function's own section may carry: LLVM puts cold functions (`#[cold]`, such
# as a vector's growth) in `.text.unlikely.<name>`.
PREFIXES = (".text.", ".text.unlikely.")
# An archive member, `DIR/libc.a(malloc.o)`, `DIR/libm-2.36.a(s_trunc.o)`, or one of the C
# archives build.rs bundles into the crate's own rlib, `DIR/libnccl_wrap-<hash>.rlib(init.c.o)`.
ARCHIVE = re.compile(r"(?:^|/)([^/()]+?)(-[0-9a-f.]+)?\.(a|rlib)\(([^()]+)\)$")  # stem, version or hash, kind, member


def functions(paths):
    """Every function callgrind saw run, once each, by its mangled name."""
    seen = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith(("fn=", "cfn=")):
                    name = line.split("=", 1)[1].strip()
                    if not name.startswith(("0x", "(below main)")):
                        seen.setdefault(name, None)
    return list(seen)


def link_map(path):
    """Where the linker put the first input section of each name, by the name's pattern (so a
    function is found whatever build its hash came from), and the input section (file, section,
    address) of each symbol in the map."""
    sections, owner, current = {}, {}, None
    with open(path) as f:
        for line in f:
            m = INPUT.match(line.rstrip("\n"))
            if m:
                address = int(m.group(1), 16)
                current = (m.group(2), m.group(3), address)
                sections.setdefault(rust_pattern(m.group(3)), address)
                continue
            m = SYMBOL.match(line.rstrip("\n"))
            if m and current and current[1].startswith(".text"):
                # A static function's name may be defined in several members (each rdma-core
                # provider's constructor is `drv__register_driver`): callgrind ran them all.
                owner.setdefault(m.group(1), []).append(current)
    return sections, owner


def rust_pattern(name):
    return V0_CRATE.sub("Cs*_", RUST_HASH.sub("17h*", name))


def variant_families(owner):
    """glibc's string functions that come in CPU variants: `memmove` for `memmove-evex-...o`."""
    archived = (ARCHIVE.search(file) for sections in owner.values() for file, _, _ in sections)
    members = {m.group(4) for m in archived if m}
    return {m.group(1) for m in map(ISA_VARIANT.match, members) if m}


def member_pattern(file, section, families):
    """The pattern of a C input section: its archive member, or its object file. glibc picks a
    string function's variant by the CPU at start (callgrind's CPU lacks AVX-512, and may take
    the generic one): a run of any variant, or of the selector in `memmove.o`, takes them all."""
    m = ARCHIVE.search(file)
    if not m:
        return f"*{file.rsplit('/', 1)[-1]}({section})"
    stem, tag, kind, member = m.groups()
    archive = f"{stem}-*.{kind}" if tag else f"{stem}.{kind}"
    isa = ISA_VARIANT.match(member)
    family = isa.group(1) if isa else member.removesuffix(".o")
    if family in families:
        return f"*/{archive}:{family}.o(.text) */{archive}:{family}-*.o(.text .text.*)"
    return f"*/{archive}:{member}({section})"


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: start_order.py MAP CALLGRIND_OUT...")
    sections, owner = link_map(sys.argv[1])
    text, rodata, unplaced = [], [], []
    families = variant_families(owner)
    for name in functions(sys.argv[2:]) + UNSEEN:
        pat = rust_pattern(name)
        own = [p for p in PREFIXES if p + pat in sections]
        if own:
            text.extend((sections[p + pat], f"*({p}{pat})") for p in own)
            # Its switch tables and constants, where the compiler named them after it.
            rodata.append((sections[own[0] + pat], f"*(.rodata.{pat} .rodata..L*.{pat}*)"))
        elif name in owner:
            text.extend((a, member_pattern(file, section, families)) for file, section, a in owner[name])
        else:
            unplaced.append(name)
    # In the order the linker laid them out without the script: neighbours in the code stay
    # neighbours (a start touches fewer pages than in any order by name), and a regenerated
    # script differs only where the start path did.
    text = list(dict.fromkeys(p for _, p in sorted(text)))
    rodata = list(dict.fromkeys(p for _, p in sorted(rodata)))
    print("/* Generated by scripts/start-order.sh: the code a start runs, first in the image")
    print(" * (docs/build.md, \"Start-up layout\"). Patterns, not symbols: see scripts/start_order.py. */")
    print("SECTIONS {")
    print("  .text.start : {")
    for p in text:
        print(f"    {p}")
    print("  }")
    print("} INSERT BEFORE .text;")
    print("SECTIONS {")
    print("  .rodata.start : {")
    for p in rodata:
        print(f"    {p}")
    print("  }")
    print("} INSERT BEFORE .rodata;")
    print(f"start_order: {len(text)} code sections, {len(rodata)} data patterns; "
          f"{len(unplaced)} functions without a section of their own: {' '.join(unplaced)}", file=sys.stderr)


if __name__ == "__main__":
    main()
