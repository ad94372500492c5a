// The native BPE applier (xlp_cli.bpe._applybpe): shared declarations. See applier.cpp for what it reproduces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace xlpbpe {

constexpr uint32_t kNone = 0xFFFFFFFFu;

// Byte strings -> dense ids 0, 1, 2, ... (open addressing; the keys live in one arena, lookups allocate nothing;
// a slot holds the id and 32 bits of the key's hash, so that most mismatches cost no key comparison).
class StrTable {
public:
    size_t size() const { return offs_.size(); }
    std::string_view key(uint32_t id) const { return {arena_.data() + offs_[id], lens_[id]}; }
    uint32_t find(std::string_view k) const {
        if (slots_.empty()) return kNone;
        const uint64_t h = hash(k);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == kEmpty) return kNone;
            if ((slot >> 32) == (h >> 32) && key(uint32_t(slot)) == k) return uint32_t(slot);
        }
    }
    uint32_t add(std::string_view k, bool &added) {  // the id of k, inserted if new
        if ((size() + 1) * 2 > slots_.size()) grow();
        const uint64_t h = hash(k);
        size_t i = h & mask_;
        for (;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == kEmpty) break;
            if ((slot >> 32) == (h >> 32) && key(uint32_t(slot)) == k) { added = false; return uint32_t(slot); }
        }
        const uint32_t id = uint32_t(size());
        slots_[i] = (h & 0xFFFFFFFF00000000ull) | id;
        offs_.push_back(arena_.size());
        lens_.push_back(uint32_t(k.size()));
        arena_.append(k.data(), k.size());
        added = true;
        return id;
    }
    void clear() { arena_.clear(); offs_.clear(); lens_.clear(); slots_.clear(); mask_ = 0; }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    static uint64_t hash(std::string_view k) {  // 8 bytes at a time, multiply-xorshift mixing
        uint64_t h = 0x9E3779B97F4A7C15ull ^ k.size();
        size_t i = 0;
        for (; i + 8 <= k.size(); i += 8) {
            uint64_t w;
            memcpy(&w, k.data() + i, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        uint64_t w = 0;
        memcpy(&w, k.data() + i, k.size() - i);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        return h ^ (h >> 29);
    }
    void grow() {
        size_t n = std::max<size_t>(64, slots_.size() * 2);
        slots_.assign(n, kEmpty);
        mask_ = n - 1;
        for (uint32_t id = 0; id < size(); ++id) {
            const uint64_t h = hash(key(id));
            size_t i = h & mask_;
            while (slots_[i] != kEmpty) i = (i + 1) & mask_;
            slots_[i] = (h & 0xFFFFFFFF00000000ull) | id;
        }
    }
    std::string arena_;
    std::vector<size_t> offs_;
    std::vector<uint32_t> lens_;
    std::vector<uint64_t> slots_;
    size_t mask_ = 0;
};

// Merge pair (left id << 32 | right id) -> its rank and merged id: open addressing over one flat array (the
// std::unordered_map this replaces cost a cache miss per lookup, the hottest part of segmenting new words).
class PairTable {
public:
    struct Entry {
        uint64_t key;
        uint32_t rank, merged;
    };
    size_t size() const { return n_; }
    const Entry *find(uint64_t k) const {
        if (slots_.empty()) return nullptr;
        for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return &slots_[i];
            if (slots_[i].key == kEmptyKey) return nullptr;
        }
    }
    bool insert(uint64_t k, uint32_t rank, uint32_t merged) {  // false (nothing changed) if k is there
        if ((n_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return false;
            if (slots_[i].key == kEmptyKey) {
                slots_[i] = {k, rank, merged};
                ++n_;
                return true;
            }
        }
    }

private:
    static constexpr uint64_t kEmptyKey = ~uint64_t(0);  // (kNone, kNone): no merge has it
    static size_t mix(uint64_t k) {
        k ^= k >> 33;
        k *= 0xFF51AFD7ED558CCDull;
        return size_t(k ^ (k >> 33));
    }
    void grow() {
        std::vector<Entry> old(std::max<size_t>(64, slots_.size() * 2), Entry{kEmptyKey, 0, 0});
        old.swap(slots_);
        mask_ = slots_.size() - 1;
        n_ = 0;
        for (const Entry &e : old)
            if (e.key != kEmptyKey) insert(e.key, e.rank, e.merged);
    }
    std::vector<Entry> slots_;
    size_t mask_ = 0, n_ = 0;
};

// Merge codes (+ vocab) as fastBPE reads them; `apply` is fastBPE's process_bpe for one word.
class Model {
public:
    Model(const std::string &codes_path, const std::string &vocab_path);
    size_t n_codes() const { return rank_.size(); }
    size_t n_vocab() const { return vocab_.size(); }
    std::string apply(const char *w, size_t n) const;

private:
    template <class Text>
    bool known(uint32_t id, bool final, Text &text) const;
    template <class Text>
    void decompose(uint32_t id, bool final, std::vector<uint32_t> &out, Text &text) const;
    bool in_vocab(std::string_view s, bool final) const;
    void check_vocab(const std::string &path) const;
    uint32_t intern(std::string_view s);
    void read_vocab(const std::string &path);
    void read_codes(const std::string &path);

    StrTable id_;  // symbol strings
    std::vector<std::pair<uint32_t, uint32_t>> parts_;                // id -> the pair it was merged from
    PairTable rank_;  // pair -> (rank, merged id)
    StrTable vocab_;
    std::vector<size_t> vocab_lines_;  // line of each vocab token
    std::vector<bool> cont_, final_;   // vocab holds "x@@" / "x" (x without "</w>")
};

}  // namespace xlpbpe
