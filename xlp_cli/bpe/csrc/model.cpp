// Reading and checking fastBPE codes and vocab files, and fastBPE's segmentation of one word (process_bpe).
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "../../text/csrc/utf8.h"
#include "bpe.h"

namespace xlpbpe {
namespace {

const char kEnd[] = "</w>";
const size_t kEndLen = 4;

uint64_t key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

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

}  // namespace

Model::Model(const std::string &codes_path, const std::string &vocab_path) {
    std::exception_ptr codes_error, vocab_error;
    std::thread vocab;  // the two files are read at the same time
    if (!vocab_path.empty())
        vocab = std::thread([&] {
            try {
                read_vocab(vocab_path);
            } catch (...) {
                vocab_error = std::current_exception();
            }
        });
    try {
        read_codes(codes_path);
    } catch (...) {
        codes_error = std::current_exception();
    }
    if (vocab.joinable()) vocab.join();
    if (codes_error) std::rethrow_exception(codes_error);  // a bad codes file is reported first
    if (vocab_error) std::rethrow_exception(vocab_error);
    if (!vocab_path.empty()) check_vocab(vocab_path);
    cont_.resize(id_.size());
    final_.resize(id_.size());
    for (uint32_t id = 0; id < id_.size(); ++id) {
        cont_[id] = in_vocab(id_.key(id), false);
        final_[id] = in_vocab(id_.key(id), true);
    }
}

std::string Model::apply(const char *w, size_t n) const {
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
        uint32_t ab = kNone;
        for (size_t i = 0; i + 1 < ids.size(); ++i) {
            const PairTable::Entry *e = rank_.find(key(ids[i], ids[i + 1]));
            if (e && e->rank < best_rank) { best_rank = e->rank; best = i; ab = e->merged; }
        }
        if (best_rank == kNone) break;
        const uint32_t a = ids[best], b = ids[best + 1];
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

template <class Text>
bool Model::known(uint32_t id, bool final, Text &text) const {
    if (id < id_.size()) return final ? final_[id] : cont_[id];
    return in_vocab(text(id), final);
}
bool Model::in_vocab(std::string_view s, bool final) const {
    if (final) return s.size() >= kEndLen && vocab_.find(s.substr(0, s.size() - kEndLen)) != kNone;
    std::string q(s);
    q += "@@";
    return vocab_.find(q) != kNone;
}
template <class Text>
void Model::decompose(uint32_t id, bool final, std::vector<uint32_t> &out, Text &text) const {
    if (id >= id_.size() || parts_[id].first == kNone) { out.push_back(id); return; }  // a character
    const auto [a, b] = parts_[id];
    if (known(a, false, text)) out.push_back(a);
    else decompose(a, false, out, text);
    if (known(b, final, text)) out.push_back(b);
    else decompose(b, final, out, text);
}
// Every vocab token must be something the codes produce: a character or a merge result ("x@@" inside a
// word, "x" for "x</w>" at its end); else the files do not belong together.
void Model::check_vocab(const std::string &path) const {
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
uint32_t Model::intern(std::string_view s) {
    bool added;
    uint32_t id = id_.add(s, added);
    if (added) parts_.emplace_back(kNone, kNone);
    return id;
}
void Model::read_vocab(const std::string &path) {
    const std::string text = read_file(path, "vocab");
    for_lines(text, path, 2, "not a vocab line ('token count')", [&](size_t n, const std::vector<std::string_view> &p) {
        bool added;
        vocab_.add(p[0], added);
        if (!added) fail(path, n, "token '" + std::string(p[0]) + "' appears twice");
        vocab_lines_.push_back(n);
    });
}
void Model::read_codes(const std::string &path) {
    const std::string text = read_file(path, "codes");
    std::string ab_text;
    for_lines(text, path, 3, "not a fastBPE codes line ('left right count')", [&](size_t n, const std::vector<std::string_view> &p) {
        uint32_t a = intern(p[0]), b = intern(p[1]);
        if (rank_.find(key(a, b))) fail(path, n, "merge '" + std::string(p[0]) + " " + std::string(p[1]) + "' appears twice");
        ab_text.assign(p[0].data(), p[0].size());
        ab_text.append(p[1].data(), p[1].size());
        uint32_t ab = intern(ab_text);
        if (parts_[ab].first != kNone) fail(path, n, "two merges produce the same symbol '" + ab_text + "'");
        parts_[ab] = {a, b};
        rank_.insert(key(a, b), uint32_t(rank_.size()), ab);
    });
    if (rank_.size() == 0) throw std::invalid_argument(path + ": empty codes file");
}

}  // namespace xlpbpe
