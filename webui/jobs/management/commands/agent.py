from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run tusk-agent, the privileged job runner (as root)."

    def handle(self, *args, **options):
        from jobs.agent import main
        main()
