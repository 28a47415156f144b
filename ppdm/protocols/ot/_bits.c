/* The bit-matrix transpose of OT extension: the compiled part of ppdm.protocols.ot.bits.
 *
 * IKNP (and every extension built like it) turns the 128 PRG-expanded columns of the base
 * OTs into one 128-bit row per OT: a transpose of a 128 x m bit matrix. numpy does it with
 * delta swaps on 64-bit words (ppdm.protocols.ot.bits); this is the same transpose with
 * SSE2: 16 x 16 bytes transposed in registers by unpacks, then each byte column's bits
 * collected by movemask (the "sse_trans" idea of Mischa Sandberg, as in emp-toolkit, on
 * whole 16-byte rows), with the GIL released so that two parties in one process (the in-process
 * network) transpose at the same time.
 *
 * Bit order (as everywhere in the OT package): little-endian within bytes, bit i of a row
 * in byte i / 8 at position i % 8. Input: rows x (cols / 8) bytes, output: cols x (rows / 8)
 * bytes; rows a multiple of 16, cols a multiple of 8 (the Python side asks for 64 and 64).
 *
 * Plain C and the CPython buffer protocol only (no numpy headers), so the extension builds
 * with setuptools alone; ppdm falls back to the numpy transpose when it is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Tiles of TILE_ROWS rows x TILE_BYTES bytes are copied to a local buffer first: the rows
 * of OT extension's matrices lie a power of two apart, so reading all of them in step
 * thrashes the cache sets; each copied row is one cache line read whole. */
enum { TILE_ROWS = 512, TILE_BYTES = 64 };

#if defined(__SSE2__)
/* A 16 x 16 byte transpose in registers: out[j] holds byte j of in[0..15] (four rounds of
 * unpacks: 8-, 16-, 32- and 64-bit lanes). */
static inline void transpose_bytes16(const __m128i in[16], __m128i out[16])
{
    __m128i a[16], b[16], c[16];
    for (int i = 0; i < 8; i++) { /* a[h * 8 + i]: rows 2i, 2i + 1; columns 8h .. 8h + 7 */
        a[i] = _mm_unpacklo_epi8(in[2 * i], in[2 * i + 1]);
        a[i + 8] = _mm_unpackhi_epi8(in[2 * i], in[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* b[q * 4 + i]: rows 4i .. 4i + 3; columns 4q .. 4q + 3 */
        for (int i = 0; i < 4; i++) {
            b[h * 8 + i] = _mm_unpacklo_epi16(a[h * 8 + 2 * i], a[h * 8 + 2 * i + 1]);
            b[h * 8 + 4 + i] = _mm_unpackhi_epi16(a[h * 8 + 2 * i], a[h * 8 + 2 * i + 1]);
        }
    }
    for (int q = 0; q < 4; q++) { /* c[e * 2 + i]: rows 8i .. 8i + 7; columns 2e, 2e + 1 */
        for (int i = 0; i < 2; i++) {
            c[q * 4 + i] = _mm_unpacklo_epi32(b[q * 4 + 2 * i], b[q * 4 + 2 * i + 1]);
            c[q * 4 + 2 + i] = _mm_unpackhi_epi32(b[q * 4 + 2 * i], b[q * 4 + 2 * i + 1]);
        }
    }
    for (int e = 0; e < 8; e++) { /* out[j]: rows 0 .. 15; column j */
        out[2 * e] = _mm_unpacklo_epi64(c[e * 2], c[e * 2 + 1]);
        out[2 * e + 1] = _mm_unpackhi_epi64(c[e * 2], c[e * 2 + 1]);
    }
}
#endif

static void transpose(uint8_t *out, const uint8_t *in, size_t rows, size_t cols)
{
    const size_t in_stride = cols / 8, out_stride = rows / 8;
    uint8_t tile[TILE_ROWS * TILE_BYTES];
    for (size_t r0 = 0; r0 < rows; r0 += TILE_ROWS) {
        const size_t nr = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS;
        for (size_t b0 = 0; b0 < in_stride; b0 += TILE_BYTES) {
            const size_t nb = in_stride - b0 < TILE_BYTES ? in_stride - b0 : TILE_BYTES;
            for (size_t i = 0; i < nr; i++)
                memcpy(tile + i * TILE_BYTES, in + (r0 + i) * in_stride + b0, nb);
#if defined(__SSE2__)
            /* 16 rows x 16 bytes at a time (past nb the tile holds stale bytes, never
             * written out); byte column b0 + j is output rows 8 (b0 + j) .. + 7. */
            for (size_t j0 = 0; j0 < nb; j0 += 16) {
                for (size_t r = 0; r < nr; r += 16) {
                    __m128i rowv[16], colv[16];
                    for (int i = 0; i < 16; i++)
                        rowv[i] = _mm_loadu_si128(
                            (const __m128i *)(tile + (r + (size_t)i) * TILE_BYTES + j0));
                    transpose_bytes16(rowv, colv);
                    const size_t nj = nb - j0 < 16 ? nb - j0 : 16;
                    for (size_t j = 0; j < nj; j++) {
                        uint8_t *dst = out + (b0 + j0 + j) * 8 * out_stride + (r0 + r) / 8;
                        __m128i x = colv[j];
                        /* movemask collects the top bit of every byte: bit 7 first. */
                        for (int b = 7; b >= 0; b--) {
                            uint16_t m = (uint16_t)_mm_movemask_epi8(x);
                            memcpy(dst + (size_t)b * out_stride, &m, 2);
                            x = _mm_slli_epi64(x, 1);
                        }
                    }
                }
            }
#else
            for (size_t j = 0; j < nb; j++) {
                uint8_t *dst = out + (b0 + j) * 8 * out_stride + r0 / 8;
                for (size_t r = 0; r < nr; r += 16) {
                    for (int b = 0; b < 8; b++) {
                        unsigned m = 0;
                        for (int i = 0; i < 16; i++)
                            m |= ((tile[(r + (size_t)i) * TILE_BYTES + j] >> b) & 1u) << i;
                        dst[(size_t)b * out_stride + r / 8] = (uint8_t)(m & 0xFF);
                        dst[(size_t)b * out_stride + r / 8 + 1] = (uint8_t)(m >> 8);
                    }
                }
            }
#endif
        }
    }
}

/* transpose(matrix: bytes-like, rows: int, cols: int, out: writable buffer) -> None */
static PyObject *py_transpose(PyObject *self, PyObject *args)
{
    Py_buffer in, out;
    Py_ssize_t rows, cols;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnw*", &in, &rows, &cols, &out)) return NULL;
    PyObject *result = NULL;
    if (rows < 0 || cols < 0 || rows % 16 || cols % 8) {
        PyErr_SetString(PyExc_ValueError, "rows must be a multiple of 16 and cols of 8");
    } else if (in.len != rows * (cols / 8) || out.len != cols * (rows / 8)) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match rows and cols");
    } else {
        Py_BEGIN_ALLOW_THREADS
        transpose(out.buf, in.buf, (size_t)rows, (size_t)cols);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"transpose", py_transpose, METH_VARARGS,
     "Transpose a packed rows x cols bit matrix into a cols x rows one (little-endian bits)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bits", "The compiled bit-matrix transpose of OT extension.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__bits(void) { return PyModule_Create(&module); }
