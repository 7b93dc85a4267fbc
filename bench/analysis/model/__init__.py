"""Move-time models with the physics in them, and their held-out validation.

Pure Python + numpy: no Spark, no files (but each family's projection grid, built on the Spark
session it is given). The aggregation (:mod:`bench.analysis.aggregate`) feeds it one
:class:`MovePoint` per measured single-partition move (``reassign`` / ``move_set`` actions);
:mod:`bench.analysis.projection` evaluates the validated models at TB scale on Spark.

Each system's profile names its family (``SystemProfile.move_model``); each family is one module
implementing :class:`~bench.analysis.model.base.MoveFamily` (how a move is fitted, predicted,
projected and described) and registering itself: ``copy`` (copy.py: the whole log between
brokers), ``tiered_copy`` (tiered_copy.py: only the local tail the leader names) and ``handover``
(handover.py: the unuploaded tail to object storage, then an open). Nothing outside those modules
tells families apart by name: it asks :func:`family_of` (a system's) or :func:`family_named`.
Fitting and the held-out checks are fit.py.
"""

from bench.analysis.model.base import (
    AXES, EXTRAPOLATION_BOUNDS, FAMILIES, FLAT_SPREAD, GBIT_BYTES_PER_S, MIN_TRAIN, SIZE_SPAN, FitRefused, LinearFit,
    MoveFamily, MoveModel, MovePoint, axis_value, family_key, family_named, family_of, fit_linear, fmt_count,
    human_seconds, leader_query_at, nominal_ingest,
)
from bench.analysis.model.budget import LinkBudget
from bench.analysis.model.copy import COPY  # registers the family
from bench.analysis.model.fit import fit_model, predict_point, validate, validate_open
from bench.analysis.model.handover import HANDOVER, fit_open, tail_bytes
from bench.analysis.model.tiered_copy import TIERED_COPY, fit_untiered, untiered_tail

__all__ = [
    "AXES", "COPY", "EXTRAPOLATION_BOUNDS", "FAMILIES", "FitRefused", "LinkBudget", "nominal_ingest", "FLAT_SPREAD", "GBIT_BYTES_PER_S", "HANDOVER", "MIN_TRAIN", "SIZE_SPAN", "TIERED_COPY", "fit_untiered", "untiered_tail",
    "LinearFit", "MoveFamily", "MoveModel", "MovePoint", "axis_value", "family_key", "family_named", "family_of",
    "fit_linear", "fit_model", "fit_open", "fmt_count", "human_seconds", "leader_query_at", "predict_point", "tail_bytes", "validate",
    "validate_open",
]
