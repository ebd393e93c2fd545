"""torch.onnx.export with the TorchScript exporter on any PyTorch: Debian's 1.13 has only that one, and the test
models were written against its graphs; from 2.9 on the default is the dynamo exporter (other graphs, other
opsets). scripts/device-check.sh runs the exports with a GPU machine's newer PyTorch."""
import inspect

import torch


def export(*args, **kw):
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw.setdefault("dynamo", False)
    torch.onnx.export(*args, **kw)
