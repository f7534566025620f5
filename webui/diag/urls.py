from django.urls import path

from . import views

urlpatterns = [
    path("", views.diag, name="diag"),
    path("start/", views.start, name="diag_start"),
    path("upload/", views.upload, name="diag_upload"),
    path("<int:pk>/stop/", views.stop, name="diag_stop"),
    path("<int:pk>/delete/", views.delete, name="diag_delete"),
    path("<int:pk>/analyze/", views.analyze, name="diag_analyze"),
    path("<int:pk>/download/", views.download, name="diag_download"),
    path("reports/<int:pk>/", views.report, name="diag_report"),
]
