"""``python -m lowering.verify A.onnx B.onnx``: the same as ``onnx-verify``."""

import sys

from lowering.verify.cli import main

sys.exit(main())
