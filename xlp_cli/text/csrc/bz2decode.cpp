// One bzip2 block decoded here, faster than libbz2 (xlp_cli/prepare/sources/bz2_blocks.py calls it on its threads).
//
//   bz2_decode(data, start_bit, end_bit, level, limit) -> bytes | None
//
// The block at bits [start_bit, end_bit) of `data` (its 48-bit magic first; bz2blocks.cpp finds them), from a
// stream of `level` (its blocks hold at most level * 100,000 bytes before the final run-length step). The result
// is the block's bytes once their CRC matches the one in the block's header and the block's bits end exactly at
// end_bit; anything else gives None: damage, a randomised block (bzip2 0.9.0's, never written since), a code
// table that is not a complete prefix code (bzip2 never writes one), more than `limit` bytes. The caller then
// has libbz2 decode the block, which stays the authority on what is damaged and how it is said.
//
// The same steps as libbz2, each done faster (docs/prepare.md, "The bz2 block decoder"):
//   - Huffman: a 2^10-entry table per coding table gives a symbol and its length from the next 10 bits; longer
//     codes (up to 20 bits) take the canonical limits. libbz2 reads a code a bit at a time past its shortest.
//   - bits: a 64-bit window refilled 8 bytes at a time.
//   - move-to-front: a 16-byte shift and blend for the front 16 places (most symbols), memmove past them.
//   - the inverse Burrows-Wheeler transform: libbz2 follows the T vector from origPtr, one cache
//     miss per byte, one after the other. Here kChains walks run at once from rows spread over the block, each
//     to the next walk's start (a flag bit in the T vector marks the starts), and their pieces are then joined
//     in the cycle's order: several misses in flight at once.
//   - the first run-length step undone 8 bytes at a time where no run of 4 can end among them.
//   - the block CRC: 8 bytes a step (slicing-by-8) instead of 1.
//   - the buffers are the thread's own, reused from block to block (libbz2 allocates 3.6 MB per stream).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace xlp {
namespace {

constexpr uint64_t kBlockMagic = 0x314159265359ULL;
constexpr int kMaxGroups = 6, kMaxAlpha = 258, kMaxCodeLen = 20, kMaxSelectors = 18002, kGroupSize = 50;
constexpr int kLookupBits = 10;
constexpr int kChains = 16;                // walks of the T vector at once
constexpr uint32_t kStart = 1u << 31;     // T vector flag: a walk starts at this row
constexpr uint32_t kNext = (1u << 20) - 1;  // T vector bits 8..27: the next row (a block has < 2^20 rows)

// ------------------------------------------------------------------ bits, most significant first
class Bits {
public:
    Bits(const unsigned char *p, size_t nbytes, size_t bit) : p_(p), n_(nbytes), byte_(bit / 8) {
        refill();
        take(int(bit & 7));
    }
    // The next n <= 32 bits (zeros past the data: the caller checks where the block ended).
    uint32_t get(int n) {
        if (cnt_ < n) refill();
        const uint32_t v = n ? uint32_t(buf_ >> (64 - n)) : 0;
        buf_ <<= n;
        cnt_ -= n;
        return v;
    }
    uint32_t peek20() {
        if (cnt_ < kMaxCodeLen) refill();
        return uint32_t(buf_ >> (64 - kMaxCodeLen));
    }
    void take(int n) {
        buf_ <<= n;
        cnt_ -= n;
    }
    size_t bit() const { return byte_ * 8 - size_t(cnt_); }  // the next bit's position in the data

private:
    void refill() {  // afterwards 56 <= cnt_ <= 63
        if (byte_ + 8 <= n_) {
            uint64_t v;
            std::memcpy(&v, p_ + byte_, 8);
            v = __builtin_bswap64(v);
            buf_ |= v >> cnt_;
            byte_ += size_t(63 - cnt_) >> 3;
            cnt_ |= 56;
            return;
        }
        while (cnt_ <= 56) {  // the data's last bytes, then zeros
            const uint64_t b = byte_ < n_ ? p_[byte_] : 0;
            buf_ |= b << (56 - cnt_);
            ++byte_;
            cnt_ += 8;
        }
    }
    const unsigned char *p_;
    size_t n_, byte_;
    uint64_t buf_ = 0;
    int cnt_ = 0;
};

// ------------------------------------------------------------------ the block CRC (CRC-32, MSB first)
struct CrcTables {
    uint32_t t[8][256];
    CrcTables() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i << 24;
            for (int k = 0; k < 8; ++k) c = (c & 0x80000000u) ? (c << 1) ^ 0x04C11DB7u : c << 1;
            t[0][i] = c;
        }
        for (int k = 1; k < 8; ++k)
            for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] << 8) ^ t[0][t[k - 1][i] >> 24];
    }
};
const CrcTables kCrc;

uint32_t load_be32(const unsigned char *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

uint32_t block_crc(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    const auto &t = kCrc.t;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint32_t a = crc ^ load_be32(p + i), b = load_be32(p + i + 4);
        crc = t[7][a >> 24] ^ t[6][(a >> 16) & 0xFF] ^ t[5][(a >> 8) & 0xFF] ^ t[4][a & 0xFF] ^ t[3][b >> 24] ^
              t[2][(b >> 16) & 0xFF] ^ t[1][(b >> 8) & 0xFF] ^ t[0][b & 0xFF];
    }
    for (; i < n; ++i) crc = (crc << 8) ^ t[0][(crc >> 24) ^ p[i]];
    return ~crc;
}

// ------------------------------------------------------------------ Huffman decoding
struct Code {
    uint16_t lookup[1 << kLookupBits];  // symbol << 5 | length, for codes of at most kLookupBits bits; 0 if longer
    uint32_t first[kMaxCodeLen + 2];    // the first code of each length
    int count[kMaxCodeLen + 2];         // codes of each length
    int offset[kMaxCodeLen + 2];        // where each length's symbols start in `perm`
    uint16_t perm[kMaxAlpha];           // the symbols by (length, symbol)
    int min_len, max_len;

    // False unless the lengths make a complete prefix code (the only kind bzip2 writes).
    bool build(const uint8_t *len, int alpha) {
        std::fill(count, count + kMaxCodeLen + 2, 0);
        for (int s = 0; s < alpha; ++s) ++count[len[s]];
        uint64_t kraft = 0;
        for (int l = 1; l <= kMaxCodeLen; ++l) kraft += uint64_t(count[l]) << (kMaxCodeLen - l);
        if (kraft != (uint64_t(1) << kMaxCodeLen)) return false;
        min_len = kMaxCodeLen;
        max_len = 1;
        uint32_t code = 0;
        int at = 0;
        for (int l = 1; l <= kMaxCodeLen; ++l) {
            first[l] = code;
            offset[l] = at;
            at += count[l];
            code = (code + uint32_t(count[l])) << 1;
            if (count[l]) min_len = std::min(min_len, l), max_len = std::max(max_len, l);
        }
        int fill[kMaxCodeLen + 2];
        std::copy(offset, offset + kMaxCodeLen + 2, fill);
        for (int s = 0; s < alpha; ++s) perm[fill[len[s]]++] = uint16_t(s);
        std::fill(std::begin(lookup), std::end(lookup), uint16_t(0));
        for (int l = min_len; l <= std::min(max_len, kLookupBits); ++l)
            for (int k = 0; k < count[l]; ++k) {
                const uint32_t c = first[l] + uint32_t(k);
                const uint16_t entry = uint16_t(perm[offset[l] + k] << 5 | l);
                const int span = 1 << (kLookupBits - l);
                for (int j = 0; j < span; ++j) lookup[(c << (kLookupBits - l)) | uint32_t(j)] = entry;
            }
        return true;
    }

    int decode(Bits &in) const {
        const uint32_t v = in.peek20();
        const uint16_t e = lookup[v >> (kMaxCodeLen - kLookupBits)];
        if (e) {
            in.take(e & 31);
            return e >> 5;
        }
        for (int l = kLookupBits + 1; l <= max_len; ++l) {
            const uint32_t c = v >> (kMaxCodeLen - l);
            if (c - first[l] < uint32_t(count[l])) {
                in.take(l);
                return perm[offset[l] + int(c - first[l])];
            }
        }
        return -1;  // (a complete code always matches: not reached)
    }
};

// ------------------------------------------------------------------ move-to-front, run-length
// The byte at `idx` of the move-to-front list, moved to its front. Indexes below 16 are most of them: one
// 16-byte shift and blend instead of a call to memmove.
inline uint8_t to_front(uint8_t *mtf, int idx) {
    const uint8_t b = mtf[idx];
#if defined(__SSE2__)
    if (idx < 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(mtf));
        const __m128i lanes = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m128i moved = _mm_cmplt_epi8(lanes, _mm_set1_epi8(char(idx + 1)));  // lanes 0..idx
        const __m128i shifted = _mm_slli_si128(v, 1);
        const __m128i r = _mm_or_si128(_mm_and_si128(moved, shifted), _mm_andnot_si128(moved, v));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(mtf), r);
        mtf[0] = b;
        return b;
    }
#endif
    std::memmove(mtf + 1, mtf, size_t(idx));
    mtf[0] = b;
    return b;
}

// bzip2's first step undone, fed the bytes in order: after 4 equal bytes, a byte counts more of them. Writes
// into `out` (kept at its size between blocks); false past `limit` bytes.
class Unrun {
public:
    Unrun(std::vector<uint8_t> &out, size_t limit, size_t expect) : out_(out), limit_(limit) {
        if (out_.size() < expect + 256) out_.resize(expect + 256);
        o_ = out_.data();
        cap_ = o_ + out_.size() - 256;  // (a run writes at most 255 bytes past it)
    }
    bool feed(const uint8_t *in, size_t n) {
        // (locals: stores through uint8_t * could alias the members, which the loop would then reload)
        uint8_t *o = o_, *cap = cap_;
        int same = same_, last = last_;
        for (size_t i = 0; i < n; ++i) {
            // 8 bytes at once where no run of 4 can end among them (text: nearly always): each byte against
            // the one before it, and the run carried in (`same`)
            while (same < 4 && last >= 0 && i + 8 <= n && o + 8 <= cap) {
                uint64_t w;
                std::memcpy(&w, in + i, 8);
                const uint64_t v = w ^ ((w << 8) | uint64_t(last));  // little-endian: byte k against byte k - 1
                const uint64_t low = 0x7F7F7F7F7F7F7F7FULL;
                const uint64_t z = ~(((v & low) + low) | v | low);  // 0x80 where a byte equals the one before
                const bool four = (z & (z << 8) & (z << 16)) || (same == 3 && (z & 0x80)) ||
                                  (same == 2 && (z & 0x80) && (z & 0x8000));
                if (four) break;
                std::memcpy(o, in + i, 8);
                o += 8;
                i += 8;
                last = int(w >> 56);
                same = (z >> 63) ? ((z >> 55) & 1 ? 3 : 2) : 1;
            }
            if (i >= n) break;
            const uint8_t b = in[i];
            if (o >= cap) {
                o_ = o;
                if (!grow()) return false;
                o = o_, cap = cap_;
            }
            if (same == 4) {
                std::memset(o, last, b);
                o += b;
                same = 0;
                continue;
            }
            same = b == last ? same + 1 : 1;
            last = b;
            *o++ = b;
        }
        o_ = o, same_ = same, last_ = last;
        return written() <= limit_;
    }
    size_t written() const { return size_t(o_ - out_.data()); }

private:
    bool grow() {
        const size_t at = written();
        if (at > limit_) return false;
        out_.resize(out_.size() * 2);
        o_ = out_.data() + at;
        cap_ = out_.data() + out_.size() - 256;
        return true;
    }
    std::vector<uint8_t> &out_;
    size_t limit_;
    uint8_t *o_, *cap_;
    int same_ = 0, last_ = -1;
};

// ------------------------------------------------------------------ the inverse transform
constexpr int kChunk = 4096;  // the walks write their bytes into chunks of a shared pool

// A thread's buffers, kept between blocks.
struct Work {
    std::vector<uint32_t> tt;         // the T vector: byte | next row << 8 | kStart
    std::vector<uint8_t> pool;        // the walks' chunks
    std::vector<int> chunks[kChains];  // each walk's chunks, in order
    std::vector<uint8_t> out;         // the block's bytes after the run-length step: out_len of them
    size_t out_len = 0;
    Code codes[kMaxGroups];
    uint8_t selectors[kMaxSelectors];
};
thread_local Work work;

// The block's bytes (the T vector's cycle from origin's successor on), through `unrun`, several walks at once.
bool invert(Work &wk, int n, int origin, Unrun &unrun) {
    uint32_t *tt = wk.tt.data();
    // The walks' start rows: origin's successor (the text's start) and rows spread over the block.
    int starts[kChains];
    int walks = 0;
    starts[walks++] = int((tt[origin] >> 8) & kNext);
    for (int k = 1; k < kChains; ++k) {
        const int row = int((uint64_t(n) * uint64_t(k)) / kChains);
        if (std::find(starts, starts + walks, row) == starts + walks) starts[walks++] = row;
    }
    const size_t pool = (size_t(n) / kChunk + size_t(walks) + 1) * kChunk;
    if (wk.pool.size() < pool) wk.pool.resize(pool);
    // Each walk runs until the row it reaches is a start (its successor's piece); walks step together, a
    // finished one drops out. Its first step reads its own start, flagged: taken before the loop.
    uint32_t row[kChains];  // (each live walk's state: its row, where its next byte goes, its chunk's end)
    uint8_t *at[kChains], *stop[kChains];
    int id[kChains], ends[kChains], last_len[kChains];
    int next_chunk = 0;
    for (int w = 0; w < walks; ++w) {
        wk.chunks[w].assign(1, next_chunk);
        uint8_t *p = wk.pool.data() + size_t(next_chunk++) * kChunk;
        const uint32_t x = tt[starts[w]];
        *p = uint8_t(x);
        row[w] = (x >> 8) & kNext, at[w] = p + 1, stop[w] = p + kChunk, id[w] = w;
        tt[starts[w]] |= kStart;
    }
    int n_live = walks;
    while (n_live) {
        for (int a = 0; a < n_live;) {
            const uint32_t x = tt[row[a]];
            if (x & kStart) {
                ends[id[a]] = int(row[a]);
                last_len[id[a]] = int(kChunk - (stop[a] - at[a]));
                --n_live;
                row[a] = row[n_live], at[a] = at[n_live], stop[a] = stop[n_live], id[a] = id[n_live];
                continue;
            }
            if (at[a] == stop[a]) {
                wk.chunks[id[a]].push_back(next_chunk);
                at[a] = wk.pool.data() + size_t(next_chunk++) * kChunk;
                stop[a] = at[a] + kChunk;
            }
            *at[a]++ = uint8_t(x);
            row[a] = (x >> 8) & kNext;
            ++a;
        }
    }
    for (int w = 0; w < walks; ++w) tt[starts[w]] &= ~kStart;
    // The pieces in the cycle's order, from the text's start, to n bytes. The T vector of a periodic block has
    // several cycles, a period long: the text's start's cycle is then followed round again, as libbz2 does.
    size_t left = size_t(n);
    for (int w = 0; left;) {
        const std::vector<int> &chunks = wk.chunks[w];
        for (size_t c = 0; c < chunks.size() && left; ++c) {
            const size_t len = std::min(left, c + 1 < chunks.size() ? size_t(kChunk) : size_t(last_len[w]));
            if (!unrun.feed(wk.pool.data() + size_t(chunks[c]) * kChunk, len)) return false;
            left -= len;
        }
        w = int(std::find(starts, starts + walks, ends[w]) - starts);
    }
    return true;
}

// The block's bytes into work.out; false where libbz2 must decide (see the top of the file).
bool decode(const unsigned char *p, size_t nbytes, size_t start, size_t end, int level, size_t limit) {
    Work &wk = work;
    Bits in(p, nbytes, start);
    if ((uint64_t(in.get(24)) << 24 | in.get(24)) != kBlockMagic) return false;
    const uint32_t want_crc = in.get(32);
    if (in.get(1)) return false;  // randomised
    const int origin = int(in.get(24));
    // The symbol map: the bytes the block uses.
    uint8_t used[256];
    int n_used = 0;
    const uint32_t groups16 = in.get(16);
    for (int i = 0; i < 16; ++i)
        if (groups16 & (0x8000u >> i)) {
            const uint32_t bits = in.get(16);
            for (int j = 0; j < 16; ++j)
                if (bits & (0x8000u >> j)) used[n_used++] = uint8_t(i * 16 + j);
        }
    if (n_used == 0) return false;
    const int alpha = n_used + 2;
    const int n_groups = int(in.get(3));
    if (n_groups < 2 || n_groups > kMaxGroups) return false;
    int n_selectors = int(in.get(15));
    if (n_selectors < 1) return false;
    uint8_t mtf_groups[kMaxGroups];
    for (int g = 0; g < n_groups; ++g) mtf_groups[g] = uint8_t(g);
    for (int i = 0; i < n_selectors; ++i) {
        int j = 0;
        while (in.get(1)) {
            if (++j >= n_groups) return false;
        }
        if (i < kMaxSelectors) {  // (libbz2 1.0.8 reads and ignores those past 18002)
            const uint8_t g = mtf_groups[j];
            std::memmove(mtf_groups + 1, mtf_groups, size_t(j));
            mtf_groups[0] = g;
            wk.selectors[i] = g;
        }
    }
    n_selectors = std::min(n_selectors, kMaxSelectors);
    for (int g = 0; g < n_groups; ++g) {
        uint8_t len[kMaxAlpha];
        int cur = int(in.get(5));
        for (int s = 0; s < alpha; ++s) {
            for (;;) {
                if (cur < 1 || cur > kMaxCodeLen) return false;
                if (!in.get(1)) break;
                cur += in.get(1) ? -1 : 1;
            }
            len[s] = uint8_t(cur);
        }
        if (!wk.codes[g].build(len, alpha)) return false;
    }
    // The symbols: move-to-front indexes and runs of the front byte, into the T vector's low bytes.
    const int max_block = level * 100000;
    if (wk.tt.size() < size_t(max_block)) wk.tt.resize(size_t(max_block));
    uint32_t *tt = wk.tt.data();
    uint8_t mtf[256];
    std::memcpy(mtf, used, size_t(n_used));
    int counts[256] = {0};
    const int eob = n_used + 1;
    int nblock = 0, group = -1, left = 0, run = 0, run_bit = 1;
    const Code *code = nullptr;
    for (;;) {
        if (left == 0) {
            if (++group >= n_selectors) return false;
            code = &wk.codes[wk.selectors[group]];
            left = kGroupSize;
        }
        --left;
        const int sym = code->decode(in);
        if (sym < 0) return false;
        if (sym <= 1) {  // RUNA, RUNB: a run's length in bijective base 2
            run += run_bit << sym;
            run_bit <<= 1;
            if (run_bit >= (1 << 21)) return false;
            continue;
        }
        if (run) {
            if (run > max_block - nblock) return false;
            const uint8_t b = mtf[0];
            counts[b] += run;
            for (int k = 0; k < run; ++k) tt[nblock + k] = b;
            nblock += run;
            run = 0;
            run_bit = 1;
        }
        if (sym == eob) break;
        if (nblock >= max_block) return false;
        const uint8_t b = to_front(mtf, sym - 1);
        ++counts[b];
        tt[nblock++] = b;
    }
    if (in.bit() != end) return false;  // the block's bits end where the next magic starts
    if (origin >= nblock) return false;
    // The T vector: row i's successor, in bits 8..27 of the entry of the row it follows.
    int next[256];
    for (int b = 0, sum = 0; b < 256; ++b) next[b] = sum, sum += counts[b];
    for (int i = 0; i < nblock; ++i) tt[next[tt[i] & 0xFF]++] |= uint32_t(i) << 8;
    // Undo the transform, then the run-length step.
    Unrun unrun(wk.out, limit, size_t(nblock) + size_t(nblock) / 4);
    if (!invert(wk, nblock, origin, unrun)) return false;
    wk.out_len = unrun.written();
    return block_crc(wk.out.data(), wk.out_len) == want_crc;
}

}  // namespace

PyObject *py_bz2_decode(PyObject *, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end, limit;
    int level;
    if (!PyArg_ParseTuple(args, "y*nnin", &buf, &start, &end, &level, &limit)) return nullptr;
    if (start < 0 || end < start + 80 || size_t(end) > size_t(buf.len) * 8 || level < 1 || level > 9 || limit < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "not a block of the data");
        return nullptr;
    }
    bool ok;
    Py_BEGIN_ALLOW_THREADS ok = decode(static_cast<const unsigned char *>(buf.buf), size_t(buf.len), size_t(start),
                                       size_t(end), level, size_t(limit));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (!ok) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(reinterpret_cast<const char *>(work.out.data()), Py_ssize_t(work.out_len));
}

}  // namespace xlp
