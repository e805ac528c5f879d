#!/bin/sh
# Witness log size per ack: runs `plugpull listen` and `plugpull write` on
# loopback for a few placements, then divides each run's .acklog size (whole file:
# header, descriptor and events included) by its ack count. Figures go to
# docs/performance.md under "### Witness log size".
#
# usage: scripts/witness-log-size.sh [PLUGPULL] [SECONDS] [TARGET_DIR] [KEEP_DIR]
#   PLUGPULL    the binary (default target/release/plugpull)
#   SECONDS     length of each write run (default 10)
#   TARGET_DIR  where the target file goes (default /dev/shm: flushes cost nothing, the
#               fastest acks and the smallest time deltas; a disk dir gives real flushes)
#   KEEP_DIR    if given, each run's witness log is copied there (for examples/relog.rs,
#               which re-encodes an older binary's log in PackedAcks)
set -eu
BIN=${1:-target/release/plugpull}
SECS=${2:-10}
TDIR=${3:-/dev/shm}
KEEP=${4:-}
WORK=$(mktemp -d /dev/shm/plugpull-logsize.XXXXXX)
PORT=$((20000 + $$ % 10000))
"$BIN" listen --bind 127.0.0.1:$PORT --dir "$WORK/witness" >"$WORK/listen.out" 2>&1 &
LISTEN=$!
trap 'kill $LISTEN 2>/dev/null; rm -rf "$WORK" "$TDIR"/plugpull-logsize-target.*' EXIT
sleep 1
echo "host: $(nproc) cores, $(uname -r); target dir $TDIR ($(df -T "$TDIR" | awk 'NR==2{print $2}')); $BIN"
for spec in "sequential 1 4K" "sequential 4 4K" "sequential 1 4K-64K" "random 1 4K"; do
  set -- $spec
  T=$(mktemp "$TDIR/plugpull-logsize-target.XXXXXX")
  "$BIN" write "$T" --witness 127.0.0.1:$PORT --size 256M --record-size "$3" \
    --placement "$1" --streams "$2" --duration "${SECS}s" --no-direct --json -q \
    --destroy-data-on "$T" >"$WORK/write.json" 2>/dev/null
  RUN=$(sed -n 's/.*"run_id": *"\([0-9a-f]*\)".*/\1/p' "$WORK/write.json" | head -1)
  ACKS=$("$BIN" fetch --witness 127.0.0.1:$PORT --run "$RUN" -o "$WORK/f.acklog" --json \
    | sed -n 's/.*"acks": *\([0-9]*\).*/\1/p' | head -1)
  LOG=$(stat -c %s "$WORK/witness/$RUN.acklog")
  FETCHED=$(stat -c %s "$WORK/f.acklog")
  echo "placement $1, streams $2, records $3: $ACKS acks, witness log $LOG B = $(echo "scale=2; $LOG / $ACKS" | bc) B/ack, fetch -o file $FETCHED B = $(echo "scale=2; $FETCHED / $ACKS" | bc) B/ack"
  [ -n "$KEEP" ] && cp "$WORK/witness/$RUN.acklog" "$KEEP/$1-$2-$3.acklog"
  rm -f "$T"
done
