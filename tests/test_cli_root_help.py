"""`xlp --help` (issue 32): it ends with a three-command example that parses, and the commands whose summary names
--task list every task of the registry there."""

from __future__ import annotations

import re
import shlex

import pytest
from test_cli_help import check

from xlp_cli import tasks


@pytest.fixture(scope="module")
def root_help(cli) -> str:
    r = cli("--help")
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def cli():
    from conftest import run_cli

    return run_cli


def test_root_help_ends_with_a_three_command_example_that_parses(root_help) -> None:
    head, _, example = root_help.rstrip().rpartition("Example:")
    assert head, root_help
    commands = example.replace("\\\n", " ").strip().splitlines()
    assert len(commands) == 3, commands
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "xlp"
        check(words[1:])  # real flags, real values, a config the stage accepts
    assert [shlex.split(c)[1] for c in commands] == ["prepare", "pretrain", "evaluate"]


@pytest.mark.parametrize("command", ["finetune", "evaluate"])
def test_every_task_is_listed_where_the_help_says(root_help, command) -> None:
    flat = " ".join(root_help.split())
    listed = re.search(rf"\b{command} \S.*?\(--task ([^)]*)\)", flat)
    assert listed, flat
    names = set(re.split(r",\s*|\s+or\s+", listed.group(1)))
    assert names == set(tasks.names(command))
    assert "listed below" not in flat
