#!/bin/sh
# Tusk's BR2_ROOTFS_POST_IMAGE_SCRIPT: writes $BINARIES_DIR/tusk.iso, a hybrid ISO that
# boots under BIOS and UEFI both from a CD and from a USB stick it was dd'd to.
#
#   ISO 9660 (volume id TUSK_MEDIUM)       /boot/bzImage, /boot/initrd (rootfs.cpio.zst
#                                          or .gz: the live root in RAM),
#                                          /boot/grub/grub.cfg (the menu),
#                                          /boot/grub/i386-pc/eltorito.img,
#                                          /tusk/rootfs.ext4 + /tusk/SHA256SUMS (installer)
#   El Torito BIOS entry                   eltorito.img = cdboot.img + GRUB i386-pc core
#   El Torito EFI entry                    the FAT image of MBR partition 2
#   MBR (system area)                      GRUB's boot_hybrid.img (loads the same core)
#     partition 1                          the ISO 9660 file system (-partition_offset 16)
#     partition 2, type 0xef               FAT: EFI/BOOT/BOOTX64.EFI + EFI/BOOT/grub.cfg
#
# It builds its own GRUB images, as grub-mkrescue does, instead of using Buildroot's
# grub-eltorito.img and efi-part/: Buildroot bakes ($BR2_TARGET_GRUB2_BOOT_PARTITION) into
# the BIOS image's prefix and takes the embedded config and module list from the
# defconfig, so a changed option could silently give an ISO that boots from a CD only.
# Here both images embed a config that finds the medium by the ISO's UUID (its
# modification date, unique per build), falling back to the label TUSK_MEDIUM, so the
# same images boot from (cd0), (hd0) and (hd0,msdos2).
#
# Needs, from Buildroot: BR2_TARGET_GRUB2 with I386_PC and X86_64_EFI and
# BR2_TARGET_GRUB2_INSTALL_TOOLS=y (modules and boot_hybrid.img in
# $TARGET_DIR/usr/lib/grub/<platform>/; the installer's grub-install needs them anyway),
# host-grub2 (built for grub2: $HOST_DIR/bin/grub-mkimage), BR2_PACKAGE_HOST_XORRISO,
# BR2_PACKAGE_HOST_DOSFSTOOLS, BR2_PACKAGE_HOST_MTOOLS, BR2_TARGET_ROOTFS_CPIO (zstd or
# gzip) and BR2_TARGET_ROOTFS_EXT2 (ext4).
#
# Environment: BINARIES_DIR (or $1), TARGET_DIR, HOST_DIR. With HOST_DIR set every tool
# comes from $HOST_DIR/bin or $HOST_DIR/sbin; without it, from PATH (Debian: xorriso,
# grub-common, dosfstools, mtools). SOURCE_DATE_EPOCH, when set, fixes the ISO's UUID.
set -eu

VOLUME_ID=TUSK_MEDIUM
# bonding.max_bonds=0: the built-in bonding driver makes no bond0 of its own (what
# systemd's modprobe.d asks of the module); networkd makes the bonds network.toml names
KERNEL_ARGS="console=tty0 console=ttyS0,115200 bonding.max_bonds=0"
# Built into both GRUB images: there are no module files on the ISO to load later.
GRUB_MODULES="normal configfile linux boot echo test search search_fs_uuid search_label
iso9660 fat part_msdos part_gpt serial terminal halt reboot"
GRUB_MODULES_PC="biosdisk"
GRUB_MODULES_EFI="efi_gop"

die() {
    echo "post-image.sh: $*" >&2
    exit 1
}

# tool NAME PACKAGE: the path of a tool - from HOST_DIR when it is set, else from PATH.
tool() {
    if [ -n "${HOST_DIR:-}" ]; then
        for dir in "$HOST_DIR/bin" "$HOST_DIR/sbin"; do
            if [ -x "$dir/$1" ]; then
                echo "$dir/$1"
                return
            fi
        done
        die "missing $HOST_DIR/bin/$1 (Buildroot: enable $2)"
    fi
    command -v "$1" || die "missing $1 in PATH (Debian package $2)"
}

# input NAME: a file of BINARIES_DIR, symlinks resolved (xorriso would store the link).
input() {
    [ -e "$BINARIES_DIR/$1" ] || die "missing $BINARIES_DIR/$1 ($2)"
    readlink -f "$BINARIES_DIR/$1"
}

BINARIES_DIR=${BINARIES_DIR:-${1:-}}
[ -n "$BINARIES_DIR" ] || die "BINARIES_DIR is not set (Buildroot sets it; give it or \$1)"
[ -d "$BINARIES_DIR" ] || die "BINARIES_DIR=$BINARIES_DIR is not a directory"
[ -n "${TARGET_DIR:-}" ] || die "TARGET_DIR is not set (the target root holding usr/lib/grub)"

if [ -n "${HOST_DIR:-}" ]; then
    xorriso=$(tool xorriso BR2_PACKAGE_HOST_XORRISO)
    mkimage=$(tool grub-mkimage "BR2_TARGET_GRUB2 (host-grub2)")
    mkfs_vfat=$(tool mkfs.vfat BR2_PACKAGE_HOST_DOSFSTOOLS)
    mcopy=$(tool mcopy BR2_PACKAGE_HOST_MTOOLS)
else
    xorriso=$(tool xorriso xorriso)
    mkimage=$(tool grub-mkimage grub-common)
    mkfs_vfat=$(tool mkfs.vfat dosfstools)
    mcopy=$(tool mcopy mtools)
fi

# GRUB's modules and boot images as the grub2 package installed them into the target.
grub_dir() {
    for dir in "$TARGET_DIR/usr/lib/grub/$1" "$TARGET_DIR/lib/grub/$1"; do
        if [ -f "$dir/kernel.img" ]; then
            echo "$dir"
            return
        fi
    done
    die "no GRUB $1 modules in $TARGET_DIR/usr/lib/grub/$1 (Buildroot: BR2_TARGET_GRUB2_$2" \
        "and BR2_TARGET_GRUB2_INSTALL_TOOLS=y)"
}
grub_pc=$(grub_dir i386-pc I386_PC)
grub_efi=$(grub_dir x86_64-efi X86_64_EFI)
[ -f "$grub_pc/boot_hybrid.img" ] || die "missing $grub_pc/boot_hybrid.img"
[ -f "$grub_pc/cdboot.img" ] || die "missing $grub_pc/cdboot.img"

kernel=$(input bzImage "BR2_LINUX_KERNEL with the bzImage format")
rootfs=$(input rootfs.ext4 "BR2_TARGET_ROOTFS_EXT2 with ext4")
initrd=""
for name in rootfs.cpio.zst rootfs.cpio.gz; do
    [ -e "$BINARIES_DIR/$name" ] || continue
    # Both may exist when the compression changed since the last build: take the newer.
    if [ -z "$initrd" ] || [ -n "$(find "$BINARIES_DIR/$name" -newer "$initrd")" ]; then
        initrd=$(readlink -f "$BINARIES_DIR/$name")
    fi
done
[ -n "$initrd" ] || die "missing $BINARIES_DIR/rootfs.cpio.zst or rootfs.cpio.gz" \
    "(BR2_TARGET_ROOTFS_CPIO with zstd or gzip: the kernel has RD_ZSTD and RD_GZIP)"

# The ISO's UUID is its modification date, as GRUB and blkid read it.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    stamp=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S)
else
    stamp=$(date -u +%Y%m%d%H%M%S)
fi
uuid=$(echo "${stamp}00" | sed 's/^\(....\)\(..\)\(..\)\(..\)\(..\)\(..\)\(..\)$/\1-\2-\3-\4-\5-\6-\7/')

iso=$BINARIES_DIR/tusk.iso
work=$BINARIES_DIR/tusk-iso.tmp
rm -rf "$work" "$iso"
mkdir -p "$work/efi/EFI/BOOT" "$work/tusk"
trap 'rm -rf "$work"' EXIT

# Embedded in both GRUB images: find the medium, whatever GRUB calls the device: (cd0)
# from a CD, (hd0) or (hd0,msdos1) from a USB stick, while the firmware may have started
# GRUB from the ESP (hd0,msdos2). GRUB runs this before its normal mode, in the rescue
# parser (no if/then): the label search is the fallback, overridden when the UUID of this
# very build is found. Normal mode then reads $prefix/grub.cfg.
cat > "$work/embedded.cfg" <<EOF
serial --unit=0 --speed=115200
terminal_output --append serial
search --no-floppy --label --set=root $VOLUME_ID
search --no-floppy --fs-uuid --set=root $uuid
set prefix=(\$root)/boot/grub
echo "Tusk: GRUB from \$cmdpath, boot medium \$root ($VOLUME_ID $uuid)"
EOF
{
    cat "$work/embedded.cfg"
    echo "configfile \$prefix/grub.cfg"
} > "$work/efi/EFI/BOOT/grub.cfg"

cat > "$work/grub.cfg" <<EOF
set default=0
set timeout=3
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial

menuentry "Tusk live" {
    linux /boot/bzImage $KERNEL_ARGS
    initrd /boot/initrd
}
EOF

# shellcheck disable=SC2086 # the module lists are word lists
"$mkimage" -d "$grub_pc" -O i386-pc-eltorito -p /boot/grub -c "$work/embedded.cfg" \
    -o "$work/eltorito.img" $GRUB_MODULES $GRUB_MODULES_PC
# shellcheck disable=SC2086
"$mkimage" -d "$grub_efi" -O x86_64-efi -p /boot/grub -c "$work/embedded.cfg" \
    -o "$work/efi/EFI/BOOT/BOOTX64.EFI" $GRUB_MODULES $GRUB_MODULES_EFI

# The ESP: GRUB plus room for the FAT itself, at least 2 MiB.
kib=$(( $(wc -c < "$work/efi/EFI/BOOT/BOOTX64.EFI") / 1024 + 512 ))
[ "$kib" -ge 2048 ] || kib=2048
"$mkfs_vfat" -n TUSK_EFI -C "$work/efi.img" "$kib" > /dev/null
"$mcopy" -s -i "$work/efi.img" "$work/efi/EFI" ::/

digest=$(sha256sum < "$rootfs")
echo "${digest%% *}  rootfs.ext4" > "$work/tusk/SHA256SUMS"

"$xorriso" -as mkisofs -quiet -iso-level 3 -R -J -V "$VOLUME_ID" \
    --modification-date="${stamp}00" \
    -partition_offset 16 --grub2-mbr "$grub_pc/boot_hybrid.img" --mbr-force-bootable \
    -append_partition 2 0xef "$work/efi.img" \
    -b boot/grub/i386-pc/eltorito.img -no-emul-boot -boot-load-size 4 -boot-info-table \
    --grub2-boot-info \
    -eltorito-alt-boot -e --interval:appended_partition_2:all:: -no-emul-boot \
    -o "$iso" -graft-points \
    "boot/bzImage=$kernel" \
    "boot/initrd=$initrd" \
    "boot/grub/grub.cfg=$work/grub.cfg" \
    "boot/grub/i386-pc/eltorito.img=$work/eltorito.img" \
    "tusk/rootfs.ext4=$rootfs" \
    "tusk/SHA256SUMS=$work/tusk/SHA256SUMS"

echo "post-image.sh: wrote $iso (UUID $uuid, initrd $(basename "$initrd"))"

# The release's update bundle (docs/UPGRADES.md), when the build was given the signing
# certificate and key (tools/build-image: TUSK_RAUC_CERT, TUSK_RAUC_KEY): the same
# rootfs.ext4 - its /boot/bzImage is what GRUB boots from a slot - for the RAUC of
# installed boxes. Not for the builds without them (make iso, the tests).
if [ -n "${TUSK_RAUC_CERT:-}" ] && [ -n "${TUSK_RAUC_KEY:-}" ]; then
    if [ -n "${HOST_DIR:-}" ]; then
        rauc=$(tool rauc BR2_PACKAGE_HOST_RAUC)
    else
        rauc=$(tool rauc rauc)
    fi
    version=$(cat "$TARGET_DIR/usr/lib/tusk/version")
    "$(dirname "$0")/make-bundle.sh" "$rauc" "$rootfs" "$version" tusk-x86_64 \
        "$TUSK_RAUC_CERT" "$TUSK_RAUC_KEY" "$BINARIES_DIR/tusk.raucb"
    echo "post-image.sh: wrote $BINARIES_DIR/tusk.raucb (release $version)"
fi
