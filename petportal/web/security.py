"""Security headers, the HTTPS rule, trusted proxies (ProxyFix) and hosts (a `Location` names only those)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from flask import Flask, Response, current_app, redirect, request
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.sansio.utils import host_is_trusted
from werkzeug.wrappers import Response as BaseResponse

from petportal.config import settings

HSTS = "max-age=31536000; includeSubDomains"
OUTSIDE_LOCATIONS = "petportal.outside_locations"
# Load balancers and Prometheus ask these over plain HTTP: they answer as they are, never with a redirect.
HEALTH_ENDPOINTS = frozenset({"ops.healthz", "ops.readyz", "ops.metrics_page"})

CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    # Bootstrap draws its select arrows and menu icon as data: SVG images.
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}
# What Flask-Talisman sent with the portal's options, in its order, built once (Permissions-Policy: no Topics API).
SECURITY_HEADERS = (
    ("Permissions-Policy", "browsing-topics=()"),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "; ".join(f"{name} {value}" for name, value in CONTENT_SECURITY_POLICY.items())),
    ("Referrer-Policy", "strict-origin-when-cross-origin"),
)


def register(app: Flask) -> None:
    # Strict-Transport-Security only when served over HTTPS, and set before the others (the order they always had).
    headers = ((("Strict-Transport-Security", HSTS),) if settings(app).https else ()) + SECURITY_HEADERS

    @app.after_request
    def send_security_headers(response: Response) -> Response:
        for name, value in headers:
            response.headers[name] = value
        return response

    proxies = settings(app).trusted_proxies
    if proxies:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]  # Flask's own WSGI hook
            app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies
        )
    if settings(app).https:
        app.before_request(send_plain_http_to_https)
    app.after_request(keep_locations_on_trusted_hosts)


def send_plain_http_to_https() -> BaseResponse | None:
    """Redirect plain HTTP to HTTPS, on a trusted host only; health checks are answered as they are."""
    if request.is_secure or request.endpoint in HEALTH_ENDPOINTS or not settings().trusted_hosts:
        return None
    return redirect(f"https://{request.host}{request.full_path.rstrip('?')}", 301)


def allow_location(address: str) -> None:
    """Let a `Location` lead to `address` (scheme, host and path exactly, any query): the identity provider's."""
    current_app.extensions.setdefault(OUTSIDE_LOCATIONS, set()).add(_without_query(address))


def keep_locations_on_trusted_hosts(response: Response) -> Response:
    """A `Location` naming an untrusted host (Werkzeug builds some from `Host`) becomes a path on this site."""
    location = response.headers.get("Location")
    if not location or _without_query(location) in current_app.extensions.get(OUTSIDE_LOCATIONS, ()):
        return response
    parts = urlsplit(location)
    trusted = settings().trusted_hosts
    if (parts.scheme or parts.netloc) and not (trusted and host_is_trusted(parts.netloc, trusted)):
        path = "/" + parts.path.lstrip("/")
        response.headers["Location"] = path + (f"?{parts.query}" if parts.query else "")
    return response


def _without_query(address: str) -> str:
    parts = urlsplit(address)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
