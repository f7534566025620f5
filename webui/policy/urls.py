from django.urls import path

from . import views

urlpatterns = [
    path("", views.overview, name="policy"),
    path("status/", views.status, name="policy_status"),
    path("apply/", views.apply, name="policy_apply"),
    path("confirm/", views.confirm, name="policy_confirm"),
    path("cancel/", views.cancel, name="policy_cancel"),
    path("history/", views.history, name="policy_history"),
    path("history/<int:number>/", views.revision, name="policy_revision"),
    path("history/<int:number>/rollback/", views.rollback, name="policy_rollback"),
    path("history/<int:number>/to-draft/", views.revision_to_draft, name="policy_to_draft"),
    path("export/", views.export, name="policy_export"),
    path("import/", views.import_policy, name="policy_import"),
    path("classes/<int:index>/move/<str:direction>/", views.class_move, name="policy_class_move"),
    path("<str:section>/", views.section_list, name="policy_section"),
    path("<str:section>/new/", views.item_edit, name="policy_item_new"),
    path("<str:section>/<int:index>/", views.item_edit, name="policy_item"),
    path("<str:section>/<int:index>/delete/", views.item_delete, name="policy_item_delete"),
]
