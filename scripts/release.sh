#!/usr/bin/env bash
# Builds a release of the checked-out commit into OUTDIR, reproducibly (the same commit, toolchain
# and Debian packages give the same bytes):
#   nccl-wrap-VERSION-x86_64-linux, nccl-wrap-VERSION-aarch64-linux   the static binaries
#   nccl-wrap-VERSION-image-amd64.oci.tar, ...-image-arm64.oci.tar     the FROM scratch images
#                                                                      (podman load -i FILE)
#   nccl-wrap-VERSION-x86_64-linux.cdx.json, ...-aarch64-linux.cdx.json  CycloneDX SBOMs
#   nccl-wrap.1, nccl-wrap.bash, _nccl-wrap, nccl-wrap.fish            man page, completions
#   BUILD-INFO                                                         commit, toolchain, packages
#   SHA256SUMS                                                         sha256sum -c SHA256SUMS
# As root on Debian 12 (scripts/setup.sh installs the toolchains; cargo-cyclonedx, pinned, is
# installed from crates.io when missing).
#
#   bash scripts/release.sh OUTDIR           # the release
#   bash scripts/release.sh --check OUTDIR   # and check it: the x86_64 binary built a second
#                                            # time in a fresh target dir, byte for byte; the
#                                            # images, SBOMs and docs made again and compared;
#                                            # static, sums, the image loads and runs --version
#
# Reproducible: SOURCE_DATE_EPOCH is the commit's time (the images' dates, the SBOMs'
# timestamp); --remap-path-prefix takes the checkout and $CARGO_HOME out of panic locations
# (workspace files are already relative); the SBOMs' serial number is derived from the commit.
# A tree with changes to tracked files is refused: the release would not be the commit's.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case ${1:-} in --check) check=1; shift ;; esac
[ $# -eq 1 ] || { echo "usage: $0 [--check] OUTDIR" >&2; exit 2; }
say() { echo "release: $*" >&2; }
fail() { say "$*"; exit 1; }

# Pinned, as the toolchain is: another version writes another SBOM.
CYCLONEDX_VERSION=0.5.7
BUDGET=3145728

[ -z "$(git status --porcelain --untracked-files=no)" ] ||
  fail "tracked files have changes: commit them first (a release is a commit's)"
commit=$(git rev-parse HEAD)
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH
version=$(sed -nE '/^\[workspace.package\]/,/^\[/s/^version = "(.*)"/\1/p' Cargo.toml)
[ -n "$version" ] || fail "no workspace version in Cargo.toml"
mkdir -p "$1"
out=$(cd "$1" && pwd)
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
cargo_home=${CARGO_HOME:-$HOME/.cargo}

bash scripts/setup.sh >&2
# It says `cargo-cyclonedx-cyclonedx 0.5.7`, without a newline.
case "$(cargo cyclonedx --version 2>/dev/null)" in
  *" $CYCLONEDX_VERSION") ;;
  *) say "cargo install cargo-cyclonedx $CYCLONEDX_VERSION"
     cargo install -q --locked --force cargo-cyclonedx --version "$CYCLONEDX_VERSION" ;;
esac

# build TRIPLE TARGET_DIR: the release binary with the checkout's and CARGO_HOME's paths
# remapped (appended to .cargo/config.toml's flags for the triple; cargo joins the arrays).
build() {
  local flags="['--remap-path-prefix=$PWD=/src', '--remap-path-prefix=$cargo_home=/cargo']"
  CARGO_TARGET_DIR=$2 cargo build --release -q --locked --target "$1" --config "target.$1.rustflags=$flags"
}

declare -A triple=([x86_64]=x86_64-unknown-linux-gnu [aarch64]=aarch64-unknown-linux-gnu)
declare -A platform=([x86_64]=amd64 [aarch64]=arm64)
for arch in x86_64 aarch64; do
  say "building ${triple[$arch]}"
  build "${triple[$arch]}" "$target_dir"
  bin=$target_dir/${triple[$arch]}/release/nccl-wrap
  kind=$(file -b "$bin")
  case $kind in *"statically linked"*) ;; *) fail "$bin is not static: $kind" ;; esac
  size=$(stat -c %s "$bin")
  [ "$size" -le "$BUDGET" ] || fail "$bin is $size bytes, over its 3 MiB budget"
  ! grep -q -e "$PWD" -e "$cargo_home" "$bin" || fail "$bin still holds a build path"
  install -m 0755 "$bin" "$out/nccl-wrap-$version-$arch-linux"
  say "nccl-wrap-$version-$arch-linux: $size bytes, $kind"
done

# images FILE_PREFIX: the FROM scratch image of each architecture, dated at the commit, as an
# OCI archive (an OCI layout in a tar: podman load -i, skopeo copy oci-archive:). The context holds only the binaries, where Containerfile expects them.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/ci/containers.conf}
pm() { podman --storage-driver vfs "$@"; }
images() {
  local ctx arch tag
  ctx=$(mktemp -d)
  cp Containerfile "$ctx/"
  for arch in x86_64 aarch64; do
    mkdir -p "$ctx/target/${triple[$arch]}/release"
    cp "$out/nccl-wrap-$version-$arch-linux" "$ctx/target/${triple[$arch]}/release/nccl-wrap"
    tag=localhost/nccl-wrap-release:$version-${platform[$arch]}
    pm build -q --platform "linux/${platform[$arch]}" --timestamp "$SOURCE_DATE_EPOCH" -t "$tag" -f "$ctx/Containerfile" "$ctx" >/dev/null
    # The image's blobs are the same bytes each time; podman save's tar would date its entries
    # now, so the layout is saved as a folder and tarred with the commit's date.
    rm -rf "$ctx/layout" "$1-${platform[$arch]}.oci.tar"
    pm save -q --format oci-dir -o "$ctx/layout" "$tag"
    pm rmi -f "$tag" >/dev/null
    tar -C "$ctx/layout" --sort=name --format=ustar --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 \
      --numeric-owner --mode=u=rwX,go=rX -cf "$1-${platform[$arch]}.oci.tar" blobs index.json oci-layout
  done
  rm -rf "$ctx"
}

# sbom ARCH FILE: cargo-cyclonedx's SBOM of the binary's crates for the triple, made
# reproducible (its timestamp the commit's, its serial number from the commit, the checkout's
# path out of its references), with the C libraries linked statically that cargo cannot see.
sbom() {
  local src tmp
  tmp=$(mktemp -d)
  # It writes beside the manifest: a copy of the sources keeps the checkout clean.
  git archive HEAD | tar -x -C "$tmp"
  src=$tmp
  (cd "$src" && cargo cyclonedx -q --format json --spec-version 1.5 \
     --target "${triple[$1]}" --override-filename sbom)
  local dpkg_arch=${platform[$1]} libc=libc6-dev:amd64
  [ "$1" = x86_64 ] || libc=libc6-dev-arm64-cross
  local packages
  packages=$(dpkg-query -W -f '${Package} ${source:Package} ${Version}\n' "libibverbs-dev:$dpkg_arch" \
    "ibverbs-providers:$dpkg_arch" "libnl-3-dev:$dpkg_arch" "libnl-route-3-dev:$dpkg_arch" "$libc")
  python3 - "$src/sbom.json" "$2" "$commit" "$SOURCE_DATE_EPOCH" "$src" "$dpkg_arch" "$packages" <<'EOF'
import datetime, json, sys, uuid
path, dest, commit, epoch, src, arch, packages = sys.argv[1:]
bom = json.load(open(path))
bom["serialNumber"] = "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "nccl-wrap@" + commit + "/" + arch))
bom["metadata"]["timestamp"] = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
bom["metadata"].setdefault("properties", []).append({"name": "nccl-wrap:commit", "value": commit})
# Linked statically from Debian's packages: rdma-core (libibverbs and the providers), libnl, glibc.
by_source = {}
for line in packages.splitlines():
    name, source, version = line.split()
    # glibc's static libraries: libc6-dev, or the cross toolchain's libc6-dev-arm64-cross.
    source = "glibc" if name.startswith("libc6-dev") else source
    by_source.setdefault((source, version), []).append(name)
for (source, version), names in sorted(by_source.items()):
    bom["components"].append({
        "type": "library", "bom-ref": f"deb:{source}@{version}", "name": source, "version": version,
        "purl": f"pkg:deb/debian/{source}@{version}?arch={arch}&distro=debian-12",
        "description": "linked statically into the binary, from Debian's " + ", ".join(sorted(names)),
    })
text = json.dumps(bom, indent=2, sort_keys=True).replace("file://" + src, "file:///src")
open(dest, "w").write(text + "\n")
EOF
  rm -rf "$tmp"
}

# docs DIR: the man page and the completion scripts, from the option table (tools/docs.rs).
docs() {
  cargo build -q --locked --example docs
  local gen=$target_dir/x86_64-unknown-linux-gnu/debug/examples/docs
  "$gen" man >"$1/nccl-wrap.1"
  "$gen" bash >"$1/nccl-wrap.bash"
  "$gen" zsh >"$1/_nccl-wrap"
  "$gen" fish >"$1/nccl-wrap.fish"
}

# everything but the binaries, into DIR (OUTDIR, or a second folder for --check)
rest() {
  say "images, SBOMs, docs"
  images "$1/nccl-wrap-$version-image"
  for arch in x86_64 aarch64; do sbom "$arch" "$1/nccl-wrap-$version-$arch-linux.cdx.json"; done
  docs "$1"
}
rest "$out"
{
  echo "commit $commit"
  echo "SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH"
  rustc -vV | sed 's/^/rustc: /'
  echo "cargo-cyclonedx $CYCLONEDX_VERSION"
  podman --version
  dpkg-query -W -f '${Package}:${Architecture} ${Version}\n' libibverbs-dev:amd64 libibverbs-dev:arm64 \
    ibverbs-providers:amd64 ibverbs-providers:arm64 libnl-3-dev:amd64 libnl-3-dev:arm64 libc6-dev:amd64 libc6-dev-arm64-cross
} >"$out/BUILD-INFO"
(cd "$out" && rm -f SHA256SUMS && sha256sum -- * >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
say "$out: $(ls "$out" | wc -l) files"
[ "$check" = 1 ] || exit 0

# --- the check ---------------------------------------------------------------------------------
(cd "$out" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match the files"
again=$(mktemp -d)
say "check: building x86_64 a second time, in a fresh target dir"
started=$SECONDS
build x86_64-unknown-linux-gnu "$again/target"
say "check: the second build took $((SECONDS - started)) s"
cmp "$again/target/x86_64-unknown-linux-gnu/release/nccl-wrap" "$out/nccl-wrap-$version-x86_64-linux" ||
  fail "two builds of the x86_64 binary differ (the second is kept in $again/target)"
mkdir "$again/out"
cp "$out"/nccl-wrap-"$version"-*-linux "$again/out/"
rest "$again/out"
for f in "$out"/*; do
  name=$(basename "$f")
  case $name in BUILD-INFO|SHA256SUMS|*-linux) continue ;; esac
  cmp "$f" "$again/out/$name" || fail "$name differs when made again"
done
say "check: the x86_64 binary, the images, the SBOMs and the docs are the same bytes made twice"
# The image loads and runs.
loaded=$(pm load -q -i "$out/nccl-wrap-$version-image-amd64.oci.tar")
image=${loaded##*: }
ran=$(pm run --rm "$image" --version)
pm rmi -f "$image" >/dev/null
[ "$(echo "$ran" | head -1)" = "nccl-wrap $version" ] && echo "$ran" | grep -qx "commit: $commit" &&
  echo "$ran" | grep -qx "static: yes" || fail "the amd64 image's --version: $ran"
say "check: the amd64 image loads and runs: $(echo "$ran" | paste -sd ' ')"
python3 - "$out" "$version" <<'EOF' || fail "an SBOM does not name what the binary links"
import json, sys
out, version = sys.argv[1:]
for arch in ("x86_64", "aarch64"):
    bom = json.load(open(f"{out}/nccl-wrap-{version}-{arch}-linux.cdx.json"))
    names = {c["name"] for c in bom["components"]}
    missing = {"rdma-sys", "serde_json", "rdma-core", "glibc"} - names
    assert bom["bomFormat"] == "CycloneDX" and not missing, (arch, missing)
EOF
rm -rf "$again"
say "check: passed"
