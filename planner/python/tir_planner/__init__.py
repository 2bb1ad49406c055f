"""tir's static memory planner from Python (issue 21).

Usage records in, plans out, as in Pisarchyk & Lee, "Efficient Memory Management for Deep
Neural Net Inference": a record is ``(size, first_op, last_op)``, a tensor of ``size`` bytes
live over the *closed* operator interval ``[first_op, last_op]``. Records may be a list of
triples or a NumPy array of shape ``(n, 3)``; plans come back as NumPy ``uint64`` arrays.
Strategy names are those of ``tirc plan --strategy``. Sizes are rounded up to ``align``
first, so every offset and size is a multiple of it. Every plan has passed the planner's
independent checker before it is returned; bad input raises :class:`PlanError`.

>>> import tir_planner
>>> plan = tir_planner.plan_offsets([(4096, 0, 1), (1024, 1, 2), (4096, 2, 3)])
>>> plan.total_size, plan.offsets.tolist()
(5120, [0, 4096, 0])
"""

from dataclasses import dataclass

import numpy as np

from . import _native
from ._native import PlanError

__all__ = [
    "PlanError",
    "OffsetsPlan",
    "SharedObjectsPlan",
    "LowerBounds",
    "plan_offsets",
    "plan_shared_objects",
    "plan_textures",
    "TexturesPlan",
    "lower_bounds",
    "check_offsets",
    "OFFSET_STRATEGIES",
    "SHARED_OBJECT_STRATEGIES",
]

#: Every name ``plan_offsets`` takes.
OFFSET_STRATEGIES = tuple(_native.offset_strategy_names())
#: Every name ``plan_shared_objects`` takes.
SHARED_OBJECT_STRATEGIES = tuple(_native.shared_object_strategy_names())


@dataclass(frozen=True)
class LowerBounds:
    #: Paper 5.1: no offsets plan is smaller than the largest operator breadth.
    offsets: int
    #: Paper 4.1: no shared-objects plan costs less than the sum of the positional maxima.
    shared_objects: int


@dataclass(frozen=True)
class OffsetsPlan:
    strategy: str
    #: ``offsets[i]`` is record i's byte offset in the slab.
    offsets: np.ndarray
    #: The slab size in bytes.
    total_size: int
    lower_bounds: LowerBounds


@dataclass(frozen=True)
class SharedObjectsPlan:
    strategy: str
    #: ``object_ids[i]`` is record i's object.
    object_ids: np.ndarray
    #: ``object_sizes[k]`` is object k's size in bytes.
    object_sizes: np.ndarray
    #: The sum of the object sizes.
    cost: int
    lower_bounds: LowerBounds


@dataclass(frozen=True)
class TexturesPlan:
    strategy: str
    #: ``object_ids[i]`` is record i's object.
    object_ids: np.ndarray
    #: ``object_sizes[k]`` is object k's extents, shape ``(objects, dims)``.
    object_sizes: np.ndarray
    #: The sum of the object volumes, in elements.
    cost: int
    #: The sum of the positional maxima of the tensors' volumes (paper 4.1 on volumes).
    lower_bound: int


def _records_bytes(records, width=3, what="(size, first_op, last_op) triples"):
    """The records as rows of native-endian uint64, checked before any conversion can wrap."""
    array = np.asarray(records)
    if not isinstance(records, np.ndarray) and array.size and array.dtype.kind not in "iu":
        # A list mixing ints beyond int64 with others becomes float64 in NumPy, which would
        # round: such lists, and lists of non-integers, are checked value by value instead.
        array = np.array(records, dtype=object)
    if array.size == 0:
        return b""
    if array.ndim != 2 or array.shape[1] != width:
        raise PlanError(f"records must be {what}, got shape {array.shape}")
    if array.dtype == object:
        # Python ints beyond 64 bits, or mixed objects: check each one.
        for row, triple in enumerate(array):
            for value in triple:
                if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                    raise PlanError(f"usage record {row}: {value!r} is not an integer")
                if not 0 <= int(value) < 2**64:
                    raise PlanError(f"usage record {row}: {value} is not a u64")
        array = np.array(array.tolist(), dtype=np.uint64)
    elif not np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        raise PlanError(f"records must hold integers, got dtype {array.dtype}")
    elif np.issubdtype(array.dtype, np.signedinteger) and (array < 0).any():
        row = int(np.argwhere(array < 0)[0][0])
        raise PlanError(f"usage record {row}: sizes and operator indices must not be negative")
    return np.ascontiguousarray(array, dtype=np.uint64).tobytes()


def _u64(data):
    return np.frombuffer(data, dtype=np.uint64).copy()


def _align(align):
    if isinstance(align, bool) or not isinstance(align, (int, np.integer)) or align < 0:
        raise PlanError(f"align must be a non-negative integer, got {align!r}")
    return int(align)


def lower_bounds(records, align=64):
    """Both lower bounds of the paper for ``records``."""
    offsets, shared_objects = _native.lower_bounds(_records_bytes(records), _align(align))
    return LowerBounds(offsets, shared_objects)


def plan_offsets(records, strategy="greedy_by_size", align=64):
    """Offsets in one slab (paper section 5) by the named strategy."""
    data = _records_bytes(records)
    offsets, total = _native.plan_offsets(data, strategy, _align(align))
    bounds = LowerBounds(*_native.lower_bounds(data, _align(align)))
    return OffsetsPlan(strategy, _u64(offsets), total, bounds)


def plan_shared_objects(records, strategy="greedy_by_size_improved", align=64):
    """Shared objects (paper section 4) by the named strategy."""
    data = _records_bytes(records)
    ids, sizes, cost = _native.plan_shared_objects(data, strategy, _align(align))
    bounds = LowerBounds(*_native.lower_bounds(data, _align(align)))
    return SharedObjectsPlan(strategy, _u64(ids), _u64(sizes), cost, bounds)


def plan_textures(records, strategy="greedy_in_order"):
    """Shared objects of 2D or 3D textures (TFLite's GPU uint2/uint3 sizes).

    Each record is ``(w, h, first_op, last_op)`` or ``(w, h, d, first_op, last_op)``, extents
    in elements, the lifetime closed. A tensor fits an object only if the object is at least as
    large in every dimension. Strategies: ``naive``, ``equality``, ``greedy_in_order``,
    ``best`` (the ones TFLite defines for these sizes).

    >>> plan = plan_textures([(64, 64, 0, 1), (32, 64, 2, 3), (128, 8, 4, 5)])
    >>> plan.object_ids.tolist(), plan.object_sizes.tolist(), plan.cost
    ([0, 0, 1], [[64, 64], [128, 8]], 5120)
    """
    width = np.asarray(records).shape[-1] if len(records) else 4
    if width not in (4, 5):
        raise PlanError(
            "records must be (w, h, first_op, last_op) or (w, h, d, first_op, last_op) rows, "
            f"got rows of {width}"
        )
    data = _records_bytes(records, width, f"rows of {width} integers")
    ids, sizes, cost, bound = _native.plan_textures(data, width - 2, strategy)
    return TexturesPlan(strategy, _u64(ids), _u64(sizes).reshape(-1, width - 2), cost, bound)


def check_offsets(records, offsets, total_size, align=64):
    """The independent checker's complaints about an offsets plan; empty when it is valid."""
    offsets = np.ascontiguousarray(offsets, dtype=np.uint64).tobytes()
    return _native.check_offsets_plan(
        _records_bytes(records), offsets, int(total_size), _align(align)
    )
