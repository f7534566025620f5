from django.urls import path

from . import views

urlpatterns = [
    path("", views.backup, name="backup"),
    path("download/", views.download, name="backup_download"),
    path("upload/", views.upload, name="backup_upload"),
    path("restore/<int:pk>/", views.restore, name="backup_restore"),
    path("restore/<int:pk>/cancel/", views.cancel, name="backup_restore_cancel"),
]
