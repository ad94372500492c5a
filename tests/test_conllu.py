"""The CoNLL-U reader: multi-word tokens and empty nodes as UD defines them, on written fixtures and real treebanks;
a broken line is a one-line error naming the file and line."""

from __future__ import annotations

import gzip

import pytest

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.conllu import read_conllu, treebank_files

# UD's own examples of the two constructs (format.html): a Spanish multi-word token and an English empty node
FIXTURE = """# sent_id = es-1
# text = Vámonos al mar.
1-2\tVámonos\t_\t_\t_\t_\t_\t_\t_\t_
1\tVamos\tir\tVERB\t_\t_\t0\troot\t_\t_
2\tnos\tnosotros\tPRON\t_\t_\t1\tobj\t_\t_
3-4\tal\t_\t_\t_\t_\t_\t_\t_\t_
3\ta\ta\tADP\t_\t_\t5\tcase\t_\t_
4\tel\tel\tDET\t_\t_\t5\tdet\t_\t_
5\tmar\tmar\tNOUN\t_\t_\t1\tobl\t_\tSpaceAfter=No
6\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_

# sent_id = en-2
# text = Sue likes coffee and Bill tea
1\tSue\tSue\tPROPN\t_\t_\t2\tnsubj\t2:nsubj|5.1:nsubj\t_
2\tlikes\tlike\tVERB\t_\t_\t0\troot\t0:root\t_
3\tcoffee\tcoffee\tNOUN\t_\t_\t2\tobj\t2:obj\t_
4\tand\tand\tCCONJ\t_\t_\t5.1\tcc\t5.1:cc\t_
5\tBill\tBill\tPROPN\t_\t_\t3\tconj\t5.1:nsubj\t_
5.1\tlikes\tlike\tVERB\t_\t_\t_\t_\t2:conj\tCopyOf=2
6\ttea\ttea\tNOUN\t_\t_\t5\torphan\t5.1:obj\t_

# no text comment: the surface text is rebuilt from the tokens and SpaceAfter
1-2\tdu\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No
1\tde\tde\tADP\t_\t_\t3\tcase\t_\t_
2\tle\tle\tDET\t_\t_\t3\tdet\t_\t_
3\tpain\tpain\tNOUN\t_\t_\t0\troot\t_\t_
"""


def test_multi_word_tokens_and_empty_nodes(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(FIXTURE, encoding="utf-8")
    es, en, fr = read_conllu(path)
    # words are the syntactic words (what UPOS labels); the multi-word token is the surface form
    assert [(w.form, w.upos) for w in es.words] == [("Vamos", "VERB"), ("nos", "PRON"), ("a", "ADP"), ("el", "DET"),
                                                   ("mar", "NOUN"), (".", "PUNCT")]
    assert [f for f, _ in es.tokens] == ["Vámonos", "al", "mar", "."]
    assert es.id == "es-1" and es.text == "Vámonos al mar."
    # the empty node 5.1 is neither a word nor part of the surface text
    assert [w.form for w in en.words] == ["Sue", "likes", "coffee", "and", "Bill", "tea"]
    assert en.text == "Sue likes coffee and Bill tea"
    en.comment_text = None
    assert en.text == "Sue likes coffee and Bill tea"
    assert [w.form for w in fr.words] == ["de", "le", "pain"] and fr.text == "dupain"  # SpaceAfter=No on `du`
    assert fr.id == "x.conllu:23" and fr.line == 23


@pytest.mark.parametrize("line, message", [
    ("1\tVamos\tir\tVERB\t_\t_\t0\troot\t_", "a word line needs 10 tab-separated fields, this one has 9"),
    ("x\tVamos\tir\tVERB\t_\t_\t0\troot\t_\t_", "bad ID 'x' (expected n, n-m or n.k)"),
    ("3\tVamos\tir\tVERB\t_\t_\t0\troot\t_\t_", "word ID 3 out of order (expected 1)"),
])
def test_broken_line_is_one_line_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "broken.conllu.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("# sent_id = a\n1\tOk\tok\tINTJ\t_\t_\t0\troot\t_\t_\n\n# sent_id = b\n" + line + "\n\n")
    with pytest.raises(BadInput) as e:
        list(read_conllu(path))
    assert str(e.value) == f"{path}:5: {message}"


def test_multi_word_range_must_cover_the_following_words(tmp_path):
    path = tmp_path / "r.conllu"
    path.write_text("1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n1\tde\tde\tADP\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"r\.conllu:3: multi-word token covers word 2, but the sentence has 1 words"):
        list(read_conllu(path))


@pytest.mark.integration
def test_real_treebanks_rebuild_their_text_from_tokens(shared_data):
    """On real UD files with many multi-word tokens (fr, es, de, tr) and empty nodes (EWT), the surface tokens
    joined by SpaceAfter give back every `# text` exactly, and the word counts are those of the SOURCE.md table."""
    root = shared_data / "ud_treebanks"
    counts = {"UD_English-EWT/en_ewt-ud-dev.conllu.gz": (2001, 25147),       # 359 MWT lines, 4 empty nodes
              "UD_French-GSD/fr_gsd-ud-test.conllu.gz": (416, 10018),        # 280 MWT lines
              "UD_Spanish-GSD/es_gsd-ud-test.conllu.gz": (427, 12002),
              "UD_German-PUD/de_pud-ud-test.conllu.gz": (1000, 21332),
              "UD_Turkish-IMST/tr_imst-ud-test.conllu.gz": (1100, 10032)}
    for rel, (n_sent, n_words) in counts.items():
        sents = list(read_conllu(root / rel))
        assert (len(sents), sum(len(s.words) for s in sents)) == (n_sent, n_words), rel
        for s in sents:
            given, s.comment_text = s.comment_text, None
            assert s.text == given, (rel, s.id)
    langs = {(lang, split) for lang, split, _ in treebank_files(root)}
    assert {("en", "test"), ("en", "dev"), ("sw", "other"), ("zh", "train"), ("ar", "test")} <= langs
