"""Rollout workers over the internet, without Ray (tmrl style, on CurveZMQ): ``python -m lamarckian.remote``.

* :mod:`.keys`: CurveZMQ key pairs (``keygen``) and the server's allow-list of worker keys, re-read while it runs.
* :mod:`.protocol`: the messages (msgpack and raw array frames; nothing is unpickled) and the segment checks.
* :mod:`.server`: the relay: weights from the trainer to the workers, segments from the workers to the trainer,
  bounded queues, per-worker rate limits, counted refusals.
* :mod:`.client`: the authenticated request/reply connection workers and the trainer use.
* :mod:`.worker`: a machine's environments and policy (torch, or an exported ONNX policy without torch).
* :mod:`.fleet`: the trainer's side (``rl.remote.server``): segments in, weights out, evaluation at home.

docs/remote.md has the set-up and the threat model.
"""
