################################################################################
#
# python-pyotp
#
################################################################################

# Buildroot 2026.02.3 has no package of it; keep in step with webui/requirements.txt.
PYTHON_PYOTP_VERSION = 2.12.1
PYTHON_PYOTP_SOURCE = pyotp-$(PYTHON_PYOTP_VERSION).tar.gz
PYTHON_PYOTP_SITE = https://files.pythonhosted.org/packages/source/p/pyotp
PYTHON_PYOTP_SETUP_TYPE = hatch
PYTHON_PYOTP_LICENSE = MIT
PYTHON_PYOTP_LICENSE_FILES = LICENSE
PYTHON_PYOTP_DEPENDENCIES = host-python-hatch-vcs

$(eval $(python-package))
