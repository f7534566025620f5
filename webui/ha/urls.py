from django.urls import path

from commitkit.views import patterns

from . import views
from .domain import DOMAIN

urlpatterns = [
    path("", views.page, name="ha"),
    *patterns(DOMAIN),
    path("failover/", views.failover, name="ha_failover"),
]
