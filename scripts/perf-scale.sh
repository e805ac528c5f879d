#!/usr/bin/env bash
# Scale benchmark (issue 15), verify half. Prints each figure with its reference from the
# same run:
#   1. verify of a synthetic run of ACKS acks (512 B records; examples/synthacks.rs: an
#      ack log plus the target an honest drive holds after it, both on /dev/shm), with
#      sequential and random placement: peak RSS and wall time (/usr/bin/time -v);
#   2. verify read speed vs dd iflag=direct on the same file, 4 KiB and 512 B records
#      (one lap over the region, so every record is read), median of 3 alternating runs;
#   3. scripts/perf-writer.sh (the writer half), when present.
# Usage: scripts/perf-scale.sh [ACKS] [SLOTS] [ROOT_DIR] [SPEED_MIB]
#   used: scripts/perf-scale.sh 100000000 2097152 /var/tmp 1024
# Disk: ACKS * 40 B of log and SLOTS * 512 B of target on /dev/shm at once (100 M acks:
# 4 GB + 1 GiB), deleted after each placement; 2 * SPEED_MIB on ROOT_DIR for the speed test.
set -euo pipefail
cd "$(dirname "$0")/.."
ACKS=${1:-100000000}
SLOTS=${2:-2097152}
ROOT_DIR=${3:-/var/tmp}
SPEED_MIB=${4:-1024}
cargo build --release -q --bin plugpull --example synthacks
PP=${PP:-target/release/plugpull}
SYN=target/release/examples/synthacks
SHM=$(mktemp -d /dev/shm/plugpull-scale.XXXX)
WORK=$(mktemp -d "$ROOT_DIR/plugpull-scale.XXXX")
trap 'rm -rf "$SHM" "$WORK"' EXIT
med() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
now() { date +%s.%N; }
py() { python3 -c "print($1)"; }

echo "# plugpull scale benchmark, $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r), $(git rev-parse --short HEAD)"

# 1. Memory and time at scale.
for placement in sequential random; do
    t0=$(now)
    $SYN "$SHM/t.img" "$SHM/t.acklog" "$ACKS" "$SLOTS" "$placement" 512 2>/dev/null
    t1=$(now)
    /usr/bin/time -v "$PP" verify "$SHM/t.img" --acks "$SHM/t.acklog" --quiet \
        >"$SHM/out" 2>"$SHM/time" || true
    rss=$(awk -F': ' '/Maximum resident/{print $2}' "$SHM/time")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$SHM/time")
    echo "verify $ACKS acks, 512 B, $placement over $SLOTS slots: peak RSS $rss KiB ($(py "round($rss*1024/$ACKS,2)") B/ack), wall $wall; log $(stat -c %s "$SHM/t.acklog") B, made in $(py "round($t1-$t0,1)") s; $(cat "$SHM/out")"
    rm -f "$SHM/t.img" "$SHM/t.acklog"
done

# 2. Read speed against dd on the same file (one lap: every record is read and judged).
for rec in 4096 512; do
    slots=$((SPEED_MIB * 1048576 / rec))
    $SYN "$WORK/s.img" "$WORK/s.acklog" "$slots" "$slots" sequential "$rec" 2>/dev/null
    dd_t=(); v_t=()
    for i in 1 2 3; do
        t0=$(now); dd if="$WORK/s.img" of=/dev/null bs=1M iflag=direct status=none; t1=$(now)
        dd_t+=("$(py "$t1-$t0")")
        t0=$(now); "$PP" verify "$WORK/s.img" --acks "$WORK/s.acklog" --quiet >/dev/null; t1=$(now)
        v_t+=("$(py "$t1-$t0")")
    done
    d=$(med "${dd_t[@]}"); v=$(med "${v_t[@]}")
    echo "verify $SPEED_MIB MiB of $rec B records ($slots acks) vs dd iflag=direct bs=1M (median of 3): dd $(py "round($SPEED_MIB/$d)") MiB/s, verify $(py "round($SPEED_MIB/$v)") MiB/s (whole command), ratio $(py "f'{$d/$v:.3f}'")"
    rm -f "$WORK/s.img" "$WORK/s.acklog"
done

# 3. The writer half (issue 15, s-write), if it is there.
if [ -x scripts/perf-writer.sh ]; then
    scripts/perf-writer.sh
fi
