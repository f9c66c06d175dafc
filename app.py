"""The portal's entry point: `python app.py`, `flask --app app run` and `gunicorn app:app`."""

import os

from petportal import create_app

app = create_app()

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(os.environ.get("FLASK_RUN_PORT", "5000")))
