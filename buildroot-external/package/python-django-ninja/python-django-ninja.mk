################################################################################
#
# python-django-ninja
#
################################################################################

# Buildroot 2026.02.3 has no package of it; keep in step with webui/requirements.txt.
PYTHON_DJANGO_NINJA_VERSION = 1.7.1
PYTHON_DJANGO_NINJA_SOURCE = django_ninja-$(PYTHON_DJANGO_NINJA_VERSION).tar.gz
PYTHON_DJANGO_NINJA_SITE = https://files.pythonhosted.org/packages/source/d/django_ninja
PYTHON_DJANGO_NINJA_SETUP_TYPE = flit
PYTHON_DJANGO_NINJA_LICENSE = MIT
PYTHON_DJANGO_NINJA_LICENSE_FILES = LICENSE

$(eval $(python-package))
