#!/usr/bin/env bash
# `plugpull write --iodepth` against fio's io_uring engine, at the same depth and flush
# interval, on the same file, in one run.
#
# For each depth D of DEPTHS (default "1 32"), both tools write 4 KiB records
# sequentially with O_DIRECT to the same 256 MiB file and make them
# durable with fdatasync every D writes:
#   plugpull write --iodepth D [--flush-every D]   (D = 1: the synchronous loop, a
#                                                   pwrite and an fdatasync per record)
#   fio --ioengine=io_uring --iodepth=D --fdatasync=D --rw=write --bs=4k --direct=1
# plugpull's figure is records acknowledged per second (each one flushed and sent to a
# witness on loopback); fio's is write IOPS. The machine is shared and noisy, so the
# tools alternate (ABBA: who goes first swaps every round) and the figures are medians.
#
# Usage: scripts/perf-depth.sh [DIR] [SECONDS] [ROUNDS]
#        (default: a new dir under /var/tmp on the root disk, 5 s per run, 3 rounds)
# Env:   PLUGPULL=path/to/plugpull (default target/release/plugpull, built if missing)
#        DEPTHS="1 8 32" picks the depths; PLACEMENT=random makes both write randomly
#        (fio --rw=randwrite).
set -euo pipefail

cd "$(dirname "$0")/.."
given_dir=${1:-}
secs=${2:-5}
rounds=${3:-3}
depths=${DEPTHS:-1 32}
placement=${PLACEMENT:-sequential}
if [[ -n $given_dir ]]; then dir=$given_dir; else dir=$(mktemp -d /var/tmp/perf-depth.XXXXXX); fi
mkdir -p "$dir"
target=$dir/target.img
results=$dir/results.txt
witness_pid=
cleanup() {
  if [[ -n $witness_pid ]]; then kill "$witness_pid" 2>/dev/null || true; wait "$witness_pid" 2>/dev/null || true; fi
  rm -rf "$target" "$results" "$dir/witness" "$dir/witness.log"
  if [[ -z $given_dir ]]; then rmdir "$dir" 2>/dev/null || true; fi
}
trap cleanup EXIT

command -v fio >/dev/null || { echo "fio not found (apt-get install -y fio)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON" >&2; exit 2; }
bin=${PLUGPULL:-target/release/plugpull}
if [[ ! -x $bin ]]; then cargo build --release --quiet; fi
case $placement in
sequential) fio_rw=write ;;
random) fio_rw=randwrite ;;
*) echo "PLACEMENT must be sequential or random" >&2; exit 2 ;;
esac

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" listen --bind "127.0.0.1:$port" --dir "$dir/witness" 2>"$dir/witness.log" &
witness_pid=$!
for _ in $(seq 100); do
  grep -q "listening" "$dir/witness.log" 2>/dev/null && break
  sleep 0.05
done

# Both tools write the whole file; fio's runs overwrite plugpull's marker, so plugpull
# is told the file is its to destroy.
pp_run() { # depth -> "plugpull D RECORDS_PER_S"
  local d=$1 depth_args=()
  if ((d > 1)); then depth_args=(--iodepth "$d" --flush-every "$d"); fi
  "$bin" write "$target" --witness "127.0.0.1:$port" --size 256M --record-size 4k \
    --destroy-data-on "$target" --placement "$placement" --duration "${secs}s" --json --quiet "${depth_args[@]}" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("plugpull", sys.argv[1], j["records_per_s"], j["engine"])' "$d"
}

fio_run() { # depth -> "fio D IOPS"
  local d=$1
  fio --name=depth --filename="$target" --size=256M --rw=$fio_rw --bs=4k --direct=1 \
    --ioengine=io_uring --iodepth="$d" --fdatasync="$d" --time_based --runtime="$secs" \
    --output-format=json |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("fio", sys.argv[1], j["write"]["iops"], "io_uring")' "$d"
}

# plugpull creates and preallocates the file first; both tools then write it.
"$bin" write "$target" --witness "127.0.0.1:$port" --size 256M --count 1 --quiet
echo "target: $target ($(df --output=source "$dir" | tail -1)), $secs s per run, $rounds rounds, $placement, depths: $depths" >&2
: >"$results"
for r in $(seq "$rounds"); do
  for d in $depths; do
    if ((r % 2)); then
      fio_run "$d" >>"$results"
      pp_run "$d" >>"$results"
    else
      pp_run "$d" >>"$results"
      fio_run "$d" >>"$results"
    fi
  done
done

python3 - "$results" "$placement" <<'PY'
import sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    tool, depth, rate, _engine = line.split()
    runs.setdefault((tool, int(depth)), []).append(float(rate))
depths = sorted({d for _, d in runs})
print(f"4 KiB {sys.argv[2]} writes, O_DIRECT, fdatasync every D writes; medians; 'paired' = median of each round's ratio")
print(f"{'depth':>5} {'plugpull rec/s':>15} {'fio IOPS':>10} {'plugpull/fio':>13} {'paired':>7}   runs (plugpull | fio)")
for d in depths:
    p, f = runs[("plugpull", d)], runs[("fio", d)]
    paired = st.median(x / y for x, y in zip(p, f))
    print(f"{d:>5} {st.median(p):>15,.0f} {st.median(f):>10,.0f} {st.median(p) / st.median(f):>13.3f} {paired:>7.3f}   "
          f"{' '.join(f'{x:,.0f}' for x in p)} | {' '.join(f'{x:,.0f}' for x in f)}")
if len(depths) > 1:
    lo, hi = depths[0], depths[-1]
    gain = lambda t: st.median(runs[(t, hi)]) / st.median(runs[(t, lo)])
    print(f"depth {hi} over depth {lo}: plugpull {gain('plugpull'):.2f}x, fio {gain('fio'):.2f}x")
PY
