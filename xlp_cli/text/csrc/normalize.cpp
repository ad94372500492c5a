// replace-unicode-punctuation.perl, normalize-punctuation.perl and remove-non-printing-char.perl.
//
// The first two scripts run without `use utf8`: perl sees bytes. Their literal patterns therefore match the
// UTF-8 bytes of the characters (the same as matching the characters), `\d` is [0-9], `\s` is [\t\n\v\f\r ],
// `[a-z]` with /i is [A-Za-z], and `[^<]` is any byte (any character, the newline included). Each rule is
// applied here, in the script's order, with perl's s///g semantics: leftmost matches, left to right, the
// search resuming after the end of the previous match.
#include <algorithm>
#include <initializer_list>

#include "text.h"

namespace xlp {
namespace {

// The non-ASCII characters the rules below look for (sorted): each has its own presence bit.
constexpr char32_t kRuleChars[] = {
    0x00A0, 0x00AB, 0x00B4, 0x00BA, 0x00BB, 0x2013, 0x2014, 0x2018, 0x2019, 0x201A, 0x201C, 0x201D, 0x201E, 0x2026,
    0x2236, 0x2501, 0x3001, 0x3002, 0x3008, 0x3009, 0x300A, 0x300B, 0x300C, 0x300D, 0x3010, 0x3011, 0xFF01, 0xFF05,
    0xFF08, 0xFF09, 0xFF0C, 0xFF0E, 0xFF10, 0xFF11, 0xFF12, 0xFF13, 0xFF14, 0xFF15, 0xFF16, 0xFF17, 0xFF18, 0xFF19,
    0xFF1A, 0xFF1B, 0xFF1F, 0xFF5E};
constexpr int kNRuleChars = sizeof(kRuleChars) / sizeof(kRuleChars[0]);
static_assert(kNRuleChars <= 64, "one presence bit per rule character");

// Which characters a line may contain: a rule with a character that is absent is skipped. ASCII and the rule
// characters exactly; any other character is reported present (no rule needs one).
struct Presence {
    uint64_t ascii[2] = {0, 0};
    uint64_t other = 0;
    static int slot(char32_t c) {  // the rule character's bit, or -1 (most text: by range alone)
        if (c < 0xA0 || (c > 0xBB && c < 0x2013) || (c > 0x2501 && c < 0x3001) || (c > 0x3011 && c < 0xFF01) ||
            c > 0xFF5E)
            return -1;
        const char32_t *it = std::lower_bound(kRuleChars, kRuleChars + kNRuleChars, c);
        return it != kRuleChars + kNRuleChars && *it == c ? int(it - kRuleChars) : -1;
    }
    void add(char32_t c) {
        if (c < 128) {
            ascii[c >> 6] |= uint64_t(1) << (c & 63);
        } else if (int k = slot(c); k >= 0) {
            other |= uint64_t(1) << k;
        }
    }
    void add(const char32_t *s) { for (; *s; ++s) add(*s); }
    bool may(char32_t c) const {
        if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
        const int k = slot(c);
        return k < 0 || ((other >> k) & 1);
    }
    bool any_rule_char() const { return other != 0; }  // a non-ASCII rule character is present
};

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_ascii_space(char32_t c) { return c == U' ' || (c >= U'\t' && c <= U'\r'); }
bool is_ascii_letter(char32_t c) { return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z'); }

size_t cslen(const char32_t *s) { size_t n = 0; while (s[n]) ++n; return n; }

// s/FROM/TO/g with a literal FROM.
void lit(U32 &s, Presence &p, const char32_t *from, const char32_t *to) {
    for (const char32_t *c = from; *c; ++c)
        if (!p.may(*c)) return;  // (" :" needs a ':': most rules start with a space, which every line has)
    const size_t nf = cslen(from);
    size_t pos = find32(s, from, 0, nf);
    if (pos == U32::npos) return;
    U32 out;
    out.reserve(s.size() + 16);
    size_t last = 0;
    while (pos != U32::npos) {
        out.append(s, last, pos - last);
        out.append(to);
        last = pos + nf;
        pos = find32(s, from, last, nf);
    }
    out.append(s, last, U32::npos);
    s.swap(out);
    p.add(to);
}

// s/FROM/TO/g for each (FROM, TO), in order.
void lits(U32 &s, Presence &p, std::initializer_list<std::pair<const char32_t *, const char32_t *>> rules) {
    for (const auto &r : rules) lit(s, p, r.first, r.second);
}

// s/ +/ /g
void squeeze_spaces(U32 &s, const Presence &p) {
    if (!p.may(U' ') || find32(s, U"  ") == U32::npos) return;
    size_t w = 0;
    for (size_t i = 0; i < s.size(); ++i)
        if (!(s[i] == U' ' && w > 0 && s[w - 1] == U' ')) s[w++] = s[i];
    s.resize(w);
}

// s/(A)M(B)/$1 R $2/g for one-character groups: A and B are predicates, M the middle character; the
// replacement keeps the two groups and puts `rep` in place of M.
template <class A, class B>
void triple(U32 &s, Presence &p, char32_t mid, A a, B b, const char32_t *rep) {
    if (!p.may(mid) || s.size() < 3) return;
    size_t first = 0;  // the first match (most lines have none: then nothing is copied)
    while (first + 2 < s.size() && !(s[first + 1] == mid && a(s[first]) && b(s[first + 2]))) ++first;
    if (first + 2 >= s.size()) return;
    U32 out;
    out.reserve(s.size() + 8);
    bool changed = false;
    out.append(s, 0, first);
    size_t i = first;
    while (i < s.size()) {
        if (i + 2 < s.size() && s[i + 1] == mid && a(s[i]) && b(s[i + 2])) {
            out.push_back(s[i]);
            out.append(rep);
            out.push_back(s[i + 2]);
            i += 3;
            changed = true;
        } else {
            out.push_back(s[i++]);
        }
    }
    if (changed) { s.swap(out); p.add(rep); }
}

// s/X */. /g  (replace-unicode-punctuation's ideographic and fullwidth full stops)
void stop_spaces(U32 &s, Presence &p, char32_t x) {
    if (!p.may(x) || find32(s, x) == U32::npos) return;
    U32 out;
    out.reserve(s.size() + 8);
    for (size_t i = 0; i < s.size();) {
        if (s[i] == x) {
            out.append(U". ");
            ++i;
            while (i < s.size() && s[i] == U' ') ++i;
        } else {
            out.push_back(s[i++]);
        }
    }
    s.swap(out);
    p.add(U". ");
}

// s/\"([,\.]+)/$1\"/g  (English: the comma or period goes before the closing quote)
void en_quote_comma(U32 &s, Presence &p) {
    if (!p.may(U'"')) return;
    U32 out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t j = i + 1;
        if (s[i] == U'"')
            while (j < s.size() && (s[j] == U',' || s[j] == U'.')) ++j;
        if (s[i] == U'"' && j > i + 1) {
            out.append(s, i + 1, j - i - 1);
            out.push_back(U'"');
            i = j;
        } else {
            out.push_back(s[i++]);
        }
    }
    s.swap(out);
}

// s/(\.+)\"(\s*[^<])/\"$1$2/g  (the period goes after the closing quote)
void period_quote(U32 &s, Presence &p) {
    if (!p.may(U'"') || !p.may(U'.')) return;
    U32 out;
    out.reserve(s.size());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        if (s[i] != U'.') { out.push_back(s[i++]); continue; }
        size_t q = i;
        while (q < n && s[q] == U'.') ++q;  // a match can only start at the start of a run of periods
        size_t end = 0;                      // end of the match, 0 if none
        if (q < n && s[q] == U'"') {
            size_t j = q + 1, k = j;
            while (k < n && is_ascii_space(s[k])) ++k;
            if (k < n && s[k] != U'<') end = k + 1;  // \s* greedy, then [^<]
            else if (k > j) end = k;                 // \s* gives back one space for [^<]
        }
        if (end) {
            out.push_back(U'"');
            out.append(s, i, q - i);
            out.append(s, q + 1, end - q - 1);
            i = end;
        } else {
            out.append(s, i, q - i);
            i = q;
        }
    }
    s.swap(out);
}

}  // namespace

// replace-unicode-punctuation.perl's substitutions, in its order; a null replacement stands for s/X */. /g.
const char32_t *const kUnicodePunctuation[][2] = {
    {U"，", U","}, {U"。", nullptr}, {U"、", U","}, {U"”", U"\""}, {U"“", U"\""}, {U"∶", U":"}, {U"：", U":"},
    {U"？", U"?"}, {U"《", U"\""}, {U"》", U"\""}, {U"）", U")"}, {U"！", U"!"}, {U"（", U"("}, {U"；", U";"},
    {U"１", U"1"}, {U"」", U"\""}, {U"「", U"\""}, {U"０", U"0"}, {U"３", U"3"}, {U"２", U"2"}, {U"５", U"5"},
    {U"６", U"6"}, {U"９", U"9"}, {U"７", U"7"}, {U"８", U"8"}, {U"４", U"4"}, {U"．", nullptr}, {U"～", U"~"},
    {U"’", U"'"}, {U"…", U"..."}, {U"━", U"-"}, {U"〈", U"<"}, {U"〉", U">"}, {U"【", U"["}, {U"】", U"]"},
    {U"％", U"%"},
};

namespace {

// The two scripts on `s`, with `p` the characters s may hold (kept a superset as the rules add characters).
void replace_unicode_punctuation(U32 &s, Presence &p) {
    if (!p.any_rule_char()) return;  // every rule starts with a non-ASCII rule character
    for (const auto &rule : kUnicodePunctuation) {
        if (rule[1]) lit(s, p, rule[0], rule[1]);
        else stop_spaces(s, p, rule[0][0]);
    }
}

void normalize_punctuation(U32 &s, Presence &p, const std::string &lang) {
    auto digit = [](char32_t c) { return is_digit(c); };
    auto letter = [](char32_t c) { return is_ascii_letter(c); };
    lit(s, p, U"\r", U"");
    // remove extra spaces
    lit(s, p, U"(", U" (");
    lit(s, p, U")", U") ");
    squeeze_spaces(s, p);
    // (These two have a space in the middle, which every line has: the rarer ')' and '%' decide whether to scan.)
    if (p.may(U')'))
        triple(s, p, U' ', [](char32_t c) { return c == U')'; },
               [](char32_t c) { return c == U'.' || c == U'!' || c == U':' || c == U'?' || c == U';' || c == U','; },
               U"");
    lit(s, p, U"( ", U"(");
    lit(s, p, U" )", U")");
    if (p.may(U'%')) triple(s, p, U' ', digit, [](char32_t c) { return c == U'%'; }, U"");
    lit(s, p, U" :", U":");
    lit(s, p, U" ;", U";");
    // normalize unicode punctuation
    lits(s, p, {{U"`", U"'"}, {U"''", U" \" "}, {U"„", U"\""}, {U"“", U"\""}, {U"”", U"\""}, {U"–", U"-"},
                {U"—", U" - "}});
    squeeze_spaces(s, p);
    lit(s, p, U"´", U"'");
    triple(s, p, U'‘', letter, letter, U"'");
    triple(s, p, U'’', letter, letter, U"'");
    lits(s, p, {{U"‘", U"'"}, {U"‚", U"'"}, {U"’", U"\""}, {U"''", U"\""}, {U"´´", U"\""}, {U"…", U"..."}});
    // French quotes
    lits(s, p, {{U"\u00a0«\u00a0", U" \""}, {U"«\u00a0", U"\""}, {U"«", U"\""}, {U"\u00a0»\u00a0", U"\" "},
                {U"\u00a0»", U"\""}, {U"»", U"\""}});
    // handle pseudo-spaces (U+00A0)
    lits(s, p, {{U"\u00a0%", U"%"}, {U"nº\u00a0", U"nº "}, {U"\u00a0:", U":"}, {U"\u00a0ºC", U" ºC"},
                {U"\u00a0cm", U" cm"}, {U"\u00a0?", U"?"}, {U"\u00a0!", U"!"}, {U"\u00a0;", U";"},
                {U",\u00a0", U", "}});
    squeeze_spaces(s, p);
    if (lang == "en") {
        en_quote_comma(s, p);
    } else if (lang != "cs" && lang != "cz") {
        lit(s, p, U",\"", U"\",");
        period_quote(s, p);
    }
    bool comma = lang == "de" || lang == "es" || lang == "cz" || lang == "cs" || lang == "fr";
    triple(s, p, U'\u00a0', digit, digit, comma ? U"," : U".");
}

Presence presence(const U32 &s) {
    Presence p;
    for (char32_t c : s) p.add(c);
    return p;
}

}  // namespace

void normalize_line(U32 &s, const std::string &lang) {
    Presence p = presence(s);  // (once for both scripts)
    replace_unicode_punctuation(s, p);
    s.push_back(U'\n');
    p.add(U'\n');
    normalize_punctuation(s, p, lang);
    if (!s.empty() && s.back() == U'\n') s.pop_back();
}

void remove_non_printing(U32 &s) {
    const CharSet &c = tables().perl_c;
    for (char32_t &ch : s)
        if (c.has(ch)) ch = U' ';
}

}  // namespace xlp
