#!/bin/sh
# Re-detect a SATA drive after its power returned; find it by serial, never by sdX.
# Use as a campaign hook: reattach = "hardware/scripts/reattach-sata.sh"
# (plugpull sets PLUGPULL_SERIAL and PLUGPULL_DISK, the kernel name before the cut).
# Needs root, AHCI with hot-plug, and link power management at max_performance:
#   echo max_performance > /sys/class/scsi_host/hostN/link_power_management_policy
set -eu
: "${PLUGPULL_SERIAL:?set PLUGPULL_SERIAL to the drive's serial number}"
disk="${PLUGPULL_DISK:-}"
# A stale device left from before the cut: delete it (only ever the one we cut).
if [ -n "$disk" ] && [ -e "/sys/block/$disk/device/delete" ]; then
    echo 1 > "/sys/block/$disk/device/delete" 2>/dev/null || true
fi
for scan in /sys/class/scsi_host/host*/scan; do
    echo "- - -" > "$scan" 2>/dev/null || true
done
udevadm settle --timeout=30 || true
for i in $(seq 1 60); do
    if ls /dev/disk/by-id/ 2>/dev/null | grep -q -- "$PLUGPULL_SERIAL"; then
        exit 0
    fi
    sleep 0.5
done
echo "reattach-sata: no drive with serial $PLUGPULL_SERIAL appeared after the rescan" >&2
exit 1
