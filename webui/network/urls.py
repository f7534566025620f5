from django.urls import path

from commitkit import views as kit
from commitkit.views import patterns

from . import views
from .domain import DOMAIN

urlpatterns = [
    path("", views.interfaces, name="network"),
    path("interfaces/edit/", views.interface_edit, name="network_interface"),
    path("interfaces/delete/", views.interface_delete, name="network_interface_delete"),
    path("system/", views.system, name="network_system"),
    path("routing/", views.routing, name="network_routing"),
    path("apply/", views.apply, name="network_apply"),
    path("apply/discard/", views.discard, name="network_discard"),
    path("status/", views.status, name="network_status"),
    path("status/confirm/", views.confirm, name="network_confirm_pending"),
    path("status/cancel/", kit.cancel, {"domain": DOMAIN.name}, name="network_cancel"),
    # the one-time link to the new management address (no session there yet)
    path("confirm/", views.confirm_link, name="network_confirm"),
    *patterns(DOMAIN, decisions=False),
    path("<str:section>/", views.section_list, name="network_section"),
    path("<str:section>/new/", views.item_edit, name="network_item_new"),
    path("<str:section>/<int:index>/", views.item_edit, name="network_item"),
    path("<str:section>/<int:index>/delete/", views.item_delete, name="network_item_delete"),
]
