// Python module xlp_cli.text._native: the text pipeline over lists of str or over UTF-8 byte blocks.
//
//   Pipeline(lang, clean, normalize, tokenize, lowercase)   tokenize: 0 none, 1 moses, 2 xlm
//                                                           lowercase: 0 none, 1 safe, 2 xlm
//     .run(list[str], stage) -> list[str]                   stage: 0 all, 1 before the tokenizer, 2 after it,
//                                                           3 the tokenizer alone, 4 the `raw` column
//                                                           (zh, th: xlp runs its segmenter between 1 and 2)
//     .run_bytes(bytes, stage, max_line) -> (bytes, [(line index, problem)])
//     .pages(Wikitext, list[bytes | str], ...) -> columns  Wikipedia pages to prepare's columns (process.py)
//   check_lines(bytes, max_line) -> [(line index, problem)]   the checks of run_bytes alone
//   normalize(str, lang) / remove_non_printing(str) / lowercase(str, mode)
//   xlm_vocab(bytes, specials)                                XLM's read_vocab (vocab.cpp)
//   bz2_magics / bz2_bits / bz2_block                         a .bz2 stream's blocks (bz2blocks.cpp)
//   bz2_decode                                                one bzip2 block, decoded (bz2decode.cpp)
//   DumpParser()                                              a MediaWiki dump's pages, from expat (dumpxml.cpp)
// The work runs without the GIL, so threads can share the cores.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "text.h"

namespace xlp { PyObject *py_xlm_vocab(PyObject *, PyObject *); }  // vocab.cpp
namespace xlp {  // bz2blocks.cpp
PyObject *py_bz2_magics(PyObject *, PyObject *);
PyObject *py_bz2_bits(PyObject *, PyObject *);
PyObject *py_bz2_block(PyObject *, PyObject *);
PyObject *py_bz2_decode(PyObject *, PyObject *);  // bz2decode.cpp
}  // namespace xlp
namespace xlp { int add_dumpxml(PyObject *); }  // dumpxml.cpp
namespace xlp {                                             // wikitext.cpp
int add_wikitext(PyObject *);
const void *wikitext_rules(PyObject *);
std::vector<std::string> wikitext_paragraphs(const void *rules, const std::string &text);
}  // namespace xlp

namespace {

using xlp::U32;

enum { TOK_NONE = 0, TOK_MOSES = 1, TOK_XLM = 2 };
enum { LOW_NONE = 0, LOW_SAFE = 1, LOW_XLM = 2 };
enum { STAGE_ALL = 0, STAGE_PRE = 1, STAGE_POST = 2, STAGE_TOKENIZE = 3, STAGE_RAW = 4 };

struct Config {
    std::string lang;
    bool clean = true, normalize = true;
    int tok = TOK_MOSES, low = LOW_SAFE;
    std::unique_ptr<xlp::Tokenizer> tokenizer;

    // XLM (tokenize.sh) order: normalize, then clean; xlp's moses/none order: clean, normalize, clean.
    void before(U32 &s) const {
        const bool xlm = tok == TOK_XLM;
        if (clean && !xlm) xlp::remove_non_printing(s);
        if (normalize) {
            xlp::normalize_line(s, lang);  // (with the newline perl reads: it matters for `."\n`; then chomped)
        }
        if (clean && (xlm || normalize)) xlp::remove_non_printing(s);
    }
    void tokenize(U32 &s) const {
        if (tokenizer) s = (*tokenizer)(s);
        else if (tok == TOK_NONE) xlp::collapse_spaces(s);
    }
    void after(U32 &s) const {
        if (low == LOW_XLM) s = xlp::lowercase_xlm(s);
        else if (low == LOW_SAFE) s = xlp::lowercase_safe(s);
        if (tok != TOK_XLM) xlp::collapse_spaces(s);  // XLM mode keeps the reference's bytes
    }
    void run(U32 &s, int stage) const {
        if (stage == STAGE_RAW) {  // the `raw` column: cleaned, whitespace collapsed
            if (clean) xlp::remove_non_printing(s);
            xlp::collapse_spaces(s);
            return;
        }
        if (stage == STAGE_TOKENIZE) { tokenize(s); return; }
        if (stage != STAGE_POST) before(s);
        if (stage == STAGE_ALL) tokenize(s);
        if (stage != STAGE_PRE) after(s);
    }
};

struct PipelineObject {
    PyObject_HEAD
    Config *cfg;
};

bool to_u32(PyObject *o, U32 &out) {
    if (!PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "expected str");
        return false;
    }
    const Py_ssize_t n = PyUnicode_GET_LENGTH(o);
    const int kind = PyUnicode_KIND(o);
    const void *data = PyUnicode_DATA(o);
    out.resize(size_t(n));
    for (Py_ssize_t i = 0; i < n; ++i) out[size_t(i)] = PyUnicode_READ(kind, data, i);
    return true;
}

PyObject *from_u32(const U32 &s) {
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s.data(), Py_ssize_t(s.size()));
}

PyObject *Pipeline_new(PyTypeObject *type, PyObject *args, PyObject *) {
    const char *lang;
    int clean, normalize, tok, low;
    if (!PyArg_ParseTuple(args, "sppii", &lang, &clean, &normalize, &tok, &low)) return nullptr;
    if (tok < TOK_NONE || tok > TOK_XLM || low < LOW_NONE || low > LOW_XLM) {
        PyErr_SetString(PyExc_ValueError, "bad tokenize or lowercase mode");
        return nullptr;
    }
    auto *self = reinterpret_cast<PipelineObject *>(type->tp_alloc(type, 0));
    if (!self) return nullptr;
    try {
        self->cfg = new Config();
        self->cfg->lang = lang;
        self->cfg->clean = clean;
        self->cfg->normalize = normalize;
        self->cfg->tok = tok;
        self->cfg->low = low;
        if (tok == TOK_MOSES || tok == TOK_XLM)
            self->cfg->tokenizer.reset(new xlp::Tokenizer(
                lang, tok == TOK_XLM ? xlp::Flavour::Perl : xlp::Flavour::Sacremoses));
    } catch (const std::exception &e) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
    return reinterpret_cast<PyObject *>(self);
}

void Pipeline_dealloc(PipelineObject *self) {
    delete self->cfg;
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

// prepare's length filter on one processed text of n characters (at(k): the k-th): 0 keep, 1 empty, 2 too short,
// 3 too long. Tokens as process.py's `_length_problem` counts them: spaces + 1 when the text has no double space
// and does not start or end with one, else str.split()'s words; "empty": "" or only str.isspace() characters.
// The spaces (U+0020) among n characters, and whether two are adjacent; `contiguous`: the characters in memory
// (4 at a time with SSE2), else through at(k).
template <class At>
void count_spaces(size_t n, At at, const char32_t *contiguous, size_t &spaces, bool &double_space) {
    size_t k = 0;
    unsigned before = 0;  // whether the character before k is a space
#if defined(__SSE2__)
    if (contiguous) {
        for (; k + 4 <= n; k += 4) {
            const unsigned m = xlp::spaces4(contiguous + k);
            spaces += unsigned(__builtin_popcount(m));
            if ((m & (m >> 1)) | (before & m & 1u)) double_space = true;
            before = (m >> 3) & 1u;
        }
    }
#endif
    for (; k < n; ++k) {
        const unsigned is = at(k) == U' ';
        spaces += is;
        if (is & before) double_space = true;
        before = is;
    }
}

template <class At>
char length_code(size_t n, At at, size_t lo, size_t hi, const char32_t *contiguous = nullptr) {
    if (n == 0) return 1;
    const xlp::CharSet &space = xlp::tables().py_space;
    size_t spaces = 0;
    bool double_space = false;
    count_spaces(n, at, contiguous, spaces, double_space);
    const bool regular = !double_space && at(0) != U' ' && at(n - 1) != U' ';
    size_t tokens = spaces + 1;
    if (!regular || space.has(at(0))) {  // (else it has a word, its first character: no need to count them)
        size_t words = 0;
        bool in_word = false;
        for (size_t k = 0; k < n; ++k) {
            const bool ws = space.has(at(k));
            if (!ws && !in_word) ++words;
            in_word = !ws;
        }
        if (words == 0) return 1;  // "" or whitespace only
        if (!regular) tokens = words;
    }
    return tokens < lo ? 2 : (hi && tokens > hi) ? 3 : 0;
}

PyObject *Pipeline_run(PipelineObject *self, PyObject *args) {
    PyObject *seq;
    int stage = STAGE_ALL;
    if (!PyArg_ParseTuple(args, "O|i", &seq, &stage)) return nullptr;
    if (stage < STAGE_ALL || stage > STAGE_RAW) {
        PyErr_SetString(PyExc_ValueError, "bad stage");
        return nullptr;
    }
    PyObject *fast = PySequence_Fast(seq, "run() needs a sequence of str");
    if (!fast) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    std::vector<U32> texts(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
        if (!to_u32(PySequence_Fast_GET_ITEM(fast, i), texts[size_t(i)])) { Py_DECREF(fast); return nullptr; }
    Py_DECREF(fast);
    const Config *cfg = self->cfg;
    Py_BEGIN_ALLOW_THREADS for (U32 &t : texts) cfg->run(t, stage);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(n);
    if (!out) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *s = from_u32(texts[size_t(i)]);
        if (!s) { Py_DECREF(out); return nullptr; }
        PyList_SET_ITEM(out, i, s);
    }
    return out;
}

// Why a line of a byte block cannot be processed ("" if it can).
std::string line_problem(const char *p, size_t len, size_t max_line) {
    if (max_line > 0 && len > max_line)
        return "line longer than " + std::to_string(max_line) + " bytes (--max-line-bytes)";
    if (const void *nul = memchr(p, '\0', len))
        return "NUL byte at byte " + std::to_string(static_cast<const char *>(nul) - p) +
               " of the line (binary or UTF-16 input?)";
    size_t bad = xlp::utf8_error(p, len);
    if (bad < len) return "invalid UTF-8 at byte " + std::to_string(bad) + " of the line";
    return "";
}

PyObject *problems_list(const std::vector<std::pair<size_t, std::string>> &problems) {
    PyObject *plist = PyList_New(Py_ssize_t(problems.size()));
    if (!plist) return nullptr;
    for (size_t i = 0; i < problems.size(); ++i)
        PyList_SET_ITEM(plist, Py_ssize_t(i), Py_BuildValue("(ns)", Py_ssize_t(problems[i].first),
                                                           problems[i].second.c_str()));
    return plist;
}

PyObject *py_check_lines(PyObject *, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t max_line = 0;
    if (!PyArg_ParseTuple(args, "y*|n", &buf, &max_line)) return nullptr;
    const char *data = static_cast<const char *>(buf.buf);
    const size_t n = size_t(buf.len);
    std::vector<std::pair<size_t, std::string>> problems;
    Py_BEGIN_ALLOW_THREADS size_t start = 0, line = 0;
    while (start < n) {
        const char *nl = static_cast<const char *>(memchr(data + start, '\n', n - start));
        size_t end = nl ? size_t(nl - data) : n;
        std::string problem = line_problem(data + start, end - start, size_t(max_line));
        if (!problem.empty()) problems.emplace_back(line, problem);
        ++line;
        start = end + 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return problems_list(problems);
}

// Lines of a UTF-8 block (each ending in '\n'; a last one without it counts as a line). Bad lines (invalid
// UTF-8, a NUL byte, longer than max_line bytes) give an empty output line and a (line index, problem) entry.
PyObject *Pipeline_run_bytes(PipelineObject *self, PyObject *args) {
    Py_buffer buf;
    int stage = STAGE_ALL;
    Py_ssize_t max_line = 0;
    if (!PyArg_ParseTuple(args, "y*|in", &buf, &stage, &max_line)) return nullptr;
    if (stage < STAGE_ALL || stage > STAGE_RAW) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "bad stage");
        return nullptr;
    }
    const char *data = static_cast<const char *>(buf.buf);
    const size_t n = size_t(buf.len);
    std::string out;
    std::vector<std::pair<size_t, std::string>> problems;
    const Config *cfg = self->cfg;
    Py_BEGIN_ALLOW_THREADS out.reserve(n + n / 8 + 16);
    U32 text;
    size_t start = 0, line = 0;
    while (start < n) {
        const char *nl = static_cast<const char *>(memchr(data + start, '\n', n - start));
        size_t end = nl ? size_t(nl - data) : n;
        const char *p = data + start;
        size_t len = end - start;
        std::string problem = line_problem(p, len, size_t(max_line));
        if (problem.empty()) {
            xlp::decode_utf8(p, len, text);
            cfg->run(text, stage);
            xlp::encode_utf8(text, out);
        } else {
            problems.emplace_back(line, problem);
        }
        out.push_back('\n');
        ++line;
        start = end + 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    PyObject *plist = problems_list(problems);
    if (!plist) return nullptr;
    return Py_BuildValue("(y#N)", out.data(), Py_ssize_t(out.size()), plist);
}

// A chunk of Wikipedia pages of one language and source, from their wikitext to prepare's columns in one call:
// each page's paragraphs by the Wikitext converter, each paragraph's `raw` (stage 4) and processed text ("" when
// the raw is empty), the length filter, and the ids and hashes of the kept paragraphs (record_hashes). What
// process.py's general path computes from Wikitext.lines, run, length_problems and record_hashes, without a
// Python str per paragraph.
//   pages(converter, texts (bytes or str), id_prefix, hash_prefix, min_tokens, max_tokens)
//   -> (paragraphs, their UTF-8 bytes, why: one length code per paragraph, raw bytes, raw offsets, text bytes,
//       text offsets, ids, digests): the kept paragraphs' columns (offsets: int32, n + 1 of them);
//   None where a page is not valid Unicode, a paragraph not valid UTF-8 or the columns over 2 GiB: the caller
//   takes the general path, which reports what it must.
PyObject *Pipeline_pages(PipelineObject *self, PyObject *args) {
    PyObject *conv, *seq;
    const char *ip, *hp;
    Py_ssize_t ni, nh, lo, hi;
    if (!PyArg_ParseTuple(args, "OOs#s#nn", &conv, &seq, &ip, &ni, &hp, &nh, &lo, &hi)) return nullptr;
    const void *rules = xlp::wikitext_rules(conv);
    if (!rules) {
        PyErr_SetString(PyExc_TypeError, "pages() needs a Wikitext converter");
        return nullptr;
    }
    PyObject *fast = PySequence_Fast(seq, "pages() needs a list of bytes or str");
    if (!fast) return nullptr;
    const Py_ssize_t n_pages = PySequence_Fast_GET_SIZE(fast);
    std::vector<std::string> pages(static_cast<size_t>(n_pages));
    for (Py_ssize_t i = 0; i < n_pages; ++i) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        Py_ssize_t len;
        char *b = nullptr;  // a page's text: UTF-8 bytes (the dump reader's), or a str
        const char *p = PyBytes_Check(o) ? (PyBytes_AsStringAndSize(o, &b, &len) == 0 ? b : nullptr)
                        : PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &len) : nullptr;
        if (!p) {  // neither, or a str with a lone surrogate
            Py_DECREF(fast);
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        pages[size_t(i)].assign(p, size_t(len));
    }
    Py_DECREF(fast);
    const Config *cfg = self->cfg;
    const std::string id_prefix(ip, size_t(ni)), hash_prefix(hp, size_t(nh));
    std::string why, raw_data, text_data, ids, digests;
    std::vector<int32_t> raw_off(1, 0), text_off(1, 0);
    size_t paragraphs = 0, in_bytes = 0;
    bool ok = true;
    Py_BEGIN_ALLOW_THREADS try {
        U32 raw, text;
        for (const std::string &page : pages) {
            for (const std::string &line : xlp::wikitext_paragraphs(rules, page)) {
                ++paragraphs;
                in_bytes += line.size();
                if (xlp::utf8_error(line.data(), line.size()) < line.size()) { ok = false; break; }
                xlp::decode_utf8(line.data(), line.size(), raw);
                text = raw;
                cfg->run(raw, STAGE_RAW);
                if (raw.empty()) text.clear();
                else cfg->run(text, STAGE_ALL);
                const char code = length_code(text.size(), [&text](size_t k) { return text[k]; }, size_t(lo), size_t(hi),
                                              text.data());
                why.push_back(code);
                if (code) continue;
                xlp::encode_utf8(raw, raw_data);
                xlp::encode_utf8(text, text_data);
                if (raw_data.size() > INT32_MAX || text_data.size() > INT32_MAX) { ok = false; break; }
                raw_off.push_back(int32_t(raw_data.size()));
                text_off.push_back(int32_t(text_data.size()));
            }
            if (!ok) break;
        }
        if (ok) {
            std::vector<std::pair<const char *, size_t>> kept(text_off.size() - 1);
            for (size_t k = 0; k + 1 < text_off.size(); ++k)
                kept[k] = {text_data.data() + text_off[k], size_t(text_off[k + 1] - text_off[k])};
            xlp::record_hashes(id_prefix, hash_prefix, kept, ids, digests);
        }
    } catch (const std::exception &) {  // (out of memory: the general path reports it per page)
        ok = false;
    }
    Py_END_ALLOW_THREADS
    if (!ok) Py_RETURN_NONE;
    return Py_BuildValue("(nny#y#y#y#y#y#y#)", Py_ssize_t(paragraphs), Py_ssize_t(in_bytes), why.data(),
                         Py_ssize_t(why.size()), raw_data.data(), Py_ssize_t(raw_data.size()),
                         reinterpret_cast<const char *>(raw_off.data()), Py_ssize_t(raw_off.size() * 4),
                         text_data.data(), Py_ssize_t(text_data.size()),
                         reinterpret_cast<const char *>(text_off.data()), Py_ssize_t(text_off.size() * 4),
                         ids.data(), Py_ssize_t(ids.size()), digests.data(), Py_ssize_t(digests.size()));
}

PyMethodDef Pipeline_methods[] = {
    {"run", reinterpret_cast<PyCFunction>(Pipeline_run), METH_VARARGS, "run(texts, stage=0) -> list[str]"},
    {"run_bytes", reinterpret_cast<PyCFunction>(Pipeline_run_bytes), METH_VARARGS,
     "run_bytes(block, stage=0, max_line=0) -> (bytes, [(line index, problem)])"},
    {"pages", reinterpret_cast<PyCFunction>(Pipeline_pages), METH_VARARGS,
     "pages(wikitext_converter, texts, id_prefix, hash_prefix, min_tokens, max_tokens) -> the kept paragraphs' "
     "columns, or None"},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject PipelineType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---------------------------------------------------------------- single steps (tests, small helpers)
template <class F>
PyObject *on_text(PyObject *text, F f) {
    U32 s;
    if (!to_u32(text, s)) return nullptr;
    try {
        f(s);
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
    return from_u32(s);
}

PyObject *py_normalize(PyObject *, PyObject *args) {
    PyObject *text;
    const char *lang;
    if (!PyArg_ParseTuple(args, "Us", &text, &lang)) return nullptr;
    std::string l(lang);
    return on_text(text, [&l](U32 &s) {
        xlp::normalize_line(s, l);
    });
}

PyObject *py_remove_non_printing(PyObject *, PyObject *text) {
    return on_text(text, [](U32 &s) { xlp::remove_non_printing(s); });
}

PyObject *py_lowercase(PyObject *, PyObject *args) {
    PyObject *text;
    const char *mode;
    if (!PyArg_ParseTuple(args, "Us", &text, &mode)) return nullptr;
    std::string m(mode);
    if (m != "xlm" && m != "safe" && m != "lower") {
        PyErr_SetString(PyExc_ValueError, "mode must be xlm, safe or lower");
        return nullptr;
    }
    return on_text(text, [&m](U32 &s) {
        s = m == "xlm" ? xlp::lowercase_xlm(s) : m == "safe" ? xlp::lowercase_safe(s) : xlp::py_lower(s);
    });
}

PyObject *py_record_hashes(PyObject *, PyObject *args) {
    const char *ip, *hp;
    Py_ssize_t ni, nh;
    PyObject *seq;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "s#s#O|p", &ip, &ni, &hp, &nh, &seq, &portable)) return nullptr;
    PyObject *fast = PySequence_Fast(seq, "record_hashes() needs a list of str");
    if (!fast) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    std::vector<std::pair<const char *, size_t>> texts(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(fast, i), &len);  // (kept by the list)
        if (!p) { Py_DECREF(fast); return nullptr; }
        texts[size_t(i)] = {p, size_t(len)};
    }
    std::string id_prefix(ip, size_t(ni)), hash_prefix(hp, size_t(nh)), ids, digests;
    Py_BEGIN_ALLOW_THREADS xlp::record_hashes(id_prefix, hash_prefix, texts, ids, digests, portable);
    Py_END_ALLOW_THREADS
    Py_DECREF(fast);
    return Py_BuildValue("(y#y#)", ids.data(), Py_ssize_t(ids.size()), digests.data(), Py_ssize_t(digests.size()));
}

// prepare's length filter over processed texts, one byte per text (length_code).
PyObject *py_length_problems(PyObject *, PyObject *args) {
    PyObject *seq;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "Onn", &seq, &lo, &hi)) return nullptr;
    PyObject *fast = PySequence_Fast(seq, "length_problems() needs a list of str");
    if (!fast) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    std::string out(size_t(n), '\0');
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyUnicode_Check(o)) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "expected str");
            return nullptr;
        }
        const int kind = PyUnicode_KIND(o);
        const void *data = PyUnicode_DATA(o);
        out[size_t(i)] = length_code(size_t(PyUnicode_GET_LENGTH(o)),
                                     [kind, data](size_t k) { return char32_t(PyUnicode_READ(kind, data, k)); },
                                     size_t(lo), size_t(hi));
    }
    Py_DECREF(fast);
    return PyBytes_FromStringAndSize(out.data(), Py_ssize_t(out.size()));
}

PyMethodDef module_methods[] = {
    {"xlm_vocab", xlp::py_xlm_vocab, METH_VARARGS, "xlm_vocab(data, specials) -> (tokens, counts, skipped, dict.txt) | None"},
    {"normalize", py_normalize, METH_VARARGS, "replace-unicode-punctuation.perl | normalize-punctuation.perl -l LANG"},
    {"remove_non_printing", py_remove_non_printing, METH_O, "remove-non-printing-char.perl on one line"},
    {"lowercase", py_lowercase, METH_VARARGS, "lowercase(text, 'xlm'|'safe'|'lower')"},
    {"check_lines", py_check_lines, METH_VARARGS, "check_lines(block, max_line=0) -> [(line index, problem)]"},
    {"length_problems", py_length_problems, METH_VARARGS,
     "length_problems(texts, min_tokens, max_tokens) -> bytes: 0 keep, 1 empty, 2 too short, 3 too long"},
    {"bz2_magics", xlp::py_bz2_magics, METH_VARARGS, "bz2_magics(data, start_bit, max) -> [(bit, 1 block | 2 end)]"},
    {"bz2_bits", xlp::py_bz2_bits, METH_VARARGS, "bz2_bits(data, bit, n) -> int"},
    {"bz2_block", xlp::py_bz2_block, METH_VARARGS, "bz2_block(data, start_bit, end_bit, level) -> one-block stream"},
    {"bz2_decode", xlp::py_bz2_decode, METH_VARARGS, "bz2_decode(data, start_bit, end_bit, level, limit) -> bytes | None"},
    {"record_hashes", py_record_hashes, METH_VARARGS,
     "record_hashes(id_prefix, hash_prefix, texts, portable=False) -> (16 hex digits of sha1, 16 bytes of blake2b per text)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native", "xlp's native text pipeline (Moses, XLM).", -1,
                         module_methods};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
    PipelineType.tp_name = "xlp_cli.text._native.Pipeline";
    PipelineType.tp_basicsize = sizeof(PipelineObject);
    PipelineType.tp_flags = Py_TPFLAGS_DEFAULT;
    PipelineType.tp_doc = "Pipeline(lang, clean, normalize, tokenize, lowercase)";
    PipelineType.tp_new = Pipeline_new;
    PipelineType.tp_dealloc = reinterpret_cast<destructor>(Pipeline_dealloc);
    PipelineType.tp_methods = Pipeline_methods;
    if (PyType_Ready(&PipelineType) < 0) return nullptr;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return nullptr;
    Py_INCREF(&PipelineType);
    if (PyModule_AddObject(m, "Pipeline", reinterpret_cast<PyObject *>(&PipelineType)) < 0) {
        Py_DECREF(&PipelineType);
        Py_DECREF(m);
        return nullptr;
    }
    if (xlp::add_wikitext(m) < 0 || xlp::add_dumpxml(m) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
