"""The portal's entry point: `python app.py`, `flask --app app run` and `gunicorn app:app`."""

import os

from petportal import create_app
from petportal.processes import fewer_malloc_arenas

app = create_app()

if __name__ == "__main__":
    fewer_malloc_arenas()  # one thread per request: keep their freed memory in two arenas
    app.run(host="127.0.0.1", port=int(os.environ.get("FLASK_RUN_PORT", "5000")))
