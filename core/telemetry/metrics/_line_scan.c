/* metrics.jsonl lines of a known template, read straight into numbers, without the GIL.

Contract (the Python side, core/telemetry/metrics/line_templates.py, is the only caller):

    scan(block, lo, hi, templates, kinds, starts, values, flags) -> (lines, numbers, next)

- ``block`` is a bytes-like object; the lines are ``block[lo:hi]`` split at
  b"\n" (``hi`` is the end of the last line, without its newline). Lines are
  scanned in order until the last one, or until ``kinds``/``starts`` are full
  or ``values``/``flags`` cannot take the next line's numbers.
- ``templates`` is a tuple of templates, each a tuple of n >= 1 byte strings,
  all but the first and the last non-empty. A line matches template t when it
  is exactly seg[0] N seg[1] N ... seg[n-1], each N a JSON number (RFC 8259's
  grammar), one of the literals NaN, Infinity, -Infinity that Python's json
  module reads, or null. An integer of more than 15 digits, or a number of more than 63
  bytes, matches nothing (the caller's general decoder takes such lines).
- For line i: ``kinds[i]`` (int32) is the index of a template it matches, or
  -1. Tried in turn: the last template matched; the templates whose skeleton
  is the line's (a hash of its bytes with each number or null that is the
  value of a top-level member replaced by one mark, found by a table built per
  call: the cost of a line does not grow with the templates); with at most
  :c:macro:`LINEAR_TEMPLATES` templates, every one. ``starts[i]`` (int64)
  is its offset in ``block``. A matching line's n - 1 numbers are appended to
  ``values`` (float64), each as ``json.loads`` reads it (correctly rounded,
  as ``float()`` is; null as NaN), and to ``flags`` (uint8): 1 for an integer,
  2 for null, else 0.
- Returns how many lines were scanned, how many numbers were appended, and
  where the next line starts (``hi + 1`` when every line was scanned): a
  caller whose buffers filled up calls again from there.
- Every read stays inside ``block[lo:hi]`` and every write inside the buffers,
  whose item sizes and lengths are checked first. The scan itself runs with the
  GIL released; the buffers are held for the call, so they cannot be resized.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKEN 63
#define LINEAR_TEMPLATES 16
#define SLOT_MARK 0xFF
#define FNV_OFFSET 1469598103934665603ULL
#define WORD_PRIME 0x9E3779B97F4A7C15ULL
#define MAX_INT_DIGITS 15

typedef struct {
    Py_ssize_t count;        /* segments */
    const char **data;       /* segment bytes */
    Py_ssize_t *size;        /* segment lengths */
    uint64_t skeleton;       /* the hash of its segments with a mark between them (see line_skeleton) */
} Template;

static locale_t c_locale = (locale_t)0;

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#if LDBL_MANT_DIG >= 64
static long double POW10L[28]; /* 10^0 .. 10^27, exact (5^27 < 2^64); filled when the module loads */
#endif

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A decimal number's value when one exact or provably correctly rounded operation gives it (1), else 0 (the
   caller asks strtod). The digits are [digits, int_end) and [fraction, fraction + fraction_digits); the exponent's
   digits start at exponent (NULL: none; a sign is just before them) and end at end.

   - Clinger's fast path: a significand of at most 15 digits and a power of ten up to 10^22 are both exact
     doubles, and one IEEE operation on them is correctly rounded.
   - With an x87-style long double (64-bit significand): a significand of at most 19 digits and a power of ten
     up to 10^27 are exact long doubles, so one operation gives the value rounded once to 64 bits. Rounding
     that to 53 bits is the correct rounding of the exact value unless it landed exactly on the midpoint of
     two doubles (rounding is monotonic and the midpoint is a long double): that case goes to strtod. */
static int convert(int negative, const char *digits, const char *int_end, const char *fraction,
                   Py_ssize_t fraction_digits, const char *exponent, const char *end, double *value) {
    uint64_t mantissa = 0;
    int significant = 0;
    for (const char *q = digits; q < int_end; q++) {
        if (significant == 0 && *q == '0') continue;
        if (++significant > 19) return 0;
        mantissa = mantissa * 10 + (uint64_t)(*q - '0');
    }
    for (Py_ssize_t i = 0; i < fraction_digits; i++) {
        char c = fraction[i];
        if (significant == 0 && c == '0') continue;
        if (++significant > 19) return 0;
        mantissa = mantissa * 10 + (uint64_t)(c - '0');
    }
    long e10 = -(long)fraction_digits;
    if (exponent != NULL) {
        if (end - exponent > 4) return 0;
        long e = 0;
        for (const char *q = exponent; q < end; q++) e = e * 10 + (*q - '0');
        e10 += exponent[-1] == '-' ? -e : e;
    }
    if (mantissa == 0) {
        *value = negative ? -0.0 : 0.0;
        return 1;
    }
    if (significant <= 15 && e10 >= -22 && e10 <= 22) {
        double v = e10 < 0 ? (double)mantissa / POW10[-e10] : (double)mantissa * POW10[e10];
        *value = negative ? -v : v;
        return 1;
    }
#if LDBL_MANT_DIG >= 64
    if (e10 >= -27 && e10 <= 27) {
        long double scale = POW10L[e10 < 0 ? -e10 : e10];
        long double wide = e10 < 0 ? (long double)mantissa / scale : (long double)mantissa * scale;
        double v = (double)wide;
        if ((long double)v != wide) {
            double next = nextafter(v, wide > (long double)v ? HUGE_VAL : -HUGE_VAL);
            if (wide == ((long double)v + (long double)next) / 2.0L) return 0;
        }
        *value = negative ? -v : v;
        return 1;
    }
#endif
    return 0;
}

/* One number at p (end: the line's end). Returns the position after it, or NULL when none is there. */
static const char *number(const char *p, const char *end, double *value, unsigned char *is_int) {
    const char *start = p;
    int negative = 0;
    if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
        *value = NAN;
        *is_int = 2;
        return p + 4;
    }
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p < end && *p == 'I') {
        if (end - p < 8 || memcmp(p, "Infinity", 8) != 0) return NULL;
        *value = negative ? -HUGE_VAL : HUGE_VAL;
        *is_int = 0;
        return p + 8;
    }
    if (p < end && *p == 'N') {
        if (negative || end - p < 3 || memcmp(p, "NaN", 3) != 0) return NULL;
        *value = NAN;
        *is_int = 0;
        return p + 3;
    }
    /* int part: 0 | [1-9][0-9]* */
    const char *digits = p;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p)) p++;
    } else {
        return NULL;
    }
    Py_ssize_t int_digits = p - digits;
    const char *fraction = NULL;
    Py_ssize_t fraction_digits = 0;
    int has_exponent = 0;
    if (p < end && *p == '.') {
        p++;
        fraction = p;
        while (p < end && is_digit(*p)) p++;
        fraction_digits = p - fraction;
        if (fraction_digits == 0) return NULL;
    }
    const char *exponent = NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        exponent = p;
        while (p < end && is_digit(*p)) p++;
        if (p == exponent) return NULL;
        has_exponent = 1;
    }
    if (p - start > MAX_TOKEN) return NULL;
    if (fraction == NULL && !has_exponent) { /* an integer: exact when it has at most 15 digits */
        if (int_digits > MAX_INT_DIGITS) return NULL;
        int64_t n = 0;
        for (const char *q = digits; q < digits + int_digits; q++) n = n * 10 + (*q - '0');
        *value = (double)(negative ? -n : n);
        *is_int = 1;
        return p;
    }
    *is_int = 0;
    double v;
    if (!convert(negative, digits, digits + int_digits, fraction, fraction_digits, exponent, p, &v)) {
        char buffer[MAX_TOKEN + 1];
        memcpy(buffer, start, (size_t)(p - start));
        buffer[p - start] = '\0';
        char *stop = NULL;
        v = strtod_l(buffer, &stop, c_locale);
        if (stop != buffer + (p - start)) return NULL;
    }
    *value = v;
    return p;
}

/* The skeleton hash: the bytes taken eight at a time into one 64-bit word, each full word folded into the state
   with one multiply (a byte-at-a-time FNV was a multiply per byte, the scan's largest cost on lines no last
   template matches). Lines and templates feed it the same byte sequence, so they hash alike. */
typedef struct {
    uint64_t h, word;
    unsigned n;
} Hash;

static inline void fold(Hash *s, uint64_t word) {
    s->h = (s->h ^ word) * WORD_PRIME;
    s->h ^= s->h >> 32;
}

static inline void mix(Hash *s, unsigned char c) {
    s->word |= (uint64_t)c << (8 * s->n);
    if (++s->n == 8) {
        fold(s, s->word);
        s->word = 0;
        s->n = 0;
    }
}

/* n bytes at p, as n calls of mix() would take them (whole words at once while the word is empty). */
static inline void mix_bytes(Hash *s, const char *p, Py_ssize_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n > 0 && s->n) {
        mix(s, (unsigned char)*p++);
        n--;
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* little-endian: byte i lands at bits 8i, as mix() puts it */
        fold(s, word);
    }
#endif
    while (n-- > 0) mix(s, (unsigned char)*p++);
}

static inline uint64_t hash_done(const Hash *s) {
    uint64_t h = (s->h ^ s->word ^ ((uint64_t)s->n << 59)) * WORD_PRIME;
    return h ^ (h >> 29);
}

static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The hash of a line's skeleton: its bytes, with each token that is the value of a top-level member and starts
   like a number or null (one of -0123456789NIn) replaced by SLOT_MARK. Strings (with their escapes) and nested
   values are bytes of the skeleton. A template whose slots are exactly those values has the same hash; any
   other line or template just misses (match() decides, never the hash). */
static uint64_t line_skeleton(const char *p, const char *end) {
    Hash h = {FNV_OFFSET, 0, 0};
    int depth = 0, in_string = 0;
    char previous = 0; /* the last byte outside a string that is not whitespace */
    while (p < end) {
        char c = *p;
        if (in_string) {
            const char *run = p; /* the string's plain bytes up to its quote or next escape, hashed at once */
            while (run < end && *run != '"' && *run != '\\') run++;
            if (run > p) {
                mix_bytes(&h, p, run - p);
                p = run;
                continue;
            }
            mix(&h, (unsigned char)c);
            if (c == '\\' && p + 1 < end) {
                p++;
                mix(&h, (unsigned char)*p);
            } else if (c == '"') {
                in_string = 0;
                previous = c;
            }
            p++;
            continue;
        }
        if (depth == 1 && previous == ':' && (c == '-' || is_digit(c) || c == 'N' || c == 'I' || c == 'n')) {
            while (p < end && *p != ',' && *p != '}' && !is_space(*p)) p++;
            mix(&h, SLOT_MARK);
            previous = '0';
            continue;
        }
        if (c == '"') in_string = 1;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        if (!is_space(c)) previous = c;
        mix(&h, (unsigned char)c);
        p++;
    }
    return hash_done(&h);
}

static uint64_t template_skeleton(const Template *t) {
    Hash h = {FNV_OFFSET, 0, 0};
    for (Py_ssize_t i = 0; i < t->count; i++) {
        mix_bytes(&h, t->data[i], t->size[i]);
        if (i + 1 < t->count) mix(&h, SLOT_MARK);
    }
    return hash_done(&h);
}

/* Open addressing over the templates' skeletons: slots hold template index + 1 (0: empty). */
typedef struct {
    int32_t *slots;
    uint64_t mask;
} Index;

static int build_index(Index *index, const Template *parsed, Py_ssize_t count) {
    uint64_t size = 16;
    while (size < (uint64_t)count * 2) size <<= 1;
    index->slots = PyMem_Calloc((size_t)size, sizeof(int32_t));
    if (index->slots == NULL) return 0;
    index->mask = size - 1;
    for (Py_ssize_t t = 0; t < count; t++) {
        uint64_t at = parsed[t].skeleton & index->mask;
        while (index->slots[at]) at = (at + 1) & index->mask;
        index->slots[at] = (int32_t)t + 1;
    }
    return 1;
}

/* Line [p, end) against one template; its numbers written to values/flags. 1 when it matches. */
static int match(const char *p, const char *end, const Template *t, double *values, unsigned char *flags) {
    for (Py_ssize_t i = 0; i < t->count; i++) {
        Py_ssize_t size = t->size[i];
        if (end - p < size || memcmp(p, t->data[i], (size_t)size) != 0) return 0;
        p += size;
        if (i + 1 < t->count) {
            p = number(p, end, &values[i], &flags[i]);
            if (p == NULL) return 0;
        }
    }
    return p == end;
}

static int checked(Py_buffer *view, Py_ssize_t itemsize, const char *name) {
    if (view->itemsize != itemsize || view->len % itemsize != 0 || !PyBuffer_IsContiguous(view, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: a C-contiguous buffer of %zd-byte items is needed", name, itemsize);
        return 0;
    }
    return 1;
}

static void free_templates(Template *parsed, Py_ssize_t count) {
    if (parsed == NULL) return;
    for (Py_ssize_t t = 0; t < count; t++) {
        PyMem_Free(parsed[t].data);
        PyMem_Free(parsed[t].size);
    }
    PyMem_Free(parsed);
}

/* The templates as C arrays (their bytes stay owned by the tuple, which the caller holds). NULL on error. */
static Template *parse_templates(PyObject *templates, Py_ssize_t count) {
    Template *parsed = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Template));
    if (parsed == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t t = 0; t < count; t++) {
        PyObject *segments = PyTuple_GET_ITEM(templates, t);
        if (!PyTuple_Check(segments) || PyTuple_GET_SIZE(segments) < 1) {
            PyErr_SetString(PyExc_ValueError, "a template is a non-empty tuple of byte strings");
            goto fail;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(segments);
        parsed[t].count = n;
        parsed[t].data = PyMem_Calloc((size_t)n, sizeof(char *));
        parsed[t].size = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
        if (parsed[t].data == NULL || parsed[t].size == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *segment = PyTuple_GET_ITEM(segments, i);
            if (!PyBytes_Check(segment) || (i > 0 && i + 1 < n && PyBytes_GET_SIZE(segment) == 0)) {
                PyErr_SetString(PyExc_ValueError, "a template segment is not bytes, or an inner one is empty");
                goto fail;
            }
            parsed[t].data[i] = PyBytes_AS_STRING(segment);
            parsed[t].size[i] = PyBytes_GET_SIZE(segment);
        }
        parsed[t].skeleton = template_skeleton(&parsed[t]);
    }
    return parsed;
fail:
    free_templates(parsed, count);
    return NULL;
}

/* Template t against a line: its index when it matches (its numbers appended, written advanced), else -1; full
   set when the buffers cannot take its numbers. */
static int32_t try_template(const char *line, const char *end, const Template *parsed, Py_ssize_t t, Py_ssize_t room,
                            Py_ssize_t *written, double *value_out, unsigned char *flag_out, int *full) {
    if (parsed[t].count - 1 > room - *written) {
        *full = 1;
        return -1;
    }
    if (!match(line, end, &parsed[t], value_out + *written, flag_out + *written)) return -1;
    *written += parsed[t].count - 1;
    return (int32_t)t;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block = {0}, kinds = {0}, starts = {0}, values = {0}, flags = {0};
    Py_ssize_t lo, hi;
    PyObject *templates;
    Template *parsed = NULL;
    Index index = {NULL, 0};
    Py_ssize_t ntemplates = 0, scanned = 0, written = 0, next = 0;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*nnO!w*w*w*w*", &block, &lo, &hi, &PyTuple_Type, &templates, &kinds, &starts,
                          &values, &flags))
        return NULL;
    if (lo < 0 || hi < lo || hi > block.len) {
        PyErr_SetString(PyExc_ValueError, "lo/hi outside the block");
        goto done;
    }
    if (!checked(&kinds, 4, "kinds") || !checked(&starts, 8, "starts") || !checked(&values, 8, "values") ||
        !checked(&flags, 1, "flags"))
        goto done;
    ntemplates = PyTuple_GET_SIZE(templates);
    if (ntemplates > INT32_MAX - 1) {
        PyErr_SetString(PyExc_ValueError, "too many templates");
        goto done;
    }
    parsed = parse_templates(templates, ntemplates);
    if (parsed == NULL) goto done;
    if (!build_index(&index, parsed, ntemplates)) {
        PyErr_NoMemory();
        goto done;
    }
    {
        const char *base = (const char *)block.buf;
        int32_t *kind_out = (int32_t *)kinds.buf;
        int64_t *start_out = (int64_t *)starts.buf;
        double *value_out = (double *)values.buf;
        unsigned char *flag_out = (unsigned char *)flags.buf;
        Py_ssize_t lines = kinds.len / 4 < starts.len / 8 ? kinds.len / 4 : starts.len / 8;
        Py_ssize_t room = values.len / 8 < flags.len ? values.len / 8 : flags.len;
        Py_ssize_t pos = lo;
        Py_BEGIN_ALLOW_THREADS;
        Py_ssize_t last = 0;
        int misses = 0; /* lines in a row whose template was not the line before's (at most 2) */
        while (scanned < lines) {
            const char *line = base + pos;
            const char *newline = memchr(line, '\n', (size_t)(hi - pos));
            const char *end = newline ? newline : base + hi;
            int32_t kind = -1;
            int full = 0;
            if (ntemplates > 0) {
                /* the last template first, unless two lines in a row had another: lines that change shape line
                   after line (a phase per rank) then go straight to their skeleton */
                Py_ssize_t tried = misses < 2 ? last : -1;
                if (tried >= 0) kind = try_template(line, end, parsed, last, room, &written, value_out, flag_out, &full);
                if (kind < 0 && !full) {
                    uint64_t skeleton = line_skeleton(line, end);
                    for (uint64_t at = skeleton & index.mask; index.slots[at] && kind < 0 && !full;
                         at = (at + 1) & index.mask) {
                        Py_ssize_t t = index.slots[at] - 1;
                        if (t != tried && parsed[t].skeleton == skeleton)
                            kind = try_template(line, end, parsed, t, room, &written, value_out, flag_out, &full);
                    }
                }
                for (Py_ssize_t t = 0; kind < 0 && !full && ntemplates <= LINEAR_TEMPLATES && t < ntemplates; t++)
                    if (t != tried) kind = try_template(line, end, parsed, t, room, &written, value_out, flag_out, &full);
                misses = kind >= 0 && kind == last ? 0 : misses < 2 ? misses + 1 : 2;
                if (kind >= 0) last = kind;
            }
            if (full) break;
            kind_out[scanned] = kind;
            start_out[scanned] = (int64_t)pos;
            scanned++;
            pos = (end - base) + 1;
            if (newline == NULL) break;
        }
        next = pos;
        Py_END_ALLOW_THREADS;
    }
    result = Py_BuildValue("nnn", scanned, written, next);
done:
    PyMem_Free(index.slots);
    free_templates(parsed, ntemplates);
    PyBuffer_Release(&block);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&values);
    PyBuffer_Release(&flags);
    return result;
}

/* skeletons(block, hi, starts, out): out[i] (uint64) = the skeleton hash of the line of block[:hi] that starts at
   starts[i] (int64), to tell which unmatched lines share a shape. */
static PyObject *skeletons(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block = {0}, starts = {0}, out = {0};
    Py_ssize_t hi;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*ny*w*", &block, &hi, &starts, &out)) return NULL;
    if (hi < 0 || hi > block.len) {
        PyErr_SetString(PyExc_ValueError, "hi outside the block");
        goto done;
    }
    if (!checked(&starts, 8, "starts") || !checked(&out, 8, "out")) goto done;
    if (out.len < starts.len) {
        PyErr_SetString(PyExc_ValueError, "out is shorter than starts");
        goto done;
    }
    {
        const char *base = (const char *)block.buf;
        const int64_t *start_in = (const int64_t *)starts.buf;
        uint64_t *hash_out = (uint64_t *)out.buf;
        Py_ssize_t n = starts.len / 8;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (start_in[i] < 0 || start_in[i] > hi) {
                PyErr_SetString(PyExc_ValueError, "a start outside the block");
                goto done;
            }
        }
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *line = base + start_in[i];
            const char *newline = memchr(line, '\n', (size_t)(base + hi - line));
            hash_out[i] = line_skeleton(line, newline ? newline : base + hi);
        }
        Py_END_ALLOW_THREADS;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&block);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Scan metrics.jsonl lines of known templates into numbers (see the source)."},
    {"skeletons", skeletons, METH_VARARGS, "Skeleton hashes of lines (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_line_scan", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__line_scan(void) {
    if (c_locale == (locale_t)0) {
        c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (c_locale == (locale_t)0) {
            PyErr_SetString(PyExc_ImportError, "no C locale for number parsing");
            return NULL;
        }
    }
#if LDBL_MANT_DIG >= 64
    POW10L[0] = 1.0L;
    for (int i = 1; i < 28; i++) POW10L[i] = POW10L[i - 1] * 10.0L;
#endif
    return PyModule_Create(&module);
}
