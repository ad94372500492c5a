// The Moses tokenizer, -no-escape, in two flavours:
//   Perl:       mosesdecoder's tokenizer.perl (Version 1.1, 2021) under perl 5.36: what XLM's tokenize.sh runs.
//   Sacremoses: sacremoses 0.2.0's MosesTokenizer.tokenize(escape=False): xlp's default `moses` mode.
// Each step is one substitution of the original, in its order, with its leftmost/left-to-right semantics.
#include "text.h"

namespace xlp {
namespace {

size_t cslen(const char32_t *s) { size_t n = 0; while (s[n]) ++n; return n; }

bool starts_with(const U32 &s, size_t at, const char32_t *lit) {
    size_t n = cslen(lit);
    return at + n <= s.size() && s.compare(at, n, lit) == 0;
}

// s/(A)[M](B)/$1 REP $2/g for one-character groups.
template <class A, class B>
void triple(U32 &s, char32_t mid, A a, B b, const char32_t *rep) {
    if (s.size() < 3 || find32(s, mid) == U32::npos) return;
    U32 out;
    out.reserve(s.size() + 16);
    for (size_t i = 0; i < s.size();) {
        if (i + 2 < s.size() && s[i + 1] == mid && a(s[i]) && b(s[i + 2])) {
            out.push_back(s[i]);
            out.append(rep);
            out.push_back(s[i + 2]);
            i += 3;
        } else {
            out.push_back(s[i++]);
        }
    }
    s.swap(out);
}

// s/FROM/TO/g for a literal FROM; returns whether it matched.
bool lit(U32 &s, const char32_t *from, const char32_t *to) {
    size_t nf = cslen(from), pos = find32(s, from, 0, nf);
    if (pos == U32::npos) return false;
    U32 out;
    size_t last = 0;
    for (; pos != U32::npos; pos = find32(s, from, last, nf)) {
        out.append(s, last, pos - last);
        out.append(to);
        last = pos + nf;
    }
    out.append(s, last, U32::npos);
    s.swap(out);
    return true;
}

// sacremoses' restore_multidots: every (?:DOT)+MULTI -> as many periods as DOTs.
void restore_markers(U32 &s) {
    if (find32(s, U"MULTI") == U32::npos) return;
    U32 out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t j = i, dots = 0;
        while (starts_with(s, j, U"DOT")) { j += 3; ++dots; }
        if (dots && starts_with(s, j, U"MULTI")) {
            out.append(dots, U'.');
            i = j + 5;
        } else {
            out.push_back(s[i++]);
        }
    }
    s.swap(out);
}

// Runs of 2+ periods: perl's s/\.([\.]+)/ DOTMULTI$1/g (literal), or the closed form of perl's whole loop,
// which is also sacremoses' replace_multidots: " " + "DOT" * k + "MULTI" (+ " " if something follows).
void multidot_runs(U32 &t, bool literal) {
    U32 out;
    out.reserve(t.size() + 32);
    for (size_t i = 0; i < t.size();) {
        if (t[i] != U'.' || i + 1 >= t.size() || t[i + 1] != U'.') { out.push_back(t[i++]); continue; }
        size_t j = i;
        while (j < t.size() && t[j] == U'.') ++j;
        if (literal) {  // s/\.([\.]+)/ DOTMULTI$1/g; the loop below finishes the job as perl does
            out.append(U" DOTMULTI");
            out.append(j - i - 1, U'.');
        } else {  // the closed form of perl's loop (and sacremoses' replace_multidots)
            out.push_back(U' ');
            for (size_t k = i; k < j; ++k) out.append(U"DOT");
            out.append(U"MULTI");
            if (j < t.size()) out.push_back(U' ');
        }
        i = j;
    }
    t.swap(out);
}

}  // namespace

Tokenizer::Tokenizer(const std::string &lang, Flavour flavour) : lang_(lang), flavour_(flavour) {
    const Tables &T = tables();
    const bool perl = flavour == Flavour::Perl;
    alnum_ = perl ? T.perl_alnum : T.sac_alnum;
    alpha_ = perl ? T.perl_alpha : T.sac_alpha;
    n_ = perl ? &T.perl_n : &T.sac_n;
    lower_ = perl ? &T.perl_lower : &T.sac_lower;
    space_ = perl ? &T.perl_space : &T.py_space;
    if (!perl && (lang == "zh" || lang == "ja" || lang == "ko")) {  // sacremoses adds CJK letters
        const CharSet &cjk = lang == "zh" ? T.sac_cjk_zh : lang == "ja" ? T.sac_cjk_ja : T.sac_cjk_ko;
        alnum_.add(cjk);
        alpha_.add(cjk);
    }
    prefixes_ = load_prefixes(lang, flavour);
}

int Tokenizer::prefix_kind(const U32 &pre) const {
    auto it = prefixes_.find(pre);
    return it == prefixes_.end() ? 0 : it->second;
}

void Tokenizer::pad(U32 &t) const {
    // s/([^\p{IsAlnum}\s\.\'\`\,\-])/ $1 /g, with the extra in-word character of fi/sv (:) and ca (·)
    const bool perl = flavour_ == Flavour::Perl;
    // tokenizer.perl has no `use utf8`: its Catalan "·" is the two bytes C2 B7, so the class keeps U+00C2 and
    // U+00B7, and the second rule matches the two characters "Â·" (never a lone middle dot).
    const bool fi_sv = perl && (lang_ == "fi" || lang_ == "sv"), ca = perl && lang_ == "ca";
    U32 out(3 * t.size(), U'\0');  // (at most 3 characters for each: written through a pointer, then trimmed)
    char32_t *o = out.data();
    for (char32_t c : t) {
        bool keep = alnum_.has(c) || space_->has(c) || c == U'.' || c == U'\'' || c == U'`' || c == U',' ||
                    c == U'-' || (fi_sv && c == U':') || (ca && (c == 0xC2 || c == 0xB7));
        if (keep) { *o++ = c; continue; }
        o[0] = U' ', o[1] = c, o[2] = U' ';
        o += 3;
    }
    out.resize(size_t(o - out.data()));
    t.swap(out);
    // s/(X)(?=$|[^\p{Ll}])/ $1 /g: X not followed by a lowercase letter is separated anyway
    const U32 x = fi_sv ? U":" : ca ? U"\u00c2\u00b7" : (perl && lang_ == "tdt") ? U"'" : U"";
    if (x.empty() || find32(t, x) == U32::npos) return;
    const CharSet &ll = tables().perl_ll;
    out.clear();
    for (size_t i = 0; i < t.size();) {
        size_t j = i + x.size();
        if (t.compare(i, x.size(), x) == 0 && (j == t.size() || !ll.has(t[j]))) {
            out.push_back(U' ');
            out.append(x);
            out.push_back(U' ');
            i = j;
        } else {
            out.push_back(t[i++]);
        }
    }
    t.swap(out);
}

void Tokenizer::multidots(U32 &t, bool &literal) const {
    literal = flavour_ == Flavour::Perl && find32(t, U"DOTMULTI") != U32::npos;
    U32 out;
    if (find32(t, U"..") != U32::npos) multidot_runs(t, literal);
    if (!literal) return;
    while (find32(t, U"DOTMULTI.") != U32::npos) {
        // s/DOTMULTI\.([^\.])/DOTDOTMULTI $1/g
        out.clear();
        for (size_t i = 0; i < t.size();) {
            if (starts_with(t, i, U"DOTMULTI.") && i + 9 < t.size() && t[i + 9] != U'.') {
                out.append(U"DOTDOTMULTI ");
                out.push_back(t[i + 9]);
                i += 10;
            } else {
                out.push_back(t[i++]);
            }
        }
        t.swap(out);
        lit(t, U"DOTMULTI.", U"DOTDOTMULTI");
    }
}

void Tokenizer::commas(U32 &t) const {
    if (find32(t, U',') == U32::npos) return;
    const CharSet &n = *n_;
    U32 out(2 * t.size() + 2, U'\0');  // (a comma becomes 3 characters: at most twice as many; then trimmed)
    char32_t *o = out.data();
    for (size_t i = 0; i < t.size();) {  // s/([^\p{IsN}])[,]/$1 , /g
        if (i + 1 < t.size() && t[i + 1] == U',' && !n.has(t[i])) {
            o[0] = t[i], o[1] = U' ', o[2] = U',', o[3] = U' ';
            o += 4;
            i += 2;
        } else {
            *o++ = t[i++];
        }
    }
    out.resize(size_t(o - out.data()));
    t.swap(out);
    out.assign(2 * t.size() + 2, U'\0');
    o = out.data();
    for (size_t i = 0; i < t.size();) {  // s/[,]([^\p{IsN}])/ , $1/g
        if (t[i] == U',' && i + 1 < t.size() && !n.has(t[i + 1])) {
            o[0] = U' ', o[1] = U',', o[2] = U' ', o[3] = t[i + 1];
            o += 4;
            i += 2;
        } else {
            *o++ = t[i++];
        }
    }
    out.resize(size_t(o - out.data()));
    t.swap(out);
    // s/([\p{IsN}])[,]$/$1 ,/  (sacremoses: "\1 , ")
    if (t.size() >= 2 && t.back() == U',' && n.has(t[t.size() - 2])) {
        t.pop_back();
        t.append(flavour_ == Flavour::Perl ? U" ," : U" , ");
    }
}

void Tokenizer::apostrophes(U32 &t) const {
    if (find32(t, U'\'') == U32::npos) return;
    const CharSet &al = alpha_, &n = *n_;
    auto alpha = [&al](char32_t c) { return al.has(c); };
    auto not_alpha = [&al](char32_t c) { return !al.has(c); };
    auto not_alpha_n = [&al, &n](char32_t c) { return !al.has(c) && !n.has(c); };
    auto num = [&n](char32_t c) { return n.has(c); };
    auto s = [](char32_t c) { return c == U's'; };
    const bool perl = flavour_ == Flavour::Perl;
    const std::string &l = lang_;
    if (l == "en") {  // split contractions right
        triple(t, U'\'', not_alpha, not_alpha, U" ' ");
        triple(t, U'\'', not_alpha_n, alpha, U" ' ");
        triple(t, U'\'', alpha, not_alpha, U" ' ");
        triple(t, U'\'', alpha, alpha, U" '");
        triple(t, U'\'', num, s, U" '");  // special case for "1990's"
    } else if (l == "fr" || l == "it" || (perl && (l == "ga" || l == "ca"))) {  // split contractions left
        triple(t, U'\'', not_alpha, not_alpha, U" ' ");
        triple(t, U'\'', not_alpha, alpha, U" ' ");
        triple(t, U'\'', alpha, not_alpha, U" ' ");
        triple(t, U'\'', alpha, alpha, U"' ");
    } else if (perl && (l == "so" || l == "tdt")) {  // don't split glottals
        triple(t, U'\'', not_alpha, not_alpha, U" ' ");
        triple(t, U'\'', not_alpha, alpha, U" ' ");
        triple(t, U'\'', alpha, not_alpha, U" ' ");
    } else {
        lit(t, U"'", U" ' ");
    }
}

void Tokenizer::words_perl(U32 &t) const {
    // my @words = split(/\s/, $text): empty fields between spaces are kept, trailing empty ones dropped. The
    // words are spans of t (a copy only for a word ending in "."), written out as they go.
    std::vector<std::pair<size_t, size_t>> words;  // (start, length)
    size_t start = 0;
    for (size_t i = find32(t, U' '); i != U32::npos; i = find32(t, U' ', i + 1)) {
        words.emplace_back(start, i - start);
        start = i + 1;
    }
    words.emplace_back(start, t.size() - start);
    while (!words.empty() && words.back().second == 0) words.pop_back();
    const size_t n = words.size();
    // The words joined by single spaces, the empty ones left out: what appending each with a space and then
    // s/ +/ /g; s/^ //g; s/ $//g gives, as no word's output has a space at either end or two in a row.
    U32 out;
    out.reserve(t.size() + 16);
    for (size_t i = 0; i < n; ++i) {
        const auto [at, len] = words[i];
        if (len == 0) continue;
        if (!out.empty()) out.push_back(U' ');
        if (len >= 2 && t[at + len - 1] == U'.') {  // /^(\S+)\.$/
            const U32 pre = t.substr(at, len - 1);
            bool split;
            if (i == n - 1) {
                split = true;  // split last words independently as they are unlikely to be non-breaking prefixes
            } else {
                bool has_alpha = false;
                for (char32_t c : pre) has_alpha = has_alpha || alpha_.has(c);
                int kind = prefix_kind(pre);
                const auto [next_at, next_len] = words[i + 1];
                if ((find32(pre, U'.') != U32::npos && has_alpha) || kind == 1 || (next_len && lower_->has(t[next_at])))
                    split = false;
                else if (kind == 2 && next_len && t[next_at] >= U'0' && t[next_at] <= U'9')
                    split = false;
                else
                    split = true;
            }
            if (split) { out.append(pre); out.append(U" ."); }
            else out.append(t, at, len);
        } else {
            out.append(t, at, len);
        }
    }
    t.swap(out);
}

void Tokenizer::words_sacremoses(U32 &t) const {
    std::vector<U32> tokens;  // text.split()
    size_t i = 0;
    while (i < t.size()) {
        while (i < t.size() && space_->has(t[i])) ++i;
        size_t j = i;
        while (j < t.size() && !space_->has(t[j])) ++j;
        if (j > i) tokens.push_back(t.substr(i, j - i));
        i = j;
    }
    const size_t n = tokens.size();
    U32 out;
    for (size_t k = 0; k < n; ++k) {
        U32 &w = tokens[k];
        if (w.size() >= 2 && w.back() == U'.') {
            U32 pre = w.substr(0, w.size() - 1);
            bool has_alpha = false;
            for (char32_t c : pre) has_alpha = has_alpha || alpha_.has(c);
            int kind = prefix_kind(pre);
            bool keep = (find32(pre, U'.') != U32::npos && has_alpha) || kind == 1 ||
                        (k != n - 1 && lower_->has(tokens[k + 1][0]));
            if (!keep && kind == 2 && k + 1 < n && tokens[k + 1][0] >= U'0' && tokens[k + 1][0] <= U'9') keep = true;
            if (!keep) w = pre + U" .";
        }
        if (k) out.push_back(U' ');
        out.append(w);
    }
    t.swap(out);
}

U32 Tokenizer::operator()(const U32 &line) const {
    const bool perl = flavour_ == Flavour::Perl;
    if (perl) {  // whitespace-only lines are printed as they are (/^\s*$/)
        bool blank = true;
        for (char32_t c : line) if (!space_->has(c)) { blank = false; break; }
        if (blank) return line;
    }
    U32 t;
    if (perl) {  // " $text "; s/\s+/ /g; s/[\000-\037]//g; s/ +/ /g; s/^ //g; s/ $//g
        t.resize(line.size());  // (at most the line's characters: written through a pointer, then trimmed)
        char32_t *o = t.data();
        const char32_t *const first = o;
        bool pending = false;
        for (char32_t c : line) {
            if (space_->has(c)) { pending = true; continue; }
            if (c < 32) continue;
            if (pending && o != first) *o++ = U' ';
            pending = false;
            *o++ = c;
        }
        t.resize(size_t(o - first));
    } else {
        t.reserve(line.size() + 16);  // DEDUPLICATE_SPACE, ASCII_JUNK, strip()
        for (char32_t c : line) {
            if (space_->has(c)) { if (t.empty() || t.back() != U' ') t.push_back(U' '); }
            else t.push_back(c);
        }
        size_t w = 0;
        for (char32_t c : t) if (c >= 32) t[w++] = c;
        t.resize(w);
        t = strip(t, *space_);
    }
    pad(t);
    bool literal_dots = false;
    multidots(t, literal_dots);
    commas(t);
    apostrophes(t);
    if (perl) {
        words_perl(t);
    } else {
        words_sacremoses(t);
        U32 d;  // DEDUPLICATE_SPACE + strip()
        for (char32_t c : t) {
            if (space_->has(c)) { if (d.empty() || d.back() != U' ') d.push_back(U' '); }
            else d.push_back(c);
        }
        t = strip(d, *space_);
    }
    // s/\.\' ?$/ . ' /: ".'" at the end of the sentence is missed
    size_t n = t.size();
    if (n >= 3 && t[n - 1] == U' ' && t[n - 2] == U'\'' && t[n - 3] == U'.') t.replace(n - 3, 3, U" . ' ");
    else if (n >= 2 && t[n - 1] == U'\'' && t[n - 2] == U'.') t.replace(n - 2, 2, U" . ' ");
    if (literal_dots) {  // perl's restore loop, for text that contained "DOTMULTI" itself
        while (lit(t, U"DOTDOTMULTI", U"DOTMULTI.")) {}
        lit(t, U"DOTMULTI", U".");
    } else {
        restore_markers(t);
    }
    return t;
}

}  // namespace xlp
