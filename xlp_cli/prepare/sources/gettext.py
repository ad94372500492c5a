"""`--source gettext`: the machine's translation catalogs as an English -> xx parallel corpus (the offline default).

Every Linux machine carries gettext catalogs, the material of OPUS's GNOME/KDE/Ubuntu corpora.

- Where: without inputs, `<root>/<locale>/LC_MESSAGES/*.mo` (and `.po`) under `DEFAULT_ROOTS`
  (/usr/share/locale, /usr/local/share/locale, /usr/share/locale-langpack) and every `.mo`/`.po` file in
  a `LC_MESSAGES` or `locale(s)` folder inside the running Python's site-packages. Inputs replace these:
  a folder is scanned the same way, a file is read as a catalog.
- Formats: binary `.mo` (both byte orders, read with `struct`; offsets are checked, so a corrupt catalog is
  bad input naming the file and the byte offset) and `.po` text (msgctxt/msgid/msgid_plural/msgstr[n],
  continuation lines, C escapes; a syntax error names file and line). The charset comes from the
  catalog header (default UTF-8).
- Entries: the header (empty msgid), `#, fuzzy` and obsolete (`#~`) entries, empty translations, and
  translations identical to their msgid are skipped. Plurals: the singular msgid with `msgstr[0]`.
  Contexts (`msgctxt`) are dropped from the text.
- Text cleanup (both sides): keyboard accelerators (`_File`, `&Open`, `(_F)`, `(&F)`), printf/Python/
  Qt/brace placeholders (`%s`, `%2$d`, `%(name)s`, `{0}`, `{name}`, `%1`), the quotes or brackets they
  leave empty, and `\\t` are removed;
  whitespace is collapsed. Multi-line messages whose two sides have the same number of non-empty lines
  are split into line pairs; otherwise the lines are joined with spaces. Entries with no letter left
  are skipped.
- Languages: a locale folder name is reduced to its language (`de_DE` -> de, `pt_BR` -> pt,
  `zh_CN` -> zh). For each text domain and language one catalog is read: the plain one (`de` over
  `de_CH`), else the preferred region (`PREFERRED_REGION`: zh_CN, pt_BR, ...), else the first by
  name. Locales with a `@modifier` (`sr@latin`, `en@quot`) and English locales are not targets.
  `--lang` selects target languages (en is always the source side).
- Records: Pair("en", xx) per entry; with `--mono-from-parallel`, also Mono(xx) per translation and
  Mono("en") once per distinct English message.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import sysconfig
from collections import Counter
from pathlib import Path
from typing import Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources.gettext_catalogs import catalog_entries, parse_mo  # noqa: F401 (parse_mo re-exported)

NAME = "gettext"
DEFAULT_ROOTS = (Path("/usr/share/locale"), Path("/usr/local/share/locale"), Path("/usr/share/locale-langpack"))
PREFERRED_REGION = {"zh": "zh_CN", "pt": "pt_BR", "en": "en_US", "es": "es_ES", "fr": "fr_FR", "de": "de_DE",
                    "ar": "ar_SA", "bn": "bn_BD", "sr": "sr_RS", "nb": "nb_NO", "ro": "ro_RO"}

_ACCEL_PAREN = re.compile(r"\s*\((?:_|&)[^\s)]\)")  # CJK style "(_F)" / "(&F)"
_ACCEL = re.compile(r"(?<![\w&])[_&](?=\w)")  # "_File", "&Open" (not "a_b" nor "&&")
_PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+#0'_^]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?[diouxXeEfFgGaAcspnm]"
    r"|%\([^)]*\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrs]"  # %(name)s
    r"|%\d+"  # Qt %1
    r"|\{[A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}"  # {0} {name} {x:>3}
    r"|\$\{?[A-Z_][A-Z0-9_]*\}?"  # $VAR ${VAR}
)
_EMPTY_PAIR = re.compile(r"[“\"'‘«»„‚「『(\[]\s*[”\"'’»«“‘」』)\]]")  # quotes/brackets a placeholder left empty


# ------------------------------------------------------------------ locating catalogs
def locale_lang(locale: str) -> str | None:
    """`de_DE` -> de, `pt_BR` -> pt, `zh_Hans` -> zh; None for `sr@latin`-style variants and non-locales."""
    if "@" in locale or locale in ("C", "POSIX"):
        return None
    m = re.fullmatch(r"([a-z]{2,3})(?:[_-][A-Za-z0-9]{2,8})*(?:\.[\w-]+)?", locale)
    return m.group(1) if m else None


def _rank(locale: str, lang: str) -> tuple[int, str]:
    base = locale.split(".")[0]
    if base == lang:
        return (0, base)
    if PREFERRED_REGION.get(lang) == base:
        return (1, base)
    return (2, base)


def find_catalogs(inputs: list[Path]) -> list[tuple[str, str, Path]]:
    """(lang, locale, path) of the catalogs to read, one per (text domain, language)."""
    found: list[tuple[str, Path]] = []  # (locale, path)
    if inputs:
        for p in inputs:
            if p.is_dir():
                found.extend(_scan(p))
            elif p.suffix in (".mo", ".po"):
                found.append((_locale_of(p), p))
                if locale_lang(found[-1][0]) is None:  # (a catalog the user named is never passed over)
                    raise BadInput(f"cannot tell the language of this catalog: {found[-1][0]!r} is not a locale "
                                   "(name it LOCALE/LC_MESSAGES/DOMAIN.mo or LOCALE.po)", path=p)
            else:
                raise BadInput("not a gettext catalog (.mo or .po) or a folder of them", path=p)
    else:
        for root in DEFAULT_ROOTS:
            if root.is_dir():
                found.extend(_scan(root))
        for sp in _site_packages():
            found.extend(_scan(sp, only_locale_dirs=True))
    best: dict[tuple[str, str], tuple[tuple[int, str], str, Path]] = {}
    for locale, path in found:
        lang = locale_lang(locale)
        if lang is None or lang == "en":
            continue
        domain = f"{path.parent.parent.parent}|{path.stem}" if path.parent.name == "LC_MESSAGES" else str(path)
        rank = _rank(locale, lang)
        key = (domain, lang)
        if key not in best or rank < best[key][0]:
            best[key] = (rank, locale, path)
    return sorted(((lang, locale, path) for (_, lang), (_, locale, path) in best.items()), key=lambda t: str(t[2]))


def _locale_of(path: Path) -> str:
    """The locale a catalog path names: `.../de/LC_MESSAGES/x.mo` -> de, `po/pt_BR.po` -> pt_BR."""
    if path.parent.name == "LC_MESSAGES":
        return path.parent.parent.name
    return path.stem


def _scan(root: Path, only_locale_dirs: bool = False) -> list[tuple[str, Path]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git", "node_modules"))
        in_messages = os.path.basename(dirpath) == "LC_MESSAGES"
        if only_locale_dirs and not in_messages and "locale" not in dirpath.lower():
            continue
        for fn in sorted(filenames):
            if fn.endswith((".mo", ".po")):
                p = Path(dirpath) / fn
                out.append((_locale_of(p), p))
    return out


def _site_packages() -> list[Path]:
    paths = {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")}
    paths |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return sorted(Path(p) for p in paths if p and Path(p).is_dir())


# ------------------------------------------------------------------ cleaning
def clean_message(s: str, accel: str | None = None) -> str:
    """Remove placeholders and keyboard accelerators. `accel` ('_' or '&'): the msgid marks an accelerator
    with it, so its first use before a letter is removed anywhere in `s` (translations put it mid-word:
    `Datei ö_ffnen`); without it only a marker at a word start counts (`snake_case` names stay)."""
    if "\t" in s:
        s = s.replace("\t", " ")
    if "(" in s:
        s = _ACCEL_PAREN.sub("", s)
    if "%" in s or "{" in s or "$" in s:
        s = _PLACEHOLDER.sub(" ", s.replace("%%", "%"))  # a literal "%%s" is a placeholder for later: goes too
    if accel and accel in s:
        s = _ACCEL_ANYWHERE[accel].sub("", s, count=1)
    if "_" in s or "&" in s:
        s = _ACCEL.sub("", s).replace("&&", "&")
    s = _EMPTY_PAIR.sub(" ", s)
    return " ".join(s.split()).strip(" :")


_ACCEL_ANYWHERE = {c: re.compile(rf"(?<!{re.escape(c)}){re.escape(c)}(?=\w)") for c in "_&"}
_LETTER = re.compile(r"[^\W\d_]")


def accelerator(msgid: str) -> str | None:
    """'_' or '&' when the English message marks a keyboard accelerator with it."""
    if "_" not in msgid and "&" not in msgid:
        return None
    m = _ACCEL.search(_PLACEHOLDER.sub(" ", msgid))
    return m.group(0) if m else None


def message_pairs(msgid: str, msgstr: str) -> list[tuple[str, str]]:
    """Cleaned (English, translation) pairs of one catalog entry; [] when it has no usable text."""
    if "\x04" in msgid:
        msgid = msgid.split("\x04", 1)[1]
    if "\x00" in msgid:
        msgid, msgstr = msgid.split("\x00", 1)[0], msgstr.split("\x00", 1)[0]
    if not msgstr.strip() or msgstr == msgid:
        return []
    if "\n" in msgid or "\n" in msgstr:
        a = [x for x in msgid.split("\n") if x.strip()]
        b = [x for x in msgstr.split("\n") if x.strip()]
        pairs = list(zip(a, b)) if len(a) == len(b) else [(" ".join(a), " ".join(b))]
    else:
        pairs = [(msgid, msgstr)]
    accel = accelerator(msgid)
    out = []
    for x, y in pairs:
        x, y = clean_message(x, accel), clean_message(y, accel)
        if x and y and x != y and _LETTER.search(x) and _LETTER.search(y):
            out.append((x, y))
    return out


# ------------------------------------------------------------------ reader
def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    catalogs = find_catalogs(inputs)
    if not catalogs:
        where = ", ".join(str(p) for p in inputs[:3]) if inputs else ", ".join(str(r) for r in DEFAULT_ROOTS)
        raise BadInput(f"no .mo/.po catalog of a non-English language found (looked in {where})")
    targets = [lang for lang in opts.langs if lang != "en"]
    want_en_mono = opts.mono_from_parallel and (not opts.langs or "en" in opts.langs)
    seen_en: set[bytes] = set()
    per_pair: Counter[str] = Counter()
    per_lang: Counter[str] = Counter()
    for lang, _locale, path in catalogs:
        if targets and lang not in targets:
            continue
        if opts.max_records and per_pair[lang] >= opts.max_records:
            continue
        for i, msgid, msgstr in catalog_entries(path, errors):
            for en, xx in message_pairs(msgid, msgstr):
                origin = f"{path}:{i}"
                per_pair[lang] += 1
                yield Pair("en", lang, en, xx, NAME, origin)
                if opts.mono_from_parallel:
                    per_lang[lang] += 1
                    yield Mono(lang, xx, NAME, origin)
                    if want_en_mono:
                        h = hashlib.blake2b(en.encode("utf-8"), digest_size=8).digest()
                        if h not in seen_en:
                            seen_en.add(h)
                            yield Mono("en", en, NAME, origin)
            if opts.max_records and per_pair[lang] >= opts.max_records:
                break


def count_pairs(langs: list[str] | None = None) -> dict[str, int]:
    """Pairs per language on this machine (for docs and demos): `python -m xlp_cli.prepare.sources.gettext`."""
    counts: Counter[str] = Counter()
    for r in read([], SourceOptions(langs=langs or []), ErrorPolicy("skip")):
        counts[r.lang2] += 1
    return dict(counts)


if __name__ == "__main__":  # pragma: no cover - a measuring aid
    import json

    print(json.dumps(count_pairs(sys.argv[1].split(",") if len(sys.argv) > 1 else None), indent=1))
