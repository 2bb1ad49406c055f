/* tir_planner.h: the C API of tir's static memory planner (crate tir-planner-c, issue 21).
 *
 * Link with the static library (libtir_planner_c.a, plus -lpthread -ldl -lm) or the shared one
 * (libtir_planner_c.so), both built by `cargo build --release -p tir-planner-c`.
 *
 * Usage records follow Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
 * Inference" (section 3): a tensor of `size` bytes is live over the CLOSED operator interval
 * [first_op, last_op]. Strategy names are the ones `tirc plan --strategy` takes, e.g.
 * "greedy_by_size", "greedy_by_breadth", "best" (offsets) or "greedy_by_size_improved",
 * "min_cost_flow", "best" (shared objects). Sizes are rounded up to `align` (e.g. 64) before
 * planning, so every offset and size returned is a multiple of it.
 *
 * The caller owns every buffer; the library allocates nothing the caller must free. Every plan
 * is validated by the planner's independent checker before it is returned. On failure a
 * function returns a nonzero tir_planner_status, writes nothing to the outputs, and
 * tir_planner_last_error() describes the failure. The functions are thread-safe: the error
 * message is per thread.
 */
#ifndef TIR_PLANNER_H
#define TIR_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tir_planner_record {
    uint64_t size;     /* bytes */
    uint64_t first_op; /* first operator using the tensor */
    uint64_t last_op;  /* last operator using the tensor (inclusive) */
} tir_planner_record;

/* A 2D or 3D texture (TFLite's GPU uint2/uint3 sizes): size[0..dims) = w, h[, d] in elements;
 * with dims == 2, size[2] is ignored. */
typedef struct tir_planner_texture_record {
    uint64_t size[3];
    uint64_t first_op;
    uint64_t last_op; /* inclusive */
} tir_planner_texture_record;

typedef struct tir_planner_summary {
    uint64_t total_size;                 /* slab size (offsets) or sum of object sizes */
    uint64_t offsets_lower_bound;        /* paper 5.1: the largest operator breadth */
    uint64_t shared_objects_lower_bound; /* paper 4.1: the sum of the positional maxima */
} tir_planner_summary;

typedef enum tir_planner_status {
    TIR_PLANNER_OK = 0,
    TIR_PLANNER_NULL_ARGUMENT = 1,     /* a required pointer is NULL */
    TIR_PLANNER_UNKNOWN_STRATEGY = 2,  /* the message lists the valid names */
    TIR_PLANNER_INVALID_RECORD = 3,    /* e.g. first_op after last_op */
    TIR_PLANNER_INVALID_ALIGNMENT = 4, /* align is 0 */
    TIR_PLANNER_OVERFLOW = 5,          /* a size or the slab exceeds 64 bits */
    TIR_PLANNER_TOO_LARGE = 6,         /* too many records or operators for the strategy */
    TIR_PLANNER_INTERNAL = 7           /* a planner bug; please report the message */
} tir_planner_status;

/* Offsets in one slab: offsets[i] is record i's byte offset. `offsets` holds `count`
 * elements. `summary` may be NULL. `records` may be NULL when `count` is 0. */
int tir_planner_plan_offsets(const tir_planner_record *records, size_t count,
                             const char *strategy, uint64_t align, uint64_t *offsets,
                             tir_planner_summary *summary);

/* Shared objects: object_ids[i] is record i's object, object_sizes[k] object k's size.
 * Both arrays hold `count` elements (no strategy uses more objects than records);
 * *object_count receives the number of objects. `object_count` and `summary` may be NULL. */
int tir_planner_plan_shared_objects(const tir_planner_record *records, size_t count,
                                    const char *strategy, uint64_t align, size_t *object_ids,
                                    uint64_t *object_sizes, size_t *object_count,
                                    tir_planner_summary *summary);

/* Multi-dimensional shared objects (textures), dims 2 or 3: object_ids[i] is record i's
 * object, object_sizes[k * dims + j] object k's extent in dimension j (each object is the
 * component-wise maximum of its tensors' sizes; objects never grow to fit a tensor). Strategies:
 * "naive", "equality", "greedy_in_order", "best" (TFLite's for uint2/uint3; the others fail
 * with TIR_PLANNER_UNKNOWN_STRATEGY). object_ids holds `count` elements, object_sizes
 * `count * dims`. *object_count receives the number of objects, *cost the sum of the object
 * volumes, *lower_bound the sum of the positional maxima of the volumes (paper 4.1 on
 * volumes); each of these three may be NULL. No alignment: sizes are in elements. */
int tir_planner_plan_textures(const tir_planner_texture_record *records, size_t count,
                              size_t dims, const char *strategy, size_t *object_ids,
                              uint64_t *object_sizes, size_t *object_count, uint64_t *cost,
                              uint64_t *lower_bound);

/* Both lower bounds alone (summary->total_size is set to 0). */
int tir_planner_lower_bounds(const tir_planner_record *records, size_t count, uint64_t align,
                             tir_planner_summary *summary);

/* The message of the calling thread's last failed call ("" after a success); never NULL,
 * valid until the thread's next call into the library. */
const char *tir_planner_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TIR_PLANNER_H */
