"""Generate unicode_tables.inc: the character tables the native text pipeline needs, frozen at generation time.

    python xlp_cli/text/csrc/gen_tables.py        # needs perl 5.36, Python 3.11, sacremoses and regex

Where each table comes from (so the native code reproduces each tool with the tables that tool uses):
- perl_*: perl 5.36's own classes (Unicode 14), as tokenizer.perl and remove-non-printing-char.perl see them
  on UTF-8 strings: \\p{IsAlnum} \\p{IsAlpha} \\p{IsN} \\p{IsLower} \\p{Ll} \\s \\p{C}.
- py_*: Python 3.11's str methods and unicodedata (Unicode 14): what XLM's lowercase_and_remove_accent.py
  uses (str.lower with Final_Sigma, NFD, category Mn, str.isspace), probed character by character.
- sac_*: sacremoses' character lists (its "moses" tokenizer classes, plus its viramas and nuktas), for the
  default `--tokenize moses` mode, which keeps sacremoses' output.
- re_*: the `regex` module's \\p{Latin}\\p{Greek} and \\p{Cyrillic}, used by `--lowercase safe`.
- prefixes: the nonbreaking-prefix files as sacremoses 0.2.0 ships them (Moses' lists; LGPL-2.1 data from
  mosesdecoder/scripts/share/nonbreaking_prefixes), parsed at run time the way each tool parses them.
"""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

MAX = 0x110000
OUT = Path(__file__).with_name("unicode_tables.inc")

PERL = r"""
no warnings;
my @cls = (['alnum', qr/\p{IsAlnum}/], ['alpha', qr/\p{IsAlpha}/], ['n', qr/\p{IsN}/], ['lower', qr/\p{IsLower}/],
           ['ll', qr/\p{Ll}/], ['space', qr/\s/], ['c', qr/\p{C}/]);
for my $c (@cls) {
  my ($name, $re) = @$c; my $start = -1; my @r;
  for my $cp (0..0x110000) {
    my $s = chr($cp); utf8::upgrade($s);
    my $in = $cp < 0x110000 && $s =~ $re;
    if ($in && $start < 0) { $start = $cp } elsif (!$in && $start >= 0) { push @r, "$start-" . ($cp - 1); $start = -1 }
  }
  print "$name ", join(" ", @r), "\n";
}
print "version $^V\n";
"""


def ranges(pred) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = -1
    for cp in range(MAX + 1):
        inside = cp < MAX and not 0xD800 <= cp < 0xE000 and pred(cp)
        if inside and start < 0:
            start = cp
        elif not inside and start >= 0:
            out.append((start, cp - 1))
            start = -1
    return out


def set_ranges(chars) -> list[tuple[int, int]]:
    cps = {ord(c) for c in chars}
    return ranges(cps.__contains__)


def perl_tables() -> dict[str, list[tuple[int, int]]]:
    res = subprocess.run(["perl", "-e", PERL], capture_output=True, text=True, check=True)
    tables = {}
    for line in res.stdout.splitlines():
        name, *items = line.split(" ")
        if name == "version":
            assert items == ["v5.36.0"], f"generate with perl 5.36.0 (Unicode 14), not {items}"
            continue
        rs = [tuple(int(x) for x in it.split("-")) for it in items]
        # surrogates are never valid text; keep the tables comparable with the Python ones
        tables[name] = [(a, b) for a, b in rs if not (0xD800 <= a and b < 0xE000)]
    return tables


def case_ignorable(cp: int) -> bool:
    """CPython's Case_Ignorable flag, probed through str.lower's Final_Sigma rule (see module doc)."""
    c = chr(cp)
    if cased(cp):
        return (c + "\u03a3").lower()[-1] == "\u03c3"
    return ("A\u03a3" + c + "B").lower()[1] == "\u03c3"


def cased(cp: int) -> bool:
    c = chr(cp)
    return c.islower() or c.isupper() or unicodedata.category(c) == "Lt"


def emit_ranges(f, name: str, rs: list[tuple[int, int]]) -> None:
    f.write(f"static const uint32_t {name}[] = {{  // {len(rs)} ranges\n")
    flat = [f"0x{a:X},0x{b:X}" for a, b in rs]
    for i in range(0, len(flat), 8):
        f.write("    " + ", ".join(flat[i:i + 8]) + ",\n")
    f.write("};\n")


def emit_rows(f, name: str, rows: list[list[int]], width: int, comment: str) -> None:
    f.write(f"static const uint32_t {name}[] = {{  // {len(rows)} rows of {width}: {comment}\n")
    flat = [",".join(f"0x{x:X}" for x in r + [0] * (width - len(r))) for r in rows]
    for i in range(0, len(flat), 6):
        f.write("    " + ", ".join(flat[i:i + 6]) + ",\n")
    f.write("};\n")


def main() -> None:
    assert sys.version_info[:2] == (3, 11) and unicodedata.unidata_version == "14.0.0", "generate with Python 3.11"
    import regex
    from sacremoses._data_nonbreaking_prefixes import NONBREAKING_PREFIXES
    from sacremoses.corpus import Perluniprops
    from sacremoses.indic import NUKTAS, VIRAMAS

    pup = Perluniprops()
    tables = {f"perl_{k}": v for k, v in perl_tables().items()}
    tables["sac_alnum"] = set_ranges(list(pup.chars("IsAlnum")) + VIRAMAS + NUKTAS)
    tables["sac_alpha"] = set_ranges(list(pup.chars("IsAlpha")) + VIRAMAS + NUKTAS)
    tables["sac_n"] = set_ranges(pup.chars("IsN"))
    tables["sac_lower"] = set_ranges(pup.chars("IsLower"))
    cjk = {"ko": ["Hangul"], "zh": ["Han"], "ja": ["Hiragana", "Katakana", "Han"]}
    for lang, cats in cjk.items():
        tables[f"sac_cjk_{lang}"] = set_ranges(c for cat in cats for c in pup.chars(cat))
    tables["py_space"] = ranges(lambda cp: chr(cp).isspace())
    tables["py_mn"] = ranges(lambda cp: unicodedata.category(chr(cp)) == "Mn")
    tables["py_cased"] = ranges(cased)
    tables["py_case_ignorable"] = ranges(case_ignorable)
    lg = regex.compile(r"[\p{Latin}\p{Greek}]")
    cy = regex.compile(r"\p{Cyrillic}")
    tables["re_latin_greek"] = ranges(lambda cp: bool(lg.match(chr(cp))))
    tables["re_cyrillic"] = ranges(lambda cp: bool(cy.match(chr(cp))))

    lower = []
    for cp in range(MAX):
        if 0xD800 <= cp < 0xE000 or cp == 0x130:  # U+0130 lowercases to two characters: handled in code
            continue
        lo = chr(cp).lower()
        if lo != chr(cp):
            assert len(lo) == 1, hex(cp)
            lower.append([cp, ord(lo)])
    assert "\u0130".lower() == "i\u0307"
    nfd = []
    for cp in range(MAX):
        if 0xD800 <= cp < 0xE000 or 0xAC00 <= cp <= 0xD7A3:  # Hangul syllables: decomposed by the algorithm
            continue
        d = unicodedata.normalize("NFD", chr(cp))
        if d != chr(cp):
            nfd.append([cp, len(d)] + [ord(x) for x in d])
    ccc = [[cp, unicodedata.combining(chr(cp))] for cp in range(MAX)
           if not 0xD800 <= cp < 0xE000 and unicodedata.combining(chr(cp))]
    generic = regex.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
    safe = []
    for cp in range(0x80, 0x2200):  # as xlp_cli/text/case.py built it: precomposed Latin/Greek minus generic marks
        d = unicodedata.normalize("NFD", chr(cp))
        if d == chr(cp) or not lg.match(d[0]):
            continue
        kept = d[0] + "".join(m for m in d[1:] if not generic.match(m))
        if kept != chr(cp):
            safe.append([cp, len(kept)] + [ord(x) for x in kept])

    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write("// Generated by gen_tables.py (see its docstring for the sources of each table). Do not edit.\n")
        f.write("// Ranges are inclusive [lo, hi] pairs, sorted.\n#pragma once\n#include <cstdint>\n\n")
        for name, rs in tables.items():
            emit_ranges(f, "T_" + name.upper(), rs)
        emit_rows(f, "T_PY_LOWER", lower, 2, "code point, str.lower() (one character)")
        emit_rows(f, "T_PY_NFD", nfd, 6, "code point, length, NFD characters")
        emit_rows(f, "T_PY_CCC", ccc, 2, "code point, canonical combining class")
        emit_rows(f, "T_SAFE_FOLD", safe, 6, "code point, length, the letter without generic diacritics")
        f.write("\n// Nonbreaking-prefix files (file suffix, exact contents), as sacremoses 0.2.0 ships them.\n")
        f.write("static const char *const T_PREFIX_FILES[][2] = {\n")
        for name in sorted(NONBREAKING_PREFIXES):
            if not name.startswith("nonbreaking_prefix."):
                continue
            body = NONBREAKING_PREFIXES[name]
            assert ")XLP\"" not in body
            f.write(f'    {{"{name.split(".", 1)[1]}", R"XLP({body})XLP"}},\n')
        f.write("};\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
