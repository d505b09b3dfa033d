/* The per-step path of LoaderEvaluator in C (optional: without it, _timing.py composes the
 * same iterators from map/zip/chain). Linux only: it reads CLOCK_MONOTONIC, the clock of
 * Python's time.perf_counter_ns there, so its stamps are integer nanoseconds of that clock.
 *
 *   Stamps(): where the stamps go, 8 bytes each (no Python object per stamp: ~40 ns a step
 *       less than a list of ints, whose every int is fresh memory); len(), s[i] and s[a:b]
 *       (a list) read it like a list of ints, from any thread (the GIL guards it).
 *   log_iter(source, starts, ready, end, first=None)  (starts, ready: Stamps)
 *       each next(): starts.append(now); batch = next(source); ready.append(now); batch.
 *       When source is exhausted, end() is called once and the iterator stops for good; an
 *       exception from source passes through (no ready stamp: the caller reads that as a
 *       failed next()). first(batch) is called on the first batch and its result served.
 *   replay_iter(batches, starts)  (starts: Stamps)
 *       each next(): starts.append(now); next(batches). The stamp is taken before asking,
 *       so an exhausted epoch holds one more stamp than batches (the last step's end).
 *   now() -> int: the clock, for the consistency check made at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>


/* -- Stamps: a growable array of int64 nanoseconds, read as a sequence of ints -------- */

typedef struct {
    PyObject_HEAD
    long long *v;
    Py_ssize_t n;
    Py_ssize_t cap;
} Stamps;

static PyTypeObject StampsType;

static inline int
stamps_push(Stamps *self)
{
    if (self->n == self->cap) {
        Py_ssize_t cap = self->cap ? self->cap * 2 : 256;
        long long *v = PyMem_Realloc(self->v, (size_t)cap * sizeof(long long));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->v = v;
        self->cap = cap;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    self->v[self->n++] = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return 0;
}

static PyObject *
stamps_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Stamps() takes no arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, ":Stamps"))
        return NULL;
    return type->tp_alloc(type, 0);
}

static void
stamps_dealloc(Stamps *self)
{
    PyMem_Free(self->v);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
stamps_len(Stamps *self)
{
    return self->n;
}

static PyObject *
stamps_item(Stamps *self, Py_ssize_t i)
{
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "stamp index out of range");
        return NULL;
    }
    return PyLong_FromLongLong(self->v[i]);
}

static PyObject *
stamps_subscript(Stamps *self, PyObject *key)
{
    if (PyIndex_Check(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred())
            return NULL;
        if (i < 0)
            i += self->n;
        return stamps_item(self, i);
    }
    if (PySlice_Check(key)) { /* a slice is a list of ints */
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0)
            return NULL;
        Py_ssize_t len = PySlice_AdjustIndices(self->n, &start, &stop, step);
        PyObject *out = PyList_New(len);
        if (out == NULL)
            return NULL;
        for (Py_ssize_t k = 0, i = start; k < len; k++, i += step) {
            PyObject *x = PyLong_FromLongLong(self->v[i]);
            if (x == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(out, k, x);
        }
        return out;
    }
    PyErr_Format(PyExc_TypeError, "stamp indices must be integers or slices, not %.200s",
                 Py_TYPE(key)->tp_name);
    return NULL;
}

static PyObject *
stamps_append(Stamps *self, PyObject *x)
{
    long long t = PyLong_AsLongLong(x);
    if (t == -1 && PyErr_Occurred())
        return NULL;
    if (stamps_push(self) < 0)
        return NULL;
    self->v[self->n - 1] = t;
    Py_RETURN_NONE;
}

static PyObject *
stamps_tolist(Stamps *self, PyObject *unused)
{
    PyObject *all = PySlice_New(NULL, NULL, NULL);
    if (all == NULL)
        return NULL;
    PyObject *out = stamps_subscript(self, all);
    Py_DECREF(all);
    return out;
}

static PyObject *
stamps_from(PyObject *module, PyObject *values)
{
    PyObject *self = PyObject_CallNoArgs((PyObject *)&StampsType);
    if (self == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(values);
    if (it == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject *x;
    while ((x = PyIter_Next(it)) != NULL) {
        PyObject *r = stamps_append((Stamps *)self, x);
        Py_DECREF(x);
        if (r == NULL) {
            Py_DECREF(it);
            Py_DECREF(self);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

static PyObject *
stamps_reduce(Stamps *self, PyObject *unused)
{
    /* pickled and copied as stamps_from(list): a run's records can cross processes */
    PyObject *mod = PyImport_ImportModule("loadeval_nb.core.measure._cstamp");
    if (mod == NULL)
        return NULL;
    PyObject *from = PyObject_GetAttrString(mod, "stamps_from");
    Py_DECREF(mod);
    if (from == NULL)
        return NULL;
    PyObject *values = stamps_tolist(self, NULL);
    if (values == NULL) {
        Py_DECREF(from);
        return NULL;
    }
    return Py_BuildValue("N(N)", from, values);
}

static PyObject *
stamps_repr(Stamps *self)
{
    return PyUnicode_FromFormat("<Stamps: %zd>", self->n);
}

static PySequenceMethods stamps_as_sequence = {
    .sq_length = (lenfunc)stamps_len,
    .sq_item = (ssizeargfunc)stamps_item,
};

static PyMappingMethods stamps_as_mapping = {
    .mp_length = (lenfunc)stamps_len,
    .mp_subscript = (binaryfunc)stamps_subscript,
};

static PyMethodDef stamps_methods[] = {
    {"append", (PyCFunction)stamps_append, METH_O, "Append a stamp (integer ns)."},
    {"tolist", (PyCFunction)stamps_tolist, METH_NOARGS, "The stamps as a list of ints."},
    {"__reduce__", (PyCFunction)stamps_reduce, METH_NOARGS, "Pickled as a list."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StampsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadeval_nb.core.measure._cstamp.Stamps",
    .tp_basicsize = sizeof(Stamps),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Clock stamps in integer nanoseconds, 8 bytes each (read like a list of ints).",
    .tp_new = stamps_new,
    .tp_dealloc = (destructor)stamps_dealloc,
    .tp_repr = (reprfunc)stamps_repr,
    .tp_as_sequence = &stamps_as_sequence,
    .tp_as_mapping = &stamps_as_mapping,
    .tp_methods = stamps_methods,
};

static inline PyObject *
stamp(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}


/* -- log_iter ---------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *source; /* NULL once exhausted */
    PyObject *starts;
    PyObject *ready;
    PyObject *end;
    PyObject *first;
} LogIter;

static int
log_traverse(LogIter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->source);
    Py_VISIT(self->starts);
    Py_VISIT(self->ready);
    Py_VISIT(self->end);
    Py_VISIT(self->first);
    return 0;
}

static int
log_clear(LogIter *self)
{
    Py_CLEAR(self->source);
    Py_CLEAR(self->starts);
    Py_CLEAR(self->ready);
    Py_CLEAR(self->end);
    Py_CLEAR(self->first);
    return 0;
}

static void
log_dealloc(LogIter *self)
{
    PyObject_GC_UnTrack(self);
    log_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
log_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source", "starts", "ready", "end", "first", NULL};
    PyObject *source, *starts, *ready, *end, *first = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O|O:log_iter", kwlist, &source,
                                     &StampsType, &starts, &StampsType, &ready, &end, &first))
        return NULL;
    PyObject *it = PyObject_GetIter(source);
    if (it == NULL)
        return NULL;
    LogIter *self = (LogIter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    self->source = it;
    Py_INCREF(starts);
    self->starts = starts;
    Py_INCREF(ready);
    self->ready = ready;
    Py_INCREF(end);
    self->end = end;
    if (first != Py_None) {
        Py_INCREF(first);
        self->first = first;
    }
    return (PyObject *)self;
}

static PyObject *
log_next(LogIter *self)
{
    PyObject *source = self->source;
    if (source == NULL)
        return NULL;
    if (stamps_push((Stamps *)self->starts) < 0)
        return NULL;
    PyObject *batch = Py_TYPE(source)->tp_iternext(source);
    if (batch == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_StopIteration))
                return NULL; /* the source failed: pass its exception on */
            PyErr_Clear();
        }
        self->source = NULL; /* exhausted: drop the source, close the epoch once */
        Py_DECREF(source);
        PyObject *end = self->end;
        self->end = NULL;
        PyObject *r = PyObject_CallNoArgs(end);
        Py_DECREF(end);
        Py_XDECREF(r);
        return NULL;
    }
    if (stamps_push((Stamps *)self->ready) < 0) {
        Py_DECREF(batch);
        return NULL;
    }
    if (self->first != NULL) {
        PyObject *first = self->first;
        self->first = NULL;
        PyObject *r = PyObject_CallOneArg(first, batch);
        Py_DECREF(first);
        Py_DECREF(batch);
        return r;
    }
    return batch;
}

static PyTypeObject LogIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadeval_nb.core.measure._cstamp.log_iter",
    .tp_basicsize = sizeof(LogIter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Stamp before and after each next() of source (see the module's comment).",
    .tp_new = log_new,
    .tp_dealloc = (destructor)log_dealloc,
    .tp_traverse = (traverseproc)log_traverse,
    .tp_clear = (inquiry)log_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)log_next,
};

/* -- replay_iter ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *batches; /* an iterator; NULL once exhausted */
    PyObject *starts;
} ReplayIter;

static int
replay_traverse(ReplayIter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->batches);
    Py_VISIT(self->starts);
    return 0;
}

static int
replay_clear(ReplayIter *self)
{
    Py_CLEAR(self->batches);
    Py_CLEAR(self->starts);
    return 0;
}

static void
replay_dealloc(ReplayIter *self)
{
    PyObject_GC_UnTrack(self);
    replay_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
replay_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"batches", "starts", NULL};
    PyObject *batches, *starts;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!:replay_iter", kwlist, &batches,
                                     &StampsType, &starts))
        return NULL;
    PyObject *it = PyObject_GetIter(batches);
    if (it == NULL)
        return NULL;
    ReplayIter *self = (ReplayIter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    self->batches = it;
    Py_INCREF(starts);
    self->starts = starts;
    return (PyObject *)self;
}

static PyObject *
replay_next(ReplayIter *self)
{
    PyObject *batches = self->batches;
    if (batches == NULL)
        return NULL;
    if (stamps_push((Stamps *)self->starts) < 0)
        return NULL;
    PyObject *batch = Py_TYPE(batches)->tp_iternext(batches);
    if (batch == NULL) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_StopIteration))
            return NULL;
        PyErr_Clear();
        self->batches = NULL; /* the batch list (and the guard riding on it) goes now */
        Py_DECREF(batches);
    }
    return batch;
}

static PyTypeObject ReplayIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadeval_nb.core.measure._cstamp.replay_iter",
    .tp_basicsize = sizeof(ReplayIter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Stamp before each next() of batches (see the module's comment).",
    .tp_new = replay_new,
    .tp_dealloc = (destructor)replay_dealloc,
    .tp_traverse = (traverseproc)replay_traverse,
    .tp_clear = (inquiry)replay_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)replay_next,
};

/* -- module ------------------------------------------------------------------------ */

static PyObject *
now(PyObject *module, PyObject *unused)
{
    return stamp();
}

static PyMethodDef methods[] = {
    {"now", now, METH_NOARGS, "CLOCK_MONOTONIC in integer nanoseconds."},
    {"stamps_from", stamps_from, METH_O, "Stamps holding the ints of an iterable."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cstamp", "The per-step path of LoaderEvaluator in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__cstamp(void)
{
    if (PyType_Ready(&LogIterType) < 0 || PyType_Ready(&ReplayIterType) < 0 ||
        PyType_Ready(&StampsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LogIterType);
    if (PyModule_AddObject(m, "log_iter", (PyObject *)&LogIterType) < 0) {
        Py_DECREF(&LogIterType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&StampsType);
    if (PyModule_AddObject(m, "Stamps", (PyObject *)&StampsType) < 0) {
        Py_DECREF(&StampsType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ReplayIterType);
    if (PyModule_AddObject(m, "replay_iter", (PyObject *)&ReplayIterType) < 0) {
        Py_DECREF(&ReplayIterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
