"""`manage.py openapi [FILE]`: the API's OpenAPI document (the one /api/v1/openapi.json
serves), to FILE or stdout. `make openapi` writes docs/openapi.json with it."""
from pathlib import Path

from django.core.management.base import BaseCommand

from api.main import document


class Command(BaseCommand):
    help = "Writes the REST API's OpenAPI 3.1 document."

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", help="where to write it (default: stdout)")

    def handle(self, *args, **options):
        if options["file"]:
            Path(options["file"]).write_text(document(), encoding="utf-8")
        else:
            self.stdout.write(document(), ending="")
