from django.urls import path

from commitkit.views import patterns

from . import views
from .domain import DOMAIN

urlpatterns = [
    path("", views.page, name="snmp"),
    path("TUSK-MIB.txt", views.mib, name="snmp_mib"),
    *patterns(DOMAIN),
]
