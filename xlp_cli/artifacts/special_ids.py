"""The one table of special token ids: XLM's dictionary layout, shared by the dictionary, the data and the models.

    <s>=0  </s>=1  <pad>=2  <unk>=3  <special0>..<special9>=4..13  (MASK is <special1>=5)  words from 14 on

Sentences are stored without `</s>`; streams and models add it. Nothing here imports torch.
"""

from __future__ import annotations

SPECIAL_TOKENS: tuple[str, ...] = ("<s>", "</s>", "<pad>", "<unk>") + tuple(f"<special{i}>" for i in range(10))
BOS, EOS, PAD, UNK = 0, 1, 2, 3
MASK = 5                           # <special1>, XLM's mask token
N_SPECIAL = len(SPECIAL_TOKENS)    # 14: the id of the first word
