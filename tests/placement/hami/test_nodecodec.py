"""Tests for :mod:`dispatcher.placement.hami.nodecodec`: sections 2 and 7, the node inventory annotations.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

import pytest

from dispatcher.placement.hami.devices import DeviceInfo, MigPlacement, MigProfile
from dispatcher.placement.hami.names import PAIR_SCORE_ANNOTATION, REGISTER_ANNOTATION, HamiFormatError
from dispatcher.placement.hami.nodecodec import (
    decode_legacy_node_devices,
    decode_node_devices,
    encode_legacy_node_devices,
    encode_node_devices,
    node_devices_from_annotations,
    register_device,
)


def test_s7_encode_node_devices_key_order_and_omitempty() -> None:
    devices = [
        DeviceInfo("GPU-0", 0, 10, 8192, 100, "NVIDIA-A100", 0, True, "hami-core"),
        DeviceInfo("GPU-1", 1, 10, 8192, 100, "NVIDIA-A100", 1, False, ""),
    ]
    assert encode_node_devices(devices) == (
        '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","mode":"hami-core","health":true},'
        '{"id":"GPU-1","index":1,"count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":1}]'
    )
    back = decode_node_devices(encode_node_devices(devices))
    assert back == devices
    assert back[1].health is False  # a missing health key means unhealthy
    assert encode_node_devices([]) == "[]"
    assert encode_node_devices([DeviceInfo("<&>", type="a\nb")]) == '[{"id":"\\u003c\\u0026\\u003e","type":"a\\nb"}]'


def test_s7_mig_profile_wire_format() -> None:
    # devices_test.go TestMigProfileUsesCompactWireFormat
    profile = MigProfile("1g.5gb", 4864, 15, 1, (MigPlacement(6, 1),))
    d = DeviceInfo(
        "GPU-m",
        count=7,
        devmem=40960,
        devcore=100,
        type="NVIDIA-A100",
        health=True,
        mode="mig",
        mig_profiles=(profile,),
    )
    text = encode_node_devices([d])
    assert (
        '"migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[{"start":6,"size":1}]}]'
        in text
    )
    assert decode_node_devices(text) == [d]


def test_s7_decode_node_devices() -> None:
    # devices_test.go TestUnMarshalNodeDevices
    got = decode_node_devices(
        '[{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type","health":true},'
        '{"index":2,"id":"id-2","count":2,"devmem":4096,"devcore":20,"type":"type2","health":false}]\n'
    )
    assert got == [
        DeviceInfo("id-1", 1, 1, 1024, 10, "type", 0, True, ""),
        DeviceInfo("id-2", 2, 2, 4096, 20, "type2", 0, False, ""),
    ]
    # Go matches keys case-insensitively and ignores unknown keys
    assert decode_node_devices('[{"ID":"a","Count":3,"extra":[1]}]') == [DeviceInfo("a", count=3)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "no gpu found on node"),
        ("null", "no gpu found on node"),
        (
            "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
            "invalid character 'G' looking for beginning of value",
        ),
        ("", "unexpected end of JSON input"),
        ('[{"id":"a"}', "unexpected end of JSON input"),
        ('[{"id" "a"}]', "invalid character '\"' after object key"),
        ('[{"count":"10"}]', "json: cannot unmarshal string into Go struct field DeviceInfo.count of type int32"),
        ('[{"count":1.5}]', "json: cannot unmarshal number 1.5 into Go struct field DeviceInfo.count of type int32"),
        (
            '[{"devmem":4294967296}]',
            "json: cannot unmarshal number 4294967296 into Go struct field DeviceInfo.devmem of type int32",
        ),
        ('[{"health":"true"}]', "json: cannot unmarshal string into Go struct field DeviceInfo.health of type bool"),
        ('{"id":"a"}', "json: cannot unmarshal object into Go value of type []*device.DeviceInfo"),
        ("[1]", "json: cannot unmarshal number into Go value of type device.DeviceInfo"),
        ("[NaN]", "invalid character 'N' looking for beginning of value"),
    ],
)
def test_s7_decode_node_devices_errors(text: str, message: str) -> None:
    with pytest.raises(HamiFormatError) as exc:
        decode_node_devices(text)
    assert str(exc.value) == message


def test_s7_node_devices_from_annotations() -> None:
    with pytest.raises(HamiFormatError) as exc:
        node_devices_from_annotations({})
    assert str(exc.value) == "annos not found hami.io/node-nvidia-register"
    annos = {
        REGISTER_ANNOTATION: (
            '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-T4","health":true}]'
        ),
        PAIR_SCORE_ANNOTATION: '[{"uuid":"GPU-0","score":{"GPU-1":100}}]',
    }
    devices, pairs = node_devices_from_annotations(annos)
    assert devices == [DeviceInfo("GPU-0", 0, 10, 8192, 100, "NVIDIA-T4", 0, True, "")]
    assert pairs == {"GPU-0": {"GPU-1": 100}}
    with pytest.raises(HamiFormatError):
        node_devices_from_annotations({**annos, PAIR_SCORE_ANNOTATION: "{bad"})


V100 = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"

# devices_test.go Test_DecodeNodeDevices
LEGACY_CASES: list[tuple[str, list[DeviceInfo] | str]] = [
    ("", "node annotation missing device separator"),
    (":", []),
    ("::", []),
    (",", "node annotation missing device separator"),
    (",:", "unexpected field count 2 in node annotation"),
    ("a", "node annotation missing device separator"),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true:",
        [DeviceInfo(V100, 0, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")],
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:",
        [DeviceInfo(V100, 1, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")],
    ),
    ("garbage:", 'malformed node annotation segment: "garbage"'),
    (
        f"{V100},notanint,7680,100,NVIDIA-Tesla P4,0,true:",
        'invalid count field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,notanint,100,NVIDIA-Tesla P4,0,true:",
        'invalid memory field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,notanint,NVIDIA-Tesla P4,0,true:",
        'invalid core field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,notanint,true:",
        'invalid numa field: strconv.Atoi: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,notabool:",
        'invalid health field: strconv.ParseBool: parsing "notabool": invalid syntax',
    ),
    (f"{V100},10,7680,100,NVIDIA-Tesla P4:", "unexpected field count 5 in node annotation"),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,notanint,hami-core:",
        'invalid index field: strconv.Atoi: parsing "notanint": invalid syntax',
    ),
    (f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,-1,hami-core:", "index field must not be negative: -1"),
]


@pytest.mark.parametrize(("text", "want"), LEGACY_CASES)
def test_s7_legacy_colon_form(text: str, want: list[DeviceInfo] | str) -> None:
    if isinstance(want, str):
        with pytest.raises(HamiFormatError) as exc:
            decode_legacy_node_devices(text)
        assert str(exc.value) == want
    else:
        assert decode_legacy_node_devices(text) == want


def test_s7_legacy_encode() -> None:
    # devices_test.go Test_EncodeNodeDevices
    d = DeviceInfo(V100, 1, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")
    text = encode_legacy_node_devices([d])
    assert text == f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:"
    assert decode_legacy_node_devices(text) == [d]


def test_s2_register_device() -> None:
    d = register_device("GPU-0", 0, 40960, "Tesla V100", memory_scaling=1.5, core_scaling=0.29, healthy="healthy")
    assert (d.devmem, d.devcore, d.type, d.health, d.count) == (61440, 28, "NVIDIA-Tesla V100", True, 10)
    assert register_device("GPU-1", 1, 40960, "NVIDIA A100", healthy="Unhealthy").type == "NVIDIA A100"
    assert not register_device("GPU-1", 1, 40960, "NVIDIA A100", healthy="Unhealthy").health
