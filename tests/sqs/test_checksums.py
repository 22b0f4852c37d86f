"""SQS's message digests: values SQS itself returned, and the properties any right encoding has.

The recorded values come from responses of the real SQS kept as test snapshots in LocalStack's
repository (tests/aws/services/sqs/test_sqs.snapshot.json, recorded against AWS), and for
`Number.float` and a mixed set from the README of the npm package aws-md5-of-message-attributes.
The installed botocore checks no SQS digest, so there is no SDK check to run here."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sqs.checksums import AttributeValue, md5_of_attributes, md5_of_body


def _s(value: str, data_type: str = "String") -> AttributeValue:
    return AttributeValue(data_type, value)


KENOBI = {"General": _s("Kenobi"), "Hello": _s("There"), "Help.Me": _s("Me")}


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        (KENOBI, "4c360f3fdafd970e05fae2f149d997f5"),
        ({"General": _s("Kenobi"), "Hello": _s("There")}, "fca026605781cb4126a1e9044df24232"),
        ({"Hello": _s("There")}, "a311262e065454b75da111d535b8dacd"),
        ({"Hello": _s("There"), "Help.Me": _s("Me")}, "83fee93c1bcd8b9a5a923ffacdc636c7"),
        ({"Foo": _s("Bar")}, "ae7155c6026991b6d54b11589678bf9c"),
        (
            {
                "attr1": AttributeValue(
                    "Binary", b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
                )
            },
            "8cbe4db156db8a94db8b801b7addb984",
        ),
    ],
    ids=["three-strings", "two-strings", "one-string", "dotted-name", "foo-bar", "binary"],
)
def test_digests_recorded_from_sqs(attributes: dict[str, AttributeValue], expected: str) -> None:
    assert md5_of_attributes(attributes) == expected


NUMBER_FLOAT = {"customNumberTypeAttrib": _s("4563442423554324324264524243.32543234", "Number.float")}
BINARY = {"binaryAttribute": AttributeValue("Binary", b"Hello binary world!")}


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"attribName1": _s("attribValue 1")}, "19e27d4e946b072f3f58da80d94fd778"),
        (NUMBER_FLOAT, "9fe1b90bbd9965bdf77bac517c7d2495"),
        (BINARY, "31a92b15d92f8db860eda32aceb656c3"),
        ({"attribName1": _s("attribValue 1"), **NUMBER_FLOAT, **BINARY}, "c932db14a896c663f83c260297d594ff"),
    ],
    ids=["string", "number-float", "binary", "mixed"],
)
def test_digests_published_with_custom_types(attributes: dict[str, AttributeValue], expected: str) -> None:
    assert md5_of_attributes(attributes) == expected


def test_body_digests_recorded_from_sqs() -> None:
    assert md5_of_body("msg") == "6e2baaf3b97dbeef01c0043275f9a0e7"
    assert md5_of_body("test") == "098f6bcd4621d373cade4e832627b4f6"
    assert md5_of_body("héllo ✓ 😀") == hashlib.md5("héllo ✓ 😀".encode()).hexdigest()


def test_no_attributes_have_no_digest() -> None:
    assert md5_of_attributes({}) is None


def test_the_value_must_fit_the_type() -> None:
    with pytest.raises(ValueError):
        AttributeValue("Binary", "text")
    with pytest.raises(ValueError):
        AttributeValue("String.x", b"bytes")
    AttributeValue("Binary.png", b"\x89PNG")


def test_names_sort_as_java_strings() -> None:
    """U+FF21 (one UTF-16 unit, FFxx) sorts after U+1F600 (a surrogate pair, D83D...) in Java,
    though its code point is lower."""
    a, b = "\uff21", "\U0001f600"
    both = {a: _s("1"), b: _s("2")}
    expected = hashlib.md5(usedforsecurity=False)
    for name in (b, a):
        for part in (name.encode(), b"String"):
            expected.update(len(part).to_bytes(4, "big") + part)
        expected.update(b"\x01" + (1).to_bytes(4, "big") + both[name].value.encode())  # type: ignore[union-attr]
    assert md5_of_attributes(both) == expected.hexdigest()


# -- properties -------------------------------------------------------------------------------------

NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
STRING_TYPES = st.sampled_from(["String", "Number", "String.custom", "Number.float", "Number.int"])


@st.composite
def attribute_values(draw: st.DrawFn) -> AttributeValue:
    if draw(st.booleans()):
        return AttributeValue(draw(st.sampled_from(["Binary", "Binary.gif"])), draw(st.binary(max_size=16)))
    return AttributeValue(draw(STRING_TYPES), draw(st.text(st.characters(codec="utf-8"), max_size=16)))


ATTRIBUTES = st.dictionaries(NAMES, attribute_values(), min_size=1, max_size=6)


@given(ATTRIBUTES, st.randoms())
def test_the_order_attributes_arrive_in_does_not_matter(attributes: dict[str, AttributeValue], rnd: object) -> None:
    items = list(attributes.items())
    rnd.shuffle(items)  # type: ignore[attr-defined]
    assert md5_of_attributes(dict(items)) == md5_of_attributes(attributes)


@given(ATTRIBUTES, st.data())
def test_any_change_of_a_name_type_or_value_changes_the_digest(
    attributes: dict[str, AttributeValue], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(attributes)))
    old = attributes[name]
    changed = dict(attributes)
    what = data.draw(st.sampled_from(["name", "type", "value"]))
    if what == "name":
        new_name = data.draw(NAMES.filter(lambda n: n not in attributes))
        changed[new_name] = changed.pop(name)
    elif what == "type":
        suffix = data.draw(st.text("abcxyz", min_size=1, max_size=3))
        changed[name] = AttributeValue(old.data_type + "." + suffix, old.value)
    elif isinstance(old.value, bytes):
        changed[name] = AttributeValue(old.data_type, old.value + data.draw(st.binary(min_size=1, max_size=4)))
    else:
        changed[name] = AttributeValue(old.data_type, old.value + data.draw(st.text(min_size=1, max_size=4)))
    assert md5_of_attributes(changed) != md5_of_attributes(attributes)


@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=16))
def test_a_string_and_binary_of_the_same_bytes_differ(value: str) -> None:
    as_string = {"a": AttributeValue("String", value)}
    as_binary = {"a": AttributeValue("Binary", value.encode())}
    assert md5_of_attributes(as_string) != md5_of_attributes(as_binary)
