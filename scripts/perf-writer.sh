#!/usr/bin/env bash
# Writer speed against a plain C loop: acknowledged records/s of
# `plugpull write` against scripts/perf/cloop.c (pwrite + fdatasync, O_DIRECT where the
# file system takes it, 4 KiB, preallocated and written once), in the same run, on the
# same file system, for --streams 1 and 2 and --batch 1, 8 and 32. The C loop does the
# same thing without stamps, checksums or a witness: with --batch N it writes N records
# per fdatasync, with 2 streams two loops run side by side and their rates add up.
# Each figure alternates C loop and writer ROUNDS times (the machine is shared and noisy)
# and compares medians. The witness runs on loopback with its log on /dev/shm (in a real
# test it is another machine).
#
# Usage: scripts/perf-writer.sh [SECONDS_PER_RUN] [ROUNDS] [DIR]
#   defaults: 5 s, 3 rounds, /dev/shm (the pure CPU cost per record)
#   PLUGPULL=path/to/plugpull uses that binary instead of building target/release.
#   CONFIGS="1:1 2:1 1:8 1:32 2:8 2:32" (streams:batch) chooses the figures.
#   PIN=1 gives S streams S cores (taskset -c 0..S-1), for the C loop and the writer
#   alike: one stream of plugpull uses two threads (I/O and content), so without pinning
#   it already takes both cores of a 2-core machine and a second stream has nowhere to
#   run. Pinned, "2 vs 1 stream" is the scaling per core. The witness
#   is not pinned (in a real test it runs on another machine).
#   SHARED=1 gives the C loops of S streams one file, each its own 1/S share, as the
#   streams of `plugpull write --streams S` share one target (default: a file each). On
#   tmpfs a write takes the file's inode lock, so loops sharing a file wait for each
#   other as plugpull's streams do.
# On a machine shared with other work the rates move with the load (and a writer with
# several threads gets more of a busy CPU than the one-thread C loop), so each figure also
# gives the CPU time per record (user + system, from /usr/bin/time and, for the witness,
# /proc/PID/stat), which the load moves much less.
# Output: a line per figure, then "RESULT streams=S batch=B cloop=X plugpull=Y ratio=R"
# lines for other scripts (scripts/perf-scale.sh) to parse.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
ROUNDS=${2:-3}
DIR=${3:-/dev/shm}
PIN=${PIN:-0}
SHARED=${SHARED:-0}
CONFIGS=${CONFIGS:-"1:1 2:1 1:8 2:8 1:32 2:32"}
SIZE=$((256 << 20))

if [ -z "${PLUGPULL:-}" ]; then
    cargo build --release -q --bin plugpull
    PLUGPULL=target/release/plugpull
fi
WORK=$(mktemp -d "$DIR/plugpull-perfw.XXXX")
WIT=$(mktemp -d /dev/shm/plugpull-perfw-witness.XXXX)
WPID=
trap '[ -z "$WPID" ] || kill $WPID 2>/dev/null || true; rm -rf "$WORK" "$WIT"' EXIT
cc -O2 -o "$WORK/cloop" scripts/perf/cloop.c

PORT=$((20000 + RANDOM % 20000))
"$PLUGPULL" listen --bind 127.0.0.1:$PORT --dir "$WIT/witness" 2>"$WIT/listen.log" &
WPID=$!
for _ in $(seq 50); do
    grep -q . "$WIT/listen.log" 2>/dev/null && break
    sleep 0.1
done

# The command prefix that gives STREAMS streams their cores when PIN=1.
cores_for() {
    if [ "$PIN" = 1 ]; then echo taskset -c "$(seq -s, 0 $(($1 - 1)))"; fi
}
if [ "$PIN" = 1 ]; then
    for cfg in $CONFIGS; do
        [ "${cfg%:*}" -le "$(nproc)" ] || { echo "PIN=1: $cfg needs ${cfg%:*} cores, this machine has $(nproc)" >&2; exit 2; }
    done
fi

med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

# C loop: STREAMS processes at once over their own files, BATCH records per fdatasync;
# prints the sum of their rates.
cloop() {
    local streams=$1 batch=$2 pids=() i
    local share=$((SIZE / streams / 4096 * 4096)) file
    for i in $(seq "$streams"); do
        file=$WORK/c$i.img where=()
        [ "$SHARED" = 1 ] && file=$WORK/c.img where=($(((i - 1) * share)))
        /usr/bin/time -f "%U %S" -o "$WORK/c$i.cpu" $(cores_for "$streams") \
            "$WORK/cloop" "$file" "$share" "$SECS" "$batch" "${where[@]}" >"$WORK/c$i.out" 2>"$WORK/c$i.err" &
        pids+=($!)
    done
    wait "${pids[@]}"
    # rate (sum), CPU µs per record (all loops' CPU over all their records)
    paste -d' ' <(cat "$WORK"/c*.out) <(cat "$WORK"/c*.cpu) |
        awk -v secs="$SECS" '{r+=$1; c+=$2+$3} END {printf "%.1f %.2f\n", r, c * 1e6 / (r * secs)}'
    rm -f "$WORK"/c*.img "$WORK"/c*.out "$WORK"/c*.cpu
}

# CPU seconds the witness has used so far.
witness_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' /proc/$WPID/stat; }

# rate, writer CPU µs per record, witness CPU µs per record
writer() {
    local streams=$1 batch=$2 w0 w1
    w0=$(witness_cpu)
    # (stderr holds the RAM warning on tmpfs; shown only when the run failed.)
    /usr/bin/time -f "%U %S" -o "$WORK/pp.cpu" $(cores_for "$streams") \
        "$PLUGPULL" write "$WORK/pp.img" --witness 127.0.0.1:$PORT --size $SIZE \
        --streams "$streams" --batch "$batch" --duration "${SECS}s" --json --quiet \
        >"$WORK/pp.json" 2>"$WORK/pp.err" || { cat "$WORK/pp.err" >&2; exit 1; }
    w1=$(witness_cpu)
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
u, s = (float(x) for x in open(sys.argv[2]).read().split()[-2:])
n = max(j["records_acked"], 1)
rate = j["records_per_s"]
w = (float(sys.argv[4]) - float(sys.argv[3])) * 1e6 / n
print(f"{rate:.1f} {(u + s) * 1e6 / n:.2f} {w:.2f}")
' "$WORK/pp.json" "$WORK/pp.cpu" "$w0" "$w1"
    rm -f "$WORK/pp.img"
}

echo "# plugpull writer vs C loop, $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r), dir $DIR ($(stat -f -c %T "$DIR")), ${SECS}s x $ROUNDS rounds$([ "$PIN" = 1 ] && echo ", S streams pinned to S cores")$([ "$SHARED" = 1 ] && echo ", C loops of S streams in one file")"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/cloop" "$WORK/probe.img" $((4 << 20)) 0.1 2>&1 >/dev/null | sed 's/^/# C loop I\/O: /'
rm -f "$WORK/probe.img"
declare -A RES
for cfg in $CONFIGS; do
    s=${cfg%:*} b=${cfg#*:}
    cs=() ps=() ccpu=() pcpu=() wcpu=()
    for _ in $(seq "$ROUNDS"); do
        read -r r cpu < <(cloop "$s" "$b")
        cs+=("$r") ccpu+=("$cpu")
        read -r r cpu wit < <(writer "$s" "$b")
        ps+=("$r") pcpu+=("$cpu") wcpu+=("$wit")
    done
    c=$(med "${cs[@]}") p=$(med "${ps[@]}")
    cc=$(med "${ccpu[@]}") pc=$(med "${pcpu[@]}") wc=$(med "${wcpu[@]}")
    RES[$cfg]="$c $p"
    echo "streams $s batch $b: C loop ${cs[*]} records/s; plugpull ${ps[*]} acked records/s; medians $c vs $p, ratio $(ratio "$p" "$c")"
    echo "streams $s batch $b: CPU µs per record (medians): C loop $cc; plugpull writer $pc + witness $wc; C loop / writer $(ratio "$cc" "$pc"), C loop / (writer + witness) $(ratio "$cc" "$(python3 -c "print($pc + $wc)")")"
done
for cfg in $CONFIGS; do
    s=${cfg%:*} b=${cfg#*:}
    read -r c p <<<"${RES[$cfg]}"
    echo "RESULT streams=$s batch=$b cloop=$c plugpull=$p ratio=$(ratio "$p" "$c")"
done
# Scaling with --streams: 2 streams against 1 at each batch, for both.
for b in 1 8 32; do
    [ -n "${RES[1:$b]:-}" ] && [ -n "${RES[2:$b]:-}" ] || continue
    read -r c1 p1 <<<"${RES[1:$b]}"
    read -r c2 p2 <<<"${RES[2:$b]}"
    echo "SCALING batch=$b streams 2 vs 1: plugpull $(ratio "$p2" "$p1")x, C loop $(ratio "$c2" "$c1")x"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
