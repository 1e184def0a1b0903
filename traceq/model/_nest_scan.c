/* The per-thread range tree walk of traceq.model.nesting._nest_containers, in C.
 *
 * nest(ids, kinds, starts, ends, threads, tolerance) takes five equally long int64 buffers (kinds: 0 op,
 * 1 other op-tree range, 2 annotation), rows sorted by thread, then start, longest first, and returns
 * seven bytes objects of int64 values: container_parent, parent_id, depth, op_id, top_op_id, leaf_parent,
 * leaf_depth, with INT64_MIN where the Python walk gives None. The Python walk is the reference; both
 * are tested to give the same columns.
 *
 * climb(cand, ts, end, ids, c_end, c_parent, tolerance) moves each call (start ts, end end) from its
 * candidate range (cand, an id of ids) up through c_parent until a range contains it, as
 * traceq.model.nesting._place_leaves does with repeated joins; returns the new candidates (INT64_MIN for
 * none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE INT64_MIN

enum { OP = 0, OTHER = 1, ANNOTATION = 2 };

typedef struct {
    int64_t end, id, tree_parent, tree_depth, near, outer, note;
} Frame;

enum { CPARENT, PARENT, DEPTH, OP_ID, TOP_OP, LEAF_PARENT, LEAF_DEPTH, N_OUT };

static int walk(Py_ssize_t n, const int64_t *ids, const int64_t *kinds, const int64_t *starts, const int64_t *ends,
                const int64_t *threads, int64_t tol, int64_t **out) {
    Frame *stack = NULL;
    Py_ssize_t depth = 0, cap = 0;
    int64_t current = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || threads[i] != current) {
            depth = 0;
            current = threads[i];
        }
        int64_t start = starts[i], end = ends[i], eid = ids[i];
        while (depth && (stack[depth - 1].end <= start || end > stack[depth - 1].end + tol)) depth--;
        int64_t tree_parent = NONE, tree_depth = 0, near = NONE, outer = NONE, note = NONE;
        out[CPARENT][i] = NONE;
        if (depth) {
            const Frame *top = &stack[depth - 1];
            out[CPARENT][i] = top->id;
            tree_parent = top->tree_parent;
            tree_depth = top->tree_depth;
            near = top->near;
            outer = top->outer;
            note = top->note;
        }
        if (depth == cap) {
            cap = cap ? cap * 2 : 64;
            Frame *grown = realloc(stack, (size_t)cap * sizeof *stack);
            if (!grown) {
                free(stack);
                return 0;
            }
            stack = grown;
        }
        Frame *push = &stack[depth++];
        if (kinds[i] == ANNOTATION) {
            note = eid;
            out[PARENT][i] = NONE;
            out[DEPTH][i] = 0;
            out[OP_ID][i] = near != NONE ? near : eid;
            out[TOP_OP][i] = outer != NONE ? outer : eid;
            out[LEAF_PARENT][i] = tree_parent;
            out[LEAF_DEPTH][i] = tree_depth;
            *push = (Frame){end, eid, tree_parent, tree_depth, near, outer, note};
            continue;
        }
        if (kinds[i] == OP) {
            near = eid;
            if (outer == NONE) outer = eid;
        }
        out[PARENT][i] = tree_parent;
        out[DEPTH][i] = tree_depth;
        out[OP_ID][i] = near != NONE ? near : note;
        out[TOP_OP][i] = outer != NONE ? outer : note;
        out[LEAF_PARENT][i] = eid;
        out[LEAF_DEPTH][i] = tree_depth + 1;
        *push = (Frame){end, eid, eid, tree_depth + 1, near, outer, note};
    }
    free(stack);
    return 1;
}

static PyObject *nest(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer in[5];
    long long tol;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*L", &in[0], &in[1], &in[2], &in[3], &in[4], &tol)) return NULL;
    PyObject *result = NULL, *outs[N_OUT] = {0};
    Py_ssize_t n = in[0].len / 8;
    for (int k = 0; k < 5; k++) {
        if (in[k].len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "nest: buffers of different lengths");
            goto done;
        }
    }
    int64_t *out[N_OUT];
    for (int k = 0; k < N_OUT; k++) {
        outs[k] = PyBytes_FromStringAndSize(NULL, n * 8);
        if (!outs[k]) goto done;
        out[k] = (int64_t *)PyBytes_AS_STRING(outs[k]);
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    ok = walk(n, in[0].buf, in[1].buf, in[2].buf, in[3].buf, in[4].buf, (int64_t)tol, out);
    Py_END_ALLOW_THREADS;
    if (!ok) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyTuple_New(N_OUT);
    for (int k = 0; result && k < N_OUT; k++) {
        PyTuple_SET_ITEM(result, k, outs[k]);
        outs[k] = NULL;
    }
done:
    for (int k = 0; k < N_OUT; k++) Py_XDECREF(outs[k]);
    for (int k = 0; k < 5; k++) PyBuffer_Release(&in[k]);
    return result;
}

static PyObject *climb(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer in[6];
    long long tol;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*L", &in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &tol)) return NULL;
    PyObject *out = NULL;
    int64_t *index = NULL;
    Py_ssize_t n = in[0].len / 8, m = in[3].len / 8;
    if (in[1].len != n * 8 || in[2].len != n * 8 || in[4].len != m * 8 || in[5].len != m * 8) {
        PyErr_SetString(PyExc_ValueError, "climb: buffers of different lengths");
        goto done;
    }
    const int64_t *cand = in[0].buf, *ts = in[1].buf, *end = in[2].buf, *ids = in[3].buf, *c_end = in[4].buf,
                  *c_parent = in[5].buf;
    int64_t max_id = -1;
    for (Py_ssize_t k = 0; k < m; k++) {
        if (ids[k] < 0) {
            PyErr_SetString(PyExc_ValueError, "climb: negative range id");
            goto done;
        }
        if (ids[k] > max_id) max_id = ids[k];
    }
    index = malloc((size_t)(max_id + 1) * sizeof *index);
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!index || !out) {
        Py_CLEAR(out);
        PyErr_NoMemory();
        goto done;
    }
    int64_t *got = (int64_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS;
    for (int64_t k = 0; k <= max_id; k++) index[k] = -1;
    for (Py_ssize_t k = 0; k < m; k++) index[ids[k]] = k;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c = cand[i];
        for (Py_ssize_t guard = 0; c != NONE && guard <= m; guard++) {
            int64_t k = c >= 0 && c <= max_id ? index[c] : -1;
            if (k < 0 || !(c_end[k] <= ts[i] || end[i] > c_end[k] + (int64_t)tol)) break;
            c = c_parent[k];
        }
        got[i] = c;
    }
    Py_END_ALLOW_THREADS;
done:
    free(index);
    for (int k = 0; k < 6; k++) PyBuffer_Release(&in[k]);
    return out;
}

static PyMethodDef METHODS[] = {
    {"nest", nest, METH_VARARGS, "The range tree walk over sorted host ranges (see module doc)."},
    {"climb", climb, METH_VARARGS, "Move calls up the range tree until a range contains them (see module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_nest_scan",
                                    "Native range nesting (optional; the Python walk is the reference).", -1, METHODS};

PyMODINIT_FUNC PyInit__nest_scan(void) { return PyModule_Create(&MODULE); }
