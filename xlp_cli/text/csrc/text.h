// The native text pipeline: Moses punctuation normalization, non-printing character removal, the Moses
// tokenizer (perl and sacremoses flavours) and the lowercase modes. See xlp_cli/text/pipeline.py and
// docs/prepare.md. Text is processed as UTF-32 (one char32_t per code point); every step mirrors one
// substitution of the original script, in the original order, with the original match semantics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cwchar>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string>
#include <unordered_map>
#include <vector>

#include "utf8.h"

namespace xlp {

using U32 = std::u32string;

#if defined(__SSE2__)
// Which of the 4 characters at p are spaces (U+0020): bit k for p[k].
inline unsigned spaces4(const char32_t *p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    return unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, _mm_set1_epi32(int(U' '))))));
}
#endif

// s.find(c, pos) and s.find(pat, pos, n), through glibc's vectorised wmemchr where
// wchar_t is 32 bits (std::char_traits<char32_t>::find is a loop a character at a time).
inline size_t find32(const U32 &s, char32_t c, size_t pos = 0) {
    if (pos >= s.size()) return U32::npos;
#if WCHAR_MAX > 0xFFFF
    const auto *base = reinterpret_cast<const wchar_t *>(s.data());
    const wchar_t *hit = std::wmemchr(base + pos, wchar_t(c), s.size() - pos);
    return hit ? size_t(hit - base) : U32::npos;
#else
    return s.find(c, pos);
#endif
}
inline size_t find32(const U32 &s, const char32_t *pat, size_t pos, size_t n) {
    if (n == 0) return pos <= s.size() ? pos : U32::npos;
    // Anchored on the pattern's first character that is not a space (text has a space every few characters,
    // and many of the Moses rules' patterns start with one); a pattern of spaces only: a plain scan.
    size_t a = 0;
    while (a < n && pat[a] == U' ') ++a;
    if (a == n) {
        size_t i = pos, run = 0;
#if defined(__SSE2__)
        if (n == 2) {  // two spaces (squeeze_spaces asks for them three times a line): 4 characters a step
            unsigned carry = 0;  // whether the character before this step's 4 is a space
            for (; i + 4 <= s.size(); i += 4) {
                const unsigned m = spaces4(s.data() + i);
                const unsigned pairs = (m & (m >> 1)) | (carry & m & 1u);  // bit k: a space at k and one before
                if (pairs) {
                    run = carry;
                    for (; i < s.size(); ++i) {  // (the exact place, a character at a time from here)
                        run = s[i] == U' ' ? run + 1 : 0;
                        if (run == n) return i + 1 - n;
                    }
                }
                carry = (m >> 3) & 1u;
            }
            run = carry;
        }
#endif
        for (; i < s.size(); ++i) {
            run = s[i] == U' ' ? run + 1 : 0;
            if (run == n) return i + 1 - n;
        }
        return U32::npos;
    }
    for (size_t i = find32(s, pat[a], pos + a); i != U32::npos; i = find32(s, pat[a], i + 1)) {
        const size_t start = i - a;
        if (start + n > s.size()) return U32::npos;
        if (std::char_traits<char32_t>::compare(s.data() + start, pat, n) == 0) return start;
    }
    return U32::npos;
}
inline size_t find32(const U32 &s, const char32_t *pat) {
    return find32(s, pat, 0, std::char_traits<char32_t>::length(pat));
}
inline size_t find32(const U32 &s, const U32 &pat) { return find32(s, pat.data(), 0, pat.size()); }

// ------------------------------------------------------------------ character tables (unicode.cpp)
class CharSet {
public:
    CharSet() = default;
    CharSet(const uint32_t *ranges, size_t n_values);  // n_values = 2 * number of ranges
    bool has(char32_t c) const {
        if (c < 0x10000) return (bmp_[c >> 6] >> (c & 63)) & 1;
        return has_astral(c);
    }
    void add(const CharSet &other);  // union
    void add(char32_t c);

private:
    bool has_astral(char32_t c) const;
    std::vector<uint64_t> bmp_ = std::vector<uint64_t>(1024, 0);
    std::vector<std::pair<char32_t, char32_t>> astral_;
};

struct Tables {
    CharSet perl_alnum, perl_alpha, perl_n, perl_lower, perl_ll, perl_space, perl_c;
    CharSet sac_alnum, sac_alpha, sac_n, sac_lower, sac_cjk_ko, sac_cjk_zh, sac_cjk_ja;
    CharSet py_space, py_mn, py_cased, py_case_ignorable, latin_greek, cyrillic;
    std::vector<char32_t> lower_bmp;                    // str.lower() of one BMP character (U+0130 excepted)
    std::unordered_map<char32_t, char32_t> lower_astral;
    std::vector<uint8_t> ccc_bmp;                      // canonical combining class
    std::unordered_map<char32_t, uint8_t> ccc_astral;
    std::unordered_map<char32_t, const uint32_t *> nfd;      // -> {length, chars...}
    std::unordered_map<char32_t, const uint32_t *> safe_fold;  // -> {length, chars...}
    char32_t lower(char32_t c) const {
        if (c < 0x10000) return lower_bmp[c];
        auto it = lower_astral.find(c);
        return it == lower_astral.end() ? c : it->second;
    }
    uint8_t ccc(char32_t c) const {
        if (c < 0x10000) return ccc_bmp[c];
        auto it = ccc_astral.find(c);
        return it == ccc_astral.end() ? 0 : it->second;
    }
};
const Tables &tables();

// The contents of nonbreaking_prefix.<lang>, or nullptr if there is no such file.
const char *prefix_file(const std::string &lang);

// UTF-8 <-> UTF-32. decode_utf8 expects valid UTF-8 (see utf8_error).
void decode_utf8(const char *s, size_t n, U32 &out);
void encode_utf8(const U32 &s, std::string &out);

// ------------------------------------------------------------------ steps
// replace-unicode-punctuation.perl, then normalize-punctuation.perl -l lang, on one line (without its '\n',
// which is appended for normalize-punctuation and removed after it, as the chain reads the line).
void normalize_line(U32 &s, const std::string &lang);
// remove-non-printing-char.perl: every \p{C} character -> ' '.
void remove_non_printing(U32 &s);

enum class Flavour { Perl, Sacremoses };

// prefix -> 1 (nonbreaking) or 2 (#NUMERIC_ONLY#: nonbreaking before a number), as each tool reads the list.
std::unordered_map<U32, int> load_prefixes(const std::string &lang, Flavour flavour);

class Tokenizer {
public:
    Tokenizer(const std::string &lang, Flavour flavour);
    // tokenizer.perl -no-escape -l lang on one chomped line (Perl), or sacremoses' MosesTokenizer(lang)
    // .tokenize(escape=False) (Sacremoses).
    U32 operator()(const U32 &line) const;

private:
    void pad(U32 &t) const;
    void multidots(U32 &t, bool &markers) const;
    void commas(U32 &t) const;
    void apostrophes(U32 &t) const;
    void words_perl(U32 &t) const;
    void words_sacremoses(U32 &t) const;
    int prefix_kind(const U32 &pre) const;

    std::string lang_;
    Flavour flavour_;
    CharSet alnum_, alpha_;
    const CharSet *n_, *lower_, *space_;
    std::unordered_map<U32, int> prefixes_;  // perl: value 1 or 2 (#NUMERIC_ONLY#)
    std::unordered_map<U32, int> sac_numeric_;  // sacremoses: prefixes with #NUMERIC_ONLY#
};

// str.lower() of CPython 3.11 (full mapping, Final_Sigma).
U32 py_lower(const U32 &s);
// XLM's lowercase_and_remove_accent.py on one line: rstrip, lower, NFD, drop Mn, lower.
U32 lowercase_xlm(const U32 &s);
// xlp's `safe` mode (docs/prepare.md): lower, fold Latin/Greek diacritics, drop Cyrillic stress marks.
U32 lowercase_safe(const U32 &s);

// s without the characters of `space` at both ends.
U32 strip(const U32 &s, const CharSet &space);
// Runs of Python whitespace -> one ' ', no leading or trailing space (" ".join(s.split())).
void collapse_spaces(U32 &s);

// ------------------------------------------------------------------ record ids and hashes (hashes.cpp)
// For each text: 16 hex digits of sha1(id_prefix + text) into `ids`, blake2b-128(hash_prefix + text) into `digests`.
void record_hashes(const std::string &id_prefix, const std::string &hash_prefix,
                   const std::vector<std::pair<const char *, size_t>> &texts, std::string &ids, std::string &digests,
                   bool portable = false);  // portable: never the SHA-NI path (tests)

}  // namespace xlp
