"""`--source text`: plain text, one document or sentence per line.

Language: with one `--lang`, every file is in it. With several, each file's name must declare one of
them in a dot-separated part (`news.de.txt`, `train.fr.gz`); a file that names none is bad input.
Plain, .gz, .bz2 or .xz (recognised by content). Blank lines are skipped; surrounding whitespace is
stripped. Invalid UTF-8 is reported with file and line (a counted skip with `--on-error skip`). A file
with no text line at all is bad input (a counted skip with `--on-error skip`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

from xlp_cli.errors import BadInput
from xlp_cli.prepare.sources import expand_inputs
from xlp_cli.prepare.records import ErrorPolicy, Mono, SourceOptions
from xlp_cli.prepare.sources._files import iter_lines, lang_from_name

NAME = "text"


def file_lang(path: Path, langs: list[str]) -> str:
    if len(langs) == 1:
        return langs[0]
    lang = lang_from_name(path, langs)
    if lang is None:
        named = lang_from_name(path, [])
        if named and langs:
            raise BadInput(f"the file name says language {named!r}, which is not among --lang {','.join(langs)}", path=path)
        want = f"one of {','.join(langs)}" if langs else "a language code"
        raise BadInput(f"cannot tell the language: give a single --lang, or name the file like NAME.xx.txt with xx {want}",
                       path=path)
    return lang


def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    inputs = expand_inputs(inputs)
    per_lang: Counter[str] = Counter()
    for path in inputs:
        lang = file_lang(path, opts.langs)
        if opts.max_records and per_lang[lang] >= opts.max_records:
            continue
        got = 0
        for n, line in iter_lines(path, errors):
            line = line.strip()
            if not line:
                continue
            got += 1
            per_lang[lang] += 1
            yield Mono(lang, line, NAME, f"{path}:{n}")
            if opts.max_records and per_lang[lang] >= opts.max_records:
                break
        if got == 0:
            errors.bad("empty file: no text lines", path=path)
