#!/bin/sh
# Witness benchmark: 64 writers (library AckSenders, authenticated with a key) against
# the release `plugpull listen` on loopback; prints aggregate durable acks/s unpaced and
# ack-to-durable latency at an offered 200k acks/s. Figures go to docs/performance.md
# under "## Witness". PLUGPULL_BENCH_SECS sets each pass's length (default 10).
set -eu
cd "$(dirname "$0")/.."
echo "host: $(nproc) cores, $(uname -r); witness dir on $(df -T "${TMPDIR:-/tmp}" | awk 'NR==2{print $2}')"
cargo test --release --test integration -- --ignored --nocapture --test-threads=1 witness_load::bench_witness_64_writers 2>&1 \
  | grep -E "^(witness|host)" || true
