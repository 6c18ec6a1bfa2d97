"""Tests for :mod:`dispatcher.placement.hami.podcodec`: section 7, the pod device and bind annotations.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hamibuild import cd

from dispatcher.placement.hami.names import HamiFormatError
from dispatcher.placement.hami.podcodec import (
    bind_annotations,
    decode_pod_devices,
    encode_pod_devices,
    pop_next_container_devices,
)


def test_s7_pod_devices_coding() -> None:
    # devices_test.go TestPodDevicesCoding / Test_DecodePodDevices: the trailing ";" decodes to an extra entry
    assert encode_pod_devices([]) == ""
    assert decode_pod_devices("") == [[]]
    one = [[cd("UUID1", 1000, 30, "Type1")]]
    assert encode_pod_devices(one) == "UUID1,Type1,1000,30:;"
    assert decode_pod_devices("UUID1,Type1,1000,30:;") == [*one, []]
    two = [[cd("UUID1", 1000, 30), cd("UUID2", 1000, 30)]]
    assert encode_pod_devices(two) == "UUID1,NVIDIA,1000,30:UUID2,NVIDIA,1000,30:;"
    text = "GPU-8dcd,NVIDIA,500,3:;GPU-ebe7,NVIDIA,500,3:;"
    assert decode_pod_devices(text) == [[cd("GPU-8dcd", 500, 3)], [cd("GPU-ebe7", 500, 3)], []]
    assert decode_pod_devices(";GPU-a,NVIDIA,1,2:;") == [[], [cd("GPU-a", 1, 2)], []]
    # example from hami-rules.md section 7
    assert (
        encode_pod_devices([[cd("GPU-a", 3000, 0)], [cd("GPU-a", 5000, 0)]])
        == "GPU-a,NVIDIA,3000,0:;GPU-a,NVIDIA,5000,0:;"
    )


def test_s7_pod_devices_errors() -> None:
    # devices_test.go TestDecodePodDevices_BadAnnotation
    with pytest.raises(HamiFormatError, match="missing fields, do not use nodeName in task spec"):
        decode_pod_devices("uuid,type,100:;")
    with pytest.raises(HamiFormatError) as exc:
        decode_pod_devices("uuid,NVIDIA,x,1:;")
    assert str(exc.value) == 'invalid memory field: strconv.ParseInt: parsing "x": invalid syntax'
    assert decode_pod_devices("garbage:;") == [[], []]  # entries without a comma are skipped


def test_s7_device_plugin_pop_and_bind_annotations() -> None:
    containers = [[cd("GPU-a", 3000, 0)], [], [cd("GPU-b", 5000, 10), cd("GPU-c", 5000, 10)]]
    text = encode_pod_devices(containers)
    index, got, after = pop_next_container_devices(text)
    assert (index, got) == (0, containers[0])
    assert after == ";;GPU-b,NVIDIA,5000,10:GPU-c,NVIDIA,5000,10:;;"
    index, got, after = pop_next_container_devices(after)
    assert (index, got, after) == (2, containers[2], ";;;;;")
    assert pop_next_container_devices(after) == (None, [], after)

    now = datetime.fromtimestamp(1_700_000_000)
    annos = bind_annotations("node-1", containers, now, phase="allocating")
    assert annos == {
        "hami.io/vgpu-node": "node-1",
        "hami.io/vgpu-time": "1700000000",
        "hami.io/vgpu-devices-to-allocate": text,
        "hami.io/vgpu-devices-allocated": text,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    done = bind_annotations("node-1", containers, 1_700_000_000, bind_time=1_700_000_001)
    assert done["hami.io/bind-phase"] == "success"
    assert done["hami.io/vgpu-devices-to-allocate"] == ";;;;;"
    assert done["hami.io/vgpu-devices-allocated"] == text
    assert done["hami.io/bind-time"] == "1700000001"
