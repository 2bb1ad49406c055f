/* Run-time planning of a model with run-time dims (`tir_codegen::dynamic`), shared by the
   executable and the static library; the model's tables (NSYM, NREC, NALLOC, rec_first,
   rec_last, rec_alloc, tir_rec_bytes) are defined above this text.

   The paper's Greedy by Size for offsets (Pisarchyk & Lee 2020, Algorithm 3; tir_planner's
   `greedy_by_size`, TFLite's GreedyBySizeAssignment): buffers by size descending (equal sizes
   in record order), each into the smallest gap that fits among the placed buffers whose live
   intervals intersect its own, else after the last of them. Sizes are 64-byte aligned, as
   every offset. Plans are cached per shape (the least recently used of TIR_PLAN_CACHE
   replaced, per thread), so a loop over one shape plans once. */
/* No header is included (the executable's own includes come after this text, with
   _GNU_SOURCE first): the compiler's builtins stand for memcmp, memcpy, memset. */
#define TIR_PLAN_CACHE 4
/* Guard mode (`tirc compile --guard`): every record this many bytes longer, so that the bytes
   after a buffer are its canary for its whole life (`tir_codegen::guard`). */
#ifndef TIR_GUARD
#define TIR_GUARD 0
#endif
/* Record sizes above this are refused (no slab that large can be allocated). */
#define TIR_TOO_BIG (1ULL << 62)
typedef struct {
    int used; unsigned long long stamp;
    long long dims[NSYM + 1];
    unsigned long long offsets[NALLOC + 1], bytes[NREC + 1], size;
} plan_t;
static _Thread_local plan_t tir_plans[TIR_PLAN_CACHE];
static _Thread_local unsigned long long tir_plan_clock;
/* 0, or 1 when a buffer is larger than TIR_TOO_BIG bytes. */
static int greedy_by_size(plan_t *p) {
    unsigned long long raw[NREC + 1], size[NREC + 1], off[NREC + 1];
    int order[NREC + 1], placed[NREC + 1], np = 0;
    tir_rec_bytes(p->dims, raw);
    for (int r = 0; r < NREC; r++) {
        if (raw[r] > TIR_TOO_BIG) return 1;
        size[r] = (raw[r] + TIR_GUARD + 63) / 64 * 64; off[r] = 0; order[r] = r; p->bytes[r] = raw[r];
    }
    /* Stable insertion sort by raw size, descending. */
    for (int i = 1; i < NREC; i++) {
        int x = order[i], j = i;
        while (j > 0 && raw[order[j - 1]] < raw[x]) { order[j] = order[j - 1]; j--; }
        order[j] = x;
    }
    unsigned long long total = 0;
    for (int oi = 0; oi < NREC; oi++) {
        int r = order[oi];
        if (size[r] == 0) continue;
        /* The placed buffers live at the same time, by offset. */
        int live[NREC + 1], nl = 0;
        for (int q = 0; q < np; q++) {
            int o = placed[q];
            if (rec_first[o] <= rec_last[r] && rec_first[r] <= rec_last[o]) {
                int j = nl++;
                while (j > 0 && (off[live[j - 1]] > off[o] || (off[live[j - 1]] == off[o] && size[live[j - 1]] > size[o]))) { live[j] = live[j - 1]; j--; }
                live[j] = o;
            }
        }
        unsigned long long reached = 0, best_gap = 0, best = 0; int found = 0;
        for (int q = 0; q < nl; q++) {
            unsigned long long o = off[live[q]], e = o + size[live[q]];
            if (o >= reached) {
                unsigned long long gap = o - reached;
                if (gap >= size[r] && (!found || gap < best_gap)) { found = 1; best_gap = gap; best = reached; }
            }
            if (e > reached) reached = e;
        }
        /* At most NREC buffers of at most 2^62 bytes each: no sum below wraps. */
        off[r] = found ? best : (reached + 63) / 64 * 64;
        if (off[r] + size[r] > total) total = off[r] + size[r];
        placed[np++] = r;
    }
    for (int a = 0; a < NALLOC; a++) p->offsets[a] = 0;
    for (int r = 0; r < NREC; r++) p->offsets[rec_alloc[r]] = off[r];
    p->size = total;
    return total > TIR_TOO_BIG;
}
/* The plan at dims `d` (from the cache, or made now: `*fresh` says which); null when a buffer
   or the slab would exceed TIR_TOO_BIG bytes. */
static plan_t *plan_for(const long long *d, int *fresh) {
    plan_t *victim = &tir_plans[0];
    *fresh = 0;
    for (int i = 0; i < TIR_PLAN_CACHE; i++) {
        plan_t *p = &tir_plans[i];
        if (p->used && !__builtin_memcmp(p->dims, d, sizeof(long long) * NSYM)) { p->stamp = ++tir_plan_clock; return p; }
        if (!p->used || (victim->used && p->stamp < victim->stamp)) victim = p;
    }
    __builtin_memset(victim->dims, 0, sizeof victim->dims);
    __builtin_memcpy(victim->dims, d, sizeof(long long) * NSYM);
    victim->used = 0;
    if (greedy_by_size(victim)) return 0;
    victim->used = 1; victim->stamp = ++tir_plan_clock; *fresh = 1;
    return victim;
}
