// Native BPE applier for xlp, written for this project (no fastBPE code). Its output is what fastBPE 0.1.0's
// `fast applybpe OUT IN CODES [VOCAB]` writes:
//   - words are split on ' ' and '\n' only; the separators are copied as they are (runs of spaces too);
//   - a word is cut into UTF-8 characters, the last one suffixed with "</w>"; then, repeatedly, the adjacent
//     pair with the lowest merge rank (its line in the codes file) is merged everywhere, left to right and
//     without overlap, until no pair of the word is a merge;
//   - with a vocab, a subword the vocab does not hold (as "x@@", or "x" for the last one) is split back
//     into the two subwords it was merged from, recursively, keeping the parts the vocab holds;
//   - subwords are joined by "@@ " and the final "</w>" is dropped.
// Differences from the binary, by design: the last word of an input that does not end in '\n' is written
// (fast drops it), followed by '\n'; symbols are integers and merge ranks live in one hash map, words are
// segmented once (cached) and in parallel threads.
//
// Python API (module xlp_cli.bpe._applybpe):
//   Applier(codes_path, vocab_path or "")   raises ValueError("PATH:LINE: problem") for a malformed file
//     .apply_words(list[bytes]) -> list[bytes]   one word each (no ' ' or '\n')
//     .apply_block(bytes, threads) -> bytes      text: words split on ' ' and '\n', separators kept
//     .n_codes, .n_vocab
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <iterator>
#include <string_view>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../text/csrc/utf8.h"

namespace {

const char kEnd[] = "</w>";
const size_t kEndLen = 4;
const uint32_t kNone = 0xFFFFFFFFu;

uint64_t key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

// Byte strings -> dense ids 0, 1, 2, ... (open addressing; the keys live in one arena, lookups allocate nothing;
// a slot holds the id and 32 bits of the key's hash, so that most mismatches cost no key comparison).
class StrTable {
public:
    size_t size() const { return offs_.size(); }
    std::string_view key(uint32_t id) const { return {arena_.data() + offs_[id], lens_[id]}; }
    uint32_t find(std::string_view k) const {
        if (slots_.empty()) return kNone;
        const uint64_t h = hash(k);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == kEmpty) return kNone;
            if ((slot >> 32) == (h >> 32) && key(uint32_t(slot)) == k) return uint32_t(slot);
        }
    }
    uint32_t add(std::string_view k, bool &added) {  // the id of k, inserted if new
        if ((size() + 1) * 2 > slots_.size()) grow();
        const uint64_t h = hash(k);
        size_t i = h & mask_;
        for (;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == kEmpty) break;
            if ((slot >> 32) == (h >> 32) && key(uint32_t(slot)) == k) { added = false; return uint32_t(slot); }
        }
        const uint32_t id = uint32_t(size());
        slots_[i] = (h & 0xFFFFFFFF00000000ull) | id;
        offs_.push_back(arena_.size());
        lens_.push_back(uint32_t(k.size()));
        arena_.append(k.data(), k.size());
        added = true;
        return id;
    }
    void clear() { arena_.clear(); offs_.clear(); lens_.clear(); slots_.clear(); mask_ = 0; }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    static uint64_t hash(std::string_view k) {  // 8 bytes at a time, multiply-xorshift mixing
        uint64_t h = 0x9E3779B97F4A7C15ull ^ k.size();
        size_t i = 0;
        for (; i + 8 <= k.size(); i += 8) {
            uint64_t w;
            memcpy(&w, k.data() + i, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        uint64_t w = 0;
        memcpy(&w, k.data() + i, k.size() - i);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        return h ^ (h >> 29);
    }
    void grow() {
        size_t n = std::max<size_t>(64, slots_.size() * 2);
        slots_.assign(n, kEmpty);
        mask_ = n - 1;
        for (uint32_t id = 0; id < size(); ++id) {
            const uint64_t h = hash(key(id));
            size_t i = h & mask_;
            while (slots_[i] != kEmpty) i = (i + 1) & mask_;
            slots_[i] = (h & 0xFFFFFFFF00000000ull) | id;
        }
    }
    std::string arena_;
    std::vector<size_t> offs_;
    std::vector<uint32_t> lens_;
    std::vector<uint64_t> slots_;
    size_t mask_ = 0;
};

std::string read_file(const std::string &path, const char *what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::invalid_argument(path + ": cannot open the " + what + " file");
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

[[noreturn]] void fail(const std::string &path, size_t line, const std::string &what) {
    throw std::invalid_argument(path + ":" + std::to_string(line) + ": " + what);
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

size_t n_chars(std::string_view s) {  // UTF-8 characters
    return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// The lines of a file (getline: a last line without '\n' counts), each checked to be UTF-8 and cut on ' '
// into non-empty pieces (fastBPE's split), the last of which must be a count.
template <class F>
void for_lines(const std::string &text, const std::string &path, size_t n_parts, const char *format, F f) {
    size_t start = 0, n = 1;
    std::vector<std::string_view> parts;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (xlp::utf8_error(text.data() + start, end - start) < end - start) fail(path, n, "not UTF-8");
        parts.clear();
        for (size_t a = start; a < end;) {
            size_t b = a;
            while (b < end && text[b] != ' ') ++b;
            if (b > a) parts.emplace_back(text.data() + a, b - a);
            a = b + 1;
        }
        if (parts.size() != n_parts || !all_digits(parts.back())) fail(path, n, format);
        f(n++, parts);
        start = end + 1;
    }
}

class Model {
public:
    Model(const std::string &codes_path, const std::string &vocab_path) {
        read_codes(codes_path);
        if (!vocab_path.empty()) {
            read_vocab(vocab_path);
            check_vocab(vocab_path);
        }
        cont_.resize(id_.size());
        final_.resize(id_.size());
        for (uint32_t id = 0; id < id_.size(); ++id) {
            cont_[id] = in_vocab(id_.key(id), false);
            final_[id] = in_vocab(id_.key(id), true);
        }
    }
    size_t n_codes() const { return rank_.size(); }
    size_t n_vocab() const { return vocab_.size(); }

    // fastBPE's process_bpe for one word
    std::string apply(const char *w, size_t n) const {
        n = strnlen(w, n);  // fastBPE reads the word as a C string
        std::vector<std::string> local;  // characters the codes do not know: ids kNone - 1 - k
        std::vector<uint32_t> ids;
        size_t start = 0;
        for (size_t pos = 1; pos <= n; ++pos) {
            if (pos < n && (static_cast<unsigned char>(w[pos]) & 0xC0) == 0x80) continue;
            std::string ch(w + start, pos - start);
            if (pos == n) ch += kEnd;
            uint32_t id = id_.find(ch);
            if (id != kNone) ids.push_back(id);
            else { local.push_back(ch); ids.push_back(kNone - uint32_t(local.size())); }
            start = pos;
        }
        std::vector<uint32_t> next;
        while (ids.size() > 1) {
            uint32_t best_rank = kNone;
            size_t best = 0;
            for (size_t i = 0; i + 1 < ids.size(); ++i) {
                auto it = rank_.find(key(ids[i], ids[i + 1]));
                if (it != rank_.end() && it->second.first < best_rank) { best_rank = it->second.first; best = i; }
            }
            if (best_rank == kNone) break;
            const uint32_t a = ids[best], b = ids[best + 1], ab = rank_.at(key(a, b)).second;
            next.clear();
            bool just = false;
            for (size_t i = 0; i < ids.size(); ++i) {
                if (i + 1 < ids.size() && !just && ids[i] == a && ids[i + 1] == b) { next.push_back(ab); just = true; }
                else { if (!just) next.push_back(ids[i]); just = false; }
            }
            ids.swap(next);
        }
        auto text = [&](uint32_t id) -> std::string_view { return id < id_.size() ? id_.key(id) : std::string_view(local[kNone - 1 - id]); };
        std::vector<uint32_t> subwords;
        if (vocab_.size() == 0) subwords = ids;
        else
            for (size_t i = 0; i < ids.size(); ++i) {  // limitVocab
                bool last = i + 1 == ids.size();
                if (known(ids[i], last, text)) subwords.push_back(ids[i]);
                else decompose(ids[i], last, subwords, text);
            }
        std::string out;
        for (size_t i = 0; i < subwords.size(); ++i) {
            std::string_view s = text(subwords[i]);
            if (i + 1 < subwords.size()) { out.append(s.data(), s.size()); out += "@@ "; }
            else out.append(s.data(), s.size() >= kEndLen ? s.size() - kEndLen : 0);
        }
        return out;
    }

private:
    template <class Text>
    bool known(uint32_t id, bool final, Text &text) const {
        if (id < id_.size()) return final ? final_[id] : cont_[id];
        return in_vocab(text(id), final);
    }
    bool in_vocab(std::string_view s, bool final) const {
        if (final) return s.size() >= kEndLen && vocab_.find(s.substr(0, s.size() - kEndLen)) != kNone;
        std::string q(s);
        q += "@@";
        return vocab_.find(q) != kNone;
    }
    template <class Text>
    void decompose(uint32_t id, bool final, std::vector<uint32_t> &out, Text &text) const {
        if (id >= id_.size() || parts_[id].first == kNone) { out.push_back(id); return; }  // a character
        const auto [a, b] = parts_[id];
        if (known(a, false, text)) out.push_back(a);
        else decompose(a, false, out, text);
        if (known(b, final, text)) out.push_back(b);
        else decompose(b, final, out, text);
    }
    // Every vocab token must be something the codes produce: a character or a merge result ("x@@" inside a
    // word, "x" for "x</w>" at its end); else the files do not belong together.
    void check_vocab(const std::string &path) const {
        std::string q;
        for (uint32_t t = 0; t < vocab_.size(); ++t) {
            std::string_view tok = vocab_.key(t);
            bool inner = tok.size() > 2 && tok.substr(tok.size() - 2) == "@@";
            q.assign(tok.data(), inner ? tok.size() - 2 : tok.size());
            if (n_chars(q) == 1) continue;
            if (!inner) q += kEnd;
            uint32_t id = id_.find(q);
            if (id == kNone || parts_[id].first == kNone)
                fail(path, vocab_lines_[t], "token '" + std::string(tok) +
                                                "' cannot be produced by the codes: the vocab does not match the codes file");
        }
    }
    uint32_t intern(std::string_view s) {
        bool added;
        uint32_t id = id_.add(s, added);
        if (added) parts_.emplace_back(kNone, kNone);
        return id;
    }
    void read_vocab(const std::string &path) {
        const std::string text = read_file(path, "vocab");
        for_lines(text, path, 2, "not a vocab line ('token count')", [&](size_t n, const std::vector<std::string_view> &p) {
            bool added;
            vocab_.add(p[0], added);
            if (!added) fail(path, n, "token '" + std::string(p[0]) + "' appears twice");
            vocab_lines_.push_back(n);
        });
    }
    void read_codes(const std::string &path) {
        const std::string text = read_file(path, "codes");
        std::string ab_text;
        for_lines(text, path, 3, "not a fastBPE codes line ('left right count')", [&](size_t n, const std::vector<std::string_view> &p) {
            uint32_t a = intern(p[0]), b = intern(p[1]);
            if (rank_.count(key(a, b))) fail(path, n, "merge '" + std::string(p[0]) + " " + std::string(p[1]) + "' appears twice");
            ab_text.assign(p[0].data(), p[0].size());
            ab_text.append(p[1].data(), p[1].size());
            uint32_t ab = intern(ab_text);
            if (parts_[ab].first != kNone) fail(path, n, "two merges produce the same symbol '" + ab_text + "'");
            parts_[ab] = {a, b};
            rank_[key(a, b)] = {uint32_t(rank_.size()), ab};
        });
        if (rank_.empty()) throw std::invalid_argument(path + ": empty codes file");
    }

    StrTable id_;  // symbol strings
    std::vector<std::pair<uint32_t, uint32_t>> parts_;                // id -> the pair it was merged from
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> rank_;  // pair -> (rank, merged id)
    StrTable vocab_;
    std::vector<size_t> vocab_lines_;  // line of each vocab token
    std::vector<bool> cont_, final_;  // vocab holds "x@@" / "x" (x without "</w>")
};

// Segments every distinct new word of a text block (in threads), remembers them, writes the block.
class Applier {
public:
    explicit Applier(std::unique_ptr<Model> m) : model_(std::move(m)) {}
    const Model &model() const { return *model_; }

    std::string apply_block(const char *data, size_t n, unsigned threads) {
        if (words_.size() > kMaxCache) { words_.clear(); vals_.clear(); }
        std::vector<uint32_t> ids;  // the cache entry of every word of the block, in order
        ids.reserve(n / 4 + 16);
        const size_t known = words_.size();
        for_words(data, n, [&](size_t a, size_t b) {
            bool added;
            ids.push_back(words_.add(std::string_view(data + a, b - a), added));
        });
        const size_t fresh = words_.size() - known;
        std::vector<std::string> done(fresh);
        auto work = [&](size_t t, size_t k) {
            for (size_t i = t; i < fresh; i += k) {
                std::string_view w = words_.key(uint32_t(known + i));
                done[i] = model_->apply(w.data(), w.size());
            }
        };
        if (threads <= 1 || fresh < 256) {
            work(0, 1);
        } else {
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
            for (auto &th : pool) th.join();
        }
        for (auto &d : done) vals_.push_back(std::move(d));
        size_t total = n + 1;
        for (uint32_t id : ids) total += vals_[id].size();
        std::string out(total, '\0');
        char *o = out.data();
        size_t last = 0, k = 0;
        for_words(data, n, [&](size_t a, size_t b) {
            memcpy(o, data + last, a - last);
            o += a - last;
            const std::string &v = vals_[ids[k++]];
            memcpy(o, v.data(), v.size());
            o += v.size();
            last = b;
        });
        memcpy(o, data + last, n - last);
        o += n - last;
        if (n && data[n - 1] != '\n') *o++ = '\n';
        out.resize(size_t(o - out.data()));
        return out;
    }

private:
    template <class F>
    static void for_words(const char *d, size_t n, F f) {
        size_t i = 0;
        while (i < n) {
            while (i < n && (d[i] == ' ' || d[i] == '\n')) ++i;
            size_t j = i;
            while (j < n && d[j] != ' ' && d[j] != '\n') ++j;
            if (j > i) f(i, j);
            i = j;
        }
    }
    static const size_t kMaxCache = 4000000;
    std::unique_ptr<Model> model_;
    StrTable words_;                 // distinct words seen
    std::vector<std::string> vals_;  // their segmentation
};

struct ApplierObject {
    PyObject_HEAD
    Applier *app;
};

PyObject *Applier_new(PyTypeObject *type, PyObject *args, PyObject *) {
    const char *codes, *vocab = "";
    if (!PyArg_ParseTuple(args, "s|s", &codes, &vocab)) return nullptr;
    std::unique_ptr<Model> model;
    std::string error;
    Py_BEGIN_ALLOW_THREADS try {
        model.reset(new Model(codes, vocab));
    } catch (const std::exception &e) {
        error = e.what();
    }
    Py_END_ALLOW_THREADS
    if (!model) {
        PyErr_SetString(PyExc_ValueError, error.c_str());
        return nullptr;
    }
    auto *self = reinterpret_cast<ApplierObject *>(type->tp_alloc(type, 0));
    if (!self) return nullptr;
    self->app = new Applier(std::move(model));
    return reinterpret_cast<PyObject *>(self);
}

void Applier_dealloc(ApplierObject *self) {
    delete self->app;
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *Applier_apply_words(ApplierObject *self, PyObject *arg) {
    PyObject *fast = PySequence_Fast(arg, "apply_words() needs a sequence of bytes");
    if (!fast) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    std::vector<std::string> words(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        char *p;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &p, &len) < 0) { Py_DECREF(fast); return nullptr; }
        words[size_t(i)].assign(p, size_t(len));
    }
    Py_DECREF(fast);
    const Model &m = self->app->model();
    Py_BEGIN_ALLOW_THREADS for (size_t i = 0; i < words.size(); ++i) out[i] = m.apply(words[i].data(), words[i].size());
    Py_END_ALLOW_THREADS
    PyObject *res = PyList_New(n);
    if (!res) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *b = PyBytes_FromStringAndSize(out[size_t(i)].data(), Py_ssize_t(out[size_t(i)].size()));
        if (!b) { Py_DECREF(res); return nullptr; }
        PyList_SET_ITEM(res, i, b);
    }
    return res;
}

PyObject *Applier_apply_block(ApplierObject *self, PyObject *args) {
    Py_buffer buf;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "y*|i", &buf, &threads)) return nullptr;
    std::string out;
    Applier *app = self->app;
    Py_BEGIN_ALLOW_THREADS out = app->apply_block(static_cast<const char *>(buf.buf), size_t(buf.len), unsigned(threads));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyBytes_FromStringAndSize(out.data(), Py_ssize_t(out.size()));
}

PyObject *Applier_n_codes(ApplierObject *self, void *) { return PyLong_FromSize_t(self->app->model().n_codes()); }
PyObject *Applier_n_vocab(ApplierObject *self, void *) { return PyLong_FromSize_t(self->app->model().n_vocab()); }

PyMethodDef Applier_methods[] = {
    {"apply_words", reinterpret_cast<PyCFunction>(Applier_apply_words), METH_O, "apply_words(words) -> list[bytes]"},
    {"apply_block", reinterpret_cast<PyCFunction>(Applier_apply_block), METH_VARARGS,
     "apply_block(text, threads=1) -> bytes (not thread-safe: one block at a time)"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Applier_getset[] = {
    {"n_codes", reinterpret_cast<getter>(Applier_n_codes), nullptr, "number of merges", nullptr},
    {"n_vocab", reinterpret_cast<getter>(Applier_n_vocab), nullptr, "number of vocab entries", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject ApplierType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_applybpe", "Native fastBPE-compatible BPE applier.", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__applybpe(void) {
    ApplierType.tp_name = "xlp_cli.bpe._applybpe.Applier";
    ApplierType.tp_basicsize = sizeof(ApplierObject);
    ApplierType.tp_flags = Py_TPFLAGS_DEFAULT;
    ApplierType.tp_doc = "Applier(codes_path, vocab_path='')";
    ApplierType.tp_new = Applier_new;
    ApplierType.tp_dealloc = reinterpret_cast<destructor>(Applier_dealloc);
    ApplierType.tp_methods = Applier_methods;
    ApplierType.tp_getset = Applier_getset;
    if (PyType_Ready(&ApplierType) < 0) return nullptr;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return nullptr;
    Py_INCREF(&ApplierType);
    if (PyModule_AddObject(m, "Applier", reinterpret_cast<PyObject *>(&ApplierType)) < 0) {
        Py_DECREF(&ApplierType);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
