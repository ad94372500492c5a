// UTF-8 validation, shared by the text pipeline and the BPE applier (header-only).
#pragma once

#include <cstddef>

namespace xlp {

// Index of the first invalid byte sequence of s[0:n) (overlong forms, surrogates and code points above
// U+10FFFF are invalid), or n if s is valid UTF-8.
inline size_t utf8_error(const char *s, size_t n) {
    const auto *p = reinterpret_cast<const unsigned char *>(s);
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { ++i; continue; }
        size_t len;
        char32_t cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (i + len > n) return i;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
        i += len;
    }
    return n;
}

}  // namespace xlp
