from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("dashboard/live/", views.live, name="dashboard_live"),
    path("dashboard/health/", views.health, name="dashboard_health"),
    path("healthz/", views.healthz, name="healthz"),
    path("tools/", views.tools, name="tools"),
]
