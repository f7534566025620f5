from django.urls import path

from . import views

# included at the root (tusk/urls.py): the scrape is at Prometheus' default path
urlpatterns = [
    path("metrics", views.scrape, name="metrics_scrape"),
    path("metrics/tokens/", views.index, name="metrics"),
    path("metrics/tokens/<int:pk>/revoke/", views.revoke, name="metrics_token_revoke"),
    path("metrics/tusk-alerts.yml", views.rules, name="metrics_rules"),
    path("loss/", views.loss_page, name="loss"),
]
