"""tir_planner from Python: lists and NumPy arrays in, NumPy plans out, errors as PlanError.
Every plan is checked twice: by the planner's checker and by a plain overlap test here."""

import numpy as np
import pytest

import tir_planner
from tir_planner import PlanError

# A chain with a skip connection and a wide join.
RECORDS = [
    (32, 0, 1),
    (28, 1, 4),
    (36, 2, 5),
    (16, 3, 5),
    (8, 4, 5),
    (64, 5, 7),
    (10, 6, 8),
    (40, 7, 8),
]


def aligned(size, align):
    return -(-size // align) * align


def assert_valid_offsets(records, plan, align):
    assert tir_planner.check_offsets(records, plan.offsets, plan.total_size, align) == []
    assert plan.offsets.dtype == np.uint64 and plan.offsets.shape == (len(records),)
    for i, (size_i, first_i, last_i) in enumerate(records):
        lo_i, hi_i = int(plan.offsets[i]), int(plan.offsets[i]) + aligned(size_i, align)
        assert lo_i % align == 0 and hi_i <= plan.total_size
        for j in range(i):
            size_j, first_j, last_j = records[j]
            if first_i <= last_j and first_j <= last_i:
                lo_j = int(plan.offsets[j])
                hi_j = lo_j + aligned(size_j, align)
                assert hi_i <= lo_j or hi_j <= lo_i, (i, j)
    assert plan.total_size >= plan.lower_bounds.offsets


def assert_valid_objects(records, plan, align):
    assert plan.object_ids.shape == (len(records),)
    assert plan.cost == int(plan.object_sizes.sum())
    for i, (size_i, first_i, last_i) in enumerate(records):
        assert plan.object_sizes[plan.object_ids[i]] >= aligned(size_i, align)
        for j in range(i):
            _, first_j, last_j = records[j]
            if first_i <= last_j and first_j <= last_i:
                assert plan.object_ids[i] != plan.object_ids[j], (i, j)
    assert plan.cost >= plan.lower_bounds.shared_objects


def test_the_docstring_example():
    plan = tir_planner.plan_offsets([(4096, 0, 1), (1024, 1, 2), (4096, 2, 3)])
    assert plan.total_size == 5120
    assert plan.offsets.tolist() == [0, 4096, 0]
    # Positional maxima: the largest tensor live at any operator, then the second largest.
    assert plan.lower_bounds == tir_planner.LowerBounds(5120, 4096 + 1024)


@pytest.mark.parametrize("strategy", [s for s in tir_planner.OFFSET_STRATEGIES if s != "exact"])
@pytest.mark.parametrize("align", [1, 8, 64])
def test_every_offsets_strategy_gives_a_valid_plan(strategy, align):
    plan = tir_planner.plan_offsets(RECORDS, strategy, align)
    assert plan.strategy == strategy
    assert_valid_offsets(RECORDS, plan, align)


@pytest.mark.parametrize("strategy", tir_planner.SHARED_OBJECT_STRATEGIES)
def test_every_shared_objects_strategy_gives_a_valid_plan(strategy):
    plan = tir_planner.plan_shared_objects(RECORDS, strategy, 8)
    assert_valid_objects(RECORDS, plan, 8)


def test_numpy_records_plan_as_lists_do():
    as_list = tir_planner.plan_offsets(RECORDS, "greedy_by_breadth", 64)
    for dtype in (np.int64, np.uint64, np.int32, np.uint32):
        array = np.array(RECORDS, dtype=dtype)
        plan = tir_planner.plan_offsets(array, "greedy_by_breadth", 64)
        assert plan.offsets.tolist() == as_list.offsets.tolist()
        assert plan.total_size == as_list.total_size
    # Not C-contiguous: a column-major copy and a strided view.
    fortran = np.asfortranarray(np.array(RECORDS, dtype=np.int64))
    assert tir_planner.plan_offsets(fortran, "greedy_by_breadth", 64).offsets.tolist() == (
        as_list.offsets.tolist()
    )
    wide = np.zeros((len(RECORDS), 6), dtype=np.int64)
    wide[:, ::2] = RECORDS
    view = wide[:, ::2]
    assert tir_planner.plan_offsets(view, "greedy_by_breadth", 64).offsets.tolist() == (
        as_list.offsets.tolist()
    )


def test_random_records_with_the_best_strategy():
    rng = np.random.default_rng(21)
    first = rng.integers(0, 200, size=300)
    last = first + rng.integers(0, 20, size=300)
    sizes = rng.integers(1, 1 << 16, size=300)
    records = np.stack([sizes, first, last], axis=1)
    plan = tir_planner.plan_offsets(records, "best", 64)
    assert_valid_offsets([tuple(map(int, r)) for r in records], plan, 64)
    objects = tir_planner.plan_shared_objects(records, "best", 64)
    assert_valid_objects([tuple(map(int, r)) for r in records], objects, 64)


def test_lower_bounds_match_the_plans():
    bounds = tir_planner.lower_bounds(RECORDS, 1)
    assert bounds == tir_planner.plan_offsets(RECORDS, "naive", 1).lower_bounds
    # The largest breadth: at operator 5, records 2, 3, 4 and 5 are live.
    assert bounds.offsets == 36 + 16 + 8 + 64


def test_no_records_is_an_empty_plan():
    plan = tir_planner.plan_offsets([], "greedy_by_size")
    assert plan.total_size == 0 and plan.offsets.tolist() == []


def test_the_checker_rejects_an_overlap():
    records = [(64, 0, 1), (64, 1, 2)]
    assert tir_planner.check_offsets(records, [0, 0], 64, 64) != []


@pytest.mark.parametrize(
    "records, strategy, message",
    [
        ([(8, 3, 1)], "greedy_by_size", "first_op 3 after last_op 1"),
        ([(8, 0, 1)], "no_such", "unknown strategy `no_such`"),
        ([(8, -1, 1)], "greedy_by_size", "must not be negative"),
        (np.array([[8, -1, 1]]), "greedy_by_size", "must not be negative"),
        ([(8, 0)], "greedy_by_size", "triples"),
        ([(8.5, 0, 1)], "greedy_by_size", "8.5 is not an integer"),
        (np.array([[8.5, 0, 1]]), "greedy_by_size", "must hold integers"),
        ([(2**64, 0, 1)], "greedy_by_size", "is not a u64"),
        ([(2**64 - 1, 0, 1)], "greedy_by_size", "overflows"),
    ],
)
def test_bad_input_raises_plan_error(records, strategy, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(")):
        tir_planner.plan_offsets(records, strategy)


def test_plan_error_is_a_value_error():
    assert issubclass(PlanError, ValueError)
    with pytest.raises(ValueError):
        tir_planner.plan_offsets(RECORDS, "naive", align=0)


# TFLite's `UInt2Records` test (memory_management_test.cc): (w, h, first_op, last_op).
TEXTURES_2D = [
    (2, 8, 0, 1),
    (2, 8, 1, 2),
    (1, 12, 2, 4),
    (2, 8, 3, 5),
    (8, 2, 4, 5),
    (2, 8, 5, 7),
    (1, 8, 6, 8),
    (2, 8, 7, 8),
    (4, 1, 8, 9),
]


def assert_valid_textures(records, plan):
    """Each object is the component-wise maximum of its tensors; sharers never meet in time."""
    dims = len(records[0]) - 2
    assert plan.object_sizes.shape == (plan.object_sizes.shape[0], dims)
    for k, size in enumerate(plan.object_sizes):
        tenants = [r for r, o in zip(records, plan.object_ids) if o == k]
        assert tenants
        assert list(size) == [max(t[j] for t in tenants) for j in range(dims)]
        for a in tenants:
            for b in tenants:
                if a is not b:
                    assert a[dims + 1] < b[dims] or b[dims + 1] < a[dims]
    assert plan.cost == sum(int(np.prod(s)) for s in plan.object_sizes)
    assert plan.lower_bound <= plan.cost


def test_textures_plan_as_tflite():
    plan = tir_planner.plan_textures(TEXTURES_2D, "greedy_in_order")
    assert plan.object_ids.tolist() == [0, 1, 2, 0, 3, 1, 2, 0, 3]
    assert plan.object_sizes.tolist() == [[2, 8], [2, 8], [1, 12], [8, 2]]
    assert (plan.cost, plan.lower_bound) == (60, 48)
    assert_valid_textures(TEXTURES_2D, plan)


@pytest.mark.parametrize("strategy", ["naive", "equality", "greedy_in_order", "best"])
def test_every_texture_strategy_gives_a_valid_plan(strategy):
    assert_valid_textures(TEXTURES_2D, tir_planner.plan_textures(TEXTURES_2D, strategy))
    rng = np.random.default_rng(7)
    first = rng.integers(0, 40, size=60)
    cubes = np.column_stack(
        [rng.integers(1, 4, size=(60, 3)), first, first + rng.integers(0, 6, size=60)]
    )
    rows = [tuple(int(v) for v in row) for row in cubes]
    assert_valid_textures(rows, tir_planner.plan_textures(cubes, strategy))


@pytest.mark.parametrize(
    "records, strategy, message",
    [
        (TEXTURES_2D, "greedy_by_size", "not defined for 2-dimensional sizes"),
        ([(1, 1, 1)], "naive", "rows of 3"),
        ([(1, 1, 2, 1)], "naive", "first_op 2 after last_op 1"),
        ([(-1, 1, 0, 1)], "naive", "must not be negative"),
    ],
)
def test_bad_textures_raise_plan_error(records, strategy, message):
    with pytest.raises(PlanError, match=message):
        tir_planner.plan_textures(records, strategy)
