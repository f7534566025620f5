################################################################################
#
# python-prometheus-client
#
################################################################################

# Buildroot 2026.02.3 has no package of it; keep in step with webui/requirements.txt.
PYTHON_PROMETHEUS_CLIENT_VERSION = 0.26.0
PYTHON_PROMETHEUS_CLIENT_SOURCE = prometheus_client-$(PYTHON_PROMETHEUS_CLIENT_VERSION).tar.gz
PYTHON_PROMETHEUS_CLIENT_SITE = https://files.pythonhosted.org/packages/source/p/prometheus_client
PYTHON_PROMETHEUS_CLIENT_SETUP_TYPE = setuptools
PYTHON_PROMETHEUS_CLIENT_LICENSE = Apache-2.0
PYTHON_PROMETHEUS_CLIENT_LICENSE_FILES = LICENSE NOTICE

$(eval $(python-package))
