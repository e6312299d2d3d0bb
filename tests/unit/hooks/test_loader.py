"""Hook loading: entry points, [inspector]hooks order and expansion, dependency checks."""

import pytest

from inspection.hooks.base import (
    HookConfigError,
    InspectionHook,
    InspectionHookError,
    available_hooks,
    configured_hook_names,
    load_hooks,
    run_hooks,
    run_preprocess,
)
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx

ALL_HOOKS = {"ramdisk-error", "validate-interfaces", "ports", "architecture", "memory",
             "cpus", "boot-mode", "cpu-capabilities", "accelerators", "pci-devices",
             "extra-hardware", "parse-lldp", "local-link-connection", "physical-network",
             "raid-device", "root-device"}
DEFAULTS = ["ramdisk-error", "validate-interfaces", "ports", "architecture"]


def test_every_hook_is_registered_and_loads(tmp_path):
    assert set(available_hooks()) >= ALL_HOOKS
    order = ["ramdisk-error", "validate-interfaces", "ports", *sorted(
        ALL_HOOKS - {"ramdisk-error", "validate-interfaces", "ports"})]
    hooks = load_hooks(make_conf(tmp_path), order)
    assert [h.name for h in hooks] == order
    assert all(isinstance(h, InspectionHook) for h in hooks)


def test_default_configuration_runs_the_default_hooks(conf):
    assert configured_hook_names(conf) == DEFAULTS
    assert [h.name for h in load_hooks(conf)] == DEFAULTS


def test_default_hooks_expand_inside_a_list(tmp_path):
    conf = make_conf(tmp_path, hooks="memory,$default_hooks,root-device,boot-mode")
    assert [h.name for h in load_hooks(conf)] == ["memory", *DEFAULTS, "root-device",
                                                  "boot-mode"]


def test_changed_default_hooks_are_what_expands(tmp_path):
    conf = make_conf(tmp_path, default_hooks="ramdisk-error,architecture",
                     hooks="$default_hooks,memory")
    assert [h.name for h in load_hooks(conf)] == ["ramdisk-error", "architecture", "memory"]


def test_unknown_hook_is_named(tmp_path):
    conf = make_conf(tmp_path, hooks="$default_hooks,no-such-hook")
    with pytest.raises(HookConfigError, match=r"unknown inspection hook 'no-such-hook'.*"
                                              r"available hooks: accelerators"):
        load_hooks(conf)


@pytest.mark.parametrize(("hooks", "hook", "dependency"), [
    ("ports,validate-interfaces", "ports", "validate-interfaces"),
    ("ramdisk-error,local-link-connection", "local-link-connection", "validate-interfaces"),
    ("physical-network", "physical-network", "validate-interfaces"),
])
def test_unsatisfied_dependency_names_hook_and_dependency(tmp_path, hooks, hook, dependency):
    with pytest.raises(HookConfigError) as exc:
        load_hooks(make_conf(tmp_path, hooks=hooks))
    assert f"{hook!r} depends on {dependency!r}" in str(exc.value)


def test_hook_listed_twice_is_refused(tmp_path):
    with pytest.raises(HookConfigError, match="'validate-interfaces' is listed twice"):
        load_hooks(make_conf(tmp_path, hooks="validate-interfaces,ports,$default_hooks"))


def test_bad_hook_option_is_reported_at_load_with_the_hook_name(tmp_path):
    conf = make_conf(tmp_path, hooks="pci-devices", pci_device_alias=["{not json"])
    with pytest.raises(HookConfigError, match=r"inspection hook 'pci-devices'.*not JSON"):
        load_hooks(conf)


class _Broken(InspectionHook):
    def __call__(self, ctx):
        return ctx.inventory["no"]["such"]


class _Refusing(InspectionHook):
    def preprocess(self, ctx):
        raise InspectionHookError("nope")

    def __call__(self, ctx):
        pass


def test_a_hook_bug_becomes_a_hook_error_naming_the_hook(session, conf):
    hook = _Broken(conf)
    hook.name = "broken"
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"))
    with pytest.raises(InspectionHookError) as exc:
        run_hooks([hook], ctx)
    assert str(exc.value).startswith("broken hook: unexpected error in the main phase: "
                                     "KeyError")


def test_hook_errors_get_the_hook_name(session, conf):
    hook = _Refusing(conf)
    hook.name = "refusing"
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"))
    with pytest.raises(InspectionHookError, match=r"^refusing hook: nope$"):
        run_preprocess([hook], ctx)


def test_hooks_set_in_code(conf):
    conf.set_override("hooks", "memory,$inspector.default_hooks", "inspector")
    assert configured_hook_names(conf) == ["memory", *DEFAULTS]
    conf.set_override("hooks", "memory,$default_hooks", "inspector")
    with pytest.raises(HookConfigError, match=r"write \$inspector.default_hooks"):
        configured_hook_names(conf)
