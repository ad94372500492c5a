// Record ids and content hashes of `xlp prepare`, computed without the GIL (written for this project from
// FIPS 180-4 (SHA-1) and RFC 7693 (BLAKE2b); equal to Python's hashlib, tested in tests/test_prepare_fast_paths.py):
//   id   = sha1(id_prefix + text).hexdigest()[:16]          (id_prefix = "source\0lang\0")
//   hash = blake2b(hash_prefix + text, digest_size=16)      (hash_prefix = "lang\0"; its two little-endian
//                                                            halves are the de-duplication key and the split draw)
#include "text.h"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace xlp {
namespace {

inline uint32_t rol32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
inline uint64_t ror64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

// Feeds the bytes of a + b to `block` in 64- or 128-byte blocks (the last one padded by `finish`), without
// copying the message: records are short, so this and the block functions are the whole cost.
template <size_t B, class Block, class Finish>
void blocks(const std::string &a, const char *b, size_t nb, Block block, Finish finish) {
    unsigned char buf[B];
    size_t have = 0;
    auto feed = [&](const char *p, size_t n) {
        while (n) {
            if (have == B) {  // (so a full last block is left to `finish`: BLAKE2b flags it)
                block(buf);
                have = 0;
            }
            const size_t k = std::min(n, B - have);
            memcpy(buf + have, p, k);
            have += k, p += k, n -= k;
        }
    };
    feed(a.data(), a.size());
    feed(b, nb);
    finish(buf, have);
}

inline uint32_t load_be32(const unsigned char *p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

void sha1_block(uint32_t h[5], const unsigned char *p) {
    uint32_t w[80];
    for (int t = 0; t < 16; ++t) w[t] = load_be32(p + 4 * t);
    for (int t = 16; t < 80; ++t) w[t] = rol32(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    uint32_t A = h[0], B = h[1], C = h[2], D = h[3], E = h[4];
    auto step = [&](uint32_t f, uint32_t k, uint32_t wt) {
        const uint32_t tmp = rol32(A, 5) + f + E + k + wt;
        E = D; D = C; C = rol32(B, 30); B = A; A = tmp;
    };
    for (int t = 0; t < 20; ++t) step((B & C) | (~B & D), 0x5A827999u, w[t]);
    for (int t = 20; t < 40; ++t) step(B ^ C ^ D, 0x6ED9EBA1u, w[t]);
    for (int t = 40; t < 60; ++t) step((B & C) | (B & D) | (C & D), 0x8F1BBCDCu, w[t]);
    for (int t = 60; t < 80; ++t) step(B ^ C ^ D, 0xCA62C1D6u, w[t]);
    h[0] += A; h[1] += B; h[2] += C; h[3] += D; h[4] += E;
}

#if defined(__x86_64__) || defined(__i386__)
// The same block function with the x86 SHA extensions (Intel SHA-NI: 4 rounds per instruction), used when the CPU
// has them. Lanes hold the state words in reverse order (A in lane 3) and message words big-endian, so each
// 16-byte group of the block is byte-reversed as a whole. W[16..79] are made in place: four registers hold
// W[4g..4g+3] for the groups g, g+1, g+2, g+3; group t's words start as group t-4's and get sha1msg1 with group
// t-3's, xor with group t-2's and sha1msg2 with group t-1's, as those groups are consumed.
__attribute__((target("sha,sse4.1,ssse3"))) void sha1_block_ni(uint32_t h[5], const unsigned char *p) {
    const __m128i reverse = _mm_set_epi64x(0x0001020304050607ll, 0x08090a0b0c0d0e0fll);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h)), 0x1B);
    const __m128i abcd0 = abcd, e0 = _mm_set_epi32(int(h[4]), 0, 0, 0);
    __m128i msg[4];
    for (int i = 0; i < 4; ++i)
        msg[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * i)), reverse);
    __m128i prev = abcd, e = _mm_add_epi32(e0, msg[0]);
    for (int g = 0; g < 20; ++g) {
        if (g > 0) e = _mm_sha1nexte_epu32(prev, msg[g % 4]);
        prev = abcd;
        const __m128i w = msg[g % 4];
        if (g + 1 >= 4 && g + 1 < 20) msg[(g + 1) % 4] = _mm_sha1msg2_epu32(msg[(g + 1) % 4], w);
        switch (g / 5) {  // (the round function is an immediate)
            case 0: abcd = _mm_sha1rnds4_epu32(abcd, e, 0); break;
            case 1: abcd = _mm_sha1rnds4_epu32(abcd, e, 1); break;
            case 2: abcd = _mm_sha1rnds4_epu32(abcd, e, 2); break;
            default: abcd = _mm_sha1rnds4_epu32(abcd, e, 3); break;
        }
        if (g + 2 >= 4 && g + 2 < 20) msg[(g + 2) % 4] = _mm_xor_si128(msg[(g + 2) % 4], w);
        if (g + 3 >= 4 && g + 3 < 20) msg[(g + 3) % 4] = _mm_sha1msg1_epu32(msg[(g + 3) % 4], w);
    }
    e = _mm_sha1nexte_epu32(prev, e0);
    abcd = _mm_shuffle_epi32(_mm_add_epi32(abcd, abcd0), 0x1B);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(h), abcd);
    h[4] = uint32_t(_mm_extract_epi32(e, 3));
}

bool cpu_has_sha_ni() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#else
void sha1_block_ni(uint32_t[5], const unsigned char *) {}
bool cpu_has_sha_ni() { return false; }
#endif

// The first 8 bytes of SHA-1 of a + b.
void sha1_head(const std::string &a, const char *b, size_t nb, unsigned char out[8], bool portable) {
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    const uint64_t bits = uint64_t(a.size() + nb) * 8;
    static const bool ni = cpu_has_sha_ni();
    auto block = ni && !portable ? sha1_block_ni : sha1_block;
    blocks<64>(a, b, nb, [&](const unsigned char *p) { block(h, p); },
               [&](unsigned char *buf, size_t have) {
                   if (have == 64) { block(h, buf); have = 0; }
                   buf[have++] = 0x80;
                   if (have > 56) {
                       memset(buf + have, 0, 64 - have);
                       block(h, buf);
                       have = 0;
                   }
                   memset(buf + have, 0, 56 - have);
                   for (int i = 0; i < 8; ++i) buf[56 + i] = (bits >> (8 * (7 - i))) & 0xFF;
                   block(h, buf);
               });
    for (int i = 0; i < 8; ++i) out[i] = (h[i / 4] >> (24 - 8 * (i % 4))) & 0xFF;
}

const uint64_t kIV[8] = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull,
                         0x510e527fade682d1ull, 0x9b05688c2b3e6c1full, 0x1f83d9abfb41bd6bull, 0x5be0cd19137e2179ull};
const uint8_t kSigma[10][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0}};

void blake2b_compress(uint64_t h[8], const unsigned char *block, uint64_t t, bool last) {
    uint64_t m[16], v[16];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(m, block, 128);
#else
    for (int i = 0; i < 16; ++i) {
        uint64_t x = 0;
        for (int j = 7; j >= 0; --j) x = (x << 8) | block[8 * i + j];
        m[i] = x;
    }
#endif
    for (int i = 0; i < 8; ++i) { v[i] = h[i]; v[i + 8] = kIV[i]; }
    v[12] ^= t;  // (the counter's high 64 bits stay 0: records are short)
    if (last) v[14] = ~v[14];
    auto G = [&](int a, int b, int c, int d, uint64_t x, uint64_t y) {
        v[a] = v[a] + v[b] + x; v[d] = ror64(v[d] ^ v[a], 32);
        v[c] = v[c] + v[d];     v[b] = ror64(v[b] ^ v[c], 24);
        v[a] = v[a] + v[b] + y; v[d] = ror64(v[d] ^ v[a], 16);
        v[c] = v[c] + v[d];     v[b] = ror64(v[b] ^ v[c], 63);
    };
    for (int r = 0; r < 12; ++r) {
        const uint8_t *s = kSigma[r % 10];
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);   G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);  G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);  G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]); G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; ++i) h[i] ^= v[i] ^ v[i + 8];
}

// BLAKE2b-128 (unkeyed) of a + b.
void blake2b_16(const std::string &a, const char *b, size_t nb, unsigned char out[16]) {
    uint64_t h[8];
    for (int i = 0; i < 8; ++i) h[i] = kIV[i];
    h[0] ^= 0x01010000ull ^ 16;
    uint64_t done = 0;
    blocks<128>(a, b, nb, [&](const unsigned char *p) { blake2b_compress(h, p, done += 128, false); },
                [&](unsigned char *buf, size_t have) {
                    memset(buf + have, 0, 128 - have);
                    blake2b_compress(h, buf, done + have, true);
                });
    for (int i = 0; i < 16; ++i) out[i] = (h[i / 8] >> (8 * (i % 8))) & 0xFF;
}

}  // namespace

void record_hashes(const std::string &id_prefix, const std::string &hash_prefix,
                   const std::vector<std::pair<const char *, size_t>> &texts, std::string &ids, std::string &digests,
                   bool portable) {
    static const char kHex[] = "0123456789abcdef";
    ids.resize(texts.size() * 16);
    digests.resize(texts.size() * 16);
    for (size_t i = 0; i < texts.size(); ++i) {
        unsigned char head[8];
        sha1_head(id_prefix, texts[i].first, texts[i].second, head, portable);
        for (int k = 0; k < 8; ++k) {
            ids[16 * i + 2 * k] = kHex[head[k] >> 4];
            ids[16 * i + 2 * k + 1] = kHex[head[k] & 15];
        }
        blake2b_16(hash_prefix, texts[i].first, texts[i].second, reinterpret_cast<unsigned char *>(&digests[16 * i]));
    }
}

}  // namespace xlp
