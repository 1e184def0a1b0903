/* The visit of traceq.analysis.replay.engine.replay, in C: GPU events and waits in the graph's loop order.
 *
 * walk(order, items, barriers, base, start, end, off) takes contiguous buffers (int64 "q", float64 "d",
 * bytes "B"), all checked for length and every index for range before the visit:
 *
 *   order     q  the loop order: item i as i >= 0, barrier b as -b - 1
 *   items     a tuple of nine, one value per GPU event:
 *               launch_thread q (-1: no captured launch), launch_base d, launch_epoch q, fixed d,
 *               lane q, d d, gap d (-inf: none), dep q (-1: none), dep_gap d; and dropped B (0 or 1)
 *   barriers  a tuple of nine, one value per wait:
 *               position q (among the enabled ones; -1: disabled), type q (0 thread, 1 gpu_end,
 *               2 gpu_start), target q, post d, thread q, C d (at its node), target_C d, target_thread q,
 *               target_epoch q
 *   base      q  each thread's first position among the enabled waits, and their number last
 *   start, end (d, one per GPU event) and off (d, one per enabled wait) are written.
 *
 * The Python loop in engine.py is the reference; both are tested to give the same times, bit for bit (the
 * same operations on doubles in the same order).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { I_LTH, I_LBASE, I_LEP, I_FIXED, I_LANE, I_D, I_GAP, I_DEP, I_DEPGAP, I_DROPPED, N_ITEMS };
enum { B_POS, B_TYPE, B_TARGET, B_POST, B_THREAD, B_C, B_TC, B_TTH, B_TEP, N_BARRIERS };
enum { THREAD_WAIT = 0, GPU_END = 1, GPU_START = 2 };

static const char ITEM_KINDS[N_ITEMS] = {'q', 'd', 'q', 'd', 'q', 'd', 'd', 'q', 'd', 'B'};
static const char BARRIER_KINDS[N_BARRIERS] = {'q', 'q', 'q', 'd', 'q', 'd', 'd', 'q', 'q'};

static Py_ssize_t item_size(char kind) { return kind == 'B' ? 1 : 8; }

/* Take n buffers from a tuple, each of `count` elements of its kind (count < 0: take the first's). */
static int take(PyObject *tuple, Py_buffer *views, int n, const char *kinds, Py_ssize_t *count, int writable) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != n) {
        PyErr_Format(PyExc_ValueError, "walk: expected a tuple of %d buffers", n);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(tuple, k), &views[k], writable ? PyBUF_WRITABLE : PyBUF_SIMPLE)) {
            for (int j = 0; j < k; j++) PyBuffer_Release(&views[j]);
            return 0;
        }
        Py_ssize_t size = item_size(kinds[k]);
        if (*count < 0 && views[k].len % size == 0) *count = views[k].len / size;
        if (views[k].len != *count * size) {
            PyErr_Format(PyExc_ValueError, "walk: buffer %d of %d has %zd bytes, not %zd", k, n, views[k].len,
                         *count * size);
            for (int j = 0; j <= k; j++) PyBuffer_Release(&views[j]);
            return 0;
        }
    }
    return 1;
}

static int within(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v < hi; }

/* Every index the visit follows is in range (else a ValueError names the first that is not). */
static int check(Py_ssize_t n_order, const int64_t *order, Py_ssize_t n, Py_buffer *it, Py_ssize_t nb,
                 Py_buffer *bv, Py_ssize_t n_threads, const int64_t *base, Py_ssize_t n_off, int64_t n_lanes) {
    const int64_t *lth = it[I_LTH].buf, *lep = it[I_LEP].buf, *lane = it[I_LANE].buf, *dep = it[I_DEP].buf;
    const int64_t *pos = bv[B_POS].buf, *type = bv[B_TYPE].buf, *target = bv[B_TARGET].buf, *th = bv[B_THREAD].buf,
                  *tth = bv[B_TTH].buf, *tep = bv[B_TEP].buf;
    const char *what = NULL;
    for (Py_ssize_t k = 0; k < n_order && !what; k++)
        if (order[k] >= n || order[k] < -(int64_t)nb) what = "order";
    for (Py_ssize_t t = 0; t < n_threads && !what; t++)
        if (base[t] < 0 || base[t] > base[t + 1]) what = "base";
    if (!what && base[n_threads] != n_off) what = "base";
    for (Py_ssize_t i = 0; i < n && !what; i++) {
        if (!within(lane[i], 0, n_lanes)) what = "lane";
        else if (lth[i] >= 0 && (!within(lth[i], 0, n_threads) || !within(lep[i], 0, n_off + 1))) what = "launch";
        else if (dep[i] >= n || dep[i] < -1) what = "dep";
    }
    for (Py_ssize_t b = 0; b < nb && !what; b++) {
        if (pos[b] < 0) continue;
        if (!within(th[b], 0, n_threads) || !within(pos[b], base[th[b]], base[th[b] + 1])) what = "barrier position";
        else if (type[b] == THREAD_WAIT) {
            if (!within(tth[b], 0, n_threads) || !within(tep[b], 0, n_off + 1)) what = "barrier target";
        } else if (type[b] != GPU_END && type[b] != GPU_START) what = "barrier type";
        else if (!within(target[b], 0, n)) what = "barrier target";
    }
    if (what) PyErr_Format(PyExc_ValueError, "walk: %s out of range", what);
    return what == NULL;
}

typedef struct {
    const int64_t *base;
    const int64_t *done;
    const double *off;
} Offsets;

/* A thread's offset at an epoch: that of its last wait visited before the epoch (none: 0). */
static inline double off_at(const Offsets *o, int64_t t, int64_t ep) {
    int64_t reached = o->base[t] + o->done[t];
    int64_t k = (ep < reached ? ep : reached) - 1;
    return k >= o->base[t] ? o->off[k] : 0.0;
}

static int visit(Py_ssize_t n_order, const int64_t *order, Py_buffer *it, Py_buffer *bv, Py_ssize_t n_threads,
                 const int64_t *base, int64_t n_lanes, double *start, double *end, double *off) {
    const int64_t *lth = it[I_LTH].buf, *lep = it[I_LEP].buf, *lane = it[I_LANE].buf, *dep = it[I_DEP].buf;
    const double *lbase = it[I_LBASE].buf, *fixed = it[I_FIXED].buf, *d = it[I_D].buf, *gap = it[I_GAP].buf,
                 *dep_gap = it[I_DEPGAP].buf;
    const unsigned char *dropped = it[I_DROPPED].buf;
    const int64_t *pos = bv[B_POS].buf, *type = bv[B_TYPE].buf, *target = bv[B_TARGET].buf, *th = bv[B_THREAD].buf,
                  *tth = bv[B_TTH].buf, *tep = bv[B_TEP].buf;
    const double *post = bv[B_POST].buf, *bC = bv[B_C].buf, *tC = bv[B_TC].buf;
    double *lane_end = malloc((size_t)(n_lanes > 0 ? n_lanes : 1) * sizeof *lane_end);
    int64_t *done = calloc((size_t)n_threads + 1, sizeof *done);
    if (!lane_end || !done) {
        free(lane_end);
        free(done);
        return 0;
    }
    for (int64_t k = 0; k < n_lanes; k++) lane_end[k] = -INFINITY;
    Offsets o = {base, done, off};
    for (Py_ssize_t k = 0; k < n_order; k++) {
        int64_t code = order[k];
        if (code >= 0) {
            int64_t i = code;
            if (dropped[i]) {
                double le = lane_end[lane[i]];
                start[i] = end[i] = le != -INFINITY ? le : fixed[i];
                continue;
            }
            double a = lth[i] >= 0 ? lbase[i] + off_at(&o, lth[i], lep[i]) : fixed[i];
            int64_t m = dep[i];
            if (m >= 0 && end[m] + dep_gap[i] > a) a = end[m] + dep_gap[i];
            double le = lane_end[lane[i]] + gap[i];
            double s = a > le ? a : le;
            start[i] = s;
            end[i] = s + d[i];
            lane_end[lane[i]] = end[i];
            continue;
        }
        int64_t b = -code - 1, p = pos[b];
        if (p < 0) continue;
        int64_t t = th[b];
        if (base[t] + done[t] >= base[t + 1]) {  /* more waits visited than the thread has */
            free(lane_end);
            free(done);
            return -1;
        }
        double B;
        if (type[b] == THREAD_WAIT) B = tC[b] + off_at(&o, tth[b], tep[b]) + post[b];
        else if (type[b] == GPU_END) B = end[target[b]] + post[b];
        else B = start[target[b]] + post[b];
        double prev = p > base[t] ? off[p - 1] : 0.0;
        double cand = B - bC[b];
        off[p] = cand > prev ? cand : prev;
        done[t] += 1;
    }
    free(lane_end);
    free(done);
    return 1;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *barriers, *outs;
    Py_buffer order, base, it[N_ITEMS], bv[N_BARRIERS], out[3];
    if (!PyArg_ParseTuple(args, "y*OOy*O", &order, &items, &barriers, &base, &outs)) return NULL;
    PyObject *result = NULL;
    int have_items = 0, have_barriers = 0, have_outs = 0;
    Py_ssize_t n = -1, nb = -1, n_off = -1, n_order = order.len / 8, n_threads = base.len / 8 - 1;
    if (order.len % 8 || base.len % 8 || n_threads < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: order and base must be int64 buffers, base not empty");
        goto done;
    }
    if (!(have_items = take(items, it, N_ITEMS, ITEM_KINDS, &n, 0))) goto done;
    if (!(have_barriers = take(barriers, bv, N_BARRIERS, BARRIER_KINDS, &nb, 0))) goto done;
    if (!PyTuple_Check(outs) || PyTuple_GET_SIZE(outs) != 3) {
        PyErr_SetString(PyExc_ValueError, "walk: expected (start, end, off)");
        goto done;
    }
    {
        PyObject *pair = PyTuple_GetSlice(outs, 0, 2), *last = PyTuple_GetSlice(outs, 2, 3);
        static const char D2[2] = {'d', 'd'};
        have_outs = pair && last && take(pair, out, 2, D2, &n, 1);
        if (have_outs && !take(last, out + 2, 1, D2, &n_off, 1)) {
            PyBuffer_Release(&out[0]);
            PyBuffer_Release(&out[1]);
            have_outs = 0;
        }
        Py_XDECREF(pair);
        Py_XDECREF(last);
        if (!have_outs) goto done;
    }
    const int64_t *lanes = it[I_LANE].buf;
    int64_t n_lanes = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lanes[i] + 1 > n_lanes) n_lanes = lanes[i] + 1;
    if (!check(n_order, order.buf, n, it, nb, bv, n_threads, base.buf, n_off, n_lanes)) goto done;
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    ok = visit(n_order, order.buf, it, bv, n_threads, base.buf, n_lanes, out[0].buf, out[1].buf, out[2].buf);
    Py_END_ALLOW_THREADS;
    if (ok == 0) PyErr_NoMemory();
    else if (ok < 0) PyErr_SetString(PyExc_ValueError, "walk: a thread has more enabled waits than its base says");
    else result = Py_NewRef(Py_None);
done:
    if (have_outs)
        for (int k = 0; k < 3; k++) PyBuffer_Release(&out[k]);
    if (have_barriers)
        for (int k = 0; k < N_BARRIERS; k++) PyBuffer_Release(&bv[k]);
    if (have_items)
        for (int k = 0; k < N_ITEMS; k++) PyBuffer_Release(&it[k]);
    PyBuffer_Release(&order);
    PyBuffer_Release(&base);
    return result;
}

static PyMethodDef METHODS[] = {
    {"walk", walk, METH_VARARGS, "The replay's visit of GPU events and waits in loop order (see module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_replay_walk",
                                    "Native replay visit (optional; the Python loop is the reference).", -1, METHODS};

PyMODINIT_FUNC PyInit__replay_walk(void) { return PyModule_Create(&MODULE); }
