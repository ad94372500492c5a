// The word cache of the native BPE applier (xlp_cli.bpe._applybpe): class Applier, used by applier.cpp's Python
// bindings; see there for what it reproduces and how threads share it.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "bpe.h"

namespace xlpbpe {

inline bool py_space(uint32_t c) {  // str.isspace() (Unicode 14)
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Segments every distinct new word of a text block (in threads), remembers it (and its token ids), writes
// the block's subword text (and ids).
class Applier {
public:
    explicit Applier(std::unique_ptr<Model> m) : model_(std::move(m)) {}
    const Model &model() const { return *model_; }

    void set_ids(std::vector<std::string> tokens) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        ++gen_;
        ids_.clear();
        bool added;
        for (auto &t : tokens) ids_.add(t, added);  // a repeated token keeps its first id
        words_.clear();
        vals_.clear();
        wids_.clear();
    }

    std::string apply_block(const char *data, size_t n, unsigned threads) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        std::vector<Word> words = segment(data, n, threads, false);
        size_t total = n + 1;
        for (const Word &w : words) total += vals_[w.entry].size();
        std::string out(total, '\0');
        char *o = out.data();
        size_t last = 0;
        for (const Word &w : words) {
            memcpy(o, data + last, w.a - last);
            o += w.a - last;
            const std::string &v = vals_[w.entry];
            memcpy(o, v.data(), v.size());
            o += v.size();
            last = w.b;
        }
        memcpy(o, data + last, n - last);
        o += n - last;
        if (n && data[n - 1] != '\n') *o++ = '\n';
        out.resize(size_t(o - out.data()));
        return out;
    }

    // Lines ending in '\n': subword text without the newlines + int32 line offsets, int32 ids + line offsets.
    void encode_lines(const char *data, size_t n, unsigned threads, int32_t unk, std::string &text,
                      std::vector<int32_t> &text_off, std::vector<int32_t> &ids, std::vector<int32_t> &id_off) {
        std::vector<Word> words;
        StrTable fresh;  // the block's new words, once each (their Word.entry: kFresh | index)
        std::vector<std::string> vals;
        std::vector<std::vector<int32_t>> wids;
        uint64_t gen;
        bool stale = false;  // a cached word without its ids (segmented by apply_block)
        {
            std::shared_lock<std::shared_mutex> lock(mu_);
            gen = gen_;
            words.reserve(n / 5 + 16);
            for_words(data, n, [&](size_t a, size_t b) {
                const std::string_view w(data + a, b - a);
                uint32_t e = words_.find(w);
                if (e == kNone) {
                    bool added;
                    e = kFresh | fresh.add(w, added);
                } else if (e >= wids_.size()) {
                    stale = true;
                }
                words.push_back({a, b, e});
            });
            if (!fresh.size() && !stale) return write_lines(data, n, words, text, text_off, ids, id_off);
            segment_keys(fresh, 0, threads, true, unk, vals, wids);  // (reads model_ and ids_ only)
        }
        {
            std::unique_lock<std::shared_mutex> lock(mu_);
            if (gen != gen_ || words_.size() + fresh.size() > kMaxCache) {  // cleared meanwhile, or full now
                return write_lines(data, n, segment(data, n, threads, true, unk), text, text_off, ids, id_off);
            }
            for (size_t i = wids_.size(); i < vals_.size(); ++i) wids_.push_back(token_ids(vals_[i], unk));
            std::vector<uint32_t> entry(fresh.size());
            for (uint32_t i = 0; i < fresh.size(); ++i) {
                bool added;
                entry[i] = words_.add(fresh.key(i), added);
                if (added) {  // (else another thread added it since)
                    vals_.push_back(std::move(vals[i]));
                    wids_.push_back(std::move(wids[i]));
                }
            }
            for (Word &w : words)
                if (w.entry & kFresh) w.entry = entry[w.entry & ~kFresh];
        }
        {
            std::shared_lock<std::shared_mutex> lock(mu_);
            if (gen == gen_) return write_lines(data, n, words, text, text_off, ids, id_off);  // entries still valid
        }
        std::unique_lock<std::shared_mutex> lock(mu_);  // the cache was cleared in between: all over, alone
        write_lines(data, n, segment(data, n, threads, true, unk), text, text_off, ids, id_off);
    }

private:
    struct Word {
        size_t a, b;    // its bytes in the block
        uint32_t entry;  // its cache entry
    };
    static constexpr uint32_t kFresh = 0x80000000u;  // (the cache holds at most kMaxCache < 2^31 words)

    void write_lines(const char *data, size_t n, const std::vector<Word> &words, std::string &text,
                     std::vector<int32_t> &text_off, std::vector<int32_t> &ids, std::vector<int32_t> &id_off) const {
        text_off.assign(1, 0);
        id_off.assign(1, 0);
        size_t last = 0;
        auto end_lines = [&](size_t upto) {  // copy separators; close every line that ends before `upto`
            for (size_t i = last; i < upto; ++i) {
                if (data[i] == '\n') {
                    text_off.push_back(int32_t(text.size()));
                    id_off.push_back(int32_t(ids.size()));
                } else {
                    text.push_back(data[i]);
                }
            }
        };
        for (const Word &w : words) {
            end_lines(w.a);
            text += vals_[w.entry];
            ids.insert(ids.end(), wids_[w.entry].begin(), wids_[w.entry].end());
            last = w.b;
        }
        end_lines(n);
    }
    // Every word of the block, in order, with its cache entry; new words segmented in `threads` threads (the
    // lock held alone).
    std::vector<Word> segment(const char *data, size_t n, unsigned threads, bool with_ids, int32_t unk = 3) {
        if (words_.size() > kMaxCache) { words_.clear(); vals_.clear(); wids_.clear(); ++gen_; }
        std::vector<Word> words;
        words.reserve(n / 5 + 16);
        const size_t known = words_.size();
        for_words(data, n, [&](size_t a, size_t b) {
            bool added;
            words.push_back({a, b, words_.add(std::string_view(data + a, b - a), added)});
        });
        std::vector<std::string> done;
        std::vector<std::vector<int32_t>> done_ids;
        segment_keys(words_, known, threads, with_ids, unk, done, done_ids);
        for (auto &d : done) vals_.push_back(std::move(d));
        if (with_ids) {  // entries segmented without ids (apply_block) get them now
            for (size_t i = wids_.size(); i < known; ++i) wids_.push_back(token_ids(vals_[i], unk));
            for (auto &d : done_ids) wids_.push_back(std::move(d));
        }
        return words;
    }
    // The segmentation (and ids) of keys[first:], in `threads` threads.
    void segment_keys(const StrTable &keys, size_t first, unsigned threads, bool with_ids, int32_t unk,
                      std::vector<std::string> &done, std::vector<std::vector<int32_t>> &done_ids) const {
        const size_t fresh = keys.size() - first;
        done.assign(fresh, std::string());
        done_ids.assign(with_ids ? fresh : 0, std::vector<int32_t>());
        auto work = [&](size_t t, size_t k) {
            for (size_t i = t; i < fresh; i += k) {
                std::string_view w = keys.key(uint32_t(first + i));
                done[i] = model_->apply(w.data(), w.size());
                if (with_ids) done_ids[i] = token_ids(done[i], unk);
            }
        };
        if (threads <= 1 || fresh < 256) {
            work(0, 1);
        } else {
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
            for (auto &th : pool) th.join();
        }
    }
    // The ids of `sub` split like Python's str.split() (XLM's binarization splits subword lines so).
    std::vector<int32_t> token_ids(const std::string &sub, int32_t unk) const {
        std::vector<int32_t> out;
        size_t i = 0, start = 0;
        auto flush = [&](size_t end) {
            if (end > start) {
                uint32_t id = ids_.find(std::string_view(sub.data() + start, end - start));
                out.push_back(id == kNone ? unk : int32_t(id));
            }
        };
        while (i < sub.size()) {
            unsigned char c = static_cast<unsigned char>(sub[i]);
            size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
            uint32_t cp = c < 0x80 ? c : c & (0x3F >> (len - 1));
            for (size_t k = 1; k < len && i + k < sub.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(sub[i + k]) & 0x3F);
            if (py_space(cp)) {
                flush(i);
                start = i + len;
            }
            i += len;
        }
        flush(sub.size());
        return out;
    }
    template <class F>
    static void for_words(const char *d, size_t n, F f) {
        size_t i = 0;
        while (i < n) {
            while (i < n && (d[i] == ' ' || d[i] == '\n')) ++i;
            size_t j = i;
            while (j < n && d[j] != ' ' && d[j] != '\n') ++j;
            if (j > i) f(i, j);
            i = j;
        }
    }
    static const size_t kMaxCache = 4000000;
    std::unique_ptr<Model> model_;
    StrTable words_;                          // distinct words seen
    std::vector<std::string> vals_;           // their segmentation
    std::vector<std::vector<int32_t>> wids_;  // and its token ids (encode_lines)
    StrTable ids_;                            // token -> id (set_ids)
    mutable std::shared_mutex mu_;            // shared: reading the cache; alone: changing it
    uint64_t gen_ = 0;                        // bumped when the cache is cleared
};

}  // namespace xlpbpe
