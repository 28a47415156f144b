/* Eclat on packed bit-columns: the compiled kernel of ppdm.mining.kernel.
 *
 * Zaki, "Scalable algorithms for association mining", IEEE TKDE 12(3), 2000: a depth-first
 * search over prefix equivalence classes on the vertical layout; the tid-set of P + {x, y}
 * is the intersection of the tid-sets of P + {x} and P + {y}. Tid-sets are bit-columns of
 * uint64 words; at every prefix only the words that are non-zero in the prefix's column
 * are kept for its children (tid-set shrinking, which makes sparse data cheap).
 *
 * Input: the bit-columns of the m frequent items (m rows of w words, in the search order),
 * their support counts, the count threshold and the longest itemset to report. Output: the
 * frequent itemsets as a forest in depth-first order -- three parallel arrays parent
 * (index of the itemset one item shorter, -1 for single items), item (row of the last
 * item) and count -- returned as bytes objects the Python side views with numpy. No
 * Python object is built per itemset and the GIL is released while mining.
 *
 * Plain C and the CPython buffer protocol only (no numpy headers), so the extension builds
 * with setuptools alone; ppdm falls back to the numpy Eclat when it is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *parent;
    int32_t *item;
    int64_t *count;
    size_t n, cap;
    int failed;
} forest_t;

static int64_t emit(forest_t *f, int32_t parent, int32_t item, int64_t count)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4096;
        int32_t *p = realloc(f->parent, cap * sizeof(int32_t));
        if (p) f->parent = p;
        int32_t *it = realloc(f->item, cap * sizeof(int32_t));
        if (it) f->item = it;
        int64_t *c = realloc(f->count, cap * sizeof(int64_t));
        if (c) f->count = c;
        if (!p || !it || !c || cap > (size_t)INT32_MAX) {
            f->failed = 1;
            return -1;
        }
        f->cap = cap;
    }
    f->parent[f->n] = parent;
    f->item[f->n] = item;
    f->count[f->n] = count;
    return (int64_t)f->n++;
}

/* Popcount of a & b over w words, the AND written to out. */
__attribute__((target_clones("popcnt", "default")))
static int64_t and_count(const uint64_t *a, const uint64_t *b, uint64_t *out, size_t w)
{
    int64_t c = 0;
    for (size_t i = 0; i < w; i++) {
        uint64_t x = a[i] & b[i];
        out[i] = x;
        c += __builtin_popcountll(x);
    }
    return c;
}

/* Popcount of a & b over the words idx[0..w) of b (a is already compacted). */
__attribute__((target_clones("popcnt", "default")))
static int64_t and_count_gather(const uint64_t *a, const uint64_t *b, const uint32_t *idx,
                                uint64_t *out, size_t w)
{
    int64_t c = 0;
    for (size_t i = 0; i < w; i++) {
        uint64_t x = a[i] & b[idx[i]];
        out[i] = x;
        c += __builtin_popcountll(x);
    }
    return c;
}

/* Counts of all pairs of the m items over CSR rows of item rows (each row's entries
 * distinct; entries < 0 are ignored): pairs[a * m + b] for a < b. The classic first pass
 * of Eclat implementations: a pair whose count is below the threshold is never
 * intersected, which is what makes sparse data with many frequent items cheap. */
static void count_pairs(const int64_t *indptr, const int64_t *rows, size_t n, size_t m,
                        int32_t *pairs, int32_t *buf)
{
    for (size_t t = 0; t < n; t++) {
        size_t len = 0;
        for (int64_t e = indptr[t]; e < indptr[t + 1]; e++)
            if (rows[e] >= 0) buf[len++] = (int32_t)rows[e];
        for (size_t a = 0; a < len; a++)
            for (size_t b = 0; b < len; b++)
                if (buf[a] < buf[b]) pairs[(size_t)buf[a] * m + (size_t)buf[b]]++;
    }
}

/* The class of a prefix: k rows of w words, their item rows and counts. */
static void mine(forest_t *f, int32_t pnode, const uint64_t *bits, size_t w,
                 const int32_t *ids, const int64_t *cnts, size_t k, int64_t minc,
                 int depth, int max_len, const int32_t *pairs)
{
    if (k == 0 || f->failed) return;
    uint32_t *nz = malloc((w ? w : 1) * sizeof(uint32_t));
    uint64_t *row = malloc((w ? w : 1) * sizeof(uint64_t));
    uint64_t *child = malloc(((k - 1) * w + 1) * sizeof(uint64_t));
    int32_t *cids = malloc(k * sizeof(int32_t));
    int64_t *ccnt = malloc(k * sizeof(int64_t));
    if (!nz || !row || !child || !cids || !ccnt) {
        f->failed = 1;
        goto done;
    }
    for (size_t i = 0; i < k; i++) {
        int64_t node = emit(f, pnode, ids[i], cnts[i]);
        if (node < 0) goto done;
        if (i + 1 == k || depth + 1 >= max_len) continue;
        const uint64_t *pr = bits + i * w;
        size_t nnz = 0;
        for (size_t t = 0; t < w; t++)
            if (pr[t]) {
                nz[nnz] = (uint32_t)t;
                row[nnz] = pr[t];
                nnz++;
            }
        size_t kc = 0;
        if (nnz * 4 < w * 3) { /* shrink: the children keep the prefix's non-zero words */
            for (size_t j = i + 1; j < k; j++) {
                if (pairs && pairs[i * k + j] < minc) continue;
                int64_t c = and_count_gather(row, bits + j * w, nz, child + kc * nnz, nnz);
                if (c >= minc) {
                    cids[kc] = ids[j];
                    ccnt[kc] = c;
                    kc++;
                }
            }
            mine(f, (int32_t)node, child, nnz, cids, ccnt, kc, minc, depth + 1, max_len, NULL);
        } else {
            for (size_t j = i + 1; j < k; j++) {
                if (pairs && pairs[i * k + j] < minc) continue;
                int64_t c = and_count(pr, bits + j * w, child + kc * w, w);
                if (c >= minc) {
                    cids[kc] = ids[j];
                    ccnt[kc] = c;
                    kc++;
                }
            }
            mine(f, (int32_t)node, child, w, cids, ccnt, kc, minc, depth + 1, max_len, NULL);
        }
        if (f->failed) goto done;
    }
done:
    free(nz);
    free(row);
    free(child);
    free(cids);
    free(ccnt);
}

static PyObject *eclat_forest(PyObject *self, PyObject *args)
{
    Py_buffer bits, counts, indptr, rows;
    Py_ssize_t m, w, n;
    long long minc;
    int max_len, use_pairs;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*nnLiy*y*np", &bits, &counts, &m, &w, &minc, &max_len,
                          &indptr, &rows, &n, &use_pairs))
        return NULL;
    PyObject *result = NULL;
    int32_t *pairs = NULL, *buf = NULL;
    if (m < 0 || w < 0 || n < 0 || bits.len != m * w * 8 || counts.len != m * 8 || minc < 1
        || max_len < 1 || m > INT32_MAX || indptr.len != (n + 1) * 8
        || (n > 0 && rows.len != ((const int64_t *)indptr.buf)[n] * 8)) {
        PyErr_SetString(PyExc_ValueError, "eclat_forest: inconsistent array sizes");
        goto out;
    }
    forest_t f = {0};
    int32_t *ids = malloc((m ? m : 1) * sizeof(int32_t));
    if (!ids) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < m; i++) ids[i] = (int32_t)i;
    if (use_pairs && m > 1 && max_len > 1) {
        pairs = calloc((size_t)m * (size_t)m, sizeof(int32_t));
        buf = malloc((size_t)m * sizeof(int32_t));
        if (!pairs || !buf) {
            free(pairs);
            pairs = NULL;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    if (pairs)
        count_pairs((const int64_t *)indptr.buf, (const int64_t *)rows.buf, (size_t)n,
                    (size_t)m, pairs, buf);
    mine(&f, -1, (const uint64_t *)bits.buf, (size_t)w, ids, (const int64_t *)counts.buf,
         (size_t)m, (int64_t)minc, 0, max_len, pairs);
    Py_END_ALLOW_THREADS
    free(ids);
    free(pairs);
    free(buf);
    if (f.failed) {
        PyErr_NoMemory();
    } else {
        static const char empty[1] = {0};
        result = Py_BuildValue("(y#y#y#)", f.n ? (const char *)f.parent : empty,
                               (Py_ssize_t)(f.n * 4), f.n ? (const char *)f.item : empty,
                               (Py_ssize_t)(f.n * 4), f.n ? (const char *)f.count : empty,
                               (Py_ssize_t)(f.n * 8));
    }
    free(f.parent);
    free(f.item);
    free(f.count);
out:
    PyBuffer_Release(&bits);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&indptr);
    PyBuffer_Release(&rows);
    return result;
}

/* Bit-columns of the m items from CSR rows of item rows (-1 = not among them):
 * m rows of ceil(n / 64) words, bit t % 64 of word t / 64 set iff row t holds the item. */
static PyObject *pack_bits(PyObject *self, PyObject *args)
{
    Py_buffer indptr, rows;
    Py_ssize_t n, m;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*nn", &indptr, &rows, &n, &m)) return NULL;
    PyObject *result = NULL;
    if (n < 0 || m < 0 || indptr.len != (n + 1) * 8
        || rows.len != ((const int64_t *)indptr.buf)[n] * 8) {
        PyErr_SetString(PyExc_ValueError, "pack_bits: inconsistent array sizes");
        goto out;
    }
    size_t w = ((size_t)n + 63) / 64;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(w * (size_t)m * 8));
    if (!result) goto out;
    uint64_t *bits = (uint64_t *)PyBytes_AS_STRING(result);
    memset(bits, 0, w * (size_t)m * 8);
    const int64_t *ip = (const int64_t *)indptr.buf, *r = (const int64_t *)rows.buf;
    for (Py_ssize_t t = 0; t < n; t++)
        for (int64_t e = ip[t]; e < ip[t + 1]; e++)
            if (r[e] >= 0 && r[e] < m)
                bits[(size_t)r[e] * w + (size_t)t / 64] |= (uint64_t)1 << (t % 64);
out:
    PyBuffer_Release(&indptr);
    PyBuffer_Release(&rows);
    return result;
}

static PyMethodDef methods[] = {
    {"pack_bits", pack_bits, METH_VARARGS,
     "pack_bits(indptr, rows, n, m) -> bytes of the m bit-columns"},
    {"eclat_forest", eclat_forest, METH_VARARGS,
     "eclat_forest(bits, counts, m, w, minc, max_len, indptr, rows, n, use_pairs)"
     " -> (parent, item, count) as bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_eclat", "Compiled Eclat kernel of ppdm.mining.kernel.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__eclat(void) { return PyModule_Create(&module); }
