#!/usr/bin/env bash
# The hostile and careless-user cases of issue 11, re-run as a user would: the built
# binary only, shell commands, real files, loop devices, mounts and sockets.
#
# Why a script and not only Rust tests: each defect of issue 11 was found by typing
# commands, and the Rust tests exercise library paths. This script repeats every case
# the way it was found, checks the FIXED behaviour the issue demands, repeats each case
# HOSTILE_RUNS times, checksums every file or device the case must not change before and
# after, and prints a markdown table (docs/hostile.md says what each case does and why):
#
#   | case | runs | expected | outcome (ok / BROKEN k/n) | nothing lost |
#
# followed by the reason of every failed check. Exit status: 0 when every case that ran
# is ok and lost nothing, 1 when any case is BROKEN or lost something, 2 when the script
# itself could not run. Cases that need root are skipped, with the reason, without it.
#
# Usage: scripts/hostile.sh            (as root for the loop-device and mount cases)
# Env:   PLUGPULL=path/to/plugpull     binary under test (default target/release/plugpull,
#                                      built with `cargo build --release --locked` if missing)
#        HOSTILE_RUNS=3                repetitions of every case
#        HOSTILE_CASES="1 2 3 4 5 6 7 8"   which cases to run
#        HOSTILE_KEEP=1                keep the work directory (command outputs) for reading
#
# Safety: the script writes only to files, loop devices, mounts and witness directories
# it created itself, under one work directory (mktemp under /var/tmp), /dev/shm
# (plugpull-hostile.* files) and, for case 4, the path /dev/sdzz, which it only removes
# if it did not exist before and plugpull created it. Loop devices are remembered by the
# name `losetup --show` printed, never guessed; everything is undone on exit, also on
# Ctrl-C.
# The cases are called by name ("case$c"), which shellcheck cannot follow:
# shellcheck disable=SC2329
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
PLUGPULL=${PLUGPULL:-target/release/plugpull}
RUNS=${HOSTILE_RUNS:-3}
CASES=${HOSTILE_CASES:-1 2 3 4 5 6 7 8}
# Case 7: threads a witness may have while 1,100 idle sockets are open to it (today:
# one per socket, 1,028); an event loop plus a few service threads stay far below.
THREAD_LIMIT=64
# Case 7: how long a writer and a fetch may take while the witness is flooded.
FLOOD_DEADLINE=5

if [[ ! -x $PLUGPULL ]]; then
  echo "hostile.sh: $PLUGPULL missing, building it (cargo build --release --locked)" >&2
  cargo build --release --locked --quiet || {
    echo "hostile.sh: build failed" >&2
    exit 2
  }
fi
PLUGPULL=$(realpath "$PLUGPULL")
command -v python3 >/dev/null || {
  echo "hostile.sh: python3 is needed (raw sockets, frame surgery)" >&2
  exit 2
}
IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1
NOT_ROOT="needs root, run the script as root"

WORK=$(mktemp -d /var/tmp/plugpull-hostile.XXXXXX) || exit 2
SHM_PREFIX=/dev/shm/plugpull-hostile.$$
PIDS=()   # processes we started (witnesses, socket holders)
MOUNTS=() # mount points we mounted
LOOPS=()  # loop devices we attached (names printed by losetup --show)
EXTRA=()  # paths outside WORK that did not exist before; removed if a regular file

cleanup() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -KILL "${PIDS[i]}" 2>/dev/null
    wait "${PIDS[i]}" 2>/dev/null
  done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    mountpoint -q "${MOUNTS[i]}" && umount "${MOUNTS[i]}"
  done
  for ((i = ${#LOOPS[@]} - 1; i >= 0; i--)); do
    losetup -d "${LOOPS[i]}" 2>/dev/null
  done
  for i in "${EXTRA[@]}"; do [[ -f $i ]] && rm -f "$i"; done
  rm -f "$SHM_PREFIX".*
  if [[ ${HOSTILE_KEEP:-0} == 1 ]]; then
    echo "hostile.sh: work directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'echo "hostile.sh: interrupted" >&2; exit 2' INT TERM

say() { echo "$(date +%T) $*" >&2; }

# ---------------------------------------------------------------------------------------
# Results. A case registers its rows with `row`; each repetition of a row is
# `begin ROW` ... checks ... `end`. `bad` fails the current repetition (outcome), `snap`
# and `unchanged` (or `mark_lost`) decide the "nothing lost" column.

ROWS=()
declare -A TITLE EXPECT NRUNS NBAD NLOST NCHECKED SKIPPED WHY
CUR=""
CUR_BAD=0
CUR_LOST=0
SNAP_FILES=()
declare -A SNAP_SUM

row() { # ID TITLE EXPECTED
  ROWS+=("$1")
  TITLE[$1]=$2
  EXPECT[$1]=$3
  NRUNS[$1]=0
  NBAD[$1]=0
  NLOST[$1]=0
  NCHECKED[$1]=0
  WHY[$1]=""
}
begin() {
  CUR=$1
  CUR_BAD=0
  CUR_LOST=0
  SNAP_FILES=()
  SNAP_SUM=()
  NRUNS[$1]=$((NRUNS[$1] + 1))
  say "case $1 run ${NRUNS[$1]}: ${TITLE[$1]}"
}
why() { # run ids, the work directory and run numbers are elided, so runs read alike
  local m=$*
  m=${m//$WORK/\$WORK}
  # shellcheck disable=SC2016 # $WORK is literal text here
  m=$(sed -E 's/[0-9a-f]{32}/<run>/g; s#\$WORK/c([0-9])\.[0-9]+#$WORK/c\1.N#g' <<<"$m")
  WHY[$CUR]+="$m"$'\n'
}
bad() {
  CUR_BAD=1
  why "$*"
  say "  BROKEN: $*"
}
mark_lost() {
  CUR_LOST=1
  why "lost: $*"
  say "  LOST: $*"
}
checked() { NCHECKED[$CUR]=$((NCHECKED[$CUR] + ${1:-1})); }
end() {
  unchanged
  ((CUR_BAD)) && NBAD[$CUR]=$((NBAD[$CUR] + 1))
  ((CUR_LOST)) && NLOST[$CUR]=$((NLOST[$CUR] + 1))
  CUR=""
}
skip_row() { # ID REASON
  SKIPPED[$1]=$2
  say "case $1 skipped: $2"
}
# Setup failed before the case could be tried: every row of the case fails this run.
setup_failed() { # REASON ROW...
  local reason=$1 r
  shift
  for r in "$@"; do
    begin "$r"
    bad "setup: $reason"
    end
  done
}

sum() { # FILE or DEVICE -> sha256, or "missing"
  if [[ -e $1 ]]; then sha256sum <"$1" | cut -c1-64; else echo missing; fi
}
snap() { # FILE... : remember their checksums; `end` compares them
  local f
  for f in "$@"; do
    SNAP_FILES+=("$f")
    SNAP_SUM[$f]=$(sum "$f")
  done
}
unchanged() {
  local f now
  for f in "${SNAP_FILES[@]}"; do
    now=$(sum "$f")
    checked
    if [[ $now != "${SNAP_SUM[$f]}" ]]; then
      if [[ $now == missing ]]; then mark_lost "$f was removed"; else mark_lost "$f changed"; fi
    fi
  done
  SNAP_FILES=()
  SNAP_SUM=()
}

# ---------------------------------------------------------------------------------------
# Running plugpull and witnesses.

# pp OUT SECONDS ARGS... : runs plugpull, stdout to OUT, stderr to OUT.err; returns its
# exit status (124 when it ran past SECONDS and was killed).
pp() {
  local out=$1 secs=$2
  shift 2
  timeout --kill-after=5 "$secs" "$PLUGPULL" "$@" >"$out" 2>"$out.err"
}
# The first line of everything a command printed, for failure reasons.
first_line() { cat "$1" "$1.err" 2>/dev/null | grep -v '^\s*$' | head -1 | cut -c1-160; }
said() { # OUT REGEX : whether the command's stdout or stderr matches (extended, no case)
  cat "$1" "$1.err" 2>/dev/null | grep -Eqi -- "$2"
}
json_field() { # FILE KEY
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_witness DIR LOG [listen args...] : sets W_PID and W_ADDR; fails if it did not
# say "listening on" within 10 s.
start_witness() {
  local dir=$1 log=$2 port i
  shift 2
  port=$(free_port)
  "$PLUGPULL" listen --bind "127.0.0.1:$port" --dir "$dir" "$@" 2>"$log" &
  W_PID=$!
  PIDS+=("$W_PID")
  W_ADDR=127.0.0.1:$port
  for ((i = 0; i < 100; i++)); do
    grep -q "listening on" "$log" 2>/dev/null && return 0
    kill -0 "$W_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
stop_pid() { # PID : SIGTERM, then SIGKILL after 5 s; forgets it
  local pid=$1 i keep=()
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for i in "${PIDS[@]}"; do [[ $i != "$pid" ]] && keep+=("$i"); done
  PIDS=("${keep[@]}")
}
attach_loop() { # FILE : sets LOOP to the new loop device and remembers it for cleanup
  LOOP=$(losetup -f --show "$1") || return 1
  LOOPS+=("$LOOP")
}
detach_loop() { # DEV
  local d keep=()
  losetup -d "$1" 2>/dev/null
  for d in "${LOOPS[@]}"; do [[ $d != "$1" ]] && keep+=("$d"); done
  LOOPS=("${keep[@]}")
}
do_mount() { # DIR MOUNT-ARGS... : mount MOUNT-ARGS DIR, remembered for cleanup
  local dir=$1
  shift
  mkdir -p "$dir"
  mount "$@" "$dir" || return 1
  MOUNTS+=("$dir")
}
do_umount() { # DIR
  local m keep=()
  umount "$1"
  for m in "${MOUNTS[@]}"; do [[ $m != "$1" ]] && keep+=("$m"); done
  MOUNTS=("${keep[@]}")
}

# ---------------------------------------------------------------------------------------
# Python helpers: frame surgery on ack logs, a raw protocol client for forged acks, and
# a holder of idle sockets. Frame layout: docs/protocol.md ("Frames").

HELPER=$WORK/helper.py
cat >"$HELPER" <<'PY'
import json, os, resource, socket, struct, sys, time, zlib

ACKS, HELLO, WELCOME, DURABLE, HEARTBEAT, ERROR = 0x12, 0x10, 0x11, 0x13, 0x14, 0x16

def frames(b):
    """(offset, total length, type) of every complete frame from the start."""
    o, out = 0, []
    while o + 4 <= len(b):
        n = struct.unpack_from("<I", b, o)[0]
        if n == 0 or o + 8 + n > len(b):
            break
        out.append((o, 8 + n, b[o + 4] & 0x7F))
        o += 8 + n
    return out

def frame(ty, payload):
    body = struct.pack("<I", 1 + len(payload)) + bytes([ty]) + payload
    return body + struct.pack("<I", zlib.crc32(body))

def prefix_at_fifth(b):
    """Header, descriptor and the whole Acks frames that end within the first fifth."""
    fs = frames(b)
    keep = fs[:2]
    for f in fs[2:]:
        if f[2] != ACKS or f[0] + f[1] > len(b) // 5:
            break
        keep.append(f)
    if len(keep) < 3:
        keep = fs[:3]
    end = keep[-1][0] + keep[-1][1]
    return end, fs

def flip(src, dst):
    b = bytearray(open(src, "rb").read())
    at = len(b) // 5
    b[at] ^= 0x10
    open(dst, "wb").write(b)
    print(at)

def cut(src, dst):
    b = open(src, "rb").read()
    end, _ = prefix_at_fifth(b)
    open(dst, "wb").write(b[:end])
    print(end)

def splice(src, dst):
    """The first fifth of the acks, then everything after the last Acks frame (the
    witness events and any trailer a fixed fetch may add): acks cut out of the middle."""
    b = open(src, "rb").read()
    end, fs = prefix_at_fifth(b)
    last = max(i for i, f in enumerate(fs) if f[2] == ACKS)
    tail = fs[last][0] + fs[last][1]
    open(dst, "wb").write(b[:end] + b[tail:])
    print(end, tail)

def cut2(path):
    """Cuts a log to its first two frames (header and descriptor), in place."""
    b = open(path, "rb").read()
    o, n, _ = frames(b)[1]
    os.truncate(path, o + n)

def descriptor(src):
    b = open(src, "rb").read()
    o, n, ty = frames(b)[1]
    sys.stdout.write(b[o + 5 : o + 4 + struct.unpack_from("<I", b, o)[0]].decode())

def read_frame(s):
    buf = b""
    while len(buf) < 4:
        c = s.recv(4 - len(buf))
        if not c:
            return None, b""
        buf += c
    n = struct.unpack("<I", buf)[0]
    rest = b""
    while len(rest) < n + 4:
        c = s.recv(n + 4 - len(rest))
        if not c:
            return None, b""
        rest += c
    return rest[0] & 0x7F, rest[1:n]

def reply(s):
    """What the witness answered: durable:N, error:MESSAGE, closed or timeout."""
    try:
        while True:
            ty, p = read_frame(s)
            if ty is None:
                return "closed"
            if ty == DURABLE:
                return "durable:%d" % struct.unpack("<Q", p)[0]
            if ty == ERROR:
                return "error:" + p.decode(errors="replace").replace("\n", " ")
            if ty == HEARTBEAT:
                continue
            return "frame:0x%02x" % ty
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "closed:%s" % e

def forge(addr, desc_file, kind):
    """Hello for a new run (the descriptor of a real run with a fresh run id), then one
    Acks frame holding one entry of the given kind. Prints run id and the reply."""
    d = json.load(open(desc_file))
    run = os.urandom(16).hex()
    d["run_id"] = run
    s_ = d["settings"]
    sectors = s_["record_bytes_min"] // 512
    stream, offset = 0, s_["region_offset"]
    if kind == "zero":
        sectors = 0
    elif kind == "huge":
        sectors = 0xFFFFFFFF
    elif kind == "unaligned":
        offset += 100
    elif kind == "stream":
        stream = s_["streams"]
    elif kind != "valid":
        sys.exit("unknown kind " + kind)
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(frame(HELLO, struct.pack("<HH", 1, 0) + json.dumps(d).encode()))
    ty, p = read_frame(s)
    if ty != WELCOME:
        print(run, "hello-refused:%s" % (p.decode(errors="replace") if ty == ERROR else ty))
        return
    now = time.time_ns()
    entry = struct.pack("<HHIQQQQ", stream, 0, sectors, 1, offset, now - 1000, now)
    s.sendall(frame(ACKS, struct.pack("<QI", 0, 1) + entry))
    print(run, reply(s))

def hold(addr, n, ready):
    """Opens n idle TCP connections to addr and keeps them open, sending nothing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard > 0 else want, hard))
    host, port = addr.rsplit(":", 1)
    socks, failed = [], 0
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, int(port)), timeout=3))
        except OSError:
            failed += 1
    with open(ready, "w") as f:
        f.write("%d %d\n" % (len(socks), failed))
    time.sleep(3600)

cmd = sys.argv[1]
if cmd == "hold":
    hold(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "cut2":
    cut2(sys.argv[2])
elif cmd == "descriptor":
    descriptor(sys.argv[2])
elif cmd == "forge":
    forge(sys.argv[2], sys.argv[3], sys.argv[4])
else:
    {"flip": flip, "cut": cut, "splice": splice}[cmd](sys.argv[2], sys.argv[3])
PY
helper() { python3 "$HELPER" "$@"; }

# A witness shared by the cases that only need one to be there.
W_DIR=$WORK/witness
start_witness "$W_DIR" "$WORK/witness.err" || {
  echo "hostile.sh: the witness did not start:" >&2
  cat "$WORK/witness.err" >&2
  exit 2
}
WITNESS=$W_ADDR

# ---------------------------------------------------------------------------------------
# Case 1: a damaged, cut or spliced ack log must never give PASS, and the witness must
# never cut confirmed acks out of a damaged log.

row 1a "one flipped bit at 1/5 of the ack log: verify the drive, the lossy copy" "exit 3 / exit 1 or 3, naming the damage"
row 1b "the witness's own log, one bit flipped at 1/5: listen" "log kept byte for byte"
row 1c "ack log cut short at a frame boundary: verify" "exit 2 or 3, not PASS"
row 1d "ack log with acks spliced out of the middle: verify" "exit 2 or 3, not PASS"
row 1e "witness journal with a flipped bit, after a power loss: listen" "journal kept byte for byte"

case1() {
  local d=$WORK/c1.$1 t=$SHM_PREFIX.c1.$1 rc run wpid
  mkdir -p "$d"
  # A drive that lost everything after the moment of the copy: write 8 MiB for 4 s,
  # copy the target 2 s in.
  pp "$d/write" 60 write "$t" --witness "$WITNESS" --size 8M --duration 4s --json -q &
  wpid=$!
  sleep 2
  cp "$t" "$d/copy"
  wait "$wpid"
  rc=$?
  run=$(json_field "$d/write" run_id)
  if [[ $rc != 0 || -z $run ]]; then
    setup_failed "write exited $rc: $(first_line "$d/write")" 1a 1b 1c 1d
    return
  fi
  if ! pp "$d/fetch" 60 fetch --witness "$WITNESS" --run "$run" -o "$d/log"; then
    setup_failed "fetch: $(first_line "$d/fetch")" 1a 1b 1c 1d
    return
  fi

  begin 1a
  snap "$d/log" "$d/copy" "$t"
  # Controls: the whole log says FAIL for the copy and PASS for the drive itself.
  pp "$d/v-whole" 120 verify "$d/copy" --acks "$d/log"
  rc=$?
  [[ $rc == 1 ]] || bad "control: whole log on the copy gave exit $rc, want 1 (FAIL): $(first_line "$d/v-whole")"
  pp "$d/v-honest" 120 verify "$t" --acks "$d/log"
  rc=$?
  [[ $rc == 0 ]] || bad "control: whole log on the drive gave exit $rc, want 0 (PASS): $(first_line "$d/v-honest")"
  local at
  at=$(helper flip "$d/log" "$d/flipped")
  snap "$d/flipped"
  # The drive itself (honest) with the damaged log: the acks in the damaged frame cannot
  # be checked, nothing was lost: INCONCLUSIVE (3), never PASS and never FAIL.
  pp "$d/v-flip" 120 verify "$t" --acks "$d/flipped"
  rc=$?
  if [[ $rc != 3 ]]; then
    bad "bit flipped at byte $at, honest drive: verify exit $rc, want 3: $(grep -m1 VERDICT "$d/v-flip" || first_line "$d/v-flip")"
  elif ! said "$d/v-flip" 'damag|corrupt'; then
    bad "bit flipped at byte $at, honest drive: exit 3 but the output does not name the damage"
  fi
  # The copy (it lost records) with the damaged log: FAIL if the acks still readable
  # prove a loss, else INCONCLUSIVE; never PASS, and the damage named either way.
  pp "$d/v-flip-copy" 120 verify "$d/copy" --acks "$d/flipped"
  rc=$?
  if [[ $rc != 1 && $rc != 3 ]]; then
    bad "bit flipped at byte $at, lossy copy: verify exit $rc, want 1 or 3: $(grep -m1 VERDICT "$d/v-flip-copy" || first_line "$d/v-flip-copy")"
  elif ! said "$d/v-flip-copy" 'damag|corrupt'; then
    bad "bit flipped at byte $at, lossy copy: exit $rc but the output does not name the damage"
  fi
  end

  # The witness's own log of the run, damaged the same way, in a directory of its own.
  begin 1b
  mkdir -p "$d/wd"
  helper flip "$W_DIR/$run.acklog" "$d/wd/$run.acklog" >/dev/null
  local before after
  before=$(stat -c %s "$d/wd/$run.acklog")
  snap "$d/wd/$run.acklog"
  if start_witness "$d/wd" "$d/listen.err"; then
    stop_pid "$W_PID"
  else
    stop_pid "$W_PID"
    why "note: listen did not start on the damaged directory: $(grep -v '^\s*$' "$d/listen.err" | tail -1 | cut -c1-160)"
  fi
  after=$(stat -c %s "$d/wd/$run.acklog")
  [[ $(sum "$d/wd/$run.acklog") == "${SNAP_SUM[$d/wd/$run.acklog]}" ]] ||
    bad "listen changed the damaged log ($before -> $after bytes): $(grep -m1 -i 'cut\|trunc\|torn' "$d/listen.err" | cut -c1-160)"
  end

  begin 1c
  helper cut "$d/log" "$d/cut" >/dev/null
  snap "$d/cut" "$d/copy"
  pp "$d/v-cut" 120 verify "$d/copy" --acks "$d/cut"
  rc=$?
  [[ $rc == 2 || $rc == 3 ]] ||
    bad "log cut to its first fifth: verify exit $rc, want 2 or 3: $(grep -m1 VERDICT "$d/v-cut" || first_line "$d/v-cut")"
  end

  begin 1d
  helper splice "$d/log" "$d/spliced" >/dev/null
  snap "$d/spliced" "$d/copy"
  pp "$d/v-splice" 120 verify "$d/copy" --acks "$d/spliced"
  rc=$?
  [[ $rc == 2 || $rc == 3 ]] ||
    bad "acks spliced out of the log: verify exit $rc, want 2 or 3: $(grep -m1 VERDICT "$d/v-splice" || first_line "$d/v-splice")"
  end
  rm -f "$t"
  journal_damage "$d"
}

# The journal has the same reader as the log. A witness killed at power loss keeps only
# what it fsync'd: the logs' header and descriptor, and the journal (which holds every
# confirmed ack). Damage inside the journal with valid entries after it must not make
# the restart replay the part before the damage and delete the journal.
journal_damage() { # DIR
  local d=$1/journal wpid j rc jsum
  mkdir -p "$d"
  begin 1e
  if ! start_witness "$d/wd" "$d/listen.err"; then
    bad "setup: listen did not start"
    stop_pid "$W_PID"
    end
    return
  fi
  wpid=$W_PID
  pp "$d/write" 60 write "$SHM_PREFIX.c1j" --witness "$W_ADDR" --size 8M --duration 2s -q
  rc=$?
  kill -KILL "$wpid"
  stop_pid "$wpid"
  rm -f "$SHM_PREFIX.c1j"
  # shellcheck disable=SC2012 # journal names are hex digits; ls -S sorts by size
  j=$(ls -S "$d/wd"/*.journal 2>/dev/null | head -1)
  if [[ $rc != 0 || -z $j ]]; then
    bad "setup: write exited $rc, journal '${j}': $(first_line "$d/write")"
    end
    return
  fi
  # Power loss: every log falls back to what was fsync'd, its header and descriptor.
  local log
  for log in "$d/wd"/*.acklog; do helper cut2 "$log"; done
  helper flip "$j" "$d/journal.flipped" >/dev/null && cp "$d/journal.flipped" "$j"
  jsum=$(sum "$j")
  if start_witness "$d/wd" "$d/listen2.err"; then
    stop_pid "$W_PID"
  else
    stop_pid "$W_PID"
    why "note: listen did not start on the damaged journal: $(grep -v '^\s*$' "$d/listen2.err" | tail -1 | cut -c1-160)"
  fi
  # Kept means: its bytes are still in the witness directory (under its name, or moved
  # aside under another); its own checksum also decides "nothing lost".
  kept_somewhere "$d/wd" "$jsum" ||
    bad "listen did not keep the damaged journal ($(stat -c '%s bytes' "$j" 2>/dev/null || echo gone) now, was $(stat -c %s "$d/journal.flipped") bytes): $(grep -m1 -i 'replayed\|journal' "$d/listen2.err" | cut -c1-160)"
  end
}

kept_somewhere() { # DIR SHA256 : whether some file under DIR has these contents
  local f
  checked
  while IFS= read -r -d '' f; do
    [[ $(sum "$f") == "$2" ]] && return 0
  done < <(find "$1" -type f -print0)
  mark_lost "no file in $1 holds the damaged journal's bytes any more"
  return 1
}

# ---------------------------------------------------------------------------------------
# Case 2: data that merely starts with "PLUG" is not an earlier run.

row 2a 'text file starting "PLUGINS enabled:": write' "refused (exit 2), file unchanged"
row 2b 'ext4 image with its first 4 bytes patched to "PLUG": write' "refused (exit 2), file unchanged"
row 2c 'loop device of that ext4 image: write' "refused (exit 2), device unchanged"

plug_refused() { # OUT RC WHAT
  if [[ $2 != 2 ]]; then
    bad "$3: write exit $2, want 2 (refused): $(first_line "$1")"
  elif ! said "$1" 'destroy-data-on'; then
    bad "$3: refused but the message does not say how to override (--destroy-data-on): $(first_line "$1")"
  fi
}

case2() {
  local d=$WORK/c2.$1 rc dev i
  mkdir -p "$d"
  begin 2a
  {
    echo "PLUGINS enabled: autosave, spellcheck, git"
    for ((i = 0; i < 2000; i++)); do echo "line $i of a configuration file someone cares about"; done
  } >"$d/plugins.txt"
  snap "$d/plugins.txt"
  pp "$d/w-text" 60 write "$d/plugins.txt" --witness "$WITNESS" --count 16
  plug_refused "$d/w-text" $? "text file"
  end

  begin 2b
  truncate -s 32M "$d/ext4.img"
  mkfs.ext4 -q -F "$d/ext4.img" >/dev/null 2>&1
  printf PLUG | dd of="$d/ext4.img" conv=notrunc status=none
  [[ $(blkid -o value -s TYPE "$d/ext4.img") == ext4 ]] || bad "setup: blkid no longer says ext4"
  cp "$d/ext4.img" "$d/ext4-loop.img"
  snap "$d/ext4.img"
  pp "$d/w-img" 60 write "$d/ext4.img" --witness "$WITNESS" --count 16
  plug_refused "$d/w-img" $? "ext4 image file"
  end

  if ((!IS_ROOT)); then
    skip_row 2c "$NOT_ROOT (a loop device)"
    return
  fi
  begin 2c
  if attach_loop "$d/ext4-loop.img"; then
    dev=$LOOP
    snap "$dev"
    pp "$d/w-loop" 60 write "$dev" --witness "$WITNESS" --count 16
    plug_refused "$d/w-loop" $? "ext4 loop device $dev"
    unchanged
    detach_loop "$dev"
  else
    bad "setup: losetup failed"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 3: a mounted file system cannot be reached through its loop device's backing
# file or through a loop device stacked on it, even with --destroy-data-on.

row 3a "backing file of a mounted loop device: write --destroy-data-on" "refused (exit 2), fs unchanged"
row 3b "loop device stacked on a mounted loop device: write --destroy-data-on" "refused (exit 2), fs unchanged"
row 3c "(control) the mounted loop device itself: write --destroy-data-on" "refused (exit 2), fs unchanged"

# mounted_fs DIR : ext4 image DIR/fs.img on a loop device mounted at DIR/mnt, holding
# DIR/mnt/data; sets FS_IMG FS_DEV FS_MNT FS_SUM.
mounted_fs() {
  FS_IMG=$1/fs.img FS_MNT=$1/mnt
  truncate -s 32M "$FS_IMG"
  mkfs.ext4 -q -F "$FS_IMG" >/dev/null 2>&1 || return 1
  attach_loop "$FS_IMG" || return 1
  FS_DEV=$LOOP
  do_mount "$FS_MNT" "$FS_DEV" || return 1
  head -c 4M /dev/urandom >"$FS_MNT/data"
  sync
  FS_SUM=$(sum "$FS_MNT/data")
}
# fs_intact : unmounts, e2fsck -fn must be clean, the data file must read back the same
# after a read-only remount; then detaches the loop device.
fs_intact() {
  checked 2
  do_umount "$FS_MNT"
  if ! e2fsck -fn "$FS_DEV" >"$FS_MNT.fsck" 2>&1; then
    mark_lost "e2fsck of the mounted fs found damage: $(grep -v '^e2fsck' "$FS_MNT.fsck" | head -1 | cut -c1-120)"
  fi
  if do_mount "$FS_MNT" -o ro,noload "$FS_DEV" 2>/dev/null; then
    [[ $(sum "$FS_MNT/data") == "$FS_SUM" ]] || mark_lost "the file in the mounted fs changed"
    do_umount "$FS_MNT"
  else
    mark_lost "the fs no longer mounts"
  fi
  detach_loop "$FS_DEV"
}

case3() {
  local d=$WORK/c3.$1 rc top
  if ((!IS_ROOT)); then
    skip_row 3a "$NOT_ROOT (loop devices and a mount)"
    skip_row 3b "$NOT_ROOT (loop devices and a mount)"
    skip_row 3c "$NOT_ROOT (loop devices and a mount)"
    return
  fi
  begin 3a
  mkdir -p "$d/a"
  if mounted_fs "$d/a"; then
    pp "$d/w-backing" 60 write "$FS_IMG" --witness "$WITNESS" --destroy-data-on "$FS_IMG" --count 64
    rc=$?
    [[ $rc == 2 ]] || bad "backing file of mounted $FS_DEV: write exit $rc, want 2: $(first_line "$d/w-backing")"
    fs_intact
  else
    bad "setup: could not make a mounted ext4 on a loop device"
  fi
  end

  begin 3b
  mkdir -p "$d/b"
  if mounted_fs "$d/b" && attach_loop "$FS_DEV" && top=$LOOP; then
    pp "$d/w-stacked" 60 write "$top" --witness "$WITNESS" --destroy-data-on "$top" --count 64
    rc=$?
    [[ $rc == 2 ]] || bad "$top stacked on mounted $FS_DEV: write exit $rc, want 2: $(first_line "$d/w-stacked")"
    detach_loop "$top"
    fs_intact
  else
    bad "setup: could not stack a loop device on a mounted one"
  fi
  end

  begin 3c
  mkdir -p "$d/c"
  if mounted_fs "$d/c"; then
    pp "$d/w-mounted" 60 write "$FS_DEV" --witness "$WITNESS" --destroy-data-on "$FS_DEV" --count 64
    rc=$?
    [[ $rc == 2 ]] || bad "mounted $FS_DEV: write exit $rc, want 2: $(first_line "$d/w-mounted")"
    fs_intact
  else
    bad "setup: could not make a mounted ext4 on a loop device"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 4: a mistyped device path must not test RAM; a RAM target must say so.

row 4a "write /dev/sdzz (no such device)" "exit 2 naming /dev/sdzz, nothing created in /dev"
row 4b "bench /dev/sdzz (no such device)" "exit 2 naming /dev/sdzz, nothing created in /dev"
row 4c "write and verify a file on tmpfs (/dev/shm)" "a RAM warning in both outputs"

dev_files() { find /dev -maxdepth 1 -type f 2>/dev/null | sort | sha256sum | cut -c1-64; }

missing_device() { # OUT RC WHAT
  local created=$3
  if [[ -e /dev/sdzz ]]; then
    bad "$created created /dev/sdzz ($(stat -c '%F, %s bytes' /dev/sdzz))"
    # It did not exist before this command (checked by the caller): ours to remove.
    [[ -f /dev/sdzz ]] && rm -f /dev/sdzz
  fi
  if [[ $2 != 2 ]]; then
    bad "$created: exit $2, want 2: $(first_line "$1")"
  elif ! said "$1" '/dev/sdzz'; then
    bad "$created: the error does not name /dev/sdzz: $(first_line "$1")"
  elif ! said "$1" 'not exist|no such|missing'; then
    bad "$created: the error does not say the device does not exist: $(first_line "$1")"
  fi
}

case4() {
  local d=$WORK/c4.$1 t=$SHM_PREFIX.c4.$1 before rc
  mkdir -p "$d"
  if ((!IS_ROOT)); then
    skip_row 4a "$NOT_ROOT (only root can create files in /dev)"
    skip_row 4b "$NOT_ROOT (only root can create files in /dev)"
  elif [[ -e /dev/sdzz ]]; then
    skip_row 4a "/dev/sdzz exists on this machine: the case needs a name that does not"
    skip_row 4b "/dev/sdzz exists on this machine: the case needs a name that does not"
  else
    EXTRA+=(/dev/sdzz)
    begin 4a
    before=$(dev_files)
    pp "$d/w-sdzz" 60 write /dev/sdzz --witness "$WITNESS" --size 4M --count 16
    rc=$?
    checked
    [[ $(dev_files) == "$before" ]] || mark_lost "a regular file appeared in /dev"
    missing_device "$d/w-sdzz" "$rc" "write /dev/sdzz"
    end

    begin 4b
    before=$(dev_files)
    pp "$d/b-sdzz" 120 bench /dev/sdzz --quick --size 4M --only sweep --time-per-size 10ms --sweep-sizes 4k-4k
    rc=$?
    checked
    [[ $(dev_files) == "$before" ]] || mark_lost "a regular file appeared in /dev"
    missing_device "$d/b-sdzz" "$rc" "bench /dev/sdzz"
    end
  fi

  begin 4c
  pp "$d/w-shm" 60 write "$t" --witness "$WITNESS" --size 4M --count 64
  rc=$?
  [[ $rc == 0 ]] || bad "write to tmpfs exit $rc, want 0 (with a warning): $(first_line "$d/w-shm")"
  said "$d/w-shm" '\bRAM\b' || bad "write to a tmpfs file printed no RAM warning"
  snap "$t"
  pp "$d/v-shm" 60 verify "$t" --witness "$WITNESS"
  rc=$?
  [[ $rc == 0 ]] || bad "verify of the tmpfs file exit $rc, want 0: $(first_line "$d/v-shm")"
  said "$d/v-shm" '\bRAM\b' || bad "the verify report of a tmpfs file has no RAM warning"
  end
  rm -f "$t"
}

# ---------------------------------------------------------------------------------------
# Case 5: verify knows which drive a run belongs to.

row 5a "verify A --run <the run written to B>" "exit 2 naming A and B"
row 5b "loop device renumbered after the run: verify without --run" "PASS: the run found by identity"

case5() {
  local d=$WORK/c5.$1 rc runb
  mkdir -p "$d"
  begin 5a
  if pp "$d/w-a" 60 write "$d/drive-A" --witness "$WITNESS" --size 4M --count 500 &&
    pp "$d/w-b" 60 write "$d/drive-B" --witness "$WITNESS" --size 4M --count 500 --json -q &&
    runb=$(json_field "$d/w-b" run_id) && [[ -n $runb ]]; then
    snap "$d/drive-A" "$d/drive-B"
    pp "$d/v-a" 60 verify "$d/drive-A" --witness "$WITNESS"
    rc=$?
    [[ $rc == 0 ]] || bad "control: verify A (its own run) exit $rc, want 0: $(first_line "$d/v-a")"
    pp "$d/v-ab" 60 verify "$d/drive-A" --witness "$WITNESS" --run "$runb"
    rc=$?
    if [[ $rc != 2 ]]; then
      bad "verify A --run <B's run>: exit $rc, want 2: $(grep -m1 VERDICT "$d/v-ab" || first_line "$d/v-ab")"
    elif ! said "$d/v-ab" 'drive-A' || ! said "$d/v-ab" 'drive-B'; then
      bad "verify A --run <B's run>: refused but does not name both drives: $(first_line "$d/v-ab")"
    fi
  else
    bad "setup: write to A or B failed: $(first_line "$d/w-a") / $(first_line "$d/w-b")"
  fi
  end

  if ((!IS_ROOT)); then
    skip_row 5b "$NOT_ROOT (loop devices)"
    return
  fi
  begin 5b
  local img=$d/loop.img dev dev2 plug="" run
  truncate -s 8M "$img"
  truncate -s 1M "$d/placeholder.img"
  if attach_loop "$img" && dev=$LOOP &&
    pp "$d/w-loop" 60 write "$dev" --witness "$WITNESS" --count 500 --json -q &&
    run=$(json_field "$d/w-loop" run_id); then
    detach_loop "$dev"
    # Keep the old number busy so the drive comes back under another name, as after a
    # reboot. Another process may take it first; either way the number changes.
    if losetup "$dev" "$d/placeholder.img" 2>/dev/null; then
      plug=$dev
      LOOPS+=("$dev")
    fi
    dev2=""
    attach_loop "$img" && dev2=$LOOP
    if [[ -z $dev2 || $dev2 == "$dev" ]]; then
      bad "setup: could not attach the image under a new loop number (got '$dev2')"
    else
      snap "$img"
      pp "$d/v-loop" 60 verify "$dev2" --witness "$WITNESS"
      rc=$?
      [[ $rc == 0 ]] || bad "written as $dev, verify $dev2: exit $rc, want 0: $(grep -m1 VERDICT "$d/v-loop" || first_line "$d/v-loop")"
      [[ $rc != 1 ]] || grep -q "$run" "$d/v-loop" || bad "verify $dev2 checked another drive's run, not $run"
      detach_loop "$dev2"
    fi
    [[ -n $plug ]] && detach_loop "$plug"
  else
    bad "setup: write to a fresh loop device failed: $(first_line "$d/w-loop")"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 6: a failed attempt must not leave a file that blocks the retry.

row 6a "write with the witness unreachable, then retry" "fails, retry succeeds"
row 6b "write --witness HOST without a port, then retry" "exit 2 naming the port, retry succeeds"
row 6c "write --size 100, then retry" "exit 2, retry succeeds"
row 6d "write --size 16M on a 4 MiB file system (ENOSPC), then retry" "fails, retry succeeds"
row 6e "Ctrl-C (SIGINT) during preallocation, then retry" "stops, retry succeeds"

# retry OUT TARGET [write args] : the same write against a good witness must succeed.
retry() {
  local out=$1 t=$2 rc
  shift 2
  pp "$out" 120 write "$t" --witness "$WITNESS" "$@"
  rc=$?
  [[ $rc == 0 ]] || bad "retry exit $rc, want 0 ($([[ -e $t ]] && echo "leftover $(stat -c %s "$t") bytes" || echo "no leftover")): $(first_line "$out")"
}

case6() {
  local d=$WORK/c6.$1 rc dead
  mkdir -p "$d"
  echo "a neighbour's file" >"$d/neighbour"

  begin 6a
  snap "$d/neighbour"
  dead=127.0.0.1:$(free_port)
  pp "$d/w-dead" 60 write "$d/t-dead" --witness "$dead" --size 4M --count 64
  rc=$?
  [[ $rc != 0 ]] || bad "write with no witness at $dead exit 0"
  retry "$d/r-dead" "$d/t-dead" --size 4M --count 64
  end

  begin 6b
  snap "$d/neighbour"
  pp "$d/w-noport" 60 write "$d/t-noport" --witness 127.0.0.1 --size 4M --count 64
  rc=$?
  if [[ $rc != 2 ]]; then
    bad "--witness without port: exit $rc, want 2"
  elif ! said "$d/w-noport" 'port'; then
    bad "--witness without port: the error does not mention the port: $(first_line "$d/w-noport")"
  fi
  retry "$d/r-noport" "$d/t-noport" --size 4M --count 64
  end

  begin 6c
  snap "$d/neighbour"
  pp "$d/w-size" 60 write "$d/t-size" --witness "$WITNESS" --size 100 --count 64
  rc=$?
  [[ $rc == 2 ]] || bad "--size 100: exit $rc, want 2"
  retry "$d/r-size" "$d/t-size" --size 4M --count 64
  end

  if ((!IS_ROOT)); then
    skip_row 6d "$NOT_ROOT (mounts a 4 MiB tmpfs)"
  else
    begin 6d
    mkdir -p "$d/tiny"
    if do_mount "$d/tiny" -t tmpfs -o size=4M tmpfs; then
      echo "a neighbour's file" >"$d/tiny/neighbour"
      snap "$d/tiny/neighbour"
      pp "$d/w-full" 60 write "$d/tiny/t" --witness "$WITNESS" --size 16M --count 64
      rc=$?
      [[ $rc != 0 ]] || bad "write of 16 MiB on a 4 MiB file system exit 0"
      retry "$d/r-full" "$d/tiny/t" --size 1M --count 64
      unchanged
      do_umount "$d/tiny"
    else
      bad "setup: could not mount a tmpfs"
    fi
    end
  fi

  begin 6e
  snap "$d/neighbour"
  local pid i size="" t0 waited
  # A background job of a script starts with SIGINT ignored; a user's Ctrl-C reaches a
  # process that has the default action, so restore it before exec.
  python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$PLUGPULL" write "$d/t-int" --witness "$WITNESS" --size 256M --duration 10s >"$d/w-int" 2>"$d/w-int.err" &
  pid=$!
  for ((i = 0; i < 500; i++)); do
    [[ -e $d/t-int ]] && break
    sleep 0.01
  done
  sleep "0.0$((RANDOM % 5))"
  size=$(stat -c %s "$d/t-int" 2>/dev/null)
  t0=$SECONDS
  kill -INT "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  waited=$((SECONDS - t0))
  why "note: SIGINT when the file had ${size:-no} bytes of 268435456; write exited $rc"
  ((waited <= 5)) || bad "write took ${waited}s to stop after SIGINT"
  retry "$d/r-int" "$d/t-int" --size 256M --count 64
  end
  rm -f "$d"/t-*
}

# ---------------------------------------------------------------------------------------
# Case 7: idle sockets must not starve the witness.

row 7a "1,100 idle sockets to listen: a writer and a fetch" "both succeed within ${FLOOD_DEADLINE}s, ≤ $THREAD_LIMIT witness threads"
row 7b "the same against a keyed witness (--key-file)" "both succeed within ${FLOOD_DEADLINE}s, ≤ $THREAD_LIMIT witness threads"

flood() { # ROW DIR [key file]
  local d=$2 key=${3:-} kargs=() rc run hpid threads rss log i
  ((${#key})) && kargs=(--key-file "$key")
  begin "$1"
  mkdir -p "$d"
  ulimit -n 8192 2>/dev/null
  if ! start_witness "$d/wd" "$d/listen.err" "${kargs[@]}"; then
    bad "setup: listen did not start: $(tail -1 "$d/listen.err")"
    stop_pid "$W_PID"
    end
    return
  fi
  local wpid=$W_PID waddr=$W_ADDR
  if ! pp "$d/w0" 60 write "$d/t0" --witness "$waddr" "${kargs[@]}" --size 4M --count 64 --json -q ||
    ! run=$(json_field "$d/w0" run_id); then
    bad "setup: first write failed: $(first_line "$d/w0")"
    stop_pid "$wpid"
    end
    return
  fi
  log=$d/wd/$run.acklog
  snap "$log" "$d/t0"
  python3 "$HELPER" hold "$waddr" 1100 "$d/held" &
  hpid=$!
  PIDS+=("$hpid")
  for ((i = 0; i < 300; i++)); do
    [[ -s $d/held ]] && break
    sleep 0.1
  done
  sleep 0.5
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$wpid/status" 2>/dev/null)
  rss=$(awk '/^VmRSS:/ {print int($2/1024)}' "/proc/$wpid/status" 2>/dev/null)
  why "note: $(cut -d' ' -f1 "$d/held" 2>/dev/null) sockets held, witness threads ${threads:-?}, RSS ${rss:-?} MiB"
  [[ -n $threads && $threads -le $THREAD_LIMIT ]] ||
    bad "witness has ${threads:-?} threads with 1,100 idle sockets open (limit $THREAD_LIMIT)"
  pp "$d/w1" "$FLOOD_DEADLINE" write "$d/t1" --witness "$waddr" "${kargs[@]}" --size 4M --count 64
  rc=$?
  [[ $rc == 0 ]] || bad "writer during the flood: exit $rc$([[ $rc == 124 ]] && echo " (no answer in ${FLOOD_DEADLINE}s)"): $(first_line "$d/w1")"
  pp "$d/f1" "$FLOOD_DEADLINE" fetch --witness "$waddr" "${kargs[@]}" --run "$run" -o "$d/fetched"
  rc=$?
  [[ $rc == 0 ]] || bad "fetch during the flood: exit $rc$([[ $rc == 124 ]] && echo " (no answer in ${FLOOD_DEADLINE}s)"): $(first_line "$d/f1")"
  stop_pid "$hpid"
  stop_pid "$wpid"
  end
}

case7() {
  local d=$WORK/c7.$1
  flood 7a "$d/plain"
  mkdir -p "$d/keyed"
  head -c 32 /dev/urandom | base64 >"$d/keyed/witness.key"
  flood 7b "$d/keyed" "$d/keyed/witness.key"
}

# ---------------------------------------------------------------------------------------
# Case 8: acks no writer can produce must be refused, not stored.

row 8a "forged ack: 0 sectors" "refused, nothing stored"
row 8b "forged ack: 2^32-1 sectors" "refused, nothing stored"
row 8c "forged ack: offset not sector-aligned" "refused, nothing stored"
row 8d "forged ack: stream beyond the run's streams" "refused, nothing stored"

# forged_acks ADDR RUN OUT : acks the witness holds for RUN (0 if it holds no such run).
stored_acks() {
  if pp "$3" 60 fetch --witness "$1" --run "$2" -o "$3.log" --json; then
    json_field "$3" acks
  elif said "$3" 'no run'; then
    echo 0
  else
    echo "?"
  fi
}

case8() {
  local d=$WORK/c8.$1 run rest n kind r
  mkdir -p "$d"
  if ! start_witness "$d/wd" "$d/listen.err"; then
    stop_pid "$W_PID"
    setup_failed "listen did not start" 8a 8b 8c 8d
    return
  fi
  local wpid=$W_PID waddr=$W_ADDR real
  if ! pp "$d/w0" 60 write "$d/t0" --witness "$waddr" --size 4M --count 64 --json -q ||
    ! real=$(json_field "$d/w0" run_id) ||
    ! pp "$d/f0" 60 fetch --witness "$waddr" --run "$real" -o "$d/real.log" ||
    ! helper descriptor "$d/real.log" >"$d/desc.json"; then
    stop_pid "$wpid"
    setup_failed "a real run to copy the descriptor from failed: $(first_line "$d/w0")" 8a 8b 8c 8d
    return
  fi
  # Control: the raw client's valid ack is stored, so a refusal below means something.
  read -r run rest < <(helper forge "$waddr" "$d/desc.json" valid)
  n=$(stored_acks "$waddr" "$run" "$d/f-valid")
  local control=""
  [[ $rest == durable:1 && $n == 1 ]] || control="control: a valid forged-client ack got '$rest' and $n stored, want durable:1 and 1"
  for r in 8a:zero 8b:huge 8c:unaligned 8d:stream; do
    kind=${r#*:}
    begin "${r%%:*}"
    snap "$d/wd/$real.acklog" "$d/t0"
    [[ -n $control ]] && bad "$control"
    read -r run rest < <(helper forge "$waddr" "$d/desc.json" "$kind")
    n=$(stored_acks "$waddr" "$run" "$d/f-$kind")
    [[ $rest == error:* ]] || bad "$kind ack: the witness answered '$rest', want an Error"
    [[ $n == 0 ]] || bad "$kind ack: the witness stored $n acks for the forged run"
    end
  done
  stop_pid "$wpid"
}

# ---------------------------------------------------------------------------------------

say "binary: $PLUGPULL ($("$PLUGPULL" --version 2>&1)), runs per case: $RUNS, root: $IS_ROOT, work: $WORK"
START=$SECONDS
for c in $CASES; do
  declare -F "case$c" >/dev/null || {
    echo "hostile.sh: no case $c (cases: 1 to 8)" >&2
    exit 2
  }
  for ((run_no = 1; run_no <= RUNS; run_no++)); do "case$c" "$run_no"; done
done

# The table.
broken=0
rev=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
echo "Hostile cases, $(date -u '+%Y-%m-%d %H:%M UTC'): $("$PLUGPULL" --version 2>&1) at $PLUGPULL (built $(date -u -r "$PLUGPULL" '+%Y-%m-%d %H:%M UTC')), script from tree $rev, kernel $(uname -r), root: $([[ $IS_ROOT == 1 ]] && echo yes || echo no), $RUNS runs per case, $((SECONDS - START)) s"
echo
echo "| case | runs | expected | outcome | nothing lost |"
echo "|------|-----:|----------|---------|--------------|"
for r in "${ROWS[@]}"; do
  c=${r:0:1}
  [[ " $CASES " == *" $c "* ]] || continue
  if [[ -n ${SKIPPED[$r]:-} ]]; then
    echo "| $r ${TITLE[$r]} | 0 | ${EXPECT[$r]} | skipped: ${SKIPPED[$r]} | - |"
    continue
  fi
  if ((NRUNS[$r] == 0)); then
    outcome="BROKEN: never ran"
    broken=1
  elif ((NBAD[$r])); then
    outcome="BROKEN ${NBAD[$r]}/${NRUNS[$r]}"
    broken=1
  else
    outcome=ok
  fi
  if ((NLOST[$r])); then
    lost="NO: ${NLOST[$r]}/${NRUNS[$r]} runs"
    broken=1
  elif ((NCHECKED[$r])); then
    lost="yes (${NCHECKED[$r]} checks)"
  else
    lost="-"
  fi
  echo "| $r ${TITLE[$r]} | ${NRUNS[$r]} | ${EXPECT[$r]} | $outcome | $lost |"
done
echo
echo "Reasons and notes (count of runs):"
for r in "${ROWS[@]}"; do
  [[ -n ${WHY[$r]:-} ]] || continue
  printf '%s' "${WHY[$r]}" | sort | uniq -c | sort -rn | while read -r n line; do
    echo "- $r ($n): $line"
  done
done
exit $broken
