// Wikitext -> plain-text paragraphs (xlp's `--source wikipedia`), one pass over the UTF-8 bytes of an article.
//
//   Wikitext(namespaces, drop_sections, entities)   namespaces: lowercase link prefixes that are not prose
//                                                   (file, category, ...); drop_sections: lowercase headings
//                                                   whose section is skipped (references, external links, ...);
//                                                   entities: HTML entity name with its ';' -> text
//     .lines(str) -> list[str]                      the article's paragraphs and list items, markup removed
//
// What is kept and dropped is docs/sources.md's table (Wikipedia): templates, parser functions, template
// arguments, tables, comments, refs and the other non-prose tags, headings, file/category/interlanguage links,
// bare URLs and magic words are dropped; link texts, external link titles, list and indent texts, the contents
// of formatting tags and HTML entities (decoded) are kept. Markup that does not close is kept as text, and a
// last net drops any line that still carries markup (`{{`, `}}`, `[[`, `]]`, `{|`, `|}`, `|`, `<ref`, `=...=`).
// The work runs without the GIL.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text.h"

namespace xlp {
namespace {

constexpr size_t NPOS = std::string::npos;

// Tags whose whole element (contents included) is dropped.
const char *const DROP_TAGS[] = {
    "ref", "references", "table", "gallery", "math", "chem", "ce", "score", "timeline", "imagemap",
    "syntaxhighlight", "source", "pre", "code", "templatedata", "graph", "mapframe", "maplink", "hiero",
    "noinclude", "includeonly", "categorytree", "inputbox", "section", "poem", "charinsert", "indicator",
    "templatestyles", "style", "script"};
// Tags whose markup is dropped and contents kept; the block ones end a line when they close.
const char *const BLOCK_TAGS[] = {"p", "div", "li", "dt", "dd", "blockquote", "center", "tr", "td", "th", "ul", "ol",
                                  "dl", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "tbody", "thead", "tfoot"};
const char *const INLINE_TAGS[] = {
    "span", "b", "i", "u", "s", "strike", "del", "ins", "em", "strong", "font", "abbr", "cite", "q", "mark",
    "bdi", "bdo", "dfn", "time", "data", "ruby", "rb", "rp", "rt", "wbr", "onlyinclude", "tt", "nowiki", "br", "hr",
    "translate", "tvar", "languages", "nobr", "blink", "sup", "sub", "small", "big", "var", "kbd", "samp"};
const char *const URL_SCHEMES[] = {"http://", "https://", "ftp://", "ftps://", "sftp://", "mailto:", "news:",
                                   "irc://", "ircs://", "gopher://", "git://", "svn://", "telnet://", "nntp://",
                                   "worldwind://", "mms://", "//"};
const char *const MEDIA_EXT[] = {".jpg", ".jpeg", ".png", ".svg", ".gif", ".tif", ".tiff", ".ogg", ".ogv", ".oga",
                                 ".webm", ".mp3", ".wav", ".pdf", ".djvu", ".webp", ".flac", ".mid", ".midi"};

// Sister projects: a piped link to one shows its label ([[wikt:clowder|clowder]] -> clowder).
const std::unordered_set<std::string> SISTER = {
    "wiktionary", "wikt", "wikiquote", "q", "wikisource", "s", "wikibooks", "b", "wikinews", "n", "wikiversity", "v",
    "wikivoyage", "voy", "wikispecies", "species", "wikidata", "d", "commons", "meta", "m", "mw", "w", "wikipedia",
    "wp"};

enum TagKind { TAG_NONE = 0, TAG_DROP, TAG_BLOCK, TAG_INLINE };

struct TagTable {
    std::unordered_map<std::string, TagKind> kind;
    TagTable() {
        for (const char *t : INLINE_TAGS) kind[t] = TAG_INLINE;
        for (const char *t : BLOCK_TAGS) kind[t] = TAG_BLOCK;
        for (const char *t : DROP_TAGS) kind[t] = TAG_DROP;
    }
};
const TagTable &tag_table() {
    static const TagTable t;
    return t;
}

inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }
inline char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
inline bool is_hspace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

bool starts_with(const std::string &s, size_t i, size_t hi, const char *lit) {
    const size_t n = std::strlen(lit);
    return i + n <= hi && std::memcmp(s.data() + i, lit, n) == 0;
}

bool starts_with_ci(const std::string &s, size_t i, size_t hi, const char *lit) {
    const size_t n = std::strlen(lit);
    if (i + n > hi) return false;
    for (size_t k = 0; k < n; ++k)
        if (lower_ascii(s[i + k]) != lit[k]) return false;
    return true;
}

std::string trim(const std::string &s) {
    size_t a = 0, b = s.size();
    while (a < b && (is_hspace(s[a]) || s[a] == '\n')) ++a;
    while (b > a && (is_hspace(s[b - 1]) || s[b - 1] == '\n')) --b;
    return s.substr(a, b - a);
}

std::string lower_utf8(const std::string &s) {
    bool ascii = true;
    for (char c : s) ascii = ascii && (static_cast<unsigned char>(c) < 0x80);
    if (ascii) {
        std::string out(s);
        for (char &c : out) c = lower_ascii(c);
        return out;
    }
    U32 u;
    decode_utf8(s.data(), s.size(), u);
    std::string out;
    encode_utf8(py_lower(u), out);
    return out;
}

// [a-z]{2,3}(-[a-z0-9-]+)? or simple: an interlanguage prefix
bool interwiki(const std::string &p) {
    if (p == "simple") return true;
    size_t n = 0;
    while (n < p.size() && p[n] >= 'a' && p[n] <= 'z') ++n;
    if (n < 2 || n > 3) return false;
    if (n == p.size()) return true;
    if (p[n] != '-' || n + 1 == p.size()) return false;
    for (size_t k = n + 1; k < p.size(); ++k)
        if (!((p[k] >= 'a' && p[k] <= 'z') || is_digit(p[k]) || p[k] == '-')) return false;
    return true;
}

struct Rules {
    std::unordered_set<std::string> ns, drop_sections;
    std::unordered_map<std::string, std::string> entities;  // "amp;" -> "&"
    size_t longest_entity = 0;
};

class Converter {
public:
    // The scans for closing markup are bounded: `budget_` steps in all (32 per byte of the article), after which
    // markup counts as unclosed (text that the net drops), and links, templates and tags nest at most
    // MAX_DEPTH deep (deeper contents are dropped), so that no article takes more than linear time or stack.
    Converter(const Rules &rules, const std::string &s) : r_(rules), s_(s), budget_(32 * long(s.size()) + 65536) {}

    // The text of s[lo:hi) appended to out; `top`: at the article's top level (headings, tables, sections).
    void run(size_t lo, size_t hi, std::string &out, bool top) {
        const std::string &s = s_;
        if (depth_ >= MAX_DEPTH) return;
        ++depth_;
        run_(lo, hi, out, top, s);
        --depth_;
    }

private:
    static constexpr int MAX_DEPTH = 40;

    bool spend(long steps = 1) const {
        budget_ -= steps;
        return budget_ >= 0;
    }

    void run_(size_t lo, size_t hi, std::string &out, bool top, const std::string &s) {
        size_t i = lo;
        while (i < hi) {
            if (top && (i == lo || s[i - 1] == '\n')) {
                const size_t next = line_start(i, hi, out);
                if (next != i) {
                    i = next;
                    continue;
                }
            }
            // Plain text up to the next character the switch below looks at, in one append: h/H/f/F only at
            // a word's start (a bare URL's), a newline at the top level ends the span after it (a line start).
            size_t j = i;
            while (j < hi) {
                const unsigned char d = static_cast<unsigned char>(s[j]);
                if (d == '<' || d == '{' || d == '[') break;
                if (d == '\n' && top) {
                    ++j;
                    break;
                }
                if (((d | 0x20) == 'h' || (d | 0x20) == 'f') && (j == lo || !is_alnum(s[j - 1]))) break;
                ++j;
            }
            if (j > i) {
                out.append(s, i, j - i);
                i = j;
                continue;
            }
            const char c = s[i];
            switch (c) {
            case '<': {
                if (starts_with(s, i, hi, "<!--")) {
                    i = comment_end(i, hi);
                    continue;
                }
                const size_t next = tag(i, hi, out);
                if (next != NPOS) {
                    i = next;
                    continue;
                }
                break;
            }
            case '{':
                if (i + 1 < hi && s[i + 1] == '{') {
                    const size_t end = braces_end(i, hi);
                    if (end != NPOS) {
                        inline_template(i, end, out);
                        i = end;
                        continue;
                    }
                    while (i < hi && s[i] == '{') out.push_back(s[i++]);  // unclosed: text (the net drops the line)
                    continue;
                }
                break;
            case '[':
                if (i + 1 < hi && s[i + 1] == '[') {
                    const size_t close = link_close(i, hi);
                    if (close != NPOS && link(i, close, out)) {
                        i = close + 2;
                        continue;
                    }
                    out.append("[[");
                    i += 2;
                    continue;
                } else {
                    const size_t next = external_link(i, hi, out);
                    if (next != NPOS) {
                        i = next;
                        continue;
                    }
                }
                break;
            case 'h': case 'H': case 'f': case 'F':
                if (i == lo || !is_alnum(s[i - 1])) {
                    const size_t next = bare_url(i, hi);
                    if (next != NPOS) {
                        i = next;
                        continue;
                    }
                }
                break;
            default:
                break;
            }
            out.push_back(c);
            ++i;
        }
    }

    size_t line_end(size_t i, size_t hi) const {
        const void *p = std::memchr(s_.data() + i, '\n', hi - i);
        return p ? size_t(static_cast<const char *>(p) - s_.data()) : hi;
    }

    // Headings, tables and horizontal rules at the start of a line: the position after them (i if none).
    size_t line_start(size_t i, size_t hi, std::string &out) {
        const std::string &s = s_;
        if (s[i] == '=') {
            int level = 0;
            const size_t e = line_end(i, hi);
            size_t b = heading_end(i, e);
            size_t a = i;
            while (a < b && s[a] == '=') ++a;
            size_t z = b;
            while (z > a && s[z - 1] == '=') --z;
            const size_t left = a - i, right = b - z;
            if (left == 0 || right == 0 || z <= a) return i;
            level = int(left < right ? left : right);
            out.push_back('\n');
            std::string title = lower_utf8(trim(s.substr(a, z - a)));
            if (r_.drop_sections.count(title)) return section_end(e, hi, level);
            return e;
        }
        size_t k = i;
        while (k < hi && (s[k] == ' ' || s[k] == '\t' || s[k] == ':')) ++k;
        if (starts_with(s, k, hi, "{|")) {
            const size_t end = table_end(k, hi);
            if (end != NPOS) {
                out.push_back('\n');
                return end;
            }
        }
        if (starts_with(s, i, hi, "----")) return line_end(i, hi);
        return i;
    }

    // The end of a heading line's text: trailing white space and comments (`== H == <!-- note -->`) left out.
    size_t heading_end(size_t i, size_t e) const {
        const std::string &s = s_;
        size_t b = e;
        for (;;) {
            while (b > i && is_hspace(s[b - 1])) --b;
            if (b >= i + 7 && s.compare(b - 3, 3, "-->") == 0) {
                size_t open = b - 7;
                while (open > i && s.compare(open, 4, "<!--") != 0) --open;
                if (open > i) {
                    b = open;
                    continue;
                }
            }
            return b;
        }
    }

    // After a dropped section: the start of the next heading of the same or a higher level (or hi).
    size_t section_end(size_t e, size_t hi, int level) const {
        const std::string &s = s_;
        size_t i = e;
        while (i < hi) {
            ++i;  // past '\n'
            if (i < hi && s[i] == '=') {
                const size_t end = line_end(i, hi);
                size_t b = heading_end(i, end);
                size_t a = i;
                while (a < b && s[a] == '=') ++a;
                size_t z = b;
                while (z > a && s[z - 1] == '=') --z;
                const size_t l = std::min(a - i, b - z);
                if (l > 0 && z > a && int(l) <= level) return i;
            }
            i = line_end(i, hi);
        }
        return hi;
    }

    size_t comment_end(size_t i, size_t hi) const {
        const size_t e = s_.find("-->", i + 4);
        return (e == NPOS || e + 3 > hi) ? hi : e + 3;
    }

    // i at a run of '{' (two or more): the position after the matching run of '}', NPOS if it never closes.
    size_t braces_end(size_t i, size_t hi) const {
        const std::string &s = s_;
        long depth = 0;
        size_t j = i;
        while (j < hi) {
            if (!spend()) return NPOS;
            const char c = s[j];
            if (c == '{') {
                ++depth;
                ++j;
            } else if (c == '}') {
                --depth;
                ++j;
                if (depth == 0) return j;
            } else if (c == '<' && starts_with(s, j, hi, "<!--")) {
                j = comment_end(j, hi);
            } else if (c == '<' && starts_with_ci(s, j, hi, "<nowiki")) {
                const size_t e = close_of(j, hi, "nowiki");
                j = e == NPOS ? j + 1 : e;
            } else {
                size_t next = j + 1;
                while (next < hi && s[next] != '{' && s[next] != '}' && s[next] != '<') ++next;
                if (!spend(long(next - j) / 8)) return NPOS;
                j = next;
            }
        }
        return NPOS;
    }

    // i at "{|" at a line start: the end of the line that closes the table ("|}", nested tables counted).
    size_t table_end(size_t i, size_t hi) const {
        const std::string &s = s_;
        int depth = 0;
        size_t line = i;
        while (line < hi) {
            if (!spend()) return NPOS;
            size_t k = line;
            while (k < hi && (s[k] == ' ' || s[k] == '\t' || s[k] == ':')) ++k;
            const size_t e = line_end(line, hi);
            if (starts_with(s, k, hi, "{|")) ++depth;
            else if (starts_with(s, k, hi, "|}")) {
                if (--depth == 0) return e;
            }
            // a template that spans lines: its lines are not table lines
            size_t j = k;
            size_t next = e;
            while (j < e) {
                if (s[j] == '{' && j + 1 < hi && s[j + 1] == '{') {
                    const size_t b = braces_end(j, hi);
                    if (b == NPOS) break;
                    j = b;
                    if (j > e) next = line_end(j, hi);
                    continue;
                }
                ++j;
            }
            line = next + 1;
        }
        return NPOS;
    }

    // i at "[[": the position of the "]]" that closes it, NPOS if none.
    size_t link_close(size_t i, size_t hi) const {
        const std::string &s = s_;
        int depth = 0;
        size_t j = i;
        while (j < hi) {
            if (!spend()) return NPOS;
            const char c = s[j];
            if (c == '[' && j + 1 < hi && s[j + 1] == '[') {
                ++depth;
                j += 2;
            } else if (c == ']' && j + 1 < hi && s[j + 1] == ']') {
                if (--depth == 0) return j;
                j += 2;
            } else if (c == '{' && j + 1 < hi && s[j + 1] == '{') {
                const size_t b = braces_end(j, hi);
                j = b == NPOS ? j + 2 : b;
            } else if (c == '\n' && j + 1 < hi && s[j + 1] == '\n') {
                return NPOS;  // a paragraph break: this "[[" does not close
            } else {
                ++j;
            }
        }
        return NPOS;
    }

    // The first '|' of s[lo:hi) outside nested links and templates (NPOS if none).
    size_t pipe(size_t lo, size_t hi) const {
        const std::string &s = s_;
        size_t j = lo;
        while (j < hi) {
            if (!spend()) return NPOS;
            const char c = s[j];
            if (c == '|') return j;
            if (c == '[' && j + 1 < hi && s[j + 1] == '[') {
                const size_t e = link_close(j, hi);
                j = e == NPOS ? j + 2 : e + 2;
            } else if (c == '{' && j + 1 < hi && s[j + 1] == '{') {
                const size_t b = braces_end(j, hi);
                j = b == NPOS ? j + 2 : b;
            } else {
                ++j;
            }
        }
        return NPOS;
    }

    // The text that a few inline templates show ({{lang|fr|très}} -> très, {{nowrap|x}} -> x,
    // {{convert|4|kg|lb}} -> 4 kg); every other template shows nothing. i at "{{", end after "}}".
    void inline_template(size_t i, size_t end, std::string &out) {
        const std::string &s = s_;
        if (end - i < 5 || s[i + 2] == '{') return;  // {{{argument}}}
        std::vector<std::pair<size_t, size_t>> parts;  // name, then the parameters
        size_t lo = i + 2;
        const size_t hi = end - 2;
        for (;;) {
            const size_t bar = pipe(lo, hi);
            parts.emplace_back(lo, bar == NPOS ? hi : bar);
            if (bar == NPOS) break;
            lo = bar + 1;
        }
        std::string name = lower_utf8(trim(s.substr(parts[0].first, parts[0].second - parts[0].first)));
        for (char &c : name) if (c == '_') c = ' ';
        std::vector<std::pair<size_t, size_t>> positional;
        for (size_t k = 1; k < parts.size(); ++k) {
            const std::string head = s.substr(parts[k].first, std::min<size_t>(parts[k].second - parts[k].first, 40));
            const size_t eq = head.find('=');
            if (eq != NPOS && head.find_first_of("{[<") > eq) continue;  // a named parameter
            positional.push_back(parts[k]);
        }
        auto show = [&](size_t k) {
            if (k < positional.size()) run(positional[k].first, positional[k].second, out, false);
        };
        if ((name == "lang" || name == "transl") && positional.size() >= 2) {
            show(1);
        } else if ((name == "nowrap" || name == "nobr" || name == "small" || name == "nowrap begin") &&
                   positional.size() >= 1) {
            show(0);
        } else if ((name == "convert" || name == "cvt") && positional.size() >= 2) {
            const std::string v = trim(s.substr(positional[0].first, positional[0].second - positional[0].first));
            if (v.empty() || !(is_digit(v[0]) || v[0] == '-' || v[0] == '.')) return;
            const std::string second = trim(s.substr(positional[1].first, positional[1].second - positional[1].first));
            const bool range = second == "to" || second == "-" || second == "and" || second == "or" || second == "by" ||
                               second == "x" || second == "+/-";
            const size_t last = range ? 3 : 1;
            if (last >= positional.size()) return;
            for (size_t k = 0; k <= last; ++k) {
                if (k) out.push_back(' ');
                show(k);
            }
        }
    }

    // [[target|label]] between i ("[[") and close ("]]"): false if it is not a link (then it is text).
    bool link(size_t i, size_t close, std::string &out) {
        const std::string &s = s_;
        const size_t bar = pipe(i + 2, close);
        const size_t tend = bar == NPOS ? close : bar;
        std::string target = trim(s.substr(i + 2, tend - i - 2));
        if (target.empty() || target.find('\n') != NPOS) return false;  // not a link: text
        if (target[0] != ':') {
            const size_t colon = target.find(':');
            if (colon != NPOS) {
                const std::string prefix = lower_utf8(trim(target.substr(0, colon)));
                if (interwiki(prefix)) return true;  // an interlanguage link: not shown in the article
                if (r_.ns.count(prefix)) {           // file, category, ...: dropped; a sister project's label is text
                    if (bar == NPOS || !SISTER.count(prefix) || pipe(bar + 1, close) != NPOS) return true;
                    run(bar + 1, close, out, false);
                    return true;
                }
            }
        }
        const std::string low = lower_utf8(target);
        for (const char *ext : MEDIA_EXT) {
            const size_t n = std::strlen(ext);
            if (low.size() >= n && low.compare(low.size() - n, n, ext) == 0) return true;  // an image (alias ns)
        }
        if (bar != NPOS) {
            if (pipe(bar + 1, close) != NPOS) return true;  // [[X|thumb|caption]]: an image
            run(bar + 1, close, out, false);
            return true;
        }
        size_t a = i + 2;
        while (a < close && (is_hspace(s[a]) || s[a] == ':')) ++a;
        run(a, close, out, false);
        return true;
    }

    // [url label]: the label; NPOS if s[i] does not start an external link.
    size_t external_link(size_t i, size_t hi, std::string &out) {
        const std::string &s = s_;
        bool url = false;
        for (const char *scheme : URL_SCHEMES)
            if (starts_with_ci(s, i + 1, hi, scheme)) url = true;
        if (!url) return NPOS;
        const size_t e = line_end(i, hi);
        const void *p = std::memchr(s.data() + i, ']', e - i);
        if (!spend(long(p ? static_cast<const char *>(p) - (s.data() + i) : e - i) / 4) || !p) return NPOS;
        const size_t close = size_t(static_cast<const char *>(p) - s.data());
        size_t j = i + 1;
        while (j < close && !is_hspace(s[j]) && s[j] != '<' && s[j] != '"') ++j;
        while (j < close && is_hspace(s[j])) ++j;
        if (j < close) run(j, close, out, false);
        return close + 1;
    }

    // A bare URL (http://, https://, ftp://): the position after it, NPOS if s[i] does not start one.
    size_t bare_url(size_t i, size_t hi) const {
        const std::string &s = s_;
        if (!(starts_with_ci(s, i, hi, "http://") || starts_with_ci(s, i, hi, "https://") ||
              starts_with_ci(s, i, hi, "ftp://")))
            return NPOS;
        size_t j = i;
        bool paren = false;
        while (j < hi) {
            const char c = s[j];
            if (is_hspace(c) || c == '\n' || c == '[' || c == ']' || c == '<' || c == '>' || c == '"' || c == '{' ||
                c == '}' || c == '|')
                break;
            if (c == '(') paren = true;
            ++j;
        }
        while (j > i && (std::strchr(".,;:!?'", s[j - 1]) || (s[j - 1] == ')' && !paren))) --j;
        return j;
    }

    // </name ...> closing the element opened at i (same-name elements nested), position after it; NPOS if none.
    size_t close_of(size_t i, size_t hi, const std::string &name) const {
        const std::string &s = s_;
        int depth = 0;
        size_t j = i;
        while (j < hi) {
            if (!spend()) return NPOS;
            const void *p = std::memchr(s.data() + j, '<', hi - j);
            if (!p) return NPOS;
            const size_t at = size_t(static_cast<const char *>(p) - s.data());
            if (!spend(long(at - j) / 64)) return NPOS;
            j = at;
            const bool closing = j + 1 < hi && s[j + 1] == '/';
            const size_t n = j + 1 + (closing ? 1 : 0);
            if (starts_with_ci(s, n, hi, name.c_str()) &&
                (n + name.size() >= hi || !is_alnum(s[n + name.size()]))) {
                const void *q = std::memchr(s.data() + n, '>', hi - n);
                if (!q) return NPOS;
                const size_t gt = size_t(static_cast<const char *>(q) - s.data());
                if (closing) {
                    if (--depth == 0) return gt + 1;
                } else if (s[gt - 1] != '/') {
                    ++depth;
                }
                j = gt + 1;
            } else {
                ++j;
            }
        }
        return NPOS;
    }

    // An HTML or extension tag at i: its text appended, the position after it; NPOS if it is not a tag.
    size_t tag(size_t i, size_t hi, std::string &out) {
        const std::string &s = s_;
        size_t j = i + 1;
        const bool closing = j < hi && s[j] == '/';
        if (closing) ++j;
        const size_t n0 = j;
        while (j < hi && is_alnum(s[j])) ++j;
        if (j == n0 || !is_alpha(s[n0])) return NPOS;
        std::string name(s, n0, j - n0);
        for (char &c : name) c = lower_ascii(c);
        auto it = tag_table().kind.find(name);
        if (it == tag_table().kind.end()) return NPOS;
        if (j < hi && !(is_hspace(s[j]) || s[j] == '\n' || s[j] == '/' || s[j] == '>')) return NPOS;
        size_t gt = j;
        while (gt < hi && s[gt] != '>' && s[gt] != '<') ++gt;
        if (gt >= hi || s[gt] != '>') return NPOS;
        const bool selfclose = s[gt - 1] == '/';
        const size_t after = gt + 1;
        const TagKind kind = it->second;
        if (name == "br" || name == "hr") {
            out.push_back('\n');
            return after;
        }
        if (closing) {
            if (kind == TAG_BLOCK) out.push_back('\n');
            return after;
        }
        if (selfclose) return after;
        if (kind == TAG_DROP) {
            const size_t e = close_of(i, hi, name);
            return e == NPOS ? after : e;  // unclosed: only the tag goes
        }
        if (name == "nowiki") {
            const size_t e = close_of(i, hi, name);
            if (e == NPOS) return after;
            const size_t lt = s.rfind('<', e - 1);
            out.append(s, after, lt - after);
            return e;
        }
        return after;
    }

    const Rules &r_;
    const std::string &s_;
    mutable long budget_;
    int depth_ = 0;
};

// ------------------------------------------------------------------ paragraphs
void decode_entities(const Rules &r, std::string &t) {
    if (t.find('&') == NPOS) return;
    std::string out;
    out.reserve(t.size());
    size_t i = 0;
    while (i < t.size()) {
        if (t[i] != '&') {  // up to the next '&' in one append
            const void *amp = std::memchr(t.data() + i, '&', t.size() - i);
            const size_t e = amp ? size_t(static_cast<const char *>(amp) - t.data()) : t.size();
            out.append(t, i, e - i);
            i = e;
            continue;
        }
        // the ';' within an entity's length of the '&' (a search further on would make many '&' quadratic)
        const size_t window = std::min(t.size() - (i + 1), r.longest_entity + 2);
        const void *found = std::memchr(t.data() + i + 1, ';', window);
        const size_t semi = found ? size_t(static_cast<const char *>(found) - t.data()) : NPOS;
        if (semi == NPOS) {
            out.push_back(t[i++]);
            continue;
        }
        if (t[i + 1] == '#') {
            const bool hex = i + 2 < semi && (t[i + 2] == 'x' || t[i + 2] == 'X');
            const size_t a = i + (hex ? 3 : 2);
            bool ok = a < semi && semi - a <= 8;
            unsigned long cp = 0;
            for (size_t k = a; ok && k < semi; ++k) {
                const char c = t[k];
                int d = is_digit(c) ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                                     : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0) ok = false;
                else cp = cp * (hex ? 16 : 10) + unsigned(d);
            }
            if (ok) {
                if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) cp = 0xFFFD;
                U32 u(1, char32_t(cp));
                std::string enc;
                encode_utf8(u, enc);
                out += enc;
                i = semi + 1;
                continue;
            }
        } else {
            auto it = r.entities.find(t.substr(i + 1, semi - i));
            if (it != r.entities.end()) {
                out += it->second;
                i = semi + 1;
                continue;
            }
        }
        out.push_back(t[i++]);
    }
    t.swap(out);
}

// Unicode white space that Python's str.strip() removes, at s[i] (its length in bytes, 0 if none).
size_t space_at(const std::string &s, size_t i) {
    const unsigned char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return 1;
    if (c == 0xC2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) == 0xA0 ||
                                          static_cast<unsigned char>(s[i + 1]) == 0x85)) return 2;
    if (c == 0xE2 && i + 2 < s.size()) {
        const unsigned char b = s[i + 1], d = s[i + 2];
        if (b == 0x80 && ((d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF)) return 3;
        if (b == 0x81 && d == 0x9F) return 3;
    }
    if (c == 0xE3 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        static_cast<unsigned char>(s[i + 2]) == 0x80) return 3;
    if (c == 0xE1 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x9A &&
        static_cast<unsigned char>(s[i + 2]) == 0x80) return 3;
    return 0;
}

// [ \t\u00a0] at s[i]: its length (0 if none)
inline size_t blank_at(const std::string &s, size_t i) {
    if (s[i] == ' ' || s[i] == '\t') return 1;
    if (static_cast<unsigned char>(s[i]) == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xA0)
        return 2;
    return 0;
}

// One line of converted text -> the paragraph (empty if the line is to be dropped).
std::string clean_line(std::string line) {
    // (A step copies the line only where it may change it: most lines have no '' or __, no ( or [.)
    std::string a;
    if (line.find("''") == NPOS && line.find("__") == NPOS) a.swap(line);
    else a.reserve(line.size());
    // '' and ''' (italic, bold) and __MAGIC_WORDS__
    for (size_t i = 0; i < line.size();) {
        if (line[i] == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
            while (i < line.size() && line[i] == '\'') ++i;
            continue;
        }
        if (line[i] == '_' && i + 1 < line.size() && line[i + 1] == '_') {
            size_t j = i + 2;
            while (j < line.size() && ((line[j] >= 'A' && line[j] <= 'Z') || line[j] == '_')) ++j;
            if (j > i + 2 && j <= line.size() && line[j - 1] == '_' && line[j - 2] == '_' && j - i > 4) {
                i = j;
                continue;
            }
        }
        a.push_back(line[i++]);
    }
    // empty brackets "( )", "(, )", "[ ]"
    std::string b;
    if (a.find('(') == NPOS && a.find('[') == NPOS) b.swap(a);
    else b.reserve(a.size());
    for (size_t i = 0; i < a.size();) {
        if (a[i] == '(' || a[i] == '[') {
            size_t j = i + 1, w;
            while (j < a.size() && (w = space_at(a, j))) j += w;
            if (a[i] == '(' && j < a.size() && (a[j] == ',' || a[j] == ';' || a[j] == ':')) {
                ++j;
                while (j < a.size() && (w = space_at(a, j))) j += w;
            }
            if (j < a.size() && a[j] == (a[i] == '(' ? ')' : ']')) {
                i = j + 1;
                continue;
            }
        }
        b.push_back(a[i++]);
    }
    // runs of [ \t\u00a0] -> ' '; no space before , ; . : )
    std::string c(b.size(), '\0');  // (at most b's bytes: written through a pointer, then trimmed)
    char *o = c.data();
    for (size_t i = 0; i < b.size();) {
        size_t w = blank_at(b, i);
        if (!w) {
            *o++ = b[i++];
            continue;
        }
        size_t j = i;
        while (j < b.size() && (w = blank_at(b, j))) j += w;
        if (!(j < b.size() && std::strchr(",;.:)", b[j]) && b[j])) *o++ = ' ';
        i = j;
    }
    c.resize(size_t(o - c.data()));
    // strip, list markers, strip
    size_t lo = 0, hi = c.size(), w;
    for (;;) {
        while (lo < hi && (w = space_at(c, lo))) lo += w;
        if (lo < hi && std::strchr("*#:;", c[lo])) {
            while (lo < hi && std::strchr("*#:;", c[lo])) ++lo;
            continue;
        }
        break;
    }
    while (hi > lo) {
        size_t k = hi - 1;
        while (k > lo && (static_cast<unsigned char>(c[k]) & 0xC0) == 0x80) --k;
        if (space_at(c, k) == hi - k) hi = k;
        else break;
    }
    std::string out = c.substr(lo, hi - lo);
    // the net: markup left over; a fragment that starts with the punctuation after something removed
    if (out.empty() || std::strchr("!,;.)", out[0]) || (out[0] == '=' && out.back() == '=') || out.find('|') != NPOS || out.find("{{") != NPOS ||
        out.find("}}") != NPOS || out.find("[[") != NPOS || out.find("]]") != NPOS || out.find("<ref") != NPOS ||
        out.find("</ref") != NPOS)
        return std::string();
    // a letter or a digit somewhere
    bool ascii = true;
    for (char ch : out) {
        if (is_alnum(ch)) return out;
        if (static_cast<unsigned char>(ch) >= 0x80) ascii = false;
    }
    if (ascii) return std::string();
    U32 u;
    decode_utf8(out.data(), out.size(), u);
    const CharSet &alnum = tables().perl_alnum;
    for (char32_t ch : u)
        if (alnum.has(ch)) return out;
    return std::string();
}

std::vector<std::string> paragraphs(const Rules &rules, const std::string &text) {
    std::string flat;
    flat.reserve(text.size());
    Converter(rules, text).run(0, text.size(), flat, true);
    decode_entities(rules, flat);
    std::vector<std::string> out;
    size_t i = 0;
    while (i <= flat.size()) {
        size_t e = flat.find('\n', i);
        if (e == NPOS) e = flat.size();
        std::string p = clean_line(flat.substr(i, e - i));
        if (!p.empty()) out.push_back(std::move(p));
        i = e + 1;
    }
    return out;
}

// ------------------------------------------------------------------ Python type
struct WikitextObject {
    PyObject_HEAD
    Rules *rules;
};

bool utf8_of(PyObject *o, std::string &out) {
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(o, &n);
    if (!p) return false;
    out.assign(p, size_t(n));
    return true;
}

bool strings_into(PyObject *seq, std::unordered_set<std::string> &out) {
    PyObject *it = PyObject_GetIter(seq);
    if (!it) return false;
    PyObject *o;
    while ((o = PyIter_Next(it))) {
        std::string s;
        const bool ok = PyUnicode_Check(o) && utf8_of(o, s);
        Py_DECREF(o);
        if (!ok) {
            Py_DECREF(it);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "expected str");
            return false;
        }
        out.insert(lower_utf8(s));
    }
    Py_DECREF(it);
    return !PyErr_Occurred();
}

PyObject *Wikitext_new(PyTypeObject *type, PyObject *args, PyObject *) {
    PyObject *ns, *sections, *entities;
    if (!PyArg_ParseTuple(args, "OOO!", &ns, &sections, &PyDict_Type, &entities)) return nullptr;
    auto rules = new Rules();
    if (!strings_into(ns, rules->ns) || !strings_into(sections, rules->drop_sections)) {
        delete rules;
        return nullptr;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(entities, &pos, &key, &value)) {
        std::string k, v;
        if (!PyUnicode_Check(key) || !PyUnicode_Check(value) || !utf8_of(key, k) || !utf8_of(value, v)) {
            delete rules;
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "entities: expected str -> str");
            return nullptr;
        }
        if (k.empty() || k.back() != ';') continue;
        rules->longest_entity = std::max(rules->longest_entity, k.size());
        rules->entities.emplace(std::move(k), std::move(v));
    }
    auto *self = reinterpret_cast<WikitextObject *>(type->tp_alloc(type, 0));
    if (!self) {
        delete rules;
        return nullptr;
    }
    self->rules = rules;
    return reinterpret_cast<PyObject *>(self);
}

void Wikitext_dealloc(WikitextObject *self) {
    delete self->rules;
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *Wikitext_lines(WikitextObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected str");
        return nullptr;
    }
    std::string text;
    if (!utf8_of(arg, text)) return nullptr;
    std::vector<std::string> lines;
    Py_BEGIN_ALLOW_THREADS
    lines = paragraphs(*self->rules, text);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(Py_ssize_t(lines.size()));
    if (!out) return nullptr;
    for (size_t k = 0; k < lines.size(); ++k) {
        PyObject *o = PyUnicode_DecodeUTF8(lines[k].data(), Py_ssize_t(lines[k].size()), "replace");
        if (!o) {
            Py_DECREF(out);
            return nullptr;
        }
        PyList_SET_ITEM(out, Py_ssize_t(k), o);
    }
    return out;
}

PyMethodDef Wikitext_methods[] = {
    {"lines", reinterpret_cast<PyCFunction>(Wikitext_lines), METH_O, "lines(wikitext) -> list[str] (paragraphs)"},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject WikitextType = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace

// The rules of a Wikitext object (nullptr if `o` is not one), and the paragraphs they give (without the GIL):
// what Wikitext.lines does, for the native pipeline's Pipeline.pages (module.cpp).
const void *wikitext_rules(PyObject *o) {
    return PyObject_TypeCheck(o, &WikitextType) ? reinterpret_cast<WikitextObject *>(o)->rules : nullptr;
}

std::vector<std::string> wikitext_paragraphs(const void *rules, const std::string &text) {
    return paragraphs(*static_cast<const Rules *>(rules), text);
}

// Adds the Wikitext type to the module (called from PyInit__native).
int add_wikitext(PyObject *m) {
    WikitextType.tp_name = "xlp_cli.text._native.Wikitext";
    WikitextType.tp_basicsize = sizeof(WikitextObject);
    WikitextType.tp_flags = Py_TPFLAGS_DEFAULT;
    WikitextType.tp_doc = "Wikitext(namespaces, drop_sections, entities): .lines(wikitext) -> paragraphs";
    WikitextType.tp_new = Wikitext_new;
    WikitextType.tp_dealloc = reinterpret_cast<destructor>(Wikitext_dealloc);
    WikitextType.tp_methods = Wikitext_methods;
    if (PyType_Ready(&WikitextType) < 0) return -1;
    Py_INCREF(&WikitextType);
    if (PyModule_AddObject(m, "Wikitext", reinterpret_cast<PyObject *>(&WikitextType)) < 0) {
        Py_DECREF(&WikitextType);
        return -1;
    }
    return 0;
}

}  // namespace xlp
