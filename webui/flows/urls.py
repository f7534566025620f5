from django.urls import path

from . import views

urlpatterns = [
    path("", views.index, name="flows"),
    path("table/", views.table, name="flows_table"),
    path("settings/", views.save_settings, name="flows_settings"),
    path("capture/", views.capture, name="flows_capture"),
    path("diagnose/", views.diagnose, name="flows_diagnose"),
    path("drop/", views.drop, name="flows_drop"),
    path("block/", views.block, name="flows_block"),
    path("actions/<int:pk>/", views.action, name="flows_action"),
    path("export/", views.export_page, name="flows_export"),
]
