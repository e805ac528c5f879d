#!/bin/sh
# Re-detect an NVMe drive after its power returned; find it by serial.
# Use as: reattach = "hardware/scripts/reattach-nvme.sh". Needs root and a slot with
# HotPlug+ Surprise+ in `lspci -vv` (SltCap); elsewhere a cut may hang the link.
set -eu
: "${PLUGPULL_SERIAL:?set PLUGPULL_SERIAL to the drive's serial number}"
disk="${PLUGPULL_DISK:-}"
# Remove the stale PCI function if the kernel kept it (only the one we cut).
if [ -n "$disk" ] && [ -e "/sys/block/$disk/device/device/remove" ]; then
    echo 1 > "/sys/block/$disk/device/device/remove" || true
fi
echo 1 > /sys/bus/pci/rescan
udevadm settle --timeout=30 || true
for i in $(seq 1 60); do
    for s in /sys/class/nvme/nvme*/serial; do
        if [ -e "$s" ] && [ "$(tr -d ' ' < "$s")" = "$PLUGPULL_SERIAL" ]; then exit 0; fi
    done
    sleep 0.5
done
echo "reattach-nvme: no controller with serial $PLUGPULL_SERIAL after the PCI rescan" >&2
exit 1
