// Lowercasing and accent stripping: CPython 3.11's str.lower() and unicodedata.normalize("NFD"), XLM's
// lowercase_and_remove_accent.py built on them, and xlp's `safe` mode (xlp_cli/text/case.py documents it).
#include <algorithm>
#include <vector>

#include "text.h"

namespace xlp {
namespace {

// CPython's handle_capital_sigma: U+03A3 is final when a cased letter precedes it and none follows it
// (case-ignorable characters skipped on both sides).
// (Of the string s[0:end), end = s.size() by default.)
bool final_sigma(const U32 &s, size_t i, size_t end = U32::npos) {
    const Tables &T = tables();
    end = std::min(end, s.size());
    size_t j = i;
    while (j > 0 && T.py_case_ignorable.has(s[j - 1])) --j;
    if (j == 0 || !T.py_cased.has(s[j - 1])) return false;
    j = i + 1;
    while (j < end && T.py_case_ignorable.has(s[j])) ++j;
    return j == end || !T.py_cased.has(s[j]);
}

void decompose(char32_t c, U32 &out) {
    const Tables &T = tables();
    if (c >= 0xAC00 && c <= 0xD7A3) {  // Hangul syllables (Unicode chapter 3.12)
        char32_t s = c - 0xAC00;
        out.push_back(0x1100 + s / 588);
        out.push_back(0x1161 + (s % 588) / 28);
        if (s % 28) out.push_back(0x11A7 + s % 28);
        return;
    }
    if (c < 0xC0) { out.push_back(c); return; }  // nothing below U+00C0 decomposes
    static const std::vector<uint64_t> bmp = [&T] {  // the BMP characters that decompose (a hash lookup less
        std::vector<uint64_t> b(1024, 0);              // for each of the others: most letters of most scripts)
        for (const auto &kv : T.nfd)
            if (kv.first < 0x10000) b[kv.first >> 6] |= uint64_t(1) << (kv.first & 63);
        return b;
    }();
    if (c < 0x10000 && !((bmp[c >> 6] >> (c & 63)) & 1)) { out.push_back(c); return; }
    auto it = T.nfd.find(c);
    if (it == T.nfd.end()) { out.push_back(c); return; }
    const uint32_t *d = it->second;
    for (uint32_t k = 0; k < d[0]; ++k) out.push_back(d[1 + k]);
}

U32 nfd(const U32 &s) {
    const Tables &T = tables();
    U32 out;
    out.reserve(s.size() + 8);
    for (char32_t c : s) decompose(c, out);
    // canonical ordering: stable sort of each run of non-starters by combining class (what CPython's
    // insertion sort does, in O(n log n) for long runs)
    auto by_ccc = [&T](char32_t a, char32_t b) { return T.ccc(a) < T.ccc(b); };
    for (size_t i = 0; i < out.size();) {
        if (T.ccc(out[i]) == 0) { ++i; continue; }
        size_t j = i + 1;
        while (j < out.size() && T.ccc(out[j]) != 0) ++j;
        if (j - i > 1) std::stable_sort(out.begin() + long(i), out.begin() + long(j), by_ccc);
        i = j;
    }
    return out;
}

bool generic_mark(char32_t c) {
    return (c >= 0x300 && c <= 0x36F) || (c >= 0x1AB0 && c <= 0x1AFF) || (c >= 0x1DC0 && c <= 0x1DFF) ||
           (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE20 && c <= 0xFE2F);
}

}  // namespace

U32 py_lower(const U32 &s) {
    const Tables &T = tables();
    U32 out;
    out.reserve(s.size() + 2);
    for (size_t i = 0; i < s.size(); ++i) {
        char32_t c = s[i];
        if (c < 0x80) out.push_back(c >= U'A' && c <= U'Z' ? c + 32 : c);
        else if (c == 0x3A3) out.push_back(final_sigma(s, i) ? 0x3C2 : 0x3C3);
        else if (c == 0x130) out.append(U"i\u0307");
        else out.push_back(T.lower(c));
    }
    return out;
}

namespace {

// lower(), NFD, Mn removed, lower() again: lowercase_and_remove_accent.py after its rstrip.
U32 lower_unaccent(U32 s) {
    const Tables &T = tables();
    s = py_lower(s);
    bool ascii = true;
    for (char32_t c : s) ascii = ascii && c < 0x80;
    if (ascii) return s;  // NFD, Mn removal and lower() again change nothing
    U32 d = nfd(s);
    size_t w = 0;
    for (char32_t c : d)
        if (!T.py_mn.has(c)) d[w++] = c;
    d.resize(w);
    return py_lower(d);
}

// lower_unaccent of one character below U+2000 (Latin, Greek, Cyrillic, ..., Vietnamese's U+1Exx) where a line's
// result is the concatenation of its characters' results: n characters (at most 3), all starters (combining
// class 0), so that NFD's canonical reordering, which only moves non-starters, cannot move them. n = SLOW:
// not so (U+0130; a result that keeps a non-starter). U+03A3 is lower()ed by its neighbours (final_sigma), to
// a σ or ς that the rest leaves as it is.
constexpr char32_t FAST_END = 0x2000;
constexpr uint8_t SLOW = 255;
struct OneChar {
    uint8_t n = SLOW;
    char32_t c[3] = {0, 0, 0};
};

const std::vector<OneChar> &one_chars() {
    static const std::vector<OneChar> table = [] {
        const Tables &T = tables();
        std::vector<OneChar> t(FAST_END);
        for (char32_t c = 0; c < FAST_END; ++c) {
            if (c == 0x3A3 || c == 0x130) continue;
            U32 r = lower_unaccent(U32(1, c));
            if (r.size() > 3) continue;
            bool starters = true;
            for (char32_t x : r) starters = starters && T.ccc(x) == 0;
            if (!starters) continue;
            t[c].n = uint8_t(r.size());
            for (size_t k = 0; k < r.size(); ++k) t[c].c[k] = r[k];
        }
        return t;
    }();
    return table;
}

}  // namespace

U32 lowercase_xlm(const U32 &line) {
    const Tables &T = tables();
    size_t end = line.size();  // line.rstrip()
    while (end > 0 && T.py_space.has(line[end - 1])) --end;
    const std::vector<OneChar> &one = one_chars();
    U32 out;
    out.reserve(end);
    for (size_t i = 0; i < end; ++i) {  // a character at a time where that gives the same (the common case)
        char32_t c = line[i];
        if (c == 0x3A3) {
            out.push_back(final_sigma(line, i, end) ? 0x3C2 : 0x3C3);
            continue;
        }
        if (c >= FAST_END || one[c].n == SLOW) return lower_unaccent(line.substr(0, end));
        for (uint8_t k = 0; k < one[c].n; ++k) out.push_back(one[c].c[k]);
    }
    return out;
}

U32 lowercase_safe(const U32 &text) {
    const Tables &T = tables();
    U32 s = py_lower(text);
    bool ascii = true;
    for (char32_t c : s) ascii = ascii && c < 0x80;
    if (ascii) return s;
    U32 f;  // precomposed Latin/Greek letters -> the letter without its generic diacritics
    f.reserve(s.size());
    for (char32_t c : s) {
        auto it = c >= 0x80 && c < 0x2200 ? T.safe_fold.find(c) : T.safe_fold.end();
        if (it == T.safe_fold.end()) { f.push_back(c); continue; }
        for (uint32_t k = 0; k < it->second[0]; ++k) f.push_back(it->second[1 + k]);
    }
    U32 g;  // (?<=[\p{Latin}\p{Greek}])[generic marks]+ -> ""
    g.reserve(f.size());
    for (size_t i = 0; i < f.size();) {
        if (i > 0 && generic_mark(f[i]) && T.latin_greek.has(f[i - 1])) {
            while (i < f.size() && generic_mark(f[i])) ++i;
        } else {
            g.push_back(f[i++]);
        }
    }
    U32 h;  // (?<=\p{Cyrillic}[\u0306\u0308]?)[\u0300\u0301]+ -> ""
    h.reserve(g.size());
    auto stress = [](char32_t c) { return c == 0x300 || c == 0x301; };
    for (size_t i = 0; i < g.size();) {
        bool after = i > 0 && (T.cyrillic.has(g[i - 1]) ||
                               (i > 1 && (g[i - 1] == 0x306 || g[i - 1] == 0x308) && T.cyrillic.has(g[i - 2])));
        if (stress(g[i]) && after) {
            while (i < g.size() && stress(g[i])) ++i;
        } else {
            h.push_back(g[i++]);
        }
    }
    return h;
}

}  // namespace xlp
