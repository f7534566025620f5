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

# The one install step shared with the QEMU test root filesystem.
define TUSK_WEBUI_INSTALL_TARGET_CMDS
	TUSK_VERSION="$(BR2_EXTERNAL_TUSK_VERSION)" $(@D)/install-into $(TARGET_DIR)
endef

$(eval $(generic-package))
