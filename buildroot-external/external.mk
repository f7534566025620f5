include $(sort $(wildcard $(BR2_EXTERNAL_TUSK_PATH)/package/*/*.mk))

# Check the kernel configuration right after Buildroot merged the fragments,
# before the long kernel compile: a fragment line that did not survive (a
# CONFIG_NF_* whose dependency is off) is a shipped bug. post-build.sh runs the
# same check again on the kernel's final .config.
define TUSK_LINUX_CHECK_FRAGMENTS
	$(BR2_EXTERNAL_TUSK_PATH)/board/tusk/check-kernel-config.sh \
		$(LINUX_DIR) $(LINUX_KCONFIG_FRAGMENT_FILES)
endef
LINUX_POST_CONFIGURE_HOOKS += TUSK_LINUX_CHECK_FRAGMENTS
