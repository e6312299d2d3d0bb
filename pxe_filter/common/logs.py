"""Logging set-up shared by the console scripts: timestamped lines on stderr."""

import logging
import sys

# Libraries that narrate every connection attempt at INFO; their warnings still show.
_NOISY = ("amqp", "kombu", "oslo_messaging._drivers", "oslo.messaging._drivers",
          "oslo_service.backend", "stevedore")


def setup_logging(debug: bool = False) -> None:
    """Log to stderr (journald adds the rest); DEBUG with ``debug``, else INFO."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.INFO if debug else logging.WARNING)
