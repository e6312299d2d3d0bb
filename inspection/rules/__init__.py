"""The inspection rules engine: validation, storage, evaluation and explanation of rules.

Typical use by the processing pipeline::

    built_in = load_built_in_rules(conf.inspection_rules.built_in_rules)   # at start-up
    repo = RuleRepository(built_in, conf.inspection_rules.default_scope)
    engine = RulesEngine(conf.inspection_rules.mask_secrets)
    engine.apply(repo.list(session, phase="main"), "main", inventory, plugin_data,
                 OrmNode(session, node))
"""

from inspection.rules.actions import ActionContext, ActionRegistry, action, default_registry
from inspection.rules.adapters import InMemoryNode, NodeAdapter, NodeAdapterBase
from inspection.rules.builtin import load_built_in_rules
from inspection.rules.engine import RulesEngine, interface_supported
from inspection.rules.errors import (
                                     ActionError,
                                     BuiltInRuleError,
                                     BuiltInRulesFileError,
                                     InspectionFailed,
                                     RuleConflict,
                                     RuleError,
                                     RuleExecutionError,
                                     RuleNotFound,
                                     RuleValidationError,
                                     TemplateError,
)
from inspection.rules.model import PHASES, Rule, sort_rules
from inspection.rules.orm_adapter import OrmNode
from inspection.rules.repository import RuleRepository
from inspection.rules.validation import check_rule, validate_rule

__all__ = [
    "PHASES", "ActionContext", "ActionError", "ActionRegistry", "BuiltInRuleError",
    "BuiltInRulesFileError", "InMemoryNode", "InspectionFailed", "NodeAdapter",
    "NodeAdapterBase", "OrmNode", "Rule", "RuleConflict", "RuleError", "RuleExecutionError",
    "RuleNotFound", "RuleRepository", "RuleValidationError", "RulesEngine", "TemplateError",
    "action", "check_rule", "default_registry", "interface_supported", "load_built_in_rules",
    "sort_rules", "validate_rule",
]
