"""The Flask extensions, created unbound here and bound to the app in the factory."""

from flask_caching import Cache
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

db = SQLAlchemy()
migrate = Migrate()
csrf = CSRFProtect()
login = LoginManager()
cache = Cache()
# The database errors that mean it cannot be reached or answer now; any other is a bug, never an outage.
DATABASE_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)
