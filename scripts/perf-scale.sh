#!/usr/bin/env bash
# Scale benchmark, verify half. Prints each figure with its reference from the
# same run:
#   scale:  verify of a synthetic run of ACKS acks (512 B records; examples/synthacks.rs:
#           an ack log plus the target an honest drive holds after it, both on /dev/shm),
#           sequential and random placement: peak RSS and wall time (/usr/bin/time -v);
#   speed:  verify read speed against `dd iflag=direct bs=1M` on the same file, 4 KiB
#           records over SPEED_MIB and 512 B records over SMALL_MIB (one lap over the
#           region, so every record is read), ROUNDS alternating runs each (the tool that
#           goes first alternates by round), medians compared. verify is timed as the
#           whole command (start, read the acks twice, read and judge, print). Also the
#           CPU seconds (user + sys) per GiB of each, which the machine's load moves much
#           less than the wall times. A second reference in the same rounds:
#           scripts/perf/rawread.c, O_DIRECT reads of 2 MiB into a huge-page buffer as
#           verify's are (dd's 4 KiB pages split each read on a virtio disk), the read
#           ceiling of the disk for a reader that does nothing with the data;
#   writer: scripts/perf-writer.sh (the writer half).
# Usage: scripts/perf-scale.sh [ACKS] [SLOTS] [ROOT_DIR] [SPEED_MIB]
#   defaults: 100000000 2097152 /var/tmp 1024
#   sparse: verify of SPARSE_ACKS (default 20000) 4 KiB records over a SPARSE_GIB (default
#           200) GiB sparse target, random and sequential placement: wall time, peak RSS
#           and bytes read (reads that follow the records);
#   SECTIONS="scale speed sparse writer" chooses the parts (default: all four);
#   ROUNDS (default 3) alternating runs per speed figure; SMALL_MIB (default 1280) the
#   region for 512 B records; PP=path/to/plugpull and SYN=path/to/synthacks use those
#   binaries instead of building target/release.
#   used: SECTIONS=speed ROUNDS=3 PP=... SYN=... scripts/perf-scale.sh "" "" /var/tmp 1024
# Disk: ACKS * 40 B of log and SLOTS * 512 B of target on /dev/shm at once (100 M acks:
# 4 GB + 1 GiB), deleted after each placement; SPEED_MIB (SMALL_MIB) plus its log on
# ROOT_DIR for the speed test.
set -euo pipefail
cd "$(dirname "$0")/.."
ACKS=${1:-100000000}
SLOTS=${2:-2097152}
ROOT_DIR=${3:-/var/tmp}
SPEED_MIB=${4:-1024}
SMALL_MIB=${SMALL_MIB:-1280}
ROUNDS=${ROUNDS:-3}
SECTIONS=${SECTIONS:-"scale speed sparse writer"}
if [ -z "${PP:-}" ] || [ -z "${SYN:-}" ]; then
    cargo build --release -q --bin plugpull --example synthacks
fi
PP=${PP:-target/release/plugpull}
SYN=${SYN:-target/release/examples/synthacks}
SHM=$(mktemp -d /dev/shm/plugpull-scale.XXXX)
WORK=$(mktemp -d "$ROOT_DIR/plugpull-scale.XXXX")
trap 'rm -rf "$SHM" "$WORK"' EXIT
# The median of the arguments (mean of the middle two for an even count).
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }
py() { python3 -c "print($1)"; }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

echo "# plugpull scale benchmark, $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r), $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (+ uncommitted changes)')"
# The commit above is the worktree's; PP and SYN may be builds of another.
echo "# binaries: $PP ($(sha256sum "$PP" | cut -c1-12)), $SYN"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Memory and time at scale.
if has scale; then
    for placement in sequential random; do
        t0=$(now)
        "$SYN" "$SHM/t.img" "$SHM/t.acklog" "$ACKS" "$SLOTS" "$placement" 512 2>/dev/null
        t1=$(now)
        /usr/bin/time -v "$PP" verify "$SHM/t.img" --acks "$SHM/t.acklog" --rehearsal --quiet \
            >"$SHM/out" 2>"$SHM/time" || true
        rss=$(awk -F': ' '/Maximum resident/{print $2}' "$SHM/time")
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$SHM/time")
        cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END {print u " + " s}' "$SHM/time")
        echo "verify $ACKS acks, 512 B, $placement over $SLOTS slots: peak RSS $rss KiB ($(py "round($rss*1024/$ACKS,2)") B/ack), user + sys $cpu s, wall $wall; log $(stat -c %s "$SHM/t.acklog") B, made in $(py "round($t1-$t0,1)") s; $(head -c 200 "$SHM/out")"
        rm -f "$SHM/t.img" "$SHM/t.acklog"
    done
fi

# 2. Read speed against dd on the same file (one lap: every record is read and judged).
# One timed run: prints "wall user sys".
timed() {
    /usr/bin/time -f "%e %U %S" -o "$WORK/t" "$@" >"$WORK/out" 2>"$WORK/err" ||
        { echo "failed: $*" >&2; cat "$WORK/err" >&2; exit 1; }
    cat "$WORK/t"
}
if has speed; then
    cc -O2 -o "$WORK/rawread" scripts/perf/rawread.c
    for rec in 4096 512; do
        mib=$SPEED_MIB
        [ "$rec" = 512 ] && mib=$SMALL_MIB
        slots=$((mib * 1048576 / rec))
        "$SYN" "$WORK/s.img" "$WORK/s.acklog" "$slots" "$slots" sequential "$rec" 2>/dev/null
        # Written through the page cache: on disk before timing, so no run pays the
        # write-back (O_DIRECT reads flush dirty pages of the range first).
        sync "$WORK/s.img" "$WORK/s.acklog"
        dd_w=() dd_c=() v_w=() v_c=() r_w=()
        for i in $(seq "$ROUNDS"); do
            for who in $( ((i % 2)) && echo "dd verify raw" || echo "raw verify dd"); do
                if [ "$who" = raw ]; then
                    read -r w u s < <(timed "$WORK/rawread" "$WORK/s.img")
                    r_w+=("$w")
                elif [ "$who" = dd ]; then
                    read -r w u s < <(timed dd if="$WORK/s.img" of=/dev/null bs=1M iflag=direct status=none)
                    dd_w+=("$w") dd_c+=("$(py "$u+$s")")
                else
                    read -r w u s < <(timed "$PP" verify "$WORK/s.img" --acks "$WORK/s.acklog" --rehearsal --quiet)
                    grep -q PASS "$WORK/out" || { echo "verify did not PASS:" >&2; cat "$WORK/out" "$WORK/err" >&2; exit 1; }
                    v_w+=("$w") v_c+=("$(py "$u+$s")")
                fi
            done
        done
        d=$(med "${dd_w[@]}") v=$(med "${v_w[@]}") dc=$(med "${dd_c[@]}") vc=$(med "${v_c[@]}")
        r=$(med "${r_w[@]}")
        gib=$(py "$mib/1024")
        echo "verify $mib MiB of $rec B records ($slots acks) vs dd iflag=direct bs=1M and rawread, $ROUNDS alternating runs: dd ${dd_w[*]} s, verify ${v_w[*]} s, rawread ${r_w[*]} s"
        echo "  medians: dd $(py "round($mib/$d)") MiB/s, verify $(py "round($mib/$v)") MiB/s (whole command), rawread $(py "round($mib/$r)") MiB/s; verify/dd $(py "f'{$d/$v:.3f}'"), verify/rawread $(py "f'{$r/$v:.3f}'")"
        echo "  CPU (user + sys) per GiB, medians: dd $(py "f'{$dc/$gib:.2f}'") s, verify $(py "f'{$vc/$gib:.2f}'") s"
        echo "RESULT verify_speed record=$rec mib=$mib dd_s=$d verify_s=$v rawread_s=$r ratio=$(py "f'{$d/$v:.3f}'") ratio_rawread=$(py "f'{$r/$v:.3f}'") dd_cpu_s_per_gib=$(py "f'{$dc/$gib:.2f}'") verify_cpu_s_per_gib=$(py "f'{$vc/$gib:.2f}'")"
        rm -f "$WORK/s.img" "$WORK/s.acklog"
    done
fi

# 3. Reads that follow the work: SPARSE_ACKS acks of 4 KiB records over a SPARSE_GIB GiB
# sparse target (a loop device over a sparse file when root can make one, else the file),
# random placement (verify reads only the records' blocks) and sequential (one span).
if has sparse; then
    SPARSE_ACKS=${SPARSE_ACKS:-20000}
    SPARSE_GIB=${SPARSE_GIB:-200}
    slots=$((SPARSE_GIB * 262144))
    for placement in random sequential; do
        "$SYN" "$WORK/p.img" "$WORK/p.acklog" "$SPARSE_ACKS" "$slots" "$placement" 4096 2>/dev/null
        sync "$WORK/p.img"
        dev=$(losetup -f --show "$WORK/p.img" 2>/dev/null || echo "$WORK/p.img")
        /usr/bin/time -v "$PP" verify "$dev" --acks "$WORK/p.acklog" --rehearsal --json \
            >"$WORK/out" 2>"$WORK/time" || true
        [ "$dev" = "$WORK/p.img" ] || losetup -d "$dev"
        rss=$(awk -F': ' '/Maximum resident/{print $2}' "$WORK/time")
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$WORK/time")
        read_b=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['bytes_read'], r['verdict'])" "$WORK/out")
        echo "verify $SPARSE_ACKS acks of 4 KiB, $placement over $SPARSE_GIB GiB ($dev): wall $wall, peak RSS $rss KiB, bytes read and verdict: $read_b"
        rm -f "$WORK/p.img" "$WORK/p.acklog"
    done
fi

# 4. The writer half.
if has writer && [ -x scripts/perf-writer.sh ]; then
    PLUGPULL=$PP scripts/perf-writer.sh
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
