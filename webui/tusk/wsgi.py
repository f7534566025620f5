"""WSGI entry point for gunicorn. gunicorn --preload (tusk-web.service) imports it once, in
its master, which then tells systemd it is ready and forks the workers: the URLconf and
every view are imported here, before that, instead of by each worker at its first
request (on a slow CPU, each worker's first page took as long as the import)."""
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tusk.settings")
application = get_wsgi_application()
get_resolver().url_patterns      # noqa: B018 - imports the URLconf and the views
