#!/usr/bin/env bash
# Soak for false alarms (issue 11, defect 9): runs the loop-device scenario
# (tests/scenarios.rs, loop_device_honest_passes_lying_fails: an honest drive must PASS,
# a lying one FAIL) RUNS times with HOGS busy-loop processes beside it, and counts:
# (SOAK_TEST=all runs the whole file instead, its three tests in parallel as
# `cargo test` does.)
#   pass         - both cycles as expected;
#   false alarm  - the HONEST cycle did not PASS (the worst bug this product can have);
#   other        - any other failure (the lying cycle, set-up, timeouts).
# Every failing run's scratch directory (backing image, oracle, drive logs, witness log,
# writer output, verify report) is kept under OUT/failures/, its output in OUT/runs/.
#
# Usage: scripts/false-alarm-soak.sh [RUNS] [HOGS] [OUT]   (root and /dev/fuse needed)
# Defaults: 300 runs, 2 hogs per CPU, OUT=target/false-alarm-soak. The test binary is
# built and copied to OUT first (so a rebuild during the soak changes nothing), or taken
# from $SCENARIOS_EXE. It runs target/debug/plugpull: do not rebuild that meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-300}
hogs=${2:-$((2 * $(nproc)))}
out=${3:-target/false-alarm-soak}
test=${SOAK_TEST:-loop_device_honest_passes_lying_fails}
filter=(--exact "$test")
[ "$test" = all ] && filter=()

rm -rf "$out"
mkdir -p "$out/runs" "$out/failures"
exe=${SCENARIOS_EXE:-}
if [ -z "$exe" ]; then
    built=$(cargo test --test scenarios --no-run 2>&1 | sed -n 's/.*Executable tests\/scenarios.rs (\(.*\))/\1/p')
    [ -x "$built" ] || { echo "could not build the scenarios test binary" >&2; exit 2; }
    exe="$out/scenarios"
    cp "$built" "$exe"
fi

hog_pids=()
stop_hogs() {
    for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
    sh -c 'while :; do :; done' &
    hog_pids+=($!)
done

pass=0 false_alarm=0 other=0
t0=$(date +%s)
for i in $(seq "$runs"); do
    log="$out/runs/$i.log"
    if PLUGPULL_REQUIRE_ALL_TESTS=1 PLUGPULL_FAILURE_DIR="$out/failures" \
        "$exe" "${filter[@]}" --nocapture >"$log" 2>&1; then
        pass=$((pass + 1))
        rm -f "$log"
    elif grep -q "profile honest.*\(differ\|expected 0\)\|honest drive.*must PASS" "$log"; then
        false_alarm=$((false_alarm + 1))
        echo "run $i: FALSE ALARM (honest drive accused): $log" >&2
    else
        other=$((other + 1))
        echo "run $i: other failure: $(grep -m1 -A2 panicked "$log" | tail -n +2 | head -c 300)" >&2
    fi
done
t1=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg)
summary="runs $runs, hogs $hogs on $(nproc) CPUs, load avg at end $load, $((t1 - t0)) s: pass $pass, false alarms $false_alarm, other failures $other"
echo "$summary" | tee "$out/summary.txt"
[ "$false_alarm" -eq 0 ] && [ "$other" -eq 0 ]
