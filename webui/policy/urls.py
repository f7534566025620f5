from django.urls import path

from commitkit.views import patterns

from . import nat_views, views
from .domain import DOMAIN

urlpatterns = [
    path("", views.overview, name="policy"),
    path("status/", views.status, name="policy_status"),
    path("apply/", views.apply, name="policy_apply"),
    *patterns(DOMAIN),
    path("history/<int:number>/to-draft/", views.revision_to_draft, name="policy_to_draft"),
    path("export/", views.export, name="policy_export"),
    path("import/", views.import_policy, name="policy_import"),
    path("classes/<int:index>/move/<str:direction>/", views.class_move, name="policy_class_move"),
    path("settings/", nat_views.settings_edit, name="policy_settings"),
    path("presets/", views.presets, name="policy_presets"),
    path("presets/<str:key>/", views.preset_add, name="policy_preset"),
    path("nat/", nat_views.nat, name="policy_nat"),
    path("nat/source/<int:index>/move/<str:direction>/", nat_views.source_move,
         name="policy_nat_source_move"),
    path("nat/source/new/", nat_views.nat_edit, {"kind": "source"},
         name="policy_nat_source_new"),
    path("nat/source/<int:index>/", nat_views.nat_edit, {"kind": "source"},
         name="policy_nat_source"),
    path("nat/source/<int:index>/delete/", nat_views.nat_delete, {"kind": "source"},
         name="policy_nat_source_delete"),
    path("nat/forwards/new/", nat_views.nat_edit, {"kind": "forwards"},
         name="policy_nat_forward_new"),
    path("nat/forwards/<int:index>/", nat_views.nat_edit, {"kind": "forwards"},
         name="policy_nat_forward"),
    path("nat/forwards/<int:index>/delete/", nat_views.nat_delete, {"kind": "forwards"},
         name="policy_nat_forward_delete"),
    path("<str:section>/", views.section_list, name="policy_section"),
    path("<str:section>/new/", views.item_edit, name="policy_item_new"),
    path("<str:section>/<int:index>/", views.item_edit, name="policy_item"),
    path("<str:section>/<int:index>/delete/", views.item_delete, name="policy_item_delete"),
]
