"""Argument values compiled once: constants, templates, and lists/dicts holding templates."""

from typing import Any

from inspection.rules import template
from inspection.rules.errors import TemplateError


class Const:
    """A value without any template (returned as is)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Tmpl:
    """A template string."""

    __slots__ = ("template", "whole")

    def __init__(self, tmpl: template.Template) -> None:
        self.template = tmpl
        self.whole = tmpl.whole  # looked up on every evaluation


class Seq:
    """A list with at least one template inside."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items


class Obj:
    """An object with at least one template among its values (keys stay literal)."""

    __slots__ = ("items",)

    def __init__(self, items: dict) -> None:
        self.items = items


Compiled = Const | Tmpl | Seq | Obj


def compile_value(value: Any, where: str, problems: list[tuple[str, str]],
                  fields: list[tuple[str, template.Field]]) -> Compiled:
    """Compile rule text; template problems go to ``problems`` as (path, message), and every
    field found goes to ``fields`` (for phase and loop checks)."""
    if isinstance(value, str):
        if "{" not in value and "}" not in value:
            return Const(value)
        try:
            parsed = template.parse(value)
        except TemplateError as exc:
            problems.append((where, str(exc)))
            return Const(value)
        fields.extend((where, f) for f in parsed.fields)
        if not parsed.fields:
            return Const("".join(parsed.parts))
        return Tmpl(parsed)
    if isinstance(value, list):
        items = [compile_value(v, f"{where}[{i}]", problems, fields)
                 for i, v in enumerate(value)]
        if all(isinstance(i, Const) for i in items):
            return Const([i.value for i in items])
        return Seq(items)
    if isinstance(value, dict):
        obj = {k: compile_value(v, f"{where}.{k}", problems, fields) for k, v in value.items()}
        if all(isinstance(i, Const) for i in obj.values()):
            return Const({k: i.value for k, i in obj.items()})
        return Obj(obj)
    return Const(value)


def evaluate(value: Compiled, scope: template.Scope, lenient: bool = False) -> Any:
    """The value in ``scope``. ``lenient``: a whole-value field that cannot be resolved is None
    (conditions); otherwise resolution problems raise :class:`TemplateError`."""
    kind = type(value)
    if kind is Const:
        return value.value
    if kind is Tmpl:
        whole = value.whole
        if whole is not None:
            if not lenient:
                return scope.resolve(whole)
            try:
                return scope.resolve(whole)
            except TemplateError:
                return None
        return template.render(value.template, scope)
    if isinstance(value, Seq):
        return [evaluate(v, scope, lenient) for v in value.items]
    return {k: evaluate(v, scope, lenient) for k, v in value.items.items()}
