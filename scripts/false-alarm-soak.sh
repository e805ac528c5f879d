#!/usr/bin/env bash
# Soak for false alarms: runs the loop-device scenario
# (tests/integration/scenarios.rs, loop_device_honest_passes_lying_fails: an honest drive must PASS,
# a lying one FAIL with lost records) RUNS times with HOGS busy-loop processes beside
# it, and counts:
#   pass         - both cycles as expected;
#   false alarm  - an HONEST cycle did not PASS (the worst bug this product can have);
#   other        - any other failure (the lying cycle, set-up, timeouts).
# SOAK_TEST=all runs the whole file instead (the tests of scenarios.rs in parallel, as
# `cargo test` does); SOAK_TEST=NAME runs that test of it.
# Every failing run's scratch directory (backing image, oracle, drive logs, witness log,
# writer output, verify report) is kept under OUT/failures/, its output in OUT/runs/.
#
# Usage: scripts/false-alarm-soak.sh [RUNS] [HOGS] [OUT]   (root and /dev/fuse needed)
# Defaults: 300 runs, 2 hogs per CPU, OUT=target/false-alarm-soak. The integration test
# binary is built and copied to OUT first (so a rebuild during the soak changes nothing),
# or taken from $SCENARIOS_EXE. It runs target/debug/plugpull: do not rebuild that meanwhile.
set -euo pipefail

main() {
    cd "$(dirname "$0")/.."
    local runs=${1:-300} hogs=${2:-$((2 * $(nproc)))} out=${3:-target/false-alarm-soak}
    local test=${SOAK_TEST:-loop_device_honest_passes_lying_fails}
    # The scenarios are the module `scenarios` of the one integration test binary.
    local filter=(--exact "scenarios::$test")
    [ "$test" = all ] && filter=(scenarios::)

    rm -rf "$out"
    mkdir -p "$out/runs" "$out/failures"
    local exe=${SCENARIOS_EXE:-}
    if [ -z "$exe" ]; then
        local built
        built=$(cargo test --test integration --no-run 2>&1 |
            sed -n 's/.*Executable tests\/integration\/main.rs (\(.*\))/\1/p')
        [ -x "$built" ] || { echo "could not build the integration test binary" >&2; exit 2; }
        exe="$out/scenarios"
        cp "$built" "$exe"
    fi

    hog_pids=()
    trap 'for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
    for _ in $(seq "$hogs"); do
        sh -c 'while :; do :; done' &
        hog_pids+=($!)
    done

    local pass=0 false_alarm=0 other=0 honest_cycles=0 t0 t1 i log
    t0=$(date +%s)
    for i in $(seq "$runs"); do
        log="$out/runs/$i.log"
        if PLUGPULL_REQUIRE_ALL_TESTS=1 PLUGPULL_FAILURE_DIR="$out/failures" \
            "$exe" "${filter[@]}" --nocapture >"$log" 2>&1; then
            pass=$((pass + 1))
        elif grep -q "profile honest.*\(differ\|must PASS\|expected 0\)" "$log"; then
            false_alarm=$((false_alarm + 1))
            echo "run $i: FALSE ALARM (honest drive accused): $log" >&2
        else
            other=$((other + 1))
            echo "run $i: other failure: $(grep -m1 -A1 panicked "$log" | tail -1 | head -c 300)" >&2
        fi
        # Honest cycles that completed (verify ran and its verdict was checked).
        honest_cycles=$((honest_cycles + $(grep -A1 "profile honest" "$log" | grep -c "acked, verdict\|verdict \"PASS\"" || true)))
        grep -q "FAILED\|panicked" "$log" || rm -f "$log"
    done
    t1=$(date +%s)
    local summary
    summary="runs $runs ($test), hogs $hogs on $(nproc) CPUs, load avg at end $(cut -d' ' -f1-3 /proc/loadavg), $((t1 - t0)) s: pass $pass, false alarms $false_alarm, other failures $other; honest cycles verified $honest_cycles"
    echo "$summary" | tee "$out/summary.txt"
    [ "$false_alarm" -eq 0 ] && [ "$other" -eq 0 ]
}

main "$@"
exit
