"""Serve Keystone with waitress: ``python keystone_serve.py HOST:PORT``.

Run by the keystone venv's python, never imported by ours. Keystone parses ``sys.argv`` as its
own options when it loads, so the address is taken off it first.
"""

import sys

import waitress


def main() -> None:
    listen = sys.argv[1]
    sys.argv = sys.argv[:1]
    from keystone.wsgi.api import application  # noqa: PLC0415 - after argv is cleared

    # One thread: Keystone's SQLite database takes one writer, and concurrent writes under
    # load fail with "database is locked" (a 500 to the client).
    waitress.serve(application, listen=listen, threads=1, ident="keystone")


if __name__ == "__main__":
    main()
