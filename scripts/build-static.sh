#!/usr/bin/env bash
# One self-contained plugpull for the host under test: statically linked against glibc,
# so it runs from a live USB system or a minimal server install with nothing else
# installed (copy the one file over, no Rust, no libraries). docs/install.md explains.
#
# Usage: scripts/build-static.sh [OUTDIR]          (default OUTDIR: target/static)
# Makes: OUTDIR/plugpull        stripped of debug info (symbol table kept, so a panic's
#                               backtrace still names functions): about 12.2 MB
#        OUTDIR/plugpull.debug  its debug info (objcopy --only-keep-debug), linked from
#                               the binary by .gnu_debuglink: keep it beside a copy you
#                               ship to symbolise a crash later (gdb, addr2line -e)
# Then checks that the binary is static (`file`, `ldd`) and runs `plugpull --version`.
#
# Why glibc and not musl: no musl target can be installed on our machines (rustup cannot
# download it), and glibc 2.34+ links its "files" and "dns" name services into a static
# binary, so `--witness NAME:PORT` resolves through /etc/hosts and DNS without any
# libnss_*.so (tests/integration/static_binary.rs checks both in an empty chroot). A host whose
# /etc/nsswitch.conf names other services first (mdns, ldap, sss) makes the static binary
# try to load their modules; if the name does not resolve there, give the witness by
# address (--witness 192.0.2.10:7420).
#
# Why `cargo rustc` with --defsym: the libc crate links cfsetispeed/cfsetospeed (used
# by the serial power driver) by their old versioned names (cfsetispeed@GLIBC_2.2.5)
# because glibc 2.42 changed their meaning; a static libc.a has no symbol versions, so
# the names are pointed at the unversioned functions, which before glibc 2.42 are the
# same functions. On glibc 2.42 or newer that would be wrong, so the script refuses.
#
# The build is the `dist` profile (Cargo.toml: release with line tables) for the host's
# linux-gnu triple; the first build takes several minutes on 2 cores, later ones only
# relink. Cargo's progress and a line per step go to stderr, the result line to stdout.
# Env: CARGO (default cargo).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/static}
cargo=${CARGO:-cargo}

triple=$(rustc -vV | sed -n 's/^host: //p')
case $triple in
  x86_64-unknown-linux-gnu) symver=GLIBC_2.2.5 ;;
  aarch64-unknown-linux-gnu) symver=GLIBC_2.17 ;;
  *) echo "build-static.sh: $triple is not a linux-gnu host this script knows" >&2; exit 2 ;;
esac
glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
if [ "$(printf '%s\n2.42\n' "$glibc" | sort -V | head -n1)" = 2.42 ]; then
  echo "build-static.sh: glibc $glibc: from 2.42 on the static cfsetispeed takes baud rates," \
    "not the B* constants plugpull passes; build on a system with glibc < 2.42" >&2
  exit 2
fi

link=()
for f in cfsetispeed cfsetospeed; do
  link+=(-C "link-arg=-Wl,--defsym=\"$f@$symver\"=$f")
done
step() { echo "build-static.sh: $*" >&2; }

step "building the static binary ($triple, dist profile); the first build takes several minutes"
RUSTFLAGS='-C target-feature=+crt-static' "$cargo" rustc --locked --bin plugpull \
  --profile dist --target "$triple" -- "${link[@]}"

built=target/$triple/dist/plugpull
mkdir -p "$out"
step "splitting the debug info into $out/plugpull.debug, stripping $out/plugpull"
objcopy --only-keep-debug "$built" "$out/plugpull.debug"
strip --strip-debug -o "$out/plugpull" "$built"
# The link names the file, so it must be made beside it (objcopy reads it for its CRC).
(cd "$out" && objcopy --add-gnu-debuglink=plugpull.debug plugpull)

step "checking that $out/plugpull is static and runs"

kind=$(file -b "$out/plugpull")
lddsays=$(ldd "$out/plugpull" 2>&1 || true)
case $kind in *"statically linked"* | *"static-pie linked"*) ;; *)
  echo "build-static.sh: $out/plugpull is not static: $kind" >&2; exit 1 ;;
esac
case $lddsays in *"not a dynamic executable"* | *"statically linked"*) ;; *)
  echo "build-static.sh: ldd lists libraries for $out/plugpull:" >&2
  echo "$lddsays" >&2
  exit 1 ;;
esac
version=$("$out/plugpull" --version)
# In MB (10^6 bytes) with one decimal, as docs/install.md gives it.
size_mb=$(awk -v b="$(stat -c %s "$out/plugpull")" 'BEGIN { printf "%.1f", b / 1e6 }')
echo "$out/plugpull: $version, static ($kind), $size_mb MB; debug info in $out/plugpull.debug"
