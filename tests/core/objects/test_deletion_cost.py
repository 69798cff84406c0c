"""The pod-deletion-cost codec, checked against Kubernetes' own parser and messages.

Upstream sources (kubernetes/kubernetes):
- pkg/apis/core/helper/helpers.go: GetDeletionCostFromPodAnnotations + validFirstDigit
  ("values that start with plus sign (e.g, "+10") or leading zeros (e.g., "008") are
  not valid"), then strconv.ParseInt(value, 10, 32); an error yields 0.
- pkg/apis/core/validation/validation.go, ValidatePodSpecificAnnotations:
  field.Invalid(fldPath.Key(core.PodDeletionCost), value, "must be a 32bit integer"),
  printed by apimachinery field.Error as `<path>: Invalid value: "<v>": <detail>`.
  For pod templates (Deployment/ReplicaSet) ValidatePodTemplateSpec passes
  fldPath.Child("annotations") of `spec.template`, so the path has no "metadata".
- pkg/apis/core/validation/validation_test.go (TestValidatePodCreateWithSchemaValidation
  success cases "negative pod-deletion-cost" "-100" and "positive pod-deletion-cost" "100").

The TestGetDeletionCostFromPodAnnotations table itself is not in the stored corpus; the
cases below are the ones its doc comment and DESIGN 2.1 name, each checked against an
independent reference of Go's strconv.ParseInt(v, 10, 32) + validFirstDigit.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    INT32_MAX,
    INT32_MIN,
    InvalidDeletionCost,
    annotation_field_path,
    check_deletion_cost,
    cost_writer,
    deletion_cost_of,
    format_deletion_cost,
    invalid_cost_message,
    is_valid_deletion_cost,
    parse_deletion_cost,
)

# --- an independent reference of the Go code -------------------------------------------


def go_valid_first_digit(value: str) -> bool:
    """validFirstDigit, byte-wise as Go indexes a string."""
    raw = value.encode("utf-8", "surrogatepass")
    if not raw:
        return False
    first = raw[0]
    return first == ord("-") or value == "0" or ord("1") <= first <= ord("9")


def go_parse_int32(value: str) -> int | None:
    """strconv.ParseInt(value, 10, 32); None where Go returns an error."""
    raw = value.encode("utf-8", "surrogatepass")
    if not raw:
        return None  # ErrSyntax
    negative = False
    if raw[0] in b"+-":
        negative = raw[0] == ord("-")
        raw = raw[1:]
    if not raw:
        return None  # ErrSyntax: a sign alone
    # ParseUint with an explicit base 10: no "0x"/"0b" prefixes, no underscores.
    magnitude = 0
    for byte in raw:
        if not ord("0") <= byte <= ord("9"):
            return None  # ErrSyntax
        magnitude = magnitude * 10 + (byte - ord("0"))
    cutoff = 1 << 31
    if not negative and magnitude >= cutoff:
        return None  # ErrRange
    if negative and magnitude > cutoff:
        return None  # ErrRange
    return -magnitude if negative else magnitude


def go_get_deletion_cost(value: str) -> int | None:
    """GetDeletionCostFromPodAnnotations for a present annotation; None on error."""
    if not go_valid_first_digit(value):
        return None
    return go_parse_int32(value)


# --- GetDeletionCostFromPodAnnotations -------------------------------------------------

# (case name, annotations, want, want_err)
GET_COST_CASES = [
    ("no annotations", None, 0, False),
    ("annotation absent", {"something": "else"}, 0, False),
    ("valid positive (validation_test: positive pod-deletion-cost)",
     {DELETION_COST_ANNOTATION: "100"}, 100, False),
    ("valid negative (validation_test: negative pod-deletion-cost)",
     {DELETION_COST_ANNOTATION: "-100"}, -100, False),
    ("zero", {DELETION_COST_ANNOTATION: "0"}, 0, False),
    ("plus sign is invalid (helpers.go comment: +10)", {DELETION_COST_ANNOTATION: "+10"}, 0, True),
    ("leading zeros are invalid (helpers.go comment: 008)",
     {DELETION_COST_ANNOTATION: "008"}, 0, True),
    ("not a number", {DELETION_COST_ANNOTATION: "abc"}, 0, True),
    ("larger than int32", {DELETION_COST_ANNOTATION: "2147483648"}, 0, True),
]


@pytest.mark.parametrize(("annotations", "want", "want_err"),
                         [case[1:] for case in GET_COST_CASES],
                         ids=[case[0] for case in GET_COST_CASES])
def test_get_deletion_cost_from_pod_annotations(annotations, want, want_err):
    assert deletion_cost_of(annotations) == want  # invalid counts as 0, like the controller
    if annotations and DELETION_COST_ANNOTATION in annotations:
        value = annotations[DELETION_COST_ANNOTATION]
        assert (parse_deletion_cost(value) is None) == want_err
        assert is_valid_deletion_cost(value) == (not want_err)


# DESIGN 2.1 boundary inputs: (value, parsed value or None when Kubernetes rejects it)
BOUNDARY_CASES = [
    ("-0", 0),
    ("-010", -10),  # '-' passes validFirstDigit; ParseInt accepts leading zeros after it
    ("-2147483648", INT32_MIN),
    ("2147483647", INT32_MAX),
    ("2147483648", None),
    ("-2147483649", None),
    ("", None),
    ("00", None),
    ("007", None),
    ("+10", None),
    (" 1", None),
    ("1 ", None),
    ("1_000", None),
    ("0x10", None),
    ("\uff11", None),  # FULLWIDTH DIGIT ONE
    ("\u0663", None),  # ARABIC-INDIC DIGIT THREE
    ("1\u0663", None),
    ("-", None),
    ("--1", None),
    ("-+1", None),
    ("1e3", None),
    ("10.0", None),
    ("99999999999999999999", None),
    ("-0000000000000000000000000000001", -1),
]


@pytest.mark.parametrize(("value", "expected"), BOUNDARY_CASES,
                         ids=[repr(v) for v, _ in BOUNDARY_CASES])
def test_boundary_inputs(value, expected):
    assert parse_deletion_cost(value) == expected
    assert go_get_deletion_cost(value) == expected  # the reference agrees with the table
    assert deletion_cost_of({DELETION_COST_ANNOTATION: value}) == (expected or 0)


def test_python_int_would_accept_what_kubernetes_rejects():
    # Why an unguarded int() is wrong (DESIGN 2.1): every one of these parses in Python.
    for value in ("+10", " 1", "1_000", "007", "\uff11", "\u0663"):
        int(value)
        assert parse_deletion_cost(value) is None


@pytest.mark.parametrize("digits", [4300, 4301, 5000, 100_000])
def test_huge_digit_strings_are_rejected_not_raised(digits):
    # Python's int() refuses more than 4300 digits with ValueError; Go returns ErrRange.
    assert parse_deletion_cost("9" * digits) is None
    assert parse_deletion_cost("-" + "9" * digits) is None
    assert deletion_cost_of({DELETION_COST_ANNOTATION: "1" * digits}) == 0
    # Leading zeros after '-' do not count towards the range: Go parses this as -7.
    assert parse_deletion_cost("-" + "0" * digits + "7") == -7


# --- the API server's message ----------------------------------------------------------


def test_invalid_value_message_matches_api_server():
    assert invalid_cost_message("abc") == (
        'metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: '
        'Invalid value: "abc": must be a 32bit integer'
    )


def test_invalid_value_message_for_pod_template_path():
    # ValidatePodTemplateSpec(template, "spec.template") -> "spec.template.annotations[...]"
    path = annotation_field_path("spec.template.annotations")
    assert invalid_cost_message("+5", path) == (
        'spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]: '
        'Invalid value: "+5": must be a 32bit integer'
    )


@pytest.mark.parametrize(("value", "quoted"), [
    ('a"b', r'"a\"b"'),
    ("a\\b", r'"a\\b"'),
    ("tab\there", r'"tab\there"'),
    ("nl\n", r'"nl\n"'),
    ("\x00", r'"\x00"'),
    ("\x7f", r'"\x7f"'),
    ("\uff11", '"\uff11"'),  # printable non-ASCII stays as is in Go's %q
    ("\u00a0", r'"\u00a0"'),  # NBSP is not printable for Go
])
def test_message_quotes_value_like_go_percent_q(value, quoted):
    message = invalid_cost_message(value)
    assert message == (f"metadata.annotations[{DELETION_COST_ANNOTATION}]: Invalid value: "
                       f"{quoted}: must be a 32bit integer")


def test_check_deletion_cost_raises_with_field_path():
    check_deletion_cost(None)
    check_deletion_cost({"other": "x"})
    check_deletion_cost({DELETION_COST_ANNOTATION: "-2147483648"})
    with pytest.raises(InvalidDeletionCost) as caught:
        check_deletion_cost({DELETION_COST_ANNOTATION: "007"}, "spec.template.annotations")
    assert caught.value.value == "007"
    assert str(caught.value) == (
        'spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]: '
        'Invalid value: "007": must be a 32bit integer'
    )


def test_format_deletion_cost_only_writes_valid_values():
    for cost in (INT32_MIN, -1, 0, 1, INT32_MAX):
        text = format_deletion_cost(cost)
        assert parse_deletion_cost(text) == cost
        assert go_get_deletion_cost(text) == cost
    for bad in (INT32_MIN - 1, INT32_MAX + 1):
        with pytest.raises(ValueError):
            format_deletion_cost(bad)
    with pytest.raises(TypeError):
        format_deletion_cost(True)


# --- properties ------------------------------------------------------------------------

int32s = st.integers(min_value=INT32_MIN, max_value=INT32_MAX)


@given(int32s)
def test_every_int32_round_trips(number):
    assert parse_deletion_cost(str(number)) == number
    assert parse_deletion_cost(format_deletion_cost(number)) == number


_NUMBERISH = st.one_of(
    st.from_regex(r"\A[-+]?[0-9]{0,12}\Z"),
    st.text(alphabet="0123456789-+ _x.e\uff11\u0663\t", max_size=14),
    st.integers().map(str),
    st.integers(min_value=INT32_MIN - 10, max_value=INT32_MAX + 10).map(str),
)


@given(st.one_of(st.text(), _NUMBERISH))
def test_parse_never_raises_and_agrees_with_go_reference(value):
    parsed = parse_deletion_cost(value)
    assert parsed is None or (isinstance(parsed, int) and INT32_MIN <= parsed <= INT32_MAX)
    assert parsed == go_get_deletion_cost(value)
    assert deletion_cost_of({DELETION_COST_ANNOTATION: value}) == (parsed or 0)


# ----- who wrote the cost (metadata.managedFields) --------------------------------------

def _owner(manager: str, time: str = "2026-11-01T00:00:00Z",
           cost: bool = True) -> dict[str, object]:
    annotations = {"f:controller.kubernetes.io/pod-deletion-cost": {}} if cost else {
        "f:team.example/owner": {}}
    return {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": time,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": annotations}}}


@pytest.mark.parametrize(("entries", "writer"), [
    # Karpenter's client (user agent "karpenter/<version>"), OpenKruise's ("kruise-manager")
    ([_owner("karpenter")], "karpenter"),
    ([_owner("kruise-manager")], "kruise-manager"),
    # the latest owner decides: a person annotated after Karpenter
    ([_owner("karpenter", "2026-11-01T00:00:00Z"),
      _owner("kubectl-annotate", "2026-11-02T00:00:00Z")], ""),
    ([_owner("kubectl-annotate", "2026-11-01T00:00:00Z"),
      _owner("karpenter", "2026-11-02T00:00:00Z")], "karpenter"),
    # poolguard itself, people's tools, and the template's author are nobody else
    ([_owner("poolguard")], ""),
    ([_owner("kubectl-edit")], ""), ([_owner("kubectl-client-side-apply")], ""),
    ([_owner("kube-controller-manager")], ""), ([_owner("helm")], ""),
    ([_owner("Mozilla")], ""), ([_owner("OpenAPI-Generator")], ""),
    # a manager of other annotations only, none at all, malformed entries
    ([_owner("karpenter", cost=False)], ""), ([], ""), (None, ""),
    ([{"manager": "karpenter", "fieldsV1": "f:metadata"}], ""), (["karpenter"], ""),
])
def test_cost_writer_is_the_latest_other_controller_owning_the_annotation(entries, writer):
    metadata = {} if entries is None else {"managedFields": entries}
    assert cost_writer(metadata) == writer
