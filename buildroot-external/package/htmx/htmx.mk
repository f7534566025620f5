################################################################################
#
# htmx
#
################################################################################

# Keep in step with webui/package-lock.json (tests/image checks it): the web
# UI's development setup and the image serve the same htmx.
HTMX_VERSION = 2.0.11
HTMX_SOURCE = htmx.org-$(HTMX_VERSION).tgz
HTMX_SITE = https://registry.npmjs.org/htmx.org/-
HTMX_LICENSE = 0BSD
HTMX_LICENSE_FILES = LICENSE

# webui/install-into recreates /usr/lib/tusk/webui, so install after it.
HTMX_DEPENDENCIES = $(if $(BR2_PACKAGE_TUSK_WEBUI),tusk-webui)

define HTMX_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0644 $(@D)/dist/htmx.min.js \
		$(TARGET_DIR)/usr/lib/tusk/webui/build/static/htmx.org/htmx.min.js
endef

$(eval $(generic-package))
