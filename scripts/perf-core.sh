#!/usr/bin/env bash
# The core performance benchmark. Prints each figure and its ratio to raw
# I/O measured in the same run on the same target:
#   1. writer acks/s vs a plain O_DIRECT pwrite+fdatasync loop, on the root disk and on /dev/shm
#   2. verify of a 1 GiB region vs dd O_DIRECT sequential read of the same file
#   3. writer memory (RSS) early and late in a long run
# Usage: scripts/perf-core.sh [SECONDS_PER_WRITE_TEST] [ROOT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
ROOT_DIR=${2:-/var/tmp}
cargo build --release -q --bin plugpull --example rawloop
PP=target/release/plugpull
RAW=target/release/examples/rawloop
WORK=$(mktemp -d "$ROOT_DIR/plugpull-perf.XXXX")
SHM=$(mktemp -d /dev/shm/plugpull-perf.XXXX)
trap 'kill $WPID 2>/dev/null || true; rm -rf "$WORK" "$SHM"' EXIT
PORT=$((20000 + RANDOM % 20000))
# The witness keeps its log on /dev/shm: in a real test it is another machine, and its
# fsyncs must not compete with the disk under test.
$PP listen --bind 127.0.0.1:$PORT --dir "$SHM/witness" 2>/dev/null &
WPID=$!
sleep 0.5

ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

echo "# plugpull core benchmark, $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r)"
# Alternate raw loop and writer three times per place (the machine is shared and noisy)
# and compare medians.
med() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
for place in root shm; do
    dir=$WORK; [ $place = shm ] && dir=$SHM
    raws=(); pps=()
    for i in 1 2 3; do
        raws+=("$($RAW "$dir/raw.img" $((256 << 20)) "$SECS")")
        pps+=("$($PP write "$dir/pp.img" --witness 127.0.0.1:$PORT --size 256M --duration "${SECS}s" --json --quiet | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["records_per_s"], 1))')")
    done
    raw=$(med "${raws[@]}"); pp=$(med "${pps[@]}")
    echo "write 4KiB O_DIRECT+fdatasync on $place: raw loop ${raws[*]} ops/s, plugpull ${pps[*]} acked records/s; medians $raw vs $pp, ratio $(ratio "$pp" "$raw")"
done

# Verify of a 1 GiB region: fill it with 1 MiB records, then alternate dd and verify
# three times each (the disk is shared and noisy) and compare medians.
$PP write "$WORK/v.img" --witness 127.0.0.1:$PORT --size 1G --record-size 1M --count 1024 --quiet --json >/dev/null
$PP fetch --witness 127.0.0.1:$PORT --target "$WORK/v.img" -o "$WORK/v.acklog" 2>/dev/null
dd_t=(); v_t=()
for i in 1 2 3; do
    t0=$(date +%s.%N); dd if="$WORK/v.img" of=/dev/null bs=1M iflag=direct status=none; t1=$(date +%s.%N)
    dd_t+=("$(python3 -c "print($t1-$t0)")")
    t0=$(date +%s.%N); $PP verify "$WORK/v.img" --acks "$WORK/v.acklog" --quiet >/dev/null; t1=$(date +%s.%N)
    v_t+=("$(python3 -c "print($t1-$t0)")")
done
dd_mbs=$(python3 -c "print(f'{1024/$(med "${dd_t[@]}"):.0f}')")
v_mbs=$(python3 -c "print(f'{1024/$(med "${v_t[@]}"):.0f}')")
echo "verify 1 GiB region (median of 3): dd iflag=direct bs=1M $dd_mbs MiB/s, plugpull verify $v_mbs MiB/s (whole command), ratio $(ratio "$v_mbs" "$dd_mbs")"

# Memory: RSS of a writer on /dev/shm after 2 s and at the end of a long run.
long=$((SECS * 3))
$PP write "$SHM/mem.img" --witness 127.0.0.1:$PORT --size 64M --duration "${long}s" --quiet &
P=$!
sleep 2; rss1=$(awk '/VmRSS/{print $2}' /proc/$P/status)
sleep $((long - 4)); rss2=$(awk '/VmRSS/{print $2}' /proc/$P/status)
wait $P
echo "writer RSS on /dev/shm: ${rss1} KiB after 2 s, ${rss2} KiB after $((long - 2)) s, ratio $(ratio "$rss2" "$rss1")"
