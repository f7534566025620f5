#!/bin/sh
# Writes a signed RAUC bundle of one system image - the update format of Tusk's A/B
# slots (docs/UPGRADES.md). post-image.sh runs it for the release (host-rauc), and
# tools/build-bundle (make bundle) for the bundles built here (Debian's rauc).
#
# usage: make-bundle.sh RAUC ROOTFS_EXT4 VERSION COMPATIBLE CERT KEY OUT
#   RAUC         the rauc program to run; ROOTFS_EXT4 the slot's image (with /boot/bzImage)
#   VERSION      the release, as /usr/lib/tusk/version inside says it
#   COMPATIBLE   what the box's /etc/rauc/system.conf says: tusk-x86_64
set -eu
[ $# -eq 7 ] || { echo "usage: $0 RAUC ROOTFS_EXT4 VERSION COMPATIBLE CERT KEY OUT" >&2; exit 2; }
rauc=$1 image=$2 version=$3 compatible=$4 cert=$5 key=$6 out=$7
for file in "$image" "$cert" "$key"; do
    [ -f "$file" ] || { echo "make-bundle.sh: no such file: $file" >&2; exit 1; }
done
stage=$(mktemp -d "${TMPDIR:-/tmp}/tusk-bundle-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# a hard link when it can (the image is the size of a system), else a copy
ln "$image" "$stage/rootfs.ext4" 2>/dev/null || cp "$image" "$stage/rootfs.ext4"
# format=verity: RAUC checks every block with dm-verity while it reads the bundle, so
# it cannot change between the signature check and the install
cat > "$stage/manifest.raucm" <<MANIFEST
[update]
compatible=$compatible
version=$version

[bundle]
format=verity

[image.rootfs]
filename=rootfs.ext4
MANIFEST
rm -f "$out"
"$rauc" --cert "$cert" --key "$key" bundle "$stage" "$out"
