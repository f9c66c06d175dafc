"""Security settings: headers, cookies, trusted hosts and proxies, and session time limits."""

from datetime import timedelta

from flask import current_app, flash, session
from flask_login import current_user, logout_user
from flask_talisman import Talisman
from werkzeug.middleware.proxy_fix import ProxyFix

IDLE_LIMIT = timedelta(minutes=30)
ABSOLUTE_LIMIT = timedelta(hours=12)

CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    # Bootstrap draws its select arrows and menu icon as data: SVG images.
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}


def configure_cookies(config):
    """Session and remember-me cookies: HttpOnly, SameSite=Lax, Secure whenever users come over HTTPS."""
    https = config["HTTPS"]
    config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=https,
        PERMANENT_SESSION_LIFETIME=IDLE_LIMIT,
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SAMESITE="Lax",
        REMEMBER_COOKIE_SECURE=https,
        REMEMBER_COOKIE_DURATION=ABSOLUTE_LIMIT,
    )


def register(app):
    """Send the security headers on every response, and honour the proxy and host settings."""
    Talisman(
        app,
        force_https=app.config["HTTPS"],
        strict_transport_security=app.config["HTTPS"],
        content_security_policy=CONTENT_SECURITY_POLICY,
        frame_options="DENY",
        referrer_policy="strict-origin-when-cross-origin",
        session_cookie_secure=app.config["SESSION_COOKIE_SECURE"],
        session_cookie_http_only=app.config["SESSION_COOKIE_HTTPONLY"],
        session_cookie_samesite=app.config["SESSION_COOKIE_SAMESITE"],
    )
    proxies = app.config["TRUSTED_PROXIES"]
    if proxies:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies)
    app.before_request(enforce_session_limits)


def start_session(user):
    """Record the start of a logged-in session, for the idle and absolute limits."""
    now = current_app.config["CLOCK"]()
    session.permanent = True
    session["login_at"] = now.timestamp()
    session["seen_at"] = now.timestamp()
    user.last_login_at = now


def enforce_session_limits():
    """End a session idle for 30 minutes, and any login older than 12 hours.

    After an idle timeout a "keep me logged in" cookie may restore the user, but never as a fresh
    login; the absolute limit also ends that cookie.
    """
    now = current_app.config["CLOCK"]().timestamp()
    if "_user_id" in session and now - session.get("seen_at", 0) > IDLE_LIMIT.total_seconds():
        session.clear()
    if not current_user.is_authenticated:
        return
    if "login_at" not in session:
        # Restored from the remember-me cookie: the login it belongs to is the user's last one.
        last_login = current_user.last_login_at
        session["login_at"] = last_login.timestamp() if last_login else 0
        session.permanent = True
    if now - session["login_at"] > ABSOLUTE_LIMIT.total_seconds():
        logout_user()
        session.clear()
        flash("Your session has ended. Please log in again.", "info")
        return
    session["seen_at"] = now
