/* The bit-matrix transpose of OT extension: the compiled part of ppdm.protocols.ot.bits;
 * and, with AES-NI (checked at run time; False returned otherwise, and the callers use
 * numpy), SoftSpoken's leaf streams and columns (aes_schedules, ss_columns) and KK13's
 * chained hash (kk13_keys).
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

/* Overflow-checked size products of the wrappers: a * b into *out, or 0 (with
 * OverflowError set) when a factor is negative or the product exceeds PY_SSIZE_T_MAX. */
static int size_mul(Py_ssize_t a, Py_ssize_t b, Py_ssize_t *out)
{
    if (a < 0 || b < 0 || (b != 0 && a > PY_SSIZE_T_MAX / b)) {
        PyErr_SetString(PyExc_OverflowError, "buffer size out of range");
        return 0;
    }
    *out = a * b;
    return 1;
}

/* transpose(matrix: bytes-like, rows: int, cols: int, out: writable buffer) -> None */
static PyObject *py_transpose(PyObject *self, PyObject *args)
{
    Py_buffer in, out;
    Py_ssize_t rows, cols;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnw*", &in, &rows, &cols, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t in_len = 0, out_len = 0;
    if (rows < 0 || cols < 0 || rows % 16 || cols % 8) {
        PyErr_SetString(PyExc_ValueError, "rows must be a multiple of 16 and cols of 8");
    } else if (!size_mul(rows, cols / 8, &in_len) || !size_mul(cols, rows / 8, &out_len)) {
        /* OverflowError set */
    } else if (in.len != in_len || out.len != out_len) {
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

/* SoftSpoken's leaf streams and small-field VOLE columns (ppdm.protocols.ot.softspoken):
 * for each of B blocks of 16 leaves x, the stream of leaf x is AES-128 in counter mode
 * keyed by the leaf itself (the round keys precomputed once a session: aes_schedules),
 * G_x[c] = AES_{k_x}(ctr_c), ctr_c = pos + c as a 128-bit big-endian counter block (what
 * OpenSSL's CTR mode encrypts), for c < nblocks; folded: u_b = the XOR of all 16
 * streams, plane l = the XOR of the streams of the x with bit l set, written to row
 * rows[4 b + l] of out_t (rows of 16 nblocks bytes), XORed with row b of corr where bit l
 * of dmask[b] is set (corr may be empty). With skip0 the leaf x = 0 is unknown (the
 * sender's punctured point): its stream is left out and u is not written. VAES on 256-bit
 * registers where the CPU has it, AES-NI otherwise; softspoken.py computes the same bytes
 * with OpenSSL's AES. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <wmmintrin.h>
#define PPDM_AESNI 1
enum { AES_ROUNDS = 11 };

__attribute__((target("aes,sse2"))) static inline __m128i key_step(__m128i key, __m128i gen)
{
    gen = _mm_shuffle_epi32(gen, 0xff);
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, gen);
}

__attribute__((target("aes,sse2"))) static void aes_schedule(const uint8_t *key, __m128i rk[11])
{
    rk[0] = _mm_loadu_si128((const __m128i *)key);
    rk[1] = key_step(rk[0], _mm_aeskeygenassist_si128(rk[0], 0x01));
    rk[2] = key_step(rk[1], _mm_aeskeygenassist_si128(rk[1], 0x02));
    rk[3] = key_step(rk[2], _mm_aeskeygenassist_si128(rk[2], 0x04));
    rk[4] = key_step(rk[3], _mm_aeskeygenassist_si128(rk[3], 0x08));
    rk[5] = key_step(rk[4], _mm_aeskeygenassist_si128(rk[4], 0x10));
    rk[6] = key_step(rk[5], _mm_aeskeygenassist_si128(rk[5], 0x20));
    rk[7] = key_step(rk[6], _mm_aeskeygenassist_si128(rk[6], 0x40));
    rk[8] = key_step(rk[7], _mm_aeskeygenassist_si128(rk[7], 0x80));
    rk[9] = key_step(rk[8], _mm_aeskeygenassist_si128(rk[8], 0x1b));
    rk[10] = key_step(rk[9], _mm_aeskeygenassist_si128(rk[9], 0x36));
}

/* The AES-128 key schedules of n keys: 11 round keys (176 bytes) each. */
__attribute__((target("aes,sse2"))) static void aes_schedules(uint8_t *out, const uint8_t *keys,
                                                              size_t n)
{
    for (size_t i = 0; i < n; i++) {
        __m128i rk[AES_ROUNDS];
        aes_schedule(keys + i * 16, rk);
        for (int r = 0; r < AES_ROUNDS; r++)
            _mm_storeu_si128((__m128i *)(out + (i * AES_ROUNDS + (size_t)r) * 16), rk[r]);
    }
}

__attribute__((target("aes,sse2"))) static void ss_columns(
    uint8_t *out_t, uint8_t *out_u, const uint8_t *rkeys, const int32_t *rows,
    const uint8_t *corr, const uint8_t *dmask, size_t blocks, uint64_t pos, size_t nblocks,
    int skip0)
{
    const int x0 = skip0 ? 1 : 0;
    const size_t stride = nblocks * 16;
    for (size_t b = 0; b < blocks; b++) {
        /* rk[r * 16 + x]: round key r of leaf x (2.75 KiB a block: stays in L1). */
        const __m128i *rk = (const __m128i *)(rkeys + b * AES_ROUNDS * 16 * 16);
        const unsigned dm = corr ? dmask[b] : 0;
        for (size_t c = 0; c < nblocks; c++) {
            const __m128i ctr =
                _mm_set_epi64x((long long)__builtin_bswap64(pos + c), 0); /* big-endian */
            __m128i y[16];
            for (int x = x0; x < 16; x++)
                y[x] = _mm_xor_si128(ctr, _mm_loadu_si128(rk + x));
            for (int r = 1; r < 10; r++)
                for (int x = x0; x < 16; x++)
                    y[x] = _mm_aesenc_si128(y[x], _mm_loadu_si128(rk + r * 16 + x));
            for (int x = x0; x < 16; x++)
                y[x] = _mm_aesenclast_si128(y[x], _mm_loadu_si128(rk + 10 * 16 + x));
            __m128i p[4];
            for (int l = 0; l < 4; l++) p[l] = _mm_setzero_si128();
            __m128i all = skip0 ? _mm_setzero_si128() : y[0];
            for (int x = 1; x < 16; x++) {
                all = _mm_xor_si128(all, y[x]);
                for (int l = 0; l < 4; l++)
                    if (x >> l & 1) p[l] = _mm_xor_si128(p[l], y[x]);
            }
            if (!skip0 && out_u) _mm_storeu_si128((__m128i *)(out_u + b * stride + c * 16), all);
            const __m128i cv =
                dm ? _mm_loadu_si128((const __m128i *)(corr + b * stride + c * 16)) : all;
            for (int l = 0; l < 4; l++) {
                __m128i v = (dm >> l & 1) ? _mm_xor_si128(p[l], cv) : p[l];
                _mm_storeu_si128((__m128i *)(out_t + (size_t)rows[b * 4 + l] * stride + c * 16), v);
            }
        }
    }
}

#include <immintrin.h>
/* ss_columns with VAES on 256-bit registers: register k holds the leaves 2k (low half)
 * and 2k + 1 (high half), each under its own round keys (one 32-byte load a round: the
 * round keys are stored round by round, leaf after leaf); the same bytes. */
__attribute__((target("vaes,avx2,aes"))) static void ss_columns_vaes(
    uint8_t *out_t, uint8_t *out_u, const uint8_t *rkeys, const int32_t *rows,
    const uint8_t *corr, const uint8_t *dmask, size_t blocks, uint64_t pos, size_t nblocks,
    int skip0)
{
    const size_t stride = nblocks * 16;
    for (size_t b = 0; b < blocks; b++) {
        const uint8_t *rk = rkeys + b * AES_ROUNDS * 16 * 16;
        const unsigned dm = corr ? dmask[b] : 0;
        for (size_t c = 0; c < nblocks; c++) {
            const __m256i ctr = _mm256_broadcastsi128_si256(
                _mm_set_epi64x((long long)__builtin_bswap64(pos + c), 0)); /* big-endian */
            __m256i y[8];
            for (int k = 0; k < 8; k++)
                y[k] = _mm256_xor_si256(ctr, _mm256_loadu_si256((const __m256i *)(rk + k * 32)));
            for (int r = 1; r < 10; r++)
                for (int k = 0; k < 8; k++)
                    y[k] = _mm256_aesenc_epi128(
                        y[k], _mm256_loadu_si256((const __m256i *)(rk + r * 256 + k * 32)));
            for (int k = 0; k < 8; k++)
                y[k] = _mm256_aesenclast_epi128(
                    y[k], _mm256_loadu_si256((const __m256i *)(rk + 10 * 256 + k * 32)));
            if (skip0) y[0] = _mm256_blend_epi32(y[0], _mm256_setzero_si256(), 0x0F);
            /* Bit 0 of a leaf x = 2k + h is the half h; bit l >= 1 is bit l - 1 of k. */
            const __m256i o1 = _mm256_xor_si256(_mm256_xor_si256(y[1], y[3]),
                                                _mm256_xor_si256(y[5], y[7]));
            const __m256i e1 = _mm256_xor_si256(_mm256_xor_si256(y[0], y[2]),
                                                _mm256_xor_si256(y[4], y[6]));
            const __m256i k2 = _mm256_xor_si256(_mm256_xor_si256(y[2], y[3]),
                                                _mm256_xor_si256(y[6], y[7]));
            const __m256i k4 = _mm256_xor_si256(_mm256_xor_si256(y[4], y[5]),
                                                _mm256_xor_si256(y[6], y[7]));
            const __m256i a = _mm256_xor_si256(o1, e1);
#define FOLD(v) _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))
            const __m128i all = FOLD(a);
            __m128i p[4];
            p[0] = _mm256_extracti128_si256(a, 1);
            p[1] = FOLD(o1);
            p[2] = FOLD(k2);
            p[3] = FOLD(k4);
#undef FOLD
            if (!skip0 && out_u) _mm_storeu_si128((__m128i *)(out_u + b * stride + c * 16), all);
            const __m128i cv =
                dm ? _mm_loadu_si128((const __m128i *)(corr + b * stride + c * 16)) : all;
            for (int l = 0; l < 4; l++) {
                __m128i v = (dm >> l & 1) ? _mm_xor_si128(p[l], cv) : p[l];
                _mm_storeu_si128((__m128i *)(out_t + (size_t)rows[b * 4 + l] * stride + c * 16), v);
            }
        }
    }
}
#endif

/* aes_schedules(keys, n, out) -> bool: the AES-128 round keys of n 16-byte keys into out
 * (n x 176 bytes); False when AES-NI is not available. */
static PyObject *py_aes_schedules(PyObject *self, PyObject *args)
{
    Py_buffer keys, out;
    Py_ssize_t n, klen = 0, olen = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nw*", &keys, &n, &out)) return NULL;
    PyObject *result = NULL;
    if (!size_mul(n, 16, &klen) || !size_mul(n, 176, &olen)) {
        /* OverflowError set */
    } else if (keys.len != klen || out.len != olen) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match n");
    } else {
#if defined(PPDM_AESNI)
        if (__builtin_cpu_supports("aes")) {
            Py_BEGIN_ALLOW_THREADS
            aes_schedules(out.buf, keys.buf, (size_t)n);
            Py_END_ALLOW_THREADS
            result = Py_True;
        } else {
            result = Py_False;
        }
#else
        result = Py_False;
#endif
        Py_INCREF(result);
    }
    PyBuffer_Release(&keys);
    PyBuffer_Release(&out);
    return result;
}

/* ss_columns(rkeys, blocks, pos, nblocks, skip0, rows, corr, dmask, out_t, out_u) -> bool:
 * False when AES-NI is not available (the caller computes them with OpenSSL). rkeys:
 * blocks x 11 rounds x 16 leaves x 16 bytes: the leaves' round keys (aes_schedules),
 * round by round within a block; rows: 4 blocks int32 row indices below out_t's rows;
 * corr: empty or blocks x 16 nblocks bytes; dmask: blocks bytes; out_u: empty or blocks
 * x 16 nblocks bytes. Every size product is checked for overflow first. */
static PyObject *py_ss_columns(PyObject *self, PyObject *args)
{
    Py_buffer rkeys, rows, corr, dmask, out_t, out_u;
    Py_ssize_t blocks, nblocks, stride = 0, leaves = 0, keybytes = 0, nrows = 0, plane = 0;
    unsigned long long pos;
    int skip0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nKnpy*y*y*w*w*", &rkeys, &blocks, &pos, &nblocks, &skip0,
                          &rows, &corr, &dmask, &out_t, &out_u))
        return NULL;
    PyObject *result = NULL;
    int ok = size_mul(nblocks, 16, &stride) && size_mul(blocks, 16, &leaves) &&
             size_mul(leaves, 176, &keybytes) && size_mul(blocks, 4, &nrows) &&
             size_mul(blocks, stride, &plane);
    if (!ok) goto done; /* OverflowError set */
    if (nblocks > 0 && pos > UINT64_MAX - (unsigned long long)nblocks) {
        PyErr_SetString(PyExc_OverflowError, "PRG counter out of range");
        goto done;
    }
    ok = rkeys.len == keybytes && rows.itemsize == 4 && rows.len == nrows * 4 &&
         dmask.len == blocks && (corr.len == 0 || corr.len == plane) &&
         (out_u.len == 0 || out_u.len == plane) && stride > 0 && out_t.len % stride == 0;
    if (ok) {
        const int32_t *r = rows.buf;
        for (Py_ssize_t i = 0; i < nrows; i++)
            if (r[i] < 0 || (Py_ssize_t)r[i] >= out_t.len / stride) ok = 0;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match blocks and nblocks");
    } else {
#if defined(PPDM_AESNI)
        if (__builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("aes")) {
            Py_BEGIN_ALLOW_THREADS
            ss_columns_vaes(out_t.buf, out_u.len ? out_u.buf : NULL, rkeys.buf, rows.buf,
                            corr.len ? corr.buf : NULL, dmask.buf, (size_t)blocks,
                            (uint64_t)pos, (size_t)nblocks, skip0);
            Py_END_ALLOW_THREADS
            result = Py_True;
        } else if (__builtin_cpu_supports("aes")) {
            Py_BEGIN_ALLOW_THREADS
            ss_columns(out_t.buf, out_u.len ? out_u.buf : NULL, rkeys.buf, rows.buf,
                       corr.len ? corr.buf : NULL, dmask.buf, (size_t)blocks, (uint64_t)pos,
                       (size_t)nblocks, skip0);
            Py_END_ALLOW_THREADS
            result = Py_True;
        } else {
            result = Py_False;
        }
#else
        result = Py_False;
#endif
        Py_INCREF(result);
    }
done:
    PyBuffer_Release(&rkeys);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&corr);
    PyBuffer_Release(&dmask);
    PyBuffer_Release(&out_t);
    PyBuffer_Release(&out_u);
    return result;
}

#if defined(PPDM_AESNI)
#define AES_ALL(st, w, rk)                                                       \
    do {                                                                         \
        for (size_t v_ = 0; v_ < (w); v_++) st[v_] = _mm_xor_si128(st[v_], rk[0]); \
        for (int r_ = 1; r_ < 10; r_++)                                          \
            for (size_t v_ = 0; v_ < (w); v_++) st[v_] = _mm_aesenc_si128(st[v_], rk[r_]); \
        for (size_t v_ = 0; v_ < (w); v_++) st[v_] = _mm_aesenclast_si128(st[v_], rk[10]); \
    } while (0)

/* KK13's hash (ppdm.protocols.ot.kk13.kk13_hash) of q_j XOR mask_v for every row j < n and
 * mask v < w (w <= 16): H(j, x) = TCCR(t1_j, x1 ^ TCCR(t0_j, x0)), TCCR(t, x) = pi(pi(x) ^
 * t) ^ pi(x), pi = AES under the fixed key, the tweaks t0_j = (start + j, hi0) and t1_j =
 * (start + j, hi1) as two little-endian words; the first `length` bytes of every key. */
__attribute__((target("aes,sse2"))) static void kk13_keys(
    uint8_t *out, const uint8_t *q, const uint8_t *masks, size_t w, const uint8_t *key,
    uint64_t start, uint64_t hi0, uint64_t hi1, size_t n, size_t length)
{
    __m128i rk[11], m0[16], m1[16];
    aes_schedule(key, rk);
    for (size_t v = 0; v < w; v++) {
        m0[v] = _mm_loadu_si128((const __m128i *)(masks + v * 32));
        m1[v] = _mm_loadu_si128((const __m128i *)(masks + v * 32 + 16));
    }
    for (size_t j = 0; j < n; j++) {
        const __m128i q0 = _mm_loadu_si128((const __m128i *)(q + j * 32));
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(q + j * 32 + 16));
        const __m128i t0 = _mm_set_epi64x((long long)hi0, (long long)(start + j));
        const __m128i t1 = _mm_set_epi64x((long long)hi1, (long long)(start + j));
        __m128i a[16], p[16];
        for (size_t v = 0; v < w; v++) a[v] = _mm_xor_si128(q0, m0[v]);
        AES_ALL(a, w, rk);
        for (size_t v = 0; v < w; v++) {
            p[v] = a[v];
            a[v] = _mm_xor_si128(a[v], t0);
        }
        AES_ALL(a, w, rk);
        for (size_t v = 0; v < w; v++)
            a[v] = _mm_xor_si128(_mm_xor_si128(a[v], p[v]), _mm_xor_si128(q1, m1[v]));
        AES_ALL(a, w, rk);
        for (size_t v = 0; v < w; v++) {
            p[v] = a[v];
            a[v] = _mm_xor_si128(a[v], t1);
        }
        AES_ALL(a, w, rk);
        for (size_t v = 0; v < w; v++) {
            uint8_t block[16];
            _mm_storeu_si128((__m128i *)block, _mm_xor_si128(a[v], p[v]));
            memcpy(out + (j * w + v) * length, block, length);
        }
    }
}
#endif

#if defined(PPDM_AESNI)
#define AES8(st)                                                                     \
    do {                                                                             \
        for (int k_ = 0; k_ < 8; k_++) st[k_] = _mm256_xor_si256(st[k_], rk[0]);     \
        for (int r_ = 1; r_ < 10; r_++)                                              \
            for (int k_ = 0; k_ < 8; k_++) st[k_] = _mm256_aesenc_epi128(st[k_], rk[r_]); \
        for (int k_ = 0; k_ < 8; k_++) st[k_] = _mm256_aesenclast_epi128(st[k_], rk[10]); \
    } while (0)
/* kk13_keys with VAES on 256-bit registers: the n * w (row, mask) items 16 at a time (8
 * registers of two blocks), so one row's 16 keys or 16 rows' single keys pipeline alike. */
__attribute__((target("vaes,avx2,aes"))) static void kk13_keys_vaes(
    uint8_t *out, const uint8_t *q, const uint8_t *masks, size_t w, const uint8_t *key,
    uint64_t start, uint64_t hi0, uint64_t hi1, size_t n, size_t length)
{
    __m128i rk128[11];
    __m256i rk[11];
    aes_schedule(key, rk128);
    for (int r = 0; r < 11; r++) rk[r] = _mm256_broadcastsi128_si256(rk128[r]);
    if (w == 16) { /* one row's 16 keys: its halves and tweaks broadcast, masks in pairs */
        __m256i m0[8], m1[8];
        for (int k = 0; k < 8; k++) {
            m0[k] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(masks + (2 * k + 1) * 32)),
                                     _mm_loadu_si128((const __m128i *)(masks + 2 * k * 32)));
            m1[k] = _mm256_set_m128i(
                _mm_loadu_si128((const __m128i *)(masks + (2 * k + 1) * 32 + 16)),
                _mm_loadu_si128((const __m128i *)(masks + 2 * k * 32 + 16)));
        }
        for (size_t j = 0; j < n; j++) {
            const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(q + j * 32)));
            const __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(q + j * 32 + 16)));
            const __m256i t0 = _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)hi0, (long long)(start + j)));
            const __m256i t1 = _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)hi1, (long long)(start + j)));
            __m256i a[8], p[8];
            for (int k = 0; k < 8; k++) a[k] = _mm256_xor_si256(q0, m0[k]);
            AES8(a);
            for (int k = 0; k < 8; k++) {
                p[k] = a[k];
                a[k] = _mm256_xor_si256(a[k], t0);
            }
            AES8(a);
            for (int k = 0; k < 8; k++)
                a[k] = _mm256_xor_si256(_mm256_xor_si256(a[k], p[k]), _mm256_xor_si256(q1, m1[k]));
            AES8(a);
            for (int k = 0; k < 8; k++) {
                p[k] = a[k];
                a[k] = _mm256_xor_si256(a[k], t1);
            }
            AES8(a);
            if (length == 16) {
                for (int k = 0; k < 8; k++)
                    _mm256_storeu_si256((__m256i *)(out + (j * 16 + 2 * (size_t)k) * 16),
                                        _mm256_xor_si256(a[k], p[k]));
            } else {
                uint8_t block[16][16];
                for (int k = 0; k < 8; k++)
                    _mm256_storeu_si256((__m256i *)block[2 * k], _mm256_xor_si256(a[k], p[k]));
                for (size_t i = 0; i < 16; i++) memcpy(out + (j * 16 + i) * length, block[i], length);
            }
        }
        return;
    }
    const size_t total = n * w;
    for (size_t base = 0; base < total; base += 16) {
        const size_t cnt = total - base < 16 ? total - base : 16;
        __m128i x0[16], x1[16], t0[16], t1[16];
        for (size_t i = 0; i < 16; i++) {
            const size_t it = base + (i < cnt ? i : 0), j = it / w, v = it % w;
            const uint8_t *row = q + j * 32, *m = masks + v * 32;
            x0[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)row),
                                  _mm_loadu_si128((const __m128i *)m));
            x1[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(row + 16)),
                                  _mm_loadu_si128((const __m128i *)(m + 16)));
            t0[i] = _mm_set_epi64x((long long)hi0, (long long)(start + j));
            t1[i] = _mm_set_epi64x((long long)hi1, (long long)(start + j));
        }
        __m256i a[8], p[8];
#define PAIR(arr, k) _mm256_set_m128i(arr[2 * (k) + 1], arr[2 * (k)])
        for (int k = 0; k < 8; k++) a[k] = PAIR(x0, k);
        AES8(a);
        for (int k = 0; k < 8; k++) {
            p[k] = a[k];
            a[k] = _mm256_xor_si256(a[k], PAIR(t0, k));
        }
        AES8(a);
        for (int k = 0; k < 8; k++) a[k] = _mm256_xor_si256(_mm256_xor_si256(a[k], p[k]), PAIR(x1, k));
        AES8(a);
        for (int k = 0; k < 8; k++) {
            p[k] = a[k];
            a[k] = _mm256_xor_si256(a[k], PAIR(t1, k));
        }
        AES8(a);
#undef PAIR
        uint8_t block[16][16];
        for (int k = 0; k < 8; k++)
            _mm256_storeu_si256((__m256i *)block[2 * k], _mm256_xor_si256(a[k], p[k]));
        for (size_t i = 0; i < cnt; i++) memcpy(out + (base + i) * length, block[i], length);
    }
}
#endif

/* kk13_keys(q, masks, w, key, start, hi0, hi1, n, length, out) -> bool: False when AES-NI
 * is not available (the caller hashes in numpy). */
static PyObject *py_kk13_keys(PyObject *self, PyObject *args)
{
    Py_buffer q, masks, key, out;
    Py_ssize_t w, n, length;
    unsigned long long start, hi0, hi1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*ny*KKKnnw*", &q, &masks, &w, &key, &start, &hi0, &hi1, &n,
                          &length, &out))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t q_len = 0, items = 0, out_len = 0;
    if (w < 1 || w > 16 || n < 0 || length < 1 || length > 16) {
        PyErr_SetString(PyExc_ValueError, "w and length must lie in [1, 16], n >= 0");
    } else if (!size_mul(n, 32, &q_len) || !size_mul(n, w, &items) ||
               !size_mul(items, length, &out_len)) {
        /* OverflowError set */
    } else if (key.len != 16 || masks.len != w * 32 || q.len != q_len || out.len != out_len) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match w, n and length");
    } else {
#if defined(PPDM_AESNI)
        if (__builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("aes")) {
            Py_BEGIN_ALLOW_THREADS
            kk13_keys_vaes(out.buf, q.buf, masks.buf, (size_t)w, key.buf, (uint64_t)start,
                           (uint64_t)hi0, (uint64_t)hi1, (size_t)n, (size_t)length);
            Py_END_ALLOW_THREADS
            result = Py_True;
        } else if (__builtin_cpu_supports("aes")) {
            Py_BEGIN_ALLOW_THREADS
            kk13_keys(out.buf, q.buf, masks.buf, (size_t)w, key.buf, (uint64_t)start,
                      (uint64_t)hi0, (uint64_t)hi1, (size_t)n, (size_t)length);
            Py_END_ALLOW_THREADS
            result = Py_True;
        } else {
            result = Py_False;
        }
#else
        result = Py_False;
#endif
        Py_INCREF(result);
    }
    PyBuffer_Release(&q);
    PyBuffer_Release(&masks);
    PyBuffer_Release(&key);
    PyBuffer_Release(&out);
    return result;
}

/* The AES-128-CTR streams of n keys read in step (the IKNP column PRG,
 * ppdm.protocols.ot.crhash.AESCTRStreams): row i of out (nbytes bytes) is bytes pos ..
 * pos + nbytes - 1 of key i's stream, block c of which is AES_{k_i}(c) with c a 128-bit
 * big-endian counter from 0 (OpenSSL's CTR mode with an all-zero IV; pos + nbytes <=
 * 2^64 - 16, so the counter's high 64 bits stay zero). Blocks are made eight (VAES:
 * sixteen) at a time under one key's round keys (rkeys: aes_schedules' layout, 11 x 16
 * bytes a key) and the part of them inside the window copied out, so a window may start
 * and end inside a block. */
#if defined(PPDM_AESNI)
__attribute__((target("aes,sse2"))) static void ctr_many(uint8_t *out, const uint8_t *rkeys,
                                                         size_t n, uint64_t pos, size_t nbytes)
{
    const uint64_t end = pos + nbytes, b0 = pos / 16, b1 = (end + 15) / 16;
    if (nbytes == 0) return;
    for (size_t i = 0; i < n; i++) {
        __m128i rk[AES_ROUNDS];
        for (int r = 0; r < AES_ROUNDS; r++)
            rk[r] = _mm_loadu_si128((const __m128i *)(rkeys + (i * AES_ROUNDS + (size_t)r) * 16));
        uint8_t *row = out + i * nbytes;
        for (uint64_t c = b0; c < b1; c += 8) {
            __m128i y[8];
            uint8_t block[8 * 16];
            for (int k = 0; k < 8; k++)
                y[k] = _mm_set_epi64x((long long)__builtin_bswap64(c + (uint64_t)k), 0);
            AES_ALL(y, 8, rk);
            for (int k = 0; k < 8; k++) _mm_storeu_si128((__m128i *)(block + k * 16), y[k]);
            const uint64_t lo = c * 16 > pos ? c * 16 : pos;
            const uint64_t hi = end - c * 16 > 8 * 16 ? c * 16 + 8 * 16 : end; /* no wrap */
            memcpy(row + (lo - pos), block + (lo - c * 16), (size_t)(hi - lo));
        }
    }
}

__attribute__((target("vaes,avx2,aes"))) static void ctr_many_vaes(
    uint8_t *out, const uint8_t *rkeys, size_t n, uint64_t pos, size_t nbytes)
{
    const uint64_t end = pos + nbytes, b0 = pos / 16, b1 = (end + 15) / 16;
    if (nbytes == 0) return;
    for (size_t i = 0; i < n; i++) {
        __m256i rk[AES_ROUNDS];
        for (int r = 0; r < AES_ROUNDS; r++)
            rk[r] = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)(rkeys + (i * AES_ROUNDS + (size_t)r) * 16)));
        uint8_t *row = out + i * nbytes;
        for (uint64_t c = b0; c < b1; c += 16) {
            __m256i y[8];
            uint8_t block[16 * 16];
            for (int k = 0; k < 8; k++)
                y[k] = _mm256_set_epi64x(
                    (long long)__builtin_bswap64(c + 2 * (uint64_t)k + 1), 0,
                    (long long)__builtin_bswap64(c + 2 * (uint64_t)k), 0);
            AES8(y);
            for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(block + k * 32), y[k]);
            const uint64_t lo = c * 16 > pos ? c * 16 : pos;
            const uint64_t hi = end - c * 16 > 16 * 16 ? c * 16 + 16 * 16 : end; /* no wrap */
            memcpy(row + (lo - pos), block + (lo - c * 16), (size_t)(hi - lo));
        }
    }
}
#endif

/* aes_ctr_many(rkeys, n, pos, nbytes, out[, aesni_only]) -> bool: bytes pos .. pos +
 * nbytes - 1 of the AES-CTR streams of n keys (rkeys: n x 176 bytes of round keys,
 * aes_schedules) into out (n x nbytes); False when AES-NI is not available (the caller
 * uses OpenSSL). pos must be an int in [0, 2^64 - 16 - nbytes] (OverflowError otherwise,
 * as for sizes whose product overflows). aesni_only skips the VAES kernel (tests). */
static PyObject *py_aes_ctr_many(PyObject *self, PyObject *args)
{
    Py_buffer rkeys, out;
    Py_ssize_t n, nbytes, klen = 0, olen = 0;
    PyObject *pos_obj;
    int aesni_only = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nOnw*|p", &rkeys, &n, &pos_obj, &nbytes, &out, &aesni_only))
        return NULL;
    PyObject *result = NULL;
    unsigned long long pos = 0;
    if (!PyLong_Check(pos_obj)) {
        PyErr_SetString(PyExc_TypeError, "pos must be an int");
        goto done;
    }
    pos = PyLong_AsUnsignedLongLong(pos_obj); /* OverflowError when negative or too big */
    if (pos == (unsigned long long)-1 && PyErr_Occurred()) goto done;
    if (!size_mul(n, 176, &klen) || !size_mul(n, nbytes, &olen)) goto done;
    if (pos > UINT64_MAX - 15 || (unsigned long long)nbytes > UINT64_MAX - 15 - pos) {
        PyErr_SetString(PyExc_OverflowError, "PRG position out of range");
        goto done;
    }
    if (rkeys.len != klen || out.len != olen) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match n and nbytes");
        goto done;
    }
#if defined(PPDM_AESNI)
    if (!aesni_only && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("aes")) {
        Py_BEGIN_ALLOW_THREADS
        ctr_many_vaes(out.buf, rkeys.buf, (size_t)n, (uint64_t)pos, (size_t)nbytes);
        Py_END_ALLOW_THREADS
        result = Py_True;
    } else if (__builtin_cpu_supports("aes")) {
        Py_BEGIN_ALLOW_THREADS
        ctr_many(out.buf, rkeys.buf, (size_t)n, (uint64_t)pos, (size_t)nbytes);
        Py_END_ALLOW_THREADS
        result = Py_True;
    } else {
        result = Py_False;
    }
#else
    result = Py_False;
#endif
    Py_INCREF(result);
done:
    PyBuffer_Release(&rkeys);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"transpose", py_transpose, METH_VARARGS,
     "Transpose a packed rows x cols bit matrix into a cols x rows one (little-endian bits)."},
    {"aes_schedules", py_aes_schedules, METH_VARARGS,
     "The AES-128 round keys of n keys (11 x 16 bytes each)."},
    {"ss_columns", py_ss_columns, METH_VARARGS,
     "SoftSpoken's leaf-keyed AES-CTR streams, 16 leaves a block, folded into VOLE columns."},
    {"kk13_keys", py_kk13_keys, METH_VARARGS,
     "KK13's chained TCCR hash of every row XOR every mask (fixed-key AES-NI)."},
    {"aes_ctr_many", py_aes_ctr_many, METH_VARARGS,
     "The next bytes of the AES-128-CTR streams of many keys (AES-NI or VAES)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bits", "The compiled bit-matrix transpose of OT extension.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__bits(void) { return PyModule_Create(&module); }
