from django.urls import path

from . import views

urlpatterns = [
    path("", views.index, name="logs"),
    path("storage/", views.storage_settings, name="logs_storage"),
    path("syslog/", views.syslog_settings, name="logs_syslog"),
]
