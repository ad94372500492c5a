// Native BPE applier for xlp, written for this project (no fastBPE code). Its output is what fastBPE 0.1.0's
// `fast applybpe OUT IN CODES [VOCAB]` writes:
//   - words are split on ' ' and '\n' only; the separators are copied as they are (runs of spaces too);
//   - a word is cut into UTF-8 characters, the last one suffixed with "</w>"; then, repeatedly, the adjacent
//     pair with the lowest merge rank (its line in the codes file) is merged everywhere, left to right and
//     without overlap, until no pair of the word is a merge;
//   - with a vocab, a subword the vocab does not hold (as "x@@", or "x" for the last one) is split back
//     into the two subwords it was merged from, recursively, keeping the parts the vocab holds;
//   - subwords are joined by "@@ " and the final "</w>" is dropped.
// Differences from the binary, by design: the last word of an input that does not end in '\n' is written
// (fast drops it), followed by '\n'; symbols are integers and merge ranks live in one hash map, words are
// segmented once (cached) and in parallel threads.
// Threads: `encode_lines` may run in several threads at once (the Python methods release the GIL). The cache
// is read under a shared lock; a block's new words are segmented under it too, then added under the lock held
// alone, and the block is written under a shared lock again (adding never moves an entry; clearing the full
// cache, which does, bumps a generation that sends a block back to the all-alone path). `apply_block` and
// `set_ids` hold the lock alone.
//
// Python API (module xlp_cli.bpe._applybpe):
//   Applier(codes_path, vocab_path or "")   raises ValueError("PATH:LINE: problem") for a malformed file
//     .apply_words(list[bytes]) -> list[bytes]   one word each (no ' ' or '\n')
//     .apply_block(bytes, threads) -> bytes      text: words split on ' ' and '\n', separators kept
//     .set_ids(bytes)                            the token of each dictionary id, '\n'-joined, for encode_lines
//     .encode_rows(offsets, data, first, n, threads, unk)   the same for rows of an Arrow string array
//     .encode_lines(bytes, threads, unk) -> (text, text offsets, ids, id offsets)
//                                                lines ending in '\n' -> their subword lines (an Arrow string
//                                                array's buffers) and token ids (an Arrow list array's); the
//                                                ids come from splitting each subword line like str.split()
//     .n_codes, .n_vocab
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memory>
#include <stdexcept>

#include "applier.h"

namespace {

using xlpbpe::Applier;
using xlpbpe::Model;

struct ApplierObject {
    PyObject_HEAD
    Applier *app;
};

PyObject *Applier_new(PyTypeObject *type, PyObject *args, PyObject *) {
    const char *codes, *vocab = "";
    if (!PyArg_ParseTuple(args, "s|s", &codes, &vocab)) return nullptr;
    std::unique_ptr<Model> model;
    std::string error;
    Py_BEGIN_ALLOW_THREADS try {
        model.reset(new Model(codes, vocab));
    } catch (const std::exception &e) {
        error = e.what();
    }
    Py_END_ALLOW_THREADS
    if (!model) {
        PyErr_SetString(PyExc_ValueError, error.c_str());
        return nullptr;
    }
    auto *self = reinterpret_cast<ApplierObject *>(type->tp_alloc(type, 0));
    if (!self) return nullptr;
    self->app = new Applier(std::move(model));
    return reinterpret_cast<PyObject *>(self);
}

void Applier_dealloc(ApplierObject *self) {
    delete self->app;
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *Applier_apply_words(ApplierObject *self, PyObject *arg) {
    PyObject *fast = PySequence_Fast(arg, "apply_words() needs a sequence of bytes");
    if (!fast) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    std::vector<std::string> words(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        char *p;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &p, &len) < 0) { Py_DECREF(fast); return nullptr; }
        words[size_t(i)].assign(p, size_t(len));
    }
    Py_DECREF(fast);
    const Model &m = self->app->model();
    Py_BEGIN_ALLOW_THREADS for (size_t i = 0; i < words.size(); ++i) out[i] = m.apply(words[i].data(), words[i].size());
    Py_END_ALLOW_THREADS
    PyObject *res = PyList_New(n);
    if (!res) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *b = PyBytes_FromStringAndSize(out[size_t(i)].data(), Py_ssize_t(out[size_t(i)].size()));
        if (!b) { Py_DECREF(res); return nullptr; }
        PyList_SET_ITEM(res, i, b);
    }
    return res;
}

PyObject *Applier_apply_block(ApplierObject *self, PyObject *args) {
    Py_buffer buf;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "y*|i", &buf, &threads)) return nullptr;
    std::string out;
    Applier *app = self->app;
    Py_BEGIN_ALLOW_THREADS out = app->apply_block(static_cast<const char *>(buf.buf), size_t(buf.len), unsigned(threads));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyBytes_FromStringAndSize(out.data(), Py_ssize_t(out.size()));
}

PyObject *Applier_set_ids(ApplierObject *self, PyObject *arg) {
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &p, &n) < 0) return nullptr;
    std::vector<std::string> tokens;
    for (size_t start = 0; start <= size_t(n);) {
        const char *nl = static_cast<const char *>(memchr(p + start, '\n', size_t(n) - start));
        size_t end = nl ? size_t(nl - p) : size_t(n);
        tokens.emplace_back(p + start, end - start);
        start = end + 1;
    }
    self->app->set_ids(std::move(tokens));
    Py_RETURN_NONE;
}

PyObject *encoded(const std::string &text, const std::vector<int32_t> &text_off, const std::vector<int32_t> &ids,
                  const std::vector<int32_t> &id_off) {
    auto bytes = [](const void *p, size_t n) { return PyBytes_FromStringAndSize(static_cast<const char *>(p), Py_ssize_t(n)); };
    return Py_BuildValue("(NNNN)", bytes(text.data(), text.size()), bytes(text_off.data(), text_off.size() * 4),
                         bytes(ids.data(), ids.size() * 4), bytes(id_off.data(), id_off.size() * 4));
}

PyObject *Applier_encode_lines(ApplierObject *self, PyObject *args) {
    Py_buffer buf;
    int threads = 1, unk = 3;
    if (!PyArg_ParseTuple(args, "y*|ii", &buf, &threads, &unk)) return nullptr;
    std::string text;
    std::vector<int32_t> text_off, ids, id_off;
    Applier *app = self->app;
    Py_BEGIN_ALLOW_THREADS app->encode_lines(static_cast<const char *>(buf.buf), size_t(buf.len), unsigned(threads), unk,
                                             text, text_off, ids, id_off);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return encoded(text, text_off, ids, id_off);
}

// The rows [first, first + n) of an Arrow string array (its int32 offsets and data buffers) as lines.
PyObject *Applier_encode_rows(ApplierObject *self, PyObject *args) {
    Py_buffer offs, data;
    Py_ssize_t first, n;
    int threads = 1, unk = 3;
    if (!PyArg_ParseTuple(args, "y*y*nn|ii", &offs, &data, &first, &n, &threads, &unk)) return nullptr;
    const int32_t *off = static_cast<const int32_t *>(offs.buf);
    const char *d = static_cast<const char *>(data.buf);
    bool ok = first >= 0 && n >= 0 && size_t(first + n + 1) * 4 <= size_t(offs.len);
    std::string lines, text;
    std::vector<int32_t> text_off, ids, id_off;
    Applier *app = self->app;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = first; ok && i < first + n; ++i) {
        const int32_t a = off[i], b = off[i + 1];
        if (a < 0 || b < a || size_t(b) > size_t(data.len) || memchr(d + a, '\n', size_t(b - a))) ok = false;
        else lines.append(d + a, size_t(b - a)).push_back('\n');
    }
    if (ok) app->encode_lines(lines.data(), lines.size(), unsigned(threads), unk, text, text_off, ids, id_off);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "a row holds a newline character (or the buffers do not match)");
        return nullptr;
    }
    return encoded(text, text_off, ids, id_off);
}

PyObject *Applier_n_codes(ApplierObject *self, void *) { return PyLong_FromSize_t(self->app->model().n_codes()); }
PyObject *Applier_n_vocab(ApplierObject *self, void *) { return PyLong_FromSize_t(self->app->model().n_vocab()); }

PyMethodDef Applier_methods[] = {
    {"apply_words", reinterpret_cast<PyCFunction>(Applier_apply_words), METH_O, "apply_words(words) -> list[bytes]"},
    {"apply_block", reinterpret_cast<PyCFunction>(Applier_apply_block), METH_VARARGS,
     "apply_block(text, threads=1) -> bytes"},
    {"set_ids", reinterpret_cast<PyCFunction>(Applier_set_ids), METH_O, "set_ids(b'\\n'.join(tokens)): the token of each id"},
    {"encode_lines", reinterpret_cast<PyCFunction>(Applier_encode_lines), METH_VARARGS,
     "encode_lines(lines, threads=1, unk=3) -> (text, text offsets, ids, id offsets), int32 buffers; "
     "several threads may call it at once"},
    {"encode_rows", reinterpret_cast<PyCFunction>(Applier_encode_rows), METH_VARARGS,
     "encode_rows(offsets, data, first, n, threads=1, unk=3): encode_lines of rows of an Arrow string array"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Applier_getset[] = {
    {"n_codes", reinterpret_cast<getter>(Applier_n_codes), nullptr, "number of merges", nullptr},
    {"n_vocab", reinterpret_cast<getter>(Applier_n_vocab), nullptr, "number of vocab entries", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject ApplierType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_applybpe", "Native fastBPE-compatible BPE applier.", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__applybpe(void) {
    ApplierType.tp_name = "xlp_cli.bpe._applybpe.Applier";
    ApplierType.tp_basicsize = sizeof(ApplierObject);
    ApplierType.tp_flags = Py_TPFLAGS_DEFAULT;
    ApplierType.tp_doc = "Applier(codes_path, vocab_path='')";
    ApplierType.tp_new = Applier_new;
    ApplierType.tp_dealloc = reinterpret_cast<destructor>(Applier_dealloc);
    ApplierType.tp_methods = Applier_methods;
    ApplierType.tp_getset = Applier_getset;
    if (PyType_Ready(&ApplierType) < 0) return nullptr;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return nullptr;
    Py_INCREF(&ApplierType);
    if (PyModule_AddObject(m, "Applier", reinterpret_cast<PyObject *>(&ApplierType)) < 0) {
        Py_DECREF(&ApplierType);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
