/* Plans records given on the command line with the C API and prints the plan, one value a
 * line, for tests/c_api.rs to check against the planner and its checker.
 *
 *   plan OFFSETS_STRATEGY OBJECTS_STRATEGY ALIGN SIZE:FIRST:LAST...
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir_planner.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s OFFSETS_STRATEGY OBJECTS_STRATEGY ALIGN SIZE:FIRST:LAST...\n", argv[0]);
        return 2;
    }
    size_t count = (size_t)(argc - 4);
    uint64_t align = strtoull(argv[3], NULL, 10);
    tir_planner_record *records = calloc(count + 1, sizeof *records);
    uint64_t *offsets = calloc(count + 1, sizeof *offsets);
    size_t *object_ids = calloc(count + 1, sizeof *object_ids);
    uint64_t *object_sizes = calloc(count + 1, sizeof *object_sizes);
    if (!records || !offsets || !object_ids || !object_sizes) {
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        if (sscanf(argv[4 + i], "%" SCNu64 ":%" SCNu64 ":%" SCNu64, &records[i].size,
                   &records[i].first_op, &records[i].last_op) != 3) {
            fprintf(stderr, "bad record %s\n", argv[4 + i]);
            return 2;
        }
    }

    tir_planner_summary summary;
    int status = tir_planner_plan_offsets(records, count, argv[1], align, offsets, &summary);
    if (status != TIR_PLANNER_OK) {
        printf("offsets error %d: %s\n", status, tir_planner_last_error());
    } else {
        printf("slab %" PRIu64 "\n", summary.total_size);
        printf("offsets_lower_bound %" PRIu64 "\n", summary.offsets_lower_bound);
        printf("shared_objects_lower_bound %" PRIu64 "\n", summary.shared_objects_lower_bound);
        for (size_t i = 0; i < count; i++) {
            printf("offset %" PRIu64 "\n", offsets[i]);
        }
    }

    size_t objects = 0;
    status = tir_planner_plan_shared_objects(records, count, argv[2], align, object_ids,
                                             object_sizes, &objects, &summary);
    if (status != TIR_PLANNER_OK) {
        printf("objects error %d: %s\n", status, tir_planner_last_error());
    } else {
        printf("cost %" PRIu64 "\n", summary.total_size);
        for (size_t i = 0; i < count; i++) {
            printf("object %zu\n", object_ids[i]);
        }
        for (size_t k = 0; k < objects; k++) {
            printf("object_size %" PRIu64 "\n", object_sizes[k]);
        }
    }
    free(records);
    free(offsets);
    free(object_ids);
    free(object_sizes);
    return 0;
}
