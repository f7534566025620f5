from django.contrib.auth import views as auth_views
from django.urls import path

from . import second_factor, views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", views.password_change, name="password_change"),
    path("login/code/", second_factor.login_code, name="login_code"),
    path("code/", second_factor.confirm_code, name="confirm_code"),
    path("second-factor/", second_factor.second_factor, name="second_factor"),
    path("login-settings/", second_factor.login_settings, name="login_settings"),
    path("users/<int:pk>/second-factor/reset/", second_factor.reset_second_factor,
         name="second_factor_reset"),
    path("users/", views.users, name="users"),
    path("users/new/", views.user_create, name="user_create"),
    path("users/<int:pk>/", views.user_edit, name="user_edit"),
    path("users/<int:pk>/password/", views.user_password, name="user_password"),
    path("audit/", views.audit_log, name="audit"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("upload-gate/", views.upload_gate, name="upload_gate"),
]
