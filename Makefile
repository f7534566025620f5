# Tusk: `make run` starts Tusk in a lab of network namespaces, `make test` runs every test,
# `make check` the fast tiers and lint (ruff, shellcheck): the edit-test loop.
# Both install what they need (Debian packages, a Python >= 3.12 virtualenv) by themselves.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
LAB ?= tusk
APT_PACKAGES := nftables iproute2 iputils-ping tcpdump wireshark-common iperf3 procps ethtool \
	postgresql libpq-dev gcc nginx acl chromium shellcheck conntrack ulogd2 ulogd2-json rsyslog \
	grub2-common rauc keepalived conntrackd bubblewrap openssl curl jq frr frr-pythontools \
	prometheus nfdump snmpd snmp smitools
HTMX := webui/build/vendor/htmx.org/htmx.min.js
# empty: the first free (HTTP 8000, 8010, ...; PostgreSQL 5439, 5449, ...), so that
# `make run LAB=b` works beside `make run`
LAB_HTTP_PORT ?=
LAB_PG_PORT ?=
PYTEST_ARGS ?=

KERNEL_APT_PACKAGES := linux-source-6.12 build-essential bc bison flex libelf-dev libssl-dev cpio
# QEMU and OVMF (UEFI), debootstrap for the VM root filesystems, xorriso for the ISO and
# the installer's medium, grub and mtools for the ISO boot test's stand-ins of
# Buildroot's grub images, squashfs-tools for the update bundles (rauc, which the System
# page's bundle check runs, is in APT_PACKAGES)
VM_APT_PACKAGES := qemu-system-x86 qemu-utils ovmf debootstrap xorriso mtools dosfstools \
	grub-pc-bin grub-efi-amd64-bin e2fsprogs fdisk busybox-static zstd squashfs-tools

.PHONY: help run test check lint openapi deps apt vm-deps venv vm-test bench bench-elephant bench-bridge bench-policy bench-seqrand bench-tune bench-ui bench-api bench-diag bench-middlebox bench-flows bench-flowexport bench-ha bench-scale kernel check-kernel-series check-kernel-debug check-kernel-debug-kunit iso bundle image check-image clean

help:
	@echo "make run           start Tusk on a lab of network namespaces (Ctrl-C stops it)"
	@echo "make test          run every test tier (unit, golden, property, namespace, VM)"
	@echo "make check         only the fast tiers (unit, diag, golden, tuning, property) and lint"
	@echo "make lint          ruff, import-linter's contracts, shellcheck over the shell scripts"
	@echo "make openapi       docs/openapi.json from the REST API's code (the web tier checks it)"
	@echo "make vm-test       only the VM tier: Tusk's kernel under QEMU (scenarios, KUnit)"
	@echo "make bench         the single-flow report: FWSM's table on Tusk -> docs/PERFORMANCE.md"
	@echo "make bench-policy  compile/check/apply times, single-flow throughput, new connections/s vs classes"
	@echo "make bench-seqrand single-flow cost of sequence randomisation, in the VM"
	@echo "make bench-bridge  one flow through the transparent bridge mode against a plain bridge, in the VM"
	@echo "make bench-elephant one elephant through the defaults: ESnet RTT/MTU/loss, mixed load, promotion cost"
	@echo "make bench-tune    1- and 4-flow throughput with and without tusk-tune, in the VM"
	@echo "make bench-ui      latency of the web UI's pages and fragments under load"
	@echo "make bench-api     the REST API's latency against the same operations through the pages"
	@echo "make bench-diag    capture analysis rate and memory; a capture's cost to one flow"
	@echo "make bench-middlebox Allman's middlebox measurement through fw vs a direct path"
	@echo "make bench-flows   the Live flows sampler's CPU and memory at 10 000 to 1 000 000 entries"
	@echo "make bench-ha      an HA pair's failover: gap, retransmissions, resets; plain, fast path, seqrand"
	@echo "make bench-scale   several boxes sharing the load: connections/s of one box and three, the sync's cost"
	@echo "make kernel        Linux 6.12 + kernel-patches/ + the config fragments, cached by input hash"
	@echo "make check-kernel-series  every kernel patch builds on the ones before it; checkpatch"
	@echo "make check-kernel-debug   the series' netfilter objects under lockdep + KASAN, no IPv6, no NAT"
	@echo "make check-kernel-debug-kunit   the KUnit boot on a whole lockdep + KASAN test kernel"
	@echo "make iso           the appliance ISO built here from Debian's programs and Tusk's test kernel"
	@echo "make bundle        a signed RAUC update bundle of that system (BUNDLE=out.raucb)"
	@echo "make image         the appliance ISO with Buildroot 2026.02.3 (needs internet; BUILDROOT=dir)"
	@echo "make check-image BUILDROOT=dir  our Buildroot tree against a Buildroot 2026.02.3 checkout"

deps: apt $(VENV)/.installed $(HTMX)

apt:
	@tools/ensure-apt $(APT_PACKAGES)

# htmx from the npm registry at the version package-lock.json pins; npm ci checks
# the tarball's integrity hash. Served from our static files, never from a CDN.
$(HTMX): webui/package.json webui/package-lock.json
	@command -v npm >/dev/null || tools/ensure-apt nodejs npm
	cd webui && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	mkdir -p $(dir $@)
	cp webui/node_modules/htmx.org/dist/htmx.min.js $@

$(VENV)/.installed: webui/requirements.txt tests/requirements.txt | apt
	@tools/ensure-apt python3 ca-certificates
	@python=$$(tools/find-python) || exit 1; \
	  if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then \
	    rm -rf $(VENV); echo "creating $(VENV) with $$python"; $$python -m venv $(VENV); fi
	$(PY) -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	@touch $@

venv: $(VENV)/.installed

vm-deps:
	@tools/ensure-apt $(KERNEL_APT_PACKAGES) $(VM_APT_PACKAGES)

# Every tier, from tools/run-tests (which lists them): a whole run builds what the VM
# tier boots in the background (tools/warm-caches) and runs the appliance's tests as a
# second pytest session beside the first; tests/leftovers.py then fails the run if a test
# left anything running.
test: deps vm-deps lint
	@[ "$$(id -u)" -eq 0 ] || { echo "make test needs root: the namespace tests create network namespaces"; exit 1; }
	BUILDROOT="$(BUILDROOT)" $(PY) tools/run-tests all $(PYTEST_ARGS)

# ruff over the Python (pyproject.toml's rule set), import-linter's contracts (imports
# point down), shellcheck over every shell script
lint: deps
	@tools/lint

# The REST API's OpenAPI document, generated from its code and committed: the web tier
# fails while the two differ (tests/web/test_api.py). No database is opened.
openapi: deps
	cd webui && TUSK_CONFIG=../tests/web/tusk-test.toml DJANGO_SETTINGS_MODULE=tusk.settings \
	  ../$(PY) manage.py openapi ../docs/openapi.json

# The fast tiers, no namespaces, database or VM, and the lint: for the edit-test loop.
check: deps lint
	@[ "$$(id -u)" -eq 0 ] || { echo "make check needs root: nft -c runs in a scratch network namespace"; exit 1; }
	$(PY) tools/run-tests check $(PYTEST_ARGS)

vm-test: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make vm-test needs root (debootstrap, QEMU's 9p shares)"; exit 1; }
	$(PY) tools/run-tests vm $(PYTEST_ARGS)

run: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make run needs root: namespaces, nftables, PostgreSQL's cluster"; exit 1; }
	$(PY) tools/tusk-lab --name $(LAB) $(if $(LAB_HTTP_PORT),--http-port $(LAB_HTTP_PORT)) \
	  $(if $(LAB_PG_PORT),--pg-port $(LAB_PG_PORT))

kernel:
	@tools/ensure-apt $(KERNEL_APT_PACKAGES)
	@tools/build-kernel --test

# The series as netfilter-devel would take it: each patch built (-Werror) on the ones
# before it, checkpatch --strict on each, and the whole with CONFIG_IPV6=n (~12 min).
check-kernel-series:
	@tools/ensure-apt $(KERNEL_APT_PACKAGES)
	@tools/check-kernel-series

# The series' netfilter objects as a debug kernel is configured (make test runs it too,
# tests/vm/test_kernel_debug_build.py; ~9 min once per change of the series).
check-kernel-debug:
	@tools/ensure-apt $(KERNEL_APT_PACKAGES)
	@tools/check-kernel-debug

# The test kernel built whole as a debug kernel (tests/vm/debug.fragment: lockdep, KASAN,
# every conntrack extension), booted with kunit.enable=1: the KUnit suites must pass and
# the kernel report nothing (a lockdep splat, a KASAN report) while they run. Not in make
# test: the build takes ~20 min on 2 cores once per change of the series (README in
# kernel-patches/ has the measured cost).
check-kernel-debug-kunit: deps vm-deps
	@tools/ensure-apt $(KERNEL_APT_PACKAGES)
	@kernel=$$(tools/build-kernel --test tests/vm/debug.fragment | tail -n 1) && \
	    cd tests && TUSK_KERNEL=$$kernel TUSK_KUNIT_SECONDS=900 ../$(PY) -m pytest vm/test_kunit.py

bench: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench needs root (namespaces, QEMU's 9p shares)"; exit 1; }
	$(PY) tests/bench/bench_flow.py

bench-policy: deps vm-deps
	$(PY) tests/bench/bench_policy.py

bench-ui: deps
	@tools/ensure-apt wrk
	$(PY) tests/bench/bench_ui.py

bench-api: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-api needs root: the lab's namespaces"; exit 1; }
	$(PY) tests/bench/bench_api.py

bench-seqrand: deps vm-deps
	$(PY) tests/bench/bench_seqrand.py

bench-bridge: deps vm-deps
	$(PY) tests/bench/bench_bridge.py

bench-elephant: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-elephant needs root (QEMU's 9p shares)"; exit 1; }
	$(PY) tests/bench/bench_elephant.py

bench-ha: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-ha needs root (QEMU's 9p shares)"; exit 1; }
	$(PY) tests/bench/bench_ha.py

bench-scale: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-scale needs root (namespaces, FRR, conntrackd)"; exit 1; }
	$(PY) tests/bench/bench_scale.py

bench-tune: deps vm-deps
	$(PY) tests/bench/bench_tune.py

bench-diag: deps
	$(PY) tests/bench/bench_diag.py

bench-middlebox: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-middlebox needs root (namespaces, nftables)"; exit 1; }
	$(PY) tests/bench/bench_middlebox.py

bench-flowexport: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-flowexport needs root (namespaces, conntrack)"; exit 1; }
	@tools/ensure-apt softflowd pmacct
	$(PY) tests/bench/bench_flowexport.py

bench-flows: deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench-flows needs root (a namespace and its conntrack table)"; exit 1; }
	$(PY) tests/bench/bench_flows.py

# The appliance's ISO built here, with no Buildroot and no internet: Debian trixie's
# programs in the image's layout (what the VM tests boot), Tusk's test kernel, written by
# the image's own post-image.sh -> the cached ISO's path (tools/build-iso).
iso: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make iso needs root (debootstrap, chroot)"; exit 1; }
	@tools/build-iso

# A signed RAUC update bundle of the same system (tools/build-bundle; docs/UPGRADES.md):
# BUNDLE=path (default tusk-<version>.raucb here), signed with the development key of
# tests/rauc/ unless RAUC_CERT and RAUC_KEY name the release's.
bundle: deps vm-deps
	@[ "$$(id -u)" -eq 0 ] || { echo "make bundle needs root (debootstrap, chroot)"; exit 1; }
	@tools/build-bundle $(if $(RAUC_CERT),--cert "$(RAUC_CERT)") $(if $(RAUC_KEY),--key "$(RAUC_KEY)") \
		"$(or $(BUNDLE),tusk-$$(git describe --always --dirty).raucb)"

# The appliance ISO: Buildroot at the pinned release (tools/buildroot-release) with
# buildroot-external/ -> output/images/tusk-<version>.iso. Downloads every source:
# needs internet, or TUSK_DL_DIR / TUSK_PRIMARY_SITE filled beforehand (README).
image:
	@BUILDROOT="$(BUILDROOT)" tools/build-image

# Our tree against Buildroot's own Kconfig and utils/check-package (offline).
check-image:
	@[ -n "$(BUILDROOT)" ] || { echo "make check-image needs BUILDROOT=dir: a Buildroot 2026.02.3 checkout (see buildroot-external/README.md)"; exit 1; }
	@tools/check-image "$(BUILDROOT)"

clean:
	rm -rf $(VENV) .pytest_cache tests/.pytest_cache
