#!/usr/bin/env bash
# Accuracy of `plugpull bench` against fio, on the same file system in the same run.
#
# Compares, for the same pattern:
#   1. bench's 4 KiB fdatasync sweep rate (random 4 KiB-aligned writes, O_DIRECT, each
#      followed by fdatasync) with fio --rw=randwrite --bs=4k --direct=1 --fdatasync=1;
#   2. bench's IOPS table, 4 KiB sequential read and sequential write (O_DIRECT, 1 thread,
#      no flush) with fio --rw=read / --rw=write --bs=4k --direct=1.
# The machine is shared and noisy, so the two tools alternate: fio, bench, fio, bench, ...
# fio (ROUNDS bench runs between ROUNDS+1 fio runs), and each figure is the mean over its
# runs; every run is printed so the noise can be judged.
#
# Usage: scripts/bench-vs-fio.sh [DIR] [SECONDS] [ROUNDS]
#        (default: a new dir under /var/tmp on the root disk, 2 s per figure, 3 rounds)
# Env:   PLUGPULL=path/to/plugpull (default target/release/plugpull, built if missing)
set -euo pipefail

cd "$(dirname "$0")/.."
given_dir=${1:-}
secs=${2:-2}
rounds=${3:-3}
size=256M
if [[ -n $given_dir ]]; then dir=$given_dir; else dir=$(mktemp -d /var/tmp/bench-vs-fio.XXXXXX); fi
mkdir -p "$dir"
fio_file=$dir/fio.dat
bench_file=$dir/bench.img
results=$dir/results.txt
cleanup() {
  rm -f "$fio_file" "$bench_file" "$results"
  if [[ -z $given_dir ]]; then rmdir "$dir" 2>/dev/null || true; fi
}
trap cleanup EXIT

command -v fio >/dev/null || { echo "fio not found (apt-get install -y fio)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON" >&2; exit 2; }
bin=${PLUGPULL:-target/release/plugpull}
if [[ ! -x $bin ]]; then cargo build --release --quiet; fi

fio_iops() { # rw extra-args... -> prints IOPS
  local rw=$1
  shift
  fio --name=cmp --filename="$fio_file" --size=$size --rw="$rw" --bs=4k --direct=1 \
    --ioengine=psync --iodepth=1 --numjobs=1 --time_based --runtime="$secs" \
    --output-format=json "$@" |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["write"]["iops"] + j["read"]["iops"])'
}

run_fio() {
  echo "fio sync $(fio_iops randwrite --fdatasync=1)"
  echo "fio read $(fio_iops read)"
  echo "fio write $(fio_iops write)"
}

run_bench() {
  "$bin" bench "$bench_file" --quiet --json --size $size --only sweep,iops \
    --sweep-sizes 4k-4k --block-sizes 4k --threads 1 --time-per-size "${secs}s" |
    python3 -c '
import json, sys
b = json.load(sys.stdin)
seq = {r["op"]: r["ios_per_s"] for r in b["iops"] if r["pattern"] == "sequential"}
print("bench sync", b["sweep"][0]["ios_per_s"])
print("bench read", seq["read"])
print("bench write", seq["write"])
print("device", b["device"].get("disk"), repr(b["device"].get("write_cache")), b["reading"]["class"])'
}

echo "target dir: $dir ($(df --output=source "$dir" | tail -1)), $secs s per figure, $rounds rounds" >&2
# Lay fio's file out first so no figure includes allocation (bench preallocates its own).
fio --name=layout --filename="$fio_file" --size=$size --rw=write --bs=1M --direct=1 \
  --output-format=terse >/dev/null
: >"$results"
run_fio >>"$results"
for _ in $(seq "$rounds"); do
  run_bench >>"$results"
  run_fio >>"$results"
done

python3 - "$results" <<'PY'
import sys, statistics as st
runs = {}
device = None
for line in open(sys.argv[1]):
    w = line.split()
    if w[0] == "device":
        device = " ".join(w[1:])
        continue
    runs.setdefault((w[0], w[1]), []).append(float(w[2]))
names = {"sync": "4 KiB randwrite + fdatasync", "read": "4 KiB sequential read",
         "write": "4 KiB sequential write"}
print(f"{'pattern':28} {'bench IOPS':>11} {'fio IOPS':>10} {'bench/fio':>10}   runs (bench | fio)")
worst = 0.0
for k, name in names.items():
    b, f = runs[("bench", k)], runs[("fio", k)]
    ratio = st.mean(b) / st.mean(f)
    worst = max(worst, abs(ratio - 1))
    print(f"{name:28} {st.mean(b):11.0f} {st.mean(f):10.0f} {ratio:10.3f}   "
          f"{' '.join(f'{x:.0f}' for x in b)} | {' '.join(f'{x:.0f}' for x in f)}")
print(f"device, write_cache, reading: {device}")
print(f"largest deviation of bench from fio: {worst*100:.1f}%")
PY
