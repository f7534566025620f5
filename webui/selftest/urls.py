from django.urls import path

from . import views

urlpatterns = [
    path("", views.selftest, name="selftest"),
    path("start/", views.start, name="selftest_start"),
    path("<int:pk>/", views.run, name="selftest_run"),
    path("responder.py", views.responder, name="selftest_responder"),
]
