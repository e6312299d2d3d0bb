"""A small client of the inspection HTTP API for the command line.

Every failure becomes a :class:`CommandError` holding one line: the API's own error message
(Ironic's body, ``{"error_message": "<JSON text with faultstring>"}``) with the HTTP status,
or what went wrong on the way.
"""

import argparse
import json
import os
from typing import Any
from urllib.parse import urlsplit

import requests

from inspection.cli.errors import CommandError, UsageError

DEFAULT_URL = "http://127.0.0.1:6385"
TIMEOUT = 60.0
#: The API version the commands are written for: a request naming none is served as
#: Ironic's 1.1, which has no node names, no inspection and no inspection rules.
API_VERSION = "1.96"


def add_api_options(parser: argparse.ArgumentParser) -> None:
    """--url, --username, --password and -f/--format, with their environment fallbacks."""
    group = parser.add_argument_group("API connection")
    group.add_argument("--url", default=os.environ.get("IRONIC_INSPECTION_URL", DEFAULT_URL),
                       help="base URL of ironic-inspection-api (env IRONIC_INSPECTION_URL; "
                            f"default {DEFAULT_URL})")
    group.add_argument("--username", default=os.environ.get("IRONIC_INSPECTION_USERNAME"),
                       help="user for http_basic (env IRONIC_INSPECTION_USERNAME)")
    group.add_argument("--password", default=os.environ.get("IRONIC_INSPECTION_PASSWORD"),
                       help="password for http_basic (env IRONIC_INSPECTION_PASSWORD; "
                            "prefer the environment: options show up in ps)")
    parser.add_argument("-f", "--format", choices=["table", "json"], default="table",
                        help="output format (json for scripts)")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class ApiClient:
    """JSON requests against the API at ``url``."""

    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 timeout: float = TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self.session = requests.Session()
        if username is not None or password is not None:
            self.session.auth = (username or "", password or "")
        self.timeout = timeout

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "ApiClient":
        """A client from the parsed --url/--username/--password."""
        if not args.url.startswith(("http://", "https://")):
            raise UsageError(f"--url must be an http:// or https:// URL, not "
                               f"{_one_line(args.url)!r}")
        return cls(args.url, args.username, args.password)

    def request(self, method: str, path: str, *, body: Any = None,
                params: dict | None = None) -> Any:
        """Send a request; the decoded JSON answer (None when empty), or CommandError."""
        try:
            response = self.session.request(
                method, self.url + path, json=body, params=params, timeout=self.timeout,
                headers={"Accept": "application/json",
                         "X-OpenStack-Ironic-API-Version": API_VERSION})
        except requests.RequestException as exc:
            reason = exc.__class__.__name__
            if isinstance(exc, requests.ConnectionError):
                reason = "connection failed"
            elif isinstance(exc, requests.Timeout):
                reason = f"no answer within {self.timeout:.0f} s"
            raise CommandError(f"cannot reach the API at {self.url}: {reason}") from None
        if response.status_code >= 400:
            raise CommandError(f"{_error_message(response)} (HTTP {response.status_code})")
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CommandError(f"the API at {self.url} answered {method} {path} with "
                               f"something that is not JSON: is --url right?") from None

    def get(self, path: str, **params: Any) -> Any:
        """GET with query parameters (None values left out)."""
        return self.request("GET", path, params={k: v for k, v in params.items()
                                                 if v is not None})

    def get_all(self, path: str, key: str, **params: Any) -> list:
        """Every item of a list, following the API's ``next`` links page by page."""
        page = self.get(path, **params)
        items = list(page[key])
        while page.get("next"):
            # The link is absolute as the server sees itself; keep our own base URL.
            link = urlsplit(page["next"])
            page = self.request("GET", f"{link.path}?{link.query}")
            items.extend(page[key])
        return items

    def post(self, path: str, body: Any) -> Any:
        """POST a JSON body."""
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        """PUT a JSON body."""
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any) -> Any:
        """PATCH with a JSON patch."""
        return self.request("PATCH", path, body=body)

    def delete(self, path: str) -> Any:
        """DELETE."""
        return self.request("DELETE", path)


def _fault(response: requests.Response) -> dict | None:
    """The decoded fault of Ironic's error body, or None when the body is not one."""
    try:
        fault = json.loads(response.json()["error_message"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(fault, dict) or not isinstance(fault.get("faultstring"), str):
        return None
    return fault


def _error_message(response: requests.Response) -> str:
    fault = _fault(response)
    if fault is None:
        if response.status_code == 401:
            return "authentication required: give --username/--password"
        return f"unexpected answer from the API: {response.reason or 'error'}"
    problems = fault.get("problems")
    text = _one_line(fault["faultstring"])
    if isinstance(problems, list) and problems:
        # The message may already list them; show each once.
        extra = [_one_line(p) for p in problems if _one_line(p) not in text]
        if extra:
            text += ": " + "; ".join(extra)
    return text


def quote(ident: str) -> str:
    """A path segment from user input (no '/' or '..' can change the path)."""
    return requests.utils.quote(str(ident), safe="")
