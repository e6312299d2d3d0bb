"""JSON patches bounded before each operation grows the document."""

import jsonpatch
import pytest

from inspection.common.bounded_patch import PatchTooLarge, apply_bounded


def test_doubling_copies_stop_before_the_limit():
    document = {"extra": {"a": {"x": "y" * 1000}}}
    operations = [{"op": "copy", "from": "/extra/a", "path": f"/extra/a/c{i}"}
                  for i in range(20)]
    with pytest.raises(PatchTooLarge, match="more than 1048576 bytes"):
        apply_bounded(document, operations, 1024 * 1024)
    assert document == {"extra": {"a": {"x": "y" * 1000}}}  # unchanged


def test_replacing_a_large_value_counts_what_it_replaces():
    document = {"extra": {"a": "x" * 600_000}}
    result = apply_bounded(document, [{"op": "replace", "path": "/extra/a",
                                       "value": "y" * 600_000},
                                      {"op": "add", "path": "/extra/a", "value": "z"}],
                           1024 * 1024)
    assert result == {"extra": {"a": "z"}}


def test_same_result_as_jsonpatch():
    document = {"a": [1, 2], "b": {"c": 1}}
    operations = [{"op": "move", "from": "/b/c", "path": "/a/0"},
                  {"op": "copy", "from": "/a", "path": "/b/d"},
                  {"op": "remove", "path": "/a/1"}, {"op": "test", "path": "/a/0", "value": 1}]
    assert apply_bounded(document, operations, 10_000) == jsonpatch.apply_patch(document,
                                                                                 operations)


def test_errors_pass_through():
    with pytest.raises(jsonpatch.JsonPatchException):
        apply_bounded({"a": 1}, [{"op": "test", "path": "/a", "value": 2}], 1000)
