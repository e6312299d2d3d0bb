"""Run openstacksdk baremetal calls; run by the clients venv's python, never imported by ours.

stdin: ``{"endpoint": URL, "auth": null | {"username", "password"}, "cloud": null | name,
"calls": [{"op": name,
"args": [...], "kwargs": {...}}, ...]}``; ``op`` is a method of ``conn.baremetal``, or
``endpoint_data``: the microversions discovery found.
stdout: ``{"results": [{"ok": value} | {"error": {"type", "message", "status"}}, ...]}``, each
result with ``"requests": [[method, url], ...]``: what a user of the SDK sees, and what it sent.
"""

import json
import sys
import types
import urllib.parse

import keystoneauth1.session
import openstack
from openstack import resource

SENT: list[list[str]] = []


def _record_requests() -> None:
    """Remember every request the SDK sends (to show pagination and filters on the wire)."""
    original = keystoneauth1.session.Session.request

    def request(self, url, method, *args, **kwargs):
        params = kwargs.get("params")
        query = "?" + urllib.parse.urlencode(params, doseq=True) if params else ""
        SENT.append([method, url + query])
        return original(self, url, method, *args, **kwargs)

    keystoneauth1.session.Session.request = request


def _plain(value):
    """Resources, generators and dicts as JSON-able values."""
    if isinstance(value, resource.Resource):
        return value.to_dict(computed=False)
    if isinstance(value, (types.GeneratorType, list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def connect(endpoint: str, auth: dict | None, cloud: str | None,
            ) -> openstack.connection.Connection:
    """A connection the way the issue's users make one: no Keystone, endpoint override."""
    if cloud is not None:  # from clouds.yaml, as Ansible's openstack.cloud modules connect
        return openstack.connect(cloud=cloud)
    if auth is None:
        return openstack.connect(auth_type="none", baremetal_endpoint_override=endpoint)
    return openstack.connect(auth_type="http_basic",
                             auth={"username": auth["username"],
                                   "password": auth["password"], "endpoint": endpoint},
                             baremetal_endpoint_override=endpoint)


def main() -> None:
    command = json.load(sys.stdin)
    _record_requests()
    conn = connect(command["endpoint"], command.get("auth"), command.get("cloud"))
    results: list[dict] = []
    for call in command["calls"]:
        del SENT[:]
        try:
            if call["op"] == "endpoint_data":  # what version discovery found
                data = conn.baremetal.get_endpoint_data()
                low, high = data.min_microversion, data.max_microversion
                result = {"ok": {"min_microversion": f"{low[0]}.{low[1]}",
                                 "max_microversion": f"{high[0]}.{high[1]}"}}
            else:
                value = getattr(conn.baremetal, call["op"])(*call.get("args", []),
                                                            **call.get("kwargs", {}))
                result = {"ok": _plain(value)}
        except Exception as exc:  # reported to the test: what the SDK's user would see
            result = {"error": {"type": type(exc).__name__, "message": str(exc),
                                "status": getattr(exc, "status_code", None)}}
        results.append({**result, "requests": list(SENT)})
    json.dump({"results": results}, sys.stdout, default=str)


if __name__ == "__main__":
    main()
