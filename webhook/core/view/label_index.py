"""One namespace's pods by label: the owner index of a scale check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..objects.podfacts import PodFacts


def plain_selector(selector: Mapping[str, Any] | None) -> bool:
    """matchLabels of strings and nothing else, or a selector that selects nothing."""
    if _selects_nothing(selector):
        return True
    assert selector is not None
    labels = selector.get("matchLabels")
    return (not selector.get("matchExpressions") and isinstance(labels, Mapping)
            and all(isinstance(value, str) for value in labels.values()))


class LabelIndex:
    """One namespace's pods by label (key, value), each list in namespace order.

    The index by owner a scale check needs: a ReplicaSet's selector carries its
    `pod-template-hash`, so that label's entry holds the ReplicaSet's pods (and only
    pods that carry it), and a Deployment's are the union over its ReplicaSets. Pods
    are numbered as they join the namespace; the number orders a union as the
    namespace lists them, so results do not depend on which index answered.
    """

    def __init__(self) -> None:
        self.postings: dict[tuple[str, Any], dict[int, PodFacts]] = {}
        self.numbers: dict[str, int] = {}  # pod name -> its number (live caches)
        self._next = 0
        # Answers by selectors, until the index changes: a state file's never does.
        self._answers: dict[Any, list[PodFacts] | None] = {}

    def add(self, facts: PodFacts, number: int | None = None) -> int:
        """Index `facts` under each of its labels; returns the pod's number."""
        if number is None:
            number = self._next
        self._next = max(self._next, number + 1)
        self._answers.clear()
        labels = facts.labels
        if isinstance(labels, Mapping):
            postings = self.postings
            for pair in labels.items():
                try:
                    entry = postings.get(pair)
                except TypeError:  # an unhashable value: no selector can ask for it
                    continue
                if entry is None:
                    entry = postings[pair] = {}
                entry[number] = facts
        return number

    def remove(self, facts: PodFacts, number: int) -> None:
        """Drop `facts` (indexed under `number`) from the entries of its labels."""
        self._answers.clear()
        labels = facts.labels
        if isinstance(labels, Mapping):
            for pair in labels.items():
                try:
                    entry = self.postings.get(pair)
                except TypeError:
                    continue
                if entry is not None:
                    entry.pop(number, None)
                    if not entry:
                        del self.postings[pair]

    def put(self, name: str, facts: PodFacts, before: PodFacts | None) -> None:
        """A live cache's add or update of pod `name` (`before`: what it replaces)."""
        number = self.numbers.get(name)
        if number is not None and before is not None:
            self.remove(before, number)
        self.numbers[name] = self.add(facts, number)

    def drop(self, name: str, before: PodFacts) -> None:
        """A live cache's delete of pod `name`."""
        number = self.numbers.pop(name, None)
        if number is not None:
            self.remove(before, number)

    def selected(self, selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        """Pods that may match one of `selectors` (see candidate_pod_facts), or None
        when a selector has no matchLabels to look up (the caller scans instead).

        A selector of matchLabels only is answered exactly (the pods under every one of
        its labels); one with expressions too by the pods under its rarest label. The
        list returned is shared: read it, do not change it.
        """
        try:
            question: Any = tuple(_question(selector) for selector in selectors)
        except TypeError:  # an unhashable value: leave it to the scan
            return None
        answer = self._answers.get(question, self)
        if answer is self:
            answer = self._answers[question] = self._select(selectors)
        return answer  # type: ignore[return-value]

    def _select(self, selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        found: dict[int, PodFacts] = {}
        for selector in selectors:
            labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
            if not labels or not isinstance(labels, Mapping):
                if not _selects_nothing(selector):
                    return None
                continue
            entries = sorted((self.postings.get(pair) or {} for pair in labels.items()), key=len)
            rarest = entries[0]
            if len(entries) == 1 or selector.get("matchExpressions"):  # type: ignore[union-attr]
                found.update(rarest)
                continue
            numbers = rarest.keys() & entries[1].keys()
            for entry in entries[2:]:
                numbers &= entry.keys()
            ordered = sorted(numbers)
            found.update(zip(ordered, map(rarest.__getitem__, ordered), strict=True))
        return list(map(found.__getitem__, sorted(found)))


def _question(selector: Any) -> Any:
    """A selector as a hashable key for the answers kept (TypeError when it cannot be)."""
    if not isinstance(selector, Mapping):
        return ("not a mapping", repr(selector))
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    return (tuple(labels.items()) if isinstance(labels, Mapping) else repr(labels),
            repr(expressions))


def _selects_nothing(selector: Any) -> bool:
    """A workload selector without matchLabels or matchExpressions matches no pod."""
    return not selector or (isinstance(selector, Mapping) and not selector.get("matchLabels")
                            and not selector.get("matchExpressions"))
