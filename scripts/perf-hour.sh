#!/usr/bin/env bash
# A long writer run ("an hour-long writer run on /dev/shm: RSS flat, ack rate
# flat, witness log size as computed"). Starts a witness (log on /dev/shm) and one
# `plugpull write` for SECONDS, and every SAMPLE seconds prints one line: elapsed time,
# the writer's RSS, acks durable at the witness (`plugpull runs --json`) and the ack rate
# over the last interval, the run's ack log size and its bytes per ack. At the end:
# RSS and ack rate of the first sample against the last and against the extremes, and
# the log size against what its encoding predicts: every frame of the log is walked and
# its size recomputed from its own header fields with the formulas of docs/protocol.md
# (Acks 0x12: 8 + 13 + 40 B per ack; CompactAcks 0x09: 8 + 1 + 28 + 22 per lane + the
# bit stream + 13 B per exception), and the bytes per ack are split into those parts;
# PackedAcks 0x0B frames (log format 3, what new logs hold) have varint fields, so they
# are summed by their length and their acks counted from their `count`.
#
# Usage: scripts/perf-hour.sh [SECONDS] [SAMPLE_SECONDS] [DIR] [-- EXTRA WRITE ARGS]
#   defaults: 3600 s, 60 s, /dev/shm; e.g. scripts/perf-hour.sh 300 30 /dev/shm -- --batch 8
#   PLUGPULL=path/to/plugpull uses that binary instead of building target/release.
# The witness log (format 3) grows by about 2-3.5 bytes per ack for this sequential run
# (docs/performance.md, "Witness log size"): at 300k acks/s an hour is 2-4 GB. The run
# is stopped early (and says so) when the witness directory's file system has less than
# MIN_FREE_MB (default 2048) free.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-3600}
SAMPLE=${2:-60}
DIR=${3:-/dev/shm}
shift $(($# < 3 ? $# : 3))
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
MIN_FREE_MB=${MIN_FREE_MB:-2048}

if [ -z "${PLUGPULL:-}" ]; then
    cargo build --release -q --bin plugpull
    PLUGPULL=target/release/plugpull
fi
WORK=$(mktemp -d "$DIR/plugpull-hour.XXXX")
WIT=$(mktemp -d /dev/shm/plugpull-hour-witness.XXXX)
WPID= PID=
# (|| true: under set -e a failed kill of a process that already ended would end the trap
# before the witness is stopped and its log removed.)
trap '[ -z "$PID" ] || kill $PID 2>/dev/null || true; [ -z "$WPID" ] || kill $WPID 2>/dev/null || true; rm -rf "$WORK" "$WIT"' EXIT
PORT=$((20000 + RANDOM % 20000))
"$PLUGPULL" listen --bind 127.0.0.1:$PORT --dir "$WIT/w" 2>"$WIT/listen.log" &
WPID=$!
for _ in $(seq 50); do grep -q . "$WIT/listen.log" 2>/dev/null && break; sleep 0.1; done

"$PLUGPULL" write "$WORK/t.img" --witness 127.0.0.1:$PORT --size 256M --duration "${SECS}s" \
    --json --quiet "${EXTRA[@]}" >"$WORK/summary.json" 2>"$WORK/write.err" &
PID=$!
echo "# plugpull long writer run, $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r), target $DIR ($(stat -f -c %T "$DIR")), ${SECS}s, sample every ${SAMPLE}s, extra args: ${EXTRA[*]:-none}"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%8s %10s %14s %10s %14s %10s\n' elapsed_s rss_kib durable_acks acks_per_s log_bytes B_per_ack

durable() {
    "$PLUGPULL" runs --witness 127.0.0.1:$PORT --json 2>/dev/null |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"]; print(max([x["acks"] for x in r] or [0]))' 2>/dev/null || echo 0
}
logbytes() { stat -c %s "$WIT"/w/*.acklog 2>/dev/null | head -1 || echo 0; }

t0=$(date +%s.%N) prev_n=0 prev_t=$t0 stopped=
samples=()
while kill -0 $PID 2>/dev/null; do
    sleep "$SAMPLE"
    kill -0 $PID 2>/dev/null || break
    now=$(date +%s.%N)
    rss=$(awk '/VmRSS/{print $2}' /proc/$PID/status 2>/dev/null || echo 0)
    n=$(durable)
    lb=$(logbytes)
    read -r el rate bpa < <(python3 -c "n,pn,t,pt,t0,lb=$n,$prev_n,$now,$prev_t,$t0,$lb; print(f'{t-t0:.0f} {(n-pn)/(t-pt):.0f} {lb/max(n,1):.2f}')")
    printf '%8s %10s %14s %10s %14s %10s\n' "$el" "$rss" "$n" "$rate" "$lb" "$bpa"
    samples+=("$el $rss $rate")
    prev_n=$n prev_t=$now
    free_mb=$(df -Pm "$WIT" | awk 'NR==2{print $4}')
    if [ "$free_mb" -lt "$MIN_FREE_MB" ]; then
        echo "# STOPPED EARLY at ${el}s: only ${free_mb} MB free for the witness log"
        kill -TERM $PID
        stopped=1
        break
    fi
done
wait $PID || true
n=$(durable)
lb=$(logbytes)
LOG=$(ls "$WIT"/w/*.acklog | head -1)
echo "# writer summary: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["records_acked"], "acked,", round(j["records_per_s"]), "per s, witness durable", j["witness_durable"])' "$WORK/summary.json" 2>/dev/null || echo unavailable)"
python3 - "$n" "$lb" "$LOG" "${samples[@]}" <<'EOF'
import sys
n, lb, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rows = [tuple(float(x) for x in s.split()) for s in sys.argv[4:]]
# Walk every frame (docs/protocol.md: u32 len, u8 type, payload, u32 crc) and recompute
# each ack frame's size from its own header fields.
def bits(v):
    return v.bit_length()
parts = {"other": 0, "packed": 0, "frame": 0, "header": 0, "lanes": 0, "bitstream": 0, "exceptions": 0, "entries": 0}
acks = frames = mismatched = packed = 0
with open(log, "rb") as f:
    while True:
        head = f.read(5)
        if len(head) < 5:
            break
        ln, ty = int.from_bytes(head[:4], "little"), head[4]
        if ty == 0x09:
            h = f.read(20)
            count, exc, lanes = int.from_bytes(h[8:12], "little"), int.from_bytes(h[12:16], "little"), h[16]
            per_ack = bits(lanes - 1) + sum(w & 0x7F for w in h[17:20])
            pred = 28 + 22 * lanes + -(-count * per_ack // 8) + 13 * exc
            mismatched += pred != ln - 1
            parts["frame"] += 9; parts["header"] += 28; parts["lanes"] += 22 * lanes
            parts["bitstream"] += -(-count * per_ack // 8); parts["exceptions"] += 13 * exc
            acks += count; frames += 1
            f.seek(ln - 1 - 20 + 4, 1)
        elif ty == 0x12:
            h = f.read(12)
            count = int.from_bytes(h[8:12], "little")
            pred = 12 + 40 * count
            mismatched += pred != ln - 1
            parts["frame"] += 9; parts["header"] += 12; parts["entries"] += 40 * count
            acks += count; frames += 1
            f.seek(ln - 1 - 12 + 4, 1)
        elif ty == 0x0B:
            # PackedAcks (log format 3): varint fields, so its size is taken from its
            # length, not recomputed; its acks are counted from its `count`.
            payload = f.read(ln - 1)
            def varint(at):
                v = shift = 0
                while True:
                    b = payload[at]; at += 1
                    v |= (b & 0x7F) << shift; shift += 7
                    if b < 0x80:
                        return v, at
            _, at = varint(0)
            count, at = varint(at)
            parts["packed"] += 8 + ln
            acks += count; frames += 1; packed += 1
            f.seek(4, 1)
        else:
            parts["other"] += 8 + ln
            f.seek(ln - 1 + 4, 1)
pred = sum(parts.values())
print(f"# witness log: {lb} bytes for {n} acks = {lb / max(n, 1):.2f} B/ack; summed over its frames "
      f"(Acks and CompactAcks recomputed from their own fields, {packed} PackedAcks frames by their "
      f"length): {pred} bytes ({'equal' if pred == lb else 'DIFFERENT'}), {acks} acks in "
      f"{frames} ack frames ({acks / max(frames, 1):.0f} per frame), {mismatched} frames whose size "
      f"disagrees with the formula")
print("# per ack: " + ", ".join(f"{k} {v / max(acks, 1):.3f} B" for k, v in parts.items() if v))
if len(rows) >= 2:
    rss = [r[1] for r in rows]
    rate = [r[2] for r in rows]
    print(f"# RSS first {rss[0]:.0f} KiB, last {rss[-1]:.0f} KiB (last/first {rss[-1] / rss[0]:.3f}), min {min(rss):.0f}, max {max(rss):.0f}")
    print(f"# ack rate first {rate[0]:.0f}/s, last {rate[-1]:.0f}/s (last/first {rate[-1] / max(rate[0], 1):.3f}), min {min(rate):.0f}, max {max(rate):.0f}")
EOF
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$stopped" ] || echo "# the run was shortened by the free-space guard, not by SECONDS"
