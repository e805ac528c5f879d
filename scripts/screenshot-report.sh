#!/usr/bin/env bash
# Renders a plugpull HTML report in headless Chromium and saves a PNG, to check that the
# charts are legible at a glance (and to put a picture in the docs).
#
#   scripts/screenshot-report.sh [REPORT.html] [OUT.png]
#
# Without arguments it makes a report itself from a lying-drive demo run (FAIL) and writes
# docs/img/report-fail.png. Installs Debian's chromium package if it is missing. The page
# needs no network; Chromium's own background fetches are switched off too.
set -euo pipefail
cd "$(dirname "$0")/.."

html=${1:-}
out=${2:-docs/img/report-fail.png}
if [[ -z "$html" ]]; then
    cargo build --quiet
    tmp=$(mktemp -d)
    ./target/debug/plugpull demo --profile lying --seed 7 --duration 1s --json >"$tmp/fail.json" || true
    ./target/debug/plugpull report "$tmp/fail.json" -o "$tmp/report.html" --quiet
    html=$tmp/report.html
fi

browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
    echo "installing chromium (Debian package) ..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    browser=$(command -v chromium)
fi

mkdir -p "$(dirname "$out")"
profile=$(mktemp -d)
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run \
    --user-data-dir="$profile" --hide-scrollbars \
    --screenshot="$(realpath -m "$out")" --window-size=1280,${HEIGHT:-2000} \
    "file://$(realpath "$html")" 2>/dev/null
rm -rf "$profile"
echo "saved $out ($(du -k "$out" | cut -f1) KiB)"
