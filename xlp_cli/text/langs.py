"""Which language codes xlp knows, and how a code maps to the tools that process it.

Known: the ISO 639-1 two-letter codes, plus the ISO 639-3 codes that sacremoses has non-breaking prefixes
for (mni, tdt, yue) and a few more that OPUS and Common Voice use. A known base code may carry a region or
script suffix (`pt-BR`, `zh_TW`, `sr-Latn`) and a gettext modifier (`sr@latin`). Anything else is an
unknown language code (a typo such as `eng` or `english`), which `xlp prepare` refuses.
"""

from __future__ import annotations

import re

ISO_639_1 = frozenset(
    """aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv
    dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii
    ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk
    ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc
    sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve
    vi vo wa wo xh yi yo za zh zu""".split()
)
# ISO 639-3 codes the tokenizers know (sacremoses prefixes) or that OPUS / Common Voice / gettext use.
EXTRA_639_3 = frozenset("mni tdt yue fil ast ckb kab ber hsb dsb sah cnh ckb crh frp fur hil mai sat szl yue".split())

_CODE = re.compile(r"^(?P<base>[a-z]{2,3})(?:[-_][A-Za-z0-9]{2,8})*(?:@[a-z]+)?$")


def base_lang(code: str) -> str:
    """`pt-BR` -> `pt`, `zh_TW` -> `zh`, `sr@latin` -> `sr`; the code the tools are chosen by."""
    m = _CODE.match(code)
    return m.group("base") if m else code.lower()


def is_known(code: str) -> bool:
    m = _CODE.match(code)
    return bool(m) and (m.group("base") in ISO_639_1 or m.group("base") in EXTRA_639_3)


def safe_folder_name(code: str) -> bool:
    """A language code that can be used as an output folder name as is."""
    return bool(re.fullmatch(r"[A-Za-z0-9_@.]+(?:-[A-Za-z0-9_@.]+)*", code)) and code not in (".", "..")
