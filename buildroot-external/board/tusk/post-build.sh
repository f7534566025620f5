#!/usr/bin/env bash
# BR2_ROOTFS_POST_BUILD_SCRIPT: $1 is TARGET_DIR; Buildroot exports BR2_CONFIG,
# BUILD_DIR and BR2_EXTERNAL_TUSK_PATH.
#
# Checks that every line of the kernel config fragments survived into the
# kernel's final .config (external.mk checks once already, right after the
# merge; this catches a later `make linux-menuconfig` or a changed fragment list).
# Installs RAUC's keyring from TUSK_RAUC_KEYRING (tools/build-image passes it on): the
# certificate every update bundle must be signed by (docs/UPGRADES.md). No default: an
# image that trusted the repository's development key would take anyone's bundle.
set -euo pipefail

if [ -z "${TUSK_RAUC_KEYRING:-}" ] || [ ! -f "$TUSK_RAUC_KEYRING" ]; then
    echo "post-build.sh: TUSK_RAUC_KEYRING='${TUSK_RAUC_KEYRING:-}' is not a file: set it to" \
        "the certificate (PEM) that signs Tusk's update bundles (docs/UPGRADES.md;" \
        "tests/rauc/dev.cert.pem for a development image)" >&2
    exit 1
fi
install -D -m 0644 "$TUSK_RAUC_KEYRING" "$1/etc/rauc/keyring.pem"

# config_value SYMBOL: a string option of the Buildroot .config, unquoted.
config_value() {
    sed -n "s/^$1=\"\(.*\)\"\$/\1/p" "$BR2_CONFIG"
}

version=$(config_value BR2_LINUX_KERNEL_VERSION)
fragments=$(config_value BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES)
# The defconfig spells paths of this tree as $(BR2_EXTERNAL_TUSK_PATH)/...
# shellcheck disable=SC2016 # that literal make variable, not a shell expansion
fragments=${fragments//'$(BR2_EXTERNAL_TUSK_PATH)'/$BR2_EXTERNAL_TUSK_PATH}

# shellcheck disable=SC2086 # the fragment list is space-separated
"$BR2_EXTERNAL_TUSK_PATH/board/tusk/check-kernel-config.sh" \
    "$BUILD_DIR/linux-$version" $fragments
