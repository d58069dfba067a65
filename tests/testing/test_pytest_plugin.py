"""The pytest plugin as a user meets it: the docs' example runs under it, the marker sets the
fixture's options, a faulty model fails by name, and ``-p no:minitorch_accum`` turns it off.

The inner runs find the plugin through a ``pytest11`` entry point, as an installed package
offers it: a dist-info declaring the one in pyproject.toml is put on the path for them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from minitorch_accum.testing import PROPERTIES
from minitorch_accum.testing.pytest_plugin import AccumulationEquivalence
from tests.testing.installed_plugin import install_plugin

ROOT = Path(__file__).resolve().parents[2]
MARKED = '''
import pytest
from test_user_example import Block, summed_batch

@pytest.mark.accumulation(dtype="float32", splits=[(3, 13)], properties=["window_equals_full_batch"])
def test_marked(accumulation_equivalence):
    report = accumulation_equivalence(Block, *summed_batch())
    assert report.dtype == "float32" and report.splits == ((3, 13),)
    assert [r.name for r in report.results] == ["window_equals_full_batch"]

@pytest.mark.accumulation(reduction="mean", splits=[(1, 15)])
def test_mean_of_means_fails_by_name(accumulation_equivalence):
    accumulation_equivalence(Block, *summed_batch())
'''
HELPER = '''

def summed_batch():
    import numpy as np
    x, y = np.random.default_rng(0).normal(size=(16, 10)), np.arange(16) % 4
    return (lambda out, y: (F.cross_entropy(out, y, reduction="sum"), len(y))), (x, y)
'''


def docs_example() -> str:
    """The first python block after the marker comment in docs/equivalence.md."""
    text = (ROOT / "docs" / "equivalence.md").read_text()
    found = re.search(r"<!-- the user example:[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert found, "docs/equivalence.md lost its user example"
    return found.group(1)


def test_the_docs_example_is_about_ten_lines_and_passes() -> None:
    code = docs_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 16
    namespace: dict = {}
    exec(compile(code, "docs/equivalence.md", "exec"), namespace)
    fixture = AccumulationEquivalence({})
    namespace["test_my_block_accumulates_exactly"](fixture)
    (report,) = fixture.reports
    assert report.passed and len(report.results) == len(PROPERTIES)
    assert all(r.status == "passed" for r in report.results)


def test_pyproject_declares_the_plugin_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"minitorch_accum": "minitorch_accum.testing.pytest_plugin"}


@pytest.fixture
def installed_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project: the docs' example and a marked test, with the plugin found by its entry point."""
    install_plugin(pytester, monkeypatch, "minitorch_accum_plugin_probe")
    pytester.makepyfile(test_user_example=docs_example() + HELPER, test_marked=MARKED)
    return pytester


def test_the_plugin_loads_by_its_entry_point_and_runs_the_users_tests(installed_plugin: pytest.Pytester) -> None:
    result = installed_plugin.runpytest_inprocess("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*AccumulationMismatch: window_equals_full_batch: parameter * differs by *"
                                 "with split (1, 15)*"])
    selected = installed_plugin.runpytest_inprocess("--strict-markers", "-p", "no:cacheprovider", "-m",
                                                    "accumulation")
    selected.assert_outcomes(passed=1, failed=1, deselected=1)  # the docs' example carries no marker


def test_no_minitorch_accum_turns_the_plugin_off(installed_plugin: pytest.Pytester) -> None:
    result = installed_plugin.runpytest_inprocess("-p", "no:minitorch_accum", "-p", "no:cacheprovider",
                                                  "test_user_example.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'accumulation_equivalence' not found*"])
