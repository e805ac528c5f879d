#!/usr/bin/env bash
# Accuracy of `plugpull bench` against fio, on the same file system in the same run.
#
# Compares, for the same pattern:
#   1. bench's 4 KiB fdatasync sweep rate (random 4 KiB-aligned writes, O_DIRECT, each
#      followed by fdatasync) with fio --rw=randwrite --bs=4k --direct=1 --fdatasync=1;
#      (both on bench's own file and byte range, so the file is not a variable);
#   2. bench's IOPS table, 4 KiB sequential read and sequential write (O_DIRECT, 1 thread,
#      no flush) with fio --rw=read / --rw=write --bs=4k --direct=1.
# The machine is shared and noisy, so the two tools run back to back per pattern, in
# alternating order, for ROUNDS rounds; figures are medians, every run is printed so the
# noise can be judged.
#
# Usage: scripts/bench-vs-fio.sh [DIR] [SECONDS] [ROUNDS]
#        (default: a new dir under /var/tmp on the root disk, 2 s per figure, 4 rounds)
# Env:   PLUGPULL=path/to/plugpull (default target/release/plugpull, built if missing)
set -euo pipefail

cd "$(dirname "$0")/.."
given_dir=${1:-}
secs=${2:-2}
rounds=${3:-4}
size=256M
if [[ -n $given_dir ]]; then dir=$given_dir; else dir=$(mktemp -d /var/tmp/bench-vs-fio.XXXXXX); fi
mkdir -p "$dir"
bench_file=$dir/bench.img
results=$dir/results.txt
cleanup() {
  rm -f "$bench_file" "$results"
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
  # The same file and byte range as bench: its region starts 8 MiB in (after the stamp).
  fio --name=cmp --filename="$bench_file" --offset=8M --size=$size --rw="$rw" --bs=4k --direct=1 \
    --ioengine=psync --iodepth=1 --numjobs=1 --time_based --runtime="$secs" \
    --output-format=json "$@" |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["write"]["iops"] + j["read"]["iops"])'
}

fio_run() { # pattern -> "fio PATTERN IOPS"
  case $1 in
  sync) echo "fio sync $(fio_iops randwrite --fdatasync=1)" ;;
  read) echo "fio read $(fio_iops read)" ;;
  write) echo "fio write $(fio_iops write)" ;;
  esac
}

bench_run() { # pattern -> "bench PATTERN IOPS"
  local only
  case $1 in
  sync) only=(--only sweep --sweep-sizes 4k-4k) ;;
  *) only=(--only iops --block-sizes 4k --threads 1 --iops-patterns sequential --iops-ops "$1") ;;
  esac
  "$bin" bench "$bench_file" --quiet --json --size $size --time-per-size "${secs}s" "${only[@]}" |
    python3 -c '
import json, sys
b = json.load(sys.stdin)
rows = b["sweep"] or b["iops"]
print("bench", sys.argv[1], rows[0]["ios_per_s"])
d = b["device"]
print("device", d.get("disk"), repr(d.get("write_cache")), "rotational=%s" % d.get("rotational"))' "$1"
}

echo "target dir: $dir ($(df --output=source "$dir" | tail -1)), $secs s per figure, $rounds rounds" >&2
# Let bench create and preallocate its file (zero-filled, synced), which both tools then
# use: same file, same 256 MiB range, so only the tools differ.
"$bin" bench "$bench_file" --quiet --json --size $size --only sweep --sweep-sizes 4k-4k \
  --time-per-size 10ms >/dev/null
: >"$results"
# Each round measures every pattern with both tools back to back, in ABBA order (the tool
# that goes first alternates by round), so slow drift of the machine cancels out.
for r in $(seq "$rounds"); do
  for p in sync read write; do
    if ((r % 2)); then
      fio_run $p >>"$results"
      bench_run $p >>"$results"
    else
      bench_run $p >>"$results"
      fio_run $p >>"$results"
    fi
  done
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
print("medians over the rounds; 'paired' is the median of each round's bench/fio ratio")
print("cv: coefficient of variation of each tool's own runs (the noise floor of the ratio)")
print(f"{'pattern':28} {'bench IOPS':>11} {'fio IOPS':>10} {'bench/fio':>10} {'paired':>8} {'cv bench':>9} {'cv fio':>7}   runs (bench | fio)")
worst = 0.0
for k, name in names.items():
    b, f = runs[("bench", k)], runs[("fio", k)]
    ratio = st.median(b) / st.median(f)
    paired = st.median(x / y for x, y in zip(b, f))
    worst = max(worst, abs(ratio - 1))
    cv = lambda v: st.stdev(v) / st.mean(v) if len(v) > 1 else 0.0
    print(f"{name:28} {st.median(b):11.0f} {st.median(f):10.0f} {ratio:10.3f} {paired:8.3f} {cv(b):9.2f} {cv(f):7.2f}   "
          f"{' '.join(f'{x:.0f}' for x in b)} | {' '.join(f'{x:.0f}' for x in f)}")
print(f"device, write_cache, reading: {device}")
print(f"largest deviation of bench from fio: {worst*100:.1f}%")
PY
