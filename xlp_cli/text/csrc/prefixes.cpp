// The nonbreaking-prefix lists, parsed the way each tool parses them (they differ on spaces at the end of
// a line, e.g. es "Fil ", it "Arch ": perl keeps the space in the key, so "Fil." is not a prefix there).
#include "text.h"

namespace xlp {
namespace {

std::vector<U32> split_lines_py(const U32 &s) {  // str.splitlines()
    std::vector<U32> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        char32_t c = s[i];
        bool brk = c == U'\n' || c == U'\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                   c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) continue;
        lines.push_back(s.substr(start, i - start));
        if (c == U'\r' && i + 1 < s.size() && s[i + 1] == U'\n') ++i;
        start = i + 1;
    }
    if (start < s.size()) lines.push_back(s.substr(start));
    return lines;
}

}  // namespace

std::unordered_map<U32, int> load_prefixes(const std::string &lang, Flavour flavour) {
    const Tables &T = tables();
    const bool perl = flavour == Flavour::Perl;
    std::unordered_map<U32, int> prefixes;
    const char *body = prefix_file(lang);
    if (!body) body = prefix_file("en");  // both tools fall back to the English list
    // (et: sacremoses' copy of the fi list; in mosesdecoder nonbreaking_prefix.et is a symlink to the fi file)
    std::string b8(body);
    U32 text;
    decode_utf8(b8.data(), b8.size(), text);
    const U32 marker = U"#NUMERIC_ONLY#";
    if (perl) {  // load_prefixes: chomp; skip "" "0" "#..."; /(.*)[\s]+(\#NUMERIC_ONLY\#)/ -> $1 = 2; else 1
        size_t start = 0;
        while (start < text.size()) {
            size_t nl = text.find(U'\n', start);
            U32 item = text.substr(start, nl == U32::npos ? U32::npos : nl - start);
            start = nl == U32::npos ? text.size() : nl + 1;
            if (item.empty() || item == U"0" || item[0] == U'#') continue;
            size_t key_end = U32::npos;  // the last "#NUMERIC_ONLY#" with a space before it (greedy .*)
            for (size_t p = item.find(marker); p != U32::npos; p = item.find(marker, p + 1))
                if (p > 0 && T.perl_space.has(item[p - 1])) key_end = p - 1;
            if (key_end != U32::npos) prefixes[item.substr(0, key_end)] = 2;
            else prefixes[item] = 1;
        }
    } else {  // words(): splitlines, strip, skip "" and "#..."; numeric: rpartition(" ")[0] of \s#NUMERIC_ONLY#
        std::vector<U32> numeric;
        for (const U32 &raw : split_lines_py(text)) {
            U32 w = strip(raw, T.py_space);
            if (w.empty() || w[0] == U'#') continue;
            prefixes[w] = 1;
            for (size_t p = w.find(marker); p != U32::npos; p = w.find(marker, p + 1))
                if (p > 0 && T.py_space.has(w[p - 1])) {
                    size_t sp = w.rfind(U' ');
                    numeric.push_back(sp == U32::npos ? U32() : w.substr(0, sp));
                    break;
                }
        }
        for (const U32 &w : numeric) prefixes[w] = 2;  // "in NUMERIC_ONLY" wins over "in NONBREAKING"
    }
    return prefixes;
}

}  // namespace xlp
