"""Builds xlp's native parts: the BPE merge learner and applier (xlp_cli/bpe/_learnbpe.cpp, xlp_cli/bpe/csrc/) and the text pipeline
(xlp_cli/text/csrc/*.cpp: Moses normalization and tokenization, the lowercase modes, wikitext -> text).

Everything else (metadata, dependencies) lives in pyproject.toml. `pip install -e .` / `make setup`
compile the extensions with the system C++ compiler (g++ or clang++, C++17).
"""

from setuptools import Extension, setup

CXX = ["-O3", "-std=c++17"]
TEXT = ["unicode", "normalize", "prefixes", "tokenize", "case", "hashes", "vocab", "wikitext", "bz2blocks", "bz2decode", "dumpxml", "module"]

setup(
    ext_modules=[
        Extension("xlp_cli.bpe._learnbpe", sources=["xlp_cli/bpe/_learnbpe.cpp"], language="c++",
                  extra_compile_args=CXX),
        Extension("xlp_cli.bpe._applybpe", sources=["xlp_cli/bpe/csrc/model.cpp", "xlp_cli/bpe/csrc/applier.cpp"],
                  depends=["xlp_cli/bpe/csrc/bpe.h", "xlp_cli/bpe/csrc/applier.h", "xlp_cli/text/csrc/utf8.h"],
                  language="c++",
                  extra_compile_args=CXX + ["-pthread"], extra_link_args=["-pthread"]),
        Extension("xlp_cli.text._native", sources=[f"xlp_cli/text/csrc/{m}.cpp" for m in TEXT],
                  depends=["xlp_cli/text/csrc/text.h", "xlp_cli/text/csrc/unicode_tables.inc"],
                  language="c++", extra_compile_args=CXX),
    ],
)
