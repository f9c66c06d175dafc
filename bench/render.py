"""The animal list page rendered in process: the template alone, no network and no request path.

    python -m bench.render [--repeat 400] [--batches 7] [--profile]

Renders `catalog/list.html` for 20 and 100 rows inside one request (as /animals renders it) and prints
the median time per render over several batches. With --profile, also the functions that take the
most time in the 20-row render (cProfile, cumulative).
"""

import argparse
import cProfile
import io
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from flask import request

from petportal import create_app
from petportal.catalog.forms import AnimalFilterForm
from petportal.catalog.views import list_page
from petportal.extensions import db
from petportal.petstore.records import Pet

STATUSES = ("available", "pending", "sold", None)
ROWS = (20, 100)


def animals(count):
    """`count` animals like the store's seeded ones, every status among them."""
    return [Pet(id=1000 + n, name=f"Animal {n}", category_id=n % 7 + 1, status=STATUSES[n % 4]) for n in range(count)]


def portal(folder):
    """A portal whose environments are never called: only its templates and their context are used."""
    app = create_app(
        {
            "SECRET_KEY": "render-bench-" + "x" * 32,  # the 32 characters a portal outside the demo needs
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{Path(folder) / 'portal.sqlite'}",
            "PETSTORE_ENVIRONMENTS": {
                "production": {"url": "http://127.0.0.1:9/v1", "key": "unused-" + "x" * 16},
                "staging": {"url": None, "key": None},
            },
            "HTTPS": False,
        }
    )
    with app.app_context():
        db.create_all()
    return app


def render_list(rows):
    """The list page as /animals renders it, for the animals in `rows` (call inside a request)."""
    form = AnimalFilterForm(formdata=request.args)
    form.validate()
    return list_page(form, rows)


def time_per_render(app, count, repeat, batches):
    """The median over `batches` of the mean time of one render, in milliseconds."""
    rows = animals(count)
    with app.test_request_context(f"/animals?limit={count}"):
        render_list(rows)  # compile the templates and resolve the environment once
        means = []
        for _ in range(batches):
            started = time.perf_counter()
            for _ in range(repeat):
                render_list(rows)
            means.append((time.perf_counter() - started) / repeat * 1000)
    return statistics.median(means)


def profile(app, count, repeat):
    """The top of the cProfile of `repeat` renders of `count` rows, by cumulative time."""
    rows = animals(count)
    with app.test_request_context(f"/animals?limit={count}"):
        render_list(rows)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(repeat):
            render_list(rows)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=400, help="renders per batch")
    parser.add_argument("--batches", type=int, default=7, help="batches; the median is reported")
    parser.add_argument("--profile", action="store_true", help="also print the 20-row render's profile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="petportal-render-") as folder:
        app = portal(folder)
        print("| rows | ms per render (median) | target |")
        print("|---:|---:|---:|")
        for count, target in zip(ROWS, ("<= 0.3", "<= 1"), strict=True):
            print(f"| {count} | {time_per_render(app, count, args.repeat, args.batches):.3f} | {target} |")
        if args.profile:
            print(profile(app, 20, args.repeat))
        with app.app_context():
            db.engine.dispose()


if __name__ == "__main__":
    main()
