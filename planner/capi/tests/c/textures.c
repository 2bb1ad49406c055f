/* Plans 2D or 3D textures given on the command line with tir_planner_plan_textures and prints
 * the plan, one value a line, for tests/c_api.rs to check.
 *
 *   textures STRATEGY DIMS W:H[:D]:FIRST:LAST...
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tir_planner.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s STRATEGY DIMS W:H[:D]:FIRST:LAST...\n", argv[0]);
        return 2;
    }
    size_t dims = (size_t)strtoull(argv[2], NULL, 10);
    size_t count = (size_t)(argc - 3);
    tir_planner_texture_record *records = calloc(count + 1, sizeof *records);
    size_t *object_ids = calloc(count + 1, sizeof *object_ids);
    uint64_t *object_sizes = calloc(3 * (count + 1), sizeof *object_sizes);
    if (!records || !object_ids || !object_sizes) {
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        tir_planner_texture_record *r = &records[i];
        int read = dims == 3
                       ? sscanf(argv[3 + i], "%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64
                                             ":%" SCNu64,
                                &r->size[0], &r->size[1], &r->size[2], &r->first_op, &r->last_op)
                       : sscanf(argv[3 + i], "%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64,
                                &r->size[0], &r->size[1], &r->first_op, &r->last_op);
        if (read != (dims == 3 ? 5 : 4)) {
            fprintf(stderr, "bad record %s\n", argv[3 + i]);
            return 2;
        }
    }
    size_t objects = 0;
    uint64_t cost = 0, bound = 0;
    int status = tir_planner_plan_textures(records, count, dims, argv[1], object_ids,
                                           object_sizes, &objects, &cost, &bound);
    if (status != TIR_PLANNER_OK) {
        printf("error %d: %s\n", status, tir_planner_last_error());
    } else {
        printf("cost %" PRIu64 "\n", cost);
        printf("lower_bound %" PRIu64 "\n", bound);
        for (size_t i = 0; i < count; i++) {
            printf("object %zu\n", object_ids[i]);
        }
        for (size_t k = 0; k < objects * dims; k++) {
            printf("extent %" PRIu64 "\n", object_sizes[k]);
        }
    }
    free(records);
    free(object_ids);
    free(object_sizes);
    return 0;
}
