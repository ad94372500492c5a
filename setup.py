"""Builds xlp's one native part: the BPE merge learner (xlp_cli/bpe/_learnbpe.cpp).

Everything else (metadata, dependencies) lives in pyproject.toml. `pip install -e .` / `make setup`
compile the extension with the system C++ compiler (g++ or clang++, C++17).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "xlp_cli.bpe._learnbpe",
            sources=["xlp_cli/bpe/_learnbpe.cpp"],
            language="c++",
            extra_compile_args=["-O3", "-std=c++17"],
        )
    ],
)
