"""The rules' interpolation language: a small, safe subset of Python format strings.

``"{inventory[memory][physical_mb]}"`` is a template made of exactly one field: it evaluates to
the real object (an int here). Anything else (``"https://{inventory[bmc_address]}/"``) formats
each field with ``str()`` and concatenates. A field is a root name followed by ``.name`` or
``[key]`` steps; ``[0]`` or ``[-1]`` index lists. There are no calls, no conversions (``!r``), no
format specs, and no name or key starting with ``_``. Templates are parsed from rule text only:
values they resolve to are inserted as data and never parsed again, so a ramdisk-supplied
``"{node.driver_info[ipmi_password]}"`` stays literal. ``{{`` and ``}}`` are literal braces.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inspection.rules.errors import TemplateError
from inspection.rules.masking import MASK, has_secrets, is_secret_key, masked

ROOTS = ("node", "inventory", "plugin_data", "ports", "port_groups", "item")
NODE_ROOTS = frozenset({"node", "ports", "port_groups"})
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_INDEX = re.compile(r"-?[0-9]+")


class MissingField(TemplateError):
    """A field names a key or index that the data does not have."""


class MaskedSecret(TemplateError):
    """A field copies a masked secret, where masking refuses copies (actions that write)."""


@dataclass(frozen=True, slots=True)
class Field:
    """One ``{...}`` field: a root name and its access steps (``('.', name)``/``('[', key)``)."""

    text: str
    root: str
    steps: tuple[tuple[str, str | int], ...]


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template string: literal text and fields, in order."""

    parts: tuple[str | Field, ...]

    @property
    def whole(self) -> Field | None:
        """The single field when the template is exactly one ``{...}``, else None."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Field):
            return self.parts[0]
        return None

    @property
    def fields(self) -> list[Field]:
        """Every field of the template."""
        return [p for p in self.parts if isinstance(p, Field)]


def _parse_field(text: str) -> Field:
    if not text:
        raise TemplateError("empty field '{}': name what to insert, e.g. {inventory[...]}")
    match = _NAME.match(text)
    if not match or "-" in match.group(0):
        raise TemplateError(f"field {{{text}}} must start with one of: {', '.join(ROOTS)}")
    root = match.group(0)
    if root not in ROOTS:
        raise TemplateError(f"unknown name {root!r} in {{{text}}}; available: "
                            f"{', '.join(ROOTS)}")
    pos = match.end()
    steps: list[tuple[str, str | int]] = []
    while pos < len(text):
        char = text[pos]
        if char == ".":
            name = _NAME.match(text, pos + 1)
            if not name:
                raise TemplateError(f"bad attribute after '.' in {{{text}}}")
            steps.append((".", name.group(0)))
            pos = name.end()
        elif char == "[":
            end = text.find("]", pos)
            if end < 0:
                raise TemplateError(f"missing ']' in {{{text}}}")
            key = text[pos + 1:end]
            if not key:
                raise TemplateError(f"empty [] in {{{text}}}")
            if key.startswith("_"):
                raise TemplateError(f"keys starting with '_' are not accessible: {{{text}}}")
            steps.append(("[", int(key) if _INDEX.fullmatch(key) else key))
            pos = end + 1
        elif char in "!:":
            raise TemplateError(f"conversions and format specs are not supported: {{{text}}}")
        else:
            raise TemplateError(f"unexpected {char!r} in {{{text}}}; use .name or [key]")
    return Field(text, root, tuple(steps))


def parse(text: str) -> Template:
    """Parse a template string, raising :class:`TemplateError` on bad syntax."""
    parts: list[str | Field] = []
    literal: list[str] = []
    pos, length = 0, len(text)
    while pos < length:
        char = text[pos]
        if char == "{":
            if text.startswith("{{", pos):
                literal.append("{")
                pos += 2
                continue
            end = text.find("}", pos)
            if end < 0:
                raise TemplateError("unclosed '{' (write '{{' for a literal brace)")
            inner = text[pos + 1:end]
            if "{" in inner:
                raise TemplateError("nested '{' in a field (write '{{' for a literal brace)")
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(_parse_field(inner))
            pos = end + 1
        elif char == "}":
            if text.startswith("}}", pos):
                literal.append("}")
                pos += 2
                continue
            raise TemplateError("single '}' (write '}}' for a literal brace)")
        else:
            nxt = min((i for i in (text.find("{", pos), text.find("}", pos)) if i >= 0),
                      default=length)
            literal.append(text[pos:nxt])
            pos = nxt
    if literal:
        parts.append("".join(literal))
    return Template(tuple(parts))


class NodeRoot:
    """What ``{node...}`` reads: a callable returning one readable node field (or raising)."""

    def __init__(self, read_field: Callable[[str], Any], snapshot: Callable[[], dict]) -> None:
        self.read_field = read_field
        self.snapshot = snapshot


_ABSENT = object()


class Scope:
    """The objects a template may reach, and whether secrets read as ``***``."""

    __slots__ = ("inventory", "item", "mask", "node", "plugin_data", "port_groups", "ports",
                 "refuse_masked")

    def __init__(self, inventory: Mapping, plugin_data: Mapping, node: NodeRoot | None = None,
                 *, ports: Callable[[], list] | None = None,
                 port_groups: Callable[[], list] | None = None, mask: bool = True) -> None:
        self.inventory = inventory
        self.plugin_data = plugin_data
        self.node = node
        self.ports = ports
        self.port_groups = port_groups
        self.mask = mask
        self.item: Any = _ABSENT
        self.refuse_masked = False

    def with_item(self, item: Any) -> "Scope":
        """A copy of this scope where ``{item}`` is ``item``."""
        other = Scope(self.inventory, self.plugin_data, self.node, ports=self.ports,
                      port_groups=self.port_groups, mask=self.mask)
        other.item = item
        other.refuse_masked = self.refuse_masked
        return other

    def refusing_masked(self) -> "Scope":
        """This scope, or (when it masks) a copy where reaching a secret raises
        :class:`MaskedSecret` instead of reading ``***``: what actions that write use, so that
        a rule never copies a secret, nor ``***`` over one."""
        if not self.mask or self.refuse_masked:
            return self
        other = self.with_item(self.item)
        other.refuse_masked = True
        return other

    def masking(self, mask: bool) -> "Scope":
        """A copy of this scope with masking switched on or off."""
        other = self.with_item(self.item)
        other.mask = mask
        return other

    def _root(self, field: Field) -> Any:
        root = field.root
        if root == "inventory":
            return self.inventory
        if root == "plugin_data":
            return self.plugin_data
        if root == "item":
            if self.item is _ABSENT:
                raise TemplateError("{item} is only available in a rule with 'loop'")
            return self.item
        if self.node is None:
            raise TemplateError(f"{{{root}}} is not available in the early phase")
        if root == "ports":
            return self.ports() if self.ports else []
        if root == "port_groups":
            return self.port_groups() if self.port_groups else []
        return self.node

    def resolve(self, field: Field) -> Any:
        """The object ``field`` names, masked if this scope masks secrets."""
        value = self.inventory if field.root == "inventory" else self._root(field)
        mask = self.mask
        for kind, key in field.steps:
            if type(value) is dict:  # the common case, before the slower ABC checks
                try:
                    value = value[str(key)]
                except KeyError:
                    raise MissingField(f"{{{field.text}}}: no key {key!r}") from None
            elif isinstance(value, NodeRoot):
                value = value.read_field(str(key))
            elif isinstance(value, Mapping):
                try:
                    value = value[str(key)]
                except KeyError:
                    raise MissingField(f"{{{field.text}}}: no key {key!r}") from None
            elif isinstance(value, (list, tuple)) and kind == "[" and isinstance(key, int):
                try:
                    value = value[key]
                except IndexError:
                    raise MissingField(f"{{{field.text}}}: index {key} out of range") from None
            elif value is None:
                raise MissingField(f"{{{field.text}}}: {key!r} of a null value")
            else:
                raise TemplateError(f"{{{field.text}}}: cannot take {key!r} of a "
                                    f"{type(value).__name__}")
            if mask and is_secret_key(key) and value is not None:
                if self.refuse_masked:
                    raise MaskedSecret(f"{{{field.text}}} is a masked secret: a rule may "
                                       f"not copy it")
                return MASK
        if isinstance(value, NodeRoot):
            value = value.snapshot()
        if not mask:
            return value
        if self.refuse_masked and has_secrets(value):
            raise MaskedSecret(f"{{{field.text}}} holds a masked secret: a rule may not "
                               f"copy it")
        return masked(value)


def render(template: Template, scope: Scope) -> Any:
    """Evaluate a template: the object itself for one whole field, else a string."""
    whole = template.whole
    if whole is not None:
        return scope.resolve(whole)
    out = []
    for part in template.parts:
        out.append(part if isinstance(part, str) else str(scope.resolve(part)))
    return "".join(out)
