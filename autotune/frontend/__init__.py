"""Frontends: models from other frameworks in, as an autotune `Graph` (`autotune.graph`).

`autotune.frontend.onnx.load(path | ModelProto | bytes, shapes=...)` imports an ONNX model. Each
frontend imports its framework lazily, so `import autotune` does not need it.
"""
