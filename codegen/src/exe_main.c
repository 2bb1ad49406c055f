/* The executable's `main` (see exe.rs): the model's tables (NI, in_names, ...) are defined
   above this text by `main_c`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The largest count of runs `--bench` and `--profile` take: the timings of every run are
   kept (to take the median), 8 bytes per run and per op. */
#define MAX_RUNS 100000000L

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ULL; }
    return h;
}
static uint64_t splitmix(uint64_t *st) {
    *st += 0x9E3779B97F4A7C15ULL;
    uint64_t z = *st;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint64_t count(const unsigned long long *d, int r) {
    uint64_t n = 1;
    for (int i = 0; i < r; i++) n *= d[i];
    return n;
}
static void out_of_memory(size_t n) {
    fprintf(stderr, "error: out of memory (%zu bytes)\n", n);
    exit(1);
}
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}
/* n * size, or an out-of-memory exit when it does not fit in size_t. */
static size_t bytes_of(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) out_of_memory(SIZE_MAX);
    return n * size;
}
static void *xalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) out_of_memory(n);
    memset(p, 0, n ? n : 64);
    return p;
}

/* ---- reading `.npy` inputs -------------------------------------------------------------
   One policy with `tirc run` (tir_interp::npy::read_input): the same files are accepted, and
   a refused one gets the same message, `FILE: error: input `%NAME`: WHY`, exit 1. The header
   is the Python dict literal NumPy writes, parsed by the same grammar; `<f4`, `>f4`, `|f4` and
   `=f4` are float32 (big-endian data is swapped); the data must be exactly what the file's
   shape says, and the shape and dtype the model's. */

static const char *npy_file; static int npy_input;
static void npy_fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: error: input `%%%s`: ", npy_file, in_names[npy_input]);
    va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
static void npy_os_fail(int e) { npy_fail("cannot read the file: %s (os error %d)", strerror(e), e); }
/* The whole file, as `std::fs::read`. */
static unsigned char *slurp(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) npy_os_fail(errno);
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap = bytes_of(cap, 2);
            unsigned char *nb = realloc(b, cap);
            if (!nb) out_of_memory(cap);
            b = nb;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) { if (errno == EINTR) continue; npy_os_fail(errno); }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    *len = n;
    return b;
}
/* As Rust's `str::from_utf8`: well-formed UTF-8, no overlong forms, no surrogates. */
static int utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k; unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c == 0xE0) { k = 2; lo = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) k = 2;
        else if (c == 0xED) { k = 2; hi = 0x9F; }
        else if (c == 0xF0) { k = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) k = 3;
        else if (c == 0xF4) { k = 3; hi = 0x8F; }
        else return 0;
        if (n - i - 1 < k || s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t j = 2; j <= k; j++) if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k + 1;
    }
    return 1;
}
/* The header's literals: strings, booleans, integers and tuples (of which only the top level's
   integers are kept, as the shape). */
enum { LIT_STR, LIT_BOOL, LIT_INT, LIT_TUPLE };
typedef struct {
    int kind;
    const unsigned char *str; size_t len; /* LIT_STR */
    int boolean;                          /* LIT_BOOL */
    uint64_t num;                         /* LIT_INT */
    uint64_t *items; size_t n; int all_ints; /* LIT_TUPLE */
} lit_t;
typedef struct { const unsigned char *s; size_t n, i; } lexer_t;
static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
static void skip_ws(lexer_t *p) { while (p->i < p->n && is_ws(p->s[p->i])) p->i++; }
static int eat(lexer_t *p, unsigned char c) {
    if (p->i < p->n && p->s[p->i] == c) { p->i++; return 1; }
    return 0;
}
static void expect(lexer_t *p, unsigned char c) {
    skip_ws(p);
    if (!eat(p, c)) npy_fail("malformed .npy header: expected `%c` at byte %zu", c, p->i);
}
/* Rust's `char::escape_default` of a byte taken as a char. */
static void escape_default(unsigned char c, char out[16]) {
    switch (c) {
    case '\t': strcpy(out, "\\t"); return;
    case '\r': strcpy(out, "\\r"); return;
    case '\n': strcpy(out, "\\n"); return;
    case '\'': strcpy(out, "\\'"); return;
    case '"': strcpy(out, "\\\""); return;
    case '\\': strcpy(out, "\\\\"); return;
    }
    if (c >= 0x20 && c <= 0x7e) { out[0] = (char)c; out[1] = 0; }
    else snprintf(out, 16, "\\u{%x}", c);
}
static void literal(lexer_t *p, int depth, lit_t *l) {
    memset(l, 0, sizeof *l);
    if (depth > 8) npy_fail("malformed .npy header: tuples nested too deeply");
    skip_ws(p);
    if (p->i >= p->n) npy_fail("malformed .npy header: the header ends early");
    unsigned char c = p->s[p->i];
    if (c == '\'' || c == '"') {
        p->i++;
        size_t start = p->i;
        while (p->i < p->n && p->s[p->i] != c) {
            if (p->s[p->i] == '\\') npy_fail("malformed .npy header: escapes in strings are not supported");
            p->i++;
        }
        if (p->i >= p->n) npy_fail("malformed .npy header: unterminated string");
        l->kind = LIT_STR; l->str = p->s + start; l->len = p->i - start;
        p->i++;
    } else if (c == '(') {
        p->i++;
        l->kind = LIT_TUPLE; l->all_ints = 1;
        size_t cap = 0;
        for (;;) {
            skip_ws(p);
            if (eat(p, ')')) break;
            lit_t item;
            literal(p, depth + 1, &item);
            free(item.items);
            if (item.kind != LIT_INT) l->all_ints = 0;
            else {
                if (l->n == cap) {
                    cap = cap ? bytes_of(cap, 2) : 8;
                    uint64_t *ni = realloc(l->items, bytes_of(cap, sizeof *ni));
                    if (!ni) out_of_memory(cap * sizeof *ni);
                    l->items = ni;
                }
                l->items[l->n++] = item.num;
            }
            skip_ws(p);
            if (!eat(p, ',')) { expect(p, ')'); break; }
        }
    } else if (c >= '0' && c <= '9') {
        size_t start = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        size_t end = p->i;
        /* Python 2 wrote long integers with an `L` suffix. */
        eat(p, 'L');
        uint64_t v = 0;
        for (size_t k = start; k < end; k++) {
            unsigned d = p->s[k] - '0';
            if (v > (UINT64_MAX - d) / 10)
                npy_fail("malformed .npy header: the dimension %.*s does not fit in 64 bits", (int)(end - start), (const char *)p->s + start);
            v = v * 10 + d;
        }
        l->kind = LIT_INT; l->num = v;
    } else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "True", 4)) {
        p->i += 4; l->kind = LIT_BOOL; l->boolean = 1;
    } else if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "False", 5)) {
        p->i += 5; l->kind = LIT_BOOL; l->boolean = 0;
    } else {
        char e[16]; escape_default(c, e);
        npy_fail("malformed .npy header: unexpected `%s` at byte %zu", e, p->i);
    }
}
static const char *const SUPPORTED = "<f4, <f2, |i1, |u1, <i4, <i8, |b1";
/* The `.npy` codes tir reads, by the index `in_code` and `out_code` give each tensor. */
static const struct { const char *code, *name, *descr; uint64_t size; } codes[] = {
    {"f4", "f32", "<f4", 4}, {"f2", "f16", "<f2", 2}, {"i1", "i8", "|i1", 1}, {"u1", "u8", "|u1", 1},
    {"i4", "i32", "<i4", 4}, {"i8", "i64", "<i8", 8}, {"b1", "bool", "|b1", 1},
};
/* Element k of a tensor of element type `code`, as a double (for the printed sums). */
static double elem_at(const void *p, int code, uint64_t k) {
    switch (code) {
    case 0: return ((const float *)p)[k];
    case 1: {
        uint16_t h = ((const uint16_t *)p)[k];
        int e = (h >> 10) & 31; double m = h & 1023, s = (h & 0x8000) ? -1 : 1;
        if (e == 31) return m ? NAN : s * INFINITY;
        return s * (e ? ldexp(1024 + m, e - 25) : ldexp(m, -24));
    }
    case 2: return ((const int8_t *)p)[k];
    case 3: case 6: return ((const uint8_t *)p)[k];
    case 4: return ((const int32_t *)p)[k];
    case 5: return (double)((const int64_t *)p)[k];
    default: return 0;
    }
}
/* A tensor type as the IR prints it, `tensor<1x3x8x8xf32>`. */
static char *type_str(const uint64_t *d, size_t r, const char *dtype) {
    size_t cap = bytes_of(r, 24) + 32, k;
    char *out = xmalloc(cap);
    k = (size_t)snprintf(out, cap, "tensor<");
    for (size_t i = 0; i < r; i++) k += (size_t)snprintf(out + k, cap - k, "%llux", (unsigned long long)d[i]);
    snprintf(out + k, cap - k, "%s>", dtype);
    return out;
}
/* A model compiled at batch 1 and independent along its leading symbolic dim (BATCHED, see
   `tir_ir::batch`): every input and output has that dim first; its value comes from the first
   input file read, the others must agree, and the model runs once per sample. */
#ifndef BATCHED
#define BATCHED 0
#define BATCH_NAME ""
#endif
static uint64_t batch = 1;
static const char *batch_from = NULL;
/* A model with run-time dims (DYNAMIC, see `tir_codegen::dynamic`): each dim takes its value
   from the first input file (or `--dim NAME=N`) that has it; the others must agree. */
#ifndef DYNAMIC
#define DYNAMIC 0
#endif
#if DYNAMIC
static long long dimv[NSYM + 1];
/* Where each dim got its value: -2 nowhere yet, -1 `--dim`, else the input's index. */
static int dim_src[NSYM + 1];
static unsigned long long cur_in_dims[NI + 1][MAXR];
static void dim_origin(int s, char *buf, size_t n) {
    if (dim_src[s] == -1) snprintf(buf, n, "--dim");
    else snprintf(buf, n, "the input `%%%s`", in_names[dim_src[s]]);
}
#endif
static void *read_npy(int input, const char *path) {
    npy_file = path; npy_input = input;
    uint64_t want[MAXR];
    for (int k = 0; k < in_rank[input]; k++) want[k] = in_dims[input][k];
    char *expected = type_str(want, (size_t)in_rank[input], codes[in_code[input]].name);
    size_t len;
    unsigned char *b = slurp(path, &len);
    if (len < 8 || memcmp(b, "\x93NUMPY", 6) != 0) {
        if (len <= 6 && !memcmp("\x93NUMPY", b, len)) npy_fail("the file ends inside the header");
        npy_fail("not a .npy file (the magic string \\x93NUMPY is missing)");
    }
    size_t hlen, start;
    if (b[6] == 1) {
        if (len < 10) npy_fail("the file ends inside the header");
        hlen = b[8] | (size_t)b[9] << 8; start = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        if (len < 12) npy_fail("the file ends inside the header");
        hlen = b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24; start = 12;
    } else npy_fail("unsupported .npy format version %u.%u", b[6], b[7]);
    if (len - start < hlen) npy_fail("the file ends inside the header");
    size_t end = start + hlen;
    if (!utf8_ok(b + start, hlen)) npy_fail("malformed .npy header: the header is not valid text");
    lexer_t p = { b + start, hlen, 0 };
    const unsigned char *descr = NULL; size_t descr_len = 0;
    int fortran = -1, has_shape = 0;
    uint64_t *shape = NULL; size_t rank = 0;
    expect(&p, '{');
    for (;;) {
        skip_ws(&p);
        if (eat(&p, '}')) break;
        lit_t key, value;
        literal(&p, 0, &key);
        if (key.kind != LIT_STR) npy_fail("malformed .npy header: dict keys must be strings");
        expect(&p, ':');
        literal(&p, 0, &value);
        int is_descr = key.len == 5 && !memcmp(key.str, "descr", 5);
        int is_fortran = key.len == 13 && !memcmp(key.str, "fortran_order", 13);
        int is_shape = key.len == 5 && !memcmp(key.str, "shape", 5);
        if (is_descr && value.kind == LIT_STR) { descr = value.str; descr_len = value.len; }
        else if (is_descr) npy_fail("expected %s, found dtype `a structured dtype`, which tir does not read (it reads %s)", expected, SUPPORTED);
        else if (is_fortran && value.kind == LIT_BOOL) fortran = value.boolean;
        else if (is_shape && value.kind == LIT_TUPLE) {
            if (!value.all_ints) npy_fail("malformed .npy header: shape entries must be integers");
            free(shape); shape = value.items; rank = value.n; has_shape = 1; value.items = NULL;
        } else if (is_fortran || is_shape) npy_fail("malformed .npy header: `%.*s` has the wrong kind of value", (int)key.len, (const char *)key.str);
        else npy_fail("malformed .npy header: unexpected key `%.*s`", (int)key.len, (const char *)key.str);
        free(value.items);
        skip_ws(&p);
        if (!eat(&p, ',')) { expect(&p, '}'); break; }
    }
    skip_ws(&p);
    if (p.i != p.n) npy_fail("malformed .npy header: text after the dict");
    if (!descr) npy_fail("malformed .npy header: no `descr` key");
    if (fortran < 0) npy_fail("malformed .npy header: no `fortran_order` key");
    if (!has_shape) npy_fail("malformed .npy header: no `shape` key");
    /* The dtype: an order character then a code tir reads. */
    int code = -1;
    for (int k = 0; k < 7 && descr_len == 3; k++) if (!memcmp(descr + 1, codes[k].code, 2)) code = k;
    unsigned char order = descr_len ? descr[0] : 0;
    if (code < 0 || (order != '<' && order != '|' && order != '>' && order != '='))
        npy_fail("expected %s, found dtype `%.*s`, which tir does not read (it reads %s)", expected, (int)descr_len, (const char *)descr, SUPPORTED);
    int big_endian = order == '>' && codes[code].size > 1;
    if (fortran) npy_fail("fortran_order is True: only C-order arrays are supported");
    /* The data is exactly what the file's own shape says. */
    uint64_t data_bytes = codes[code].size; int fits = 1;
    for (size_t k = 0; k < rank; k++) {
        if (shape[k] && data_bytes > UINT64_MAX / shape[k]) fits = 0;
        else data_bytes *= shape[k];
    }
    uint64_t found_bytes = len - end;
    if (!fits || data_bytes != found_bytes) {
        size_t cap = bytes_of(rank, 24) + 4, k = 1;
        char *dims = xmalloc(cap);
        dims[0] = '[';
        for (size_t i = 0; i < rank; i++)
            k += (size_t)snprintf(dims + k, cap - k, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
        snprintf(dims + k, cap - k, "]");
        npy_fail("the shape %s has %llu bytes of data but the file holds %llu", dims,
                 (unsigned long long)(fits ? data_bytes : UINT64_MAX), (unsigned long long)found_bytes);
    }
    /* Then it must be the model's input. */
#if BATCHED
    if (code == in_code[input] && rank == (size_t)in_rank[input] && rank > 0) {
        if (!batch_from) { batch = shape[0]; batch_from = in_names[input]; }
        else if (shape[0] != batch)
            npy_fail("the dim `%s` is %llu (from the input `%%%s`), but this file gives it %llu",
                     BATCH_NAME, (unsigned long long)batch, batch_from, (unsigned long long)shape[0]);
        want[0] = batch;
        free(expected);
        expected = type_str(want, (size_t)in_rank[input], codes[in_code[input]].name);
    }
#endif
#if DYNAMIC
    if (code == in_code[input] && rank == (size_t)in_rank[input]) {
        for (size_t k = 0; k < rank; k++) {
            int s = in_sym[input][k];
            if (s < 0) continue;
            if (dim_src[s] == -2) { dimv[s] = (long long)shape[k]; dim_src[s] = input; }
            else if ((unsigned long long)dimv[s] != shape[k]) {
                char from[1100]; dim_origin(s, from, sizeof from);
                npy_fail("the dim `%s` is %llu (from %s), but this file gives it %llu", sym_names[s],
                         (unsigned long long)dimv[s], from, (unsigned long long)shape[k]);
            }
            want[k] = (uint64_t)dimv[s];
        }
        free(expected);
        expected = type_str(want, (size_t)in_rank[input], codes[in_code[input]].name);
    }
    for (int k = 0; k < in_rank[input]; k++) cur_in_dims[input][k] = want[k];
#endif
    int same = code == in_code[input] && rank == (size_t)in_rank[input];
    for (size_t k = 0; same && k < rank; k++) same = shape[k] == want[k];
    if (!same) {
        npy_fail("expected %s, found %s", expected, type_str(shape, rank, codes[code].name));
    }
    uint64_t n = count((const unsigned long long *)want, in_rank[input]);
    size_t size = (size_t)codes[code].size;
    unsigned char *x = xalloc(bytes_of(n, size));
    memcpy(x, b + end, n * size);
    if (big_endian) {
        unsigned char *q = x;
        for (uint64_t k = 0; k < n; k++, q += size) {
            for (size_t i = 0; i < size / 2; i++) {
                unsigned char t = q[i]; q[i] = q[size - 1 - i]; q[size - 1 - i] = t;
            }
        }
    }
    free(shape); free(b); free(expected);
    return x;
}

/* ---- writing `.npy` outputs -------------------------------------------------------------
   A file appears complete or not at all, and nothing else is left behind on any failure: it is
   written unnamed (O_TMPFILE) and linked in under its name; an existing file is replaced by
   linking under a temporary name and renaming over it at once (the only moment a temporary
   name exists, removed again if the rename fails). Without O_TMPFILE (a file system that lacks
   it), the bytes go to a temporary name that any failure removes. */

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        c += w; n -= (size_t)w;
    }
    return 0;
}
static char *temp_name(const char *path, int attempt) {
    size_t n = strlen(path) + 64;
    char *t = xmalloc(n);
    snprintf(t, n, "%s.tmp%ld.%d", path, (long)getpid(), attempt);
    return t;
}
/* Renames `tmp` onto `path`, removing `tmp` if that fails. */
static int rename_or_remove(const char *tmp, const char *path) {
    if (rename(tmp, path) == 0) return 0;
    int e = errno; unlink(tmp); errno = e;
    return -1;
}
/* `path` with every symbolic link in its last component followed, whether or not the final
   target exists yet (a fresh string); NULL with ELOOP after 40 links, as the kernel counts. */
static char *follow_links(const char *path) {
    char *p = xmalloc(strlen(path) + 1);
    strcpy(p, path);
    for (int hops = 0; hops < 40; hops++) {
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        size_t cap = (size_t)st.st_size + 1 > 256 ? (size_t)st.st_size + 1 : 256;
        char *t = xmalloc(cap);
        ssize_t n = readlink(p, t, cap - 1);
        if (n < 0) { int e = errno; free(t); free(p); errno = e; return NULL; }
        t[n] = 0;
        const char *slash = strrchr(p, '/');
        if (t[0] != '/' && slash) {
            size_t dl = (size_t)(slash - p) + 1;
            char *j = xmalloc(dl + (size_t)n + 1);
            memcpy(j, p, dl); memcpy(j + dl, t, (size_t)n + 1);
            free(t); t = j;
        }
        free(p); p = t;
    }
    free(p);
    errno = ELOOP;
    return NULL;
}
static int publish_at(const char *path, const void *hdr, size_t hn, const void *data, size_t dn);
/* A symbolic link stays a link: the file it names is the one replaced. Something that is not a
   regular file (/dev/null, a FIFO, a terminal) is a stream to write into, not a file to
   replace: renaming over it would destroy it. */
static int publish(const char *path, const void *hdr, size_t hn, const void *data, size_t dn) {
    char *real = follow_links(path);
    if (!real) return -1;
    struct stat st;
    int rc;
    if (stat(real, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        int fd = open(real, O_WRONLY | O_CLOEXEC);
        rc = fd < 0 ? -1 : (write_all(fd, hdr, hn) || write_all(fd, data, dn)) ? -1 : 0;
        int e = errno;
        if (fd >= 0 && close(fd) != 0 && rc == 0) { rc = -1; e = errno; }
        errno = e;
    } else {
        rc = publish_at(real, hdr, hn, data, dn);
    }
    int e = errno; free(real); errno = e;
    return rc;
}
static int publish_at(const char *path, const void *hdr, size_t hn, const void *data, size_t dn) {
    size_t pl = strlen(path);
    char *dir = xmalloc(pl + 2);
    const char *slash = strrchr(path, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else { memcpy(dir, path, (size_t)(slash - path)); dir[slash - path] = 0; }
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    free(dir);
    if (fd >= 0) {
        if (write_all(fd, hdr, hn) || write_all(fd, data, dn)) { int e = errno; close(fd); errno = e; return -1; }
        char proc[64]; snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        int rc = linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
        for (int attempt = 0; rc != 0 && errno == EEXIST && attempt < 100; attempt++) {
            char *tmp = temp_name(path, attempt);
            if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) {
                rc = rename_or_remove(tmp, path);
                free(tmp);
                break;
            }
            free(tmp);
        }
        int e = errno;
        if (close(fd) != 0 && rc == 0) return -1;
        errno = e;
        if (rc == 0 || errno != ENOENT) return rc;
        /* No /proc to link through: write again under a temporary name. */
    } else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        char *tmp = temp_name(path, attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) { int e = errno; free(tmp); if (e == EEXIST) continue; errno = e; return -1; }
        int bad = write_all(fd, hdr, hn) || write_all(fd, data, dn);
        int e = errno;
        bad |= close(fd) != 0;
        if (bad) { unlink(tmp); free(tmp); errno = e; return -1; }
        int rc = rename_or_remove(tmp, path);
        free(tmp);
        return rc;
    }
    errno = EEXIST;
    return -1;
}
static int write_npy(const char *path, const void *x, int code, const unsigned long long *d, int r) {
    char shape[256] = "";
    for (int k = 0; k < r; k++) {
        char b[32]; snprintf(b, sizeof b, "%llu,%s", d[k], (r > 1 && k < r - 1) ? " " : "");
        strncat(shape, b, sizeof shape - strlen(shape) - 1);
    }
    if (r > 1) shape[strlen(shape) - 1] = 0;
    char hdr[512];
    int n = snprintf(hdr, 400, "\x93NUMPY\x01%c..{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", 0, codes[code].descr, shape);
    /* The data starts at a multiple of 64 bytes; the header ends with a newline. */
    int total = n + 1, pad = (64 - total % 64) % 64;
    unsigned short hl = (unsigned short)(total + pad - 10);
    hdr[8] = (char)(hl & 0xff); hdr[9] = (char)(hl >> 8);
    memset(hdr + n, ' ', (size_t)pad);
    hdr[n + pad] = '\n';
    return publish(path, hdr, (size_t)(n + pad + 1), x, bytes_of(count(d, r), (size_t)codes[code].size));
}

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
/* The process's CPU time (every thread's) in ms: beside wall time, it tells a run slowed by a
   busy neighbour (wall grows, CPU does not) from a slow one. */
static double cpu_now(void) {
    struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
/* ---- the thread pool ---------------------------------------------------------------------
   `--threads N`: N - 1 workers started once, parked between ops (a short spin, then a futex
   wait on the job counter). The model hands each tiled kernel to `pool_parallel_for`.
   Which thread computes a tile never changes what it computes, so the outputs are the same
   bits for every N (codegen/src/parallel.rs); the pool only decides who runs what, and when.

   Each of the N threads (the caller is thread 0) owns a contiguous share of a job's tiles,
   `[p*U/N, (p+1)*U/N)`, and takes them from the front; a thread that has finished its own
   share takes tiles from the back of another's. Why (measured, docs/codegen.md "Threads"):
   a thread then computes the same part of every op's output, so an op finds much of its
   input in the cache of the core that wrote it. With tiles handed out first come first
   served, which thread got which tile was a coin toss, and the tiles' summed time at 2
   threads was 48-57% above 1 thread's on iris_landmark (whose 0.66 MB slab fits one core's
   L2), with shares 21-33%. A thread that the scheduler does not run (a busy machine) still
   costs nothing: the others take its share from the back. Every word two threads write has
   its own cache line. */

#define MAX_THREADS 1024
/* Pause iterations a parked thread spins before it sleeps (tens of microseconds: the gap
   between two ops of a model is shorter, so workers do not sleep within a run). */
#define SPIN 4000
/* A share is packed in one word so that its owner (taking from the front) and a thief
   (taking from the back) claim with one compare-and-swap: the job's tag, then the first
   and the end of the unclaimed units. */
#define UNIT_BITS 20
#define MAX_UNITS ((1LL << UNIT_BITS) - 1)
#define TAG_BITS (64 - 2 * UNIT_BITS)
typedef void (*tile_body_t)(void *, long long, long long);
/* One parallel_for. Two slots, used by alternate jobs: a job's slot is rewritten only two jobs
   later, when no tile of it can still be claimed (below). A job of more than MAX_UNITS
   tiles is handed out in MAX_UNITS units of consecutive tiles. */
typedef struct { tile_body_t body; void *ctx; long long tiles, units; } job_t;
typedef struct { _Alignas(64) _Atomic uint64_t w; } share_t;
typedef struct {
    int threads;
    _Alignas(64) _Atomic uint32_t job;  /* bumped for every parallel_for; workers wait on it */
    _Atomic int sleepers;               /* workers in a futex wait: only then is a wake needed */
    _Alignas(64) _Atomic long long done; /* units of the current job finished */
    _Alignas(64) job_t slot[2];
    share_t *share;                     /* one per thread */
} pool_t;
static pool_t pool;

static void relax(void) { __builtin_ia32_pause(); }
static uint64_t share_word(uint32_t job, long long lo, long long hi) {
    return ((uint64_t)job << (2 * UNIT_BITS)) | ((uint64_t)lo << UNIT_BITS) | (uint64_t)hi;
}
static uint32_t share_tag(uint64_t w) { return (uint32_t)(w >> (2 * UNIT_BITS)); }
static long long share_lo(uint64_t w) { return (long long)((w >> UNIT_BITS) & MAX_UNITS); }
static long long share_hi(uint64_t w) { return (long long)(w & MAX_UNITS); }
static uint32_t job_tag(uint32_t job) { return job & ((1u << TAG_BITS) - 1); }

/* Claims one unit of share `s` of job `job`, from the front (`front`) or the back, and runs
   its tiles. Returns 0 when the share is empty or belongs to another job. */
static int take_one(pool_t *p, share_t *s, uint32_t job, int front) {
    for (;;) {
        uint64_t cur = atomic_load(&s->w);
        long long lo = share_lo(cur), hi = share_hi(cur);
        if (share_tag(cur) != job_tag(job) || lo >= hi) return 0;
        /* Reading the slot before the claim is safe: while a unit of this job is unclaimed
           the job is unfinished, so its slot is not rewritten; if it was claimed meanwhile,
           the exchange fails and nothing read is used. */
        const job_t *jb = &p->slot[job & 1];
        tile_body_t body = jb->body; void *ctx = jb->ctx;
        long long tiles = jb->tiles, units = jb->units;
        long long u = front ? lo : hi - 1;
        uint64_t next = front ? share_word(job_tag(job), lo + 1, hi) : share_word(job_tag(job), lo, hi - 1);
        if (!atomic_compare_exchange_weak(&s->w, &cur, next)) continue;
        body(ctx, u * tiles / units, (u + 1) * tiles / units);
        atomic_fetch_add(&p->done, 1);
        return 1;
    }
}
/* Thread `me` runs its own share of job `job`, then helps the others from the back. */
static void take_tiles(pool_t *p, uint32_t job, int me) {
    while (take_one(p, &p->share[me], job, 1)) {}
    for (int k = 1; k < p->threads; k++) {
        share_t *s = &p->share[(me + k) % p->threads];
        while (take_one(p, s, job, 0)) {}
    }
}
typedef struct { pool_t *p; int me; } worker_arg_t;
static void *pool_worker(void *arg) {
    worker_arg_t *a = arg;
    pool_t *p = a->p;
    int me = a->me;
    uint32_t seen = 0;
    for (;;) {
        uint32_t j;
        for (int spins = 0; (j = atomic_load(&p->job)) == seen;) {
            if (spins < SPIN) { spins++; relax(); continue; }
            atomic_fetch_add(&p->sleepers, 1);
            syscall(SYS_futex, &p->job, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = j;
        take_tiles(p, j, me);
    }
    return NULL;
}
/* The `parallel_for` of `<model>_run_parallel`: tiles 0..tiles over the pool's threads, the
   calling thread included; returns when all are done. It waits for finished tiles, not for
   workers: a worker the scheduler has not run yet costs nothing, as the caller takes the
   tiles it would have taken. */
static void pool_parallel_for(void *pp, tile_body_t body, void *ctx, long long tiles) {
    pool_t *p = pp;
    if (p->threads <= 1 || tiles <= 1) { body(ctx, 0, tiles); return; }
    long long units = tiles < MAX_UNITS ? tiles : MAX_UNITS;
    uint32_t job = atomic_load(&p->job) + 1;
    p->slot[job & 1] = (job_t){ body, ctx, tiles, units };
    atomic_store(&p->done, 0);
    for (int t = 0; t < p->threads; t++)
        atomic_store(&p->share[t].w, share_word(job_tag(job), t * units / p->threads, (t + 1) * units / p->threads));
    atomic_store(&p->job, job);
    if (atomic_load(&p->sleepers) > 0) syscall(SYS_futex, &p->job, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    take_tiles(p, job, 0);
    /* Units still running on workers: spin, then yield the core (more threads than cores must
       not spin against the thread they wait for). */
    for (int spins = 0; atomic_load(&p->done) < units; spins++) {
        if (spins < SPIN) relax(); else sched_yield();
    }
}
static void pool_start(int threads) {
    pool.threads = threads;
    pool.share = aligned_alloc(64, sizeof(share_t) * (size_t)threads);
    worker_arg_t *args = xmalloc(sizeof(worker_arg_t) * (size_t)threads);
    if (!pool.share) { fprintf(stderr, "error: out of memory for %d threads\n", threads); exit(1); }
    for (int t = 0; t < threads; t++) atomic_store(&pool.share[t].w, 0);
    for (int i = 1; i < threads; i++) {
        args[i] = (worker_arg_t){ &pool, i };
        pthread_t t;
        int e = pthread_create(&t, NULL, pool_worker, &args[i]);
        if (e) { fprintf(stderr, "error: cannot start thread %d of %d: %s\n", i + 1, threads, strerror(e)); exit(1); }
        pthread_detach(t);
    }
}
/* The default thread count: the CPUs this process may run on (as onnxruntime does). */
static int cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double *prof_t; static double prof_last;
static void prof_tick(int i) {
    double t = now();
    if (i > 0) prof_t[i - 1] = t - prof_last;
    prof_last = t;
}
#if DYNAMIC
static void *dyn_slab; static plan_t *cur_plan;
/* The profile's table at the shape that runs: one `tir_prof_line` per op the module lists
   (`<model>_profile_ops`), its shape and flops evaluated at these dims. */
static char *profile_info(void) {
    size_t cap = 1, len = 0;
    for (const int *op = MODEL_PROFILE_OPS; *op >= 0; op++) cap += (size_t)tir_prof_line(dimv, *op, NULL, 0);
    char *info = xmalloc(cap);
    info[0] = 0;
    for (const int *op = MODEL_PROFILE_OPS; *op >= 0; op++) len += (size_t)tir_prof_line(dimv, *op, info + len, cap - len);
    return info;
}
#endif
/* --profile N: per op, the median over N runs of the time between its tick and the next.
   With run-time dims, at the shape of this run (its plan's offsets and these dims). */
static void profile(const void *const *ins, void *const *outs, void *slab, long runs) {
#if DYNAMIC
    (void)slab;
    char *info = profile_info();
#else
    const char *info = MODEL_PROFILE_INFO;
#endif
    int n = 0;
    for (const char *c = info; *c; c++) n += *c == '\n';
    size_t ops = n ? (size_t)n : 1;
    double *all = xmalloc(bytes_of(bytes_of(ops, (size_t)runs), sizeof(double)));
    prof_t = xmalloc(sizeof(double) * ops);
    for (long r = 0; r < runs; r++) {
#if DYNAMIC
        MODEL_RUN_DYN_PROFILED(ins, outs, dyn_slab, cur_plan->offsets, dimv, prof_tick, pool_parallel_for, &pool);
#else
        MODEL_RUN_PROFILED(ins, outs, slab, prof_tick, pool_parallel_for, &pool);
#endif
        for (int i = 0; i < n; i++) all[(size_t)i * runs + r] = prof_t[i];
    }
    double *med = xmalloc(sizeof(double) * ops), total = 0;
    for (int i = 0; i < n; i++) {
        qsort(all + (size_t)i * runs, runs, sizeof(double), cmpd);
        med[i] = all[(size_t)i * runs + runs / 2];
        total += med[i];
    }
    printf("profile over %ld runs (median per op), total %.3f ms\n", runs, total);
    printf("%4s %9s %6s %8s  %-22s %-28s %s\n", "#", "ms", "%", "GFLOP/s", "kind", "result", "shape");
    char kinds[256][64]; double ktime[256]; int nk = 0;
    const char *line = info;
    for (int i = 0; i < n; i++) {
        char kind[64] = "", res[256] = "", shape[128] = ""; unsigned long long fl = 0;
        const char *end = strchr(line, '\n');
        const char *f[4]; int nf = 0; f[nf++] = line;
        for (const char *c = line; c < end && nf < 4; c++) if (*c == '\t') f[nf++] = c + 1;
        if (nf == 4) {
            snprintf(kind, sizeof kind, "%.*s", (int)(f[1] - f[0] - 1), f[0]);
            snprintf(res, sizeof res, "%.*s", (int)(f[2] - f[1] - 1), f[1]);
            snprintf(shape, sizeof shape, "%.*s", (int)(f[3] - f[2] - 1), f[2]);
            fl = strtoull(f[3], NULL, 10);
        }
        char gf[32] = "-";
        if (fl && med[i] > 0) snprintf(gf, sizeof gf, "%.1f", fl / (med[i] * 1e6));
        printf("%4d %9.3f %6.1f %8s  %-22s %-28s %s\n", i, med[i], total > 0 ? 100 * med[i] / total : 0, gf, kind, res, shape);
        int k = 0;
        while (k < nk && strcmp(kinds[k], kind)) k++;
        if (k == nk && nk < 256) { snprintf(kinds[nk], 64, "%s", kind); ktime[nk++] = 0; }
        if (k < nk) ktime[k] += med[i];
        line = end + 1;
    }
    printf("by kind:\n");
    for (int k = 0; k < nk; k++) printf("  %-22s %9.3f ms %6.1f%%\n", kinds[k], ktime[k], total > 0 ? 100 * ktime[k] / total : 0);
    free(all); free(prof_t); free(med);
#if DYNAMIC
    free(info);
#endif
}

/* ---- the command line ------------------------------------------------------------------
   Every misuse (an unknown flag, a flag without its value or given twice, a count that is not
   a whole number from 1 to MAX_RUNS) is refused with a message and exit code 2. */

static const char *prog = "model";
#if DYNAMIC
#define USAGE "usage: %s [--input NAME=FILE.npy ...] [--dim NAME=N ...] [--output DIR|FILE.npy] [--print-plan FILE.csv] [--bench N] [--profile N] [--threads N]\n"
#else
#define USAGE "usage: %s [--input NAME=FILE.npy ...] [--output DIR|FILE.npy] [--bench N] [--profile N] [--threads N]\n"
#endif
static int usage(void) {
    fprintf(stderr, USAGE, prog);
    return 2;
}
static int misuse(const char *fmt, ...) {
    va_list ap;
    fputs("error: ", stderr);
    va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap);
    fputc('\n', stderr);
    return usage();
}
/* A count of runs: decimal digits only (no sign, space or suffix), from 1 to MAX_RUNS. */
static int parse_runs(const char *s, long *runs) {
    long v = 0;
    if (!*s) return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (*s - '0');
        if (v > MAX_RUNS) return 0;
    }
    *runs = v;
    return v >= 1;
}
#if DYNAMIC
/* The planner (`dynamic_plan.c`) is above, with the model's tables. */
/* --print-plan FILE: the records and offsets of a plan as CSV, written atomically. */
static int print_plan(const char *path, const plan_t *p) {
    size_t cap = 256 + (size_t)NREC * 1200, n = 0;
    char *buf = xmalloc(cap);
    n += (size_t)snprintf(buf + n, cap - n, "name,first_op,last_op,size,offset\n");
    for (int r = 0; r < NREC; r++)
        n += (size_t)snprintf(buf + n, cap - n, "%s,%d,%d,%llu,%llu\n", rec_name[r], rec_first[r], rec_last[r],
                              p->bytes[r], p->offsets[rec_alloc[r]]);
    n += (size_t)snprintf(buf + n, cap - n, "# slab,%llu\n", p->size);
    int rc = publish(path, buf, n, "", 0);
    free(buf);
    return rc;
}
static unsigned long long dyn_slab_size;
#endif
/* One run of the model: at batch 1 once per sample (BATCHED), each operand advanced by its
   per-sample size; else once. */
static void run_model(const void *const *ins, void *const *outs, void *slab) {
#if BATCHED
    for (uint64_t b = 0; b < batch; b++) {
        const void *bi[NI + 1]; void *bo[NO + 1];
        for (int i = 0; i < NI; i++) bi[i] = (const char *)ins[i] + b * count(in_dims[i], in_rank[i]) * codes[in_code[i]].size;
        for (int j = 0; j < NO; j++) bo[j] = (char *)outs[j] + b * count(out_dims[j], out_rank[j]) * codes[out_code[j]].size;
        MODEL_RUN_PARALLEL(bi, bo, slab, pool_parallel_for, &pool);
    }
#elif DYNAMIC
    (void)slab;
    MODEL_RUN_DYN(ins, outs, dyn_slab, cur_plan->offsets, dimv, pool_parallel_for, &pool);
#else
    MODEL_RUN_PARALLEL(ins, outs, slab, pool_parallel_for, &pool);
#endif
}
int main(int argc, char **argv) {
    if (argc > 0 && argv[0]) prog = argv[0];
    const char *paths[NI + 1] = {0};
    const char *out = NULL;
    long bench = 0, prof = 0, threads = 0;
#if DYNAMIC
    const char *plan_path = NULL;
    for (int s = 0; s < NSYM; s++) dim_src[s] = -2;
    tir_pin(dimv, dim_src);
#endif
    for (int a = 1; a < argc; a++) {
        const char *flag = argv[a];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            printf(USAGE, prog);
            return 0;
        }
#if DYNAMIC
        if (!strcmp(flag, "--dim") || !strcmp(flag, "--print-plan")) {
            if (a + 1 >= argc) return misuse("%s needs a value", flag);
            const char *value = argv[++a];
            if (!strcmp(flag, "--print-plan")) {
                if (plan_path) return misuse("--print-plan is given more than once");
                if (!*value) return misuse("--print-plan wants a file");
                plan_path = value;
                continue;
            }
            const char *eq = strchr(value, '=');
            long v = 0;
            if (!eq || eq == value) return misuse("--dim `%s`: expected NAME=N", value);
            int found = -1;
            for (int s = 0; s < NSYM; s++) if (strlen(sym_names[s]) == (size_t)(eq - value) && !strncmp(sym_names[s], value, (size_t)(eq - value))) found = s;
            if (found < 0) return misuse("--dim `%s`: the model has no dim `%.*s`", value, (int)(eq - value), value);
            if (dim_src[found] != -2) return misuse("--dim: `%s` is given more than once", sym_names[found]);
            if (!parse_runs(eq + 1, &v) && strcmp(eq + 1, "0")) return misuse("--dim `%s`: expected a whole number from 0 to %ld", value, MAX_RUNS);
            dimv[found] = v; dim_src[found] = -1;
            continue;
        }
#endif
        int takes_value = !strcmp(flag, "--input") || !strcmp(flag, "--output") || !strcmp(flag, "--bench") || !strcmp(flag, "--profile") || !strcmp(flag, "--threads");
        if (!takes_value) return misuse("unknown argument `%s`", flag);
        if (a + 1 >= argc) return misuse("%s needs a value", flag);
        const char *value = argv[++a];
        if (!strcmp(flag, "--input")) {
            const char *eq = strchr(value, '=');
            if (!eq || eq == value || !eq[1]) return misuse("--input `%s`: expected NAME=FILE.npy", value);
            const char *nm = value[0] == '%' ? value + 1 : value;
            size_t nl = (size_t)(eq - nm);
            int found = -1;
            for (int i = 0; i < NI; i++) if (strlen(in_names[i]) == nl && !strncmp(in_names[i], nm, nl)) found = i;
            if (found < 0) return misuse("--input `%s`: the model has no input `%%%.*s`", value, (int)nl, nm);
            if (paths[found]) return misuse("--input: `%%%s` is given more than once", in_names[found]);
            paths[found] = eq + 1;
        } else if (!strcmp(flag, "--output")) {
            if (out) return misuse("--output is given more than once");
            if (!*value) return misuse("--output wants a directory or a .npy file");
            out = value;
        } else if (!strcmp(flag, "--threads")) {
            if (threads) return misuse("--threads is given more than once");
            if (!parse_runs(value, &threads) || threads > MAX_THREADS)
                return misuse("--threads wants a whole number of threads from 1 to %d, got `%s`", MAX_THREADS, value);
        } else {
            long *runs = !strcmp(flag, "--bench") ? &bench : &prof;
            if (*runs) return misuse("%s is given more than once", flag);
            if (!parse_runs(value, runs))
                return misuse("%s wants a whole number of runs from 1 to %ld, got `%s`", flag, MAX_RUNS, value);
        }
    }
    const void *ins[NI + 1]; void *outs[NO + 1];
    /* Files first: a BATCHED model's batch comes from them. */
    for (int i = 0; i < NI; i++) if (paths[i]) ins[i] = read_npy(i, paths[i]);
#if DYNAMIC
    for (int i = 0; i < NI; i++) {
        if (paths[i]) continue;
        for (int k = 0; k < in_rank[i]; k++) {
            int s = in_sym[i][k];
            if (s >= 0 && dim_src[s] == -2) {
                fprintf(stderr, "error: the dim `%s` has no value: give an input file that has it (--input NAME=FILE.npy) or --dim %s=N\n", sym_names[s], sym_names[s]);
                return 1;
            }
            cur_in_dims[i][k] = s >= 0 ? (unsigned long long)dimv[s] : in_dims[i][k];
        }
    }
#endif
    for (int i = 0; i < NI; i++) {
        if (paths[i]) continue;
#if DYNAMIC
        uint64_t n = count(cur_in_dims[i], in_rank[i]);
#else
        uint64_t n = count(in_dims[i], in_rank[i]) * (BATCHED ? batch : 1);
#endif
        int c = in_code[i];
        void *x = xalloc(bytes_of(n, (size_t)codes[c].size));
        char key[1024]; snprintf(key, sizeof key, "input:%s", in_names[i]);
        uint64_t st = fnv1a(key);
        /* f32 uniform in [-1, 1); integers (and f16) uniform in [-4, 4) ([0, 8) for u8); bools 0 or 1. */
        for (uint64_t k = 0; k < n; k++) {
            uint64_t z = splitmix(&st);
            switch (c) {
            case 0: ((float *)x)[k] = (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f; break;
            case 1: { static const uint16_t small[8] = {0xC400, 0xC200, 0xC000, 0xBC00, 0, 0x3C00, 0x4000, 0x4200};
                      ((uint16_t *)x)[k] = small[z >> 61]; break; }
            case 2: ((int8_t *)x)[k] = (int8_t)((int)(z >> 61) - 4); break;
            case 3: ((uint8_t *)x)[k] = (uint8_t)(z >> 61); break;
            case 4: ((int32_t *)x)[k] = (int32_t)(z >> 61) - 4; break;
            case 5: ((int64_t *)x)[k] = (int64_t)(z >> 61) - 4; break;
            case 6: ((uint8_t *)x)[k] = (uint8_t)(z >> 63); break;
            default: break;
            }
        }
        ins[i] = x;
    }
    /* Each output's shape: as compiled, with the batch first when BATCHED. */
    unsigned long long odims[NO + 1][MAXR];
    for (int j = 0; j < NO; j++) {
        for (int k = 0; k < out_rank[j]; k++) odims[j][k] = out_dims[j][k];
        if (BATCHED && out_rank[j] > 0) odims[j][0] = batch;
#if DYNAMIC
        tir_out_dims(dimv, j, odims[j]);
#endif
        outs[j] = xalloc(bytes_of(count(odims[j], out_rank[j]), (size_t)codes[out_code[j]].size));
    }
#if DYNAMIC
    /* The model's run-time checks at these dims, then the plan at this shape (cached),
       growing the slab when the plan needs more. */
    {
        char msg[2048];
        if (tir_checks(dimv, msg, sizeof msg)) { fprintf(stderr, "error: %s\n", msg); return 1; }
    }
    int fresh;
    double plan_t0 = now();
    cur_plan = plan_for(dimv, &fresh);
    double plan_ms = now() - plan_t0;
    if (!cur_plan) {
        fprintf(stderr, "error: at this shape a buffer or the slab needs more than 2^62 bytes\n");
        return 1;
    }
    if (cur_plan->size > dyn_slab_size || !dyn_slab) {
        free(dyn_slab);
        dyn_slab = xalloc(cur_plan->size ? cur_plan->size : 1);
        dyn_slab_size = cur_plan->size;
    }
    void *slab = dyn_slab;
    printf("slab: %llu bytes\n", cur_plan->size);
    printf("plan: %d buffers planned in %.2f us at", NREC, plan_ms * 1e3);
    for (int s = 0; s < NSYM; s++) printf(" %s=%lld", sym_names[s], dimv[s]);
    printf("\n");
    if (plan_path && print_plan(plan_path, cur_plan)) {
        int e = errno;
        fprintf(stderr, "%s: error: cannot write it: %s (os error %d)\n", plan_path, strerror(e), e);
        return 1;
    }
#else
    unsigned long long slab_size = MODEL_SLAB();
    void *slab = xalloc(slab_size);
    printf("slab: %llu bytes\n", slab_size);
#endif
    pool_start(threads ? (int)threads : cpus_allowed());
    run_model(ins, outs, slab);
    if (bench > 0) {
        double *t = xmalloc(bytes_of((size_t)bench, sizeof(double)));
        double c0 = cpu_now();
        for (long r = 0; r < bench; r++) { double t0 = now(); run_model(ins, outs, slab); t[r] = now() - t0; }
        double cpu = (cpu_now() - c0) / (double)bench;
        qsort(t, bench, sizeof(double), cmpd);
        printf("latency over %ld runs: median %.3f ms, min %.3f ms, cpu %.3f ms per run\n", bench, t[bench / 2], t[0], cpu);
#if DYNAMIC
        /* What planning a new shape costs once the program is warm (the first plan above also
           paid for bringing the planner's code and tables into the caches): the plan made
           again, outside the cache. */
        /* 100 plans per sample (a plan takes about as long as reading the clock); every plan's
           size and offsets go to a volatile sum so that none is optimised away. */
        plan_t *scratch = xmalloc(sizeof *scratch);
        volatile unsigned long long sink = 0;
        for (long r = 0; r < bench; r++) {
            double t0 = now();
            for (int i = 0; i < 100; i++) {
                memcpy(scratch->dims, cur_plan->dims, sizeof scratch->dims);
                greedy_by_size(scratch);
                unsigned long long sum = scratch->size;
                for (int a = 0; a < NALLOC; a++) sum += scratch->offsets[a];
                sink += sum;
            }
            t[r] = (now() - t0) / 100;
        }
        qsort(t, bench, sizeof(double), cmpd);
        printf("re-plan over %ld runs: median %.3f us, min %.3f us\n", bench, t[bench / 2] * 1e3, t[0] * 1e3);
        free(scratch);
        /* A new shape in a serving process: after an inference at this shape (whose data and
           code then fill the caches), plan_for at a shape it has not seen (the last dim one
           more each time), through the cache's lookup and least-recently-used replacement.
           The process's first plan above also paid for bringing the planner's code and tables
           into the caches (no page faults: measured), which a process does once. The current
           shape is looked up before each run, so it is the most recently used and never the
           one replaced. */
        if (NSYM > 0) {
            long long nd[NSYM + 1];
            for (long r = 0; r < bench; r++) {
                int f;
                cur_plan = plan_for(dimv, &f);
                run_model(ins, outs, slab);
                memcpy(nd, dimv, sizeof(long long) * NSYM);
                nd[NSYM - 1] += 1 + r;
                double t0 = now();
                plan_t *np = plan_for(nd, &f);
                t[r] = now() - t0;
                sink += np ? np->size : 0;
            }
            cur_plan = plan_for(dimv, &fresh);
            qsort(t, bench, sizeof(double), cmpd);
            printf("new shape over %ld runs: median %.3f us, min %.3f us\n", bench, t[bench / 2] * 1e3, t[0] * 1e3);
        }
#endif
        free(t);
    }
    if (prof > 0) profile(ins, outs, slab, prof);
    size_t out_len = out ? strlen(out) : 0;
    int single = out && NO == 1 && out_len > 4 && !strcmp(out + out_len - 4, ".npy");
    for (int j = 0; j < NO && out; j++) {
        size_t n = out_len + strlen(out_names[j]) + 8;
        char *path = xmalloc(n);
        if (single) snprintf(path, n, "%s", out);
        else snprintf(path, n, "%s/%s.npy", out, out_names[j]);
        if (write_npy(path, outs[j], out_code[j], odims[j], out_rank[j])) {
            int e = errno;
            fprintf(stderr, "%s: error: cannot write it: %s (os error %d)\n", path, strerror(e), e);
            return 1;
        }
        free(path);
    }
    if (!out) {
        for (int j = 0; j < NO; j++) {
            uint64_t n = count(odims[j], out_rank[j]); double s = 0;
            for (uint64_t k = 0; k < n; k++) s += elem_at(outs[j], out_code[j], k);
            printf("%s: %llu values, sum %.6g\n", out_names[j], (unsigned long long)n, s);
        }
    }
    return 0;
}
