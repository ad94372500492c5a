"""XlpTokenizer: xlp's own text pipeline as a transformers tokenizer (copied into exports, loaded by
`AutoTokenizer.from_pretrained(OUT, trust_remote_code=True)`; xlp itself never imports this module).

    tok = AutoTokenizer.from_pretrained(OUT, trust_remote_code=True)
    enc = tok("Das Kind lädt.", lang="de", return_tensors="pt")   # input_ids, attention_mask, langs
    model(**enc)

It runs what xlp ran on the training text, read from OUT/tokenizer/ + OUT/dict.txt (xlp_cli.bpe.encoder
.TextEncoder): Moses normalization and tokenization (perl-exact in `--tokenize xlm`), jieba/pythainlp, every
`--lowercase` mode, then fastBPE with its vocabulary limit (or SentencePiece). So its ids are xlp's, and its
vocabulary is dict.txt's, the model's. It needs xlp installed (it imports xlp_cli); without xlp, load the stock
XLMTokenizer (no trust_remote_code) and read the export's README for what it does not reproduce.

`lang` (default: tokenizer_config.json's `default_lang`, the model's first language) picks the language rules
and fills the `langs` output with its index in `lang2id`; one call tokenizes one language.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformers import PreTrainedTokenizer

try:
    from xlp_cli.bpe.encoder import TextEncoder
except ImportError as e:  # the one dependency beyond transformers
    raise ImportError("XlpTokenizer runs xlp's own text pipeline and needs xlp installed (pip install xlp); without "
                      "it, load the stock XLMTokenizer: AutoTokenizer.from_pretrained(folder) without "
                      "trust_remote_code") from e

VOCAB_FILES_NAMES = {"vocab_file": "dict.txt", "pipeline_file": "tokenizer/xlp_tokenizer.json",
                     "codes_file": "tokenizer/codes", "bpe_vocab_file": "tokenizer/vocab",
                     "spm_file": "tokenizer/spm.model"}


class XlpTokenizer(PreTrainedTokenizer):
    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, lang2id=None, default_lang=None, bos_token="</s>", eos_token="</s>",
                 sep_token="</s>", cls_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<special1>",
                 **kwargs):
        for key in VOCAB_FILES_NAMES:  # found beside vocab_file (the same folder layout as the export)
            kwargs.pop(key, None)
        self.folder = Path(vocab_file).parent
        self.text_encoder = TextEncoder.load(self.folder)
        self.words = list(self.text_encoder.dictionary.words)
        self.index = self.text_encoder.dictionary.index
        self.kind = self.text_encoder.tokenizer.kind
        self.lang2id = {str(k): int(v) for k, v in (lang2id or {}).items()}
        self.default_lang = default_lang or next(iter(self.lang2id), "en")
        self._lang, self._call_lang = self.default_lang, None
        super().__init__(bos_token=bos_token, eos_token=eos_token, sep_token=sep_token, cls_token=cls_token,
                         pad_token=pad_token, unk_token=unk_token, mask_token=mask_token, lang2id=self.lang2id,
                         default_lang=self.default_lang, **kwargs)

    def __getstate__(self):  # (datasets.map pickles tokenizers; xlp's native codec is rebuilt from the folder)
        state = dict(self.__dict__)
        state["text_encoder"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.text_encoder = TextEncoder.load(self.folder)

    # ------------------------------------------------------------ the language of a call
    def _checked(self, lang):
        if self.lang2id and lang not in self.lang2id:
            raise ValueError(f"lang={lang!r} is not a language of this model ({', '.join(self.lang2id)})")
        return lang

    def __call__(self, *args, lang=None, **kwargs):
        lang = self._checked(lang or self.default_lang)
        self._call_lang = lang
        try:
            enc = super().__call__(*args, **kwargs)
        finally:
            self._call_lang = None
        ids = enc.get("input_ids") if hasattr(enc, "get") else None
        if ids is not None:
            enc["langs"] = _filled(ids, self.lang2id.get(lang, 0))
        return enc

    def tokenize(self, text, lang=None, **kwargs):
        self._lang = self._checked(lang) if lang else (self._call_lang or self.default_lang)
        return super().tokenize(text, **kwargs)

    # ------------------------------------------------------------ text <-> tokens <-> ids
    @property
    def vocab_size(self):
        return len(self.words)

    def get_vocab(self):
        return dict(self.index)

    def _tokenize(self, text, **kwargs):
        return self.text_encoder.subwords([text], self._lang)[0].split()

    def _convert_token_to_id(self, token):
        return self.index.get(token, self.index[str(self.unk_token)])

    def _convert_id_to_token(self, index):
        return self.words[index] if 0 <= index < len(self.words) else str(self.unk_token)

    def convert_tokens_to_string(self, tokens):
        if self.kind == "sentencepiece":
            return "".join(tokens).replace("\u2581", " ").strip()
        return (" ".join(tokens) + " ").replace("@@ ", "").strip()

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        """`</s> A </s>` and `</s> A </s> B </s>`, as xlp's streams and XNLI build sentences."""
        eos = [self.eos_token_id]
        return eos + token_ids_0 + eos + ([] if token_ids_1 is None else token_ids_1 + eos)

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        if already_has_special_tokens:
            return super().get_special_tokens_mask(token_ids_0, token_ids_1, already_has_special_tokens=True)
        mask = [1] + [0] * len(token_ids_0) + [1]
        return mask + ([] if token_ids_1 is None else [0] * len(token_ids_1) + [1])

    def save_vocabulary(self, save_directory, filename_prefix=None):
        os.makedirs(save_directory, exist_ok=True)
        self.text_encoder.save(Path(save_directory))  # dict.txt + tokenizer/ (xlp's atomic writes)
        folder = Path(save_directory)
        return tuple(str(folder / rel) for rel in VOCAB_FILES_NAMES.values() if (folder / rel).is_file())


def _filled(ids, value):
    """`ids`' shape (a list, nested lists, a tensor or an array) filled with `value`."""
    if hasattr(ids, "new_full"):
        return ids.new_full(ids.shape, value)
    if hasattr(ids, "shape") and hasattr(ids, "fill"):
        out = ids.copy()
        out.fill(value)
        return out
    if isinstance(ids, (list, tuple)):
        return [_filled(x, value) for x in ids]
    return value
