from django.urls import path

from . import views

urlpatterns = [
    path("", views.page, name="ha"),
    path("confirm/", views.confirm, name="ha_confirm"),
    path("cancel/", views.cancel, name="ha_cancel"),
    path("failover/", views.failover, name="ha_failover"),
]
