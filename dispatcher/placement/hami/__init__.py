"""HAMi's NVIDIA vGPU rules in pure Python: requests, inventory, Fit, scores, node choice and annotations.

One package serves two callers that must agree with a real HAMi scheduler (``Project-HAMi/HAMi`` at commit
4707fb02, see ``/work/shared/hami-rules.md``; section numbers in the modules refer to that document):

* the simulator's HAMi emulation, which needs the full scheduler path: the admission webhook
  (:func:`.webhook.mutate_pod`), per-container requests (:func:`.requests.pod_requests`), node inventory
  (:func:`.nodecodec.decode_node_devices`), per-device usage rebuilt from bound pods (:func:`.usage.node_usage`),
  device ordering, ``Fit`` with checks F1-F13 in HAMi's order and HAMi's reason strings (:func:`.fit.fit_pod`),
  the node score and node choice (:func:`.score.node_score`, :func:`.score.choose_node`,
  :func:`.fit.schedule_pod`), the annotations HAMi writes (:func:`.podcodec.bind_annotations`) and node health
  (:func:`.health.check_handshake`, :class:`.health.NvidiaHealthTracker`);
* the dispatcher's placement engine, which asks "can all ``count`` pods of this pod set be placed on this
  worker, and how good is the fit?" thousands of times a second (:func:`.inventory.fit_pod_set` over a prebuilt
  :class:`.inventory.GpuInventory`).

It is a re-implementation of the behaviour, not a transliteration. Details that decide results are kept:
Go's ``float32`` arithmetic for device and node scores (ties decide device order), the stable insertion sort Go
uses for up to 12 devices and its pattern-defeating quicksort above that, ``int32`` truncation where HAMi
truncates, and the exact ``Fit`` walk (from the end of the sorted list, first failing check wins).

The modules, by concern (each imports only from those listed before it; the ``hami`` contract in .importlinter
checks it):

* :mod:`.names`: annotation keys, modes, policies, reason strings and errors;
* :mod:`.gosemantics`: Go's numeric helpers and Go's ``sort.Sort``;
* :mod:`.devices`: :class:`~.devices.HamiConfig` and the value classes (devices, requests, MIG types);
* :mod:`.requests`: a container's resources read into a request (section 1);
* :mod:`.quota`: the per-namespace quota (F8) and the webhook's quota pre-check;
* :mod:`.webhook`: the admission webhook and the problems the dispatcher names before submitting (section 1);
* :mod:`.gojson`: Go's ``encoding/json`` as the annotation codecs need it;
* :mod:`.nodecodec` and :mod:`.podcodec`: node and pod annotations (section 7);
* :mod:`.usage`: usage rebuilt from bound pods (section 2);
* :mod:`.selection`: the pod annotations that steer device selection, and the prepared pod;
* :mod:`.score`: device scores and order, node score and choice (sections 4 and 5);
* :mod:`.fit`: ``Fit``, ``scoreNode`` and ``Filter`` (section 3);
* :mod:`.health`: node health (section 6);
* :mod:`.inventory`: the placement engine's pod-set fit over a worker's GPU nodes.

Hot-path conventions: the value classes use ``@dataclass(slots=True)``; :class:`~.devices.DeviceUsage` and
:class:`~.devices.ContainerDevice` are treated as immutable values (functions build new ones instead of
mutating), so a simulated placement copies only the few devices it touches and never deep-copies a node.

Modelled with simplifications (each documented where it lives):

* F8 namespace quota is applied when a :class:`~.quota.NamespaceQuota` is passed; the caller tracks the
  namespace's used amount (HAMi's ``QuotaManager``).
* MIG: profiles are decoded and encoded, F13 selects a free non-overlapping placement and a MIG GPU is revisited
  as HAMi does, but MIG usage is only rebuilt from ``hami.io/vgpu-mig-allocations`` (no runtime identity
  bookkeeping) and the MIG profile allowlist is the device plugin's business.
* HAMi's node choice among equal node scores depends on goroutine completion order; here ties go to the
  smallest node name.
"""
