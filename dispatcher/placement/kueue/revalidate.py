"""Re-validation of a ``Fit`` flavor assignment after added usage, without running the flavor assigner again.

Follows the ``Fit`` branch of ``fitsResourceQuota`` in Kueue v0.17.0's ``pkg/scheduler/flavorassigner``
(``flavorassigner.go``), which :class:`~.flavors._Assigner` also follows: an assignment whose every other flavor was
rejected for a reason usage cannot change is reached again, and gives the same result while each of its quota
checks still fits at the same borrowing height. An assignment with TAS pod sets is never re-validated this way.
"""

from __future__ import annotations

from collections.abc import Sequence

from .amounts import FlavorResource, _add
from .assignment import NO_MATCHING_FLAVOR, Assignment, FlavorAssignmentMode
from .cells import _available_exact, _available_fast, _potential_exact, _potential_fast
from .tree import QuotaTree

__all__ = ["FitCheck", "fit_checks", "fits_as_before"]


FitCheck = tuple[FlavorResource, int, int]
"""One ``fitsResourceQuota`` call of a ``Fit`` assignment: (flavor-resource, value checked, borrowing height)."""


def fit_checks(assignment: Assignment) -> tuple[FitCheck, ...] | None:
    """The quota checks that decided a ``Fit`` assignment, for :func:`fits_as_before`; ``None`` when the assignment
    cannot be re-validated that way.

    Re-validation is exact when the only change since is added usage and every flavor tried before (or after) a
    chosen one was rejected for a reason usage cannot change (taints, node labels, a flavor not providing the
    resource: ``NoMatchingFlavor``). Then the flavor loop reaches the same chosen flavors again, and those give the
    same result if each of their ``fitsResourceQuota`` calls still fits at the same borrowing height. The value
    checked for a pod set is its request plus what the pod sets before it were assigned of that flavor-resource,
    as :meth:`_Assigner.assign` passes it.
    """
    if assignment.mode is not FlavorAssignmentMode.FIT or assignment.tas_requests:
        return None  # a TAS placement depends on more than quota cells
    checks: list[FitCheck] = []
    assumed: dict[FlavorResource, int] = {}
    for psa in assignment.pod_sets:
        chosen = {a.flavor for a in psa.flavors.values()}
        for attempt in psa.attempts:
            if attempt.flavor not in chosen and attempt.no_fit_reason != NO_MATCHING_FLAVOR:
                return None
        for res, a in psa.flavors.items():
            fr = (a.flavor, res)
            value = _add(assumed.get(fr, 0), psa.requests.get(res, 0))
            checks.append((fr, value, a.borrow))
        for res, a in psa.flavors.items():
            fr = (a.flavor, res)
            assumed[fr] = _add(assumed.get(fr, 0), psa.requests.get(res, 0))
    return tuple(checks)


def fits_as_before(tree: QuotaTree, cluster_queue: str, checks: Sequence[FitCheck]) -> bool:
    """Whether every check of :func:`fit_checks` still fits, at the same borrowing height (the ``Fit`` branch of
    ``_Assigner._fits_quota``, which this must follow)."""
    node = tree._cqs.get(cluster_queue)
    if node is None:
        return False
    exact = tree._exact
    if node.parent is None and not exact:
        # A ClusterQueue without a cohort: available is its quota minus usage, and it never borrows.
        cells = node.cells
        for fr, value, borrow in checks:
            c = cells.get(fr)
            if c is None:
                return False
            free = c.subtree - c.usage
            if value > c.subtree or value > (free if free > 0 else 0) or borrow != 0:
                return False
        return True
    for fr, value, borrow in checks:
        cell = node.cell(fr)
        if exact:
            available, max_capacity = _available_exact(cell), _potential_exact(cell)
        else:
            available, max_capacity = _available_fast(cell), _potential_fast(cell)
        if value > max_capacity or value > max(available, 0):
            return False
        if tree._height_of_lowest_subtree_that_fits(node, fr, value)[0] != borrow:
            return False
    return True
