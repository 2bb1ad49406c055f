//! The executable around a compiled model: a C `main` (generated per model, so the input and
//! output names and shapes are constants) linked with the model's object file by the system
//! `cc`.
//!
//! `./OUT [--input NAME=FILE.npy ...] [--output DIR|FILE.npy] [--bench N]`: allocates exactly
//! one 64-byte aligned slab of the planned size, reads `.npy` inputs (v1/v2/v3 headers,
//! `<f4`, C order, the declared shape; anything else is refused naming the input, exit 1) or
//! generates them with `tir_interp`'s rule (SplitMix64 seeded by FNV-1a of `input:NAME`, so
//! the interpreter's default inputs are the same numbers), writes one `NAME.npy` per output,
//! prints the slab size and with `--bench N` the median and minimum latency. `--profile N`
//! runs the model N times through `<model>_run_profiled` (see [`crate::profile`]) and prints
//! one row per op: its median time over the runs, share of the total, kind, result, shape and
//! GFLOP/s, then the time per kind.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use tir_ir::Function;

/// The C source of `main` for `func`, calling `<name>_run`.
pub fn main_c(func: &Function, name: &str) -> String {
    let mut s = String::new();
    let shapes = |tys: Vec<Vec<u64>>| -> (String, String) {
        let ranks: Vec<String> = tys.iter().map(|t| t.len().to_string()).collect();
        let dims: Vec<String> = tys
            .iter()
            .map(|t| {
                let d: Vec<String> = t.iter().map(|x| x.to_string()).collect();
                format!(
                    "{{{}}}",
                    if d.is_empty() {
                        "0".into()
                    } else {
                        d.join(",")
                    }
                )
            })
            .collect();
        (ranks.join(","), dims.join(","))
    };
    let in_names: Vec<String> = func
        .params
        .iter()
        .map(|&p| format!("{:?}", func.values[p].name))
        .collect();
    let out_names: Vec<String> = func
        .returns
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let n = &func.values[v].name;
            // Two outputs of the same value get distinct files.
            if func.returns[..j].contains(&v) {
                format!("{:?}", format!("{n}_{j}"))
            } else {
                format!("{n:?}")
            }
        })
        .collect();
    let ity: Vec<Vec<u64>> = func
        .params
        .iter()
        .map(|&p| func.ty(p).map(|t| t.shape.clone()).unwrap_or_default())
        .collect();
    let oty: Vec<Vec<u64>> = func.result_types.iter().map(|t| t.shape.clone()).collect();
    let (ir, id) = shapes(ity);
    let (or, od) = shapes(oty);
    let ni = func.params.len();
    let no = func.returns.len();
    let _ = writeln!(s, "#define NI {ni}\n#define NO {no}\n#define MAXR 8");
    let _ = writeln!(
        s,
        "static const char *in_names[] = {{{}}};",
        if ni == 0 {
            "0".into()
        } else {
            in_names.join(",")
        }
    );
    let _ = writeln!(
        s,
        "static const int in_rank[] = {{{}}};\nstatic const unsigned long long in_dims[][MAXR] = {{{}}};",
        if ni == 0 { "0".into() } else { ir },
        if ni == 0 { "{0}".into() } else { id }
    );
    let _ = writeln!(
        s,
        "static const char *out_names[] = {{{}}};",
        if no == 0 {
            "0".into()
        } else {
            out_names.join(",")
        }
    );
    let _ = writeln!(
        s,
        "static const int out_rank[] = {{{}}};\nstatic const unsigned long long out_dims[][MAXR] = {{{}}};",
        if no == 0 { "0".into() } else { or },
        if no == 0 { "{0}".into() } else { od }
    );
    let _ = writeln!(
        s,
        "void {name}_run(const void *const *inputs, void *const *outputs, void *slab);\n\
         unsigned long long {name}_slab_size(void);\n\
         void {name}_run_profiled(const void *const *inputs, void *const *outputs, void *slab, void (*tick)(int));\n\
         extern const char {name}_profile_info[];\n\
         #define MODEL_RUN {name}_run\n#define MODEL_SLAB {name}_slab_size\n\
         #define MODEL_RUN_PROFILED {name}_run_profiled\n#define MODEL_PROFILE_INFO {name}_profile_info"
    );
    s.push_str(MAIN_C);
    // The guard helpers (called only by modules compiled with a guard).
    s.push_str(crate::guard::GUARD_C);
    s
}

/// Compiles `main.c` and links it with `object` into `out` using `cc`.
pub fn link(main_c: &str, object: &[u8], out: &Path) -> Result<(), String> {
    crate::toolchain::build_then_publish(out, |dir| {
        let (c, o, exe) = (dir.join("main.c"), dir.join("model.o"), dir.join("a.out"));
        crate::toolchain::write(&c, main_c.as_bytes())?;
        crate::toolchain::write(&o, object)?;
        crate::toolchain::run(
            Command::new("cc")
                .arg("-O2")
                .arg(&c)
                .arg(&o)
                .arg("-o")
                .arg(&exe)
                .arg("-lm"),
            "cc",
        )?;
        Ok(exe)
    })
}

const MAIN_C: &str = r##"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

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
static void *xalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) { fprintf(stderr, "error: out of memory\n"); exit(1); }
    memset(p, 0, n ? n : 64);
    return p;
}
static void fail(const char *name, const char *path, const char *why) {
    fprintf(stderr, "error: input `%s` (%s): %s\n", name, path, why);
    exit(1);
}
static float *read_npy(int i, const char *path) {
    const char *name = in_names[i];
    FILE *f = fopen(path, "rb");
    if (!f) fail(name, path, "cannot open");
    unsigned char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) fail(name, path, "not a .npy file");
    uint32_t hlen = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) fail(name, path, "truncated header");
        hlen = b[0] | (b[1] << 8);
    } else if (magic[6] == 2 || magic[6] == 3) {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) fail(name, path, "truncated header");
        hlen = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
    } else fail(name, path, "unsupported .npy version");
    if (hlen > 1 << 20) fail(name, path, "corrupt header");
    char *h = malloc(hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) fail(name, path, "truncated header");
    h[hlen] = 0;
    char *d = strstr(h, "'descr'");
    if (!d || !strstr(d, "'<f4'")) fail(name, path, "dtype is not float32 ('<f4')");
    char *fo = strstr(h, "'fortran_order'");
    if (!fo || strncmp(strchr(fo, ':') + 1 + strspn(strchr(fo, ':') + 1, " "), "False", 5) != 0)
        fail(name, path, "not C order");
    char *sh = strstr(h, "'shape'");
    if (!sh || !(sh = strchr(sh, '('))) fail(name, path, "corrupt header (no shape)");
    unsigned long long dims[MAXR]; int r = 0;
    sh++;
    while (*sh && *sh != ')') {
        while (*sh == ' ' || *sh == ',') sh++;
        if (*sh == ')') break;
        char *end;
        unsigned long long v = strtoull(sh, &end, 10);
        if (end == sh || r >= MAXR) fail(name, path, "corrupt header (shape)");
        dims[r++] = v; sh = end;
    }
    int ok = r == in_rank[i];
    for (int k = 0; ok && k < r; k++) ok = dims[k] == in_dims[i][k];
    if (!ok) fail(name, path, "shape differs from the model's input");
    uint64_t n = count(in_dims[i], in_rank[i]);
    float *x = xalloc(n * 4);
    if (fread(x, 4, n, f) != n) fail(name, path, "truncated data");
    free(h); fclose(f);
    return x;
}
static int write_npy(const char *path, const float *x, const unsigned long long *d, int r) {
    char shape[256] = "";
    for (int k = 0; k < r; k++) {
        char b[32]; snprintf(b, sizeof b, "%llu,%s", d[k], (r > 1 && k < r - 1) ? " " : "");
        strncat(shape, b, sizeof shape - strlen(shape) - 1);
    }
    if (r > 1) shape[strlen(shape) - 1] = 0;
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    int total = 10 + n + 1; int pad = (64 - total % 64) % 64;
    char tmp[4096]; snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return 1;
    unsigned short hl = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f); fputc(hl >> 8, f);
    fwrite(hdr, 1, n, f);
    for (int k = 0; k < pad; k++) fputc(' ', f);
    fputc('\n', f);
    fwrite(x, 4, count(d, r), f);
    if (fclose(f) != 0) return 1;
    return rename(tmp, path);
}
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
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
/* --profile N: per op, the median over N runs of the time between its tick and the next. */
static void profile(const void *const *ins, void *const *outs, void *slab, long runs) {
    const char *info = MODEL_PROFILE_INFO;
    int n = 0;
    for (const char *c = info; *c; c++) n += *c == '\n';
    double *all = malloc(sizeof(double) * (n ? n : 1) * runs);
    prof_t = malloc(sizeof(double) * (n ? n : 1));
    for (long r = 0; r < runs; r++) {
        MODEL_RUN_PROFILED(ins, outs, slab, prof_tick);
        for (int i = 0; i < n; i++) all[(size_t)i * runs + r] = prof_t[i];
    }
    double *med = malloc(sizeof(double) * (n ? n : 1)), total = 0;
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
}
int main(int argc, char **argv) {
    const char *paths[NI + 1] = {0};
    const char *out = NULL;
    long bench = 0, prof = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--input") && a + 1 < argc) {
            char *arg = argv[++a]; char *eq = strchr(arg, '=');
            if (!eq) { fprintf(stderr, "error: --input wants NAME=FILE.npy\n"); return 2; }
            *eq = 0; const char *nm = arg[0] == '%' ? arg + 1 : arg; int found = 0;
            for (int i = 0; i < NI; i++) if (!strcmp(in_names[i], nm)) { paths[i] = eq + 1; found = 1; }
            if (!found) { fprintf(stderr, "error: the model has no input `%s`\n", nm); return 2; }
        } else if (!strcmp(argv[a], "--output") && a + 1 < argc) out = argv[++a];
        else if (!strcmp(argv[a], "--bench") && a + 1 < argc) {
            char *end; bench = strtol(argv[++a], &end, 10);
            if (*end || bench < 1) { fprintf(stderr, "error: --bench wants a positive count\n"); return 2; }
        } else if (!strcmp(argv[a], "--profile") && a + 1 < argc) {
            char *end; prof = strtol(argv[++a], &end, 10);
            if (*end || prof < 1) { fprintf(stderr, "error: --profile wants a positive count\n"); return 2; }
        } else {
            fprintf(stderr, "usage: %s [--input NAME=FILE.npy ...] [--output DIR|FILE.npy] [--bench N] [--profile N]\n", argv[0]);
            return 2;
        }
    }
    const void *ins[NI + 1]; void *outs[NO + 1];
    for (int i = 0; i < NI; i++) {
        if (paths[i]) { ins[i] = read_npy(i, paths[i]); continue; }
        uint64_t n = count(in_dims[i], in_rank[i]);
        float *x = xalloc(n * 4);
        char key[1024]; snprintf(key, sizeof key, "input:%s", in_names[i]);
        uint64_t st = fnv1a(key);
        for (uint64_t k = 0; k < n; k++) x[k] = (float)(splitmix(&st) >> 40) * (1.0f / 8388608.0f) - 1.0f;
        ins[i] = x;
    }
    for (int j = 0; j < NO; j++) outs[j] = xalloc(count(out_dims[j], out_rank[j]) * 4);
    unsigned long long slab_size = MODEL_SLAB();
    void *slab = xalloc(slab_size);
    printf("slab: %llu bytes\n", slab_size);
    MODEL_RUN(ins, outs, slab);
    if (bench > 0) {
        double *t = malloc(sizeof(double) * bench);
        for (long r = 0; r < bench; r++) { double t0 = now(); MODEL_RUN(ins, outs, slab); t[r] = now() - t0; }
        qsort(t, bench, sizeof(double), cmpd);
        printf("latency over %ld runs: median %.3f ms, min %.3f ms\n", bench, t[bench / 2], t[0]);
    }
    if (prof > 0) profile(ins, outs, slab, prof);
    for (int j = 0; j < NO; j++) {
        char path[4096];
        if (out && NO == 1 && strlen(out) > 4 && !strcmp(out + strlen(out) - 4, ".npy")) snprintf(path, sizeof path, "%s", out);
        else if (out) snprintf(path, sizeof path, "%s/%s.npy", out, out_names[j]);
        else continue;
        if (write_npy(path, outs[j], out_dims[j], out_rank[j])) { fprintf(stderr, "error: cannot write %s\n", path); return 1; }
    }
    if (!out) {
        for (int j = 0; j < NO; j++) {
            const float *y = outs[j]; uint64_t n = count(out_dims[j], out_rank[j]); double s = 0;
            for (uint64_t k = 0; k < n; k++) s += y[k];
            printf("%s: %llu values, sum %.6g\n", out_names[j], (unsigned long long)n, s);
        }
    }
    return 0;
}
"##;
