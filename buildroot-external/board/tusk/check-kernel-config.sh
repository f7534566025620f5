#!/usr/bin/env bash
# usage: check-kernel-config.sh KERNEL_DIR FRAGMENT...
# KERNEL_DIR holds the .config; the kernel's Kconfig files are searched there too,
# or in $KERNEL_SRC when the build is out of tree (tools/build-kernel: make O=).
# Fails if a line of a kernel config fragment did not survive into
# KERNEL_DIR/.config: a CONFIG_NF_* silently dropped because a dependency is
# off is a shipped bug. The image (post-build.sh, external.mk) and the test kernel
# (tools/build-kernel) both check with this script. CONFIG_X=n must read
# "# CONFIG_X is not set", everything else verbatim; one case the tinyconfig base
# of the test kernel never meets: an =n symbol whose
# dependencies are off (CONFIG_SLUB_TINY without EXPERT on x86_64_defconfig)
# is absent from .config, which is "n" too, provided the symbol exists.
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 KERNEL_DIR FRAGMENT..." >&2; exit 2; }
kernel=$1
shift
config=$kernel/.config
[ -f "$config" ] || { echo "check-kernel-config: no $config" >&2; exit 1; }

# defined SYMBOL: the kernel's Kconfig files declare CONFIG_SYMBOL.
defined() {
    grep -rqE "^[[:space:]]*(menu)?config[[:space:]]+${1#CONFIG_}[[:space:]]*$" \
        --include='Kconfig*' "${KERNEL_SRC:-$kernel}"
}

lost=0
for fragment in "$@"; do
    [ -f "$fragment" ] || { echo "check-kernel-config: no fragment $fragment" >&2; exit 1; }
    name=$(basename "$fragment")
    lineno=0
    while IFS= read -r line; do
        lineno=$((lineno + 1))
        case "$line" in
            CONFIG_*=n) want="# ${line%=n} is not set" ;;
            CONFIG_*=*) want=$line ;;
            *) continue ;;
        esac
        grep -qxF "$want" "$config" && continue
        symbol=${line%%=*}
        have=$(grep -E "^(# )?${symbol}[= ]" "$config" || true)
        if [ "$want" != "$line" ] && [ -z "$have" ] && defined "$symbol"; then
            continue
        fi
        echo "$name:$lineno: fragment option lost: $line" \
            "(have: ${have:-absent})" >&2
        lost=1
    done < "$fragment"
done
if [ "$lost" -ne 0 ]; then
    echo "kernel config check failed for $config: fix the fragment's dependencies" >&2
    exit 1
fi
echo "kernel config: every line of $* is in $config"
