def layout(request):
    """NetBox's pattern: one URL, one template; an htmx request (not a boosted page
    load) gets the page's content block alone, anything else the whole page."""
    partial = request.headers.get("HX-Request") == "true" and \
        request.headers.get("HX-Boosted") != "true"
    return {"base_template": "fragment.html" if partial else "base.html"}
