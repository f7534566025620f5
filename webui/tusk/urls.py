"""URL configuration of the Tusk web UI; pages are added by the web UI issue."""
urlpatterns = []
