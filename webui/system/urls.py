from django.urls import path

from . import views

urlpatterns = [
    path("", views.system, name="system"),
    path("console-password/", views.set_console_password, name="system_console_password"),
    path("console-password/clear/", views.clear_console_password,
         name="system_console_password_clear"),
    path("upgrade/", views.upload_bundle, name="system_upgrade"),
    path("reboot/", views.reboot, name="system_reboot"),
]
