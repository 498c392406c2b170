"""CloudWatch's AWS query protocol, which botocore sent before it moved CloudWatch to JSON and CBOR (boto3 releases
that pier's `boto3>=1.34` still allows): a form-encoded `POST /` with `Action` and `Version=2010-08-01`, its lists
as `Name.member.N` and structures as `Name.Member`, answered in XML. `parse()` reads the form by botocore's input
shape, `answer()` and `error()` write the XML by its output shape."""

from __future__ import annotations

import datetime as dt
from typing import Any
from xml.etree.ElementTree import Element, SubElement, tostring

from pier.autoscaling.errors import ScalingError

VERSION = "2010-08-01"
XMLNS = "http://monitoring.amazonaws.com/doc/2010-08-01/"
MEDIA_TYPE = "text/xml"


def parse(form: dict[str, str], shape: Any) -> dict[str, Any]:
    """The operation's parameters from the form (Action and Version left out)."""
    if shape is None:
        return {}
    return _value(form, shape, "") or {}


def _value(form: dict[str, str], shape: Any, prefix: str) -> Any:
    kind = shape.type_name
    if kind == "structure":
        found = {}
        for name, member in shape.members.items():
            key = member.serialization.get("name", name)
            value = _value(form, member, f"{prefix}.{key}" if prefix else key)
            if value is not None:
                found[name] = value
        return found if found or not prefix else None
    if kind == "list":
        if form.get(prefix) == "":
            return []
        name = shape.member.serialization.get("name", "member")
        items, index = [], 1
        while (item := _value(form, shape.member, f"{prefix}.{name}.{index}")) is not None:
            items.append(item)
            index += 1
        return items or None
    if prefix not in form:
        return None
    return _scalar(form[prefix], kind)


def _scalar(text: str, kind: str) -> Any:
    if kind in ("integer", "long"):
        return int(text)
    if kind in ("double", "float"):
        return float(text)
    if kind == "boolean":
        return text.lower() == "true"
    if kind == "timestamp":
        try:
            return float(text)
        except ValueError:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    return text


def answer(operation: str, reply: dict[str, Any], shape: Any, request_id: str) -> bytes:
    root = Element(f"{operation}Response", xmlns=XMLNS)
    if shape is not None:
        _fill(SubElement(root, f"{operation}Result"), reply, shape)
    SubElement(SubElement(root, "ResponseMetadata"), "RequestId").text = request_id
    return tostring(root, encoding="utf-8", xml_declaration=True)


def error(failure: ScalingError, request_id: str) -> bytes:
    root = Element("ErrorResponse", xmlns=XMLNS)
    details = SubElement(root, "Error")
    SubElement(details, "Type").text = "Sender"
    SubElement(details, "Code").text = failure.query_code or failure.wire.sagemaker_code
    SubElement(details, "Message").text = failure.message
    SubElement(root, "RequestId").text = request_id
    return tostring(root, encoding="utf-8", xml_declaration=True)


def _fill(parent: Element, value: Any, shape: Any) -> None:
    kind = shape.type_name
    if kind == "structure":
        for name, member in shape.members.items():
            if name in value and value[name] is not None:
                _fill(SubElement(parent, member.serialization.get("name", name)), value[name], member)
    elif kind == "list":
        for item in value:
            _fill(SubElement(parent, shape.member.serialization.get("name", "member")), item, shape.member)
    elif kind == "map":
        for key, item in value.items():
            entry = SubElement(parent, "entry")
            SubElement(entry, "key").text = str(key)
            _fill(SubElement(entry, "value"), item, shape.value)
    elif kind == "timestamp":
        moment = value if isinstance(value, dt.datetime) else dt.datetime.fromtimestamp(float(value), dt.UTC)
        parent.text = moment.isoformat().replace("+00:00", "Z")
    elif kind == "boolean":
        parent.text = "true" if value else "false"
    else:
        parent.text = str(value)
