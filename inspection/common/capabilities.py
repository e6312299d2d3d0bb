"""Ironic's node capabilities string ``key:value,key:value``: parse, format, update in place.

Ironic stores ``properties['capabilities']`` as one string; Nova and the deploy drivers parse it
back, so a key must appear once and neither a key nor a value may contain a comma (nor a key a
colon). Updating keeps the existing order and replaces a key's value where it stands.
"""

from collections.abc import Iterable, Mapping


class CapabilitiesError(ValueError):
    """A capabilities string or value that cannot be represented in Ironic's format."""


def _text(value: object) -> str:
    # Booleans are written the way Nova's scheduler filters compare them.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_capabilities(value: str | Mapping | None) -> dict[str, str]:
    """Parse ``k:v,k:v`` (or an already parsed mapping) into an ordered dict.

    Empty entries (``a:1,,b:2``, a trailing comma) are ignored; a repeated key keeps its last
    value (at its first position), as Ironic's parser does. Raises :class:`CapabilitiesError`
    on an entry without a colon or with an empty key.
    """
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return {str(key): _text(val) for key, val in value.items()}
    if not isinstance(value, str):
        raise CapabilitiesError(f"capabilities must be a 'key:value,...' string, "
                                f"got {type(value).__name__}")
    result: dict[str, str] = {}
    for raw_entry in value.split(","):
        entry = raw_entry.strip()
        if not entry:
            continue
        key, sep, val = entry.partition(":")
        key = key.strip()
        if not sep or not key:
            raise CapabilitiesError(f"malformed capabilities {value!r}: entry {entry!r} is "
                                    f"not 'key:value'")
        result[key] = val.strip()
    return result


def format_capabilities(capabilities: Mapping[str, object]) -> str:
    """Format a mapping as ``k:v,k:v``; :class:`CapabilitiesError` if it cannot round-trip."""
    parts = []
    for key, value in capabilities.items():
        key_text, value_text = str(key).strip(), _text(value).strip()
        if not key_text or any(c in key_text for c in ",:"):
            raise CapabilitiesError(f"invalid capability name {key_text!r}: it must be "
                                    f"non-empty and contain neither ',' nor ':'")
        if "," in value_text:
            raise CapabilitiesError(f"invalid value {value_text!r} of capability "
                                    f"{key_text!r}: it must not contain ','")
        parts.append(f"{key_text}:{value_text}")
    return ",".join(parts)


def update_capabilities(current: str | Mapping | None, new: Mapping[str, object],
                        remove: Iterable[str] = ()) -> str:
    """Return ``current`` with ``new`` set (in place, never duplicated) and ``remove`` dropped."""
    merged = parse_capabilities(current)
    for key in remove:
        merged.pop(key, None)
    for key, value in new.items():
        merged[str(key).strip()] = _text(value)
    return format_capabilities(merged)
