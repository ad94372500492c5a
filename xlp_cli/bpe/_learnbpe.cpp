// Native BPE merge learner for xlp, written for this project (no fastBPE code).
//
// It learns the same merges as fastBPE's `fast learnbpe` (Sennrich et al. BPE with a `</w>` end-of-word
// marker on the last character of each word):
//   1. word counts from text split on ' ' and '\n';
//   2. each word becomes a sequence of UTF-8 characters, the last one suffixed with "</w>";
//      symbol ids are handed out in the iteration order of a std::unordered_map<std::string, ...> of the
//      words (the same container fastBPE uses, filled in the same order, so the ids -- and therefore the
//      tie-breaking below -- are the same);
//   3. repeat N times: take the pair with the highest count, ties broken by the smaller (left id, right id);
//      merge it everywhere (left to right, non-overlapping) and update neighbouring pair counts incrementally.
// Differences from fastBPE, by design: a lazy max-heap instead of a linear scan over all pairs per merge
// (much faster, same choice), 64-bit counts, and learning stops when no pair is left (fastBPE keeps printing
// count-0 merges).
//
// Python API (module xlp_cli.bpe._learnbpe):
//   Learner()                  .add(bytes)  count words of a text chunk (split on ' ' and '\n')
//                              .learn(n) -> list[(bytes left, bytes right, int count)]
//                              .words()  -> list[(bytes word, int count)] in internal (map) order
//                              .n_words / .n_tokens properties
//   WordTable()                .unique(text) / .add(words, subwords, ids) / .apply(text) / .clear()
//                              (see the comment above the WordTable type)
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string_view>
#include <unordered_set>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

const char kEndWord[] = "</w>";

struct HeapItem {
  int64_t count;
  uint32_t a, b;
};
struct HeapLess {  // priority_queue pops the "largest": higher count, then smaller (a, b)
  bool operator()(const HeapItem &x, const HeapItem &y) const {
    if (x.count != y.count) return x.count < y.count;
    if (x.a != y.a) return x.a > y.a;
    return x.b > y.b;
  }
};

inline uint64_t key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

struct State {
  std::unordered_map<std::string, uint32_t> word_count;  // same container + insertion order as fastBPE
  std::string cur;                                        // word being read across add() chunks
  uint64_t n_tokens = 0;
  bool learned = false;

  void push_char(char c) {
    if (c == ' ' || c == '\n') {
      if (cur.empty()) return;
      auto it = word_count.find(cur);
      uint32_t count = it != word_count.end() ? it->second : 0;
      word_count[cur] = count + 1;
      n_tokens++;
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  void add(const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) push_char(s[i]);
  }
  void flush() { push_char('\n'); }
};

struct Result {
  std::vector<std::tuple<std::string, std::string, int64_t>> merges;
};

void learn(State &st, size_t n_merges, Result &res) {
  st.flush();
  std::unordered_map<std::string, uint32_t> tok_id;
  std::vector<std::string> tokens;
  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> counts;
  words.reserve(st.word_count.size());
  counts.reserve(st.word_count.size());

  auto id_of = [&](const std::string &t) -> uint32_t {
    auto it = tok_id.find(t);
    if (it != tok_id.end()) return it->second;
    uint32_t id = uint32_t(tokens.size());
    tokens.push_back(t);
    tok_id.emplace(t, id);
    return id;
  };

  for (auto &wc : st.word_count) {
    const std::string &w = wc.first;
    std::vector<uint32_t> seq;
    size_t start = 0;
    for (size_t pos = 1; pos < w.size(); pos++) {
      if ((static_cast<unsigned char>(w[pos]) & 0xc0) != 0x80) {  // a new UTF-8 character starts here
        seq.push_back(id_of(w.substr(start, pos - start)));
        start = pos;
      }
    }
    seq.push_back(id_of(w.substr(start) + kEndWord));
    words.push_back(std::move(seq));
    counts.push_back(wc.second);
  }

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  pair_count.reserve(words.size() * 4 + 16);
  for (uint32_t wi = 0; wi < words.size(); wi++) {
    auto &seq = words[wi];
    for (size_t i = 0; i + 1 < seq.size(); i++) {
      uint64_t k = key(seq[i], seq[i + 1]);
      pair_count[k] += counts[wi];
      auto &v = where[k];
      if (v.empty() || v.back() != wi) v.push_back(wi);
    }
  }
  std::priority_queue<HeapItem, std::vector<HeapItem>, HeapLess> heap;
  for (auto &pc : pair_count) heap.push({pc.second, uint32_t(pc.first >> 32), uint32_t(pc.first & 0xffffffffu)});

  std::vector<uint32_t> stamp(words.size(), UINT32_MAX);
  std::vector<uint64_t> touched;
  std::vector<uint32_t> out;

  for (size_t m = 0; m < n_merges; m++) {
    HeapItem best{0, 0, 0};
    bool found = false;
    while (!heap.empty()) {
      HeapItem top = heap.top();
      heap.pop();
      auto it = pair_count.find(key(top.a, top.b));
      if (it != pair_count.end() && it->second == top.count && top.count > 0) {
        best = top;
        found = true;
        break;
      }
    }
    if (!found) break;  // nothing left to merge
    const uint32_t A = best.a, B = best.b;
    const uint64_t kAB = key(A, B);
    res.merges.emplace_back(tokens[A], tokens[B], best.count);
    const uint32_t N = uint32_t(tokens.size());
    tokens.push_back(tokens[A] + tokens[B]);

    touched.clear();
    auto change = [&](uint32_t a, uint32_t b, int64_t v, uint32_t wi) {
      uint64_t k = key(a, b);
      auto it = pair_count.find(k);
      if (it != pair_count.end()) {
        it->second += v;
      } else if (v > 0) {
        pair_count.emplace(k, v);
      } else {
        return;
      }
      touched.push_back(k);
      if (v > 0) {
        auto &w = where[k];
        if (w.empty() || w.back() != wi) w.push_back(wi);
      }
    };

    std::vector<uint32_t> todo;
    {
      auto wit = where.find(kAB);
      if (wit != where.end()) todo.swap(wit->second);
      where.erase(kAB);
    }
    for (uint32_t wi : todo) {
      if (stamp[wi] == m) continue;
      stamp[wi] = uint32_t(m);
      auto &seq = words[wi];
      const int64_t c = counts[wi];
      out.clear();
      size_t i = 0;
      bool merged_any = false;
      while (i < seq.size()) {
        if (i + 1 < seq.size() && seq[i] == A && seq[i + 1] == B) {
          if (!out.empty()) {
            change(out.back(), A, -c, wi);
            change(out.back(), N, c, wi);
          }
          if (i + 2 < seq.size()) {
            change(B, seq[i + 2], -c, wi);
            change(N, seq[i + 2], c, wi);
          }
          out.push_back(N);
          i += 2;
          merged_any = true;
        } else {
          out.push_back(seq[i]);
          i++;
        }
      }
      if (merged_any) seq.assign(out.begin(), out.end());
    }
    pair_count.erase(kAB);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t k : touched) {
      if (k == kAB) continue;
      auto it = pair_count.find(k);
      if (it == pair_count.end()) continue;
      if (it->second > 0) heap.push({it->second, uint32_t(k >> 32), uint32_t(k & 0xffffffffu)});
    }
  }
  st.learned = true;
}

// ------------------------------------------------------------------ Python type
typedef struct {
  PyObject_HEAD State *st;
} LearnerObject;

void Learner_dealloc(LearnerObject *self) {
  delete self->st;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *Learner_new(PyTypeObject *type, PyObject *, PyObject *) {
  LearnerObject *self = reinterpret_cast<LearnerObject *>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->st = new (std::nothrow) State();
  if (self->st == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return reinterpret_cast<PyObject *>(self);
}

PyObject *Learner_add(LearnerObject *self, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) return nullptr;
  const char *data = static_cast<const char *>(view.buf);
  Py_ssize_t len = view.len;
  Py_BEGIN_ALLOW_THREADS self->st->add(data, len);
  Py_END_ALLOW_THREADS PyBuffer_Release(&view);
  Py_RETURN_NONE;
}

PyObject *Learner_learn(LearnerObject *self, PyObject *arg) {
  long long n = PyLong_AsLongLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "number of merges must be >= 0");
    return nullptr;
  }
  if (self->st->learned) {
    PyErr_SetString(PyExc_RuntimeError, "learn() can run once per Learner");
    return nullptr;
  }
  Result res;
  bool oom = false;
  Py_BEGIN_ALLOW_THREADS try {
    learn(*self->st, size_t(n), res);
  } catch (const std::bad_alloc &) {
    oom = true;
  }
  Py_END_ALLOW_THREADS if (oom) return PyErr_NoMemory();
  PyObject *list = PyList_New(Py_ssize_t(res.merges.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < res.merges.size(); i++) {
    auto &t = res.merges[i];
    PyObject *item = Py_BuildValue("(y#y#L)", std::get<0>(t).data(), Py_ssize_t(std::get<0>(t).size()),
                                   std::get<1>(t).data(), Py_ssize_t(std::get<1>(t).size()),
                                   (long long)std::get<2>(t));
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), item);
  }
  return list;
}

PyObject *Learner_words(LearnerObject *self, PyObject *) {
  self->st->flush();
  PyObject *list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (auto &wc : self->st->word_count) {
    PyObject *item = Py_BuildValue("(y#K)", wc.first.data(), Py_ssize_t(wc.first.size()),
                                   (unsigned long long)wc.second);
    if (item == nullptr || PyList_Append(list, item) != 0) {
      Py_XDECREF(item);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return list;
}

PyObject *Learner_get_n_words(LearnerObject *self, void *) {
  return PyLong_FromSize_t(self->st->word_count.size());
}
PyObject *Learner_get_n_tokens(LearnerObject *self, void *) {
  return PyLong_FromUnsignedLongLong(self->st->n_tokens);
}

PyMethodDef Learner_methods[] = {
    {"add", (PyCFunction)Learner_add, METH_O, "Count the words of a UTF-8 text chunk (split on ' ' and '\\n')."},
    {"learn", (PyCFunction)Learner_learn, METH_O, "Learn up to n merges; returns [(left, right, count)]."},
    {"words", (PyCFunction)Learner_words, METH_NOARGS, "[(word, count)] of the counted text."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Learner_getset[] = {
    {"n_words", (getter)Learner_get_n_words, nullptr, "number of distinct words", nullptr},
    {"n_tokens", (getter)Learner_get_n_tokens, nullptr, "number of running words", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject LearnerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ------------------------------------------------------------------ WordTable: split, de-duplicate, map back
// Applying BPE word by word is what fastBPE's binary does; the slow part in Python is splitting millions of
// words and joining them back. WordTable does both natively: `unique(data)` lists the distinct words of a
// text ('\n'-separated lines, words split on ' ' only) that the table does not know yet; `add(words,
// subwords, ids)` records each word's segmentation (from fastBPE's API) and its int32 ids; `apply(data)`
// rebuilds the text with every word replaced (spaces kept exactly, like `fast applybpe`) and returns the flat
// ids and per-line offsets.
struct Entry {
  std::string sub;
  std::vector<int32_t> ids;
};
struct Table {
  std::deque<std::string> keys;                         // stable storage for the map's keys
  std::unordered_map<std::string_view, Entry> map;      // looked up without allocating
  void clear() {
    map.clear();
    keys.clear();
  }
};

typedef struct {
  PyObject_HEAD Table *t;
} WordTableObject;

void WordTable_dealloc(WordTableObject *self) {
  delete self->t;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *WordTable_new(PyTypeObject *type, PyObject *, PyObject *) {
  WordTableObject *self = reinterpret_cast<WordTableObject *>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->t = new (std::nothrow) Table();
  if (self->t == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return reinterpret_cast<PyObject *>(self);
}

PyObject *WordTable_unique(WordTableObject *self, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) return nullptr;
  const char *d = static_cast<const char *>(view.buf);
  std::vector<std::pair<size_t, size_t>> found;
  {
    std::unordered_set<std::string_view> seen;
    size_t start = 0, n = size_t(view.len);
    for (size_t i = 0; i <= n; i++) {
      if (i == n || d[i] == ' ' || d[i] == '\n') {
        if (i > start) {
          std::string_view w(d + start, i - start);
          if (self->t->map.find(w) == self->t->map.end() && seen.insert(w).second) found.emplace_back(start, i - start);
        }
        start = i + 1;
      }
    }
  }
  PyObject *list = PyList_New(Py_ssize_t(found.size()));
  if (list == nullptr) {
    PyBuffer_Release(&view);
    return nullptr;
  }
  for (size_t k = 0; k < found.size(); k++) {
    PyObject *b = PyBytes_FromStringAndSize(d + found[k].first, Py_ssize_t(found[k].second));
    if (b == nullptr) {
      Py_DECREF(list);
      PyBuffer_Release(&view);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(k), b);
  }
  PyBuffer_Release(&view);
  return list;
}

PyObject *WordTable_add(WordTableObject *self, PyObject *args) {
  PyObject *words, *subs, *ids;
  if (!PyArg_ParseTuple(args, "OOO", &words, &subs, &ids)) return nullptr;
  if (!PyList_Check(words) || !PyList_Check(subs) || !PyList_Check(ids) || PyList_GET_SIZE(words) != PyList_GET_SIZE(subs) ||
      PyList_GET_SIZE(words) != PyList_GET_SIZE(ids)) {
    PyErr_SetString(PyExc_TypeError, "add(words, subwords, ids): three lists of equal length");
    return nullptr;
  }
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(words); k++) {
    char *w, *s, *i;
    Py_ssize_t wl, sl, il;
    if (PyBytes_AsStringAndSize(PyList_GET_ITEM(words, k), &w, &wl) != 0) return nullptr;
    if (PyBytes_AsStringAndSize(PyList_GET_ITEM(subs, k), &s, &sl) != 0) return nullptr;
    if (PyBytes_AsStringAndSize(PyList_GET_ITEM(ids, k), &i, &il) != 0) return nullptr;
    if (il % 4 != 0) {
      PyErr_SetString(PyExc_ValueError, "ids must be int32 bytes");
      return nullptr;
    }
    Entry e;
    e.sub.assign(s, size_t(sl));
    e.ids.resize(size_t(il / 4));
    if (il) std::memcpy(e.ids.data(), i, size_t(il));
    std::string_view key(w, size_t(wl));
    auto it = self->t->map.find(key);
    if (it != self->t->map.end()) {
      it->second = std::move(e);
    } else {
      self->t->keys.emplace_back(w, size_t(wl));
      self->t->map.emplace(std::string_view(self->t->keys.back()), std::move(e));
    }
  }
  Py_RETURN_NONE;
}

PyObject *WordTable_apply(WordTableObject *self, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) return nullptr;
  const char *d = static_cast<const char *>(view.buf);
  size_t n = size_t(view.len);
  std::string out;
  std::vector<int32_t> ids;
  std::vector<int32_t> offsets(1, 0);
  bool missing = false;
  std::string missing_word;
  Py_BEGIN_ALLOW_THREADS out.reserve(n * 3 / 2 + 16);
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || d[i] == ' ' || d[i] == '\n') {
      if (i > start) {
        std::string_view w(d + start, i - start);
        auto it = self->t->map.find(w);
        if (it == self->t->map.end()) {
          missing = true;
          missing_word.assign(w);
          break;
        }
        out += it->second.sub;
        ids.insert(ids.end(), it->second.ids.begin(), it->second.ids.end());
      }
      if (i < n) {
        out.push_back(d[i]);
        if (d[i] == '\n') offsets.push_back(int32_t(ids.size()));
      }
      start = i + 1;
    }
  }
  Py_END_ALLOW_THREADS PyBuffer_Release(&view);
  if (missing) {
    PyErr_Format(PyExc_KeyError, "word not in table: %s", missing_word.c_str());
    return nullptr;
  }
  // (y# would turn an empty vector's null data() into None: build the bytes explicitly)
  PyObject *o = PyBytes_FromStringAndSize(out.empty() ? "" : out.data(), Py_ssize_t(out.size()));
  PyObject *i = PyBytes_FromStringAndSize(ids.empty() ? "" : reinterpret_cast<const char *>(ids.data()),
                                          Py_ssize_t(ids.size() * 4));
  PyObject *f = PyBytes_FromStringAndSize(reinterpret_cast<const char *>(offsets.data()), Py_ssize_t(offsets.size() * 4));
  if (o == nullptr || i == nullptr || f == nullptr) {
    Py_XDECREF(o);
    Py_XDECREF(i);
    Py_XDECREF(f);
    return nullptr;
  }
  return Py_BuildValue("(NNN)", o, i, f);
}

PyObject *WordTable_clear(WordTableObject *self, PyObject *) {
  self->t->clear();
  Py_RETURN_NONE;
}

Py_ssize_t WordTable_len(WordTableObject *self) { return Py_ssize_t(self->t->map.size()); }

PyMethodDef WordTable_methods[] = {
    {"unique", (PyCFunction)WordTable_unique, METH_O, "Distinct words of a text that the table does not hold yet."},
    {"add", (PyCFunction)WordTable_add, METH_VARARGS, "add(words, subwords, ids): record segmentations (bytes lists)."},
    {"apply", (PyCFunction)WordTable_apply, METH_O, "apply(text) -> (subword text, int32 ids bytes, int32 line offsets bytes)."},
    {"clear", (PyCFunction)WordTable_clear, METH_NOARGS, "Forget every word."},
    {nullptr, nullptr, 0, nullptr}};

PySequenceMethods WordTable_as_sequence = {};
PyTypeObject WordTableType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_learnbpe", "Native fastBPE-compatible BPE merge learner.", -1,
                         nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__learnbpe(void) {
  LearnerType.tp_name = "xlp_cli.bpe._learnbpe.Learner";
  LearnerType.tp_basicsize = sizeof(LearnerObject);
  LearnerType.tp_flags = Py_TPFLAGS_DEFAULT;
  LearnerType.tp_doc = "Counts words, then learns fastBPE-compatible merges.";
  LearnerType.tp_new = Learner_new;
  LearnerType.tp_dealloc = (destructor)Learner_dealloc;
  LearnerType.tp_methods = Learner_methods;
  LearnerType.tp_getset = Learner_getset;
  if (PyType_Ready(&LearnerType) < 0) return nullptr;
  WordTable_as_sequence.sq_length = (lenfunc)WordTable_len;
  WordTableType.tp_name = "xlp_cli.bpe._learnbpe.WordTable";
  WordTableType.tp_basicsize = sizeof(WordTableObject);
  WordTableType.tp_flags = Py_TPFLAGS_DEFAULT;
  WordTableType.tp_doc = "word -> (subwords, ids) table applied natively to whole texts.";
  WordTableType.tp_new = WordTable_new;
  WordTableType.tp_dealloc = (destructor)WordTable_dealloc;
  WordTableType.tp_methods = WordTable_methods;
  WordTableType.tp_as_sequence = &WordTable_as_sequence;
  if (PyType_Ready(&WordTableType) < 0) return nullptr;
  PyObject *m = PyModule_Create(&moduledef);
  if (m == nullptr) return nullptr;
  Py_INCREF(&LearnerType);
  if (PyModule_AddObject(m, "Learner", reinterpret_cast<PyObject *>(&LearnerType)) < 0) {
    Py_DECREF(&LearnerType);
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(&WordTableType);
  if (PyModule_AddObject(m, "WordTable", reinterpret_cast<PyObject *>(&WordTableType)) < 0) {
    Py_DECREF(&WordTableType);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
