"""The HTTP API of the inspection service (Flask app served by waitress)."""
