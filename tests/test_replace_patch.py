"""dispatcher/patch_util.py: replace_patch, the manager status write that holds whichever version the server has."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dispatcher.patch_util import replace_patch
from kubesim.patch import apply_merge_patch  # RFC 7386 as the simulated API server applies it

RUNNING = {"active": 1, "uncountedTerminatedPods": {}, "startTime": "t0"}
ADMITTED = {"uncountedTerminatedPods": {"succeeded": ["pod-uid"]}, "startTime": "t0", "conditions": [{"type": "S"}]}
DONE = {
    "succeeded": 1,
    "uncountedTerminatedPods": {},
    "startTime": "t0",
    "completionTime": "t1",
    "conditions": [{"type": "SuccessCriteriaMet"}, {"type": "Complete"}],
}


def test_a_finished_status_drops_what_a_lagging_informer_never_showed() -> None:
    # The server holds the last write (ADMITTED, a pod counted but not yet in `succeeded`); the informer still shows
    # the one before (RUNNING). A diff against the informer's copy keeps uncountedTerminatedPods.succeeded, and a real
    # API server refuses a Complete Job with uncounted pods.
    patch = replace_patch([RUNNING, ADMITTED], DONE)
    assert apply_merge_patch(ADMITTED, patch) == DONE
    assert apply_merge_patch(RUNNING, patch) == DONE
    assert patch["uncountedTerminatedPods"] == {"succeeded": None} and patch["active"] is None


def test_with_nothing_known_the_patch_is_the_status_itself() -> None:
    assert replace_patch([None], DONE) == DONE


json_leaf = st.one_of(st.integers(), st.text(max_size=3), st.booleans())
json_obj = st.recursive(
    st.dictionaries(st.sampled_from("abcde"), json_leaf, max_size=4),
    lambda inner: st.dictionaries(st.sampled_from("abcde"), st.one_of(json_leaf, inner), max_size=4),
    max_leaves=12,
)


@given(st.lists(json_obj, min_size=1, max_size=3), json_obj)
def test_any_known_version_patched_becomes_the_desired_one(
    known: list[dict[str, Any]], desired: dict[str, Any]
) -> None:
    # Empty objects are how a merge patch leaves a key that held an object (RFC 7386 cannot write {} over a value
    # that is not an object and then delete all of it): compare with empty objects dropped.
    def norm(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items() if not (isinstance(x, dict) and not norm(x))}
        return v

    patch = replace_patch(known, desired)
    for version in known:
        assert norm(apply_merge_patch(version, patch)) == norm(desired)
