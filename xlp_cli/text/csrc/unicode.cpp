// Character tables (generated into unicode_tables.inc by gen_tables.py) and UTF-8 conversion.
#include <algorithm>

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

void decode_utf8(const char *s, size_t n, U32 &out) {
    const auto *p = reinterpret_cast<const unsigned char *>(s);
    out.clear();
    out.reserve(n);
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { out.push_back(c); ++i; }
        else if ((c & 0xE0) == 0xC0) { out.push_back(((c & 0x1F) << 6) | (p[i + 1] & 0x3F)); i += 2; }
        else if ((c & 0xF0) == 0xE0) {
            out.push_back(((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
            i += 3;
        } else {
            out.push_back(((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F));
            i += 4;
        }
    }
}

void encode_utf8(const U32 &s, std::string &out) {
    for (char32_t c : s) {
        if (c < 0x80) out.push_back(char(c));
        else if (c < 0x800) { out.push_back(char(0xC0 | (c >> 6))); out.push_back(char(0x80 | (c & 0x3F))); }
        else if (c < 0x10000) {
            out.push_back(char(0xE0 | (c >> 12)));
            out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
            out.push_back(char(0x80 | (c & 0x3F)));
        } else {
            out.push_back(char(0xF0 | (c >> 18)));
            out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
            out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
            out.push_back(char(0x80 | (c & 0x3F)));
        }
    }
}

U32 strip(const U32 &s, const CharSet &space) {
    size_t a = 0, b = s.size();
    while (a < b && space.has(s[a])) ++a;
    while (b > a && space.has(s[b - 1])) --b;
    return s.substr(a, b - a);
}

void collapse_spaces(U32 &s) {
    const CharSet &sp = tables().py_space;
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
