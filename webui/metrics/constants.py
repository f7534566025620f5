"""Every limit of the metrics app, shared by the model, the form and the scrape's check."""

TOKEN_NAME_MAX = 64
# secrets.token_urlsafe(TOKEN_BYTES): 43 characters of the URL-safe base64 alphabet
TOKEN_BYTES = 32
TOKEN_PATTERN = r"[A-Za-z0-9_-]{43}"
