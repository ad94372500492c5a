// The blocks of a bzip2 stream, for decoding them on several threads (xlp_cli/prepare/sources/bz2_blocks.py).
//
// A bzip2 stream is "BZh" and a level digit, then blocks, each starting with the 48-bit magic 0x314159265359 and
// its 32-bit CRC at any bit offset, then the 48-bit end-of-stream magic 0x177245385090, the 32-bit combined CRC
// and zero bits to a byte boundary. A block decodes on its own (bzip2recover's method): the header, the block's
// bits, an end-of-stream magic and the block's CRC as the combined CRC make a valid one-block stream, which
// libbz2 checks like any other (block CRC included).
//   bz2_magics(data, start_bit, max) -> [(bit, kind)]   the magics whose 48 bits lie in data, from start_bit on,
//                                                       in order, at most max: kind 1 a block, 2 the stream's end
//   bz2_bits(data, bit, n) -> int                       n <= 64 bits of data from `bit`, most significant first
//   bz2_block(data, start_bit, end_bit, level) -> bytes the one-block stream of the block at [start_bit, end_bit)
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace xlp {
namespace {

constexpr uint64_t kBlockMagic = 0x314159265359ULL;
constexpr uint64_t kEndMagic = 0x177245385090ULL;

uint64_t bits_at(const unsigned char *p, size_t bit, int n) {  // n <= 64, the caller checks the bounds
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) {
        const size_t b = bit + size_t(k);
        v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1);
    }
    return v;
}

class BitWriter {
public:
    void put(uint64_t v, int n) {  // n <= 32 at a time keeps `acc_` from overflowing
        acc_ = (acc_ << n) | (v & ((uint64_t(1) << n) - 1));
        fill_ += n;
        while (fill_ >= 8) {
            fill_ -= 8;
            out.push_back(char((acc_ >> fill_) & 0xFF));
        }
    }
    void pad() {
        if (fill_) put(0, 8 - fill_);
    }
    std::string out;

private:
    uint64_t acc_ = 0;
    int fill_ = 0;
};

}  // namespace

// The magics from bit `start` on, in order, at most `max_found`: for each magic and each of the 8 bit offsets it
// can have in a byte, memmem finds its 5 whole bytes in the middle, and the 48 bits are then checked. Once
// `max_found` are known, the other searches stop at the last of them (so a call costs about a block's length).
std::vector<std::pair<size_t, int>> magics(const unsigned char *p, size_t n, size_t start, size_t max_found) {
    std::vector<std::pair<size_t, int>> found;
    size_t limit = n;  // bytes searched: [from, limit)
    for (int kind = 1; kind <= 2 && max_found; ++kind) {
        const uint64_t magic = kind == 1 ? kBlockMagic : kEndMagic;
        for (int shift = 0; shift < 8; ++shift) {
            unsigned char at[7];  // the magic placed `shift` bits into its first byte
            const uint64_t placed = magic << (64 - 48 - shift);
            for (int k = 0; k < 7; ++k) at[k] = static_cast<unsigned char>(placed >> (56 - 8 * k));
            size_t from = start / 8 >= 1 ? start / 8 - 1 : 0;  // (the pattern is bytes 1..5 of `at`)
            size_t got = 0;
            while (got < max_found && from + 5 <= limit) {
                const void *hit = memmem(p + from, limit - from, at + 1, 5);
                if (!hit) break;
                const size_t i = size_t(static_cast<const unsigned char *>(hit) - p);
                from = i + 1;
                if (i == 0) continue;
                const size_t bit = (i - 1) * 8 + size_t(shift);
                if (bit < start || bit + 48 > n * 8 || bits_at(p, bit, 48) != magic) continue;
                found.emplace_back(bit, kind);
                ++got;
            }
            if (found.size() >= max_found) {
                std::sort(found.begin(), found.end());
                found.resize(max_found);
                limit = std::min(n, found.back().first / 8 + 7);
            }
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

PyObject *py_bz2_magics(PyObject *, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, max_found;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &start, &max_found)) return nullptr;
    std::vector<std::pair<size_t, int>> found;
    Py_BEGIN_ALLOW_THREADS found = magics(static_cast<const unsigned char *>(buf.buf), size_t(buf.len),
                                          size_t(std::max<Py_ssize_t>(start, 0)), size_t(std::max<Py_ssize_t>(max_found, 0)));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    PyObject *out = PyList_New(Py_ssize_t(found.size()));
    if (!out) return nullptr;
    for (size_t k = 0; k < found.size(); ++k)
        PyList_SET_ITEM(out, Py_ssize_t(k), Py_BuildValue("(ni)", Py_ssize_t(found[k].first), found[k].second));
    return out;
}

PyObject *py_bz2_bits(PyObject *, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t bit;
    int n;
    if (!PyArg_ParseTuple(args, "y*ni", &buf, &bit, &n)) return nullptr;
    if (bit < 0 || n < 0 || n > 64 || size_t(bit) + size_t(n) > size_t(buf.len) * 8) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "bits outside the data");
        return nullptr;
    }
    const uint64_t v = bits_at(static_cast<const unsigned char *>(buf.buf), size_t(bit), n);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(v);
}

PyObject *py_bz2_block(PyObject *, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    int level;
    if (!PyArg_ParseTuple(args, "y*nni", &buf, &start, &end, &level)) return nullptr;
    if (start < 0 || end < start + 80 || size_t(end) > size_t(buf.len) * 8 || level < 1 || level > 9) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "not a block of the data");
        return nullptr;
    }
    const auto *p = static_cast<const unsigned char *>(buf.buf);
    BitWriter w;
    Py_BEGIN_ALLOW_THREADS w.out.reserve(size_t(end - start) / 8 + 16);
    w.put('B', 8);
    w.put('Z', 8);
    w.put('h', 8);
    w.put(uint64_t('0' + level), 8);
    size_t b = size_t(start);
    while (b < size_t(end) && (b & 7)) {  // to a byte boundary of the input, a bit at a time
        w.put((p[b >> 3] >> (7 - (b & 7))) & 1, 1);
        ++b;
    }
    for (; b + 8 <= size_t(end); b += 8) w.put(p[b >> 3], 8);  // whole input bytes
    for (; b < size_t(end); ++b) w.put((p[b >> 3] >> (7 - (b & 7))) & 1, 1);
    const uint64_t crc = bits_at(p, size_t(start) + 48, 32);
    w.put(kEndMagic >> 24, 24);
    w.put(kEndMagic & 0xFFFFFF, 24);
    w.put(crc, 32);
    w.pad();
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyBytes_FromStringAndSize(w.out.data(), Py_ssize_t(w.out.size()));
}

}  // namespace xlp
