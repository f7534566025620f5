from django.urls import path

from . import views

urlpatterns = [
    path("", views.tuning, name="tuning"),
    path("plan/", views.plan, name="tuning_plan"),
    path("apply/", views.apply, name="tuning_apply"),
    path("verify/", views.verify, name="tuning_verify"),
    path("rollback/", views.rollback, name="tuning_rollback"),
]
