#!/usr/bin/env bash
# CI entry point: install what the tests need, then run the test command from README.md
# with PLUGPULL_REQUIRE_ALL_TESTS=1, so a test that would skip (not root, no /dev/fuse, a
# missing tool) fails CI instead of passing without checking anything.
set -euo pipefail
cd "$(dirname "$0")/.."

# Loop devices (losetup), ext4 (mkfs.ext4, mount) for the block-device and file-system
# scenarios; a C compiler and make for the firmware parser test; gcc-avr, avr-libc and
# Debian's Arduino core for the firmware's AVR builds. FUSE needs no package (fuser
# mounts with mount(2) as root).
need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
# XFS and btrfs on the simulated drive (tests/integration/tree_fs.rs): mkfs and repair tools.
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v losetup >/dev/null || need+=(util-linux)
# What plugpull asks before overwriting a target (src/device/safety/probe.rs): libblkid
# through wipefs and blkid, both util-linux. The signatures every
# tests/integration/signatures.rs case puts on a loop device, one tool each (mkfs.ext2/3 come with e2fsprogs, mkfs.minix,
# mkfs.bfs and mkfs.cramfs with util-linux, mkswap too); md RAID, ZFS, HFS+ and APFS
# headers are written by the test itself (mdadm --create needs the kernel's md driver,
# which CI kernels and containers may lack), so neither mdadm nor libblkid-dev is needed.
for t in wipefs:util-linux blkid:util-linux mkfs.minix:util-linux mkfs.bfs:util-linux \
         mkfs.cramfs:util-linux mkswap:util-linux mkfs.f2fs:f2fs-tools mkfs.vfat:dosfstools \
         mkfs.exfat:exfatprogs mkfs.ntfs:ntfs-3g mksquashfs:squashfs-tools mkfs.jfs:jfsutils \
         mkfs.reiserfs:reiserfsprogs mkfs.nilfs2:nilfs-tools pvcreate:lvm2 \
         cryptsetup:cryptsetup-bin make-bcache:bcache-tools; do
    command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
command -v mount >/dev/null || need+=(mount)
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v avr-gcc >/dev/null || need+=(gcc-avr avr-libc)
[ -e /usr/share/arduino/Arduino.mk ] || need+=(arduino-mk arduino-core-avr)
# The virtual lab (hardware/lab/lab, tests/integration/lab.rs): QEMU, and what goes into the guest's
# initramfs. The guest kernel is Debian's linux-image package, fetched by the lab itself
# with apt-get download (never installed on this machine).
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
# (ldd fails on a static executable.)
if ! command -v busybox >/dev/null || ldd "$(command -v busybox)" >/dev/null 2>&1; then
    need+=(busybox-static)
fi
# The static binary and the Debian package (tests/integration/static_binary.rs and
# deb_package.rs):
# file and binutils (objcopy, strip, readelf) check and split the binary, dpkg installs
# the package, man-db reads its man pages, systemd's systemd-analyze verifies its units;
# e2fsck (e2fsprogs, above) repairs ext4 in tests/integration/guide_simdrive.rs.
for t in socat:socat nvme:nvme-cli hdparm:hdparm dmsetup:dmsetup cpio:cpio depmod:kmod strip:binutils \
         file:file dpkg-deb:dpkg man:man-db systemd-analyze:systemd chroot:coreutils setpriv:util-linux; do
    command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
# The interposer schematics (tests/integration/hardware_schematics.rs): cairo renders the drawings
# (cairosvg loads libcairo.so.2), the DejaVu fonts are the ones the label checks measure.
ldconfig -p | grep 'libcairo\.so\.2' >/dev/null || need+=(libcairo2)
# The HTTP driver's digest logins (tests/integration/power_http.rs): lighttpd with mod_auth's
# htdigest backend. The Redfish driver (power_redfish.rs): openssl makes the emulator's
# certificate, htpasswd (apache2-utils) its bcrypt password file.
[ -e /usr/lib/lighttpd/mod_authn_file.so ] || need+=(lighttpd)
command -v openssl >/dev/null || need+=(openssl)
command -v htpasswd >/dev/null || need+=(apache2-utils)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "CI needs these Debian packages and has no apt-get: ${need[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# cargo-deb builds the Debian package (tests/integration/deb_package.rs); from crates.io, once per
# machine (it stays in ~/.cargo/bin). Pinned: the version the packaging was made with.
if ! cargo deb --version >/dev/null 2>&1; then
    cargo install cargo-deb --locked --version 3.8.0 --quiet
fi

# SKiDL (the schematics and their electrical rules check), cairosvg and pillow (rendering
# the drawings), pinned in hardware/schematics/requirements.txt; from PyPI, once per machine.
if ! python3 -c 'import skidl, cairosvg, PIL' >/dev/null 2>&1; then
    req=hardware/schematics/requirements.txt
    # (--break-system-packages only where python3 is Debian's own, which refuses pip otherwise)
    python3 -m pip install --quiet --disable-pip-version-check -r "$req" \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages -r "$req"
fi

# The Redfish emulator the Redfish driver is tested against (tests/integration/power_redfish.rs):
# sushy-tools from PyPI, pinned; once per machine.
if ! command -v sushy-emulator >/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check sushy-tools==2.2.0 \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages sushy-tools==2.2.0
fi

# The test command from README.md; no test may skip.
export PLUGPULL_REQUIRE_ALL_TESTS=1
