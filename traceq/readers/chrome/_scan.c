/* Chrome-trace events decoded straight into Arrow column buffers.
 *
 * decode(body) takes the bytes between the brackets of a trace's event array ("{...},{...},...") and
 * returns the same columns traceq.readers.chrome.decoder builds with msgspec, or None when the body holds
 * anything this scanner does not handle exactly the same way (invalid JSON or UTF-8, control characters
 * in strings, escaped keys, unusual value types). None sends the body to the Python path, which also
 * repairs broken input, so this module never has to guess.
 *
 * Result: (n_kept, columns, metadata_spans, skipped)
 *   columns: one tuple per column, in the order of traceq/readers/chrome/columns.py (the generated
 *   _scan_columns.h; the module's COLUMNS, KINDS and ARG_KEYS say what it was built with):
 *     string (and JSON text) / float64 / int64: (validity bits or None, null_count, data..)
 *     list<string>:             (validity, null_count, list offsets, child validity, child null_count,
 *                                child offsets, child data, child length)
 *   metadata_spans: [(start, end)] byte spans of ph="M" events, decoded by the caller.
 *   skipped: {"ph=<phase>" or "empty": count} for events of other phases.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "_scan_columns.h"

/* ---- growable buffers ------------------------------------------------------------------------- */

/* Plain malloc buffers, filled without the GIL and handed to Python without a copy (see Owned). */
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

static inline int buf_reserve(Buf *b, size_t extra) { return b->len + extra <= b->cap ? 1 : buf_grow(b, extra); }

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (!n) return 1;
    if (!buf_reserve(b, n)) return 0;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 1;
}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* A read-only Python buffer owning malloc'd memory: pyarrow wraps it without copying. */
typedef struct {
    PyObject_HEAD char *p;
    Py_ssize_t len;
} Owned;

static int owned_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Owned *o = (Owned *)self;
    return PyBuffer_FillInfo(view, self, o->p ? o->p : (char *)"", o->len, 1, flags);
}

static void owned_dealloc(PyObject *self) {
    free(((Owned *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs OWNED_BUFFER = {owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "traceq.readers.chrome._scan.Buffer",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &OWNED_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory of one decoded column buffer.",
};

/* The buffer's memory as a Python object; the buffer is left empty. */
static PyObject *buf_bytes(Buf *b) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->p = b->p;
    o->len = (Py_ssize_t)b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

/* ---- columns -------------------------------------------------------------------------------------- */

typedef struct {
    int kind;
    int64_t n, nulls;
    Buf valid, data, offs;
    /* list<string> child */
    int64_t child_n, child_nulls;
    Buf cvalid, cdata, coffs;
} Col;

static int bit_push(Buf *valid, int64_t i, int ok) {
    if ((i & 7) == 0) {
        char z = 0;
        if (!buf_put(valid, &z, 1)) return 0;
    }
    if (ok) valid->p[i >> 3] |= (char)(1 << (i & 7));
    return 1;
}

static int offs_init(Buf *offs) {
    int32_t z = 0;
    return offs->len ? 1 : buf_put(offs, &z, 4);
}

static int str_push(Col *c, const char *s, size_t n, int ok) {
    if (!offs_init(&c->offs) || !bit_push(&c->valid, c->n, ok)) return 0;
    if (ok && n && !buf_put(&c->data, s, n)) return 0;
    if (c->data.len > INT32_MAX) return 0;
    int32_t end = (int32_t)c->data.len;
    if (!buf_put(&c->offs, &end, 4)) return 0;
    c->nulls += !ok;
    c->n++;
    return 1;
}

static int num_push(Col *c, const void *v, int ok) {
    static const char zero[8] = {0};
    if (!bit_push(&c->valid, c->n, ok) || !buf_put(&c->data, ok ? v : zero, 8)) return 0;
    c->nulls += !ok;
    c->n++;
    return 1;
}

/* ---- scanning ------------------------------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
} Scan;

static inline void ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

/* A string at s->p (on the opening quote). Sets the span without quotes and whether it has escapes. */
static int hexval(const char *h) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = h[k];
        v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

static int hex4(const char *h) {
    for (int k = 0; k < 4; k++) {
        char c = h[k];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return 1;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* Whether any of 8 bytes is a quote, a backslash or a control character. */
static inline int special8(uint64_t w) {
    uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
    return (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w)) & HIGHS ? 1 : 0;
}

#ifdef __SSE2__
/* Offset of the first quote, backslash or control character in 16 bytes at p (16: none). */
static inline int special16(const char *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                               _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v));
    int mask = _mm_movemask_epi8(hit);
    return mask ? __builtin_ctz((unsigned)mask) : 16;
}
#endif

static int scan_string(Scan *s, const char **start, size_t *len, int *escaped) {
    const char *p = s->p + 1, *end = s->end;
    int esc = 0;
    *start = p;
    while (p < end) {
#ifdef __SSE2__
        if (end - p >= 16) {
            int k = special16(p);
            p += k;
            if (k == 16) continue;
        }
#endif
        if (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (!special8(w)) {
                p += 8;
                continue;
            }
        }
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            *len = (size_t)(p - *start);
            *escaped = esc;
            s->p = p + 1;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c == '\\') {
            esc = 1;
            if (p + 1 >= end) return 0;
            char e = p[1];
            if (e == 'u') {
                if (p + 6 > end || !hex4(p + 2)) return 0;
                int cp = hexval(p + 2);
                if (cp >= 0xDC00 && cp <= 0xDFFF) return 0; /* a low surrogate first: invalid, as msgspec says */
                if (cp >= 0xD800 && cp <= 0xDBFF) {         /* a high surrogate must be followed by a low one */
                    if (p + 12 > end || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8)) return 0;
                    int lo = hexval(p + 8);
                    if (lo < 0xDC00 || lo > 0xDFFF) return 0;
                    p += 6;
                }
                p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) return 0;
            p += 2;
            continue;
        }
        p++;
    }
    return 0;
}

/* Unescape a validated string span into out. Lone surrogates are refused (Python could not encode them). */
static int unescape(const char *s, size_t n, Buf *out) {
    const char *end = s + n;
    if (!buf_reserve(out, n)) return 0;
    while (s < end) {
        if (*s != '\\') {
            const char *q = memchr(s, '\\', (size_t)(end - s));
            if (!q) q = end;
            if (!buf_put(out, s, (size_t)(q - s))) return 0;
            s = q;
            continue;
        }
        char e = s[1];
        s += 2;
        char c;
        switch (e) {
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u': {
            uint32_t cp = (uint32_t)hexval(s);
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (s + 6 > end || s[0] != '\\' || s[1] != 'u') return 0;
                uint32_t lo = (uint32_t)hexval(s + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) return 0;
                s += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return 0;
            }
            char u[4];
            size_t k;
            if (cp < 0x80) {
                u[0] = (char)cp;
                k = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xC0 | (cp >> 6));
                u[1] = (char)(0x80 | (cp & 0x3F));
                k = 2;
            } else if (cp < 0x10000) {
                u[0] = (char)(0xE0 | (cp >> 12));
                u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[2] = (char)(0x80 | (cp & 0x3F));
                k = 3;
            } else {
                u[0] = (char)(0xF0 | (cp >> 18));
                u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[3] = (char)(0x80 | (cp & 0x3F));
                k = 4;
            }
            if (!buf_put(out, u, k)) return 0;
            continue;
        }
        default: c = e; /* " \ / */
        }
        if (!buf_put(out, &c, 1)) return 0;
    }
    return 1;
}

/* A JSON number at s->p; sets its span and whether it is an integer literal. */
static int scan_number(Scan *s, const char **start, size_t *len, int *is_int) {
    const char *p = s->p, *end = s->end;
    *start = p;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return 0;
    }
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == d) return 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == d) return 0;
    }
    *len = (size_t)(p - *start);
    s->p = p;
    return 1;
}

static int skip_value(Scan *s, int depth);

/* Object members: object_open (at '{') says whether the object is empty (and consumes it), object_key
 * reads `"key" :` (refusing escaped keys when asked), object_next reads what follows a value: 1 for
 * another member, 0 for the closing '}', -1 for anything else. */
static int object_open(Scan *s) {
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 1;
    }
    return 0;
}

static int object_key(Scan *s, const char **k, size_t *kl, int escaped_ok) {
    int esc;
    if (s->p >= s->end || *s->p != '"' || !scan_string(s, k, kl, &esc) || (esc && !escaped_ok)) return 0;
    ws(s);
    if (s->p >= s->end || *s->p != ':') return 0;
    s->p++;
    ws(s);
    return 1;
}

static int member_next(Scan *s, char close) {
    ws(s);
    if (s->p >= s->end) return -1;
    if (*s->p == ',') {
        s->p++;
        ws(s);
        return 1;
    }
    if (*s->p == close) {
        s->p++;
        return 0;
    }
    return -1;
}

static int skip_container(Scan *s, char close, int depth) {
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 1;
    }
    for (;;) {
        const char *k;
        size_t kl;
        if (close == '}' && !object_key(s, &k, &kl, 1)) return 0;
        if (!skip_value(s, depth + 1)) return 0;
        int next = member_next(s, close);
        if (next <= 0) return next == 0;
    }
}

static int skip_literal(Scan *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) return 0;
    s->p += n;
    return 1;
}

static int skip_value(Scan *s, int depth) {
    if (depth > 64 || s->p >= s->end) return 0;
    const char *a;
    size_t n;
    int f;
    switch (*s->p) {
    case '{': return skip_container(s, '}', depth);
    case '[': return skip_container(s, ']', depth);
    case '"': return scan_string(s, &a, &n, &f);
    case 't': return skip_literal(s, "true", 4);
    case 'f': return skip_literal(s, "false", 5);
    case 'n': return skip_literal(s, "null", 4);
    default: return scan_number(s, &a, &n, &f);
    }
}

/* ---- numbers ---------------------------------------------------------------------------------------- */

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Correctly rounded value of a validated number literal: exact fast path, else Python's own parser. */
static _Thread_local PyThreadState *NO_GIL_STATE; /* set while decode() runs without the GIL */

/* Past a literal's minus sign, if any. */
static const char *after_sign(const char *p, int *neg) {
    *neg = *p == '-';
    return p + *neg;
}

static int to_double(const char *s, size_t n, double *out) {
    const char *end = s + n;
    int neg;
    const char *p = after_sign(s, &neg);
    /* m / 10^frac is one correctly rounded division when m < 2^53 and 10^frac is exact (frac <= 22). */
    uint64_t m = 0;
    int digits = 0, frac = 0, simple = 1;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        m = m * 10 + (uint64_t)(*p - '0');
        if (m) digits++;
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            m = m * 10 + (uint64_t)(*p - '0');
            if (m) digits++;
            frac++;
        }
    }
    /* trailing fraction zeros (Kineto writes whole microseconds as 1669783689681788.0) change nothing */
    if (p == end && digits <= 19)
        for (; frac > 0 && m && m % 10 == 0; frac--, digits--) m /= 10;
    if (p != end || digits > 17 || frac > 22 || m > (1ULL << 53)) simple = 0;
    if (simple) {
        double v = (double)m / POW10[frac];
        *out = neg ? -v : v;
        return 1;
    }
    char tmp[80];
    if (n >= sizeof tmp) return 0;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    /* Python's parser (correctly rounded, locale-independent) needs the GIL: take it for this rare case. */
    PyEval_RestoreThread(NO_GIL_STATE);
    double v = PyOS_string_to_double(tmp, NULL, NULL);
    int ok = !(v == -1.0 && PyErr_Occurred()) && isfinite(v); /* msgspec refuses out-of-range numbers */
    PyErr_Clear();
    NO_GIL_STATE = PyEval_SaveThread();
    *out = v;
    return ok;
}

/* int64 of an integer literal; 0 when out of range. */
static int to_int64(const char *s, size_t n, int64_t *out) {
    const char *end = s + n;
    int neg;
    const char *p = after_sign(s, &neg);
    uint64_t m = 0;
    for (; p < end; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (m > (UINT64_MAX - d) / 10) return 0;
        m = m * 10 + d;
    }
    if (neg) {
        if (m > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - m);
    } else {
        if (m > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)m;
    }
    return 1;
}

/* ---- one event ---------------------------------------------------------------------------------------- */

enum { V_ABSENT = 0, V_NULL, V_STR, V_INT, V_FLOAT, V_OTHER };

typedef struct {
    int type, escaped;
    const char *s;
    size_t n;
} Val;

typedef struct {
    Val ph, cat, name, pid, tid, ts, dur, args;
    Val known[N_COLS]; /* indexed by column; only arg columns used */
} Event;

static int key_is(const char *k, size_t n, const char *word) { return strlen(word) == n && memcmp(k, word, n) == 0; }

/* A scalar value's type and span (strings without quotes); containers are skipped as V_OTHER. */
static int read_value(Scan *s, Val *v) {
    if (s->p >= s->end) return 0;
    const char *start = s->p;
    int is_int;
    switch (*s->p) {
    case '"':
        v->type = V_STR;
        return scan_string(s, &v->s, &v->n, &v->escaped);
    case 'n':
        v->type = V_NULL;
        return skip_literal(s, "null", 4);
    case '-':
    case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        if (!scan_number(s, &v->s, &v->n, &is_int)) return 0;
        v->type = is_int ? V_INT : V_FLOAT;
        return 1;
    default:
        if (!skip_value(s, 1)) return 0;
        v->type = V_OTHER;
        v->s = start;
        v->n = (size_t)(s->p - start);
        return 1;
    }
}

/* "Input type": a list of strings or nulls; anything else in the list is left to the Python path. */
static int check_input_type(const char *s, size_t n) {
    Scan t = {s + 1, s + n - 1};
    for (;;) {
        ws(&t);
        if (t.p >= t.end) return 1;
        Val v;
        if (!read_value(&t, &v) || (v.type != V_STR && v.type != V_NULL)) return 0;
        ws(&t);
        if (t.p < t.end && *t.p == ',') t.p++;
    }
}

static int read_args(Scan *s, Event *ev) {
    for (size_t k = 0; k < N_ARG_KEYS; k++) ev->known[ARG_KEYS[k].col].type = V_ABSENT;
    if (object_open(s)) return 1;
    for (;;) {
        const char *k;
        size_t kl;
        if (!object_key(s, &k, &kl, 0)) return 0;
        int col = -1;
        for (size_t j = 0; j < N_ARG_KEYS; j++) {
            if (ARG_KEYS[j].len == kl && memcmp(k, ARG_KEYS[j].key, kl) == 0) {
                col = ARG_KEYS[j].col;
                break;
            }
        }
        if (col < 0) {
            if (!skip_value(s, 2)) return 0;
        } else {
            const char *start = s->p;
            Val *v = &ev->known[col];
            if (!read_value(s, v)) return 0;
            if (KINDS[col] == K_JSON) {
                v->type = v->type == V_NULL ? V_NULL : V_OTHER; /* JSON text of the value; null is none */
                v->s = start;
                v->n = (size_t)(s->p - start);
            } else if (KINDS[col] == K_LIST && v->type == V_OTHER && *start == '[') {
                if (!check_input_type(v->s, v->n)) return 0;
            }
        }
        int next = member_next(s, '}');
        if (next <= 0) return next == 0;
    }
}

/* Whether a number typed as a float (ts, dur, pid, tid) is one: the reference refuses 1e999. Only
 * literals with an exponent or hundreds of digits can overflow, so only those are converted here. */
static int in_float_range(const Val *v) {
    if (v->n < 300 && !memchr(v->s, 'e', v->n) && !memchr(v->s, 'E', v->n)) return 1;
    double d;
    return to_double(v->s, v->n, &d);
}

/* Whether one occurrence of a field has a type the reference decoder (typed msgspec structs) accepts
 * there. Checked at every occurrence: with a key repeated, the reference refuses a bad earlier value. */
static int typed_as_the_reference(const Event *ev, const Val *v) {
    if (v == &ev->ph) return v->type == V_STR && !v->escaped;
    if (v == &ev->cat || v == &ev->name) return v->type == V_STR || v->type == V_NULL;
    if (v->type == V_INT || v->type == V_FLOAT) return in_float_range(v);
    if (v == &ev->pid || v == &ev->tid) return v->type != V_OTHER;
    return v->type == V_NULL; /* ts, dur */
}

static int read_event(Scan *s, Event *ev) {
    memset(ev, 0, offsetof(Event, known));
    for (size_t k = 0; k < N_ARG_KEYS; k++) ev->known[ARG_KEYS[k].col].type = V_ABSENT;
    if (s->p >= s->end || *s->p != '{') return 0;
    if (object_open(s)) return 1;
    for (;;) {
        const char *k;
        size_t kl;
        if (!object_key(s, &k, &kl, 0)) return 0;
        Val *slot = NULL;
        switch (kl) {
        case 2:
            if (k[0] == 'p' && k[1] == 'h') slot = &ev->ph;
            else if (k[0] == 't' && k[1] == 's') slot = &ev->ts;
            break;
        case 3:
            if (key_is(k, kl, "cat")) slot = &ev->cat;
            else if (key_is(k, kl, "pid")) slot = &ev->pid;
            else if (key_is(k, kl, "tid")) slot = &ev->tid;
            else if (key_is(k, kl, "dur")) slot = &ev->dur;
            break;
        case 4:
            if (key_is(k, kl, "name")) slot = &ev->name;
            else if (key_is(k, kl, "args")) slot = &ev->args;
            break;
        }
        if (slot == &ev->args) {
            const char *start = s->p;
            if (s->p < s->end && *s->p == '{') {
                if (!read_args(s, ev)) return 0;
            } else {
                for (size_t j = 0; j < N_ARG_KEYS; j++) ev->known[ARG_KEYS[j].col].type = V_ABSENT;
                if (!skip_value(s, 1)) return 0;
            }
            ev->args.type = V_OTHER;
            ev->args.s = start;
            ev->args.n = (size_t)(s->p - start);
        } else if (slot) {
            if (!read_value(s, slot) || !typed_as_the_reference(ev, slot)) return 0;
        } else if (!skip_value(s, 1)) {
            return 0;
        }
        int next = member_next(s, '}');
        if (next <= 0) return next == 0;
    }
}

/* ---- emitting --------------------------------------------------------------------------------------- */

typedef struct {
    Col cols[N_COLS];
    Buf scratch;
} Out;

static int emit_str(Out *o, int col, const Val *v) {
    Col *c = &o->cols[col];
    if (v->type != V_STR) return str_push(c, NULL, 0, 0);
    if (!v->escaped) return str_push(c, v->s, v->n, 1);
    o->scratch.len = 0;
    if (!unescape(v->s, v->n, &o->scratch)) return 0;
    return str_push(c, o->scratch.p, o->scratch.len, 1);
}

/* pid/tid as text, the way the Python path writes them: integers (and integral floats) in decimal. */
static int emit_id(Out *o, int col, const Val *v) {
    Col *c = &o->cols[col];
    char tmp[32];
    switch (v->type) {
    case V_ABSENT:
    case V_NULL: return str_push(c, NULL, 0, 0);
    case V_STR: return emit_str(o, col, v);
    case V_INT: /* a JSON integer has no leading zeros: its text is Python's str() of it, but for -0 */
        if (v->n > 18) return 0;
        if (v->n == 2 && v->s[0] == '-' && v->s[1] == '0') return str_push(c, "0", 1, 1);
        return str_push(c, v->s, v->n, 1);
    case V_FLOAT: {
        double d;
        if (!to_double(v->s, v->n, &d)) return 0;
        if (!(d > -9007199254740992.0 && d < 9007199254740992.0) || d != (double)(int64_t)d) return 0;
        int k = snprintf(tmp, sizeof tmp, "%lld", (long long)(int64_t)d);
        return str_push(c, tmp, (size_t)k, 1);
    }
    default: return 0;
    }
}

static int emit_f64(Out *o, int col, const Val *v) {
    double d = 0;
    if (v->type == V_INT || v->type == V_FLOAT) {
        if (!to_double(v->s, v->n, &d)) return 0;
        return num_push(&o->cols[col], &d, 1);
    }
    if (v->type == V_ABSENT || v->type == V_NULL) return num_push(&o->cols[col], &d, 0);
    return 0;
}

static int emit_i64(Out *o, int col, const Val *v) {
    int64_t i = 0;
    if (v->type == V_INT) {
        if (!to_int64(v->s, v->n, &i)) return 0;
        return num_push(&o->cols[col], &i, 1);
    }
    return num_push(&o->cols[col], &i, 0); /* absent, null or another type: the Python path drops it too */
}

static int emit_list(Out *o, int col, const Val *v) {
    Col *c = &o->cols[col];
    if (!offs_init(&c->offs)) return 0;
    int ok = v->type == V_OTHER && v->n && v->s[0] == '[';
    if (!bit_push(&c->valid, c->n, ok)) return 0;
    if (ok) {
        Scan t = {v->s + 1, v->s + v->n - 1};
        for (;;) {
            ws(&t);
            if (t.p >= t.end) break;
            Val e;
            if (!read_value(&t, &e)) return 0;
            if (!offs_init(&c->coffs) || !bit_push(&c->cvalid, c->child_n, e.type == V_STR)) return 0;
            if (e.type == V_STR) {
                o->scratch.len = 0;
                if (e.escaped ? !unescape(e.s, e.n, &o->scratch) : !buf_put(&o->scratch, e.s, e.n)) return 0;
                if (!buf_put(&c->cdata, o->scratch.p, o->scratch.len)) return 0;
            } else {
                c->child_nulls++;
            }
            if (c->cdata.len > INT32_MAX) return 0;
            int32_t end = (int32_t)c->cdata.len;
            if (!buf_put(&c->coffs, &end, 4)) return 0;
            c->child_n++;
            ws(&t);
            if (t.p < t.end && *t.p == ',') t.p++;
        }
    }
    int32_t end = (int32_t)c->child_n;
    if (!buf_put(&c->offs, &end, 4)) return 0;
    c->nulls += !ok;
    c->n++;
    return 1;
}

static int emit(Out *o, const Event *ev) {
    static const Val X = {V_STR, 0, "X", 1}, I = {V_STR, 0, "i", 1};
    int ok = emit_str(o, COL_ph, ev->ph.s[0] == 'X' ? &X : &I) && emit_str(o, COL_cat, &ev->cat) &&
             emit_str(o, COL_name, &ev->name) && emit_id(o, COL_pid_raw, &ev->pid) &&
             emit_id(o, COL_tid_raw, &ev->tid) && emit_f64(o, COL_ts_us, &ev->ts) && emit_f64(o, COL_dur_us, &ev->dur);
    if (!ok) return 0;
    if (ev->args.type == V_ABSENT) {
        if (!str_push(&o->cols[COL_args], "{}", 2, 1)) return 0;
    } else if (!str_push(&o->cols[COL_args], ev->args.s, ev->args.n, 1)) {
        return 0;
    }
    for (int col = FIRST_ARG_COL; col < N_COLS; col++) {
        const Val *v = &ev->known[col];
        switch (KINDS[col]) {
        case K_I64: ok = emit_i64(o, col, v); break;
        case K_LIST: ok = emit_list(o, col, v); break;
        case K_JSON:
            ok = v->type == V_OTHER ? str_push(&o->cols[col], v->s, v->n, 1) : str_push(&o->cols[col], NULL, 0, 0);
            break;
        default: ok = emit_str(o, col, v);
        }
        if (!ok) return 0;
    }
    return 1;
}

/* ---- UTF-8 ------------------------------------------------------------------------------------------ */

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + k >= n) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* ---- the module function ---------------------------------------------------------------------------- */

static void out_free(Out *o) {
    for (int i = 0; i < N_COLS; i++) {
        Col *c = &o->cols[i];
        buf_free(&c->valid);
        buf_free(&c->data);
        buf_free(&c->offs);
        buf_free(&c->cvalid);
        buf_free(&c->cdata);
        buf_free(&c->coffs);
    }
    buf_free(&o->scratch);
}

static PyObject *validity(Buf *b, int64_t nulls) {
    if (!nulls) Py_RETURN_NONE;
    return buf_bytes(b);
}

static PyObject *column_tuple(Col *c) {
    switch (c->kind) {
    case K_STR:
    case K_JSON:
        offs_init(&c->offs);
        return Py_BuildValue("(NLNN)", validity(&c->valid, c->nulls), (long long)c->nulls, buf_bytes(&c->offs),
                             buf_bytes(&c->data));
    case K_LIST:
        offs_init(&c->offs);
        offs_init(&c->coffs);
        return Py_BuildValue("(NLNNLNNL)", validity(&c->valid, c->nulls), (long long)c->nulls, buf_bytes(&c->offs),
                             validity(&c->cvalid, c->child_nulls), (long long)c->child_nulls, buf_bytes(&c->coffs),
                             buf_bytes(&c->cdata), (long long)c->child_n);
    default:
        return Py_BuildValue("(NLN)", validity(&c->valid, c->nulls), (long long)c->nulls, buf_bytes(&c->data));
    }
}

/* Spans (start, end) of events this scan hands back: ph="M" events, and events of other phases whose
 * phase is not one ASCII character (counted by the caller). */
static int span_put(Buf *b, const char *base, const char *start, const char *end) {
    Py_ssize_t v[2] = {(Py_ssize_t)(start - base), (Py_ssize_t)(end - base)};
    return buf_put(b, v, sizeof v);
}

static PyObject *span_list(const Buf *b) {
    Py_ssize_t n = (Py_ssize_t)(b->len / (2 * sizeof(Py_ssize_t)));
    const Py_ssize_t *v = (const Py_ssize_t *)b->p;
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(nn)", v[2 * i], v[2 * i + 1]);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

enum { SCAN_OK, SCAN_UNSUPPORTED, SCAN_NOMEM };

typedef struct {
    int64_t kept;
    long long by_byte[128]; /* skipped events by their one-character phase; [0] is a missing or empty one */
    Buf meta, odd;          /* spans of ph="M" events and of events with longer phases */
} Scanned;

/* The whole scan, run without the GIL. */
static int scan_events(const char *base, size_t len, Out *o, Scanned *r) {
    if (!valid_utf8((const unsigned char *)base, len)) return SCAN_UNSUPPORTED;
    Scan s = {base, base + len};
    Event ev;
    ws(&s);
    while (s.p < s.end) {
        const char *start = s.p;
        if (!read_event(&s, &ev)) return SCAN_UNSUPPORTED;
        char ph = ev.ph.n == 1 ? ev.ph.s[0] : 0;
        if (ph == 'X' || ph == 'i' || ph == 'I') {
            if (!emit(o, &ev)) return SCAN_UNSUPPORTED;
            r->kept++;
        } else if (ph == 'M') {
            if (!span_put(&r->meta, base, start, s.p)) return SCAN_NOMEM;
        } else if (ev.ph.n <= 1 && (unsigned char)ph < 0x80) {
            r->by_byte[(unsigned char)ph]++;
        } else if (!span_put(&r->odd, base, ev.ph.s, ev.ph.s + ev.ph.n)) {
            return SCAN_NOMEM;
        }
        ws(&s);
        if (s.p < s.end) {
            if (*s.p != ',') return SCAN_UNSUPPORTED;
            s.p++;
            ws(&s);
            if (s.p >= s.end) return SCAN_UNSUPPORTED; /* a trailing comma */
        }
    }
    return SCAN_OK;
}

static int count(PyObject *skipped, PyObject *key) {
    if (!key) return 0;
    PyObject *old = PyDict_GetItemWithError(skipped, key);
    long long n = old ? PyLong_AsLongLong(old) + 1 : 1;
    PyObject *val = PyLong_FromLongLong(n);
    int r = val ? PyDict_SetItem(skipped, key, val) : -1;
    Py_XDECREF(val);
    Py_DECREF(key);
    return r == 0;
}

static PyObject *skipped_counts(const Scanned *r, const char *base) {
    PyObject *skipped = PyDict_New();
    if (!skipped) return NULL;
    for (int b = 0; b < 128; b++) {
        if (!r->by_byte[b]) continue;
        char key[4] = {'p', 'h', '=', (char)b};
        PyObject *k = b ? PyUnicode_FromStringAndSize(key, 4) : PyUnicode_FromString("empty");
        PyObject *v = PyLong_FromLongLong(r->by_byte[b]);
        int ok = k && v && PyDict_SetItem(skipped, k, v) == 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (!ok) goto error;
    }
    const Py_ssize_t *v = (const Py_ssize_t *)r->odd.p;
    for (size_t i = 0; i < r->odd.len / (2 * sizeof(Py_ssize_t)); i++) {
        PyObject *ph = PyUnicode_DecodeUTF8(base + v[2 * i], v[2 * i + 1] - v[2 * i], "strict");
        PyObject *key = ph ? PyUnicode_FromFormat("ph=%U", ph) : NULL;
        Py_XDECREF(ph);
        if (!count(skipped, key)) goto error;
    }
    return skipped;
error:
    Py_DECREF(skipped);
    return NULL;
}

static PyObject *decode(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *base = view.buf;
    Out o;
    Scanned r;
    memset(&o, 0, sizeof o);
    memset(&r, 0, sizeof r);
    for (int i = 0; i < N_COLS; i++) o.cols[i].kind = KINDS[i];
    NO_GIL_STATE = PyEval_SaveThread();
    int status = scan_events(base, (size_t)view.len, &o, &r);
    PyEval_RestoreThread(NO_GIL_STATE);
    NO_GIL_STATE = NULL;
    PyObject *result = NULL, *cols = NULL, *meta = NULL, *skipped = NULL;
    if (status == SCAN_NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == SCAN_UNSUPPORTED) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    cols = PyTuple_New(N_COLS);
    if (!cols) goto done;
    for (int i = 0; i < N_COLS; i++) {
        PyObject *t = column_tuple(&o.cols[i]);
        if (!t) goto done;
        PyTuple_SET_ITEM(cols, i, t);
    }
    meta = span_list(&r.meta);
    skipped = meta ? skipped_counts(&r, base) : NULL;
    if (skipped) result = Py_BuildValue("(LOOO)", (long long)r.kept, cols, meta, skipped);
done:
    Py_XDECREF(cols);
    Py_XDECREF(meta);
    Py_XDECREF(skipped);
    out_free(&o);
    buf_free(&r.meta);
    buf_free(&r.odd);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"decode", decode, METH_O, "Decode chrome-trace events into Arrow column buffers, or None (see module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_scan",
                                    "Native chrome-trace event decoder (optional; the msgspec path is the reference).",
                                    -1, METHODS};

/* The columns the module was built with (columns.py, through the generated header): (name, ...). */
static PyObject *built_columns(void) {
    PyObject *names = PyTuple_New(N_COLS), *kinds = names ? PyTuple_New(N_COLS) : NULL;
    PyObject *keys = kinds ? PyTuple_New((Py_ssize_t)N_ARG_KEYS) : NULL;
    for (Py_ssize_t i = 0; keys && i < N_COLS; i++) {
        PyTuple_SET_ITEM(names, i, PyUnicode_FromString(COLUMN_NAMES[i]));
        PyTuple_SET_ITEM(kinds, i, PyUnicode_FromString(KIND_NAMES[KINDS[i]]));
    }
    for (size_t j = 0; keys && j < N_ARG_KEYS; j++)
        PyTuple_SET_ITEM(keys, (Py_ssize_t)j, Py_BuildValue("(ss)", ARG_KEYS[j].key, COLUMN_NAMES[ARG_KEYS[j].col]));
    PyObject *all = (keys && !PyErr_Occurred()) ? Py_BuildValue("(OOO)", names, kinds, keys) : NULL;
    Py_XDECREF(names);
    Py_XDECREF(kinds);
    Py_XDECREF(keys);
    return all;
}

PyMODINIT_FUNC PyInit__scan(void) {
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    PyObject *module = PyModule_Create(&MODULE), *built = module ? built_columns() : NULL;
    if (!built || PyModule_AddObject(module, "COLUMNS", Py_NewRef(PyTuple_GET_ITEM(built, 0))) < 0 ||
        PyModule_AddObject(module, "KINDS", Py_NewRef(PyTuple_GET_ITEM(built, 1))) < 0 ||
        PyModule_AddObject(module, "ARG_KEYS", Py_NewRef(PyTuple_GET_ITEM(built, 2))) < 0) {
        Py_XDECREF(built);
        Py_XDECREF(module);
        return NULL;
    }
    Py_DECREF(built);
    return module;
}
