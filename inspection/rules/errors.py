"""Exceptions of the inspection rules library."""


class RuleError(Exception):
    """Base class of every error raised by the rules library."""


class RuleValidationError(RuleError):
    """A rule document has problems; ``problems`` lists each as ``path: message``."""

    def __init__(self, problems: list[str], what: str = "invalid inspection rule") -> None:
        self.problems = list(problems)
        super().__init__(f"{what}: " + "; ".join(self.problems))


class RuleNotFound(RuleError):
    """No rule with this UUID exists (neither stored nor built in)."""

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid
        super().__init__(f"inspection rule {uuid} not found")


class RuleConflict(RuleError):
    """A rule with this UUID already exists."""

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid
        super().__init__(f"inspection rule {uuid} already exists")


class BuiltInRuleError(RuleError):
    """Built-in rules come from the configuration file and cannot be changed or deleted."""

    def __init__(self, uuid: str, what: str = "changed") -> None:
        self.uuid = uuid
        super().__init__(f"inspection rule {uuid} is built in and cannot be {what}; "
                         f"edit the [inspection_rules]built_in_rules file instead")


class BuiltInRulesFileError(RuleError):
    """The built-in rules file cannot be read or holds invalid rules (a start-up error)."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        listing = "\n  ".join(self.problems)
        super().__init__(f"built-in inspection rules file {path} is invalid "
                         f"({len(self.problems)} problem(s)):\n  {listing}")


class RuleExecutionError(RuleError):
    """An action of a matched rule could not be applied; the caller rolls back.

    ``rule_uuid`` and ``action_index`` locate the failure; the message never shows the
    arguments of a sensitive rule.
    """

    def __init__(self, message: str, rule_uuid: str | None = None,
                 action_index: int | None = None) -> None:
        self.rule_uuid = rule_uuid
        self.action_index = action_index
        super().__init__(message)


class InspectionFailed(RuleExecutionError):
    """The ``fail`` action ran: inspection must fail with this (masked) message."""


class ActionError(RuleError):
    """Raised by an action implementation; the engine wraps it into RuleExecutionError."""


class TemplateError(RuleError):
    """A template cannot be parsed or resolved (unknown name, missing key, bad syntax)."""
