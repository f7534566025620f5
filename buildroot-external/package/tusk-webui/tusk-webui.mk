################################################################################
#
# tusk-webui
#
################################################################################

TUSK_WEBUI_VERSION = local
TUSK_WEBUI_SITE = $(BR2_EXTERNAL_TUSK_PATH)/../webui
TUSK_WEBUI_SITE_METHOD = local
TUSK_WEBUI_LICENSE = PROPRIETARY
# What `make deps` leaves in webui/ for development stays out of the image:
# htmx comes from the hash-checked htmx package, not from node_modules.
TUSK_WEBUI_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /node_modules --exclude /build --exclude __pycache__

# The release the box shows and its update bundle carries: TUSK_VERSION from
# tools/build-image, else what git says of the tree (the local copy in the build
# directory is no git checkout).
TUSK_WEBUI_RELEASE = $(or $(TUSK_VERSION),$(shell git -C $(BR2_EXTERNAL_TUSK_PATH)/.. \
	describe --always --dirty 2>/dev/null),unknown)

# The one install step shared with the QEMU test root filesystem; then the modules
# byte-compiled by the host's Python, the target's version (Buildroot compiles only
# /usr/lib/python3.x): the web process (user tusk) cannot write the caches and would
# compile them at every start. Paths in the caches are the target's; they are checked
# by the source's hash, which BR2_REPRODUCIBLE's new file times leave valid.
TUSK_WEBUI_DEPENDENCIES = host-python3

define TUSK_WEBUI_INSTALL_TARGET_CMDS
	TUSK_VERSION="$(TUSK_WEBUI_RELEASE)" $(@D)/install-into $(TARGET_DIR)
	$(HOST_DIR)/bin/python3 -m compileall -q --invalidation-mode checked-hash \
		-s $(TARGET_DIR) -p / $(TARGET_DIR)/usr/lib/tusk/webui >/dev/null
endef

$(eval $(generic-package))
