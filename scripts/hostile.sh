#!/usr/bin/env bash
# Red-team acceptance test of plugpull: every way a hostile tester or a careless user
# once broke one of its promises, re-run as a user would: the built binary only, shell
# commands, real files, loop devices, mounts, sockets and campaign files.
#
# plugpull promises that an honest drive is never accused, a lying drive is always
# caught, a verdict is never claimed without the evidence for it, and nothing the user
# did not name is ever overwritten. Each case below once broke one of those promises
# from the command line; the Rust tests exercise library paths, this script repeats each
# case the way it was found, checks the FIXED behaviour, repeats each case HOSTILE_RUNS
# times, checksums every file or device the case must not change before and after, and
# prints a markdown table (docs/hostile.md says what each case does and why):
#
#   | case | runs | expected | outcome (ok / BROKEN k/n) | data intact | verdict right |
#
# followed by the reason of every failed check. Exit status: 0 when every case that ran
# is ok, lost nothing and gave the right verdicts, 1 when any case is BROKEN, lost
# something or gave a wrong verdict, 2 when the script itself could not run. Cases that
# need root or hardware are skipped, with the reason.
#
# Usage: scripts/hostile.sh            (as root for the loop-device, mount and /dev cases)
# Env:   PLUGPULL=path/to/plugpull     binary under test (default target/release/plugpull,
#                                      built with `cargo build --release --locked` if missing)
#        HOSTILE_RUNS=3                repetitions of every case
#        HOSTILE_CASES="1 2 ... 18"    which cases to run (default: all, 1 to 18)
#        HOSTILE_KEEP=1                keep the work directory (command outputs) for reading
#        HOSTILE_SPARE_SERIAL=S        serial of a disk the script may overwrite (case 17d,
#                                      a drive-only campaign on real hardware); unset: skipped
#
# Safety: the script writes only to files, loop devices, mounts and witness directories
# it created itself, under one work directory (mktemp under /var/tmp), /dev/shm
# (plugpull-hostile.* files) and, for case 4, the path /dev/sdzz, which it only removes
# if it did not exist before and plugpull created it. Loop devices are remembered by the
# name `losetup --show` printed, never guessed; everything is undone on exit, also on
# Ctrl-C. As root it installs Debian's faketime (case 9) with apt-get when it is missing.
# The cases are called by name ("case$c"), which shellcheck cannot follow:
# shellcheck disable=SC2329
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
PLUGPULL=${PLUGPULL:-target/release/plugpull}
RUNS=${HOSTILE_RUNS:-3}
CASES=${HOSTILE_CASES:-1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18}
# Case 7: threads a witness may have while 1,100 idle sockets are open to it (before
# the fix: one per socket, 1,028); an event loop plus a few service threads stay far
# below.
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
# Case 9 sets the writer's clock back with Debian's faketime (LD_PRELOAD); as root the
# script installs it when it is missing, else that row is skipped with the reason.
NO_FAKETIME=""
if ! command -v faketime >/dev/null; then
  if ((IS_ROOT)) && command -v apt-get >/dev/null; then
    echo "hostile.sh: installing faketime (apt-get install faketime) for case 9" >&2
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q faketime >/dev/null 2>&1 ||
      { timeout 300 apt-get update -q >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q faketime >/dev/null 2>&1; }
  fi
  if ! command -v faketime >/dev/null; then
    NO_FAKETIME="faketime is not installed (Debian package faketime)"
    ((IS_ROOT)) || NO_FAKETIME+="; as root the script installs it"
  fi
fi

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
# and `unchanged` (or `mark_lost`) decide the "data intact" column, `verdict_checked`
# and `vbad` (a wrong verdict: it also fails the repetition) the "verdict right" column.

ROWS=()
declare -A TITLE EXPECT NRUNS NBAD NLOST NCHECKED NVCHECKED NVBAD SKIPPED WHY
CUR=""
CUR_BAD=0
CUR_LOST=0
CUR_VBAD=0
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
  NVCHECKED[$1]=0
  NVBAD[$1]=0
  WHY[$1]=""
}
begin() {
  CUR=$1
  CUR_BAD=0
  CUR_LOST=0
  CUR_VBAD=0
  SNAP_FILES=()
  SNAP_SUM=()
  NRUNS[$1]=$((NRUNS[$1] + 1))
  say "case $1 run ${NRUNS[$1]}: ${TITLE[$1]}"
}
why() { # run ids, the work directory and run numbers are elided, so runs read alike
  local m=$*
  m=${m//$WORK/\$WORK}
  # shellcheck disable=SC2016 # $WORK is literal text here
  m=$(sed -E 's/[0-9a-f]{32}/<run>/g; s#\$WORK/c([0-9]+)\.[0-9]+#$WORK/c\1.N#g' <<<"$m")
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
# A verdict (PASS, FAIL, INCONCLUSIVE, CUT-NOT-PROVEN, a refusal to judge, a campaign
# cycle's recorded verdict) was compared with the right one.
verdict_checked() { NVCHECKED[$CUR]=$((NVCHECKED[$CUR] + ${1:-1})); }
vbad() { # the verdict was wrong: fails the repetition too
  CUR_VBAD=1
  bad "wrong verdict: $*"
}
end() {
  unchanged
  ((CUR_BAD)) && NBAD[$CUR]=$((NBAD[$CUR] + 1))
  ((CUR_LOST)) && NLOST[$CUR]=$((NLOST[$CUR] + 1))
  ((CUR_VBAD)) && NVBAD[$CUR]=$((NVBAD[$CUR] + 1))
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
# Python helpers: frame surgery on ack logs, a raw protocol client for forged acks, a
# writer whose clock is behind and verdict notes, a holder of idle sockets, a TCP proxy
# that holds back or cuts the witness's replies, an HTTP "smart plug" and an agent
# without a key. Frame layout: docs/protocol.md ("Frames"); the agent protocol:
# docs/campaign.md ("The agent protocol").

HELPER=$WORK/helper.py
cat >"$HELPER" <<'PY'
import datetime, json, os, resource, socket, struct, sys, threading, time, zlib

ACKS, HELLO, WELCOME, DURABLE, HEARTBEAT, BYE, ERROR = 0x12, 0x10, 0x11, 0x13, 0x14, 0x15, 0x16
FETCH, FETCH_END = 0x20, 0x22

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

def clockback(addr, desc_file, n, behind_s):
    """A writer whose clock is behind_s seconds behind: Hello for a new run of the same
    drive (the descriptor of a real run, a fresh run id, started_at behind), n acks over
    the real run's first n records, stamped behind, then the Bye of a finished writer.
    None of its records reaches the drive: a drive that lost all of them. Prints the run
    id and the reply to the acks."""
    d = json.load(open(desc_file))
    run = os.urandom(16).hex()
    d["run_id"] = run
    then = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=behind_s)
    d["started_at"] = then.isoformat()
    s_ = d["settings"]
    rec = s_["record_bytes_min"]
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(frame(HELLO, struct.pack("<HH", 1, 0) + json.dumps(d).encode()))
    ty, p = read_frame(s)
    if ty != WELCOME:
        print(run, "hello-refused:%s" % (p.decode(errors="replace") if ty == ERROR else ty))
        return
    t0 = time.time_ns() - behind_s * 1000000000
    per = max(1, (s_["region_bytes"] // s_["streams"]) // rec)
    entries = b"".join(
        struct.pack("<HHIQQQQ", 0, 0, rec // 512, i + 1, s_["region_offset"] + (i % per) * rec,
                    t0 + i * 100000, t0 + i * 100000 + 50000)
        for i in range(n))
    s.sendall(frame(ACKS, struct.pack("<QI", 0, n) + entries))
    r = reply(s)
    s.sendall(frame(BYE, b"writer finished: it wrote what it was asked to"))
    time.sleep(0.2)
    s.close()
    print(run, r)

def note(addr, run, target, verdict):
    """Records a verdict note (Fetch selector 4) as a verify would, with the given target
    string (JSON escapes in it are decoded first: \\u001b is ESC). Prints what the
    witness answered: fetchend:N, error:MESSAGE or closed."""
    target = json.loads('"%s"' % target)
    n = {"run_id": run, "verdict": verdict, "failing": 0, "target": target,
         "verified_at": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(frame(FETCH, b"\x04" + json.dumps(n).encode()))
    ty, p = read_frame(s)
    if ty == FETCH_END:
        print("fetchend:%d" % struct.unpack("<Q", p)[0])
    elif ty == ERROR:
        print("error:" + p.decode(errors="replace").replace("\n", " "))
    else:
        print("closed" if ty is None else "frame:0x%02x" % ty)

def proxy(port, target, mode, arg, marker):
    """A TCP proxy in front of the witness. Mode delay: the first connection's first reply
    is held back arg seconds; marker is written when its first request bytes arrived,
    marker.released when the reply is let through. Mode cut: the first connection's
    replies are cut off after arg bytes (both sides closed). Later connections pass."""
    th, tp = target.rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(64)
    open(marker + ".ready", "w").write("ready\n")
    first = [True]
    lock = threading.Lock()
    def close(*socks):
        for x in socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            x.close()
    def up(c, w, special):
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                if special:
                    open(marker, "w").write("%f\n" % time.time())
                    special = False
                w.sendall(b)
        except OSError:
            pass
        try:
            w.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    def down(w, c, special):
        sent = 0
        try:
            while True:
                b = w.recv(65536)
                if not b:
                    break
                if special and mode == "delay":
                    time.sleep(float(arg))
                    open(marker + ".released", "w").write("%f\n" % time.time())
                    special = False
                if special and mode == "cut" and sent + len(b) >= int(arg):
                    c.sendall(b[: int(arg) - sent])
                    open(marker, "w").write("cut after %s bytes\n" % arg)
                    break
                c.sendall(b)
                sent += len(b)
        except OSError:
            pass
        close(c, w)
    def conn(c):
        with lock:
            special, first[0] = first[0], False
        try:
            w = socket.create_connection((th, int(tp)), timeout=10)
            w.settimeout(None)
        except OSError:
            c.close()
            return
        threading.Thread(target=up, args=(c, w, special), daemon=True).start()
        down(w, c, special)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()

def plug(port, mode, log):
    """An HTTP "smart plug". Mode html: every request answered 200 with an HTML login page
    (a captive portal in front of the plug). Mode trickle: the same reply, one byte a
    second. Mode shelly: a working Shelly Gen1 relay ({"ison": ...}). Each request line
    is appended to log."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(16)
    open(log, "a").write("ready\n")
    state = [False]
    def serve(c):
        c.settimeout(10)
        try:
            req = c.recv(4096)
            line = req.split(b"\r\n")[0].decode(errors="replace")
            with open(log, "a") as f:
                f.write("request %s %s\n" % (time.time(), line))
            if mode == "shelly":
                if "turn=on" in line:
                    state[0] = True
                elif "turn=off" in line:
                    state[0] = False
                body = json.dumps({"ison": state[0]}).encode()
                ctype = b"application/json"
            else:
                body = b"<!DOCTYPE html><html><head><title>Login</title></head><body>Please log in to continue</body></html>"
                ctype = b"text/html; charset=utf-8"
            resp = (b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
            if mode == "trickle":
                for i in range(len(resp)):
                    c.sendall(resp[i : i + 1])
                    time.sleep(1)
            else:
                c.sendall(resp)
        except OSError:
            pass
        finally:
            c.close()
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()

def agent(port, run, wait, *extra):
    """A peer without the agent key, speaking plugpull-agent/1 in plain JSON lines, each
    message on a fresh connection: boot as "guest", acking, then a boot report from host
    "attacker" with verdict PASS; with "as-guest", the same PASS report from "guest"
    after it. Connecting is retried for wait seconds in all. Prints one line per message:
    the reply's type, "closed" (the controller closed the connection without an answer)
    or "no-listener"."""
    def report(host):
        return {"format": "plugpull-agent/1", "type": "boot", "host": host, "previous": {
            "cycle": 1, "run_id": run, "verdict": "PASS", "summary": "all 5000 acked records intact",
            "counts": {"intact": 5000}, "loss_window": None, "ordering_holes": 0,
            "dead_device": None, "acked_records": 5000, "last_acked": None,
            "reattach_ms": 3.0, "unsafe_shutdowns_delta": None, "error": None}}
    msgs = [("boot", {"format": "plugpull-agent/1", "type": "boot", "host": "guest", "previous": None}),
            ("acking", {"format": "plugpull-agent/1", "type": "acking", "host": "guest",
                        "cycle": 1, "run_id": run, "acked": 5000}),
            ("attacker-pass", report("attacker"))]
    if "as-guest" in extra:
        msgs.append(("guest-pass", report("guest")))
    deadline = time.time() + float(wait)
    for name, m in msgs:
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
                break
            except OSError:
                if time.time() > deadline:
                    s = None
                    break
                time.sleep(0.05)
        if s is None:
            print(name, "no-listener")
            continue
        try:
            s.sendall((json.dumps(m) + "\n").encode())
            line = s.makefile().readline()
            print(name, json.loads(line)["type"] if line else "closed")
        except (OSError, ValueError) as e:
            print(name, "closed")
        s.close()
    sys.stdout.flush()

cmd = sys.argv[1]
if cmd == "hold":
    hold(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "clockback":
    clockback(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
elif cmd == "note":
    note(*sys.argv[2:6])
elif cmd == "proxy":
    proxy(*sys.argv[2:7])
elif cmd == "plug":
    plug(*sys.argv[2:5])
elif cmd == "agent":
    agent(*sys.argv[2:])
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
  pp "$d/v-whole" 120 verify "$d/copy" --acks "$d/log" --rehearsal
  rc=$?
  verdict_checked
  [[ $rc == 1 ]] || vbad "control: whole log on the copy gave exit $rc, want 1 (FAIL): $(first_line "$d/v-whole")"
  pp "$d/v-honest" 120 verify "$t" --acks "$d/log" --rehearsal
  rc=$?
  verdict_checked
  [[ $rc == 0 ]] || vbad "control: whole log on the drive gave exit $rc, want 0 (PASS): $(first_line "$d/v-honest")"
  local at
  at=$(helper flip "$d/log" "$d/flipped")
  snap "$d/flipped"
  # The drive itself (honest) with the damaged log: the acks in the damaged frame cannot
  # be checked, nothing was lost: INCONCLUSIVE (3), never PASS and never FAIL.
  pp "$d/v-flip" 120 verify "$t" --acks "$d/flipped" --rehearsal
  rc=$?
  verdict_checked
  if [[ $rc != 3 ]]; then
    vbad "bit flipped at byte $at, honest drive: verify exit $rc, want 3: $(grep -m1 VERDICT "$d/v-flip" || first_line "$d/v-flip")"
  elif ! said "$d/v-flip" 'damag|corrupt'; then
    bad "bit flipped at byte $at, honest drive: exit 3 but the output does not name the damage"
  fi
  # The copy (it lost records) with the damaged log: FAIL if the acks still readable
  # prove a loss, else INCONCLUSIVE; never PASS, and the damage named either way.
  pp "$d/v-flip-copy" 120 verify "$d/copy" --acks "$d/flipped" --rehearsal
  rc=$?
  verdict_checked
  if [[ $rc != 1 && $rc != 3 ]]; then
    vbad "bit flipped at byte $at, lossy copy: verify exit $rc, want 1 or 3: $(grep -m1 VERDICT "$d/v-flip-copy" || first_line "$d/v-flip-copy")"
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
  pp "$d/v-cut" 120 verify "$d/copy" --acks "$d/cut" --rehearsal
  rc=$?
  verdict_checked
  [[ $rc == 2 || $rc == 3 ]] ||
    vbad "log cut to its first fifth: verify exit $rc, want 2 or 3: $(grep -m1 VERDICT "$d/v-cut" || first_line "$d/v-cut")"
  end

  begin 1d
  helper splice "$d/log" "$d/spliced" >/dev/null
  snap "$d/spliced" "$d/copy"
  pp "$d/v-splice" 120 verify "$d/copy" --acks "$d/spliced" --rehearsal
  rc=$?
  verdict_checked
  [[ $rc == 2 || $rc == 3 ]] ||
    vbad "acks spliced out of the log: verify exit $rc, want 2 or 3: $(grep -m1 VERDICT "$d/v-splice" || first_line "$d/v-splice")"
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
  pp "$d/v-shm" 60 verify "$t" --witness "$WITNESS" --rehearsal
  rc=$?
  verdict_checked
  [[ $rc == 0 ]] || vbad "verify of the tmpfs file exit $rc, want 0: $(first_line "$d/v-shm")"
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
    pp "$d/v-a" 60 verify "$d/drive-A" --witness "$WITNESS" --rehearsal
    rc=$?
    verdict_checked 2
    [[ $rc == 0 ]] || vbad "control: verify A (its own run) exit $rc, want 0: $(first_line "$d/v-a")"
    pp "$d/v-ab" 60 verify "$d/drive-A" --witness "$WITNESS" --run "$runb" --rehearsal
    rc=$?
    if [[ $rc != 2 ]]; then
      vbad "verify A --run <B's run>: exit $rc, want 2 (no verdict): $(grep -m1 VERDICT "$d/v-ab" || first_line "$d/v-ab")"
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
      pp "$d/v-loop" 60 verify "$dev2" --witness "$WITNESS" --rehearsal
      rc=$?
      verdict_checked
      [[ $rc == 0 ]] || vbad "written as $dev, verify $dev2: exit $rc, want 0: $(grep -m1 VERDICT "$d/v-loop" || first_line "$d/v-loop")"
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
# Helpers of cases 9 to 18.

forget_pid() { # PID : a process that was waited for; forgotten, never signalled again
  local i keep=()
  for i in "${PIDS[@]}"; do [[ $i != "$1" ]] && keep+=("$i"); done
  PIDS=("${keep[@]}")
}
forget_loop() { # DEV : a loop device that is no longer ours (the kernel let it go)
  local d keep=()
  for d in "${LOOPS[@]}"; do [[ $d != "$1" ]] && keep+=("$d"); done
  LOOPS=("${keep[@]}")
}
# run_out OUT SECONDS CMD... : like pp, for any command (faketime, python).
run_out() {
  local out=$1 secs=$2
  shift 2
  timeout --kill-after=5 "$secs" "$@" >"$out" 2>"$out.err"
}
jq_py() { # FILE PYTHON-EXPRESSION over j (the JSON in FILE) : prints its value
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}
wait_file() { # FILE SECONDS : whether FILE appeared within SECONDS
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.05
  done
  return 1
}
# start_bg LOG CMD... : starts a helper in the background, remembered for cleanup;
# sets BG_PID.
start_bg() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  BG_PID=$!
  PIDS+=("$BG_PID")
}
# A whole-host campaign file: host_campaign FILE AGENT_PORT WITNESS_PORT AGENT_LINES POWER_LINES
# [CAMPAIGN_LINES] [BOOT_TIMEOUT]: one cycle, results beside the file, short timeouts.
host_campaign() {
  cat >"$1" <<TOML
[campaign]
cycles = 1
results = "results.jsonl"
delay = "10ms"
off = "10ms"
seed = 3
wait_timeout = "1s"
${6:-}

[target]
kind = "host"

[witness]
bind = "127.0.0.1:$3"

[agent]
listen = "127.0.0.1:$2"
boot_timeout = "${7:-3s}"
$4

[power]
$5
TOML
}
# cycle_verdicts RESULTS : the verdict of every cycle line, space-separated.
cycle_verdicts() {
  [[ -f $1 ]] || return 0
  python3 -c '
import json, sys
out = []
for l in open(sys.argv[1]).read().splitlines()[1:]:
    try:
        out.append(json.loads(l).get("verdict", "?"))
    except ValueError:
        out.append("torn")
print(" ".join(out))' "$1"
}

# ---------------------------------------------------------------------------------------
# Case 9: the latest run is the one the witness heard of last, whatever the writer's
# clock says.

row 9a "writer clock one hour behind (faketime -f -1h) for run 2, the drive loses all of run 2: verify TARGET, runs" "FAIL (exit 1) judging run 2; runs lists run 2 first"
row 9b "the same, run 2 sent by a raw client whose clock is an hour behind" "FAIL (exit 1) judging run 2; runs lists run 2 first"

# latest_judged ROW-DIR TARGET WANT-RUN WITNESS : verify TARGET (default: the latest run)
# must judge WANT-RUN and say FAIL; runs must list WANT-RUN first.
latest_judged() {
  local d=$1 t=$2 want=$3 w=$4 rc got verdict first
  mkdir -p "$d"
  pp "$d/verify" 120 verify "$t" --witness "$w" --json
  rc=$?
  got=$(jq_py "$d/verify" 'j["run"]["run_id"]')
  verdict=$(json_field "$d/verify" verdict)
  verdict_checked
  if [[ $got != "$want" ]]; then
    vbad "verify $(basename "$t") judged run ${got:-?} ($verdict, exit $rc), not run 2 $want: $(grep -v '^\s*$' "$d/verify.err" | head -1 | cut -c1-120)"
  elif [[ $rc != 1 || $verdict != FAIL ]]; then
    vbad "verify $(basename "$t") judged run 2 but said $verdict (exit $rc), want FAIL (exit 1): $(json_field "$d/verify" summary | cut -c1-160)"
  fi
  if pp "$d/runs" 60 runs --witness "$w" --json; then
    first=$(jq_py "$d/runs" 'j["runs"][0]["run_id"]')
    [[ $first == "$want" ]] || bad "runs lists ${first:-?} first, not run 2 $want"
  else
    bad "runs failed: $(first_line "$d/runs")"
  fi
}

case9() {
  local d=$WORK/c9.$1 rc run1 run2 t rest s1 s2
  mkdir -p "$d"
  if ! start_witness "$d/wd" "$d/listen.err"; then
    stop_pid "$W_PID"
    setup_failed "listen did not start" 9a 9b
    return
  fi
  local wpid=$W_PID waddr=$W_ADDR
  if [[ -n $NO_FAKETIME ]]; then
    skip_row 9a "$NO_FAKETIME"
  else
    begin 9a
    t=$d/drive-a
    if ! pp "$d/w1" 60 write "$t" --witness "$waddr" --size 8M --count 1000 --json -q ||
      ! run1=$(json_field "$d/w1" run_id); then
      bad "setup: run 1 failed: $(first_line "$d/w1")"
    else
      cp "$t" "$d/after-run1"
      run_out "$d/w2" 60 faketime -f -1h "$PLUGPULL" write "$t" --witness "$waddr" --size 8M --count 1000 --json -q
      rc=$?
      run2=$(json_field "$d/w2" run_id)
      if [[ $rc != 0 || -z $run2 ]]; then
        bad "setup: run 2 under faketime exited $rc: $(first_line "$d/w2")"
      else
        # The writer's clock really was behind: run 2 started an hour "before" run 1.
        pp "$d/runs0" 60 runs --witness "$waddr" --json
        s1=$(jq_py "$d/runs0" "[r['started_at'] for r in j['runs'] if r['run_id']=='$run1'][0]")
        s2=$(jq_py "$d/runs0" "[r['started_at'] for r in j['runs'] if r['run_id']=='$run2'][0]")
        if python3 -c 'import datetime as D,sys; p=lambda s: D.datetime.fromisoformat(s[:19]); sys.exit(0 if (p(sys.argv[1])-p(sys.argv[2])).total_seconds() > 3000 else 1)' "$s1" "$s2" 2>/dev/null; then
          why "note: run 1 started_at $(cut -c1-19 <<<"$s1"), run 2 (faketime) $(cut -c1-19 <<<"$s2")"
        else
          bad "setup: faketime did not set the writer's clock back (run 1 $s1, run 2 $s2)"
        fi
        # The drive loses all of run 2: its contents go back to what they were after run 1.
        dd if="$d/after-run1" of="$t" conv=notrunc,fsync status=none
        snap "$t"
        latest_judged "$d/a" "$t" "$run2" "$waddr"
      fi
    fi
    end
  fi

  begin 9b
  t=$d/drive-b
  if ! pp "$d/wb1" 60 write "$t" --witness "$waddr" --size 8M --count 1000 --json -q ||
    ! run1=$(json_field "$d/wb1" run_id) ||
    ! pp "$d/fb1" 60 fetch --witness "$waddr" --run "$run1" -o "$d/run1.log" ||
    ! helper descriptor "$d/run1.log" >"$d/desc.json"; then
    bad "setup: run 1 failed: $(first_line "$d/wb1")"
  else
    snap "$t"
    read -r run2 rest < <(helper clockback "$waddr" "$d/desc.json" 1000 3600)
    if [[ $rest != durable:1000 ]]; then
      bad "setup: the raw client's run 2 got '$rest', want durable:1000"
    else
      mkdir -p "$d/b"
      latest_judged "$d/b" "$t" "$run2" "$waddr"
    fi
  fi
  end
  stop_pid "$wpid"
}

# ---------------------------------------------------------------------------------------
# Case 10: nobody without the agent key can report a campaign cycle.

row 10a "keyed controller: a peer without the key sends boot, acking, boot \"attacker\" PASS" "each closed unanswered, nothing recorded, exit not 0"
row 10b "controller without [agent] key_file: the same peer" "controller refuses to start, nothing recorded"
row 10c "unkeyed agents allowed (loopback): boot \"attacker\" PASS, then \"guest\" PASS the witness cannot back" "attacker refused; recorded ERROR, not PASS; exit not 0"

# forged_campaign DIR AGENT_LINES PEER_WAIT [as-guest] : runs the controller of
# DIR/campaign.toml while the helper plays the peer (trying to connect for PEER_WAIT
# seconds); sets FC_RC (controller exit), FC_REPLIES, FC_VERDICTS.
forged_campaign() {
  local d=$1 ap wp cpid
  ap=$(free_port)
  wp=$(free_port)
  host_campaign "$d/campaign.toml" "$ap" "$wp" "$2" 'driver = "command"
scope = "host"
off = "true"
on = "true"
timeout = "5s"'
  "$PLUGPULL" campaign --config "$d/campaign.toml" --json >"$d/campaign" 2>"$d/campaign.err" &
  cpid=$!
  PIDS+=("$cpid")
  helper agent "$ap" 00112233445566778899aabbccddeeff "$3" "${4:-}" >"$d/agent.out" 2>&1
  FC_REPLIES=$(tr '\n' ' ' <"$d/agent.out")
  local i
  for ((i = 0; i < 300; i++)); do
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$cpid" 2>/dev/null; then
    bad "the controller still ran 30 s after the peer was done"
    kill -KILL "$cpid" 2>/dev/null
  fi
  wait "$cpid"
  FC_RC=$?
  forget_pid "$cpid"
  FC_VERDICTS=$(cycle_verdicts "$d/results.jsonl")
  why "note: replies to the peer: $FC_REPLIES; controller exit $FC_RC; recorded: ${FC_VERDICTS:-nothing}"
}

case10() {
  local d=$WORK/c10.$1
  mkdir -p "$d/a" "$d/b" "$d/c"

  begin 10a
  head -c 32 /dev/urandom | base64 >"$d/a/agent.key"
  forged_campaign "$d/a" 'key_file = "agent.key"' 10
  [[ $FC_REPLIES == "boot closed acking closed attacker-pass closed " ]] ||
    bad "a peer without the key was answered: $FC_REPLIES"
  said "$d/a/campaign" 'agent without a key' || bad "the controller did not log the refusal of the unkeyed peer"
  verdict_checked
  [[ -z $FC_VERDICTS ]] || vbad "cycles were recorded: $FC_VERDICTS"
  [[ $FC_RC != 0 ]] || bad "the campaign exited 0"
  end

  begin 10b
  forged_campaign "$d/b" '' 2
  [[ $FC_RC == 2 ]] || bad "controller without key_file exited $FC_RC, want 2 (refused to start): $(first_line "$d/b/campaign")"
  said "$d/b/campaign" 'key_file' || bad "the refusal does not name key_file: $(first_line "$d/b/campaign")"
  verdict_checked
  [[ -z $FC_VERDICTS ]] || vbad "cycles were recorded: $FC_VERDICTS"
  end

  begin 10c
  forged_campaign "$d/c" 'allow_unauthenticated_agents = true' 10 as-guest
  [[ $FC_REPLIES == *"attacker-pass refused"* ]] ||
    bad "the boot report from \"attacker\" was not refused: $FC_REPLIES"
  said "$d/c/campaign" 'refused a boot report' || bad "the controller did not log the refused report"
  verdict_checked
  if [[ " $FC_VERDICTS " == *" PASS "* ]]; then
    vbad "a forged PASS was recorded: $FC_VERDICTS"
  elif [[ $FC_VERDICTS != ERROR ]]; then
    vbad "recorded '$FC_VERDICTS', want one ERROR (a PASS the witness holds no acks for)"
  fi
  [[ $FC_RC != 0 ]] || bad "the campaign exited 0"
  end
}

# ---------------------------------------------------------------------------------------
# Case 11: a file system that a hand-kept list of signatures does not know is still
# data.

row 11a "minix v3 (mkfs.minix -3) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11b "bfs (mkfs.bfs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11c "cramfs (mkfs.cramfs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11d "squashfs (mksquashfs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11e "jfs (mkfs.jfs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11f "reiserfs (mkfs.reiserfs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11g "nilfs2 (mkfs.nilfs2) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11h "f2fs (mkfs.f2fs) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"
row 11i "exfat (mkfs.exfat) on a loop device: write, bench" "both refused (exit 2, --destroy-data-on), bytes unchanged"

# make_fs FS IMAGE SRC-DIR : makes the file system in IMAGE (sparse), or fails.
make_fs() {
  local img=$2 src=$3
  rm -f "$img"
  case $1 in
    minix) truncate -s 8M "$img" && mkfs.minix -3 "$img" ;;
    bfs) truncate -s 8M "$img" && mkfs.bfs "$img" ;;
    cramfs) mkfs.cramfs "$src" "$img" && truncate -s 8M "$img" ;;
    squashfs) mksquashfs "$src" "$img" -quiet -noappend && truncate -s 8M "$img" ;;
    jfs) truncate -s 32M "$img" && mkfs.jfs -q "$img" ;;
    reiserfs) truncate -s 64M "$img" && mkfs.reiserfs -q -f "$img" ;;
    nilfs2) truncate -s 160M "$img" && mkfs.nilfs2 -q "$img" ;;
    f2fs) truncate -s 64M "$img" && mkfs.f2fs -q "$img" ;;
    exfat) truncate -s 16M "$img" && mkfs.exfat "$img" ;;
  esac >/dev/null 2>&1
}

case11() {
  local d=$WORK/c11.$1 r fs tool dev rc kind
  mkdir -p "$d/src"
  echo "a file someone keeps" >"$d/src/kept.txt"
  for r in 11a:minix:mkfs.minix 11b:bfs:mkfs.bfs 11c:cramfs:mkfs.cramfs 11d:squashfs:mksquashfs \
    11e:jfs:mkfs.jfs 11f:reiserfs:mkfs.reiserfs 11g:nilfs2:mkfs.nilfs2 11h:f2fs:mkfs.f2fs 11i:exfat:mkfs.exfat; do
    IFS=: read -r r fs tool <<<"$r"
    if ((!IS_ROOT)); then
      skip_row "$r" "$NOT_ROOT (a loop device)"
      continue
    fi
    if ! command -v "$tool" >/dev/null; then
      skip_row "$r" "$tool is not installed"
      continue
    fi
    begin "$r"
    if ! make_fs "$fs" "$d/$fs.img" "$d/src"; then
      bad "setup: $tool failed"
    elif ! attach_loop "$d/$fs.img"; then
      bad "setup: losetup failed"
    else
      dev=$LOOP
      kind=$(blkid -p -o value -s TYPE "$dev" 2>/dev/null)
      [[ $kind == "$fs" ]] || why "note: blkid -p calls the $fs image '${kind:-nothing}'"
      snap "$dev" "$d/$fs.img"
      pp "$d/w-$fs" 60 write "$dev" --witness "$WITNESS" --count 16
      rc=$?
      if [[ $rc != 2 ]]; then
        bad "write $fs on $dev: exit $rc, want 2 (refused): $(first_line "$d/w-$fs")"
      elif ! said "$d/w-$fs" 'destroy-data-on'; then
        bad "write $fs: refused but the message does not name --destroy-data-on: $(first_line "$d/w-$fs")"
      fi
      pp "$d/b-$fs" 120 bench "$dev" --quick --size 4M --only sweep --time-per-size 10ms --sweep-sizes 4k-4k
      rc=$?
      if [[ $rc != 2 ]]; then
        bad "bench $fs on $dev: exit $rc, want 2 (refused): $(first_line "$d/b-$fs")"
      elif ! said "$d/b-$fs" 'destroy-data-on'; then
        bad "bench $fs: refused but the message does not name --destroy-data-on: $(first_line "$d/b-$fs")"
      fi
      unchanged
      detach_loop "$dev"
    fi
    end
    rm -f "$d/$fs.img"
  done
}

# ---------------------------------------------------------------------------------------
# Case 12: a target swapped while write waits for the witness changes nothing.

row 12a "new file target: a symlink to a 4 MiB user file appears at its path while the witness's Welcome is held back 2 s" "write refused (exit 2), user file unchanged"
row 12b "existing target replaced by a symlink to a 4 MiB user file while the Welcome is held back" "user file unchanged"
row 12c "loop device target detached and re-attached to an ext4 image while the Welcome is held back" "ext4 image unchanged"

# held_write DIR TARGET ACTION WRITE-ARGS... : write TARGET through a proxy that holds
# the witness's first reply (the Welcome) back 2 s; ACTION runs as soon as the Hello has
# passed the proxy, i.e. after write checked its target and before it may write.
# Sets HELD_RC.
held_write() {
  local d=$1 t=$2 action=$3 port ppid wpid
  shift 3
  HELD_RC=""
  port=$(free_port)
  rm -f "$d/mark" "$d/mark.released" "$d/mark.ready"
  start_bg "$d/proxy.log" python3 "$HELPER" proxy "$port" "$WITNESS" delay 2 "$d/mark"
  ppid=$BG_PID
  if ! wait_file "$d/mark.ready" 10; then
    bad "setup: the proxy did not start: $(head -c 200 "$d/proxy.log")"
    stop_pid "$ppid"
    return 1
  fi
  timeout --kill-after=5 60 "$PLUGPULL" write "$t" --witness "127.0.0.1:$port" "$@" >"$d/held" 2>"$d/held.err" &
  wpid=$!
  PIDS+=("$wpid")
  if wait_file "$d/mark" 20; then
    [[ -e $d/mark.released ]] && bad "setup: the Welcome was let through before the swap began"
    "$action"
  else
    bad "setup: write sent no Hello through the proxy: $(first_line "$d/held")"
  fi
  wait "$wpid"
  HELD_RC=$?
  forget_pid "$wpid"
  stop_pid "$ppid"
}

swap_new_file() { ln -s "$SWAP_USER" "$SWAP_TARGET"; }
swap_existing_file() { rm -f "$SWAP_TARGET" && ln -s "$SWAP_USER" "$SWAP_TARGET"; }
SWAP_REATTACHED=0
swap_loop() {
  SWAP_REATTACHED=0
  losetup -d "$SWAP_TARGET" 2>"$SWAP_DIR/detach.err" || why "note: losetup -d $SWAP_TARGET failed: $(head -1 "$SWAP_DIR/detach.err")"
  # Re-attach the same number to the ext4 image, trying until the Welcome is let through.
  while [[ ! -e $SWAP_DIR/mark.released ]]; do
    if losetup "$SWAP_TARGET" "$SWAP_EXT4" 2>"$SWAP_DIR/attach.err"; then
      SWAP_REATTACHED=1
      return
    fi
    sleep 0.05
  done
}

case12() {
  local d=$WORK/c12.$1 rc back
  mkdir -p "$d"
  head -c 4M /dev/urandom >"$d/user.dat"
  SWAP_USER=$d/user.dat SWAP_DIR=$d

  begin 12a
  snap "$d/user.dat"
  SWAP_TARGET=$d/new-target
  held_write "$d" "$SWAP_TARGET" swap_new_file --size 4M --count 64
  if [[ -n $HELD_RC ]]; then
    if [[ $HELD_RC != 2 ]]; then
      bad "write of a path that became a symlink meanwhile: exit $HELD_RC, want 2: $(first_line "$d/held")"
    else
      why "note: 12a refused: $(first_line "$d/held" | cut -c1-140)"
    fi
  fi
  [[ -L $SWAP_TARGET ]] || bad "the planted symlink is gone"
  end
  rm -f "$SWAP_TARGET"

  begin 12b
  SWAP_TARGET=$d/old-target
  if pp "$d/w-first" 60 write "$SWAP_TARGET" --witness "$WITNESS" --size 4M --count 64; then
    snap "$d/user.dat"
    held_write "$d" "$SWAP_TARGET" swap_existing_file --size 4M --count 64
    [[ -n $HELD_RC ]] && why "note: 12b write exited $HELD_RC: $(first_line "$d/held" | cut -c1-140)"
  else
    bad "setup: the first write failed: $(first_line "$d/w-first")"
  fi
  end
  rm -f "$SWAP_TARGET"

  if ((!IS_ROOT)); then
    skip_row 12c "$NOT_ROOT (loop devices)"
    return
  fi
  begin 12c
  truncate -s 8M "$d/blank.img"
  truncate -s 32M "$d/ext4.img"
  if mkfs.ext4 -q -F "$d/ext4.img" >/dev/null 2>&1 && attach_loop "$d/blank.img"; then
    SWAP_TARGET=$LOOP SWAP_EXT4=$d/ext4.img
    snap "$d/ext4.img"
    held_write "$d" "$SWAP_TARGET" swap_loop --count 200
    why "note: 12c write exited ${HELD_RC:-?}; re-attached $([[ $SWAP_REATTACHED == 1 ]] && echo "to the ext4 image during the window" || echo "never: $(head -1 "$d/attach.err" 2>/dev/null | cut -c1-100)")"
    sleep 0.3
    back=$(losetup -n -O BACK-FILE -l "$SWAP_TARGET" 2>/dev/null | sed 's/ *$//')
    if [[ $SWAP_REATTACHED == 1 && $back == "$d/ext4.img" ]] || [[ $back == "$d/blank.img" ]]; then
      unchanged
      detach_loop "$SWAP_TARGET"
    else
      forget_loop "$SWAP_TARGET" # the kernel detached it when write let go; not ours now
    fi
  else
    bad "setup: mkfs.ext4 or losetup failed"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 13: campaign results go only to a regular file of their own.

row 13a "campaign.results = a loop device holding ext4" "refused (exit 2), device unchanged"
row 13b "--results through a symlink to a user file" "refused (exit 2), file and link unchanged"
row 13c "--results naming a user file that is not a results file" "refused (exit 2), file unchanged"

sim_campaign() { # FILE RESULTS [CAMPAIGN-LINES] [POWER-LINES]: one cycle on the simulated drive
  cat >"$1" <<TOML
[campaign]
cycles = ${5:-1}
results = "$2"
delay = "20ms"
off = "10ms"
seed = 1
${3:-}

[target]
kind = "simdrive"
profile = "honest"
size = "8M"

[power]
driver = "simdrive"
${4:-}
TOML
}
results_refused() { # OUT RC WHAT
  if [[ $2 != 2 ]]; then
    bad "$3: campaign exit $2, want 2 (refused): $(first_line "$1")"
  elif ! said "$1" 'results'; then
    bad "$3: refused without naming the results setting: $(first_line "$1")"
  fi
}

case13() {
  local d=$WORK/c13.$1 rc dev
  mkdir -p "$d"
  echo "notes someone keeps" >"$d/notes.txt"
  ln -s notes.txt "$d/results.link"

  begin 13b
  snap "$d/notes.txt"
  sim_campaign "$d/campaign.toml" "results.jsonl"
  # Control: the same campaign with a results file of its own runs.
  pp "$d/control" 120 campaign --config "$d/campaign.toml" --results "$d/fresh.jsonl" -q
  rc=$?
  [[ $rc == 0 ]] || bad "control: the campaign with a new results file exited $rc: $(first_line "$d/control")"
  pp "$d/link" 60 campaign --config "$d/campaign.toml" --results "$d/results.link"
  results_refused "$d/link" $? "--results through a symlink"
  [[ -L $d/results.link && $(readlink "$d/results.link") == notes.txt ]] || mark_lost "the symlink was replaced"
  checked
  end

  begin 13c
  snap "$d/notes.txt"
  pp "$d/plain" 60 campaign --config "$d/campaign.toml" --results "$d/notes.txt"
  results_refused "$d/plain" $? "--results naming a user file"
  end

  if ((!IS_ROOT)); then
    skip_row 13a "$NOT_ROOT (a loop device)"
    return
  fi
  begin 13a
  truncate -s 32M "$d/ext4.img"
  if mkfs.ext4 -q -F "$d/ext4.img" >/dev/null 2>&1 && attach_loop "$d/ext4.img"; then
    dev=$LOOP
    snap "$dev"
    sim_campaign "$d/dev.toml" "$dev"
    pp "$d/dev" 60 campaign --config "$d/dev.toml"
    results_refused "$d/dev" $? "campaign.results = $dev"
    said "$d/dev" 'block device' || bad "the refusal does not say $dev is a block device: $(first_line "$d/dev")"
    unchanged
    detach_loop "$dev"
  else
    bad "setup: mkfs.ext4 or losetup failed"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 14: fetch -o never opens, follows or removes what it did not create.

row 14a "fetch -o NAME with files planted at NAME.acklog.tmp, NAME.tmp and .NAME.tmp: a whole fetch and one cut off midway" "planted files unchanged, no temporary file left"
row 14b "the same with symlinks there to a user file" "user file and the links unchanged"
row 14c "fetch -o NAME where NAME is a symlink to a user file" "refused (exit 2), link and user file unchanged"

# planted_fetch DIR RUN KIND(file|link) : plants at the temporary names of NAME, fetches
# whole, then through a proxy that cuts the reply after 1,024 bytes.
planted_fetch() {
  local d=$1 run=$2 kind=$3 name p port ppid rc left
  for name in whole cut; do
    for p in "$name.acklog.tmp" "$name.tmp" ".$name.tmp"; do
      if [[ $kind == file ]]; then
        echo "someone's file at $p" >"$d/$p"
        snap "$d/$p"
      else
        ln -s user.dat "$d/$p"
      fi
    done
  done
  pp "$d/f-whole" 60 fetch --witness "$WITNESS" --run "$run" -o "$d/whole"
  rc=$?
  [[ $rc == 0 ]] || bad "the whole fetch exited $rc: $(first_line "$d/f-whole")"
  [[ -f $d/whole && ! -L $d/whole ]] || bad "the whole fetch wrote no file at NAME"
  port=$(free_port)
  rm -f "$d/mark" "$d/mark.ready"
  start_bg "$d/proxy.log" python3 "$HELPER" proxy "$port" "$WITNESS" cut 1024 "$d/mark"
  ppid=$BG_PID
  if wait_file "$d/mark.ready" 10; then
    pp "$d/f-cut" 60 fetch --witness "127.0.0.1:$port" --run "$run" -o "$d/cut"
    rc=$?
    [[ -e $d/mark ]] || why "note: the proxy never had to cut (the reply was under 1,024 bytes)"
    [[ $rc != 0 ]] || bad "the fetch cut off midway exited 0"
    [[ ! -e $d/cut ]] || bad "the fetch cut off midway left a file at NAME ($(stat -c %s "$d/cut") bytes)"
  else
    bad "setup: the proxy did not start"
  fi
  stop_pid "$ppid"
  left=$(find "$d" -maxdepth 1 -name '.*.tmp' -newer "$d/user.dat" ! -name '.whole.tmp' ! -name '.cut.tmp' | wc -l)
  [[ $left == 0 ]] || bad "$left temporary file(s) of fetch left behind: $(find "$d" -maxdepth 1 -name '.*.tmp' -newer "$d/user.dat" -printf '%f ')"
  if [[ $kind == link ]]; then
    for name in whole cut; do
      for p in "$name.acklog.tmp" "$name.tmp" ".$name.tmp"; do
        checked
        [[ -L $d/$p && $(readlink "$d/$p") == user.dat ]] || mark_lost "the symlink $p was removed or replaced"
      done
    done
  fi
}

case14() {
  local d=$WORK/c14.$1 run rc
  mkdir -p "$d/a" "$d/b" "$d/c"
  if ! pp "$d/w" 60 write "$d/target" --witness "$WITNESS" --size 4M --count 1000 --json -q ||
    ! run=$(json_field "$d/w" run_id); then
    setup_failed "write failed: $(first_line "$d/w")" 14a 14b 14c
    return
  fi
  echo "the user's own file" >"$d/b/user.dat"
  echo "the user's own file" >"$d/c/user.dat"
  touch -d '1 minute ago' "$d/b/user.dat" "$d/c/user.dat"
  cp -p "$d/b/user.dat" "$d/a/user.dat"

  begin 14a
  planted_fetch "$d/a" "$run" file
  end

  begin 14b
  snap "$d/b/user.dat"
  planted_fetch "$d/b" "$run" link
  end

  begin 14c
  snap "$d/c/user.dat"
  ln -s user.dat "$d/c/out.log"
  pp "$d/c/f" 60 fetch --witness "$WITNESS" --run "$run" -o "$d/c/out.log"
  rc=$?
  [[ $rc == 2 ]] || bad "fetch -o onto a symlink exited $rc (want 2, refused): $(first_line "$d/c/f")"
  [[ -L $d/c/out.log ]] || bad "the symlink at NAME is gone"
  checked
  end
}

# ---------------------------------------------------------------------------------------
# Case 15: a later run's records supersede an earlier run's; they are not stale.

row 15a "run D1 over 8 MiB, then a run of 10 records at offset 4M: verify --run D1 --rehearsal" "PASS, 0 stale, 10 superseded, the later run named"

case15() {
  local d=$WORK/c15.$1 rc d1 d2 t
  mkdir -p "$d"
  t=$d/drive
  begin 15a
  if pp "$d/w1" 60 write "$t" --witness "$WITNESS" --size 8M --count 2048 --json -q &&
    d1=$(json_field "$d/w1" run_id) &&
    pp "$d/w2" 60 write "$t" --witness "$WITNESS" --offset 4M --size 1M --count 10 --json -q &&
    d2=$(json_field "$d/w2" run_id); then
    snap "$t"
    pp "$d/v" 120 verify "$t" --witness "$WITNESS" --run "$d1" --rehearsal --json
    rc=$?
    local got
    got=$(jq_py "$d/v" '"%s stale=%d superseded=%d by=%s" % (j["verdict"], j["counts"]["stale"], j["counts"]["superseded"], ",".join(j["superseded_by_runs"]))')
    verdict_checked
    [[ $rc == 0 && $got == "PASS stale=0 superseded=10 by=$d2" ]] ||
      vbad "verify --run D1 --rehearsal: exit $rc, $got; want PASS stale=0 superseded=10 by=<the later run>"
  else
    bad "setup: a write failed: $(first_line "$d/w1") / $(first_line "$d/w2")"
  fi
  end
}

# ---------------------------------------------------------------------------------------
# Case 16: acks fetched while the writer still sends are never enough for a verdict.

row 16a "log fetched mid-run (fetch -o early.log), writer killed later: verify --acks early.log" "INCONCLUSIVE (exit 3), writer_end.how still-connected"
row 16b "the same with --rehearsal" "INCONCLUSIVE (exit 3), writer_end.how still-connected"

early_verdict() { # OUT RC
  local got
  got=$(jq_py "$1" '"%s %s whole=%s" % (j["verdict"], j["writer_end"]["how"], j["ack_log"]["whole"])')
  verdict_checked
  [[ $2 == 3 && $got == "INCONCLUSIVE still-connected whole=False" ]] ||
    vbad "exit $2, $got; want exit 3, INCONCLUSIVE still-connected whole=False: $(jq_py "$1" 'j["summary"]' | cut -c1-120)"
}

case16() {
  local d=$WORK/c16.$1 t wpid rc
  mkdir -p "$d"
  t=$d/drive
  "$PLUGPULL" write "$t" --witness "$WITNESS" --size 8M --duration 30s -q >"$d/w" 2>"$d/w.err" &
  wpid=$!
  PIDS+=("$wpid")
  sleep 2
  pp "$d/f" 60 fetch --witness "$WITNESS" --target "$t" -o "$d/early.log"
  rc=$?
  sleep 1
  kill -KILL "$wpid" 2>/dev/null
  stop_pid "$wpid"
  if [[ $rc != 0 || ! -s $d/early.log ]]; then
    setup_failed "fetch during the run exited $rc: $(first_line "$d/f")" 16a 16b
    return
  fi
  begin 16a
  snap "$t" "$d/early.log"
  pp "$d/v" 120 verify "$t" --acks "$d/early.log" --json
  early_verdict "$d/v" $?
  end
  begin 16b
  snap "$t" "$d/early.log"
  pp "$d/vr" 120 verify "$t" --acks "$d/early.log" --rehearsal --json
  early_verdict "$d/vr" $?
  end
}

# ---------------------------------------------------------------------------------------
# Case 17: no PASS without evidence of a power cut, and no words claiming one.

row 17a "write --duration 3s ends by itself (no cut): verify" "INCONCLUSIVE (exit 3), \"no power cut during writing\""
row 17b "the plain words of that verdict" "claim no power cut (no \"power went out\", \"through this power cut\")"
row 17c "the same run: verify --rehearsal" "PASS (exit 0), its words without \"through this power cut\""
row 17d "drive-only campaign on a real drive whose power driver does nothing (command off = \"true\")" "CUT-NOT-PROVEN, never PASS (exit 3)"
row 17e "drive-only campaign on the simulated drive whose switch's rail never falls (a trace stuck at 12 V)" "CUT-NOT-PROVEN every cycle, never PASS (exit 3)"

cuts_proven() { # RESULTS : the cut_proven of every cycle line (True, False, None), space-separated
  python3 -c 'import json,sys; print(" ".join(str(json.loads(l).get("cut_proven")) for l in open(sys.argv[1]).read().splitlines()[1:]))' "$1" 2>/dev/null
}
# Words that say a power cut happened.
CLAIMS_CUT='through this power cut|power went out|when the power went|after the power cut|before the power went'

case17() {
  local d=$WORK/c17.$1 t rc plain
  mkdir -p "$d"
  t=$d/drive
  if ! pp "$d/w" 60 write "$t" --witness "$WITNESS" --size 8M --duration 3s -q; then
    setup_failed "write --duration 3s failed: $(first_line "$d/w")" 17a 17b 17c
  else
    begin 17a
    snap "$t"
    pp "$d/v" 120 verify "$t" --witness "$WITNESS"
    rc=$?
    pp "$d/vj" 120 verify "$t" --witness "$WITNESS" --json
    verdict_checked
    if [[ $rc != 3 ]]; then
      vbad "verify of a run that ended by itself: exit $rc, want 3: $(grep -m1 VERDICT "$d/v" || first_line "$d/v")"
    elif ! grep -q 'VERDICT: INCONCLUSIVE - no power cut during writing' "$d/v"; then
      vbad "exit 3 but the verdict does not say \"no power cut during writing\": $(grep -m1 VERDICT "$d/v")"
    fi
    [[ $(jq_py "$d/vj" 'j["writer_end"]["how"]') == finished ]] ||
      bad "writer_end.how is '$(jq_py "$d/vj" 'j["writer_end"]["how"]')', want finished"
    end

    begin 17b
    plain=$(grep -m1 '^In plain words:' "$d/v")
    if [[ -z $plain ]]; then
      bad "verify printed no plain words"
    elif grep -Eqi -- "$CLAIMS_CUT" <<<"$plain"; then
      bad "the plain words of a run without a cut speak of one ($(grep -Eoi -- "$CLAIMS_CUT" <<<"$plain" | head -1)): ${plain:0:220}"
    fi
    grep -Eqi -- "$CLAIMS_CUT" <<<"$(jq_py "$d/vj" 'j["summary"]')" &&
      bad "the verdict's summary speaks of a cut ($(jq_py "$d/vj" 'j["summary"]' | grep -Eoi -- "$CLAIMS_CUT" | head -1)): $(jq_py "$d/vj" 'j["summary"]' | cut -c1-200)"
    end

    begin 17c
    snap "$t"
    pp "$d/vr" 120 verify "$t" --witness "$WITNESS" --rehearsal
    rc=$?
    verdict_checked
    [[ $rc == 0 ]] || vbad "verify --rehearsal: exit $rc, want 0 (PASS): $(grep -m1 VERDICT "$d/vr" || first_line "$d/vr")"
    said "$d/vr" 'through this power cut' && vbad "verify --rehearsal speaks of \"this power cut\": $(grep -m1 'plain words' "$d/vr" | cut -c1-200)"
    end
  fi

  # A real drive-only campaign needs a drive found by its serial under /sys/block; loop
  # devices have none. Only a disk named by HOSTILE_SPARE_SERIAL (overwritten!) is used.
  if [[ -z ${HOSTILE_SPARE_SERIAL:-} ]]; then
    skip_row 17d "needs hardware: a spare disk with a serial number (HOSTILE_SPARE_SERIAL; it is overwritten); loop devices have no serial"
  elif ((!IS_ROOT)); then
    skip_row 17d "$NOT_ROOT (a real disk)"
  else
    begin 17d
    cat >"$d/spare.toml" <<TOML
[campaign]
cycles = 1
results = "spare.jsonl"
delay = "200ms"
off = "1s"
seed = 1
wait_timeout = "10s"

[target]
kind = "device"
serial = "$HOSTILE_SPARE_SERIAL"
reattach = "none"
destroy_data = true

[writer]
region = "64M"

[power]
driver = "command"
scope = "drive"
off = "true"
on = "true"
timeout = "5s"
TOML
    pp "$d/spare" 300 campaign --config "$d/spare.toml" -q
    rc=$?
    verdict_checked
    if [[ $rc != 3 || $(cycle_verdicts "$d/spare.jsonl") != INCONCLUSIVE || $(cuts_proven "$d/spare.jsonl") != False ]]; then
      vbad "campaign exit $rc, recorded '$(cycle_verdicts "$d/spare.jsonl")', want exit 3 and one cycle not proven (INCONCLUSIVE, cut_proven false): $(first_line "$d/spare")"
    fi
    end
  fi

  begin 17e
  python3 -c '
print("# a 12 V rail that never falls: the switch says off, the drive keeps its power")
print("TRACE 1 hz=20000 nominal_mv=12000 off=16 mv=" + ",".join(["12000"] * 200))' >"$d/stuck.trace"
  sim_campaign "$d/stuck.toml" "stuck.jsonl" "" 'traces = ["stuck.trace"]' 3
  pp "$d/stuck" 120 campaign --config "$d/stuck.toml" --json
  rc=$?
  local recorded proven
  recorded=$(cycle_verdicts "$d/stuck.jsonl")
  proven=$(cuts_proven "$d/stuck.jsonl")
  verdict_checked
  if [[ " $recorded " == *" PASS "* ]]; then
    vbad "a cut whose rail never fell was recorded PASS: $recorded"
  elif [[ $rc != 3 || $recorded != "INCONCLUSIVE INCONCLUSIVE INCONCLUSIVE" || $proven != "False False False" ]]; then
    vbad "campaign exit $rc, recorded '$recorded', cut_proven '$proven'; want exit 3, 3 cycles INCONCLUSIVE with cut_proven false"
  fi
  [[ $(jq_py "$d/stuck" 'j["cut_not_proven"]') == 3 ]] || bad "the summary counts $(jq_py "$d/stuck" 'j["cut_not_proven"]') cuts not proven, want 3"
  end
}

# ---------------------------------------------------------------------------------------
# Case 18: strings from peers are data, and a plug's answer is checked.

row 18a "verdict notes whose target holds ESC [2J or U+202E, sent by a raw client" "refused (Error), runs prints no raw ESC"
row 18b "write and verify a target whose path holds ESC [2J: runs" "runs prints it escaped (\\u{1b}), no raw ESC"
row 18c "HTTP plug answering 200 with an HTML login page (shelly-gen1, generic); control: a working Shelly answer" "not taken as switched: stops with the reply quoted, nothing recorded"
row 18d "HTTP plug trickling its reply one byte a second, power.timeout 3s" "error within the timeout (at most 5 s)"
row 18e "campaign.off of 30 days (\"720h\", \"30d\"), power.timeout \"720h\"" "refused at once (exit 2) naming the key and the limit"

plug_campaign() { # DIR FLAVOR-LINES MODE : a whole-host campaign whose switch is the helper's plug
  local d=$1 port ap wp ppid t0
  mkdir -p "$d"
  port=$(free_port)
  ap=$(free_port)
  wp=$(free_port)
  : >"$d/plug.log"
  start_bg "$d/plug.out" python3 "$HELPER" plug "$port" "$3" "$d/plug.log"
  ppid=$BG_PID
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q ready "$d/plug.log" && break
    sleep 0.05
  done
  host_campaign "$d/campaign.toml" "$ap" "$wp" 'allow_unauthenticated_agents = true' "driver = \"http\"
host = \"127.0.0.1:$port\"
scope = \"host\"
timeout = \"3s\"
$2" "" 1s
  t0=$(date +%s.%N)
  pp "$d/campaign" 60 campaign --config "$d/campaign.toml"
  PLUG_RC=$?
  PLUG_SECS=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")
  stop_pid "$ppid"
}

case18() {
  local d=$WORK/c18.$1 rc run r1 r2 t esc
  esc=$(printf '\033')
  mkdir -p "$d"
  if ! start_witness "$d/wd" "$d/listen.err"; then
    stop_pid "$W_PID"
    setup_failed "listen did not start" 18a 18b
  else
    local wpid=$W_PID waddr=$W_ADDR
    begin 18a
    if pp "$d/w" 60 write "$d/plain-target" --witness "$waddr" --size 4M --count 20 --json -q &&
      run=$(json_field "$d/w" run_id); then
      r1=$(helper note "$waddr" "$run" 'drive\u001b[2J\u001b[31mPASSED' PASS)
      r2=$(helper note "$waddr" "$run" 'drive\u202eSSAP' PASS)
      [[ $r1 == error:* ]] || bad "a note whose target holds ESC got '$r1', want an Error"
      [[ $r2 == error:* ]] || bad "a note whose target holds U+202E got '$r2', want an Error"
      pp "$d/runs" 60 runs --witness "$waddr"
      grep -q "$esc" "$d/runs" "$d/runs.err" && bad "runs printed a raw ESC"
      grep -qF "$(printf '\xe2\x80\xae')" "$d/runs" "$d/runs.err" && bad "runs printed a raw U+202E"
      grep "$run" "$d/runs" | grep -q 'not verified' || bad "runs shows a note for the run: $(grep "$run" "$d/runs" | cut -c1-160)"
    else
      bad "setup: write failed: $(first_line "$d/w")"
    fi
    end

    begin 18b
    t="$d/esc${esc}[2Jdrive"
    if pp "$d/w2" 60 write "$t" --witness "$waddr" --size 4M --count 20 -q; then
      snap "$t"
      pp "$d/v2" 60 verify "$t" --witness "$waddr" --rehearsal
      rc=$?
      [[ $rc == 0 ]] || bad "verify of the ESC target exit $rc, want 0: $(grep -m1 VERDICT "$d/v2" || first_line "$d/v2")"
      grep -q "$esc" "$d/v2" && why "note: verify's text echoes its own command-line target with the raw ESC (not a peer string)"
      said "$d/v2" 'did not record' || bad "the witness recorded verify's note whose target holds ESC: $(grep -i note "$d/v2.err" | head -1 | cut -c1-160)"
      pp "$d/runs2" 60 runs --witness "$waddr"
      grep -q "$esc" "$d/runs2" "$d/runs2.err" && bad "runs printed the descriptor's target with a raw ESC"
      grep -qF 'esc\u{1b}[2Jdrive' "$d/runs2" || bad "runs does not show the target escaped as esc\\u{1b}[2Jdrive"
    else
      bad "setup: write to a path holding ESC failed: $(first_line "$d/w2")"
    fi
    end
    rm -f "$t"
    stop_pid "$wpid"
  fi

  begin 18c
  local flavor
  for flavor in shelly-gen1 generic; do
    if [[ $flavor == generic ]]; then
      plug_campaign "$d/html-$flavor" "flavor = \"generic\"
off_request = \"GET /off\"
on_request = \"GET /on\"" html
    else
      plug_campaign "$d/html-$flavor" "flavor = \"$flavor\"" html
    fi
    grep -q '^request' "$d/html-$flavor/plug.log" || bad "$flavor: the plug got no request"
    if [[ $PLUG_RC == 0 ]]; then
      bad "$flavor: a campaign whose plug answers with an HTML page exited 0"
    elif ! said "$d/html-$flavor/campaign" 'log in|Login'; then
      bad "$flavor: exit $PLUG_RC but the error does not quote the page: $(first_line "$d/html-$flavor/campaign")"
    fi
    [[ -z $(cycle_verdicts "$d/html-$flavor/results.jsonl") ]] || bad "$flavor: cycles were recorded: $(cycle_verdicts "$d/html-$flavor/results.jsonl")"
  done
  # Control: a plug that answers as a Shelly does is taken as switched; the campaign then
  # waits for an agent that never comes, and says so.
  plug_campaign "$d/shelly" 'flavor = "shelly-gen1"' shelly
  grep -q 'turn=on' "$d/shelly/plug.log" || bad "control: the working plug got no switch request"
  said "$d/shelly/campaign" 'no run of the agent|did not come back' ||
    bad "control: with a working plug the campaign did not go on to wait for the agent: $(first_line "$d/shelly/campaign")"
  said "$d/shelly/campaign" 'answered 200 but not' && bad "control: a working Shelly answer was refused"
  end

  begin 18d
  plug_campaign "$d/trickle" 'flavor = "shelly-gen1"' trickle
  why "note: the trickling plug was given up after ${PLUG_SECS}s (power.timeout 3s)"
  grep -q '^request' "$d/trickle/plug.log" || bad "the plug got no request: $(first_line "$d/trickle/campaign")"
  [[ $PLUG_RC != 0 ]] || bad "a plug that trickles its reply was taken as switched (exit 0)"
  python3 -c "import sys; sys.exit(0 if $PLUG_SECS <= 5.0 else 1)" ||
    bad "the trickling plug held the campaign ${PLUG_SECS}s, power.timeout is 3s"
  said "$d/trickle/campaign" 'did not answer within 3s|timed out' || bad "the error does not say the plug did not answer in time: $(first_line "$d/trickle/campaign")"
  end

  begin 18e
  local what
  for what in 'off=720h' 'off=30d' 'timeout=720h'; do
    if [[ $what == off=* ]]; then
      sim_campaign "$d/long.toml" "long.jsonl" ""
      sed -i "s/^off = \"10ms\"/off = \"${what#off=}\"/" "$d/long.toml"
    else
      host_campaign "$d/long.toml" "$(free_port)" "$(free_port)" 'allow_unauthenticated_agents = true' 'driver = "command"
scope = "host"
off = "true"
on = "true"
timeout = "720h"'
      sed -i 's/results.jsonl/long.jsonl/' "$d/long.toml"
    fi
    local t0 secs
    t0=$SECONDS
    pp "$d/long-$what" 30 campaign --config "$d/long.toml"
    rc=$?
    secs=$((SECONDS - t0))
    if [[ $rc != 2 ]]; then
      bad "$what: campaign exit $rc, want 2 (refused): $(first_line "$d/long-$what")"
    elif ! said "$d/long-$what" "${what%%=*}"; then
      bad "$what: refused without naming the key: $(first_line "$d/long-$what")"
    elif [[ $what != off=30d ]] && ! said "$d/long-$what" 'limit|at most|1 ?h|3600'; then
      bad "$what: refused without naming the limit: $(first_line "$d/long-$what")"
    fi
    ((secs <= 5)) || bad "$what: the refusal took ${secs}s"
    [[ -z $(cycle_verdicts "$d/long.jsonl") ]] || bad "$what: cycles were recorded"
    why "note: $what: $(first_line "$d/long-$what" | cut -c1-120)"
    rm -f "$d/long.jsonl"
  done
  end
}

# ---------------------------------------------------------------------------------------

say "binary: $PLUGPULL ($("$PLUGPULL" --version 2>&1)), runs per case: $RUNS, root: $IS_ROOT, work: $WORK"
START=$SECONDS
for c in $CASES; do
  declare -F "case$c" >/dev/null || {
    echo "hostile.sh: no case $c (cases: 1 to 18)" >&2
    exit 2
  }
  for ((run_no = 1; run_no <= RUNS; run_no++)); do "case$c" "$run_no"; done
done

# The table.
broken=0
rev=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
echo "Hostile cases, $(date -u '+%Y-%m-%d %H:%M UTC'): $("$PLUGPULL" --version 2>&1) at $PLUGPULL (built $(date -u -r "$PLUGPULL" '+%Y-%m-%d %H:%M UTC')), script from tree $rev, kernel $(uname -r), root: $([[ $IS_ROOT == 1 ]] && echo yes || echo no), $RUNS runs per case, $((SECONDS - START)) s"
echo
echo "| case | runs | expected | outcome | data intact | verdict right |"
echo "|------|-----:|----------|---------|-------------|---------------|"
for r in "${ROWS[@]}"; do
  c=${r%%[a-z]*}
  [[ " $CASES " == *" $c "* ]] || continue
  if [[ -n ${SKIPPED[$r]:-} ]] && ((NRUNS[$r] == 0)); then
    echo "| $r ${TITLE[$r]} | 0 | ${EXPECT[$r]} | skipped: ${SKIPPED[$r]} | - | - |"
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
  if ((NVBAD[$r])); then
    vright="NO: ${NVBAD[$r]}/${NRUNS[$r]} runs"
    broken=1
  elif ((NVCHECKED[$r])); then
    vright="yes (${NVCHECKED[$r]} checks)"
  else
    vright="-"
  fi
  echo "| $r ${TITLE[$r]} | ${NRUNS[$r]} | ${EXPECT[$r]} | $outcome | $lost | $vright |"
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
