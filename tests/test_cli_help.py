"""The command line as a new user meets it (issue 11 section 5, issue 12 "Messages"): --help shows every default
and choice and never cuts a flag name, each command's help ends with a worked example that parses, shell
completion is on, `python -m xlp_cli` works, and every usage mistake is one line with exit code 2 (with a
"did you mean" for a typo, and the line of a TOML key)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys

import pytest
import typer
from readme_check import check

from xlp_cli import stages
from xlp_cli.cli.app import app
from xlp_cli.cli.commands import example_text
from xlp_cli.core import ui

COMMANDS = [list(s.command) for s in stages.STAGES.values()]


def _options(path: list[str]) -> list:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def _help(cli, path: list[str]) -> str:
    r = cli(*path, "--help")
    assert r.exit_code == 0, r.stderr
    return r.stdout.replace("\xa0", " ")


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_help_shows_every_flag_whole_with_its_default_and_choices(cli, path):
    text = _help(cli, path)
    flat = re.sub(r"\s", "", text)  # (help lines wrap, at spaces and after hyphens)
    for p in _options(path):
        for name in (*p.opts, *p.secondary_opts):
            assert re.search(rf"(^|[\s,/]){re.escape(name)}([\s,=/]|$)", text, re.M), f"{name} cut or missing"
        help_text = (p.help or "").replace("\xa0", " ")
        if p.name != "help":
            assert "[default: " in help_text and re.sub(r"\s", "", help_text) in flat, f"{p.opts[0]}: no default shown"
    assert "…" not in text and "Example:" in text


@pytest.mark.parametrize("path", [[], ["bpe"], *COMMANDS], ids=["xlp", "bpe", *(" ".join(p) for p in COMMANDS)])
def test_dash_h_is_help_on_every_command(cli, path):
    text = _help(cli, path)
    short = cli(*path, "-h")
    assert short.exit_code == 0, short.stderr
    assert short.stdout.replace("\xa0", " ") == text and "-h, --help" in text


def test_dash_h_from_the_installed_command():
    """`main()` builds only the named command (its own app): -h is help there too."""
    r = subprocess.run([sys.executable, "-m", "xlp_cli", "bpe", "apply", "-h"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("Usage: xlp bpe apply") and "-h, --help" in r.stdout, r.stderr


def test_help_names_the_defaults_and_choices_a_user_asked_for(cli):
    text = " ".join(_help(cli, ["pretrain"]).split())
    assert "--max-steps INT" in text and "the paper's 750000; cpu: 500" in text  # 0: the preset's
    assert "--preset [auto|tiny|cpu|small|xlm15]" in text and "[default: auto]" in text
    assert "auto = xlm15 (the XLP paper's Table 6 model) on a GPU" in text
    assert "--lang-encoding [none|additive|attaching|xlp|vle]" in text
    ft = " ".join(_help(cli, ["finetune"]).split())
    assert "[default: xnli: 5e-06" not in ft  # (the list default is empty; the task default is in the help text)
    from xlp_cli import tasks

    assert "--task [" + "|".join(tasks.names("finetune")) + "]" in ft and "pos" in tasks.names("finetune")


def test_help_piped_at_80_columns_cuts_no_flag_name(tmp_path):
    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run([sys.executable, "-m", "xlp_cli", "prepare", "--help"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0
    assert "--mono-from-parallel / --no-mono-from-parallel" in r.stdout and "…" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines() if not line.lstrip().startswith(("xlp ", "--", "../"))) <= 80


@pytest.mark.parametrize("name", list(stages.STAGES))
def test_each_example_parses(name):
    spec = stages.STAGES[name]
    assert spec.example, f"{name}: no worked example"
    assert "Example:" in example_text(spec.example)
    for line in spec.example.splitlines():
        words = shlex.split(line.split("|")[-1])
        assert words[0] == "xlp"
        check(words[1:])  # real flags, real values, a config the stage accepts


def test_examples_check_catches_a_typo():
    with pytest.raises(Exception, match="sorce"):
        check(["prepare", "--sorce", "text"])


def test_python_m_and_completion():
    r = subprocess.run([sys.executable, "-m", "xlp_cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("xlp ")
    env = {**os.environ, "_XLP_COMPLETE": "complete_bash", "COMP_WORDS": "xlp pretrain --preset ", "COMP_CWORD": "3"}
    r = subprocess.run([sys.executable, "-m", "xlp_cli"], capture_output=True, text=True, env=env, timeout=60)
    assert set(r.stdout.split()) == {"auto", "tiny", "cpu", "small", "xlm15"}, r.stdout + r.stderr
    env.update(COMP_WORDS="xlp pre", COMP_CWORD="1")
    r = subprocess.run([sys.executable, "-m", "xlp_cli"], capture_output=True, text=True, env=env, timeout=60)
    assert {"prepare", "pretrain"} <= set(r.stdout.split())


@pytest.mark.parametrize("args, needle", [
    (["prepare", "--sorce", "text"], "xlp prepare: unknown flag --sorce (did you mean '--source'?)"),
    (["prepare", "--workers", "two"], "bad value for --workers: expected an integer, got 'two'"),
    (["pretrian"], "unknown command 'pretrian' (did you mean 'pretrain'?)"),
    (["bpe", "lern"], "unknown command 'lern' (did you mean 'learn'?)"),
    (["prepare", "--out"], "xlp prepare: option '--out' requires an argument"),
    (["prepare", "--source", "txt"], "'txt' (did you mean 'text'?)"),
    (["finetune", "--task", "xnli", "--beam", "3"], "--beam does not apply to --task xnli"),
])
def test_usage_errors_are_one_line(cli, args, needle):
    r = cli(*args)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert err.count("\n") == 0 and err.startswith("xlp: error: ") and needle in err, err
    assert "╭" not in err and "Usage:" not in err


def test_usage_errors_one_line_from_the_installed_command():
    r = subprocess.run([sys.executable, "-m", "xlp_cli", "prepare", "--sorce", "x"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "did you mean '--source'" in r.stderr


def test_toml_mistakes_name_the_line_and_the_closest_key(cli, tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('# prepare\nsource = "text"\n\nworkers = "lots"\n')
    r = cli("prepare", "--config", f)
    assert r.exit_code == 2 and r.stderr.strip() == (f"xlp: error: {f}:4: bad value for 'workers': expected an integer, got 'lots' (allowed: from 1 to 1024)")
    f.write_text('source = "text"\nsorce = "text"\n')
    r = cli("prepare", "--config", f)
    assert r.exit_code == 2 and f"{f}:2: unknown key 'sorce' (did you mean 'source'?)" in r.stderr
    assert "invalid literal" not in r.stderr


def test_recipe_key_mistake_names_its_line(cli, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('[recipe]\nout = "o"\n\n[prepare]\nsource = "gettext"\n\n[[pretrain]]\nname = "a"\nwarmup = 3\n'
                      '\n[[pretrain]]\nname = "b"\nwarmpu = 3\n')
    r = cli("run", recipe, "--dry-run")
    assert r.exit_code == 2 and f"{recipe}:13: [[pretrain]] b: unknown key 'warmpu' (did you mean 'warmup'?)" in r.stderr
    recipe.write_text('[[pretrain]]\nname = "a"\nmax-steps = -1\n')
    r = cli("run", recipe, "--dry-run")  # a value the stage refuses: the recipe table is named
    assert r.exit_code == 2 and f"{recipe}:3: [[pretrain]] a: " in r.stderr and "'max-steps': -1 (allowed" in r.stderr, r.stderr


def test_language_codes_are_normalised():
    from xlp_cli.core.config import from_dict
    from xlp_cli.prepare.config import PrepareConfig

    cfg = from_dict(PrepareConfig, {"source": "gettext", "lang": "EN,De,PT-BR,zh_TW"})
    assert cfg.lang == ["en", "de", "pt-BR", "zh_TW"]
    from xlp_cli.tasks.common import FINETUNE

    cfg = FINETUNE.build({"task": "translation", "directions": "DE-EN", "lang": ["DE", "En"], "data": ["x"]})
    assert cfg.directions == ["de-en"] and cfg.lang == ["de", "en"]


def test_summaries_round_numbers_and_count_in_words():
    assert ui.number(8022.362899420209) == "8,022" and ui.number(7.9969612313000535) == "7.997"
    assert ui.number(61440) == "61,440" and ui.number(True) == "True"
    assert ui.plural(1, "shard") == "1 shard" and ui.plural(3, "shard") == "3 shards"
    from rich.console import Console

    console = Console(record=True, width=100)
    ui.out, saved = console, ui.out
    try:
        ui.print_summary("x", {"tokens_per_s": 8022.362899420209, "best_valid_loss": 7.9969612313000535})
    finally:
        ui.out = saved
    text = console.export_text()
    assert "8,022" in text and "7.997" in text and "8022.36" not in text


def test_every_config_field_is_a_flag():
    for name, spec in stages.STAGES.items():
        config = stages.load(spec.config)
        fields = ({f.name for f, _, _ in config.fields()} if hasattr(config, "fields")
                  else {f.name for f in dataclasses.fields(config)})
        params = {p.name for p in _options(list(spec.command))} | {
            p.name for p in typer.main.get_command(app).commands.get(spec.command[0]).params} if len(spec.command) == 1 \
            else {p.name for p in _options(list(spec.command))}
        assert fields <= params | {"inputs", "recipe"}, (name, fields - params)


def test_main_builds_only_the_named_command():
    """`xlp CMD ...` builds CMD alone (start-up), every command for help, completion and a typo."""
    from xlp_cli.cli.app import named_stages

    assert named_stages(["prepare", "--lang", "en"]) == {"prepare"}
    assert named_stages(["bpe", "apply", "--codes", "c"]) == {"bpe-apply"}
    assert named_stages(["bpe"]) == named_stages(["bpe", "aply"]) == {"bpe", "bpe-apply"}
    assert named_stages([]) is named_stages(["--help"]) is named_stages(["prepar"]) is None
    # what a user sees is what the app with every command shows: the help of the command, and a typo's line
    for args in (["prepare", "--help"], ["bpe", "apply", "--help"], ["text", "--help"], ["prepar"],
                 ["prepare", "--lnag", "en"]):
        one = subprocess.run([sys.executable, "-m", "xlp_cli", *args], capture_output=True, text=True,
                             env=dict(os.environ, COLUMNS="100"))
        every = subprocess.run([sys.executable, "-c", "import sys; from xlp_cli.cli.app import app; "
                                "sys.exit(app(sys.argv[1:], standalone_mode=False, prog_name='xlp'))", *args],
                               capture_output=True, text=True, env=dict(os.environ, COLUMNS="100"))
        assert (one.returncode, one.stdout) == (every.returncode, every.stdout), args
        assert one.stdout or one.stderr


def test_xlp_text_starts_without_pyarrow_or_numpy():
    """`xlp text` (a filter in shell pipelines) loads neither pyarrow nor numpy; `xlp prepare` refuses pandas."""
    code = ("import sys; from xlp_cli.cli.entry import main; sys.argv = ['xlp'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pyarrow', 'numpy', 'pandas') if m in sys.modules), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, "text", "--lang", "en", "--tokenize", "xlm"],
                         input="Hello, World!\n", capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout == "hello , world !\n" and res.stderr.strip().splitlines()[-1] == "[]"


def test_the_collector_pauses_for_the_start_up_only():
    """The console script pauses the garbage collector for the start-up's imports; the stage runs with it on,
    and it is on again after the command (and after a command that stops before its stage: a usage error)."""
    code = ("import gc, sys; import xlp_cli.text.filter as f; from xlp_cli.cli.entry import main\n"
            "run = f.run\n"
            "def spy(cfg):\n    print('stage', gc.isenabled(), file=sys.stderr)\n    return run(cfg)\n"
            "f.run = spy; sys.argv = ['xlp'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code, file=sys.stderr)\n"
            "print('after', gc.isenabled(), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, "text", "--lang", "en"], input="Hello!\n", capture_output=True,
                         text=True)
    lines = res.stderr.strip().splitlines()
    assert "stage True" in lines and lines[-1] == "after True", res.stderr[-2000:]
    res = subprocess.run([sys.executable, "-c", code, "text", "--no-such-flag"], capture_output=True, text=True)
    assert res.stderr.strip().splitlines()[-2:] == ["exit 2", "after True"], res.stderr[-2000:]


def test_commands_start_without_pydantic():
    """typer_plain takes the flag values as click parsed them: no command imports pydantic (typer would, ~0.1 s),
    and the values still arrive typed (a repeated flag as a list, comma lists split, a bool flag, a bad number
    as the config's one line)."""
    code = ("import sys; from xlp_cli.cli.app import main; sys.argv = ['xlp'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code, 'pydantic' in sys.modules, file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, "prepare", "--help"], capture_output=True, text=True)
    assert res.stderr.strip().splitlines()[-1] == "exit 0 False", res.stderr[-2000:]
    res = subprocess.run([sys.executable, "-c", code, "prepare", "--workers", "two", "x.txt"], capture_output=True,
                         text=True)
    assert res.stderr.strip().splitlines()[-1] == "exit 2 False" and "--workers" in res.stderr, res.stderr
    from xlp_cli.cli.commands import build_config
    from xlp_cli.prepare.config import PrepareConfig

    cfg = build_config(PrepareConfig, None, {"lang": ["en,de", "fr"], "inputs": ["a.txt"], "dedup": False,
                                             "workers": "3", "out": "o"})
    assert cfg.lang == ["en", "de", "fr"] and cfg.dedup is False and cfg.workers == 3
