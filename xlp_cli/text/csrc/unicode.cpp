// Character tables (generated into unicode_tables.inc by gen_tables.py) and UTF-8 conversion.
#include <algorithm>
#include <cstring>

#include "text.h"
#include "unicode_tables.inc"

namespace xlp {

#define XLP_N(a) (sizeof(a) / sizeof((a)[0]))

CharSet::CharSet(const uint32_t *ranges, size_t n_values) {
    for (size_t i = 0; i + 1 < n_values; i += 2) {
        char32_t lo = ranges[i], hi = ranges[i + 1];
        for (char32_t c = lo; c <= hi && c < 0x10000; ++c) bmp_[c >> 6] |= uint64_t(1) << (c & 63);
        if (hi >= 0x10000) astral_.emplace_back(std::max<char32_t>(lo, 0x10000), hi);
    }
}

bool CharSet::has_astral(char32_t c) const {
    auto it = std::upper_bound(astral_.begin(), astral_.end(), std::make_pair(c, char32_t(0x7fffffff)));
    if (it == astral_.begin()) return false;
    --it;
    return c >= it->first && c <= it->second;
}

void CharSet::add(const CharSet &other) {
    for (size_t i = 0; i < bmp_.size(); ++i) bmp_[i] |= other.bmp_[i];
    astral_.insert(astral_.end(), other.astral_.begin(), other.astral_.end());
    std::sort(astral_.begin(), astral_.end());  // has_astral needs disjoint ranges: merge
    std::vector<std::pair<char32_t, char32_t>> merged;
    for (auto &r : astral_) {
        if (!merged.empty() && r.first <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    astral_.swap(merged);
}

void CharSet::add(char32_t c) {
    uint32_t r[2] = {uint32_t(c), uint32_t(c)};
    add(CharSet(r, 2));
}

static Tables *build_tables() {
    auto *t = new Tables();
#define XLP_SET(field, arr) t->field = CharSet(arr, XLP_N(arr))
    XLP_SET(perl_alnum, T_PERL_ALNUM);
    XLP_SET(perl_alpha, T_PERL_ALPHA);
    XLP_SET(perl_n, T_PERL_N);
    XLP_SET(perl_lower, T_PERL_LOWER);
    XLP_SET(perl_ll, T_PERL_LL);
    XLP_SET(perl_space, T_PERL_SPACE);
    XLP_SET(perl_c, T_PERL_C);
    XLP_SET(sac_alnum, T_SAC_ALNUM);
    XLP_SET(sac_alpha, T_SAC_ALPHA);
    XLP_SET(sac_n, T_SAC_N);
    XLP_SET(sac_lower, T_SAC_LOWER);
    XLP_SET(sac_cjk_ko, T_SAC_CJK_KO);
    XLP_SET(sac_cjk_zh, T_SAC_CJK_ZH);
    XLP_SET(sac_cjk_ja, T_SAC_CJK_JA);
    XLP_SET(py_space, T_PY_SPACE);
    XLP_SET(py_mn, T_PY_MN);
    XLP_SET(py_cased, T_PY_CASED);
    XLP_SET(py_case_ignorable, T_PY_CASE_IGNORABLE);
    XLP_SET(latin_greek, T_RE_LATIN_GREEK);
    XLP_SET(cyrillic, T_RE_CYRILLIC);
#undef XLP_SET
    t->lower_bmp.resize(0x10000);
    for (char32_t c = 0; c < 0x10000; ++c) t->lower_bmp[c] = c;
    for (size_t i = 0; i < XLP_N(T_PY_LOWER); i += 2) {
        if (T_PY_LOWER[i] < 0x10000)
            t->lower_bmp[T_PY_LOWER[i]] = T_PY_LOWER[i + 1];
        else
            t->lower_astral[T_PY_LOWER[i]] = T_PY_LOWER[i + 1];
    }
    t->ccc_bmp.assign(0x10000, 0);
    for (size_t i = 0; i < XLP_N(T_PY_CCC); i += 2) {
        if (T_PY_CCC[i] < 0x10000)
            t->ccc_bmp[T_PY_CCC[i]] = uint8_t(T_PY_CCC[i + 1]);
        else
            t->ccc_astral[T_PY_CCC[i]] = uint8_t(T_PY_CCC[i + 1]);
    }
    for (size_t i = 0; i < XLP_N(T_PY_NFD); i += 6) t->nfd[T_PY_NFD[i]] = &T_PY_NFD[i + 1];
    for (size_t i = 0; i < XLP_N(T_SAFE_FOLD); i += 6) t->safe_fold[T_SAFE_FOLD[i]] = &T_SAFE_FOLD[i + 1];
    return t;
}

const Tables &tables() {
    static const Tables *t = build_tables();  // thread-safe initialisation (C++11)
    return *t;
}

const char *prefix_file(const std::string &lang) {
    for (size_t i = 0; i < XLP_N(T_PREFIX_FILES); ++i)
        if (lang == T_PREFIX_FILES[i][0]) return T_PREFIX_FILES[i][1];
    return nullptr;
}

// (Both write through a pointer into a buffer sized for the worst case, then trim it: a push_back per
// character checks the capacity each time. Runs of 8 ASCII bytes or characters go a word at a time.)
void decode_utf8(const char *s, size_t n, U32 &out) {
    const auto *p = reinterpret_cast<const unsigned char *>(s);
    out.resize(n);  // at most one character per byte
    char32_t *o = out.data();
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80 && i + 8 <= n) {
            uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                for (int k = 0; k < 8; ++k) o[k] = p[i + size_t(k)];
                o += 8;
                i += 8;
                continue;
            }
        }
        unsigned char c = p[i];
        if (c < 0x80) { *o++ = c; ++i; }
        else if ((c & 0xE0) == 0xC0) { *o++ = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F); i += 2; }
        else if ((c & 0xF0) == 0xE0) {
            *o++ = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
            i += 3;
        } else {
            *o++ = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
            i += 4;
        }
    }
    out.resize(size_t(o - out.data()));
}

void encode_utf8(const U32 &s, std::string &out) {
    const size_t start = out.size(), n = s.size();
    out.resize(start + 4 * n);  // at most 4 bytes per character
    char *o = out.data() + start;
    const char32_t *c = s.data();
    size_t i = 0;
    while (i < n) {
        if (c[i] < 0x80 && i + 8 <= n && (c[i] | c[i + 1] | c[i + 2] | c[i + 3] | c[i + 4] | c[i + 5] | c[i + 6] | c[i + 7]) < 0x80) {
            for (int k = 0; k < 8; ++k) o[k] = char(c[i + size_t(k)]);
            o += 8;
            i += 8;
            continue;
        }
        const char32_t x = c[i++];
        if (x < 0x80) *o++ = char(x);
        else if (x < 0x800) { *o++ = char(0xC0 | (x >> 6)); *o++ = char(0x80 | (x & 0x3F)); }
        else if (x < 0x10000) {
            *o++ = char(0xE0 | (x >> 12));
            *o++ = char(0x80 | ((x >> 6) & 0x3F));
            *o++ = char(0x80 | (x & 0x3F));
        } else {
            *o++ = char(0xF0 | (x >> 18));
            *o++ = char(0x80 | ((x >> 12) & 0x3F));
            *o++ = char(0x80 | ((x >> 6) & 0x3F));
            *o++ = char(0x80 | (x & 0x3F));
        }
    }
    out.resize(size_t(o - out.data()));
}

U32 strip(const U32 &s, const CharSet &space) {
    size_t a = 0, b = s.size();
    while (a < b && space.has(s[a])) ++a;
    while (b > a && space.has(s[b - 1])) --b;
    return s.substr(a, b - a);
}

void collapse_spaces(U32 &s) {
    const CharSet &sp = tables().py_space;
    // Most lines are collapsed already (single ' ' between words, none at either end): then only a scan.
    bool changes = false, after_space = true;  // (white space at the start goes)
    for (char32_t c : s) {
        const bool ws = sp.has(c);
        if (ws && (c != U' ' || after_space)) {
            changes = true;
            break;
        }
        after_space = ws;
    }
    if (!changes) {
        if (!s.empty() && s.back() == U' ') s.pop_back();  // (one space at the end goes)
        return;
    }
    size_t w = 0;
    bool pending = false;
    for (char32_t c : s) {
        if (sp.has(c)) { pending = w > 0; continue; }
        if (pending) { s[w++] = U' '; pending = false; }
        s[w++] = c;
    }
    s.resize(w);
}

}  // namespace xlp
