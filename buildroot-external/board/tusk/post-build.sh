#!/usr/bin/env bash
# BR2_ROOTFS_POST_BUILD_SCRIPT: $1 is TARGET_DIR; Buildroot exports BR2_CONFIG,
# BUILD_DIR and BR2_EXTERNAL_TUSK_PATH.
#
# Checks that every line of the kernel config fragments survived into the
# kernel's final .config (external.mk checks once already, right after the
# merge; this catches a later `make linux-menuconfig` or a changed fragment list).
set -euo pipefail

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
