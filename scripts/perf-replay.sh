#!/usr/bin/env bash
# Replay's memory against verify's on the same run: for each ACKS, examples/replaymem.rs
# makes a dm-log-writes log of a one-stream sequential run (RECORD_BYTES records over
# SLOTS slots, default one lap: SLOTS = ACKS, a flush every FLUSH_EVERY records), its ack
# log and the device after the log's last entry; then `plugpull replay` of the log and
# `plugpull verify` of that final image with the same acks, each under /usr/bin/time -v:
# peak RSS, wall time, exit code, and replay's peak RSS per ack.
# Usage: scripts/perf-replay.sh [ACKS...]   (default: 100000 1000000)
#   RECORD_BYTES (512), FLUSH_EVERY (1000), SLOTS (each ACKS), ROOT_DIR (/var/tmp: log,
#   acks, image and replay's scratch image; verify's work files go to /dev/shm),
#   MEMORY (replay's --memory, default 512M; a run that does not fit is judged in parts),
#   PP=path/to/plugpull and GEN=path/to/replaymem use those binaries instead of building.
# Disk: about ACKS * (RECORD_BYTES + 512) B of log plus twice SLOTS * RECORD_BYTES on
# ROOT_DIR per size, deleted after it; the generator holds the log in RAM twice.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORD_BYTES=${RECORD_BYTES:-512}
FLUSH_EVERY=${FLUSH_EVERY:-1000}
ROOT_DIR=${ROOT_DIR:-/var/tmp}
if [ -z "${PP:-}" ] || [ -z "${GEN:-}" ]; then
    cargo build --release -q --bin plugpull --example replaymem
fi
PP=${PP:-target/release/plugpull}
GEN=${GEN:-target/release/examples/replaymem}
[ $# -gt 0 ] || set -- 100000 1000000

echo "# replay vs verify memory, $(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (+ uncommitted changes)')"
echo "# $RECORD_BYTES B records, a flush every $FLUSH_EVERY, on $ROOT_DIR; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# "RSS_KiB WALL_S EXIT" of a /usr/bin/time -v report.
measured() {
    awk -F': ' '/Maximum resident/ {r=$2} /Elapsed \(wall/ {w=$2} /Exit status/ {x=$2}
        END {n=split(w, p, ":"); s=0; for (i=1; i<=n; i++) s=s*60+p[i]; print r, s, x}' "$1"
}
printf '%-10s %14s %9s %14s %9s %13s\n' ACKS replay_KiB replay_s verify_KiB verify_s replay_B/ack
for n in "$@"; do
    d=$(mktemp -d "$ROOT_DIR/plugpull-replaymem.XXXX")
    "$GEN" "$d" "$n" "${SLOTS:-$n}" "$RECORD_BYTES" "$FLUSH_EVERY"
    /usr/bin/time -v "$PP" replay "$d/lw.log" --acks "$d/run.acklog" --scratch-dir "$d" --json \
        --memory "${MEMORY:-512M}" \
        >"$d/replay.json" 2>"$d/replay.time" || true
    /usr/bin/time -v "$PP" verify "$d/final.img" --acks "$d/run.acklog" --rehearsal --json \
        --work-dir /dev/shm >"$d/verify.json" 2>"$d/verify.time" || true
    read -r rk rs rx < <(measured "$d/replay.time")
    read -r vk vs vx < <(measured "$d/verify.time")
    printf '%-10s %14s %9s %14s %9s %13s   (exit %s/%s; replay: %s durable points, %s disagreements, %s parts; verify: %s)\n' \
        "$n" "$rk" "$rs" "$vk" "$vs" "$(python3 -c "print(round($rk*1024/$n))")" "$rx" "$vx" \
        "$(python3 -c "import json;print(json.load(open('$d/replay.json'))['durable_points'])" 2>/dev/null || echo '?')" \
        "$(python3 -c "import json;print(json.load(open('$d/replay.json'))['disagreements'])" 2>/dev/null || echo '?')" \
        "$(python3 -c "import json;print(json.load(open('$d/replay.json'))['parts'])" 2>/dev/null || echo '?')" \
        "$(python3 -c "import json;print(json.load(open('$d/verify.json'))['verdict'])" 2>/dev/null || echo '?')"
    if [ "$rx" != 0 ] || [ "$vx" != 0 ]; then
        tail -5 "$d/replay.time" "$d/verify.time" >&2
    fi
    rm -rf "$d"
done
