// XLM's Dictionary.read_vocab on a whole `token count` file, without the GIL (xlp_cli/bpe/dictionary.py reads
// XLM's vocab_xnli_15 and every dict.txt with it; `xlp prepare --bpe-from` reads them while its text threads run).
// XLM reads the file as UTF-8 text line by line and, for each line: skips it if it holds U+2028; splits it with
// str.split() (runs of Python whitespace) and skips it unless that gives two fields; skips it if the token is
// in the dictionary already (the specials are); else the token takes the next id. Anything this reader does not
// decide the same way for sure (invalid UTF-8, a carriage return, whose line breaks Python's text mode reads
// differently, a count that is not ASCII digits or does not fit 64 bits) makes it give up: the Python reader
// then reads the file and names the line.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "text.h"

namespace xlp {
namespace {

struct Vocab {
    std::string words;           // the kept tokens joined by '\n'
    std::vector<int64_t> counts; // their counts
    std::string text;            // dict.txt: `token count\n` per kept token
    Py_ssize_t skipped = 0;      // lines that took no id
};

// One code point of valid UTF-8 at p; advances p.
inline char32_t next_cp(const unsigned char *&p) {
    const unsigned char c = *p++;
    if (c < 0x80) return c;
    const int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    char32_t cp = c & (0x3F >> extra);
    for (int k = 0; k < extra; ++k) cp = (cp << 6) | (*p++ & 0x3F);
    return cp;
}

bool read_vocab(std::string_view data, std::string_view specials, Vocab &out) {
    if (data.find('\r') != std::string_view::npos || utf8_error(data.data(), data.size()) != data.size()) return false;
    const CharSet &space = tables().py_space;
    std::unordered_set<std::string_view> seen;
    seen.reserve(data.size() / 8 + 16);
    for (size_t a = 0; a <= specials.size();) {
        size_t b = specials.find('\n', a);
        b = b == std::string_view::npos ? specials.size() : b;
        seen.insert(specials.substr(a, b - a));
        a = b + 1;
    }
    out.words.reserve(data.size());
    out.text.reserve(data.size() + data.size() / 8);
    size_t pos = 0;
    while (pos < data.size()) {
        size_t end = data.find('\n', pos);
        end = end == std::string_view::npos ? data.size() : end;
        const auto *p = reinterpret_cast<const unsigned char *>(data.data()) + pos;
        const auto *stop = reinterpret_cast<const unsigned char *>(data.data()) + end;
        pos = end + 1;
        std::string_view fields[3];
        int n = 0;
        bool in_field = false, sep2028 = false;
        const unsigned char *start = p;
        while (p < stop) {
            const unsigned char *at = p;
            const char32_t cp = next_cp(p);
            if (cp == 0x2028) sep2028 = true;
            if (space.has(cp)) {
                if (in_field && n < 3) fields[n++] = std::string_view(reinterpret_cast<const char *>(start), size_t(at - start));
                in_field = false;
            } else if (!in_field) {
                in_field = true;
                start = at;
            }
        }
        if (in_field && n < 3) fields[n++] = std::string_view(reinterpret_cast<const char *>(start), size_t(stop - start));
        if (sep2028 || n != 2) {
            ++out.skipped;
            continue;
        }
        const std::string_view count = fields[1];
        if (count.size() > 18) return false;
        int64_t c = 0;
        for (char ch : count) {
            if (ch < '0' || ch > '9') return false;
            c = c * 10 + (ch - '0');
        }
        if (!seen.insert(fields[0]).second) {
            ++out.skipped;
            continue;
        }
        if (!out.counts.empty()) out.words += '\n';
        out.words += fields[0];
        out.counts.push_back(c);
        out.text += fields[0];
        out.text += ' ';
        out.text += std::to_string(c);
        out.text += '\n';
    }
    return true;
}

}  // namespace

// xlm_vocab(data, specials) -> (tokens joined by '\n', int64 counts, lines skipped, dict.txt bytes), or None when
// the Python reader must decide (see above). `specials`: the ids before the file's tokens, joined by '\n'.
PyObject *py_xlm_vocab(PyObject *, PyObject *args) {
    Py_buffer data, specials;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &specials)) return nullptr;
    Vocab v;
    bool ok;
    Py_BEGIN_ALLOW_THREADS ok = read_vocab(std::string_view(static_cast<const char *>(data.buf), size_t(data.len)),
                                           std::string_view(static_cast<const char *>(specials.buf), size_t(specials.len)), v);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&specials);
    if (!ok) Py_RETURN_NONE;
    const char *counts = v.counts.empty() ? "" : reinterpret_cast<const char *>(v.counts.data());  // (y#: not NULL)
    return Py_BuildValue("(y#y#ny#)", v.words.data(), Py_ssize_t(v.words.size()),
                         counts, Py_ssize_t(v.counts.size() * sizeof(int64_t)),
                         v.skipped, v.text.data(), Py_ssize_t(v.text.size()));
}

}  // namespace xlp
