// The parts of a MediaWiki XML dump that `--source wikipedia` reads, from expat's events handled here
// (xlp_cli/prepare/sources/wikipedia_xml.py wraps it; that module's docstring says what is kept).
//
//   DumpParser()
//     .feed(data, final) -> [item]   the items completed by `data`, in document order:
//                                     ("site", dbname | None, [(key | None, text)])
//                                     ("page", title | None, ns | None, redirect, revision, text: bytes | None)
//     .error -> (code, line, column) | None     after a feed that met malformed XML (the items before it come first;
//                                               the message is xml.parsers.expat.ErrorString(code))
//     .root_lang -> str | None                  the root element's xml:lang
//
// The parser is Python's own expat, through the C API that pyexpat exports for _elementtree (the capsule
// "pyexpat.expat_CAPI"): the same checks, error codes and positions as xml.parsers.expat, and the same handling
// of the document's encoding (unknown ones through pyexpat's codec handler). The handlers are C++, so a block
// parses without the GIL (the worker threads go on meanwhile), no Python str is made per piece of character data,
// and a page's text stays UTF-8 bytes all the way to the native text pipeline (Pipeline.pages).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <string>
#include <vector>

// ------------------------------------------------------------------ expat's C API, as pyexpat.h gives it
// (pyexpat.h needs expat.h's declarations; these are the ones it uses, with CPython's build of expat: XML_Char is
// char, in UTF-8.)
extern "C" {
typedef struct XML_ParserStruct *XML_Parser;
typedef char XML_Char;
typedef char XML_LChar;
typedef unsigned char XML_Bool;
#if defined(XML_LARGE_SIZE)
typedef unsigned long long XML_Size;
#else
typedef unsigned long XML_Size;
#endif
enum XML_Status { XML_STATUS_ERROR = 0, XML_STATUS_OK = 1, XML_STATUS_SUSPENDED = 2 };
enum XML_Error { XML_ERROR_NONE = 0 };
typedef struct {
    int map[256];
    void *data;
    int (*convert)(void *data, const char *s);
    void (*release)(void *data);
} XML_Encoding;
typedef struct XML_Memory_Handling_Suite XML_Memory_Handling_Suite;
typedef void (*XML_StartElementHandler)(void *userData, const XML_Char *name, const XML_Char **atts);
typedef void (*XML_EndElementHandler)(void *userData, const XML_Char *name);
typedef void (*XML_CharacterDataHandler)(void *userData, const XML_Char *s, int len);
typedef void (*XML_CommentHandler)(void *userData, const XML_Char *data);
typedef void (*XML_DefaultHandler)(void *userData, const XML_Char *s, int len);
typedef void (*XML_StartNamespaceDeclHandler)(void *userData, const XML_Char *prefix, const XML_Char *uri);
typedef void (*XML_EndNamespaceDeclHandler)(void *userData, const XML_Char *prefix);
typedef void (*XML_ProcessingInstructionHandler)(void *userData, const XML_Char *target, const XML_Char *data);
typedef int (*XML_UnknownEncodingHandler)(void *encodingHandlerData, const XML_Char *name, XML_Encoding *info);
typedef void (*XML_StartDoctypeDeclHandler)(void *userData, const XML_Char *doctypeName, const XML_Char *sysid,
                                            const XML_Char *pubid, int has_internal_subset);
#include <pyexpat.h>
}

namespace xlp {
namespace {

constexpr const char *kXmlLang = "http://www.w3.org/XML/1998/namespace}lang";

const PyExpat_CAPI *expat_api() {  // (imported once, under the GIL)
    static const PyExpat_CAPI *api = nullptr;
    if (api) return api;
    auto *found = static_cast<const PyExpat_CAPI *>(PyCapsule_Import(PyExpat_CAPSULE_NAME, 0));
    if (!found) return nullptr;
    if (std::strcmp(found->magic, PyExpat_CAPI_MAGIC) != 0 || size_t(found->size) < sizeof(PyExpat_CAPI)) {
        PyErr_SetString(PyExc_ImportError, "pyexpat's C API is not the one xlp was built for");
        return nullptr;
    }
    api = found;
    return api;
}

// pyexpat's handler for encodings expat does not know calls Python's codecs: it needs the GIL, which a feed
// releases.
int unknown_encoding(void *data, const XML_Char *name, XML_Encoding *info) {
    PyGILState_STATE g = PyGILState_Ensure();
    const int ok = expat_api()->DefaultUnknownEncodingHandler(data, name, info);
    PyGILState_Release(g);
    return ok;
}

const char *local(const char *name) {  // the name without its namespace ("uri}local" -> "local")
    const char *brace = std::strrchr(name, '}');
    return brace ? brace + 1 : name;
}

struct Item {
    bool page;
    std::string a, b, text;  // page: title, ns, text; site: dbname
    bool has_a = false, has_b = false, has_text = false, redirect = false, revision = false;
    std::vector<std::pair<std::pair<bool, std::string>, std::string>> namespaces;  // site: ((has key, key), text)
};

// The Python handlers this replaced (tests/dump_events_oracle.py, the test oracle), handler for handler.
struct Events {
    std::vector<Item> items;
    bool has_root_lang = false;
    std::string root_lang;
    int depth = 0;
    bool in_page = false, in_site = false;
    Item cur;
    int top = 0, revision = 0, namespaces = 0;  // depths: the open <page>/<siteinfo>, its <revision>, <namespaces>
    // the element whose text is being collected
    enum Target { NONE, TITLE, NS, TEXT, DBNAME, NAMESPACE } target = NONE;
    int target_depth = 0;
    bool has_key = false;
    std::string key, parts;

    void collect(Target t, const char *k = nullptr) {
        target = t, target_depth = depth, parts.clear();
        has_key = k != nullptr;
        key = k ? k : "";
    }
    void finish() {
        const Target t = target;
        target = NONE;
        switch (t) {
            case NAMESPACE: cur.namespaces.push_back({{has_key, key}, parts}); break;
            case DBNAME: cur.a = parts, cur.has_a = true; break;
            case TITLE: cur.a = parts, cur.has_a = true; break;
            case NS: cur.b = parts, cur.has_b = true; break;
            case TEXT: cur.text.swap(parts), cur.has_text = true; break;
            case NONE: break;
        }
        parts.clear();
    }
    void start(const char *name, const char **atts) {
        const int d = ++depth;
        if (target != NONE) finish();  // a child element: the text before it is the whole `.text`
        const char *l = local(name);
        if (d == 1) {
            for (const char **a = atts; a && a[0]; a += 2)
                if (std::strcmp(a[0], kXmlLang) == 0) has_root_lang = true, root_lang = a[1];
        }
        if (in_page) {
            if (d == top + 1) {
                if (!std::strcmp(l, "title") && !cur.has_a) collect(TITLE);
                else if (!std::strcmp(l, "ns") && !cur.has_b) collect(NS);
                else if (!std::strcmp(l, "redirect")) cur.redirect = true;
                else if (!std::strcmp(l, "revision") && !cur.revision) cur.revision = true, revision = d;
            } else if (revision && d == revision + 1 && !std::strcmp(l, "text") && !cur.has_text) {
                collect(TEXT);
            }
        } else if (in_site) {
            if (d == top + 1) {
                if (!std::strcmp(l, "dbname") && !cur.has_a) collect(DBNAME);
                else if (!std::strcmp(l, "namespaces")) namespaces = d;
            } else if (namespaces && d == namespaces + 1 && !std::strcmp(l, "namespace")) {
                const char *k = nullptr;
                for (const char **a = atts; a && a[0]; a += 2)
                    if (!std::strcmp(a[0], "key")) k = a[1];
                collect(NAMESPACE, k);
            }
        } else if (!std::strcmp(l, "page")) {
            in_page = true, top = d, cur = Item{true, {}, {}, {}};
        } else if (!std::strcmp(l, "siteinfo")) {
            in_site = true, top = d, cur = Item{false, {}, {}, {}};
        }
    }
    void data(const char *s, int len) {
        if (target != NONE && depth == target_depth) parts.append(s, size_t(len));
    }
    void end() {
        const int d = depth--;
        if (target != NONE && d == target_depth) finish();
        else if (d == revision) revision = 0;
        else if (d == namespaces) namespaces = 0;
        if (d != top || !(in_page || in_site)) return;
        in_page = in_site = false;
        items.push_back(std::move(cur));
        cur = Item{};
    }
};

void on_start(void *u, const XML_Char *name, const XML_Char **atts) { static_cast<Events *>(u)->start(name, atts); }
void on_end(void *u, const XML_Char *) { static_cast<Events *>(u)->end(); }
void on_data(void *u, const XML_Char *s, int len) { static_cast<Events *>(u)->data(s, len); }

struct DumpParserObject {
    PyObject_HEAD
    XML_Parser parser;
    Events *events;
    bool failed;
    int code;
    XML_Size line, column;
};

PyObject *DumpParser_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static const char *kwlist[] = {nullptr};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":DumpParser", const_cast<char **>(kwlist))) return nullptr;
    const PyExpat_CAPI *api = expat_api();
    if (!api) return nullptr;
    auto *self = reinterpret_cast<DumpParserObject *>(type->tp_alloc(type, 0));
    if (!self) return nullptr;
    self->events = new Events();
    self->parser = api->ParserCreate_MM(nullptr, nullptr, "}");  // the encoding from the document, as pyexpat's
    if (!self->parser) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    api->SetUserData(self->parser, self->events);
    api->SetElementHandler(self->parser, on_start, on_end);
    api->SetCharacterDataHandler(self->parser, on_data);
    api->SetUnknownEncodingHandler(self->parser, unknown_encoding, nullptr);
    return reinterpret_cast<PyObject *>(self);
}

void DumpParser_dealloc(DumpParserObject *self) {
    if (self->parser) expat_api()->ParserFree(self->parser);
    delete self->events;
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *str_or_none(bool has, const std::string &s) {
    if (!has) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "surrogateescape");
}

PyObject *item_tuple(Item &it) {
    if (it.page) {
        PyObject *text = it.has_text ? PyBytes_FromStringAndSize(it.text.data(), Py_ssize_t(it.text.size()))
                                     : (Py_INCREF(Py_None), Py_None);
        if (!text) return nullptr;
        PyObject *title = str_or_none(it.has_a, it.a), *ns = title ? str_or_none(it.has_b, it.b) : nullptr;
        if (!ns) {
            Py_XDECREF(title);
            Py_DECREF(text);
            return nullptr;
        }
        return Py_BuildValue("(sNNOON)", "page", title, ns, it.redirect ? Py_True : Py_False,
                             it.revision ? Py_True : Py_False, text);
    }
    PyObject *spaces = PyList_New(0);
    if (!spaces) return nullptr;
    for (const auto &ns : it.namespaces) {
        PyObject *key = str_or_none(ns.first.first, ns.first.second);
        PyObject *text = key ? str_or_none(true, ns.second) : nullptr;
        PyObject *pair = text ? PyTuple_Pack(2, key, text) : nullptr;
        Py_XDECREF(key);
        Py_XDECREF(text);
        if (!pair || PyList_Append(spaces, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(spaces);
            return nullptr;
        }
        Py_DECREF(pair);
    }
    return Py_BuildValue("(sNN)", "site", str_or_none(it.has_a, it.a), spaces);
}

PyObject *DumpParser_feed(DumpParserObject *self, PyObject *args) {
    Py_buffer buf;
    int final = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &buf, &final)) return nullptr;
    if (buf.len > INT_MAX) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "a block over 2 GiB");
        return nullptr;
    }
    const PyExpat_CAPI *api = expat_api();
    int status;
    Py_BEGIN_ALLOW_THREADS status = api->Parse(self->parser, static_cast<const char *>(buf.buf), int(buf.len), final);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (status == XML_STATUS_ERROR && !self->failed) {
        self->failed = true;
        self->code = int(api->GetErrorCode(self->parser));
        self->line = api->GetErrorLineNumber(self->parser);
        self->column = api->GetErrorColumnNumber(self->parser);
    }
    std::vector<Item> items;
    items.swap(self->events->items);
    PyObject *out = PyList_New(Py_ssize_t(items.size()));
    if (!out) return nullptr;
    for (size_t k = 0; k < items.size(); ++k) {
        PyObject *t = item_tuple(items[k]);
        if (!t) {
            Py_DECREF(out);
            return nullptr;
        }
        PyList_SET_ITEM(out, Py_ssize_t(k), t);
    }
    return out;
}

PyObject *DumpParser_error(DumpParserObject *self, void *) {
    if (!self->failed) Py_RETURN_NONE;
    return Py_BuildValue("(iKK)", self->code, static_cast<unsigned long long>(self->line),
                         static_cast<unsigned long long>(self->column));
}

PyObject *DumpParser_root_lang(DumpParserObject *self, void *) {
    return str_or_none(self->events->has_root_lang, self->events->root_lang);
}

PyMethodDef DumpParser_methods[] = {
    {"feed", reinterpret_cast<PyCFunction>(DumpParser_feed), METH_VARARGS, "feed(data, final=False) -> [item]"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef DumpParser_getset[] = {
    {"error", reinterpret_cast<getter>(DumpParser_error), nullptr, "(code, line, column) | None", nullptr},
    {"root_lang", reinterpret_cast<getter>(DumpParser_root_lang), nullptr, "the root's xml:lang", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject DumpParserType = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace

// Adds DumpParser to the module (called from PyInit__native).
int add_dumpxml(PyObject *m) {
    DumpParserType.tp_name = "xlp_cli.text._native.DumpParser";
    DumpParserType.tp_basicsize = sizeof(DumpParserObject);
    DumpParserType.tp_flags = Py_TPFLAGS_DEFAULT;
    DumpParserType.tp_doc = "DumpParser(): .feed(data, final) -> items; .error; .root_lang";
    DumpParserType.tp_new = DumpParser_new;
    DumpParserType.tp_dealloc = reinterpret_cast<destructor>(DumpParser_dealloc);
    DumpParserType.tp_methods = DumpParser_methods;
    DumpParserType.tp_getset = DumpParser_getset;
    if (PyType_Ready(&DumpParserType) < 0) return -1;
    Py_INCREF(&DumpParserType);
    if (PyModule_AddObject(m, "DumpParser", reinterpret_cast<PyObject *>(&DumpParserType)) < 0) {
        Py_DECREF(&DumpParserType);
        return -1;
    }
    return 0;
}

}  // namespace xlp
